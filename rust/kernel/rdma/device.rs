// SPDX-License-Identifier: GPL-2.0

//! RDMA devices (`struct ib_device`) and their registration with ib_core.

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
        NewMr,
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
        StatDesc,
        Ucontext,
        UcontextInit,
        Udata,
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

/// The link layer of a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkLayer {
    /// InfiniBand.
    InfiniBand,
    /// Ethernet (RoCE).
    Ethernet,
}

/// The logical state of a port (`enum ib_port_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortState {
    /// The link is down.
    Down,
    /// The link is up and the port can carry traffic.
    Active,
}

/// An InfiniBand MTU (`enum ib_mtu`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mtu {
    /// 256 bytes.
    Mtu256 = 1,
    /// 512 bytes.
    Mtu512 = 2,
    /// 1024 bytes.
    Mtu1024 = 3,
    /// 2048 bytes.
    Mtu2048 = 4,
    /// 4096 bytes.
    Mtu4096 = 5,
}

impl Mtu {
    /// The largest IB MTU whose packets (payload plus RoCE v2 headers) fit in an Ethernet
    /// frame of `eth_mtu` bytes, as `iboe_get_mtu()` computes it; `None` below 256.
    pub fn for_ethernet_mtu(eth_mtu: u32) -> Option<Self> {
        // GRH/IPv6 (40) + UDP (8) + BTH (12) + XRC ETH (4) + AtomicETH (28) + ICRC (4), the
        // headers `iboe_get_mtu()` reserves room for.
        const ROCE_OVERHEAD: u32 = 40 + 8 + 12 + 4 + 28 + 4;
        let room = eth_mtu.checked_sub(ROCE_OVERHEAD)?;
        [
            Self::Mtu4096,
            Self::Mtu2048,
            Self::Mtu1024,
            Self::Mtu512,
            Self::Mtu256,
        ]
        .into_iter()
        .find(|mtu| mtu.bytes() <= room)
    }

    /// The MTU in bytes.
    pub fn bytes(self) -> u32 {
        128 << (self as u32)
    }
}

/// An asynchronous event a driver reports to ib_core's consumers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The port became active (`IB_EVENT_PORT_ACTIVE`).
    PortActive(u32),
    /// The port went down (`IB_EVENT_PORT_ERR`).
    PortError(u32),
    /// The GID table of the port changed (`IB_EVENT_GID_CHANGE`).
    GidChange(u32),
    /// The device hit a fatal error (`IB_EVENT_DEVICE_FATAL`).
    DeviceFatal,
}

/// Device attributes a driver reports from [`Operations::query_device`].
///
/// # Invariants
///
/// `self.0` points to a valid, writable `struct ib_device_attr`.
pub struct DeviceAttr<'a>(NonNull<bindings::ib_device_attr>, PhantomData<&'a mut ()>);

