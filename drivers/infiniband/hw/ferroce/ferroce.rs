// SPDX-License-Identifier: GPL-2.0

//! ferroce: driver for the ferroce RoCEv2 RDMA network function.
//!
//! The device is the emulated NIC of `tools/ferroce-nic`, attached to a VM
//! with QEMU's `vfio-user-pci`. Its hardware interface is described in
//! `Documentation/infiniband/ferroce-hw.rst`.

use kernel::{
    device::Core,
    driver,
    pci,
    prelude::*, //
};

#[expect(
    dead_code,
    unreachable_pub,
    reason = "hw.rs is the whole interface, shared with userspace; the driver grows into it"
)]
mod hw;

/// The vendor ID of the ferroce function, [`hw::PCI_VENDOR_ID`].
const FERROCE_VENDOR: pci::Vendor = pci::Vendor::QEMU_EMULATED;
const _: () = assert!(FERROCE_VENDOR.as_raw() == hw::PCI_VENDOR_ID);

struct FerroceDriver;

/// Per-device state, alive while the driver is bound to a function.
struct FerroceDevice<'bound> {
    pdev: &'bound pci::Device,
}

kernel::pci_device_table!(
    PCI_TABLE,
    <FerroceDriver as pci::Driver>::IdInfo,
    [(pci::DeviceId::from_id(FERROCE_VENDOR, hw::PCI_DEVICE_ID as u32), ())]
);

impl pci::Driver for FerroceDriver {
    type IdInfo = ();
    type Data<'bound> = FerroceDevice<'bound>;

    const ID_TABLE: pci::IdTable<Self::IdInfo> = &PCI_TABLE;

    fn probe<'bound>(
        pdev: &'bound pci::Device<Core<'_>>,
        _info: Option<&'bound Self::IdInfo>,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
        dev_info!(
            pdev,
            "ferroce function {:04x}:{:04x} found\n",
            pdev.vendor_id().as_raw(),
            pdev.device_id()
        );
        Ok(FerroceDevice { pdev })
    }
}

impl Drop for FerroceDevice<'_> {
    fn drop(&mut self) {
        dev_info!(self.pdev, "ferroce function removed\n");
    }
}

/// The module: registers the PCI driver for as long as it is loaded.
#[pin_data(PinnedDrop)]
struct FerroceModule {
    #[pin]
    _driver: driver::Registration<pci::Adapter<FerroceDriver>>,
}

impl kernel::InPlaceModule for FerroceModule {
    fn init(module: &'static ThisModule) -> impl PinInit<Self, Error> {
        pr_info!("RoCEv2 RDMA driver loaded\n");
        try_pin_init!(Self {
            _driver <- driver::Registration::new(c"ferroce", module),
        })
    }
}

#[pinned_drop]
impl PinnedDrop for FerroceModule {
    fn drop(self: Pin<&mut Self>) {
        pr_info!("RoCEv2 RDMA driver unloaded\n");
    }
}

module! {
    type: FerroceModule,
    name: "ferroce",
    authors: ["The ferroce developers"],
    description: "RoCEv2 RDMA driver for the ferroce emulated NIC",
    license: "GPL v2",
}
