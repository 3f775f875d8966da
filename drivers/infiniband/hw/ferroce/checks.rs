// SPDX-License-Identifier: GPL-2.0

//! What the driver does with values from the device that it does not believe: it counts them
//! (the `driver_*` counters after the NIC's own in `hw_counters/`), reports them in the kernel
//! log with a limit on the rate, and never passes them on to a consumer.

use kernel::{
    prelude::*,
    sync::atomic::{
        Atomic,
        Relaxed, //
    },
};

use crate::hw;

/// The driver's counters, after the device's in ib_core's `hw_counters/`: CQEs refused, events
/// for objects that do not exist, CQEs of destroyed QPs removed from their CQs, doorbells the
/// device rejected, and WRs whose CQEs never came that the driver completed as flushed.
pub(crate) const COUNTER_NAMES: [&CStr; NUM_COUNTERS] = [
    c"driver_bad_cqes",
    c"driver_bad_events",
    c"driver_cleaned_cqes",
    c"driver_doorbell_errors",
    c"driver_flushed_wrs",
];
/// Number of driver counters.
pub(crate) const NUM_COUNTERS: usize = 5;

/// Why a CQE was not delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BadCqe {
    /// An opcode, status or header type the interface does not define.
    Undefined,
    /// No QP of the device has the number.
    UnknownQp,
    /// The QP is a process's, or its queue of this kind completes on another CQ.
    ForeignQp,
    /// The WQE index names no WQE that was posted and is not completed.
    WqeIndex,
    /// The CQE disagrees with the WQE at its index.
    Mismatch(hw::CqeMismatch),
}

impl BadCqe {
    fn describe(self) -> &'static str {
        match self {
            Self::Undefined => "undefined opcode or status",
            Self::UnknownQp => "no such QP",
            Self::ForeignQp => "QP of another CQ or of a process",
            Self::WqeIndex => "WQE index outside the posted WQEs",
            Self::Mismatch(hw::CqeMismatch::WrId) => "wr_id not the posted one",
            Self::Mismatch(hw::CqeMismatch::Opcode) => "opcode not the posted one",
            Self::Mismatch(hw::CqeMismatch::ByteLen) => "byte_len beyond the posted buffers",
        }
    }
}

/// Reports of one kind that go to the log in full; after these, only every power of two.
const REPORTS_IN_FULL: u64 = 10;

/// Counts of what the device got wrong (and of CQEs the driver removed), shared by every queue
/// of the device.
pub(crate) struct DeviceChecks {
    bad_cqes: Atomic<u64>,
    bad_events: Atomic<u64>,
    cleaned_cqes: Atomic<u64>,
    doorbell_errors: Atomic<u64>,
    flushed_wrs: Atomic<u64>,
}

impl DeviceChecks {
    pub(crate) const fn new() -> Self {
        Self {
            bad_cqes: Atomic::new(0),
            bad_events: Atomic::new(0),
            cleaned_cqes: Atomic::new(0),
            doorbell_errors: Atomic::new(0),
            flushed_wrs: Atomic::new(0),
        }
    }

    /// The counters in [`COUNTER_NAMES`] order.
    pub(crate) fn values(&self) -> [u64; NUM_COUNTERS] {
        [
            self.bad_cqes.load(Relaxed),
            self.bad_events.load(Relaxed),
            self.cleaned_cqes.load(Relaxed),
            self.doorbell_errors.load(Relaxed),
            self.flushed_wrs.load(Relaxed),
        ]
    }

    /// Counts `n` CQEs of a destroyed QP removed from a CQ.
    pub(crate) fn cleaned_cqes(&self, n: u16) {
        self.cleaned_cqes.fetch_add(u64::from(n), Relaxed);
    }

    /// Counts a WR of QP `qpn` (posted at `index`) whose CQE never came, which the driver
    /// completed as flushed, and reports it (rate-limited). Callable in any context.
    pub(crate) fn flushed_wr(&self, qpn: u32, index: u16) {
        if let Some(n) = count_reported(&self.flushed_wrs) {
            pr_warn!(
                "ferroce: QP {}: the device went past WQE {} without its CQE; completed it as flushed ({} so far)\n",
                qpn,
                index,
                n
            );
        }
    }

    /// Counts a CQE the driver dropped and reports it (rate-limited). Callable in any context.
    pub(crate) fn bad_cqe(&self, cqn: u32, cqe: &hw::Cqe, why: BadCqe) {
        if let Some(n) = count_reported(&self.bad_cqes) {
            pr_warn!(
                "ferroce: CQ {}: dropped a CQE the device wrote ({}): QP {} index {} opcode {:#x} status {} byte_len {} ({} so far)\n",
                cqn,
                why.describe(),
                cqe.qpn,
                cqe.wqe_index,
                cqe.opcode,
                cqe.status,
                cqe.byte_len,
                n
            );
        }
    }

    /// Counts a doorbell the device rejected (a process's: it hurts only its own queues) and
    /// notes it in the log (rate-limited: a process ringing garbage cannot flood it).
    pub(crate) fn doorbell_error(&self, dev: &kernel::device::Device, ctx: u32, value: u32) {
        if let Some(n) = count_reported(&self.doorbell_errors) {
            dev_info!(
                dev,
                "doorbell {:#010x} of context {} rejected ({} so far)\n",
                value,
                ctx,
                n
            );
        }
    }

    /// Counts an event for an object that does not exist and reports it (rate-limited).
    pub(crate) fn bad_event(&self, kind: &str, number: u32) {
        if let Some(n) = count_reported(&self.bad_events) {
            pr_warn!(
                "ferroce: dropped an event of {} {}, which does not exist ({} so far)\n",
                kind,
                number,
                n
            );
        }
    }
}

/// Counts one more in `counter`; its new value if this one is to be reported ([`reported`]).
fn count_reported(counter: &Atomic<u64>) -> Option<u64> {
    let n = counter.fetch_add(1, Relaxed) + 1;
    reported(n).then_some(n)
}

/// Whether the `n`th report (from 1) of a kind goes to the log: the first few, then every power
/// of two, so that a device writing garbage at full speed cannot flood it.
fn reported(n: u64) -> bool {
    n <= REPORTS_IN_FULL || n.is_power_of_two()
}

#[kunit_tests(ferroce_checks)]
mod tests {
    use super::*;

    #[test]
    fn reports_thin_out() {
        let logged = (1..=1_000_000u64).filter(|&n| reported(n)).count();
        // 10 in full, then 16, 32, ... 2^19.
        assert_eq!(logged, 10 + 16);
    }
}
