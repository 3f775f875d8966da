// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Device counters, shared between the device, BAR0 and the host control interface.

use std::sync::atomic::{AtomicU64, Ordering};

use ferroce_hw::{
    COUNTER_CQES, COUNTER_EQES, COUNTER_NAMES, COUNTER_RX_PACKETS, COUNTER_TX_PACKETS, NUM_COUNTERS,
};

/// The device's counters (`COUNTER_*` indexes). Relaxed atomics: each is a statistic.
pub struct Counters {
    values: [AtomicU64; NUM_COUNTERS],
}

impl Default for Counters {
    fn default() -> Self {
        Self {
            values: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl Counters {
    /// All counters zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one to counter `index` (ignored if out of range).
    pub fn inc(&self, index: usize) {
        self.add(index, 1);
    }

    /// Adds `n` to counter `index` (ignored if out of range).
    pub fn add(&self, index: usize, n: u64) {
        if let Some(counter) = self.values.get(index) {
            counter.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Value of counter `index` (0 if out of range).
    pub fn get(&self, index: usize) -> u64 {
        self.values
            .get(index)
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }

    /// Frames sent and received (`COUNTER_TX_PACKETS` + `COUNTER_RX_PACKETS`): whether a
    /// round of the device moved any.
    pub fn frames(&self) -> u64 {
        self.get(COUNTER_TX_PACKETS) + self.get(COUNTER_RX_PACKETS)
    }

    /// What the device has moved so far: frames sent and received, CQEs and EQEs written. A
    /// round that moved something may have left work for the next at once (a QP stopped by its
    /// per-turn budget); a round that moved nothing waits for a signal or a deadline. The
    /// device thread and the in-process tests' pump judge alike by it.
    pub fn activity(&self) -> u64 {
        self.frames() + self.get(COUNTER_CQES) + self.get(COUNTER_EQES)
    }

    /// Named, non-reserved counters.
    pub fn named(&self) -> Vec<(&'static str, u64)> {
        COUNTER_NAMES
            .iter()
            .enumerate()
            .filter(|(_, name)| !name.is_empty())
            .map(|(i, name)| (name.to_str().unwrap_or("?"), self.get(i)))
            .collect()
    }
}
