// SPDX-License-Identifier: GPL-2.0

//! What the driver does with values from the device that it does not believe: it counts them
//! (the `driver_*` counters after the NIC's own in `hw_counters/`), reports them in the kernel
//! log with a limit on the rate, and never passes them on to a consumer.

use kernel::{
    prelude::*,
    rdma::Table,
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        new_mutex,
        Mutex, //
    },
};

use crate::hw;

/// The driver's counters, after the device's in ib_core's `hw_counters/`: CQEs refused, events
/// for objects that do not exist, command completions not believed, CQEs of destroyed QPs
/// removed from their CQs, doorbells the device rejected, and WRs whose CQEs never came that the
/// driver completed as flushed.
pub(crate) const COUNTER_NAMES: [&CStr; NUM_COUNTERS] = [
    c"driver_bad_cqes",
    c"driver_bad_events",
    c"driver_bad_replies",
    c"driver_cleaned_cqes",
    c"driver_doorbell_errors",
    c"driver_flushed_wrs",
];
/// Number of driver counters.
pub(crate) const NUM_COUNTERS: usize = 6;

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

/// Memory the device may use for an object whose number the driver does not know.
type Held = KVec<KBox<dyn Send>>;

/// Counts of what the device got wrong (and of CQEs the driver removed), shared by every queue
/// of the device, and the memory its lies keep from being freed.
pub(crate) struct DeviceChecks {
    bad_cqes: Atomic<u64>,
    bad_events: Atomic<u64>,
    bad_replies: Atomic<u64>,
    cleaned_cqes: Atomic<u64>,
    doorbell_errors: Atomic<u64>,
    flushed_wrs: Atomic<u64>,
    /// Rings and records of objects the device created under a number it did not tell: freed
    /// with the device's state, which goes after the device is reset (`device.rs`).
    held: Pin<KBox<Mutex<Held>>>,
}

impl DeviceChecks {
    pub(crate) fn new() -> Result<Self> {
        Ok(Self {
            bad_cqes: Atomic::new(0),
            bad_events: Atomic::new(0),
            bad_replies: Atomic::new(0),
            cleaned_cqes: Atomic::new(0),
            doorbell_errors: Atomic::new(0),
            flushed_wrs: Atomic::new(0),
            held: KBox::pin_init(new_mutex!(KVec::new(), "ferroce::held"), GFP_KERNEL)?,
        })
    }

    /// The counters in [`COUNTER_NAMES`] order.
    pub(crate) fn values(&self) -> [u64; NUM_COUNTERS] {
        [
            self.bad_cqes.load(Relaxed),
            self.bad_events.load(Relaxed),
            self.bad_replies.load(Relaxed),
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

    /// Counts a completion in the slot of command `name` that is not its own (another token: a
    /// command nobody posted), which the driver passed over to wait for its own, and reports it
    /// (rate-limited).
    pub(crate) fn foreign_completion(&self, dev: &kernel::device::Device, name: &str, token: u32) {
        if let Some(n) = count_reported(&self.bad_replies) {
            dev_warn!(
                dev,
                "command {}: passed over a completion in its slot for token {:#x}, which no command in flight has ({} so far)\n",
                name,
                token,
                n
            );
        }
    }

    /// Takes `number`, which the device gave a `kind` it just created, if no object of `table`
    /// has it; returns `memory`, the new object's rings and records, for it. A live object's
    /// number is a lie (counted in `driver_bad_replies` and reported): the creation then fails
    /// with [`EIO`], and nothing is destroyed by that number, which is another's. The device
    /// may use `memory` for the object it did create, under a number the driver does not know:
    /// it is kept until the device is reset (leaked if even that cannot be allocated).
    pub(crate) fn new_number<O, M: Send + 'static>(
        &self,
        table: &Table<O>,
        kind: &str,
        number: u32,
        memory: M,
    ) -> Result<M> {
        if !table.contains(number) {
            return Ok(memory);
        }
        self.hold(memory);
        if let Some(n) = count_reported(&self.bad_replies) {
            pr_err!(
                "ferroce: the device numbered a new {} {}, which another {} has; the creation fails and its memory stays with the device ({} so far)\n",
                kind,
                number,
                kind,
                n
            );
        }
        Err(EIO)
    }

    /// Keeps `memory` until the device is reset; leaks it if that takes memory there is not.
    fn hold<M: Send + 'static>(&self, memory: M) {
        let mut held = self.held.lock();
        let boxed: KBox<dyn Send> = match (
            held.reserve(1, GFP_KERNEL),
            KBox::<M>::new_uninit(GFP_KERNEL),
        ) {
            (Ok(()), Ok(slot)) => slot.write(memory),
            _ => return core::mem::forget(memory),
        };
        if let Err(e) = held.push_within_capacity(boxed) {
            core::mem::forget(e);
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
