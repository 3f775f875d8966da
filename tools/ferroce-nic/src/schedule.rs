// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The device thread's share for one function. The functions of a NIC take turns on its one
//! device thread: each turn is one budgeted round of commands, queued objects and engine work
//! ([`Device::process`](crate::device::Device::process)), so a busy function cannot take more
//! than its turn. A function with a doorbell rate (`db_rate`, set by the host as a PF driver
//! would) pays for the doorbells it rang since its last turn from a token bucket, and sits its
//! turns out while the bucket is empty: doorbells are never lost, only serviced later.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::Serialize;

/// The most doorbells a function may owe: a burst costs it at most this many doorbells' time.
const MAX_DEBT_SECS: f64 = 0.05;

/// One function's turns and doorbell budget.
pub struct Schedule {
    bucket: Mutex<Bucket>,
    turns: AtomicU64,
    full_turns: AtomicU64,
    throttled: AtomicU64,
}

struct Bucket {
    /// Doorbells per second; 0: no limit.
    rate: u32,
    /// Doorbells the function may still ring (negative: owed).
    tokens: f64,
    /// The doorbell count already paid for.
    paid: u64,
    last: Option<Instant>,
}

/// What `ctl functions` shows of a function's schedule.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ScheduleStats {
    /// Doorbells per second the function may ring (0: no limit).
    pub db_rate: u32,
    /// Turns the function took.
    pub turns: u64,
    /// Turns that ended with work left (the function used its whole budget).
    pub full_turns: u64,
    /// Turns it sat out over its doorbell rate.
    pub throttled: u64,
}

impl Schedule {
    /// A schedule with a doorbell rate (`0`: none).
    pub fn new(db_rate: u32) -> Self {
        Self {
            bucket: Mutex::new(Bucket {
                rate: db_rate,
                tokens: 0.0,
                paid: 0,
                last: None,
            }),
            turns: AtomicU64::new(0),
            full_turns: AtomicU64::new(0),
            throttled: AtomicU64::new(0),
        }
    }

    fn bucket(&self) -> std::sync::MutexGuard<'_, Bucket> {
        self.bucket.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sets the doorbell rate (`0`: none); the budget starts afresh.
    pub fn set_rate(&self, db_rate: u32) {
        let mut bucket = self.bucket();
        bucket.rate = db_rate;
        bucket.tokens = 0.0;
        bucket.last = None;
    }

    /// Whether the function takes its turn at `now`, having rung `doorbells` doorbells in all.
    pub fn take_turn(&self, now: Instant, doorbells: u64) -> bool {
        let mut bucket = self.bucket();
        let rung = doorbells.saturating_sub(bucket.paid);
        bucket.paid = doorbells;
        if bucket.rate == 0 {
            drop(bucket);
            self.turns.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        let rate = f64::from(bucket.rate);
        // A second's worth at most, or one doorbell for very low rates.
        let burst = rate.max(1.0);
        let elapsed = bucket.last.map_or(0.0, |last| {
            now.saturating_duration_since(last).as_secs_f64()
        });
        bucket.last = Some(now);
        bucket.tokens = (bucket.tokens + elapsed * rate).min(burst) - rung as f64;
        bucket.tokens = bucket.tokens.max(-rate * MAX_DEBT_SECS - 1.0);
        let go = bucket.tokens >= 0.0;
        drop(bucket);
        let counter = if go { &self.turns } else { &self.throttled };
        counter.fetch_add(1, Ordering::Relaxed);
        go
    }

    /// The turn ended; `more`: with work left over.
    pub fn ran(&self, more: bool) {
        if more {
            self.full_turns.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// When a function that sat its last turn out will have paid what it owes (none: it takes
    /// its turns). The device thread sleeps until then if nothing else wakes it.
    pub fn next_turn(&self) -> Option<Instant> {
        let bucket = self.bucket();
        if bucket.rate == 0 || bucket.tokens >= 0.0 {
            return None;
        }
        let owed_secs = -bucket.tokens / f64::from(bucket.rate);
        // Rounded up, and a microsecond over: at that instant the refill covers the debt.
        let owed = Duration::from_micros((owed_secs * 1e6).ceil() as u64 + 1);
        bucket.last.map(|last| last + owed)
    }

    /// The counts so far.
    pub fn stats(&self) -> ScheduleStats {
        ScheduleStats {
            db_rate: self.bucket().rate,
            turns: self.turns.load(Ordering::Relaxed),
            full_turns: self.full_turns.load(Ordering::Relaxed),
            throttled: self.throttled.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_rate_takes_every_turn() {
        let s = Schedule::new(0);
        let now = Instant::now();
        assert!((0..10).all(|i| s.take_turn(now, i * 1000)));
        s.ran(true);
        assert_eq!(s.stats().turns, 10);
        assert_eq!(s.stats().full_turns, 1);
        assert_eq!(s.stats().throttled, 0);
    }

    #[test]
    fn a_flood_sits_out_until_paid_for() {
        let s = Schedule::new(1000);
        let t0 = Instant::now();
        assert!(s.take_turn(t0, 0), "nothing rung yet");
        // 60 doorbells in 10 ms: 10 were affordable, 50 are owed (50 ms at 1000/s).
        assert_eq!(s.next_turn(), None, "nothing owed");
        assert!(!s.take_turn(t0 + Duration::from_millis(10), 60));
        let paid = t0 + Duration::from_millis(60);
        let next = s.next_turn().expect("sits out until paid");
        assert!(
            next > paid && next <= paid + Duration::from_micros(2),
            "{:?}",
            next - paid
        );
        assert!(!s.take_turn(t0 + Duration::from_millis(40), 60));
        let again = s.next_turn().expect("still owed");
        assert!(
            again > paid && again <= paid + Duration::from_micros(2),
            "the same debt"
        );
        assert!(s.take_turn(again, 60), "and paid then");
        assert_eq!(s.next_turn(), None);
        assert!(s.take_turn(t0 + Duration::from_millis(61), 60));
        // A huge burst owes at most MAX_DEBT_SECS.
        assert!(!s.take_turn(t0 + Duration::from_millis(62), 1_000_000));
        assert!(s.take_turn(t0 + Duration::from_millis(62 + 52), 1_000_000));
        assert_eq!(s.stats().throttled, 3);
        assert_eq!(s.stats().turns, 4);
        s.set_rate(0);
        assert!(s.take_turn(t0, 2_000_000));
    }
}
