// SPDX-License-Identifier: GPL-2.0

//! On-demand paging user memory (`struct ib_umem_odp`): a range of a process's address space
//! that is not pinned. The device faults pages in when it needs them ([`UmemOdp::map`]), and
//! the MMU interval notifier tells the driver when the process's mapping of a range changes
//! ([`OdpHandler::invalidate`]), after which the device must reach none of its pages.
//!
//! C header: [`include/rdma/ib_umem_odp.h`](srctree/include/rdma/ib_umem_odp.h).

use crate::{
    bindings,
    error::{from_err_ptr, to_result},
    prelude::*,
    rdma::{
        AccessFlags,
        Device,
        Operations, //
    },
    sync::Arc,
};
use core::{marker::PhantomData, ops::Range, ptr::NonNull};

/// What a driver does when the process's mapping of part of an on-demand umem goes away.
pub trait OdpHandler<T: Operations>: Send + Sync + Sized {
    /// The pages of user addresses `range` (page-aligned, within the umem) are being unmapped:
    /// when this returns, the device must reach none of them (it may keep using the others).
    ///
    /// Runs with the umem's mutex held, so no [`UmemOdp::map`] of this umem runs meanwhile;
    /// it may sleep.
    fn invalidate(dev: &Device<T>, handler: &Self, range: Range<u64>);
}

/// A process's memory that the device reaches page by page, faulting pages in on demand.
///
/// # Invariants
///
/// `ptr` is an on-demand umem returned by `ib_umem_odp_get()` for a device of type `T`, with
/// `UmemOdp::OPS` as its notifier operations, released only on drop. Its `private` pointer
/// is null or `Arc::as_ptr(&self.handler)`, set under its mutex.
pub struct UmemOdp<T: Operations, H: OdpHandler<T>> {
    ptr: NonNull<bindings::ib_umem_odp>,
    handler: Arc<H>,
    _device: PhantomData<T>,
}

// SAFETY: The umem's mutable state is guarded by its mutex, which every method takes; the
// handler is `Send + Sync`.
unsafe impl<T: Operations, H: OdpHandler<T>> Send for UmemOdp<T, H> {}
// SAFETY: As above.
unsafe impl<T: Operations, H: OdpHandler<T>> Sync for UmemOdp<T, H> {}

impl<T: Operations, H: OdpHandler<T>> UmemOdp<T, H> {
    const OPS: bindings::mmu_interval_notifier_ops = bindings::mmu_interval_notifier_ops {
        invalidate: Some(Self::invalidate_callback),
        // SAFETY: The other members are optional function pointers: `None` is all zeroes.
        ..unsafe { core::mem::zeroed() }
    };

    /// Registers `len` bytes of the calling process at `addr` (`access` must include
    /// [`AccessFlag::OnDemand`](crate::rdma::AccessFlag::OnDemand)) for on-demand paging by
    /// `dev`; `handler` hears of invalidations until the umem is dropped.
    ///
    /// # Errors
    ///
    /// `EINVAL` for an empty or overflowing range or without on-demand access; `ENOMEM`,
    /// `EOPNOTSUPP` (a device that cannot map pages this way) or another error from ib_core.
    pub fn get(
        dev: &Device<T>,
        addr: u64,
        len: usize,
        access: AccessFlags,
        handler: Arc<H>,
    ) -> Result<Self> {
        if len == 0 || addr.checked_add(len as u64).is_none() {
            return Err(EINVAL);
        }
        let addr = usize::try_from(addr)?;
        let access = c_int::try_from(u32::from(access))?;
        // SAFETY: `dev` is a registered device; the verb runs in the context of the process
        // whose memory this is, as `ib_umem_odp_get()` requires; `OPS` is a constant that
        // outlives the umem.
        let ptr = from_err_ptr(unsafe {
            bindings::ib_umem_odp_get(dev.as_raw(), addr, len, access, &Self::OPS)
        })?;
        let ptr = NonNull::new(ptr).ok_or(ENOMEM)?;
        // SAFETY: `ptr` is a live umem; the notifier may already run, so `private` is set
        // under the mutex it takes.
        unsafe {
            bindings::mutex_lock(&raw mut (*ptr.as_ptr()).umem_mutex);
            (*ptr.as_ptr()).private = Arc::as_ptr(&handler).cast_mut().cast();
            bindings::mutex_unlock(&raw mut (*ptr.as_ptr()).umem_mutex);
        }
        // INVARIANT: A successful `ib_umem_odp_get()` with `OPS`; `private` set as stated.
        Ok(Self {
            ptr,
            handler,
            _device: PhantomData,
        })
    }

