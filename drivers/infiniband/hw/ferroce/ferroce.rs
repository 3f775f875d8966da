// SPDX-License-Identifier: GPL-2.0

//! ferroce: driver for the ferroce RoCEv2 RDMA network function.
//!
//! The device is the emulated NIC of `tools/ferroce-nic`, attached to a VM
//! with QEMU's `vfio-user-pci`. Its hardware interface is described in
//! `Documentation/infiniband/ferroce-hw.rst`.
//!
//! One file per block:
//!
//! - [`hw`]: the hardware interface shared with the NIC model and the provider;
//! - [`regs`]: BAR0 registers; [`device`]: probe, capabilities, shutdown;
//! - [`cmdq`]: the command queue; [`commands`]: command wrappers (port, MAC);
//! - [`eq`]: event queues and their interrupts; [`ib_events`]: device events for ib_core;
//! - [`state`]: the device's port and health, with one owner;
//! - [`verbs`]: the RDMA device and its verbs; [`netdev`]: the companion netdev;
//! - the verbs objects: [`ah`], [`cq`], [`mr`] (and PDs), [`qp`], [`srq`], [`ucontext`];
//! - [`queue`]: rings, doorbell records and user queue memory they share;
//! - [`checks`]: what the driver does with device values it does not believe;
//! - [`ids`]: PD tags and MR key variants, which never repeat while they can reach old state.

#![forbid(unsafe_code)]

use kernel::{
    device::Core,
    driver,
    pci,
    prelude::*, //
};

mod ah;
mod checks;
mod cmdq;
mod commands;
mod cq;
mod device;
mod eq;
#[expect(
    unreachable_pub,
    reason = "the interface is `pub` for tools/ferroce-hw, which exports it; here it is private"
)]
mod hw;
mod ib_events;
mod ids;
mod mr;
mod netdev;
mod odp;
mod qp;
mod queue;
mod regs;
mod srq;
mod state;
mod ucontext;
mod verbs;

use device::FerroceDevice;

/// The vendor ID of the ferroce function, [`hw::PCI_VENDOR_ID`].
const FERROCE_VENDOR: pci::Vendor = pci::Vendor::QEMU_EMULATED;
const _: () = assert!(FERROCE_VENDOR.as_raw() == hw::PCI_VENDOR_ID);

struct FerroceDriver;

/// Which function of a NIC the driver is bound to. A virtual function has the same interface
/// within limits the host set, which it reports in its capability registers like any
/// function's: the driver treats both alike.
#[derive(Clone, Copy)]
enum Function {
    /// [`hw::PCI_DEVICE_ID`].
    Physical,
    /// [`hw::PCI_VF_DEVICE_ID`].
    Virtual,
}

impl Function {
    fn name(self) -> &'static str {
        match self {
            Self::Physical => "physical",
            Self::Virtual => "virtual",
        }
    }
}

kernel::pci_device_table!(
    PCI_TABLE,
    <FerroceDriver as pci::Driver>::IdInfo,
    [
        (
            pci::DeviceId::from_id(FERROCE_VENDOR, hw::PCI_DEVICE_ID as u32),
            Function::Physical
        ),
        (
            pci::DeviceId::from_id(FERROCE_VENDOR, hw::PCI_VF_DEVICE_ID as u32),
            Function::Virtual
        )
    ]
);

impl pci::Driver for FerroceDriver {
    type IdInfo = Function;
    type Data<'bound> = FerroceDevice<'bound>;

    const ID_TABLE: pci::IdTable<Self::IdInfo> = &PCI_TABLE;

    fn probe<'bound>(
        pdev: &'bound pci::Device<Core<'_>>,
        info: Option<&'bound Self::IdInfo>,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
        dev_info!(
            pdev,
            "ferroce {} function {:04x}:{:04x} rev {:#04x} found\n",
            info.map_or("unknown", |f| f.name()),
            pdev.vendor_id().as_raw(),
            pdev.device_id(),
            pdev.revision_id()
        );
        FerroceDevice::probe(pdev)
    }

    fn unbind<'bound>(_pdev: &'bound pci::Device<Core<'_>>, this: Pin<&Self::Data<'bound>>) {
        this.shutdown();
    }
}

/// Prints the unload message when the module goes, after the driver is unregistered.
///
/// A plain `Drop` field: `#[pinned_drop]` is not allowed under `forbid(unsafe_code)`.
struct UnloadMessage;

impl Drop for UnloadMessage {
    fn drop(&mut self) {
        pr_info!("RoCEv2 RDMA driver unloaded\n");
    }
}

/// The module: registers the PCI driver for as long as it is loaded.
#[pin_data]
struct FerroceModule {
    #[pin]
    _driver: driver::Registration<pci::Adapter<FerroceDriver>>,
    /// Dropped after `_driver`, so the message comes last.
    _unload: UnloadMessage,
}

impl kernel::InPlaceModule for FerroceModule {
    fn init(module: &'static ThisModule) -> impl PinInit<Self, Error> {
        pr_info!("RoCEv2 RDMA driver loaded\n");
        try_pin_init!(Self {
            _driver <- driver::Registration::new(c"ferroce", module),
            _unload: UnloadMessage,
        })
    }
}

module! {
    type: FerroceModule,
    name: "ferroce",
    authors: ["The ferroce developers"],
    description: "RoCEv2 RDMA driver for the ferroce emulated NIC",
    license: "GPL v2",
}
