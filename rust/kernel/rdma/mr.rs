// SPDX-License-Identifier: GPL-2.0

//! Memory regions (`struct ib_mr`).
//!
//! Unlike the other verbs objects, drivers allocate MRs themselves: [`Mr`] is a `KBox` given to
//! ib_core at creation and taken back when the MR is deregistered.

use crate::{
    bindings,
    prelude::*,
    rdma::{
        Device,
        Operations,
        Pd,
        Udata, //
    },
    types::Opaque,
};
use core::ptr;

crate::impl_flags!(
    /// Access rights of a memory region, a memory window or a QP's remote peers
    /// (`enum ib_access_flags`).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    pub struct AccessFlags(u32);

    /// One access right.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum AccessFlag {
        /// The device may write the memory locally (`IB_ACCESS_LOCAL_WRITE`).
        LocalWrite = bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE,
        /// Peers may RDMA WRITE it (`IB_ACCESS_REMOTE_WRITE`).
        RemoteWrite = bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE,
        /// Peers may RDMA READ it (`IB_ACCESS_REMOTE_READ`).
        RemoteRead = bindings::ib_access_flags_IB_ACCESS_REMOTE_READ,
        /// Peers may run atomic operations on it (`IB_ACCESS_REMOTE_ATOMIC`).
        RemoteAtomic = bindings::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC,
        /// Memory windows may be bound to it (`IB_ACCESS_MW_BIND`).
        MwBind = bindings::ib_access_flags_IB_ACCESS_MW_BIND,
        /// Addresses count from the region's start (`IB_ZERO_BASED`).
        ZeroBased = bindings::ib_access_flags_IB_ZERO_BASED,
        /// Pages are faulted in on demand (`IB_ACCESS_ON_DEMAND`).
        OnDemand = bindings::ib_access_flags_IB_ACCESS_ON_DEMAND,
        /// The memory is backed by huge pages (`IB_ACCESS_HUGETLB`).
        HugeTlb = bindings::ib_access_flags_IB_ACCESS_HUGETLB,
        /// Peers may flush it to global visibility (`IB_ACCESS_FLUSH_GLOBAL`).
        FlushGlobal = bindings::ib_access_flags_IB_ACCESS_FLUSH_GLOBAL,
        /// Peers may flush it to persistence (`IB_ACCESS_FLUSH_PERSISTENT`).
        FlushPersistent = bindings::ib_access_flags_IB_ACCESS_FLUSH_PERSISTENT,
        /// A hint the device may ignore: writes need not be ordered
        /// (`IB_ACCESS_RELAXED_ORDERING`).
        RelaxedOrdering = bindings::ib_access_flags_IB_ACCESS_RELAXED_ORDERING,
    }
);

impl AccessFlags {
    /// The rights of an `ib_access_flags` value from ib_core; bits this type does not name
    /// (none that ib_core passes today) are dropped.
    pub(crate) fn from_raw(raw: u32) -> Self {
        Self(raw & Self::all_bits())
    }
}

/// A memory region: memory the device may access with its keys.
///
/// Dereferences to the driver's data.
///
/// # Invariants
///
/// `ib` is the core part of an MR of a registered `Device<T>`, allocated as a `KBox<Self>` by
/// this module and owned by ib_core until `dereg_mr`; `data` is initialised.
#[repr(C)]
pub struct Mr<T: Operations> {
    ib: Opaque<bindings::ib_mr>,
    /// The page sink of a running [`SgPages::to_pages`] (a `*mut &mut dyn FnMut`).
    sink: Opaque<*mut c_void>,
    data: T::Mr,
}

impl<T: Operations> core::ops::Deref for Mr<T> {
    type Target = T::Mr;

    fn deref(&self) -> &T::Mr {
        &self.data
    }
}

// SAFETY: ib_core synchronises its part; `sink` is only used during a `map_mr_sg` call, which
// consumers serialise per MR; the driver's data is `Send + Sync`.
unsafe impl<T: Operations> Send for Mr<T> {}
// SAFETY: As above.
unsafe impl<T: Operations> Sync for Mr<T> {}

impl<T: Operations> Mr<T> {
    /// The raw `struct ib_mr`.
    pub fn as_raw(&self) -> *mut bindings::ib_mr {
        self.ib.get()
    }