    /// The handler given at creation.
    pub fn handler(&self) -> &Arc<H> {
        &self.handler
    }

    /// The first user address of the umem's first page.
    pub fn start(&self) -> u64 {
        // SAFETY: By the type invariant the umem is valid; the helper only reads.
        unsafe { bindings::ib_umem_start(self.ptr.as_ptr()) as u64 }
    }

    /// The user address after the umem's last page.
    pub fn end(&self) -> u64 {
        // SAFETY: As above.
        unsafe { bindings::ib_umem_end(self.ptr.as_ptr()) as u64 }
    }

    /// log2 of the umem's page size (the CPU's pages, or huge pages).
    pub fn page_shift(&self) -> u32 {
        // SAFETY: By the type invariant the umem is valid; `page_shift` never changes.
        unsafe { (*self.ptr.as_ptr()).page_shift }
    }

    /// The number of pages between [`start`](Self::start) and [`end`](Self::end).
    pub fn num_pages(&self) -> usize {
        ((self.end() - self.start()) >> self.page_shift()) as usize
    }

    /// Whether the process registered the memory for the device to write.
    pub fn writable(&self) -> bool {
        // SAFETY: By the type invariant the umem is valid; `writable` is set at creation.
        unsafe { (*self.ptr.as_ptr()).umem.writable() != 0 }
    }

    /// Makes the pages of `len` bytes at user address `addr` present for the device: faults
    /// them in (writable if `write`), or, without `fault`, takes those the process has mapped
    /// now. Returns the range's pages, which stay as they are (no invalidation completes)
    /// until the [`OdpPages`] is dropped.
    ///
    /// # Errors
    ///
    /// `EFAULT` outside the umem or where the process has no memory, `EPERM` for a write the
    /// mapping does not allow, `EINVAL` once the process is gone, or another error of
    /// `hmm_range_fault()`.
    pub fn map(&self, addr: u64, len: u64, write: bool, fault: bool) -> Result<OdpPages<'_, T, H>> {
        if len == 0 || addr < self.start() || addr.checked_add(len).is_none_or(|e| e > self.end()) {
            return Err(EFAULT);
        }
        let access = if write {
            bindings::hmm_pfn_flags_HMM_PFN_WRITE as u64
        } else {
            0
        };
        // SAFETY: By the type invariant the umem is valid; we hold no lock of it and sleep
        // here is allowed (a verb or a work item).
        let count = unsafe {
            bindings::ib_umem_odp_map_dma_and_lock(self.ptr.as_ptr(), addr, len, access, fault)
        };
        let count = usize::try_from(to_result(count).map(|()| count)?)?;
        let shift = self.page_shift();
        // INVARIANT: The call returned with the mutex held, which `OdpPages` releases.
        Ok(OdpPages {
            umem: self,
            first: ((addr - self.start()) >> shift) as usize,
            count,
        })
    }

    /// Runs `f` with the umem's mutex held: no invalidation and no [`map`](Self::map) of the
    /// umem runs meanwhile. `f` must not map the umem.
    pub fn locked<R>(&self, f: impl FnOnce() -> R) -> R {
        let mutex = self.mutex();
        // SAFETY: By the type invariant the umem and its mutex are valid; we do not hold it.
        unsafe { bindings::mutex_lock(mutex) };
        let r = f();
        // SAFETY: Taken above.
        unsafe { bindings::mutex_unlock(mutex) };
        r
    }

    fn mutex(&self) -> *mut bindings::mutex {
        // SAFETY: By the type invariant the umem is valid; only the field's address is taken.
        unsafe { &raw mut (*self.ptr.as_ptr()).umem_mutex }
    }

    /// The `invalidate` callback of the umems' `mmu_interval_notifier_ops`.
    ///
    /// # Safety
    ///
    /// Only the MMU notifier calls it, with `mni` the `notifier` of one of our ODP umems and
    /// `range` the range being invalidated.
    unsafe extern "C" fn invalidate_callback(
        mni: *mut bindings::mmu_interval_notifier,
        range: *const bindings::mmu_notifier_range,
        cur_seq: c_ulong,
    ) -> bool {
        // SAFETY: `mni` is the `notifier` of one of our umems (only they use `OPS`).
        let odp = unsafe { crate::container_of!(mni, bindings::ib_umem_odp, notifier) };
        // SAFETY: `range` is valid for the call.
        if !unsafe { bindings::mmu_notifier_range_blockable(range) } {
            return false;
        }
        // SAFETY: The umem is live while its notifier is registered; its mutex orders us with
        // `map` and with the setting of `private`.
        unsafe {
            bindings::mutex_lock(&raw mut (*odp).umem_mutex);
            bindings::mmu_interval_set_seq(mni, cur_seq);
            let start = bindings::ib_umem_start(odp).max((*range).start) as u64;
            let end = bindings::ib_umem_end(odp).min((*range).end) as u64;
            let handler = (*odp).private.cast::<H>().cast_const();
            if start < end {
                if !handler.is_null() {
                    // The umem was made by `get` for a `Device<T>`, which outlives its MRs.
                    H::invalidate(
                        Device::<T>::from_raw((*odp).umem.ibdev),
                        &*handler,
                        start..end,
                    );
                }
                bindings::ib_umem_odp_unmap_dma_pages(odp, start, end);
            }
            bindings::mutex_unlock(&raw mut (*odp).umem_mutex);
        }
        true
    }
}

