// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The context's doorbell page (BAR0 MMIO mapped through the uverbs command fd): queue
//! doorbells, the CQ arm doorbell and the WQE push window (ferroce-hw.rst, "Doorbells,
//! doorbell records and push windows").

use core::sync::atomic::{fence, Ordering};

use ferroce_hw::{CqArmDoorbell, Doorbell, DB_CQ_ARM, DB_PUSH, DB_RQ, DB_SQ, DB_SRQ};

/// Writes to a doorbell page. The real page is MMIO; tests record the writes.
pub(crate) trait Mmio {
    /// One 32-bit store at `off`.
    fn write32(&self, off: usize, value: u32);
    /// One 64-bit store at `off`.
    fn write64(&self, off: usize, value: u64);
    /// One 32-bit load at `off`: it returns only once the stores before it reached the device.
    fn read32(&self, off: usize) -> u32;
}

/// Orders earlier stores to host memory (WQEs, doorbell records) before a later MMIO store,
/// like rdma-core's `udma_to_device_barrier` / `mmio_wc_start`.
pub(crate) fn to_device_barrier() {
    fence(Ordering::SeqCst);
}

/// A queue doorbell register of the page. The provider rings only `DB_SQ`: receive queues
/// announce WQEs in their doorbell records, which the device reads when it needs a WQE
/// (`DB_RQ` / `DB_SRQ` are optional and cost an MMIO trap each).
#[cfg_attr(not(test), allow(dead_code))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum QueueDb {
    /// Send queue: `DB_SQ`.
    Sq,
    /// Receive queue: `DB_RQ`.
    Rq,
    /// Shared receive queue: `DB_SRQ`.
    Srq,
}

impl QueueDb {
    fn offset(self) -> usize {
        match self {
            QueueDb::Sq => DB_SQ,
            QueueDb::Rq => DB_RQ,
            QueueDb::Srq => DB_SRQ,
        }
    }
}

/// Rings queue doorbell `db` of local queue `qid` with producer index `pi`.
pub(crate) fn ring(page: &impl Mmio, db: QueueDb, qid: u16, pi: u16) {
    to_device_barrier();
    page.write32(db.offset(), Doorbell { qid, index: pi }.encode());
}

/// Arms CQ `qid` for its next (or next solicited) completion.
///
/// The device raises an event for CQEs it writes after it took the arm, not for those already
/// in the ring (ferroce-hw.rst, "Completion queues"). MMIO stores are posted: a load behind the
/// doorbell returns only once the device has taken it, so that a poll after this call sees
/// every CQE that will raise no event.
pub(crate) fn arm_cq(page: &impl Mmio, qid: u16, solicited: bool) {
    to_device_barrier();
    page.write32(DB_CQ_ARM, CqArmDoorbell { qid, solicited }.encode());
    let _ = page.read32(DB_CQ_ARM);
}

/// Copies `wqe` (WQE `pi - 1` of QP `qid`, also in the ring) into the push window at
/// `window` with 64-bit stores, then rings `DB_PUSH`. `false` (nothing written) if the WQE does
/// not fit `window_size`.
pub(crate) fn push(
    page: &impl Mmio,
    window: usize,
    window_size: usize,
    qid: u16,
    pi: u16,
    wqe: &[u8],
) -> bool {
    if wqe.len() > window_size {
        return false;
    }
    to_device_barrier();
    for (i, chunk) in wqe.chunks(8).enumerate() {
        let mut word = [0u8; 8];
        word[..chunk.len()].copy_from_slice(chunk);
        page.write64(window + i * 8, u64::from_le_bytes(word));
    }
    to_device_barrier();
    page.write32(DB_PUSH, Doorbell { qid, index: pi }.encode());
    true
}

/// How the context's QPs announce send WQEs, from `FERROCE_DOORBELL` (`mmio`, the default: a
/// doorbell write or a push; `record`: only the doorbell record, which the device polls) and
/// whether the device can poll. A mode the device lacks or an unknown value is reported on
/// stderr and doorbells are written.
pub(crate) fn record_mode(env: Option<&str>, device_polls: bool) -> bool {
    match env {
        None | Some("mmio") => false,
        Some("record") if device_polls => true,
        Some("record") => {
            eprintln!("ferroce: FERROCE_DOORBELL=record: the device does not poll doorbell records; ringing doorbells");
            false
        }
        Some(other) => {
            eprintln!("ferroce: FERROCE_DOORBELL={other}: not mmio or record; ringing doorbells");
            false
        }
    }
}

/// The mapped doorbell page.
///
/// # Invariants
///
/// `base` is a live `MAP_SHARED` mapping of `len` bytes of the doorbell page, owned by this
/// value (unmapped on drop).
#[derive(Debug)]
pub(crate) struct DbPage {
    base: *mut u8,
    len: usize,
}

// SAFETY: MMIO stores from any thread are fine; the page has no Rust-visible state.
unsafe impl Send for DbPage {}
// SAFETY: as above.
unsafe impl Sync for DbPage {}

impl DbPage {
    /// Maps `len` bytes at `offset` of the uverbs command fd `fd` (MMIO; loads only flush).
    pub(crate) fn map(fd: i32, offset: u64, len: usize) -> Result<Self, i32> {
        let offset = libc::off_t::try_from(offset).map_err(|_| libc::EINVAL)?;
        // SAFETY: a new shared mapping chosen by the kernel; it overlaps no Rust memory.
        let base = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                offset,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(errno());
        }
        // INVARIANT: a fresh mapping of `len` bytes.
        Ok(Self {
            base: base.cast(),
            len,
        })
    }
}

