// SPDX-License-Identifier: GPL-2.0

//! The operations an RDMA device driver implements ([`Operations`]).

use super::*;

/// The number ib_core and rdma-core know a driver by (`enum rdma_driver_id`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum DriverId {
    /// A driver without a number of its own (`RDMA_DRIVER_UNKNOWN`); its user-space provider
    /// matches the device by other means (for ferroce, the PCI ID).
    Unknown = bindings::rdma_driver_id_RDMA_DRIVER_UNKNOWN,
}

impl From<DriverId> for bindings::rdma_driver_id {
    fn from(id: DriverId) -> Self {
        id as Self
    }
}

/// The operations of an RDMA device driver.
///
/// `Self` is the driver's data of one device; ib_core calls these with the [`Device`] that holds
/// it, from any thread and concurrently. Only what is implemented is given to ib_core.
#[vtable]
pub trait Operations: Sized + Send + Sync + 'static {
    /// The driver's number.
    const DRIVER_ID: DriverId;
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

    // Verbs objects. ib_core allocates PDs, CQs, QPs, AHs, SRQs, MWs and user contexts with room
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
    /// The driver's data of an XRC domain.
    type Xrcd: Send + Sync;
    /// The driver's data of an address handle.
    type Ah: Send + Sync;
    /// The driver's data of a memory region.
    type Mr: Send + Sync;
    /// The driver's data of a memory window.
    type Mw: Send + Sync;
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

    /// Allocates an XRC domain (ib_core shares it between the processes that open it).
    fn alloc_xrcd(_dev: &Device<Self>, _udata: Option<&mut Udata<'_>>) -> Result<Self::Xrcd> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Releases an XRC domain no SRQ or QP uses any more (its data is dropped afterwards).
    fn dealloc_xrcd(_xrcd: &Xrcd<Self>, _udata: Option<&mut Udata<'_>>) -> Result {
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

    /// Gives a process's CQ room for at least `entries` completions, keeping those it holds
    /// (`ibv_resize_cq`; `udata` carries the provider's new ring). Returns the entries it has
    /// now. Kernel CQs are not resized (ib_core has no such verb).
    fn resize_user_cq(_cq: &Cq<Self>, _entries: u32, _udata: &mut Udata<'_>) -> Result<u32> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Creates a QP in `pd`; reports the queue sizes through `init`. An XRC_TGT QP has no PD
    /// (`None`): its domain is [`QpInit::xrcd`], and ib_core passes no `udata` for it even when a
    /// process asked for it (the QP is shared by the processes that open it and outlives its
    /// creator).
    fn create_qp(
        _dev: &Device<Self>,
        _pd: Option<&Pd<Self>>,
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

    /// Attaches a UD QP to the multicast group `mgid` (network order): datagrams sent to the
    /// group reach it. ib_core checks the QP type and the GID, and uverbs does not attach a
    /// QP twice; both run in process context.
    fn attach_mcast(_qp: &Qp<Self>, _mgid: &[u8; 16]) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Detaches a QP from the multicast group `mgid`.
    fn detach_mcast(_qp: &Qp<Self>, _mgid: &[u8; 16]) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
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

    /// Creates an SRQ of `kind` in `pd`; reports its sizes through `attr`.
    fn create_srq(
        _dev: &Device<Self>,
        _pd: &Pd<Self>,
        _kind: SrqKind<'_, Self>,
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

    /// Creates an address handle in `pd`. Unless `sleepable`, this runs in atomic context and
    /// must not sleep (ib_cm creates AHs under spinlocks); a process's (`udata`) always may.
    fn create_ah(
        _dev: &Device<Self>,
        _pd: &Pd<Self>,
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
    fn get_dma_mr(_pd: &Pd<Self>, _access: AccessFlags) -> Result<NewMr<Self::Mr>> {
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
        _access: AccessFlags,
        _udata: Option<&mut Udata<'_>>,
    ) -> Result<NewMr<Self::Mr>> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Makes the pages of `sges` (in on-demand MRs of `pd`) present for the device ahead of
    /// use (`ibv_advise_mr()`): faulted in, writable for
    /// [`AdviseMr::PrefetchWrite`](crate::rdma::AdviseMr::PrefetchWrite), or only those the
    /// process has mapped for
    /// [`AdviseMr::PrefetchNoFault`](crate::rdma::AdviseMr::PrefetchNoFault). With `flush`,
    /// the pages are present when it returns; otherwise it may return before.
    fn advise_mr(
        _pd: &Pd<Self>,
        _advice: crate::rdma::AdviseMr,
        _flush: bool,
        _sges: &[crate::rdma::wr::Sge],
    ) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Deregisters an MR (its data is dropped afterwards).
    fn dereg_mr(_mr: &Mr<Self>, _udata: Option<&mut Udata<'_>>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Creates an unbound memory window of `mw_type` in `pd` (`ibv_alloc_mw()`).
    fn alloc_mw(
        _pd: &Pd<Self>,
        _mw_type: MwType,
        _udata: Option<&mut Udata<'_>>,
    ) -> Result<NewMw<Self::Mw>> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Destroys a memory window, bound or not (its data is dropped afterwards).
    fn dealloc_mw(_mw: &Mw<Self>) -> Result {
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

    /// Cuts a context off its device while the process still has it open (the device is going
    /// away: unbind, hot unplug). ib_core has zapped the process's mappings (all made through
    /// [`MmapRequest`], `rdma_user_mmap_io()`), reports
    /// `IB_EVENT_DEVICE_FATAL` to the process, and destroys its objects and the context after this
    /// returns. Implementing it, even empty, lets the device unregister without waiting for every
    /// process to close it.
    fn disassociate_ucontext(_ctx: &Ucontext<Self>) {}

    /// Maps `entry` into the process (`mmap()` on the uverbs file at the entry's offset).
    fn mmap(
        _ctx: &Ucontext<Self>,
        _entry: &MmapEntry<Self>,
        _request: &mut MmapRequest<'_>,
    ) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
}