    /// Returns the MR from a pointer to its core part.
    ///
    /// # Safety
    ///
    /// `ptr` must be the core part of a live `Mr<T>` for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::ib_mr) -> &'a Self {
        // SAFETY: `ib` is the first field of the `repr(C)` struct.
        unsafe { &*ptr.cast::<Self>() }
    }

    /// The device the MR belongs to.
    pub fn device(&self) -> &Device<T> {
        // SAFETY: Set at allocation to the live device.
        unsafe { Device::from_raw((*self.as_raw()).device) }
    }

    /// Local key.
    pub fn lkey(&self) -> u32 {
        // SAFETY: The MR is live (type invariant).
        unsafe { (*self.as_raw()).lkey }
    }

    /// Remote key.
    pub fn rkey(&self) -> u32 {
        // SAFETY: As above.
        unsafe { (*self.as_raw()).rkey }
    }

    /// First address of the region, as requests name it (set by `ib_map_mr_sg()` for
    /// fast-registration MRs).
    pub fn iova(&self) -> u64 {
        // SAFETY: As above.
        unsafe { (*self.as_raw()).iova }
    }

    /// Length of the region in bytes.
    pub fn length(&self) -> u64 {
        // SAFETY: As above.
        unsafe { (*self.as_raw()).length }
    }

    /// Page size of the mapping (fast registration).
    pub fn page_size(&self) -> u32 {
        // SAFETY: As above.
        unsafe { (*self.as_raw()).page_size }
    }
}

/// What `ibv_advise_mr()` asks of on-demand MRs (`enum ib_uverbs_advise_mr_advice`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdviseMr {
    /// Fault the pages in for reading.
    Prefetch,
    /// Fault the pages in for writing.
    PrefetchWrite,
    /// Map the pages the process has now, faulting none.
    PrefetchNoFault,
}

impl AdviseMr {
    fn from_raw(raw: u32) -> Result<Self> {
        Ok(match raw {
            bindings::ib_uverbs_advise_mr_advice_IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH => {
                Self::Prefetch
            }
            bindings::ib_uverbs_advise_mr_advice_IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_WRITE => {
                Self::PrefetchWrite
            }
            bindings::ib_uverbs_advise_mr_advice_IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT => {
                Self::PrefetchNoFault
            }
            // ib_core does not check the advice: an unknown one is not supported.
            _ => return Err(EOPNOTSUPP),
        })
    }
}

/// `struct ib_device_ops::advise_mr` for `T`.
///
/// # Safety
///
/// Only ib_core calls it, through the ops table of a device registered with `T`'s
/// [`Operations`], with the arguments of that callback.
pub(crate) unsafe extern "C" fn advise_mr<T: Operations>(
    pd: *mut bindings::ib_pd,
    advice: bindings::ib_uverbs_advise_mr_advice,
    flags: u32,
    sg_list: *mut bindings::ib_sge,
    num_sge: u32,
    _attrs: *mut bindings::uverbs_attr_bundle,
) -> c_int {
    crate::error::from_result(|| {
        // SAFETY: `pd` is a live PD of ours.
        let pd = unsafe { Pd::<T>::from_raw(pd) };
        let advice = AdviseMr::from_raw(advice)?;
        let flush = flags & bindings::ib_uverbs_advise_mr_flag_IB_UVERBS_ADVISE_MR_FLAG_FLUSH != 0;
        let num = usize::try_from(num_sge)?;
        if num == 0 || sg_list.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: uverbs copied `num_sge` SGEs to `sg_list` for the call; `Sge` is a
        // transparent wrapper of `ib_sge`.
        let sges =
            unsafe { core::slice::from_raw_parts(sg_list.cast::<crate::rdma::wr::Sge>(), num) };
        T::advise_mr(pd, advice, flush, sges)?;
        Ok(0)
    })
}

/// The kind of MR `alloc_mr` asks for (`enum ib_mr_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MrType {
    /// Fast registration of page lists.
    MemReg,
    /// Fast registration of arbitrary scatter/gather lists.
    SgGaps,
    /// Another kind (integrity, device memory…).
    Other(u32),
}