impl Mmio for DbPage {
    fn write32(&self, off: usize, value: u32) {
        if off % 4 == 0 && off.checked_add(4).is_some_and(|end| end <= self.len) {
            // SAFETY: inside the mapping (checked) and aligned; MMIO wants one volatile store.
            unsafe { core::ptr::write_volatile(self.base.add(off).cast::<u32>(), value.to_le()) };
        }
    }

    fn write64(&self, off: usize, value: u64) {
        if off % 8 == 0 && off.checked_add(8).is_some_and(|end| end <= self.len) {
            // SAFETY: inside the mapping (checked) and aligned.
            unsafe { core::ptr::write_volatile(self.base.add(off).cast::<u64>(), value.to_le()) };
        }
    }

    fn read32(&self, off: usize) -> u32 {
        if off % 4 == 0 && off.checked_add(4).is_some_and(|end| end <= self.len) {
            // SAFETY: inside the mapping (checked) and aligned; MMIO wants one volatile load.
            u32::from_le(unsafe { core::ptr::read_volatile(self.base.add(off).cast::<u32>()) })
        } else {
            0
        }
    }
}

impl Drop for DbPage {
    fn drop(&mut self) {
        // SAFETY: by the invariant, the mapping is ours and unused from now on.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

/// The calling thread's `errno`.
pub(crate) fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use core::cell::RefCell;
    use ferroce_hw::{PUSH_WINDOW_OFFSET, PUSH_WINDOW_SIZE};

    /// A doorbell page that records every store as (offset, value, width) and every load as
    /// (offset, 0, 0).
    #[derive(Default)]
    pub(crate) struct FakePage {
        pub(crate) writes: RefCell<Vec<(usize, u64, u8)>>,
    }

    impl Mmio for FakePage {
        fn write32(&self, off: usize, value: u32) {
            self.writes.borrow_mut().push((off, u64::from(value), 32));
        }
        fn write64(&self, off: usize, value: u64) {
            self.writes.borrow_mut().push((off, value, 64));
        }
        fn read32(&self, off: usize) -> u32 {
            self.writes.borrow_mut().push((off, 0, 0));
            0
        }
    }

    /// A doorbell page shared by threads: records every store with the thread that made it,
    /// and yields inside window stores so that concurrent pushes would interleave.
    #[derive(Default)]
    pub(crate) struct SharedPage {
        pub(crate) writes: std::sync::Mutex<Vec<(std::thread::ThreadId, usize, u64)>>,
    }

    impl Mmio for SharedPage {
        fn write32(&self, off: usize, value: u32) {
            let me = std::thread::current().id();
            self.writes
                .lock()
                .expect("log")
                .push((me, off, u64::from(value)));
        }
        fn write64(&self, off: usize, value: u64) {
            let me = std::thread::current().id();
            self.writes.lock().expect("log").push((me, off, value));
            std::thread::yield_now();
        }
        fn read32(&self, _off: usize) -> u32 {
            0
        }
    }

    #[test]
    fn doorbell_values() {
        let page = FakePage::default();
        ring(&page, QueueDb::Sq, 3, 0x1234);
        ring(&page, QueueDb::Rq, 0x3ff, 0xffff);
        ring(&page, QueueDb::Srq, 1, 0);
        arm_cq(&page, 7, false);
        arm_cq(&page, 7, true);
        assert_eq!(
            *page.writes.borrow(),
            vec![
                (0x000, 0x0003_1234, 32),
                (0x004, 0x03ff_ffff, 32),
                (0x008, 0x0001_0000, 32),
                // Each arm is read back: the poll after it must find the CQEs that came
                // before the device took it.
                (0x00c, 0x0007_0000, 32),
                (0x00c, 0, 0),
                (0x00c, 0x0007_0001, 32),
                (0x00c, 0, 0),
            ]
        );
    }

    #[test]
    fn doorbell_records_only_when_asked_and_polled() {
        assert!(!record_mode(None, true), "doorbells by default");
        assert!(!record_mode(Some("mmio"), true));
        assert!(record_mode(Some("record"), true));
        assert!(
            !record_mode(Some("record"), false),
            "the device cannot poll"
        );
        assert!(!record_mode(Some("polling"), true), "unknown value");
    }

    #[test]
    fn push_writes_window_then_doorbell() {
        let page = FakePage::default();
        let wqe: Vec<u8> = (0..72u8).collect();
        assert!(push(
            &page,
            PUSH_WINDOW_OFFSET,
            PUSH_WINDOW_SIZE,
            5,
            9,
            &wqe
        ));
        let w = page.writes.borrow();
        assert_eq!(w.len(), 10);
        for (i, &(off, value, width)) in w[..9].iter().enumerate() {
            assert_eq!((off, width), (0x800 + 8 * i, 64));
            let mut want = [0u8; 8];
            for (j, b) in want.iter_mut().enumerate() {
                *b = if 8 * i + j < 72 { (8 * i + j) as u8 } else { 0 };
            }
            assert_eq!(value, u64::from_le_bytes(want));
        }
        assert_eq!(w[9], (0x010, 0x0005_0009, 32));
        drop(w);
        // Too big for the window: nothing is written.
        let page = FakePage::default();
        assert!(!push(&page, PUSH_WINDOW_OFFSET, 64, 5, 9, &wqe));
        assert!(page.writes.borrow().is_empty());
    }
}
