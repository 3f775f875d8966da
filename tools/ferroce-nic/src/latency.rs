// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Doorbell-to-wire latency on the NIC's own clock (seed 1 §3.3 and §5.3): from the doorbell
//! write that posts send WQEs to the first frame of the first of them leaving the port, by how
//! the device learnt of the WQE. `Rung`: an SQ doorbell woke the device thread, which fetched
//! the WQE from the ring by DMA (the seed's interrupt mode: the thread sleeps until the
//! doorbell). `Pushed`: the WQE came with the doorbell through the push window, no fetch (the
//! seed's "Doorbell Bell"). `Polled`: the device found the producer index in the QP's doorbell
//! record, which it polls (the seed's polling mode); the record was written after the previous
//! poll, so the interval is counted from that poll, an upper bound (the first poll after the
//! device slept samples nothing). One sample per doorbell: a
//! chain's later WQEs wait behind the first.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// How the device learnt of a WQE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Noticed {
    /// SQ doorbell, then a WQE fetch.
    Rung = 0,
    /// Push window and doorbell.
    Pushed = 1,
    /// A new producer index in a doorbell record the device polls, then a WQE fetch.
    Polled = 2,
}

impl Noticed {
    const ALL: [Noticed; 3] = [Noticed::Rung, Noticed::Pushed, Noticed::Polled];

    fn name(self) -> &'static str {
        match self {
            Noticed::Rung => "rung",
            Noticed::Pushed => "pushed",
            Noticed::Polled => "polled",
        }
    }
}

/// Samples kept per kind (the oldest go first).
pub const MAX_SAMPLES: usize = 1 << 16;
/// Doorbells remembered per QP until their first WQE leaves (more are not sampled).
pub const MAX_PENDING: usize = 64;

/// A doorbell whose first WQE has not left yet.
#[derive(Clone, Copy, Debug)]
pub struct Rang {
    /// Ring index of the first WQE the doorbell posted.
    pub first: u16,
    /// When the doorbell arrived.
    pub at: Instant,
    /// How.
    pub noticed: Noticed,
}

/// Doorbells of one QP waiting for their first frame.
#[derive(Default, Debug)]
pub struct PendingDoorbells(VecDeque<Rang>);

impl PendingDoorbells {
    /// A doorbell, arrived `at`, posting WQEs from ring index `first` on.
    pub fn rang(&mut self, first: u16, noticed: Noticed, at: Instant) {
        if self.0.len() < MAX_PENDING {
            self.0.push_back(Rang { first, at, noticed });
        }
    }

    /// WQE `index` put its first frame on the wire: the doorbell that posted it, if it was the
    /// first WQE of that doorbell. Doorbells for WQEs before it are forgotten (they were
    /// flushed, or their WQE sent nothing: a local operation).
    pub fn on_wire(&mut self, index: u16) -> Option<Rang> {
        while let Some(r) = self.0.front() {
            let behind = index.wrapping_sub(r.first);
            if behind == 0 {
                return self.0.pop_front();
            }
            if behind < 0x8000 {
                self.0.pop_front();
            } else {
                return None;
            }
        }
        None
    }
}

/// The samples, by [`Noticed`].
#[derive(Default)]
pub struct DoorbellLatency {
    samples: [VecDeque<Duration>; 3],
}

impl DoorbellLatency {
    /// Records one doorbell-to-wire interval.
    pub fn record(&mut self, noticed: Noticed, d: Duration) {
        let s = &mut self.samples[noticed as usize];
        if s.len() >= MAX_SAMPLES {
            s.pop_front();
        }
        s.push_back(d);
    }

    /// Forgets every sample.
    pub fn reset(&mut self) {
        self.samples.iter_mut().for_each(VecDeque::clear);
    }

    /// Count, average, median and 99th percentile in µs, per kind (`ctl latency`).
    pub fn summary(&self) -> Value {
        let mut out = serde_json::Map::new();
        for kind in Noticed::ALL {
            let mut us: Vec<f64> = self.samples[kind as usize]
                .iter()
                .map(|d| d.as_secs_f64() * 1e6)
                .collect();
            us.sort_by(f64::total_cmp);
            let at =
                |q: f64| us.get(((us.len() as f64 * q) as usize).min(us.len().saturating_sub(1)));
            let avg = (!us.is_empty()).then(|| us.iter().sum::<f64>() / us.len() as f64);
            out.insert(
                kind.name().into(),
                json!({"count": us.len(), "avg_us": avg, "p50_us": at(0.5), "p99_us": at(0.99)}),
            );
        }
        Value::Object(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_doorbell_is_sampled_once_by_its_first_wqe() {
        let mut p = PendingDoorbells::default();
        p.rang(4, Noticed::Rung, Instant::now()); // posts 4..8
        p.rang(8, Noticed::Pushed, Instant::now()); // posts 8
        assert!(p.on_wire(3).is_none(), "before any doorbell");
        assert_eq!(p.on_wire(4).map(|r| r.noticed), Some(Noticed::Rung));
        assert!(p.on_wire(5).is_none(), "a later WQE of the chain");
        assert_eq!(p.on_wire(8).map(|r| r.noticed), Some(Noticed::Pushed));
        p.rang(0xfffe, Noticed::Rung, Instant::now());
        p.rang(2, Noticed::Rung, Instant::now());
        assert_eq!(
            p.on_wire(2).map(|r| r.first),
            Some(2),
            "the wrapped one was skipped"
        );
    }

    #[test]
    fn summary_by_kind() {
        let mut l = DoorbellLatency::default();
        for us in 1..=100 {
            l.record(Noticed::Pushed, Duration::from_micros(us));
        }
        let s = l.summary();
        assert_eq!(s["pushed"]["count"], 100);
        assert_eq!(s["pushed"]["p99_us"], 100.0);
        assert_eq!(s["rung"]["count"], 0);
        assert!(s["rung"]["avg_us"].is_null());
        l.reset();
        assert_eq!(l.summary()["pushed"]["count"], 0);
    }
}
