// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Work queues in user memory: producer indexes, the doorbell record and the doorbell
//! (batching, push); where the rings lie in a queue's buffer is [`layout`]. The WQE bytes come
//! from [`crate::wqe`].

pub(crate) mod layout;

pub(crate) use layout::{qp_layout, QpLayout, RingLayout};

use core::mem::offset_of;
use core::sync::atomic::{fence, AtomicBool, AtomicU16, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use ferroce_hw::{QpDbRecord, Ring, DB_RECORD_SLEEPING_OFFSET, MAX_LOG_QUEUE, MAX_WQE_SIZE};
use libc::{EINVAL, ENOMEM};

use crate::dma::DmaBuf;
use crate::doorbell::{self, Mmio, QueueDb};

/// The push window of the context's doorbell page, if the device has one.
///
/// There is one window per context, shared by all its QPs: a push writes the WQE into it
/// with several 64-bit stores and then rings `DB_PUSH`, so two pushes from different threads
/// would tear each other's WQE. `busy` keeps them apart. A post that finds the window busy
/// does not wait: its WQE is in the ring anyway, and it rings the plain SQ doorbell instead
/// (as the kernel driver does).
#[derive(Debug)]
pub(crate) struct PushWindow {
    pub(crate) offset: usize,
    pub(crate) size: usize,
    busy: AtomicBool,
}

impl PushWindow {
    /// The window of `size` bytes at `offset` of the doorbell page.
    pub(crate) const fn new(offset: usize, size: usize) -> Self {
        Self {
            offset,
            size,
            busy: AtomicBool::new(false),
        }
    }

    /// The window for one push, or `None` if another one is under way.
    pub(crate) fn try_lock(&self) -> Option<PushGuard<'_>> {
        self.busy
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
            // Not `then_some`: a guard made eagerly and dropped would release a window that
            // another thread holds.
            .then(|| PushGuard(self))
    }
}

/// The push window, held for one push (released on drop).
pub(crate) struct PushGuard<'a>(&'a PushWindow);

impl Drop for PushGuard<'_> {
    fn drop(&mut self) {
        // The window stores and DB_PUSH go out before the next holder's stores.
        doorbell::to_device_barrier();
        self.0.busy.store(false, Ordering::Release);
    }
}

/// What a CQE says of its work queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Completed {
    /// WQE `wqe_index` completed; the provider posted it with this `wr_id`.
    Recorded(u64),
    /// WQE `wqe_index` completed; the queue (an SRQ) keeps no `wr_id` that is still valid.
    Unrecorded,
    /// The index is not one of the queue's outstanding WQEs (a buggy device): nothing changed.
    Bogus,
}

/// What the CQ poller shares with the posters of one work queue: how far the provider posted,
/// how far completions freed the ring, and the `wr_id` of each posted WQE by slot.
#[derive(Debug)]
pub(crate) struct QueueProgress {
    /// The ring at creation, which `wr_ids` is sized for.
    first: Ring,
    /// log2 of the ring's entries now (an SRQ's changes when it is resized).
    log_size: AtomicU32,
    /// Shared receive queue: completions of several QPs, possibly out of order.
    shared: bool,
    pi: AtomicU16,
    ci: AtomicU16,
    wr_ids: Box<[AtomicU64]>,
}

