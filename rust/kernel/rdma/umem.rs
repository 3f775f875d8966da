// SPDX-License-Identifier: GPL-2.0

//! Pinned user memory (`struct ib_umem`): buffers of a process that the device reaches by DMA,
//! such as the memory of a user MR or the rings and doorbell records of user queues.
//!
//! C header: [`include/rdma/ib_umem.h`](srctree/include/rdma/ib_umem.h).

use crate::{
    bindings,
    error::from_err_ptr,
    prelude::*,
    rdma::{
        AccessFlags,
        Device,
        Operations, //
    },
};
use core::ptr::NonNull;

/// Pages of the calling process, pinned and mapped for DMA by the RDMA device.
///
/// # Invariants
///
/// `ptr` is a umem returned by `ib_umem_get_va()`, released only on drop.
pub struct Umem {
    ptr: NonNull<bindings::ib_umem>,
}

// SAFETY: A umem is plain data once created; `ib_umem_release()` may run on any thread.
unsafe impl Send for Umem {}
// SAFETY: `&Umem` only reads the immutable description and walks its scatterlist.
unsafe impl Sync for Umem {}

impl Umem {
    /// Pins `len` bytes of the current process at `addr` for `dev`, with the rights `access`
    /// (writable if the device may write them).
    ///
    /// # Errors
    ///
    /// `EINVAL` for an empty or overflowing range, `EFAULT`/`ENOMEM` (or other) from ib_core.
    pub fn get<T: Operations>(
        dev: &Device<T>,
        addr: u64,
        len: usize,
        access: AccessFlags,
    ) -> Result<Self> {
        if len == 0 || addr.checked_add(len as u64).is_none() {
            return Err(EINVAL);
        }
        let addr = usize::try_from(addr)?;
        let access = c_int::try_from(u32::from(access))?;
        // SAFETY: `dev` is a registered device; ib_core pins memory of the calling process
        // (the verb runs in its context) and returns a umem or an error pointer.
        let ptr =
            from_err_ptr(unsafe { bindings::ib_umem_get_va(dev.as_raw(), addr, len, access) })?;
        // INVARIANT: A successful `ib_umem_get_va()`.
        Ok(Self {
            ptr: NonNull::new(ptr).ok_or(ENOMEM)?,
        })
    }

    /// Bytes pinned.
    pub fn len(&self) -> usize {
        // SAFETY: By the type invariant the umem is valid.
        unsafe { (*self.ptr.as_ptr()).length }
    }

    /// Whether the umem is empty (never, once created).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The user address the umem starts at.
    pub fn address(&self) -> u64 {
        // SAFETY: By the type invariant the umem is valid.
        unsafe { (*self.ptr.as_ptr()).address as u64 }
    }

    /// The number of `page_size` blocks (a power of two) covering the umem.
    pub fn num_blocks(&self, page_size: usize) -> usize {
        // SAFETY: By the type invariant the umem is valid; the helper only computes.
        unsafe { bindings::ib_umem_num_dma_blocks(self.ptr.as_ptr(), page_size) }
    }

    /// The DMA addresses of the umem's `page_size` blocks, in order (`page_size` a power of
    /// two of at least `PAGE_SIZE`).
    ///
    /// # Errors
    ///
    /// `EINVAL` if `page_size` is not such a size.
    pub fn dma_blocks(&self, page_size: usize) -> Result<DmaBlocks<'_>> {
        if !page_size.is_power_of_two() || page_size < crate::page::PAGE_SIZE {
            return Err(EINVAL);
        }
        // SAFETY: `ib_block_iter` is plain data; all zeroes is a valid (unstarted) value.
        let mut iter: bindings::ib_block_iter = unsafe { core::mem::zeroed() };
        // SAFETY: By the type invariant the umem is valid; `iter` is ours to set up.
        unsafe { bindings::__rdma_umem_block_iter_start(&mut iter, self.ptr.as_ptr(), page_size) };
        Ok(DmaBlocks { iter, _umem: self })
    }
}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: By the type invariant the umem is valid and released only here; the device
        // no longer reaches it (its owner destroyed what used it before dropping it).
        unsafe { bindings::ib_umem_release(self.ptr.as_ptr()) };
    }
}

/// The DMA addresses of a [`Umem`]'s blocks (`rdma_umem_for_each_dma_block`).
pub struct DmaBlocks<'a> {
    iter: bindings::ib_block_iter,
    _umem: &'a Umem,
}

impl Iterator for DmaBlocks<'_> {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        // SAFETY: `iter` was started on the umem, which `_umem` keeps alive and unchanged.
        unsafe {
            if bindings::__rdma_umem_block_iter_next(&mut self.iter) {
                Some(bindings::rdma_block_iter_dma_address(&mut self.iter))
            } else {
                None
            }
        }
    }
}
