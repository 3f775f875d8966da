// SPDX-License-Identifier: GPL-2.0

//! RDMA devices (`struct ib_device`) and their registration with ib_core.
//!
//! [`Device`] here; its parts: [`attr`] (what the driver reports), [`ops`] (the
//! [`Operations`] a driver implements), `callbacks` (the `ib_device_ops` trampolines), [`handle`]
//! ([`DeviceHandle`]) and [`registration`] ([`Registration`], [`Config`]).

use crate::{
    bindings,
    device::{
        self,
        Bound, //
    },
    error::{
        from_result,
        to_result,
        VTABLE_DEFAULT_ERROR, //
    },
    net::device::NetDevice,
    prelude::*,
    rdma::{
        object::{
            Numbered,
            Table, //
        },
        AccessFlags,
        AddressVector,
        Ah,
        Completions,
        Cq,
        CqInit,
        GidAttr, //
        MmapEntry,
        MmapRequest,
        Mr,
        MrType,
        Mw,
        MwType,
        NewMr,
        NewMw,
        Pd,
        PostError,
        Qp,
        QpAttr,
        QpAttrOut,
        QpInit,
        RecvWr,
        SendWr,
        SgPages,
        Srq,
        SrqAttr,
        SrqKind,
        StatDesc,
        Ucontext,
        UcontextInit,
        Udata,
        Xrcd,
    },
    sync::{
        new_mutex,
        Arc,
        Mutex,
        SpinLockIrq, //
    },
    types::Opaque,
    ThisModule, //
};
use core::{
    marker::PhantomData,
    ptr::{
        self,
        NonNull, //
    },
};

pub mod attr;
mod callbacks;
pub mod handle;
pub mod ops;
pub mod registration;

use self::callbacks::Callbacks;
pub use self::{
    attr::*,
    handle::{
        DeviceHandle,
        DeviceRef, //
    },
    ops::{
        DriverId,
        Operations, //
    },
    registration::{
        Config,
        Registration, //
    },
};

/// The `struct device` of `ib` (`ib->dev`, in an anonymous union of the C struct).
///
/// # Safety
///
/// `ib` points to an `ib_device` allocation (no reference is made; the result is valid as long
/// as the allocation).
pub(crate) unsafe fn ib_dev_device(ib: *mut bindings::ib_device) -> *mut bindings::device {
    // SAFETY: The caller guarantees `ib` points to an `ib_device`; only a place is projected.
    unsafe { &raw mut (*ib).__bindgen_anon_1.dev }
}

/// Objects the device finds by number: completions and events name them.
#[pin_data]
struct Objects<T: Operations> {
    #[pin]
    cqs: Table<Cq<T>>,
    #[pin]
    qps: Table<Qp<T>>,
    #[pin]
    srqs: Table<Srq<T>>,
}

/// An RDMA device: ib_core's `struct ib_device` followed by the driver's data.
///
/// # Invariants
///
/// `ib` was initialised by `_ib_alloc_device()` with the size of `Self`, and `objects` and
/// `data` are initialised; the allocation stays alive as long as a `&Device<T>` exists.
#[repr(C)]
pub struct Device<T: Operations> {
    ib: Opaque<bindings::ib_device>,
    objects: Objects<T>,
    data: T,
}

impl<T: Operations> core::ops::Deref for Device<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.data
    }
}

impl<T: Operations> Device<T> {
    /// The raw `struct ib_device`.
    pub fn as_raw(&self) -> *mut bindings::ib_device {
        self.ib.get()
    }

    /// Returns the device from a pointer to its `struct ib_device`.
    ///
    /// # Safety
    ///
    /// `ib` must be the `ib` field of a live `Device<T>` (a device registered through
    /// [`Registration`] with this `T`).
    pub(crate) unsafe fn from_raw<'a>(ib: *mut bindings::ib_device) -> &'a Self {
        // SAFETY: `ib` is the first field of the `repr(C)` struct, so the pointers are equal;
        // the caller guarantees it is live.
        unsafe { &*ib.cast::<Self>() }
    }

    /// The parent device (the PCI function), bound while this device is registered; DMA
    /// memory for queues is allocated with it.
    pub fn parent(&self) -> &device::Device<Bound> {
        // SAFETY: The parent was set at registration and outlives the registration; it is bound
        // while the device is registered, which `Registration` and its unbind guard ensure by
        // unregistering before the parent is unbound. ib_core calls us only while registered.
        unsafe {
            device::Device::<device::Normal>::from_raw((*ib_dev_device(self.as_raw())).parent)
                .as_bound()
        }
    }

    /// The device's CQs by number.
    pub fn cqs(&self) -> &Table<Cq<T>> {
        &self.objects.cqs
    }

    /// The device's QPs by number.
    pub fn qps(&self) -> &Table<Qp<T>> {
        &self.objects.qps
    }

    /// The device's SRQs by number.
    pub fn srqs(&self) -> &Table<Srq<T>> {
        &self.objects.srqs
    }