impl QueueProgress {
    fn new(ring: Ring, shared: bool) -> Self {
        Self {
            first: ring,
            log_size: AtomicU32::new(ring.log_size()),
            shared,
            pi: AtomicU16::new(0),
            ci: AtomicU16::new(0),
            wr_ids: (0..ring.size()).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// The ring's geometry now.
    fn ring(&self) -> Ring {
        Ring::new(self.log_size.load(Ordering::Acquire), MAX_LOG_QUEUE).unwrap_or(self.first)
    }

    /// The consumer index: the device is done with the WQEs before it.
    pub(crate) fn ci(&self) -> u16 {
        self.ci.load(Ordering::Acquire)
    }

    /// Notes the CQE of WQE `wqe_index` (a free-running index), by the rule the kernel driver
    /// claims its CQEs by too ([`Ring::outstanding`]): it must name a WQE posted and not yet
    /// completed, and the device is then done with the WQEs up to it. Anything else is a buggy
    /// device, and changes nothing (the posters never get slots the device still owns).
    ///
    /// An SRQ's WQEs complete out of order (in the QPs that took them), and the ring frees
    /// them in the order the device took them: a completion must name one of the WQEs posted
    /// in the ring's last pass, and moves the consumer if it is ahead of it. Its `wr_id`
    /// record may be a newer WQE's by then, so the SRQ reports the CQE's.
    pub(crate) fn complete(&self, wqe_index: u16) -> Completed {
        let next = wqe_index.wrapping_add(1);
        let ring = self.ring();
        let pi = self.pi.load(Ordering::Acquire);
        let mut ci = self.ci.load(Ordering::Acquire);
        if self.shared {
            // Posted in the ring's last pass.
            let last_pass = pi.wrapping_sub(ring.span());
            if !ring.outstanding(pi, last_pass, wqe_index) {
                return Completed::Bogus;
            }
            // Moves the consumer only if the WQE is ahead of it.
            let _ = self
                .ci
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |ci| {
                    ring.outstanding(pi, ci, wqe_index).then_some(next)
                });
            return Completed::Unrecorded;
        }
        loop {
            // Strictly forward: a second CQE for a completed WQE has no record left.
            if !ring.outstanding(pi, ci, wqe_index) {
                return Completed::Bogus;
            }
            // Read before the slot is freed: a poster may reuse it right after.
            let wr_id = self.wr_ids[ring.slot(wqe_index) as usize].load(Ordering::Relaxed);
            match self
                .ci
                .compare_exchange(ci, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Completed::Recorded(wr_id),
                Err(now) => ci = now,
            }
        }
    }

    /// Back to the empty queue.
    fn reset(&self) {
        self.pi.store(0, Ordering::Release);
        self.ci.store(0, Ordering::Release);
    }
}

/// One work queue's producer state (SQ, RQ or SRQ); callers hold its lock.
#[derive(Debug)]
pub(crate) struct WorkQueue {
    ring: Ring,
    offset: usize,
    stride: usize,
    pi: u16,
    /// Byte offset of this queue's producer index in the doorbell record.
    pi_offset: usize,
    /// The device polls the record (`FERROCE_CREATE_QP_DB_RECORD`): the offset of the word it
    /// sets while it sleeps. Posting rings only then.
    watched: Option<usize>,
    progress: Arc<QueueProgress>,
}

impl WorkQueue {
    /// The queue of `layout`; its producer index is the u32 at `pi_offset` of the buffer.
    pub(crate) fn new(layout: &RingLayout, pi_offset: usize) -> Result<Self, i32> {
        Self::with_progress(layout, pi_offset, false)
    }

    fn with_progress(layout: &RingLayout, pi_offset: usize, shared: bool) -> Result<Self, i32> {
        let ring = Ring::new(layout.log_size, layout.log_size).ok_or(EINVAL)?;
        Ok(Self {
            ring,
            offset: layout.offset,
            stride: 1 << layout.log_stride,
            pi: 0,
            pi_offset,
            watched: None,
            progress: Arc::new(QueueProgress::new(ring, shared)),
        })
    }

    /// What the CQ poller learns of this queue and tells its posters.
    pub(crate) fn progress(&self) -> &Arc<QueueProgress> {
        &self.progress
    }

    /// The SQ of a QP (producer index at `QpDbRecord::sq_pi`).
    pub(crate) fn sq(layout: &QpLayout) -> Result<Self, i32> {
        Self::new(
            &layout.sq,
            layout.dbrec_offset + offset_of!(QpDbRecord, sq_pi),
        )
    }

    /// From now on the device watches the record of this send queue (its QP's `layout`):
    /// posting publishes the producer index there, and writes `DB_SQ` only if the device's
    /// sleeping word is set (no push).
    pub(crate) fn set_watched(&mut self, layout: &QpLayout) {
        self.watched = Some(layout.dbrec_offset + DB_RECORD_SLEEPING_OFFSET);
    }

    /// The RQ of a QP (`QpDbRecord::rq_pi`), or an SRQ's ring (`SrqDbRecord::pi`, also at 0).
    pub(crate) fn rq(ring: &RingLayout, dbrec_offset: usize, srq: bool) -> Result<Self, i32> {
        let field = if srq {
            offset_of!(ferroce_hw::SrqDbRecord, pi)
        } else {
            offset_of!(QpDbRecord, rq_pi)
        };
        Self::with_progress(ring, dbrec_offset + field, srq)
    }

    /// Entries.
    pub(crate) fn size(&self) -> u32 {
        self.ring.size()
    }

    /// Stride in bytes.
    pub(crate) fn stride(&self) -> usize {
        self.stride
    }

    /// Producer index.
    #[cfg(test)]
    pub(crate) fn pi(&self) -> u16 {
        self.pi
    }

