// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Doorbell records the device polls (capability `CAP_DB_RECORD`; seed 1 §3.3's polling mode,
//! seed 2 §3). A QP created with `QP_FLAG_DB_RECORD` announces send WQEs by writing its record
//! only: no MMIO write, which under QEMU is a trap and a vfio-user message each. The device
//! thread reads the records of such QPs on every round; a new SQ producer index is taken as a
//! `DB_SQ` write would be (the same checks, one rejection per bad value), a new RQ producer index
//! as a `DB_RQ`. Between rounds the thread waits by [`PollBackoff`]: right after activity it only
//! yields the CPU, then it sleeps for longer and longer, so that an idle NIC costs the vCPUs next
//! to nothing. A doorbell write still wakes it at once.

use std::collections::BTreeMap;
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
    /// Reads the record of every watched QP and takes what is new in it. Returns whether
    /// anything was.
    pub fn poll_records(&mut self) -> bool {
        if !self.records.any() {
            return false;
        }
        let now = Instant::now();
        // The producer wrote the record after the previous round read it: counting the
        // doorbell-to-wire interval from that round bounds it from above.
        let since = self.records.last_poll.replace(now).unwrap_or(now);
        let qpns: Vec<u32> = self.records.qps.keys().copied().collect();
        let mut found = false;
        for qpn in qpns {
            found |= self.poll_record(qpn, since);
        }
        found
    }

    fn poll_record(&mut self, qpn: u32, since: Instant) -> bool {
        let Some(qp) = self.objects().qps().get(qpn) else {
            self.records.unwatch(qpn);
            return false;
        };
        let (addr, sq_pi) = (qp.dbrec_addr, qp.sq.pi);
        let mut bytes = [0u8; QpDbRecord::SIZE];
        // Not traced or counted as `dbrec_reads`: a poll happens whether or not anything was
        // posted. A record that cannot be read is a DMA error, counted by the memory.
        if self.mem().read(addr, &mut bytes).is_err() {
            self.counters().inc(COUNTER_DMA_ERRORS);
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
            self.counters().inc(COUNTER_RECORD_DOORBELLS);
            self.trace().event(
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
            self.counters().inc(COUNTER_RECORD_DOORBELLS);
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
        self.counters().inc(COUNTER_BAD_DOORBELLS);
        self.trace().event(
            "bad_record",
            || serde_json::json!({"qpn": qpn, "value": value}),
        );
        self.doorbells_mut()
            .record_bad(RECORD_ERROR_CTX | qpn, value);
    }
}

/// How long the device thread waits between rounds while records are watched.
///
/// For [`SPIN`](PollBackoff::SPIN) after the last activity (a new index in a record, a
/// doorbell, a frame, any work) it polls again at once, only yielding the CPU to runnable
/// threads such as the vCPUs; then it sleeps [`FIRST_SLEEP`](PollBackoff::FIRST_SLEEP),
/// doubling each idle round up to [`MAX_SLEEP`](PollBackoff::MAX_SLEEP). An idle NIC thus wakes
/// at most `1 / MAX_SLEEP` times a second, and a WQE posted while it sleeps waits at most the
/// current sleep.
#[derive(Clone, Copy, Debug)]
pub struct PollBackoff {
    spin: Duration,
    max_sleep: Duration,
    last_activity: Instant,
    sleep: Duration,
}

impl PollBackoff {
    /// Polling without sleeping after activity.
    pub const SPIN: Duration = Duration::from_micros(200);
    /// The first sleep after the spin.
    pub const FIRST_SLEEP: Duration = Duration::from_micros(10);
    /// The longest sleep.
    pub const MAX_SLEEP: Duration = Duration::from_millis(1);

    /// A backoff with the default spin and longest sleep, active `now`.
    pub fn new(now: Instant) -> Self {
        Self::with(Self::SPIN, Self::MAX_SLEEP, now)
    }

    /// A backoff spinning for `spin`, sleeping at most `max_sleep`.
    pub fn with(spin: Duration, max_sleep: Duration, now: Instant) -> Self {
        Self {
            spin,
            max_sleep: max_sleep.max(Self::FIRST_SLEEP),
            last_activity: now,
            sleep: Self::FIRST_SLEEP,
        }
    }

    /// Something happened `now`: spin again.
    pub fn active(&mut self, now: Instant) {
        self.last_activity = now;
        self.sleep = Self::FIRST_SLEEP;
    }

    /// How long to wait before the next round (zero: only yield), after an idle round at `now`.
    pub fn idle(&mut self, now: Instant) -> Duration {
        if now.saturating_duration_since(self.last_activity) < self.spin {
            return Duration::ZERO;
        }
        let sleep = self.sleep;
        self.sleep = (self.sleep * 2).min(self.max_sleep);
        sleep
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spins_then_sleeps_longer_up_to_the_limit() {
        let t0 = Instant::now();
        let mut b = PollBackoff::new(t0);
        assert_eq!(b.idle(t0), Duration::ZERO);
        assert_eq!(b.idle(t0 + Duration::from_micros(199)), Duration::ZERO);
        let later = t0 + Duration::from_micros(200);
        let sleeps: Vec<u64> = (0..10).map(|_| b.idle(later).as_micros() as u64).collect();
        assert_eq!(sleeps, [10, 20, 40, 80, 160, 320, 640, 1000, 1000, 1000]);
        b.active(later);
        assert_eq!(b.idle(later), Duration::ZERO, "activity spins again");
        assert_eq!(
            b.idle(later + Duration::from_millis(1)),
            PollBackoff::FIRST_SLEEP
        );
    }

    #[test]
    fn a_zero_spin_sleeps_at_once() {
        let t0 = Instant::now();
        let mut b = PollBackoff::with(Duration::ZERO, Duration::from_micros(50), t0);
        let sleeps: Vec<u64> = (0..4).map(|_| b.idle(t0).as_micros() as u64).collect();
        assert_eq!(sleeps, [10, 20, 40, 50]);
    }
}
