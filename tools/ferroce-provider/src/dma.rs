// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Queue memory shared with the device: page-aligned anonymous mappings that the kernel pins
//! (umem) and the NIC reads and writes by DMA while the provider uses them.
//!
//! The device writes this memory behind the compiler's back, so every access goes through raw
//! pointers (volatile copies, atomics for the bytes that order the rest), never references.

use core::sync::atomic::{AtomicU8, Ordering};

/// Page size of queue buffers (the kernel pins whole pages).
pub(crate) const PAGE_SIZE: usize = 4096;

/// Rounds `n` up to a multiple of `align` (a power of two); `None` on overflow.
pub(crate) fn align_up(n: usize, align: usize) -> Option<usize> {
    Some(n.checked_add(align - 1)? & !(align - 1))
}

/// A zeroed, page-aligned buffer of whole pages, unmapped on drop.
///
/// # Invariants
///
/// `ptr` is the start of a private anonymous read/write mapping of `len` bytes (a non-zero
/// page multiple) that only this value unmaps.
#[derive(Debug)]
pub(crate) struct DmaBuf {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value; concurrent access is made of raw
// volatile/atomic accesses, and callers serialise writers with their queue locks.
unsafe impl Send for DmaBuf {}
// SAFETY: as above.
unsafe impl Sync for DmaBuf {}

impl DmaBuf {
    /// Maps `len` bytes rounded up to whole pages, zero-filled.
    pub(crate) fn new(len: usize) -> Result<Self, i32> {
        let len = align_up(len.max(1), PAGE_SIZE).ok_or(libc::ENOMEM)?;
        // SAFETY: an anonymous private mapping at an address of the kernel's choosing touches
        // no existing memory.
        let ptr = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(libc::ENOMEM);
        }
        // INVARIANT: a fresh mapping of `len` bytes, zero-filled by the kernel.
        Ok(Self {
            ptr: ptr.cast(),
            len,
        })
    }

    /// Start address (what the kernel pins and the device addresses).
    pub(crate) fn addr(&self) -> u64 {
        self.ptr as u64
    }

    /// Bytes mapped (a page multiple).
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Raw start pointer, for `ibv_dontfork_range`.
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }

    fn check(&self, off: usize, n: usize) -> bool {
        off.checked_add(n).is_some_and(|end| end <= self.len)
    }

    /// Copies `src` to offset `off` (ignored if out of range, which callers rule out).
    pub(crate) fn write(&self, off: usize, src: &[u8]) {
        if self.check(off, src.len()) {
            // SAFETY: `off..off + src.len()` is inside the mapping (checked), which `src`
            // cannot overlap (it is not borrowed anywhere as a slice).
            unsafe { core::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.add(off), src.len()) };
        }
    }

    /// Zeroes `n` bytes at `off`.
    pub(crate) fn zero(&self, off: usize, n: usize) {
        if self.check(off, n) {
            // SAFETY: inside the mapping (checked).
            unsafe { core::ptr::write_bytes(self.ptr.add(off), 0, n) };
        }
    }

    /// Copies bytes at `off` into `dst` (zeros if out of range).
    pub(crate) fn read(&self, off: usize, dst: &mut [u8]) {
        if self.check(off, dst.len()) {
            // SAFETY: inside the mapping (checked); the device may write concurrently, but the
            // callers read only entries whose owner byte they observed with acquire ordering.
            unsafe {
                core::ptr::copy_nonoverlapping(self.ptr.add(off), dst.as_mut_ptr(), dst.len())
            };
        } else {
            dst.fill(0);
        }
    }

    /// Reads the byte at `off` with acquire ordering: later reads see what the device wrote
    /// before it (the owner byte of a CQE is written last).
    pub(crate) fn load_acquire_u8(&self, off: usize) -> u8 {
        if !self.check(off, 1) {
            return 0;
        }
        // SAFETY: inside the mapping (checked); `AtomicU8` has the alignment and size of `u8`.
        let byte = unsafe { &*self.ptr.add(off).cast::<AtomicU8>() };
        byte.load(Ordering::Acquire)
    }

    /// Writes a little-endian `u32` at `off` (4-byte aligned) as one store the device sees
    /// whole (doorbell record fields).
    pub(crate) fn store_u32(&self, off: usize, value: u32) {
        if self.check(off, 4) && off % 4 == 0 {
            // SAFETY: inside the mapping and aligned (the mapping is page-aligned).
            unsafe { core::ptr::write_volatile(self.ptr.add(off).cast::<u32>(), value.to_le()) };
        }
    }

    /// Reads a little-endian `u32` at `off` (4-byte aligned), such as a word the device writes.
    pub(crate) fn load_u32(&self, off: usize) -> u32 {
        if self.check(off, 4) && off % 4 == 0 {
            // SAFETY: inside the mapping and aligned.
            u32::from_le(unsafe { core::ptr::read_volatile(self.ptr.add(off).cast::<u32>()) })
        } else {
            0
        }
    }
}

impl Drop for DmaBuf {
    fn drop(&mut self) {
        // SAFETY: by the invariant, the mapping is ours and nobody uses it any more.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_rounding_and_access() {
        let buf = DmaBuf::new(100).expect("mmap");
        assert_eq!(buf.len(), PAGE_SIZE);
        assert_eq!(buf.addr() % PAGE_SIZE as u64, 0);
        buf.write(8, &[1, 2, 3]);
        let mut out = [0u8; 4];
        buf.read(7, &mut out);
        assert_eq!(out, [0, 1, 2, 3]);
        buf.store_u32(64, 0x1234_5678);
        assert_eq!(buf.load_u32(64), 0x1234_5678);
        assert_eq!(buf.load_acquire_u8(64), 0x78);
        // Out of range: ignored, never touched.
        buf.write(PAGE_SIZE - 1, &[9, 9]);
        buf.read(PAGE_SIZE - 1, &mut out[..2]);
        assert_eq!(&out[..2], &[0, 0]);
        assert_eq!(align_up(4097, PAGE_SIZE), Some(8192));
        assert_eq!(align_up(usize::MAX, PAGE_SIZE), None);
    }
}