    /// The queue moved to `layout` (an SRQ's resize, `CMD_RESIZE_SRQ`), its producer index at
    /// `pi_offset` of the new buffer: the same posted WQEs, at the same indices, and the same
    /// progress, which the posters and the CQ pollers share.
    pub(crate) fn moved(&self, layout: &RingLayout, pi_offset: usize) -> Result<Self, i32> {
        let ring = Ring::new(layout.log_size, layout.log_size).ok_or(EINVAL)?;
        if !self.progress.shared || ring.size() < self.ring.size() {
            return Err(EINVAL);
        }
        Ok(Self {
            ring,
            offset: layout.offset,
            stride: 1 << layout.log_stride,
            pi: self.pi,
            pi_offset,
            watched: self.watched,
            progress: self.progress.clone(),
        })
    }

    /// Makes the move of [`Self::moved`] the progress's too, once the device took it.
    pub(crate) fn moved_in_device(&self) {
        self.progress
            .log_size
            .store(self.ring.log_size(), Ordering::Release);
    }

    /// Back to the empty queue (the QP went to RESET, where the device restarts at 0).
    pub(crate) fn reset(&mut self, buf: &DmaBuf) {
        self.pi = 0;
        self.progress.reset();
        buf.zero(self.offset, self.ring.size() as usize * self.stride);
        buf.store_u32(self.pi_offset, 0);
    }

    /// Writes WQEs made by `build` (which fills one zeroed stride slot and returns the bytes
    /// it used, or `None` at the end of the chain) until the chain ends, an error, or the
    /// ring is full (`ENOMEM`); `ci` is the consumer index known from completions. Returns
    /// the number posted, the error if any, and the last WQE's length.
    pub(crate) fn fill(
        &mut self,
        buf: &DmaBuf,
        ci: u16,
        scratch: &mut [u8; MAX_WQE_SIZE],
        mut build: impl FnMut(&mut [u8]) -> Option<Result<usize, i32>>,
    ) -> (u16, Result<(), i32>, usize) {
        let start = self.pi;
        let mut last = 0;
        let slot_len = self.stride.min(MAX_WQE_SIZE);
        loop {
            let slot = &mut scratch[..slot_len];
            let len = match build(slot) {
                None => break,
                Some(Err(e)) => return (self.pi.wrapping_sub(start), Err(e), last),
                Some(Ok(len)) => len,
            };
            if self.ring.is_full(self.pi, ci) {
                return (self.pi.wrapping_sub(start), Err(ENOMEM), last);
            }
            let slot_index = self.ring.slot(self.pi) as usize;
            buf.write(self.offset + slot_index * self.stride, slot);
            // Send and receive WQEs start with their wr_id (`WqeCtrl`, `RecvWqeHeader`).
            let wr_id = slot
                .first_chunk::<8>()
                .map_or(0, |b| u64::from_le_bytes(*b));
            // An SRQ keeps none (its completions carry them), nor could after a resize.
            if let Some(record) = self.progress.wr_ids.get(slot_index) {
                record.store(wr_id, Ordering::Relaxed);
            }
            self.pi = self.pi.wrapping_add(1);
            // Completions up to here are now plausible (the record tells the device later).
            self.progress.pi.store(self.pi, Ordering::Release);
            last = len;
        }
        (self.pi.wrapping_sub(start), Ok(()), last)
    }

    /// Makes posted WQEs visible: the producer index in the doorbell record, after the WQEs.
    pub(crate) fn publish(&self, buf: &DmaBuf) {
        fence(Ordering::Release);
        buf.store_u32(self.pi_offset, u32::from(self.pi));
    }

    /// Posts a chain of send WQEs made by `build` (see [`Self::fill`]) and rings once:
    /// the record, then one doorbell, or the push window for a chain of exactly one WQE
    /// that was accepted whole. Returns the number posted and the first error.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn post_send(
        &mut self,
        buf: &DmaBuf,
        ci: u16,
        page: &impl Mmio,
        qid: u16,
        push: Option<&PushWindow>,
        build: impl FnMut(&mut [u8]) -> Option<Result<usize, i32>>,
    ) -> (u16, Result<(), i32>) {
        let mut scratch = [0u8; MAX_WQE_SIZE];
        let (posted, result, last) = self.fill(buf, ci, &mut scratch, build);
        // After an error the scratch slot holds the rejected WQE, not the posted one.
        let push = push.filter(|_| result.is_ok());
        self.ring_sq(buf, page, qid, posted, &scratch[..last], push);
        (posted, result)
    }

    /// Free slots given consumer index `ci`.
    pub(crate) fn free(&self, ci: u16) -> u32 {
        self.ring.size().saturating_sub(self.ring.used(self.pi, ci))
    }