/// A new MR: its keys and the driver's data.
pub struct NewMr<D> {
    /// Local key.
    pub lkey: u32,
    /// Remote key.
    pub rkey: u32,
    /// The driver's data.
    pub data: D,
}

/// Gives a new MR to ib_core.
fn into_raw<T: Operations>(pd: &Pd<T>, mr: NewMr<T::Mr>) -> Result<*mut bindings::ib_mr> {
    let boxed = KBox::new(
        Mr::<T> {
            ib: Opaque::zeroed(),
            sink: Opaque::new(ptr::null_mut()),
            data: mr.data,
        },
        GFP_KERNEL,
    )?;
    let raw = KBox::into_raw(boxed).cast::<bindings::ib_mr>();
    // SAFETY: `raw` is the zeroed core part of the MR we just allocated and own.
    unsafe {
        (*raw).device = pd.device().as_raw();
        (*raw).pd = pd.as_raw();
        (*raw).lkey = mr.lkey;
        (*raw).rkey = mr.rkey;
    }
    Ok(raw)
}

/// Turns a result into what ib_core expects of MR-returning operations.
fn mr_or_err_ptr(result: Result<*mut bindings::ib_mr>) -> *mut bindings::ib_mr {
    match result {
        Ok(mr) => mr,
        Err(e) => e.to_ptr(),
    }
}

/// `struct ib_device_ops::get_dma_mr` for `T`.
///
/// # Safety
///
/// Only ib_core calls it, through the ops table of a device registered with `T`'s
/// [`Operations`], with the arguments of that callback.
pub(crate) unsafe extern "C" fn get_dma_mr<T: Operations>(
    pd: *mut bindings::ib_pd,
    access: c_int,
) -> *mut bindings::ib_mr {
    // SAFETY: `pd` is a live PD of ours.
    let pd = unsafe { Pd::<T>::from_raw(pd) };
    mr_or_err_ptr(
        T::get_dma_mr(pd, AccessFlags::from_raw(access as u32)).and_then(|mr| into_raw(pd, mr)),
    )
}

/// `struct ib_device_ops::reg_user_mr` for `T`.
///
/// # Safety
///
/// Only ib_core calls it, through the ops table of a device registered with `T`'s
/// [`Operations`], with the arguments of that callback.
pub(crate) unsafe extern "C" fn reg_user_mr<T: Operations>(
    pd: *mut bindings::ib_pd,
    start: u64,
    length: u64,
    virt_addr: u64,
    access: c_int,
    _dmah: *mut bindings::ib_dmah,
    udata: *mut bindings::ib_udata,
) -> *mut bindings::ib_mr {
    // SAFETY: `pd` is a live PD of ours; `udata` is valid or NULL.
    let (pd, mut udata) = unsafe { (Pd::<T>::from_raw(pd), Udata::from_raw(udata)) };
    mr_or_err_ptr(
        T::reg_user_mr(
            pd,
            start,
            length,
            virt_addr,
            AccessFlags::from_raw(access as u32),
            udata.as_mut(),
        )
        .and_then(|mr| into_raw(pd, mr)),
    )
}

/// `struct ib_device_ops::alloc_mr` for `T`.
///
/// # Safety
///
/// Only ib_core calls it, through the ops table of a device registered with `T`'s
/// [`Operations`], with the arguments of that callback.
pub(crate) unsafe extern "C" fn alloc_mr<T: Operations>(
    pd: *mut bindings::ib_pd,
    kind: bindings::ib_mr_type,
    max_num_sg: u32,
) -> *mut bindings::ib_mr {
    // SAFETY: `pd` is a live PD of ours.
    let pd = unsafe { Pd::<T>::from_raw(pd) };
    let kind = match kind {
        bindings::ib_mr_type_IB_MR_TYPE_MEM_REG => MrType::MemReg,
        bindings::ib_mr_type_IB_MR_TYPE_SG_GAPS => MrType::SgGaps,
        other => MrType::Other(other),
    };
    mr_or_err_ptr(T::alloc_mr(pd, kind, max_num_sg).and_then(|mr| into_raw(pd, mr)))
}