impl<T: Operations, H: OdpHandler<T>> Drop for UmemOdp<T, H> {
    fn drop(&mut self) {
        // SAFETY: By the type invariant the umem is valid and released only here; its owner
        // made sure the device no longer reaches it. Release removes the notifier (waiting for
        // a callback that runs), so the handler is not used after it, and is dropped after.
        unsafe { bindings::ib_umem_odp_release(self.ptr.as_ptr()) };
    }
}

/// Pages of an [`UmemOdp`] made present by [`UmemOdp::map`]: no invalidation of the umem
/// completes while this lives (it holds the umem's mutex).
///
/// # Invariants
///
/// The caller of `ib_umem_odp_map_dma_and_lock()` holds `umem`'s mutex; `first + count` pages
/// lie within the umem.
pub struct OdpPages<'a, T: Operations, H: OdpHandler<T>> {
    umem: &'a UmemOdp<T, H>,
    first: usize,
    count: usize,
}

impl<T: Operations, H: OdpHandler<T>> OdpPages<'_, T, H> {
    /// The index of the first page (from the umem's first).
    pub fn first(&self) -> usize {
        self.first
    }

    /// How many pages.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Page `i` of the range (`0..count`): its DMA address for the device and whether it is
    /// mapped writable, or `None` if the process has no page there (a map without fault).
    ///
    /// # Errors
    ///
    /// `EINVAL` for `i` outside the range, `EFAULT` if the page cannot be mapped for DMA.
    pub fn page(&mut self, i: usize) -> Result<Option<(u64, bool)>> {
        if i >= self.count {
            return Err(EINVAL);
        }
        let idx = self.first + i;
        let odp = self.umem.ptr.as_ptr();
        let valid = bindings::hmm_pfn_flags_HMM_PFN_VALID as c_ulong;
        let writable = bindings::hmm_pfn_flags_HMM_PFN_WRITE as c_ulong;
        let mapped = bindings::hmm_pfn_flags_HMM_PFN_DMA_MAPPED as c_ulong;
        // SAFETY: By the type invariant we hold the umem's mutex, which guards its pfn list,
        // and `idx` is within it.
        unsafe {
            let pfn = (*odp).map.pfn_list.add(idx).read();
            if pfn & valid == 0 {
                return Ok(None);
            }
            let dev = (*odp).umem.ibdev;
            let mut p2p: bindings::pci_p2pdma_map_state = core::mem::zeroed();
            let addr =
                bindings::hmm_dma_map_pfn((*dev).dma_device, &raw mut (*odp).map, idx, &mut p2p);
            if bindings::ib_dma_mapping_error(dev, addr) != 0 {
                return Err(EFAULT);
            }
            // ib_core counts the pages it will unmap.
            if pfn & mapped == 0 && (*odp).map.pfn_list.add(idx).read() & mapped != 0 {
                (*odp).npages += 1;
            }
            Ok(Some((addr, pfn & writable != 0)))
        }
    }
}

impl<T: Operations, H: OdpHandler<T>> Drop for OdpPages<'_, T, H> {
    fn drop(&mut self) {
        // SAFETY: By the type invariant we hold the mutex.
        unsafe { bindings::mutex_unlock(self.umem.mutex()) };
    }
}