    /// Posts `n` ready WQEs (slot and bytes used, from `wqe(i)`) all or nothing: `ENOMEM`
    /// and nothing posted when the ring lacks room for all of them. Rings as
    /// [`Self::post_send`] does (push for a batch of one).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn post_batch<'a>(
        &mut self,
        buf: &DmaBuf,
        ci: u16,
        page: &impl Mmio,
        qid: u16,
        push: Option<&PushWindow>,
        n: usize,
        wqe: impl Fn(usize) -> Option<(&'a [u8], usize)>,
    ) -> Result<(), i32> {
        if n > self.free(ci) as usize {
            return Err(ENOMEM);
        }
        let mut next = 0;
        let (_, result) = self.post_send(buf, ci, page, qid, push, |slot| {
            if next == n {
                return None;
            }
            let built = wqe(next).and_then(|(src, len)| {
                let src = src.get(..slot.len())?;
                slot.copy_from_slice(src);
                Some(len)
            });
            next += 1;
            Some(built.ok_or(EINVAL))
        });
        result
    }

    /// After `posted` WQEs of a send queue: the record, then one doorbell for the chain, or
    /// for a single WQE that fits the push window, the WQE through the window and `DB_PUSH`;
    /// if the device watches the record, the doorbell only while it sleeps.
    pub(crate) fn ring_sq(
        &self,
        buf: &DmaBuf,
        page: &impl Mmio,
        qid: u16,
        posted: u16,
        last: &[u8],
        push: Option<&PushWindow>,
    ) {
        if posted == 0 {
            return;
        }
        self.publish(buf);
        if let Some(sleeping) = self.watched {
            // Store-load barrier: the record is visible before the device's word is read, so
            // either its last poll before sleeping sees the record or this sees the word set
            // (ferroce-hw.rst, "Polled records").
            fence(Ordering::SeqCst);
            if buf.load_u32(sleeping) != 0 {
                doorbell::ring(page, QueueDb::Sq, qid, self.pi);
            }
            return;
        }
        if let Some(w) = push.filter(|_| posted == 1) {
            // Only one push at a time in the context's window; when another QP's push holds
            // it, the plain doorbell announces this WQE.
            if let Some(_window) = w.try_lock() {
                if doorbell::push(page, w.offset, w.size, qid, self.pi, last) {
                    return;
                }
            }
        }
        doorbell::ring(page, QueueDb::Sq, qid, self.pi);
    }
}

#[cfg(test)]
mod tests {
    use super::layout::tests::{caps, DEV};
    use super::*;
    use crate::doorbell::tests::FakePage;
    use crate::wqe::{build_recv_wqe, build_send_wqe, Payload, SendOp, SendRequest, SqLimits};
    use ferroce_hw::{QpType, WqeCtrl, PUSH_WINDOW_OFFSET, PUSH_WINDOW_SIZE};

    static PUSH: PushWindow = PushWindow::new(PUSH_WINDOW_OFFSET, PUSH_WINDOW_SIZE);

