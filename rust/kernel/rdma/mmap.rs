// SPDX-License-Identifier: GPL-2.0

//! Memory a user context maps with `mmap()` (`struct rdma_user_mmap_entry`): doorbell pages,
//! queue memory the driver allocated for a process.
//!
//! The driver inserts an entry in a [`Ucontext`] ([`Ucontext::insert_mmap`]) and tells userspace
//! the [`MmapHandle::offset`] to pass to `mmap()`; ib_core then calls [`Operations::mmap`] with
//! the entry that offset names. Dropping the handle removes the entry; mappings that exist keep
//! it alive until they are unmapped, then ib_core frees it (`mmap_free`).

use crate::{
    bindings,
    error::from_result,
    ffi::c_ulong,
    prelude::*,
    rdma::{
        Operations,
        Ucontext, //
    },
    types::Opaque,
};
use core::{
    marker::PhantomData,
    ptr::NonNull, //
};

/// An mmap entry: ib_core's part followed by the driver's data (what to map).
///
/// Dereferences to the driver's data.
///
/// # Invariants
///
/// Allocated as a `KBox<Self>` by [`Ucontext::insert_mmap`] and inserted in a user context;
/// freed by `mmap_free` once ib_core lets go of it.
#[repr(C)]
pub struct MmapEntry<T: Operations> {
    entry: Opaque<bindings::rdma_user_mmap_entry>,
    data: T::MmapEntry,
}

impl<T: Operations> core::ops::Deref for MmapEntry<T> {
    type Target = T::MmapEntry;

    fn deref(&self) -> &T::MmapEntry {
        &self.data
    }
}

/// An inserted entry; dropping it removes the entry from its context.
///
/// # Invariants
///
/// `entry` was inserted in a user context and not removed yet.
pub struct MmapHandle<T: Operations> {
    entry: NonNull<MmapEntry<T>>,
}

// SAFETY: ib_core's entry functions may be called from any thread; the data is `Send + Sync`.
unsafe impl<T: Operations> Send for MmapHandle<T> {}
// SAFETY: As above; `&MmapHandle` only reads the offset.
unsafe impl<T: Operations> Sync for MmapHandle<T> {}

impl<T: Operations> MmapHandle<T> {
    /// The offset userspace passes to `mmap()` for this entry.
    pub fn offset(&self) -> u64 {
        // SAFETY: By the type invariant the entry is inserted (and so alive).
        unsafe { bindings::rdma_user_mmap_get_offset(self.entry.as_ptr().cast()) }
    }
}

impl<T: Operations> Drop for MmapHandle<T> {
    fn drop(&mut self) {
        // SAFETY: By the type invariant the entry is inserted; this removes the driver's
        // reference, after which ib_core frees it through `mmap_free` when unmapped.
        unsafe { bindings::rdma_user_mmap_entry_remove(self.entry.as_ptr().cast()) };
    }
}

impl<T: Operations> Ucontext<T> {
    /// Inserts an entry of `length` bytes (whole pages) whose mapping `Operations::mmap`
    /// makes from `data`.
    ///
    /// # Errors
    ///
    /// `ENOMEM`, or ib_core's error (no offset left).
    pub fn insert_mmap(&self, data: T::MmapEntry, length: usize) -> Result<MmapHandle<T>> {
        // SAFETY: The context is alive (`&self`) and of a `T` device.
        unsafe { insert_mmap::<T>(self.as_raw(), data, length) }
    }
}

