// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Doorbell decoding (vfio-user thread): which context page, which register, QID translation,
//! index validation, push window capture. The resulting work goes to the device thread.

use std::collections::VecDeque;
use std::time::Instant;

use ferroce_hw::*;

use crate::bus::Bus;
use crate::device::{DeviceCore, Work};
use crate::latency::Noticed;
use crate::objects::Qp;

/// Most rejected doorbells kept for reporting; older ones are dropped.
const MAX_PENDING_BAD_DOORBELLS: usize = 64;

/// Per-context push window contents, written by the guest before a push doorbell.
struct PushWindows {
    windows: Vec<[u8; PUSH_WINDOW_SIZE]>,
}

impl Default for PushWindows {
    fn default() -> Self {
        Self {
            windows: vec![[0u8; PUSH_WINDOW_SIZE]; NUM_DB_PAGES],
        }
    }
}

/// Doorbell decoder state: the push windows and the rejected doorbells the device thread has yet
/// to report.
#[derive(Default)]
pub struct Doorbells {
    push: PushWindows,
    /// Rejected doorbells (context, value) to report as async events; bounded.
    bad: VecDeque<(u32, u32)>,
}

impl Doorbells {
    /// Stores bytes written to context `ctx`'s push window at `offset`; out-of-window parts are
    /// dropped.
    pub fn push_write(&mut self, ctx: usize, offset: usize, data: &[u8]) {
        if let Some(window) = self.push.windows.get_mut(ctx) {
            if let Some(dst) = offset
                .checked_add(data.len())
                .and_then(|end| window.get_mut(offset..end))
            {
                dst.copy_from_slice(data);
            }
        }
    }

    /// Zeroes the push window of context `ctx` (its number goes to another tenant).
    fn clear_push_window(&mut self, ctx: usize) {
        if let Some(window) = self.push.windows.get_mut(ctx) {
            window.fill(0);
        }
    }

    /// Forgets everything the decoder holds for context `ctx`, so that the next tenant of the
    /// context number (FREE_CTX, then ALLOC_CTX of the same doorbell page) sees nothing of the
    /// previous one.
    pub fn clear_context(&mut self, ctx: usize) {
        self.clear_push_window(ctx);
        // A rejected doorbell of the old tenant reported after the new one got the page would
        // be blamed on the new one.
        self.bad.retain(|&(c, _)| c as usize != ctx);
    }

    /// The push window of context `ctx`.
    pub fn push_window(&self, ctx: usize) -> Option<&[u8; PUSH_WINDOW_SIZE]> {
        self.push.windows.get(ctx)
    }

    /// Rejects a doorbell of context `ctx` to register `reg`: counts and traces it, and keeps
    /// it for the device thread to report as an async event (the oldest goes when too many are
    /// waiting).
    pub fn reject(&mut self, bus: &Bus, ctx: usize, reg: usize, value: u32) {
        bus.counters().inc(COUNTER_BAD_DOORBELLS);
        bus.trace().event(
            "bad_doorbell",
            || serde_json::json!({"ctx": ctx, "reg": reg, "value": value}),
        );
        self.record_bad(ctx as u32, value);
    }

    /// Keeps a rejected doorbell (or record) for the device thread to report (the oldest goes
    /// when too many are waiting).
    pub fn record_bad(&mut self, ctx: u32, value: u32) {
        self.bad.push_back((ctx, value));
        if self.bad.len() > MAX_PENDING_BAD_DOORBELLS {
            self.bad.pop_front();
        }
    }

    /// The oldest rejected doorbell not yet reported.
    pub fn take_bad(&mut self) -> Option<(u32, u32)> {
        self.bad.pop_front()
    }
}

impl DeviceCore {
    /// Rejects a doorbell; the async EQ write happens on the device thread, which reports it
    /// from there ([`Self::report_bad_doorbells`]).
    fn bad_doorbell(&mut self, ctx: usize, reg: usize, value: u32) {
        let (doorbells, bus) = self.doorbells_and_bus();
        doorbells.reject(bus, ctx, reg, value);
    }