    fn send(wr_id: u64) -> SendRequest<'static> {
        SendRequest {
            wr_id,
            op: SendOp::Send,
            signaled: true,
            solicited: false,
            fence: false,
            payload: Payload::Sges(&[]),
            ud: None,
            xrc_srqn: None,
        }
    }

    const LIMITS: SqLimits = SqLimits {
        qp_type: QpType::Rc,
        stride: 128,
        max_sge: 4,
        max_inline: 64,
    };

    fn sq_for_test(log_size: u32) -> (QpLayout, WorkQueue, DmaBuf) {
        let l = qp_layout(&caps(1 << log_size, 1, 4, 0), false, &DEV).expect("layout");
        let sq = WorkQueue::sq(&l).expect("sq");
        let buf = DmaBuf::new(l.buf_size).expect("buf");
        (l, sq, buf)
    }

    fn post(
        sq: &mut WorkQueue,
        buf: &DmaBuf,
        ci: u16,
        reqs: &[SendRequest<'_>],
    ) -> (u16, Result<(), i32>, usize) {
        let mut scratch = [0u8; MAX_WQE_SIZE];
        let mut it = reqs.iter();
        sq.fill(buf, ci, &mut scratch, |slot| {
            it.next().map(|r| build_send_wqe(r, &LIMITS, slot))
        })
    }

    /// The CQE rule the kernel driver claims by ([`Ring::outstanding`]): a work queue's CQE
    /// must name a WQE posted and not completed; an SRQ's, one posted in the ring's last pass,
    /// and it moves the consumer only forward.
    #[test]
    fn a_cqe_must_name_an_outstanding_wqe() {
        let ring = Ring::new(2, 2).unwrap();
        let q = QueueProgress::new(ring, false);
        q.pi.store(3, Ordering::Release);
        for (slot, id) in q.wr_ids.iter().zip(10..) {
            slot.store(id, Ordering::Relaxed);
        }
        assert_eq!(q.complete(3), Completed::Bogus, "not posted");
        assert_eq!(q.complete(0), Completed::Recorded(10));
        assert_eq!(q.complete(0), Completed::Bogus, "completed already");
        assert_eq!(q.complete(2), Completed::Recorded(12), "in order: past 1");
        assert_eq!(q.ci(), 3);
        assert_eq!(q.complete(1), Completed::Bogus, "behind the consumer");

        let srq = QueueProgress::new(ring, true);
        srq.pi.store(6, Ordering::Release);
        assert_eq!(
            srq.complete(1),
            Completed::Bogus,
            "before the ring's last pass"
        );
        assert_eq!(srq.complete(6), Completed::Bogus, "not posted");
        assert_eq!(srq.complete(4), Completed::Unrecorded);
        assert_eq!(srq.ci(), 5, "forward past the WQE");
        assert_eq!(
            srq.complete(2),
            Completed::Unrecorded,
            "out of order, in the last pass"
        );
        assert_eq!(srq.ci(), 5, "and never backward");
    }

    #[test]
    fn chain_writes_wqes_then_record_then_one_doorbell() {
        let (l, mut sq, buf) = sq_for_test(3);
        let page = FakePage::default();
        let reqs = [send(1), send(2), send(3)];
        let mut scratch = [0u8; MAX_WQE_SIZE];
        let mut it = reqs.iter();
        let (n, res, last) = sq.fill(&buf, 0, &mut scratch, |slot| {
            it.next().map(|r| build_send_wqe(r, &LIMITS, slot))
        });
        assert_eq!((n, res, last), (3, Ok(()), 64));
        // Before ringing: WQEs in the ring, record untouched.
        for i in 0..3usize {
            let c = WqeCtrl::read_from(&{
                let mut b = [0u8; 24];
                buf.read(i * 128, &mut b);
                b
            })
            .expect("ctrl");
            assert_eq!(c.wr_id, i as u64 + 1);
        }
        assert_eq!(buf.load_u32(l.dbrec_offset), 0);
        sq.ring_sq(&buf, &page, 7, n, &scratch[..last], Some(&PUSH));
        assert_eq!(buf.load_u32(l.dbrec_offset), 3);
        assert_eq!(*page.writes.borrow(), vec![(0x000, 0x0007_0003, 32)]);
    }

    #[test]
    fn single_wqe_is_pushed() {
        let (l, mut sq, buf) = sq_for_test(3);
        let page = FakePage::default();
        let mut scratch = [0u8; MAX_WQE_SIZE];
        let reqs = [send(42)];
        let mut it = reqs.iter();
        let (n, res, last) = sq.fill(&buf, 0, &mut scratch, |slot| {
            it.next().map(|r| build_send_wqe(r, &LIMITS, slot))
        });
        assert_eq!((n, res), (1, Ok(())));
        sq.ring_sq(&buf, &page, 2, n, &scratch[..last], Some(&PUSH));
        let w = page.writes.borrow();
        // 64 bytes = eight 64-bit stores into the window, then DB_PUSH with pi = 1.
        assert_eq!(w.len(), 9);
        assert!(w[..8]
            .iter()
            .enumerate()
            .all(|(i, &(off, _, width))| off == 0x800 + 8 * i && width == 64));
        assert_eq!(w[0].1, 42, "wr_id is the first word");
        assert_eq!(w[8], (0x010, 0x0002_0001, 32));
        // Also in the ring, and announced in the record.
        let mut b = [0u8; 8];
        buf.read(0, &mut b);
        assert_eq!(u64::from_le_bytes(b), 42);
        assert_eq!(buf.load_u32(l.dbrec_offset), 1);
        drop(w);
        // Without a push window: a plain doorbell.
        let page = FakePage::default();
        let reqs = [send(43)];
        let mut it = reqs.iter();
        let (n, _, last) = sq.fill(&buf, 0, &mut scratch, |slot| {
            it.next().map(|r| build_send_wqe(r, &LIMITS, slot))
        });
        sq.ring_sq(&buf, &page, 2, n, &scratch[..last], None);
        assert_eq!(*page.writes.borrow(), vec![(0x000, 0x0002_0002, 32)]);
    }

    #[test]
    fn a_watched_queue_writes_only_its_record() {
        let (l, mut sq, buf) = sq_for_test(3);
        sq.set_watched(&l);
        let mut scratch = [0u8; MAX_WQE_SIZE];
        for (chain, want_pi) in [(&[send(1)][..], 1), (&[send(2), send(3), send(4)][..], 4)] {
            let page = FakePage::default();
            let mut it = chain.iter();
            let (n, res, last) = sq.fill(&buf, 0, &mut scratch, |slot| {
                it.next().map(|r| build_send_wqe(r, &LIMITS, slot))
            });
            assert_eq!(res, Ok(()));
            sq.ring_sq(&buf, &page, 2, n, &scratch[..last], Some(&PUSH));
            assert!(
                page.writes.borrow().is_empty(),
                "no doorbell, no push window"
            );
            assert_eq!(buf.load_u32(l.dbrec_offset), want_pi);
        }
        // The device sleeps: the doorbell wakes it (no push).
        buf.store_u32(l.dbrec_offset + DB_RECORD_SLEEPING_OFFSET, 1);
        let page = FakePage::default();
        let reqs = [send(5)];
        let mut it = reqs.iter();
        let (n, _, last) = sq.fill(&buf, 0, &mut scratch, |slot| {
            it.next().map(|r| build_send_wqe(r, &LIMITS, slot))
        });
        sq.ring_sq(&buf, &page, 2, n, &scratch[..last], Some(&PUSH));
        assert_eq!(*page.writes.borrow(), vec![(0x000, 0x0002_0005, 32)]);
    }

    #[test]
    fn full_ring_and_bad_request_stop_the_chain() {
        let (_, mut sq, buf) = sq_for_test(2);
        assert_eq!(sq.size(), 4);
        let reqs = [send(1), send(2), send(3), send(4), send(5), send(6)];
        let (n, res, _) = post(&mut sq, &buf, 0, &reqs);
        assert_eq!((n, res), (4, Err(ENOMEM)));
        // Completions up to index 2 free two slots.
        let (n, res, _) = post(&mut sq, &buf, 2, &reqs[4..]);
        assert_eq!((n, res), (2, Ok(())));
        assert_eq!(sq.pi(), 6);
        // A bad request in the middle: the ones before it are posted.
        let mut bad = send(9);
        bad.op = SendOp::CmpSwap {
            remote_addr: 0,
            rkey: 0,
            compare: 0,
            swap: 0,
        };
        let (n, res, _) = post(&mut sq, &buf, 6, &[send(7), bad, send(8)]);
        assert_eq!((n, res), (1, Err(EINVAL)));
        assert_eq!(sq.pi(), 7);
        // Nothing posted: no doorbell at all.
        let page = FakePage::default();
        sq.ring_sq(&buf, &page, 1, 0, &[], Some(&PUSH));
        assert!(page.writes.borrow().is_empty());
    }

    #[test]
    fn index_wraps_at_65536() {
        let (l, mut sq, buf) = sq_for_test(2);
        let page = FakePage::default();
        let mut ci = 0u16;
        for _ in 0..(65536 / 4 + 3) {
            let (n, res, last) = post(&mut sq, &buf, ci, &[send(1), send(2), send(3), send(4)]);
            assert_eq!((n, res), (4, Ok(())));
            let _ = last;
            ci = sq.pi();
        }
        assert_eq!(sq.pi(), 12);
        sq.ring_sq(&buf, &page, 1, 4, &[], None);
        assert_eq!(buf.load_u32(l.dbrec_offset), 12);
    }

    #[test]
    fn recv_queue_and_reset() {
        let l = qp_layout(&caps(1, 2, 2, 0), false, &DEV).expect("layout");
        let rl = l.rq.expect("rq");
        let mut rq = WorkQueue::rq(&rl, l.dbrec_offset, false).expect("rq");
        let buf = DmaBuf::new(l.buf_size).expect("buf");
        let mut scratch = [0u8; MAX_WQE_SIZE];
        let ids = [10u64, 11, 12];
        let mut it = ids.iter();
        let (n, res, _) = rq.fill(&buf, 0, &mut scratch, |slot| {
            it.next().map(|&id| build_recv_wqe(id, &[], 2, slot))
        });
        assert_eq!((n, res), (2, Err(ENOMEM)));
        rq.publish(&buf);
        assert_eq!(
            buf.load_u32(l.dbrec_offset + 4),
            2,
            "rq_pi is the second word"
        );
        assert_eq!(buf.load_u32(l.dbrec_offset), 0);
        let mut b = [0u8; 8];
        buf.read(rl.offset + 64, &mut b);
        assert_eq!(u64::from_le_bytes(b), 11);
        rq.reset(&buf);
        assert_eq!(rq.pi(), 0);
        assert_eq!(buf.load_u32(l.dbrec_offset + 4), 0);
        buf.read(rl.offset + 64, &mut b);
        assert_eq!(b, [0; 8]);
    }
}

