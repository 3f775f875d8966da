// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The device's time: where its timers read "now" (retransmission, RNR and ACK timeouts, the
//! frames the fault injector holds, CQ moderation, the page-fault repeat).
//!
//! `serve` runs the device on the host's monotonic clock. The in-process tests step two NICs
//! from one thread: on the host's clock a test thread descheduled for a millisecond looks to
//! the NICs like a peer that did not answer, and a lossy test could then fail with
//! RETRY_EXC_ERR on a loaded machine. They run the device on a [`VirtualTime`] instead, which
//! moves only when the test moves it (to the next deadline, once no NIC has anything left to
//! do), so that a run is a function of its inputs and its seeds.
//!
//! Virtual instants are real [`Instant`]s (an epoch plus an offset), so that the transport's
//! `Instant` and `Duration` arithmetic is the same on either clock. Latency samples, traces,
//! captures and the device thread's pacing measure the host and stay on its clock.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where the device's timers get the time.
#[derive(Clone, Debug, Default)]
pub enum Clock {
    /// The host's monotonic clock (`serve`).
    #[default]
    Wall,
    /// A time that moves only when its owner advances it (the in-process tests).
    Virtual(Arc<VirtualTime>),
}

impl Clock {
    /// The time now.
    pub fn now(&self) -> Instant {
        match self {
            Clock::Wall => Instant::now(),
            Clock::Virtual(time) => time.now(),
        }
    }
}

/// A time that stands still until it is advanced, and never goes back: an epoch (a real
/// instant, taken at creation) plus the nanoseconds advanced since. Shared by the devices that
/// read it (through [`Clock::Virtual`]) and the one that advances it; atomic, so that a device
/// may live on another thread.
#[derive(Debug)]
pub struct VirtualTime {
    epoch: Instant,
    nanos: AtomicU64,
}

impl VirtualTime {
    /// A time at its epoch.
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            epoch: Instant::now(),
            nanos: AtomicU64::new(0),
        })
    }

    /// The time now.
    pub fn now(&self) -> Instant {
        self.epoch + self.elapsed()
    }

    /// How far the time has been advanced since its epoch.
    pub fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.nanos.load(Ordering::Acquire))
    }

    /// Advances the time to `t`; an instant not after now leaves it as it is.
    pub fn advance_to(&self, t: Instant) {
        let nanos = t.saturating_duration_since(self.epoch).as_nanos();
        self.nanos
            .fetch_max(u64::try_from(nanos).unwrap_or(u64::MAX), Ordering::AcqRel);
    }

    /// Advances the time by `d`.
    pub fn advance(&self, d: Duration) {
        self.advance_to(self.now() + d);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn virtual_time_moves_only_forward_and_only_when_advanced() {
        let time = VirtualTime::new();
        let clock = Clock::Virtual(time.clone());
        let t0 = clock.now();
        std::thread::sleep(Duration::from_millis(2));
        assert_eq!(clock.now(), t0, "the host's time does not move it");
        time.advance(Duration::from_millis(5));
        assert_eq!(clock.now(), t0 + Duration::from_millis(5));
        time.advance_to(t0 + Duration::from_millis(1));
        assert_eq!(time.elapsed(), Duration::from_millis(5), "never back");
        time.advance_to(t0 + Duration::from_micros(7_250));
        assert_eq!(clock.now() - t0, Duration::from_micros(7_250));
        assert!(Clock::Wall.now() >= t0, "the wall clock is the host's");
    }
}