macro_rules! attr_setters {
    ($ty:ident { $($(#[$m:meta])* $name:ident: $field:ident: $t:ty),* $(,)? }) => {
        impl $ty<'_> {
            $(
                $(#[$m])*
                pub fn $name(&mut self, value: $t) -> &mut Self {
                    // SAFETY: By the type invariant the pointer is valid and writable.
                    unsafe { (*self.0.as_ptr()).$field = value.into() };
                    self
                }
            )*
        }
    };
}

attr_setters!(DeviceAttr {
    /// Firmware version.
    fw_ver: fw_ver: u64,
    /// Vendor ID (IEEE OUI).
    vendor_id: vendor_id: u32,
    /// Vendor part ID (the PCI device ID).
    vendor_part_id: vendor_part_id: u32,
    /// Hardware version (the PCI revision).
    hw_ver: hw_ver: u32,
    /// Largest memory region, in bytes.
    max_mr_size: max_mr_size: u64,
    /// Supported page sizes (bit mask).
    page_size_cap: page_size_cap: u64,
    /// Maximum number of QPs.
    max_qp: max_qp: u32,
    /// Maximum WRs per QP.
    max_qp_wr: max_qp_wr: u32,
    /// Device capability flags (`IB_DEVICE_*`).
    device_cap_flags: device_cap_flags: u64,
    /// Maximum scatter/gather entries per send WR.
    max_send_sge: max_send_sge: u32,
    /// Maximum scatter/gather entries per receive WR.
    max_recv_sge: max_recv_sge: u32,
    /// Maximum scatter/gather entries per RDMA READ (ULPs divide by it: never 0 with QPs).
    max_sge_rd: max_sge_rd: u32,
    /// Maximum number of CQs.
    max_cq: max_cq: u32,
    /// Maximum CQEs per CQ.
    max_cqe: max_cqe: u32,
    /// Maximum number of MRs.
    max_mr: max_mr: u32,
    /// Maximum number of PDs.
    max_pd: max_pd: u32,
    /// Maximum outstanding RDMA READ/atomic as responder, per QP.
    max_qp_rd_atom: max_qp_rd_atom: u32,
    /// Maximum outstanding RDMA READ/atomic as initiator, per QP.
    max_qp_init_rd_atom: max_qp_init_rd_atom: u32,
    /// Maximum number of SRQs.
    max_srq: max_srq: u32,
    /// Maximum WRs per SRQ.
    max_srq_wr: max_srq_wr: u32,
    /// Maximum scatter/gather entries per SRQ WR.
    max_srq_sge: max_srq_sge: u32,
    /// Maximum number of AHs.
    max_ah: max_ah: u32,
    /// Maximum number of partition keys.
    max_pkeys: max_pkeys: u16,
    /// Local CA ACK delay.
    local_ca_ack_delay: local_ca_ack_delay: u8,
    /// Maximum fast-registration page-list length.
    max_fast_reg_page_list_len: max_fast_reg_page_list_len: u32,
    /// Atomicity of atomic operations (`bindings::ib_atomic_cap_IB_ATOMIC_*`).
    atomic_cap: atomic_cap: bindings::ib_atomic_cap,
});

impl DeviceAttr<'_> {
    /// The system image GUID (one per chassis; RoCE devices use their node GUID).
    pub fn sys_image_guid(&mut self, guid: u64) -> &mut Self {
        // SAFETY: By the type invariant the pointer is valid and writable. The field is a
        // `__be64`: the bytes in network order.
        unsafe { (*self.0.as_ptr()).sys_image_guid = u64::from_ne_bytes(guid.to_be_bytes()) };
        self
    }
}

/// Port attributes a driver reports from [`Operations::query_port`].
///
/// ib_core zeroes the structure and fills what it knows (for RoCE ports: the netdev's MTU,
/// speed and state) before it calls the driver.
///
/// # Invariants
///
/// `self.0` points to a valid, writable `struct ib_port_attr`.
pub struct PortAttr<'a>(NonNull<bindings::ib_port_attr>, PhantomData<&'a mut ()>);

attr_setters!(PortAttr {
    /// Length of the GID table.
    gid_tbl_len: gid_tbl_len: i32,
    /// Length of the P_Key table.
    pkey_tbl_len: pkey_tbl_len: u16,
    /// Capability flags (`IB_PORT_*` of the PortInfo capability mask).
    port_cap_flags: port_cap_flags: u32,
    /// Largest message, in bytes.
    max_msg_sz: max_msg_sz: u32,
    /// Number of virtual lanes.
    max_vl_num: max_vl_num: u8,
});

impl PortAttr<'_> {
    /// `port_cap_flags`: the port supports connection management (`IB_PORT_CM_SUP`).
    pub const CAP_CM: u32 = bindings::ib_port_capability_mask_bits_IB_PORT_CM_SUP;
    /// `port_cap_flags`: the port supports device management (`IB_PORT_DEVICE_MGMT_SUP`).
    pub const CAP_DEVICE_MGMT: u32 = bindings::ib_port_capability_mask_bits_IB_PORT_DEVICE_MGMT_SUP;

    /// The GIDs of the port are derived from IP addresses (RoCE).
    pub fn ip_gids(&mut self, on: bool) -> &mut Self {
        // SAFETY: By the type invariant the pointer is valid and writable.
        unsafe { (*self.0.as_ptr()).set_ip_gids(on.into()) };
        self
    }

    /// Active link speed (`IB_SPEED_*`) and width (`IB_WIDTH_*`), e.g. from
    /// [`Device::eth_speed`].
    pub fn speed(&mut self, speed: u16, width: u8) -> &mut Self {
        // SAFETY: By the type invariant the pointer is valid and writable.
        unsafe {
            (*self.0.as_ptr()).active_speed = speed;
            (*self.0.as_ptr()).active_width = width;
        }
        self
    }

    /// Logical port state and the physical state that goes with it.
    pub fn state(&mut self, state: PortState) -> &mut Self {
        let (logical, physical) = match state {
            PortState::Active => (
                bindings::ib_port_state_IB_PORT_ACTIVE,
                bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_LINK_UP,
            ),
            PortState::Down => (
                bindings::ib_port_state_IB_PORT_DOWN,
                bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_DISABLED,
            ),
        };
        // SAFETY: By the type invariant the pointer is valid and writable.
        unsafe {
            (*self.0.as_ptr()).state = logical;
            (*self.0.as_ptr()).phys_state = physical as u8;
        }
        self
    }

    /// Largest and currently active MTU.
    pub fn mtu(&mut self, max: Mtu, active: Mtu) -> &mut Self {
        // SAFETY: By the type invariant the pointer is valid and writable.
        unsafe {
            (*self.0.as_ptr()).max_mtu = max as bindings::ib_mtu;
            (*self.0.as_ptr()).active_mtu = active as bindings::ib_mtu;
        }
        self
    }
}

/// What never changes about a port, reported once at registration
/// ([`Operations::get_port_immutable`]).
#[derive(Clone, Copy, Debug)]
pub struct PortImmutable {
    /// Length of the P_Key table.
    pub pkey_tbl_len: u32,
    /// Length of the GID table.
    pub gid_tbl_len: u32,
    /// Core capability flags (`RDMA_CORE_PORT_*`).
    pub core_cap_flags: u32,
    /// Largest MAD.
    pub max_mad_size: u32,
}

impl PortImmutable {
    /// Core capabilities of a RoCE port that speaks both RoCE v1 and RoCE v2 (UDP
    /// encapsulation): ib_core then keeps a v1 and a v2 entry for every address.
    pub const ROCE_V1_V2: u32 =
        bindings::RDMA_CORE_PORT_IBA_ROCE | bindings::RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP;
    /// Size of a management datagram (`IB_MGMT_MAD_SIZE`).
    pub const MGMT_MAD_SIZE: u32 = 256;
}