#[cfg(test)]
mod batch_tests {
    use super::*;
    use crate::doorbell::tests::FakePage;
    use crate::wqe::{SendOp, SqLimits};
    use crate::wr::{WrBatch, WrFlags};
    use ferroce_hw::{QpType, PUSH_WINDOW_OFFSET, PUSH_WINDOW_SIZE};

    static PUSH: PushWindow = PushWindow::new(PUSH_WINDOW_OFFSET, PUSH_WINDOW_SIZE);

    fn setup() -> (WorkQueue, DmaBuf, WrBatch) {
        let layout = RingLayout {
            offset: 0,
            log_size: 2,
            log_stride: 7,
        };
        let sq = WorkQueue::new(&layout, 512).expect("sq");
        let buf = DmaBuf::new(4096).expect("buf");
        let limits = SqLimits {
            qp_type: QpType::Rc,
            stride: 128,
            max_sge: 4,
            max_inline: 64,
        };
        (sq, buf, WrBatch::new(limits, 4))
    }

    fn sends(b: &mut WrBatch, ids: core::ops::Range<u64>) -> usize {
        b.clear();
        for id in ids {
            b.begin(id, WrFlags::default(), Ok(SendOp::Send));
        }
        b.finish().expect("batch")
    }

    #[test]
    fn batch_is_one_doorbell_or_one_push() {
        let (mut sq, buf, mut b) = setup();
        let page = FakePage::default();
        let n = sends(&mut b, 1..4);
        assert_eq!(
            sq.post_batch(&buf, 0, &page, 9, Some(&PUSH), n, |i| b.wqe(i)),
            Ok(())
        );
        assert_eq!(*page.writes.borrow(), vec![(0x000, 0x0009_0003, 32)]);
        assert_eq!(buf.load_u32(512), 3);
        let mut id = [0u8; 8];
        buf.read(2 * 128, &mut id);
        assert_eq!(u64::from_le_bytes(id), 3);
        // One WQE: pushed (eight words and DB_PUSH).
        let page = FakePage::default();
        let n = sends(&mut b, 7..8);
        assert_eq!(
            sq.post_batch(&buf, 3, &page, 9, Some(&PUSH), n, |i| b.wqe(i)),
            Ok(())
        );
        let w = page.writes.borrow();
        assert_eq!((w.len(), w[0].1), (9, 7));
        assert_eq!(w[8], (0x010, 0x0009_0004, 32));
        // An empty batch rings nothing.
        let page = FakePage::default();
        assert_eq!(
            sq.post_batch(&buf, 4, &page, 9, Some(&PUSH), 0, |i| b.wqe(i)),
            Ok(())
        );
        assert!(page.writes.borrow().is_empty());
    }

