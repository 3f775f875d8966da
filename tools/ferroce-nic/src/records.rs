// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Doorbell records the device polls (capability `CAP_DB_RECORD`; seed 1 §3.3's polling mode,
//! seed 2 §3). A QP created with `QP_FLAG_DB_RECORD` announces send WQEs by writing its record
//! only: no MMIO write, which under QEMU is a trap and a vfio-user message each. The device
//! thread reads the records of such QPs on every round; a new SQ producer index is taken as a
//! `DB_SQ` write would be (the same checks, one rejection per bad value), a new RQ producer index
//! as a `DB_RQ`.
//!
//! A device that polled forever would take a CPU from the vCPUs (two cores here), and one that
//! polled less often would make WQEs wait. So it polls only for a while after activity
//! ([`PollWindow`]) and then sleeps, and while it sleeps the producers ring: before sleeping the
//! device sets the sleeping word of every watched record (`DB_RECORD_SLEEPING_OFFSET`), then
//! reads the records once more; a producer writes `sq_pi`, then reads the word, and writes
//! `DB_SQ` if it is set. With a full barrier on both sides between the write and the read
//! (the store-load pattern), either the device's last look finds the new index or the producer
//! finds the word set: no WQE waits for a device that sleeps. (virtio's notification
//! suppression, `VRING_USED_F_NO_NOTIFY`, works the same way.) The device clears the words when
//! it wakes.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{fence, Ordering};
use std::time::{Duration, Instant};

use ferroce_hw::*;

use crate::device::DeviceCore;
use crate::latency::Noticed;

/// `DOORBELL_ERROR`'s context field for a bad value in a doorbell record: this bit and the QP
/// number (a doorbell page's context is below `NUM_DB_PAGES`).
pub const RECORD_ERROR_CTX: u32 = 1 << 31;

/// What the device last took from a watched record.
#[derive(Clone, Copy, Debug, Default)]
struct Seen {
    /// The RQ producer index last read.
    rq_pi: u16,
    /// An SQ producer index that was rejected, so that it is reported once.
    bad_sq_pi: Option<u16>,
}

/// The QPs whose records the device polls, and when it last read them.
#[derive(Default)]
pub struct RecordWatch {
    qps: BTreeMap<u32, Seen>,
    last_poll: Option<Instant>,
    /// The sleeping words are set.
    sleeping: bool,
}

impl RecordWatch {
    /// Starts watching QP `qpn`, whose record holds `record` now.
    pub fn watch(&mut self, qpn: u32, record: QpDbRecord) {
        self.qps.insert(
            qpn,
            Seen {
                rq_pi: record.rq_pi as u16,
                bad_sq_pi: None,
            },
        );
    }

    /// Stops watching QP `qpn` (destroyed).
    pub fn unwatch(&mut self, qpn: u32) {
        self.qps.remove(&qpn);
    }

    /// Whether any record is watched (then the device thread polls).
    pub fn any(&self) -> bool {
        !self.qps.is_empty()
    }

    /// Forgets every QP (function reset).
    pub fn clear(&mut self) {
        *self = Self::default();
    }
}

impl DeviceCore {
    /// Before the device thread sleeps: sets the sleeping word of every watched record, then
    /// polls once more. `true` if the thread may sleep (nothing new came in meanwhile; the
    /// producers now ring), `false` if it found work (the words are cleared again).
    pub fn records_sleep(&mut self) -> bool {
        if !self.records.any() {
            return true;
        }
        self.set_sleeping(true);
        // The store-load barrier: the words are visible before the records are read again.
        fence(Ordering::SeqCst);
        if self.poll_records() {
            self.set_sleeping(false);
            return false;
        }
        // An index found by the first poll after the sleep may have been written at any time
        // during it (and its producer rang): that poll samples no doorbell-to-wire interval.
        self.records.last_poll = None;
        true
    }

    /// After the device thread woke: clears the sleeping words (the producers stop ringing).
    pub fn records_wake(&mut self) {
        if self.records.sleeping {
            self.set_sleeping(false);
        }
    }

    fn set_sleeping(&mut self, sleeping: bool) {
        self.records.sleeping = sleeping;
        let word = u32::from(sleeping).to_le_bytes();
        for &qpn in self.records.qps.keys() {
            let Some(addr) = self.objects().qps().get(qpn).map(|qp| qp.dbrec_addr) else {
                continue;
            };
            let at = addr.wrapping_add(DB_RECORD_SLEEPING_OFFSET as u64);
            if self.bus().mem().write(at, &word).is_err() {
                self.bus().counters().inc(COUNTER_DMA_ERRORS);
            }
        }
    }

    /// Reads the record of every watched QP and takes what is new in it. Returns whether
    /// anything was.
    pub fn poll_records(&mut self) -> bool {
        if !self.records.any() {
            return false;
        }
        // The producer wrote the record after the previous round read it: counting the
        // doorbell-to-wire interval from that round bounds it from above.
        let since = self.records.last_poll.replace(Instant::now());
        // In QPN order without a copy of the keys (this runs on every round): each step finds
        // the next watched QP after the last one, which `poll_record` may have unwatched.
        let mut found = false;
        let mut next = self.records.qps.keys().next().copied();
        while let Some(qpn) = next {
            found |= self.poll_record(qpn, since);
            next = self
                .records
                .qps
                .range((Bound::Excluded(qpn), Bound::Unbounded))
                .next()
                .map(|(&n, _)| n);
        }
        found
    }