/// `struct ib_device_ops::dereg_mr` for `T`.
///
/// # Safety
///
/// Only ib_core calls it, through the ops table of a device registered with `T`'s
/// [`Operations`], with the arguments of that callback.
pub(crate) unsafe extern "C" fn dereg_mr<T: Operations>(
    mr: *mut bindings::ib_mr,
    udata: *mut bindings::ib_udata,
) -> c_int {
    // SAFETY: `mr` is one of ours, live until we free it below; `udata` is valid or NULL.
    let (obj, mut udata) = unsafe { (Mr::<T>::from_raw(mr), Udata::from_raw(udata)) };
    if let Err(e) = T::dereg_mr(obj, udata.as_mut()) {
        return e.to_errno();
    }
    // SAFETY: The MR was allocated by `into_raw` as a `KBox<Mr<T>>`; ib_core lets go of it now.
    drop(unsafe { KBox::from_raw(mr.cast::<Mr<T>>()) });
    0
}

/// The scatter/gather list of a `map_mr_sg` call, to be turned into pages.
pub struct SgPages<'a, T: Operations> {
    mr: &'a Mr<T>,
    sg: *mut bindings::scatterlist,
    nents: c_int,
    offset: *mut u32,
}

impl<T: Operations> SgPages<'_, T> {
    /// Splits the list into pages of the MR's page size, giving each page's DMA address to
    /// `set_page` in order (`ib_sg_to_pages()`); sets the MR's IOVA and length.
    ///
    /// Returns the number of list elements mapped: fewer than given when `set_page` failed
    /// (e.g. the MR's page list is full) or the list has gaps the MR cannot express.
    pub fn to_pages(&mut self, mut set_page: impl FnMut(u64) -> Result) -> Result<u32> {
        let mut sink: &mut dyn FnMut(u64) -> Result = &mut set_page;
        // SAFETY: `sink` outlives the call below, which is the only user of the pointer; it
        // is cleared before `sink` goes away.
        unsafe { *self.mr.sink.get() = (&raw mut sink).cast() };
        // SAFETY: `sg`, `nents` and `offset` are what ib_core passed to `map_mr_sg`; the MR is
        // live and ours.
        let n = unsafe {
            bindings::ib_sg_to_pages(
                self.mr.as_raw(),
                self.sg,
                self.nents,
                self.offset,
                Some(set_page_trampoline::<T>),
            )
        };
        // SAFETY: As above.
        unsafe { *self.mr.sink.get() = ptr::null_mut() };
        crate::error::to_result(n)?;
        Ok(n as u32)
    }
}

/// The `set_page` callback of `ib_sg_to_pages()`.
///
/// # Safety
///
/// Only `ib_sg_to_pages()` calls it, from `SgPages::to_pages`, with `mr` the MR whose sink
/// that call set.
unsafe extern "C" fn set_page_trampoline<T: Operations>(
    mr: *mut bindings::ib_mr,
    addr: u64,
) -> c_int {
    // SAFETY: Called by `ib_sg_to_pages()` from `SgPages::to_pages` on our MR.
    let mr = unsafe { Mr::<T>::from_raw(mr) };
    // SAFETY: `to_pages` set the sink to its live `&mut dyn FnMut` for this call.
    let sink = unsafe { &mut *(*mr.sink.get()).cast::<&mut dyn FnMut(u64) -> Result>() };
    match sink(addr) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// `struct ib_device_ops::map_mr_sg` for `T`.
///
/// # Safety
///
/// Only ib_core calls it, through the ops table of a device registered with `T`'s
/// [`Operations`], with the arguments of that callback.
pub(crate) unsafe extern "C" fn map_mr_sg<T: Operations>(
    mr: *mut bindings::ib_mr,
    sg: *mut bindings::scatterlist,
    nents: c_int,
    offset: *mut u32,
) -> c_int {
    // SAFETY: `mr` is a live MR of ours.
    let obj = unsafe { Mr::<T>::from_raw(mr) };
    let mut pages = SgPages {
        mr: obj,
        sg,
        nents,
        offset,
    };
    match T::map_mr_sg(obj, &mut pages) {
        Ok(n) => n.try_into().unwrap_or(c_int::MAX),
        Err(e) => e.to_errno(),
    }
}