    /// The node GUID ([`Config::node_guid`]).
    pub fn node_guid(&self) -> u64 {
        // SAFETY: `self` is a valid device; the GUID is set before registration and not
        // changed after. The field is a `__be64`.
        u64::from_be_bytes(unsafe { (*self.as_raw()).node_guid }.to_ne_bytes())
    }

    /// The device's name (e.g. `ferroce0`).
    pub fn name(&self) -> &CStr {
        // SAFETY: `dev` of a registered `ib_device` has a name for its whole life.
        unsafe { CStr::from_char_ptr(bindings::dev_name(ib_dev_device(self.as_raw()))) }
    }

    /// Associates `port` with a network device (RoCE: the netdev whose addresses become the
    /// port's GIDs), or removes the association with `None`.
    ///
    /// # Errors
    ///
    /// Fails if ib_core refuses the port number.
    pub fn set_netdev(&self, netdev: Option<&NetDevice>, port: u32) -> Result {
        let ndev = netdev.map_or(ptr::null_mut(), NetDevice::as_raw);
        // SAFETY: `self.as_raw()` is a valid device; `ndev` is NULL or a valid net_device, which
        // ib_core takes its own reference to.
        to_result(unsafe { bindings::ib_device_set_netdev(self.as_raw(), ndev, port) })
    }

    /// Delivers an asynchronous event to the device's consumers.
    pub fn dispatch_event(&self, event: Event) {
        let (kind, port) = match event {
            Event::PortActive(port) => (bindings::ib_event_type_IB_EVENT_PORT_ACTIVE, port),
            Event::PortError(port) => (bindings::ib_event_type_IB_EVENT_PORT_ERR, port),
            Event::GidChange(port) => (bindings::ib_event_type_IB_EVENT_GID_CHANGE, port),
            Event::DeviceFatal => (bindings::ib_event_type_IB_EVENT_DEVICE_FATAL, 1),
        };
        let ev = bindings::ib_event {
            device: self.as_raw(),
            element: bindings::ib_event__bindgen_ty_1 { port_num: port },
            event: kind,
        };
        // SAFETY: `ev` is a valid event for a registered device; ib_core copies what it keeps.
        unsafe { bindings::ib_dispatch_event(&ev) };
    }

    /// The Ethernet speed and width of `port` as ib_core derives them from its netdev
    /// (`ib_get_eth_speed()`), for `query_port`.
    pub fn eth_speed(&self, port: u32) -> (u16, u8) {
        let (mut speed, mut width) = (0u16, 0u8);
        // SAFETY: The device is valid; the out-pointers are valid for writes. On error the
        // function leaves the defaults, which are what we report then.
        let _ = unsafe { bindings::ib_get_eth_speed(self.as_raw(), port, &mut speed, &mut width) };
        (speed, width)
    }
}

// SAFETY: The core part is synchronised by ib_core; `T` is `Send + Sync` (`Operations`).
unsafe impl<T: Operations> Send for Device<T> {}
// SAFETY: As above.
unsafe impl<T: Operations> Sync for Device<T> {}

#[kunit_tests(rust_rdma_device)]
mod tests {
    use super::*;

    #[test]
    fn node_guid_is_the_eui64_of_the_mac() {
        // 52:54:00:fe:00:01 -> 5054:00ff:fefe:0001 (the fe80:: GID's interface ID).
        let mac = [0x52, 0x54, 0x00, 0xfe, 0x00, 0x01];
        assert_eq!(Config::guid_from_mac(&mac), 0x5054_00ff_fefe_0001);
    }

    #[test]
    fn mtu_for_ethernet_mtu_matches_iboe_get_mtu() {
        assert_eq!(Mtu::for_ethernet_mtu(1500), Some(Mtu::Mtu1024));
        assert_eq!(Mtu::for_ethernet_mtu(9000), Some(Mtu::Mtu4096));
        // 96 bytes of headers: 4192 is the smallest Ethernet MTU that carries 4096.
        assert_eq!(Mtu::for_ethernet_mtu(4192), Some(Mtu::Mtu4096));
        assert_eq!(Mtu::for_ethernet_mtu(4191), Some(Mtu::Mtu2048));
        assert_eq!(Mtu::for_ethernet_mtu(352), Some(Mtu::Mtu256));
        assert_eq!(Mtu::for_ethernet_mtu(351), None);
        assert_eq!(Mtu::for_ethernet_mtu(0), None);
    }

    #[test]
    fn mtu_bytes() {
        assert_eq!(Mtu::Mtu256.bytes(), 256);
        assert_eq!(Mtu::Mtu1024.bytes(), 1024);
        assert_eq!(Mtu::Mtu4096.bytes(), 4096);
    }

    #[test]
    fn roce_ports_speak_v1_and_v2() {
        let caps = PortImmutable::ROCE_V1_V2;
        assert_ne!(caps & bindings::RDMA_CORE_CAP_PROT_ROCE, 0);
        assert_ne!(caps & bindings::RDMA_CORE_CAP_PROT_ROCE_UDP_ENCAP, 0);
        assert_eq!(caps & bindings::RDMA_CORE_CAP_PROT_IB, 0);
    }
}