    #[test]
    fn batch_without_room_posts_nothing() {
        let (mut sq, buf, mut b) = setup();
        let page = FakePage::default();
        let n = sends(&mut b, 1..3);
        assert_eq!(
            sq.post_batch(&buf, 0, &page, 1, None, n, |i| b.wqe(i)),
            Ok(())
        );
        assert_eq!(sq.free(0), 2);
        let n = sends(&mut b, 3..6);
        assert_eq!(
            sq.post_batch(&buf, 0, &page, 1, None, n, |i| b.wqe(i)),
            Err(ENOMEM)
        );
        assert_eq!(sq.pi(), 2, "nothing of the batch was posted");
        assert_eq!(page.writes.borrow().len(), 1);
        // After completions, it fits.
        assert_eq!(
            sq.post_batch(&buf, 1, &page, 1, None, n, |i| b.wqe(i)),
            Ok(())
        );
        assert_eq!(sq.pi(), 5);
    }
}

#[cfg(test)]
mod post_tests {
    use super::*;
    use crate::doorbell::tests::FakePage;
    use crate::wqe::{build_send_wqe, Payload, SendOp, SendRequest, SqLimits};
    use ferroce_hw::{QpType, PUSH_WINDOW_OFFSET, PUSH_WINDOW_SIZE};