/// The operations of an RDMA device driver.
///
/// `Self` is the driver's data of one device; ib_core calls these with the [`Device`] that holds
/// it, from any thread and concurrently. Only what is implemented is given to ib_core.
#[vtable]
pub trait Operations: Sized + Send + Sync + 'static {
    /// The driver's `enum rdma_driver_id` (`bindings::rdma_driver_id_RDMA_DRIVER_*`).
    const DRIVER_ID: bindings::rdma_driver_id;
    /// The version of the driver's user ABI (`include/uapi/rdma/<driver>-abi.h`).
    const UVERBS_ABI_VERSION: u32 = 0;

    /// Reports the device attributes.
    fn query_device(dev: &Device<Self>, attr: &mut DeviceAttr<'_>) -> Result;

    /// Reports the attributes of `port`.
    fn query_port(dev: &Device<Self>, port: u32, attr: &mut PortAttr<'_>) -> Result;

    /// Reports what never changes about `port`.
    fn get_port_immutable(dev: &Device<Self>, port: u32) -> Result<PortImmutable>;

    /// The link layer of `port`.
    fn get_link_layer(_dev: &Device<Self>, _port: u32) -> LinkLayer {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Programs a GID table entry into the device.
    fn add_gid(_dev: &Device<Self>, _attr: &GidAttr) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Removes a GID table entry from the device.
    fn del_gid(_dev: &Device<Self>, _attr: &GidAttr) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Reads the P_Key table entry `index` of `port`.
    fn query_pkey(_dev: &Device<Self>, _port: u32, _index: u16) -> Result<u16> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// The names of the port's hardware counters, in the order of
    /// [`Operations::get_hw_stats`]'s values.
    const HW_COUNTERS: &'static [StatDesc] = &[];

    /// Reads the hardware counters of `port` into `values` (one per [`Operations::HW_COUNTERS`]).
    fn get_hw_stats(_dev: &Device<Self>, _port: u32, _values: &mut [u64]) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    // Verbs objects. ib_core allocates PDs, CQs, QPs, AHs, SRQs and user contexts with room
    // for the driver's data after its own structure; creation moves the data in, destruction
    // drops it once the driver's `destroy_*` succeeded. A device provides kernel verbs only if
    // it implements PDs, CQs, QPs, `post_*`, `poll_cq`, `req_notify_cq` and the MR calls.

    /// The driver's data of a protection domain.
    type Pd: Send + Sync;
    /// The driver's data of a completion queue.
    type Cq: Numbered + Send + Sync;
    /// The driver's data of a queue pair; its number becomes the QP number.
    type Qp: Numbered + Send + Sync;
    /// The driver's data of a shared receive queue.
    type Srq: Numbered + Send + Sync;
    /// The driver's data of an address handle.
    type Ah: Send + Sync;
    /// The driver's data of a memory region.
    type Mr: Send + Sync;
    /// The driver's data of a user context.
    type Ucontext: Send + Sync;
    /// The driver's data of an mmap entry of a user context (what `mmap` maps).
    type MmapEntry: Send + Sync;

    /// Allocates a protection domain.
    fn alloc_pd(_dev: &Device<Self>, _udata: Option<&mut Udata<'_>>) -> Result<Self::Pd> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Releases a protection domain (its data is dropped afterwards).
    fn dealloc_pd(_pd: &Pd<Self>, _udata: Option<&mut Udata<'_>>) -> Result {
        Ok(())
    }

    /// Creates a CQ of at least `init.entries` entries; returns its data and the number of
    /// entries it has.
    fn create_cq(
        _dev: &Device<Self>,
        _init: &CqInit,
        _udata: Option<&mut Udata<'_>>,
    ) -> Result<(Self::Cq, u32)> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Destroys a CQ. No completion or event reaches it any more once this is called.
    fn destroy_cq(_cq: &Cq<Self>, _udata: Option<&mut Udata<'_>>) -> Result {
        Ok(())
    }

    /// Moves completions into `out` until it is full or the CQ is empty.
    fn poll_cq(_cq: &Cq<Self>, _out: &mut Completions<'_, Self>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Arms the CQ: the next completion (or the next solicited one) calls the consumer's
    /// handler. Returns whether completions may have arrived unreported before the arming.
    fn req_notify_cq(_cq: &Cq<Self>, _solicited_only: bool) -> Result<bool> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Sets the CQ's event moderation: an event after `count` completions or `period_us`.
    fn modify_cq(_cq: &Cq<Self>, _count: u16, _period_us: u16) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Creates a QP in `pd`; reports the queue sizes through `init`.
    fn create_qp(
        _dev: &Device<Self>,
        _pd: &Pd<Self>,
        _init: &mut QpInit<'_, Self>,
        _udata: Option<&mut Udata<'_>>,
    ) -> Result<Self::Qp> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Changes the QP's state and attributes.
    fn modify_qp(_qp: &Qp<Self>, _attr: &QpAttr<'_>, _udata: Option<&mut Udata<'_>>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Reports the QP's state and attributes.
    fn query_qp(_qp: &Qp<Self>, _out: &mut QpAttrOut<'_>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Destroys a QP. No completion reaches the consumer for it any more.
    fn destroy_qp(_qp: &Qp<Self>, _udata: Option<&mut Udata<'_>>) -> Result {
        Ok(())
    }

    /// Posts a chain of send requests: all, or those before the returned bad one.
    fn post_send<'a>(
        _qp: &Qp<Self>,
        _wr: SendWr<'a, Self>,
    ) -> Result<(), PostError<SendWr<'a, Self>>> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Posts a chain of receive requests: all, or those before the returned bad one.
    fn post_recv<'a>(_qp: &Qp<Self>, _wr: RecvWr<'a>) -> Result<(), PostError<RecvWr<'a>>> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Creates an SRQ; reports its sizes through `attr`.
    fn create_srq(
        _dev: &Device<Self>,
        _pd: &Pd<Self>,
        _attr: &mut SrqAttr,
        _udata: Option<&mut Udata<'_>>,
    ) -> Result<Self::Srq> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Resizes the SRQ or (re)arms its limit.
    fn modify_srq(
        _srq: &Srq<Self>,
        _max_wr: Option<u32>,
        _limit: Option<u32>,
        _udata: Option<&mut Udata<'_>>,
    ) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Reports the SRQ's sizes and limit.
    fn query_srq(_srq: &Srq<Self>) -> Result<SrqAttr> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Destroys an SRQ.
    fn destroy_srq(_srq: &Srq<Self>, _udata: Option<&mut Udata<'_>>) -> Result {
        Ok(())
    }

    /// Posts a chain of receive requests to an SRQ.
    fn post_srq_recv<'a>(_srq: &Srq<Self>, _wr: RecvWr<'a>) -> Result<(), PostError<RecvWr<'a>>> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Creates an address handle. Unless `sleepable`, this runs in atomic context and must not
    /// sleep (ib_cm creates AHs under spinlocks).
    fn create_ah(
        _dev: &Device<Self>,
        _av: &AddressVector<'_>,
        _sleepable: bool,
        _udata: Option<&mut Udata<'_>>,
    ) -> Result<Self::Ah> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Destroys an address handle; must not sleep unless `sleepable`.
    fn destroy_ah(_ah: &Ah<Self>, _sleepable: bool) -> Result {
        Ok(())
    }

    /// An MR covering all memory, addressed by DMA address (`ib_get_dma_mr()`; ib_core uses it
    /// as the PD's local DMA key).
    fn get_dma_mr(_pd: &Pd<Self>, _access: u32) -> Result<NewMr<Self::Mr>> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// An MR for fast registration of up to `max_num_sg` pages.
    fn alloc_mr(_pd: &Pd<Self>, _kind: MrType, _max_num_sg: u32) -> Result<NewMr<Self::Mr>> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Maps a scatter/gather list into a fast-registration MR's page list; returns the number
    /// of list elements mapped.
    fn map_mr_sg(_mr: &Mr<Self>, _sg: &mut SgPages<'_, Self>) -> Result<u32> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Registers `length` bytes of the calling process's memory at `start`, addressed from
    /// `virt_addr` (`ibv_reg_mr()`).
    fn reg_user_mr(
        _pd: &Pd<Self>,
        _start: u64,
        _length: u64,
        _virt_addr: u64,
        _access: u32,
        _udata: Option<&mut Udata<'_>>,
    ) -> Result<NewMr<Self::Mr>> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Deregisters an MR (its data is dropped afterwards).
    fn dereg_mr(_mr: &Mr<Self>, _udata: Option<&mut Udata<'_>>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Sets up the context of a process that opened the device.
    fn alloc_ucontext(
        _ctx: &UcontextInit<'_, Self>,
        _udata: Option<&mut Udata<'_>>,
    ) -> Result<Self::Ucontext> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Tears a user context down; everything the process created is gone already.
    fn dealloc_ucontext(_ctx: &Ucontext<Self>) {}

    /// Maps `entry` into the process (`mmap()` on the uverbs file at the entry's offset).
    fn mmap(
        _ctx: &Ucontext<Self>,
        _entry: &MmapEntry<Self>,
        _request: &mut MmapRequest<'_>,
    ) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
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
            device::Device::<device::Normal>::from_raw((*self.as_raw()).__bindgen_anon_1.dev.parent)
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
        unsafe {
            CStr::from_char_ptr(bindings::dev_name(
                &raw const (*self.as_raw()).__bindgen_anon_1.dev,
            ))
        }
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

/// The `ib_device_ops` callbacks that forward to `T`'s [`Operations`].
struct Callbacks<T>(PhantomData<T>);

impl<T: Operations> Callbacks<T> {
    unsafe extern "C" fn query_device(
        ib: *mut bindings::ib_device,
        attr: *mut bindings::ib_device_attr,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: ib_core only calls back registered devices, which are `Device<T>`.
            let dev = unsafe { Device::<T>::from_raw(ib) };
            let mut attr = DeviceAttr(NonNull::new(attr).ok_or(EINVAL)?, PhantomData);
            T::query_device(dev, &mut attr)?;
            Ok(0)
        })
    }

    unsafe extern "C" fn query_port(
        ib: *mut bindings::ib_device,
        port: u32,
        attr: *mut bindings::ib_port_attr,
    ) -> c_int {
        from_result(|| {
            // SAFETY: As in `query_device`.
            let dev = unsafe { Device::<T>::from_raw(ib) };
            let mut attr = PortAttr(NonNull::new(attr).ok_or(EINVAL)?, PhantomData);
            T::query_port(dev, port, &mut attr)?;
            Ok(0)
        })
    }

    unsafe extern "C" fn get_port_immutable(
        ib: *mut bindings::ib_device,
        port: u32,
        out: *mut bindings::ib_port_immutable,
    ) -> c_int {
        from_result(|| {
            // SAFETY: As in `query_device`.
            let dev = unsafe { Device::<T>::from_raw(ib) };
            let imm = T::get_port_immutable(dev, port)?;
            // SAFETY: ib_core passes a valid, writable `ib_port_immutable`.
            unsafe {
                (*out).pkey_tbl_len = imm.pkey_tbl_len.try_into()?;
                (*out).gid_tbl_len = imm.gid_tbl_len.try_into()?;
                (*out).core_cap_flags = imm.core_cap_flags;
                (*out).max_mad_size = imm.max_mad_size;
            }
            Ok(0)
        })
    }

    unsafe extern "C" fn get_link_layer(
        ib: *mut bindings::ib_device,
        port: u32,
    ) -> bindings::rdma_link_layer {
        // SAFETY: As in `query_device`.
        let dev = unsafe { Device::<T>::from_raw(ib) };
        match T::get_link_layer(dev, port) {
            LinkLayer::Ethernet => bindings::rdma_link_layer_IB_LINK_LAYER_ETHERNET,
            LinkLayer::InfiniBand => bindings::rdma_link_layer_IB_LINK_LAYER_INFINIBAND,
        }
    }

    unsafe extern "C" fn add_gid(
        attr: *const bindings::ib_gid_attr,
        _context: *mut *mut c_void,
    ) -> c_int {
        from_result(|| {
            // SAFETY: ib_core passes a valid attribute of a registered `Device<T>` and holds the
            // table lock for the duration of the call.
            let (dev, attr) = unsafe {
                (
                    Device::<T>::from_raw((*attr).device),
                    GidAttr::from_raw(attr),
                )
            };
            T::add_gid(dev, attr)?;
            Ok(0)
        })
    }

    unsafe extern "C" fn del_gid(
        attr: *const bindings::ib_gid_attr,
        _context: *mut *mut c_void,
    ) -> c_int {
        from_result(|| {
            // SAFETY: As in `add_gid`.
            let (dev, attr) = unsafe {
                (
                    Device::<T>::from_raw((*attr).device),
                    GidAttr::from_raw(attr),
                )
            };
            T::del_gid(dev, attr)?;
            Ok(0)
        })
    }

    unsafe extern "C" fn query_pkey(
        ib: *mut bindings::ib_device,
        port: u32,
        index: u16,
        pkey: *mut u16,
    ) -> c_int {
        from_result(|| {
            // SAFETY: As in `query_device`.
            let dev = unsafe { Device::<T>::from_raw(ib) };
            let value = T::query_pkey(dev, port, index)?;
            // SAFETY: ib_core passes a valid, writable `u16`.
            unsafe { *pkey = value };
            Ok(0)
        })
    }

    fn ops(owner: &ThisModule) -> bindings::ib_device_ops {
        bindings::ib_device_ops {
            owner: owner.as_ptr(),
            driver_id: T::DRIVER_ID,
            uverbs_abi_ver: T::UVERBS_ABI_VERSION,
            query_device: Some(Self::query_device),
            query_port: Some(Self::query_port),
            get_port_immutable: Some(Self::get_port_immutable),
            get_link_layer: if T::HAS_GET_LINK_LAYER {
                Some(Self::get_link_layer)
            } else {
                None
            },
            add_gid: if T::HAS_ADD_GID {
                Some(Self::add_gid)
            } else {
                None
            },
            del_gid: if T::HAS_DEL_GID {
                Some(Self::del_gid)
            } else {
                None
            },
            query_pkey: if T::HAS_QUERY_PKEY {
                Some(Self::query_pkey)
            } else {
                None
            },
            alloc_hw_port_stats: if T::HAS_GET_HW_STATS {
                Some(super::stats::alloc_hw_port_stats::<T>)
            } else {
                None
            },
            get_hw_stats: if T::HAS_GET_HW_STATS {
                Some(super::stats::get_hw_stats::<T>)
            } else {
                None
            },
            alloc_pd: if T::HAS_ALLOC_PD {
                Some(super::pd::alloc_pd::<T>)
            } else {
                None
            },
            dealloc_pd: if T::HAS_ALLOC_PD {
                Some(super::pd::dealloc_pd::<T>)
            } else {
                None
            },
            size_ib_pd: Pd::<T>::ALLOC_SIZE,
            create_cq: if T::HAS_CREATE_CQ {
                Some(super::cq::create_cq::<T>)
            } else {
                None
            },
            destroy_cq: if T::HAS_CREATE_CQ {
                Some(super::cq::destroy_cq::<T>)
            } else {
                None
            },
            poll_cq: if T::HAS_POLL_CQ {
                Some(super::cq::poll_cq::<T>)
            } else {
                None
            },
            req_notify_cq: if T::HAS_REQ_NOTIFY_CQ {
                Some(super::cq::req_notify_cq::<T>)
            } else {
                None
            },
            modify_cq: if T::HAS_MODIFY_CQ {
                Some(super::cq::modify_cq::<T>)
            } else {
                None
            },
            size_ib_cq: Cq::<T>::ALLOC_SIZE,
            create_qp: if T::HAS_CREATE_QP {
                Some(super::qp::create_qp::<T>)
            } else {
                None
            },
            modify_qp: if T::HAS_MODIFY_QP {
                Some(super::qp::modify_qp::<T>)
            } else {
                None
            },
            query_qp: if T::HAS_QUERY_QP {
                Some(super::qp::query_qp::<T>)
            } else {
                None
            },
            destroy_qp: if T::HAS_CREATE_QP {
                Some(super::qp::destroy_qp::<T>)
            } else {
                None
            },
            post_send: if T::HAS_POST_SEND {
                Some(super::qp::post_send::<T>)
            } else {
                None
            },
            post_recv: if T::HAS_POST_RECV {
                Some(super::qp::post_recv::<T>)
            } else {
                None
            },
            size_ib_qp: Qp::<T>::ALLOC_SIZE,
            create_srq: if T::HAS_CREATE_SRQ {
                Some(super::srq::create_srq::<T>)
            } else {
                None
            },
            modify_srq: if T::HAS_MODIFY_SRQ {
                Some(super::srq::modify_srq::<T>)
            } else {
                None
            },
            query_srq: if T::HAS_QUERY_SRQ {
                Some(super::srq::query_srq::<T>)
            } else {
                None
            },
            destroy_srq: if T::HAS_CREATE_SRQ {
                Some(super::srq::destroy_srq::<T>)
            } else {
                None
            },
            post_srq_recv: if T::HAS_POST_SRQ_RECV {
                Some(super::srq::post_srq_recv::<T>)
            } else {
                None
            },
            size_ib_srq: Srq::<T>::ALLOC_SIZE,
            create_ah: if T::HAS_CREATE_AH {
                Some(super::ah::create_ah::<T>)
            } else {
                None
            },
            // The same call with a `udata` (uverbs); `Operations::create_ah` gets it.
            create_user_ah: if T::HAS_CREATE_AH {
                Some(super::ah::create_ah::<T>)
            } else {
                None
            },
            destroy_ah: if T::HAS_CREATE_AH {
                Some(super::ah::destroy_ah::<T>)
            } else {
                None
            },
            size_ib_ah: Ah::<T>::ALLOC_SIZE,
            get_dma_mr: if T::HAS_GET_DMA_MR {
                Some(super::mr::get_dma_mr::<T>)
            } else {
                None
            },
            reg_user_mr: if T::HAS_REG_USER_MR {
                Some(super::mr::reg_user_mr::<T>)
            } else {
                None
            },
            alloc_mr: if T::HAS_ALLOC_MR {
                Some(super::mr::alloc_mr::<T>)
            } else {
                None
            },
            map_mr_sg: if T::HAS_MAP_MR_SG {
                Some(super::mr::map_mr_sg::<T>)
            } else {
                None
            },
            dereg_mr: if T::HAS_DEREG_MR {
                Some(super::mr::dereg_mr::<T>)
            } else {
                None
            },
            alloc_ucontext: if T::HAS_ALLOC_UCONTEXT {
                Some(super::pd::alloc_ucontext::<T>)
            } else {
                None
            },
            dealloc_ucontext: if T::HAS_ALLOC_UCONTEXT {
                Some(super::pd::dealloc_ucontext::<T>)
            } else {
                None
            },
            size_ib_ucontext: Ucontext::<T>::ALLOC_SIZE,
            mmap: if T::HAS_MMAP {
                Some(super::mmap::mmap::<T>)
            } else {
                None
            },
            mmap_free: if T::HAS_MMAP {
                Some(super::mmap::mmap_free::<T>)
            } else {
                None
            },
            ..pin_init::zeroed()
        }
    }
}

/// A `Device<T>` pointer that may be sent across threads.
struct DevicePtr<T: Operations>(NonNull<Device<T>>);

// SAFETY: `Device<T>` is `Send + Sync`; the pointer is only dereferenced under `DeviceHandle`'s
// lock while the device is registered.
unsafe impl<T: Operations> Send for DevicePtr<T> {}

/// Where a [`DeviceHandle`] finds the device: one pointer for code that may sleep, one for
/// code that may not (interrupt handlers), both cleared before the device is unregistered.
#[pin_data]
struct HandleState<T: Operations> {
    #[pin]
    sleeping: Mutex<Option<DevicePtr<T>>>,
    #[pin]
    atomic: SpinLockIrq<Option<DevicePtr<T>>>,
}

impl<T: Operations> HandleState<T> {
    fn set(&self, dev: Option<NonNull<Device<T>>>) {
        *self.sleeping.lock() = dev.map(DevicePtr);
        *self.atomic.lock() = dev.map(DevicePtr);
    }
}

/// A handle to a registered device for code that outlives no registration but cannot borrow it:
/// notifier callbacks, work items, interrupt handlers. [`DeviceHandle::with`] and
/// [`DeviceHandle::with_atomic`] run code on the device while it is registered and do nothing
/// once [`Registration`] started to drop.
pub struct DeviceHandle<T: Operations>(Arc<HandleState<T>>);

impl<T: Operations> Clone for DeviceHandle<T> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<T: Operations> DeviceHandle<T> {
    fn new() -> Result<Self> {
        Ok(Self(Arc::pin_init(
            try_pin_init!(HandleState {
                sleeping <- new_mutex!(None, "rdma::DeviceHandle"),
                atomic <- crate::new_spinlock_irq!(None, "rdma::DeviceHandle::atomic"),
            }),
            GFP_KERNEL,
        )?))
    }

    /// Runs `f` on the device if it is still registered; `f` may sleep. Returns `None` when the
    /// device is being (or has been) unregistered.
    pub fn with<R>(&self, f: impl FnOnce(&Device<T>) -> R) -> Option<R> {
        let guard = self.0.sleeping.lock();
        let ptr = guard.as_ref()?;
        // SAFETY: The pointer is set while the device is registered and cleared under this lock
        // before `Registration` unregisters it, so it is valid while we hold the lock.
        Some(f(unsafe { ptr.0.as_ref() }))
    }

    /// As [`DeviceHandle::with`], from any context (interrupt handlers included): `f` runs with
    /// interrupts disabled and must not sleep.
    pub fn with_atomic<R>(&self, f: impl FnOnce(&Device<T>) -> R) -> Option<R> {
        let guard = self.0.atomic.lock();
        let ptr = guard.as_ref()?;
        // SAFETY: As in `with`, for the atomic pointer and its lock.
        Some(f(unsafe { ptr.0.as_ref() }))
    }
}

/// How a device is registered: see [`Registration::new`].
pub struct Config<'a> {
    /// Number of ports (numbered from 1).
    pub ports: u32,
    /// Number of completion vectors consumers may spread their CQs over (at least 1).
    pub comp_vectors: u32,
    /// A port and its network device, associated before registration (RoCE).
    pub netdev: Option<(u32, &'a NetDevice)>,
    /// CQ numbers are below this.
    pub cq_numbers: u32,
    /// QP numbers are below this.
    pub qp_numbers: u32,
    /// SRQ numbers are below this.
    pub srq_numbers: u32,
    /// The node GUID (RoCE devices derive it from their MAC, [`Config::guid_from_mac`]);
    /// librdmacm finds the device of an address by it, so it must not be 0.
    pub node_guid: u64,
}

impl Config<'_> {
    /// The EUI-64 of a MAC address (`addrconf_addr_eui48()`), as RoCE devices use for their
    /// node GUID.
    pub fn guid_from_mac(mac: &[u8; 6]) -> u64 {
        u64::from_be_bytes([
            mac[0] ^ 2,
            mac[1],
            mac[2],
            0xff,
            0xfe,
            mac[3],
            mac[4],
            mac[5],
        ])
    }
}

/// A registered RDMA device, unregistered and freed when dropped.
///
/// The driver's data (`T`) is `'static`: should a `Registration` ever be leaked instead of
/// dropped, the device merely stays registered with valid data.
///
/// # Invariants
///
/// `dev` points to a `Device<T>` allocated with `_ib_alloc_device()`, whose data is initialised
/// and which is registered with ib_core.
pub struct Registration<T: Operations> {
    dev: NonNull<Device<T>>,
    handle: DeviceHandle<T>,
}

impl<T: Operations> Registration<T> {
    /// Allocates a device with `config.ports` ports, initialises the driver's data in it and
    /// registers it with ib_core under `name` (a `printf` pattern such as `c"ferroce%d"`), as a
    /// child of `parent`, which is also the device used for DMA.
    ///
    /// `config.netdev` associates a port with its network device before registration, so that ib_core
    /// builds the port's GID table from the device's addresses right away (see also
    /// [`Device::set_netdev`]). ib_core calls [`Operations`] (`query_device`,
    /// `get_port_immutable`, and for RoCE ports `add_gid`) before this returns.
    ///
    /// # Errors
    ///
    /// `ENOMEM` when the allocation fails; the data's initialisation error; ib_core's error.
    pub fn new(
        parent: &device::Device<Bound>,
        owner: &ThisModule,
        name: &CStr,
        config: Config<'_>,
        data: impl PinInit<T, Error>,
    ) -> Result<Self> {
        let Config {
            ports,
            comp_vectors,
            netdev,
            cq_numbers,
            qp_numbers,
            srq_numbers,
            node_guid,
        } = config;
        let objects = try_pin_init!(Objects::<T> {
            cqs <- Table::new(cq_numbers)?,
            qps <- Table::new(qp_numbers)?,
            srqs <- Table::new(srq_numbers)?,
        });
        // SAFETY: `init_net` is a static that lives forever; the size covers `struct ib_device`,
        // which is the first field of `Device<T>`.
        let ib = unsafe {
            bindings::_ib_alloc_device(
                core::mem::size_of::<Device<T>>(),
                &raw mut bindings::init_net,
            )
        };
        let dev = NonNull::new(ib.cast::<Device<T>>()).ok_or(ENOMEM)?;
        let handle = match DeviceHandle::new() {
            Ok(handle) => handle,
            Err(e) => {
                // SAFETY: The device was allocated above and never registered.
                unsafe { bindings::ib_dealloc_device(ib) };
                return Err(e);
            }
        };

        // SAFETY: `_ib_alloc_device()` returned a zeroed allocation large and aligned enough for
        // `Device<T>` (kmalloc alignment); `data` is not initialised yet.
        // SAFETY: As above, for the object tables, which are pinned in the allocation.
        if let Err(e) = unsafe { objects.__init(&raw mut (*dev.as_ptr()).objects) } {
            // SAFETY: The device was allocated above and never registered.
            unsafe { bindings::ib_dealloc_device(ib) };
            return Err(e);
        }
        if let Err(e) = unsafe { data.__init(&raw mut (*dev.as_ptr()).data) } {
            // SAFETY: The device was allocated above and never registered; the tables were
            // initialised and are dropped once.
            unsafe {
                ptr::drop_in_place(&raw mut (*dev.as_ptr()).objects);
                bindings::ib_dealloc_device(ib);
            }
            return Err(e);
        }

        let ops = Callbacks::<T>::ops(owner);
        // SAFETY: `ib` is a valid, unregistered device that only we know; `ib_set_device_ops`
        // copies the table.
        unsafe {
            (*ib).phys_port_cnt = ports;
            (*ib).node_type = bindings::RDMA_NODE_IB_CA as u8;
            // `__be64`: the bytes in network order.
            (*ib).node_guid = u64::from_ne_bytes(node_guid.to_be_bytes());
            (*ib).num_comp_vectors = comp_vectors.max(1).try_into().unwrap_or(i32::MAX);
            (*ib).__bindgen_anon_1.dev.parent = parent.as_raw();
            bindings::ib_set_device_ops(ib, &ops);
        }
        let associated = match netdev {
            // SAFETY: `ib` is valid; ib_core takes its own reference to the netdev.
            Some((port, ndev)) => {
                to_result(unsafe { bindings::ib_device_set_netdev(ib, ndev.as_raw(), port) })
            }
            None => Ok(()),
        };
        if let Err(e) = associated {
            // SAFETY: As below for a failed registration.
            unsafe {
                ptr::drop_in_place(&raw mut (*dev.as_ptr()).data);
                ptr::drop_in_place(&raw mut (*dev.as_ptr()).objects);
                bindings::ib_dealloc_device(ib);
            }
            return Err(e);
        }

        // SAFETY: `ib` is fully set up; `parent` is a bound device that outlives the registration
        // (the registration is dropped before the parent is unbound, or leaked with `T: 'static`).
        let ret = unsafe { bindings::ib_register_device(ib, name.as_char_ptr(), parent.as_raw()) };
        if let Err(e) = to_result(ret) {
            // SAFETY: Registration failed, so ib_core does not call us any more; the data was
            // initialised above and is dropped once, then the unregistered device is freed.
            unsafe {
                ptr::drop_in_place(&raw mut (*dev.as_ptr()).data);
                ptr::drop_in_place(&raw mut (*dev.as_ptr()).objects);
                bindings::ib_dealloc_device(ib);
            }
            return Err(e);
        }

        handle.0.set(Some(dev));
        // INVARIANT: The device is allocated, its data initialised and it is registered.
        let this = Self { dev, handle };
        // Should the registration outlive the binding of `parent` (leaked, or kept by mistake),
        // the device is unregistered when `parent` is unbound: callbacks never run with an
        // unbound parent, which is what makes `Device::parent()` sound.
        crate::devres::register(parent, UnbindGuard(this.handle()), GFP_KERNEL)?;
        Ok(this)
    }

    /// A handle that reaches the device while it is registered, for `'static` contexts.
    pub fn handle(&self) -> DeviceHandle<T> {
        self.handle.clone()
    }

    /// The registered device.
    pub fn device(&self) -> &Device<T> {
        // SAFETY: By the type invariant the device is alive while `self` is.
        unsafe { self.dev.as_ref() }
    }
}

/// Unregisters a device whose registration is still alive when its parent is unbound.
struct UnbindGuard<T: Operations>(DeviceHandle<T>);

impl<T: Operations> Drop for UnbindGuard<T> {
    fn drop(&mut self) {
        let ib = {
            let guard = self.0 .0.sleeping.lock();
            let Some(ptr) = guard.as_ref() else {
                return;
            };
            let ib = ptr.0.as_ptr().cast::<bindings::ib_device>();
            // SAFETY: The device is registered (the pointer is set); the reference keeps the
            // allocation alive until `put_device` below, whatever the registration does.
            unsafe { bindings::get_device(&raw mut (*ib).__bindgen_anon_1.dev) };
            ib
        };
        // SAFETY: `ib` is alive (reference above). `ib_unregister_device()` serialises with
        // the registration's own call, which waits for this one before dropping the data.
        unsafe {
            bindings::ib_unregister_device(ib);
            bindings::put_device(&raw mut (*ib).__bindgen_anon_1.dev);
        }
    }
}

impl<T: Operations> Drop for Registration<T> {
    fn drop(&mut self) {
        // From here on handles no longer reach the device (this waits for those that do).
        self.handle.0.set(None);
        let ib = self.device().as_raw();
        // SAFETY: By the type invariant the device was registered. `ib_unregister_device()`
        // waits until every client has let go and no operation runs any more (and for an
        // unregistration the unbind guard started); then the data is dropped once and the
        // allocation freed.
        unsafe {
            bindings::ib_unregister_device(ib);
            ptr::drop_in_place(&raw mut (*self.dev.as_ptr()).data);
            ptr::drop_in_place(&raw mut (*self.dev.as_ptr()).objects);
            bindings::ib_dealloc_device(ib);
        }
    }
}

// SAFETY: The registration can be dropped from any thread; `T` is `Send + Sync`.
unsafe impl<T: Operations> Send for Registration<T> {}
// SAFETY: Shared access only hands out `&Device<T>`, which is `Sync`.
unsafe impl<T: Operations> Sync for Registration<T> {}

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