/// Inserts an entry in context `ctx`.
///
/// # Safety
///
/// `ctx` must be a valid context of a device of `T`, for the call.
pub(crate) unsafe fn insert_mmap<T: Operations>(
    ctx: *mut bindings::ib_ucontext,
    data: T::MmapEntry,
    length: usize,
) -> Result<MmapHandle<T>> {
    let boxed = KBox::new(
        MmapEntry::<T> {
            entry: Opaque::zeroed(),
            data,
        },
        GFP_KERNEL,
    )?;
    let raw = KBox::into_raw(boxed);
    // SAFETY: `raw` is a zeroed entry we own; the context is valid (the caller guarantees).
    let ret = unsafe { bindings::rdma_user_mmap_entry_insert(ctx, raw.cast(), length) };
    if let Err(e) = crate::error::to_result(ret) {
        // SAFETY: Not inserted, so still ours alone.
        drop(unsafe { KBox::from_raw(raw) });
        return Err(e);
    }
    // INVARIANT: Inserted above. `KBox::into_raw` never returns NULL.
    Ok(MmapHandle {
        entry: NonNull::new(raw).ok_or(EINVAL)?,
    })
}

/// An `mmap()` of a user context, for the entry its offset names.
pub struct MmapRequest<'a> {
    ctx: *mut bindings::ib_ucontext,
    vma: *mut bindings::vm_area_struct,
    entry: *mut bindings::rdma_user_mmap_entry,
    _p: PhantomData<&'a mut ()>,
}

impl MmapRequest<'_> {
    /// Bytes the process maps.
    pub fn len(&self) -> usize {
        // SAFETY: ib_core passes a valid VMA, with the mmap lock held, for the call.
        let vma = unsafe { crate::mm::virt::VmaRef::from_raw(self.vma) };
        vma.end() - vma.start()
    }

    /// Whether nothing is mapped.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Maps `size` bytes of device memory at page frame `pfn` (a doorbell page of a BAR),
    /// uncached; ib_core zaps the mapping when the context goes away.
    pub fn map_io(&mut self, pfn: u64, size: usize) -> Result {
        // SAFETY: All pointers are those of this `mmap()` call; ib_core checks the size against
        // the VMA and the entry.
        let ret = unsafe {
            let prot = bindings::rdma_pgprot_noncached((*self.vma).vm_page_prot);
            bindings::rdma_user_mmap_io(
                self.ctx,
                self.vma,
                pfn as c_ulong,
                size as c_ulong,
                prot,
                self.entry,
            )
        };
        crate::error::to_result(ret)
    }
}

/// `struct ib_device_ops::mmap` for `T`.
///
/// # Safety
///
/// Only ib_core calls it, through the ops table of a device registered with `T`'s
/// [`Operations`], with the arguments of that callback.
pub(crate) unsafe extern "C" fn mmap<T: Operations>(
    ctx: *mut bindings::ib_ucontext,
    vma: *mut bindings::vm_area_struct,
) -> c_int {
    from_result(|| {
        // SAFETY: `ctx` and `vma` are valid for the call; the entry, if any, is referenced
        // until the `put` below.
        let entry = unsafe { bindings::rdma_user_mmap_entry_get(ctx, vma) };
        if entry.is_null() {
            return Err(EINVAL);
        }
        let mut request = MmapRequest {
            ctx,
            vma,
            entry,
            _p: PhantomData,
        };
        // SAFETY: Entries of our contexts are `MmapEntry<T>` (inserted by `insert_mmap`), and
        // the context is one of ours.
        let result = unsafe {
            T::mmap(
                Ucontext::from_raw(ctx),
                &*entry.cast::<MmapEntry<T>>(),
                &mut request,
            )
        };
        // SAFETY: Drops the reference `rdma_user_mmap_entry_get` took.
        unsafe { bindings::rdma_user_mmap_entry_put(entry) };
        result?;
        Ok(0)
    })
}

/// `struct ib_device_ops::mmap_free` for `T`.
///
/// # Safety
///
/// Only ib_core calls it, through the ops table of a device registered with `T`'s
/// [`Operations`], with the arguments of that callback.
pub(crate) unsafe extern "C" fn mmap_free<T: Operations>(
    entry: *mut bindings::rdma_user_mmap_entry,
) {
    // SAFETY: The last reference is gone; the entry was allocated by `insert_mmap`.
    drop(unsafe { KBox::from_raw(entry.cast::<MmapEntry<T>>()) });
}