    #[test]
    fn failed_chain_of_one_never_pushes_the_rejected_wqe() {
        let layout = RingLayout {
            offset: 0,
            log_size: 2,
            log_stride: 7,
        };
        let mut sq = WorkQueue::new(&layout, 512).expect("sq");
        let buf = DmaBuf::new(4096).expect("buf");
        let limits = SqLimits {
            qp_type: QpType::Rc,
            stride: 128,
            max_sge: 4,
            max_inline: 64,
        };
        let good = SendRequest {
            wr_id: 1,
            op: SendOp::Send,
            signaled: true,
            solicited: false,
            fence: false,
            payload: Payload::Sges(&[]),
            ud: None,
            xrc_srqn: None,
        };
        let bad = SendRequest {
            op: SendOp::FetchAdd {
                remote_addr: 0,
                rkey: 0,
                add: 1,
            },
            ..good
        };
        let reqs = [good, bad];
        let mut it = reqs.iter();
        let page = FakePage::default();
        let push = PushWindow::new(PUSH_WINDOW_OFFSET, PUSH_WINDOW_SIZE);
        let (n, res) = sq.post_send(&buf, 0, &page, 4, Some(&push), |slot| {
            it.next().map(|r| build_send_wqe(r, &limits, slot))
        });
        assert_eq!((n, res), (1, Err(EINVAL)));
        // The good WQE is announced with a plain doorbell.
        assert_eq!(*page.writes.borrow(), vec![(0x000, 0x0004_0001, 32)]);
        assert_eq!(buf.load_u32(512), 1);
    }
}

#[cfg(test)]
mod push_tests {
    use super::*;
    use crate::doorbell::tests::SharedPage;
    use crate::wqe::{build_send_wqe, Payload, SendOp, SendRequest, SqLimits};
    use ferroce_hw::{Doorbell, QpType, DB_PUSH, PUSH_WINDOW_OFFSET, PUSH_WINDOW_SIZE};

    /// Posts `n` single-WQE chains on a QP of its own (local QID `qid`, `wr_id` = `qid << 32 |
    /// i`) through the context's one push window.
    fn poster(page: &SharedPage, push: Option<&PushWindow>, qid: u16, n: u32) {
        let layout = RingLayout {
            offset: 0,
            log_size: 4,
            log_stride: 7,
        };
        let mut sq = WorkQueue::new(&layout, 2048).expect("sq");
        let buf = DmaBuf::new(4096).expect("buf");
        let limits = SqLimits {
            qp_type: QpType::Rc,
            stride: 128,
            max_sge: 4,
            max_inline: 64,
        };
        for i in 0..n {
            let req = SendRequest {
                wr_id: u64::from(qid) << 32 | u64::from(i),
                op: SendOp::Send,
                signaled: true,
                solicited: false,
                fence: false,
                payload: Payload::Sges(&[]),
                ud: None,
                xrc_srqn: None,
            };
            let mut once = Some(req);
            let ci = sq.pi();
            let (posted, res) = sq.post_send(&buf, ci, page, qid, push, |slot| {
                once.take().map(|r| build_send_wqe(&r, &limits, slot))
            });
            assert_eq!((posted, res), (1, Ok(())));
        }
    }

    #[test]
    fn pushes_of_two_qps_never_interleave() {
        let page = SharedPage::default();
        let push = PushWindow::new(PUSH_WINDOW_OFFSET, PUSH_WINDOW_SIZE);
        std::thread::scope(|s| {
            s.spawn(|| poster(&page, Some(&push), 1, 2000));
            s.spawn(|| poster(&page, Some(&push), 2, 2000));
        });
        // Every DB_PUSH must follow exactly its own WQE's eight window words, all stored by the
        // thread that rings it, the first one its wr_id.
        let log = page.writes.lock().expect("log");
        let mut window: Vec<(std::thread::ThreadId, u64)> = Vec::new();
        let mut pushes = 0;
        let mut rings = 0;
        for &(who, off, value) in log.iter() {
            if off == ferroce_hw::DB_SQ {
                // A post that found the window busy: the plain doorbell.
                rings += 1;
            }
            if (PUSH_WINDOW_OFFSET..PUSH_WINDOW_OFFSET + PUSH_WINDOW_SIZE).contains(&off) {
                window.push((who, value));
            } else if off == DB_PUSH {
                pushes += 1;
                let db = Doorbell::decode(value as u32);
                assert_eq!(window.len(), 8, "push {pushes}: window words {window:x?}");
                assert!(
                    window.iter().all(|&(w, _)| w == who),
                    "push {pushes}: window written by two threads"
                );
                assert_eq!(
                    window[0].1 >> 32,
                    u64::from(db.qid),
                    "push {pushes}: torn WQE"
                );
                window.clear();
            }
        }
        assert!(window.is_empty());
        assert!(pushes > 0);
        assert_eq!(pushes + rings, 4000, "every WQE announced once");
    }
}