    fn poll_record(&mut self, qpn: u32, since: Option<Instant>) -> bool {
        let Some(qp) = self.objects().qps().get(qpn) else {
            self.records.unwatch(qpn);
            return false;
        };
        let Some(sq_pi) = qp.sq.as_ref().map(|sq| sq.pi) else {
            self.records.unwatch(qpn);
            return false;
        };
        let addr = qp.dbrec_addr;
        let mut bytes = [0u8; QpDbRecord::SIZE];
        // Not traced or counted as `dbrec_reads`: a poll happens whether or not anything was
        // posted. A record that cannot be read is a DMA error, counted by the memory.
        if self.bus().mem().read(addr, &mut bytes).is_err() {
            self.bus().counters().inc(COUNTER_DMA_ERRORS);
            return false;
        }
        let record = QpDbRecord::decode(&bytes);
        let Some(seen) = self.records.qps.get(&qpn).copied() else {
            return false;
        };
        let (new_sq, new_rq) = (record.sq_pi as u16, record.rq_pi as u16);
        let mut found = false;
        if new_sq != sq_pi && seen.bad_sq_pi != Some(new_sq) {
            found = true;
            self.bus().counters().inc(COUNTER_RECORD_DOORBELLS);
            self.bus().trace().event(
                "record_doorbell",
                || serde_json::json!({"qpn": qpn, "queue": "sq", "pi": new_sq}),
            );
            let accepted = self.sq_doorbell(qpn, new_sq, None, Noticed::Polled, since);
            let bad_sq_pi = (!accepted).then_some(new_sq);
            if !accepted {
                self.bad_record(qpn, record.sq_pi);
            }
            if let Some(s) = self.records.qps.get_mut(&qpn) {
                s.bad_sq_pi = bad_sq_pi;
            }
        }
        if new_rq != seen.rq_pi {
            found = true;
            self.bus().counters().inc(COUNTER_RECORD_DOORBELLS);
            if let Some(s) = self.records.qps.get_mut(&qpn) {
                s.rq_pi = new_rq;
            }
            self.rq_doorbell(qpn);
        }
        found
    }

    /// A record's SQ producer index moves backwards or more than a ring ahead: counted and
    /// reported as a rejected doorbell would be, with `RECORD_ERROR_CTX | qpn` as its context.
    fn bad_record(&mut self, qpn: u32, value: u32) {
        self.bus().counters().inc(COUNTER_BAD_DOORBELLS);
        self.bus().trace().event(
            "bad_record",
            || serde_json::json!({"qpn": qpn, "value": value}),
        );
        self.doorbells_mut()
            .record_bad(RECORD_ERROR_CTX | qpn, value);
    }
}

/// How the device thread waits while records are watched: for [`SPIN`](Self::SPIN) after the
/// last activity (a new index in a record, a doorbell, a frame, work left over) it polls again at
/// once, only yielding the CPU to runnable threads such as the vCPUs; after that it sleeps until
/// a doorbell or a timer, having told the producers so ([`DeviceCore::records_sleep`]). An idle
/// NIC thus costs the vCPUs nothing, and a busy one no doorbell writes.
#[derive(Clone, Copy, Debug)]
pub struct PollWindow {
    spin: Duration,
    last_activity: Instant,
}

impl PollWindow {
    /// Polling without sleeping after activity.
    pub const SPIN: Duration = Duration::from_micros(50);

    /// A window of `spin`, active `now`.
    pub fn new(spin: Duration, now: Instant) -> Self {
        Self {
            spin,
            last_activity: now,
        }
    }

    /// A window that never closes: the device thread on a core of its own
    /// ([`crate::poll_cpu`]) polls the records as long as any is watched.
    pub fn forever() -> Self {
        Self::new(Duration::MAX, Instant::now())
    }

    /// Something happened `now`: spin again.
    pub fn active(&mut self, now: Instant) {
        self.last_activity = now;
    }

    /// Whether to poll again at once (`true`) or sleep, after an idle round at `now`.
    pub fn spinning(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.last_activity) < self.spin
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spins_for_the_window_after_activity() {
        let t0 = Instant::now();
        let mut w = PollWindow::new(PollWindow::SPIN, t0);
        assert!(w.spinning(t0));
        assert!(w.spinning(t0 + Duration::from_micros(49)));
        assert!(!w.spinning(t0 + Duration::from_micros(50)));
        w.active(t0 + Duration::from_micros(60));
        assert!(w.spinning(t0 + Duration::from_micros(100)));
        assert!(
            !PollWindow::new(Duration::ZERO, t0).spinning(t0),
            "no spin: sleep at once"
        );
        let forever = PollWindow::forever();
        assert!(forever.spinning(Instant::now() + Duration::from_secs(365 * 24 * 3600)));
    }
}