    /// Decodes a 32-bit write to a doorbell register of context page `ctx`, made at `at`.
    pub fn doorbell_write(&mut self, ctx: usize, reg: usize, value: u32, at: Instant) {
        self.bus().counters().inc(COUNTER_DOORBELLS);
        let kind = match reg {
            DB_SQ | DB_RQ | DB_PUSH => QID_KIND_QP,
            DB_SRQ => QID_KIND_SRQ,
            DB_CQ_ARM => QID_KIND_CQ,
            _ => return self.bad_doorbell(ctx, reg, value),
        };
        let qid = (value >> 16) as u16;
        let number = self.objects().translate_qid(ctx, qid, kind);
        let slot = self.config().function;
        // The context's QID, the function's number it names, and that number in the NIC.
        self.bus().trace().event("doorbell", || {
            serde_json::json!({"ctx": ctx, "reg": reg, "qid": qid, "value": value,
                "fn": slot.index, "num": number, "nic": number.map(|n| slot.nic_number(kind, n))})
        });
        let Some(global) = number else {
            return self.bad_doorbell(ctx, reg, value);
        };
        let accepted = match reg {
            DB_SQ => {
                let index = Doorbell::decode(value).index;
                self.sq_doorbell(global, index, None, Noticed::Rung, Some(at))
            }
            DB_PUSH => {
                let index = Doorbell::decode(value).index;
                let bytes = self.doorbells().push_window(ctx).map(|w| w.to_vec());
                self.sq_doorbell(global, index, bytes, Noticed::Pushed, Some(at))
            }
            DB_RQ => self.rq_doorbell(global),
            DB_SRQ => {
                let exists = self.objects().srqs().get(global).is_some();
                self.queue_work(Work::Srq(global));
                exists
            }
            _ => {
                let solicited = CqArmDoorbell::decode(value).solicited;
                self.arm_cq(global, solicited)
            }
        };
        if !accepted {
            self.bad_doorbell(ctx, reg, value);
        }
    }

    /// Records a new SQ producer index (and a pushed WQE, which stands for `index - 1`),
    /// announced `since` (if known: then the doorbell-to-wire interval is sampled) by a
    /// doorbell, a push or a record. `false` if the index is not valid.
    pub(crate) fn sq_doorbell(
        &mut self,
        qpn: u32,
        index: u16,
        pushed: Option<Vec<u8>>,
        noticed: Noticed,
        since: Option<Instant>,
    ) -> bool {
        let rung = self
            .objects_mut()
            .qps_mut()
            .get_mut(qpn)
            .is_some_and(|qp| qp.ring_sq(index, pushed, noticed, since));
        if rung {
            self.queue_work(Work::Qp(qpn));
        }
        rung
    }

    /// New receive WQEs on QP `qpn` (`DB_RQ` or its record): the engine may end an RNR wait.
    /// `false` if the QP has no receive queue of its own.
    pub(crate) fn rq_doorbell(&mut self, qpn: u32) -> bool {
        let announced = self
            .objects_mut()
            .qps_mut()
            .get_mut(qpn)
            .is_some_and(Qp::announce_recv);
        if announced {
            self.queue_work(Work::Qp(qpn));
        }
        announced
    }

    /// Handles an EQ doorbell write (`REG_EQ_DB`).
    pub fn eq_doorbell_write(&mut self, value: u32) {
        self.bus().counters().inc(COUNTER_DOORBELLS);
        let db = EqDoorbell::decode(value);
        let eqn = u32::from(db.eqn);
        self.bus().trace().event(
            "eq_doorbell",
            || serde_json::json!({"eqn": eqn, "ci": db.ci, "arm": db.arm}),
        );
        match self.objects_mut().eqs_mut().get_mut(eqn) {
            Some(eq) => {
                eq.ring(db);
                self.queue_work(Work::Eq(eqn));
            }
            None => self.bus().counters().inc(COUNTER_BAD_DOORBELLS),
        }
    }

    /// Reports doorbell errors collected by the decoder (device thread). A process ringing
    /// garbage must not fill the async EQ, which carries the port's and the device's own events:
    /// an error is reported only while the EQ is at most half full, and otherwise only counted
    /// (`bad_doorbells`, as every rejected doorbell is).
    pub fn report_bad_doorbells(&mut self) {
        while let Some((ctx, value)) = self.doorbells_mut().take_bad() {
            if self.async_room() {
                self.post_async_event(EventType::DoorbellError, 0, ctx, value);
            } else {
                self.bus().trace().event(
                    "doorbell_error_unreported",
                    || serde_json::json!({"ctx": ctx, "value": value}),
                );
            }
        }
    }
}
