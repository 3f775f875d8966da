// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Object tables (EQ, CQ, QP, MR, AH, SRQ, GID, multicast groups, contexts with QID translation) and the
//! resolution of guest buffers (contiguous or page lists) they live in.

use std::collections::{BTreeSet, VecDeque};
use std::time::Instant;

use ferroce_hw::*;
use serde::Serialize;

use crate::device::{DeviceConfig, Work};
use crate::engine::roce::QpTransport;
use crate::mcast::McastGroups;
use crate::qp::QpAttrs;

pub mod ah;
pub mod errors;
pub mod gid;
mod mr;
mod odp;
mod ring;
mod table;
pub use crate::eq::Eq;
pub use ah::{ah_from_av, check_ah, Ah};
pub(crate) use errors::field_error;
pub use errors::{reserved_bytes_zero, reserved_zero, CmdError, MrError};
pub use gid::GidEntry;
pub use mr::{mr_access_valid, Binding, Fault, Mr, MrBacking, Pieces, Window};
pub use odp::{access_writes, OdpPages};
pub use ring::{BufferMap, RingBuffer};
pub use table::Table;

/// The object tables: EQs, CQs, QPs, MRs, AHs, SRQs, the GID table and the contexts with
/// their QID translation tables.
pub struct Objects {
    eqs: Table<Eq>,
    cqs: Table<Cq>,
    qps: Table<Qp>,
    mrs: Table<Mr>,
    /// The key each MR table slot had last, live or freed: a new MR or window there never gets
    /// it again, so that a stale rkey of the old one does not reach the new one.
    mr_last_keys: Vec<Option<u32>>,
    ahs: Table<Ah>,
    srqs: Table<Srq>,
    gids: Vec<Option<GidEntry>>,
    mcast: McastGroups,
    /// Contexts (doorbell pages); 0 is the kernel's and always exists.
    contexts: Vec<Option<Context>>,
    /// Page-list entries all objects together may hold.
    max_translation_entries: u64,
    /// The CQs with unreported CQEs (see [`Objects::unreported_cqs`]).
    unreported_cqs: BTreeSet<u32>,
}

fn fresh_contexts() -> Vec<Option<Context>> {
    let mut contexts: Vec<Option<Context>> = (0..NUM_DB_PAGES).map(|_| None).collect();
    contexts[0] = Some(Context::new());
    contexts
}

impl Objects {
    /// Empty tables sized by `config`.
    pub fn new(config: &DeviceConfig) -> Self {
        Self {
            eqs: Table::new(config.max_eq.max(EQN_FIRST_COMPLETION), 0),
            cqs: Table::new(config.max_cq, 0),
            qps: if config.qpn_lowest_free {
                Table::new(config.max_qp.max(FIRST_QPN), FIRST_QPN)
            } else {
                Table::new_cyclic(config.max_qp.max(FIRST_QPN), FIRST_QPN)
            },
            mrs: Table::new(config.max_mr, 1),
            mr_last_keys: vec![None; config.max_mr as usize],
            ahs: Table::new(config.max_ah, 0),
            srqs: Table::new(config.max_srq, 0),
            gids: vec![None; GID_TABLE_LEN as usize],
            mcast: McastGroups::default(),
            contexts: fresh_contexts(),
            max_translation_entries: config.max_translation_entries,
            unreported_cqs: BTreeSet::new(),
        }
    }

    /// Multicast groups.
    pub fn mcast(&self) -> &McastGroups {
        &self.mcast
    }

    /// Multicast groups, mutably.
    pub fn mcast_mut(&mut self) -> &mut McastGroups {
        &mut self.mcast
    }

    /// Event queues.
    pub fn eqs(&self) -> &Table<Eq> {
        &self.eqs
    }

    /// Event queues, mutably.
    pub fn eqs_mut(&mut self) -> &mut Table<Eq> {
        &mut self.eqs
    }

    /// Completion queues.
    pub fn cqs(&self) -> &Table<Cq> {
        &self.cqs
    }

    /// Completion queues, mutably.
    pub fn cqs_mut(&mut self) -> &mut Table<Cq> {
        &mut self.cqs
    }

    /// Removes CQ `cqn`.
    pub fn remove_cq(&mut self, cqn: u32) -> Option<Cq> {
        self.unreported_cqs.remove(&cqn);
        self.cqs.remove(cqn)
    }

    /// A CQE was written to CQ `cqn` at `now_us` that its event has yet to report: moderation
    /// counts it, and its period runs from the first such CQE. Returns the CQ.
    pub fn cq_unreported(&mut self, cqn: u32, now_us: u64) -> Option<&Cq> {
        let cq = self.cqs.get_mut(cqn)?;
        cq.unreported += 1;
        cq.first_unreported_us.get_or_insert(now_us);
        self.unreported_cqs.insert(cqn);
        Some(cq)
    }

    /// CQ `cqn`'s event reported its CQEs.
    pub fn cq_reported(&mut self, cqn: u32) -> Option<&mut Cq> {
        self.unreported_cqs.remove(&cqn);
        let cq = self.cqs.get_mut(cqn)?;
        cq.unreported = 0;
        cq.first_unreported_us = None;
        Some(cq)
    }

    /// The CQs with CQEs their event has yet to report, in CQN order: the only ones
    /// moderation's timer looks at, whatever the number of CQs.
    pub fn unreported_cqs(&self) -> impl Iterator<Item = (u32, &Cq)> + '_ {
        self.unreported_cqs
            .iter()
            .filter_map(|&cqn| Some((cqn, self.cqs.get(cqn)?)))
    }

    /// Queue pairs.
    pub fn qps(&self) -> &Table<Qp> {
        &self.qps
    }

    /// Queue pairs, mutably.
    pub fn qps_mut(&mut self) -> &mut Table<Qp> {
        &mut self.qps
    }

    /// Memory regions.
    pub fn mrs(&self) -> &Table<Mr> {
        &self.mrs
    }

    /// Memory regions, mutably.
    pub fn mrs_mut(&mut self) -> &mut Table<Mr> {
        &mut self.mrs
    }

    /// Puts `mr` (an MR or a window) in the lowest free slot whose last key is not the one
    /// `variant` makes there; returns the key. So a slot never gets its last key again, and a
    /// driver's random variant is refused only when every free slot had that key last
    /// (`STATUS_STALE_KEY`: it asks again with another variant). `STATUS_NO_RESOURCES` if no
    /// slot is free.
    pub fn insert_mr(&mut self, mut mr: Mr, variant: u8) -> Result<u32, CmdError> {
        let repeats = |i: u32| {
            self.mr_last_keys.get(i as usize).copied().flatten() == Some(mr_key(i, variant))
        };
        let index = match self.mrs.free_numbers().find(|&i| !repeats(i)) {
            Some(index) => index,
            None if self.mrs.free_number().is_some() => {
                return Err(CmdError::new(STATUS_STALE_KEY))
            }
            None => return Err(CmdError::new(STATUS_NO_RESOURCES)),
        };
        let key = mr_key(index, variant);
        mr.key = key;
        self.mrs.insert_at(index, mr);
        Ok(key)
    }

    /// Removes the MR or window in slot `index`, remembering its key as the slot's last.
    pub fn remove_mr(&mut self, index: u32) -> Option<Mr> {
        let mr = self.mrs.remove(index)?;
        if let Some(last) = self.mr_last_keys.get_mut(index as usize) {
            *last = Some(mr.key);
        }
        Some(mr)
    }

    /// The tables of a reset function: empty, but for the key each MR slot had last (live
    /// MRs' keys included), which outlives the reset as the peers' stale rkeys do.
    pub fn renewed(&self, config: &DeviceConfig) -> Self {
        let mut fresh = Self::new(config);
        for (slot, last) in fresh.mr_last_keys.iter_mut().enumerate() {
            let live = self.mrs.get(slot as u32).map(|mr| mr.key);
            *last = live.or(self.mr_last_keys.get(slot).copied().flatten());
        }
        fresh
    }

    /// Address handles.
    pub fn ahs(&self) -> &Table<Ah> {
        &self.ahs
    }

    /// Address handles, mutably.
    pub fn ahs_mut(&mut self) -> &mut Table<Ah> {
        &mut self.ahs
    }

    /// Shared receive queues.
    pub fn srqs(&self) -> &Table<Srq> {
        &self.srqs
    }

    /// Shared receive queues, mutably.
    pub fn srqs_mut(&mut self) -> &mut Table<Srq> {
        &mut self.srqs
    }

    /// GID table entry `index`.
    pub fn gid(&self, index: u32) -> Option<GidEntry> {
        *self.gids.get(index as usize)?
    }

    /// The valid GID table entries with their indexes.
    pub fn gids(&self) -> impl Iterator<Item = (usize, GidEntry)> + '_ {
        self.gids
            .iter()
            .enumerate()
            .filter_map(|(index, entry)| entry.map(|e| (index, e)))
    }

    /// Sets (or with `None` clears) GID table entry `index`; `false` if there is no such
    /// index.
    pub fn set_gid(&mut self, index: u32, entry: Option<GidEntry>) -> bool {
        match self.gids.get_mut(index as usize) {
            Some(slot) => {
                *slot = entry;
                true
            }
            None => false,
        }
    }

    /// The allocated contexts with their numbers.
    pub fn contexts(&self) -> impl Iterator<Item = (usize, &Context)> {
        self.contexts
            .iter()
            .enumerate()
            .filter_map(|(n, c)| c.as_ref().map(|c| (n, c)))
    }

    /// Context `ctx`, if allocated.
    pub fn context_mut(&mut self, ctx: u32) -> Option<&mut Context> {
        self.contexts.get_mut(ctx as usize)?.as_mut()
    }

    /// Allocates the lowest free context; `None` if all are taken.
    pub fn alloc_context(&mut self) -> Option<u32> {
        let free = self.contexts.iter().position(Option::is_none)?;
        self.contexts[free] = Some(Context::new());
        Some(free as u32)
    }

    /// Frees context `ctx`: `Err(STATUS_BAD_PARAM)` for no such context number,
    /// `Err(STATUS_BAD_RESOURCE)` if it was not allocated. Context 0 is the caller's to refuse.
    pub fn free_context(&mut self, ctx: u32) -> Result<(), u8> {
        let slot = self
            .contexts
            .get_mut(ctx as usize)
            .ok_or(STATUS_BAD_PARAM)?;
        slot.take().map(|_| ()).ok_or(STATUS_BAD_RESOURCE)
    }

    /// Translates a local QID of context `ctx`. Context 0 (the kernel's) maps unmapped QIDs to
    /// themselves; other contexts only reach what was mapped with `CMD_MAP_QID`.
    pub fn translate_qid(&self, ctx: usize, qid: u16, kind: u8) -> Option<u32> {
        let context = self.contexts.get(ctx)?.as_ref()?;
        match context.qids.get(qid as usize).copied().flatten() {
            Some(QidEntry { kind: k, global }) if k == kind => Some(global),
            Some(_) => None,
            None if ctx == 0 => Some(u32::from(qid)),
            None => None,
        }
    }

    /// Drops QID translations pointing at a destroyed queue, so a reused number is never
    /// reachable from another context's doorbell page.
    pub fn unmap_qids_of(&mut self, kind: u8, global: u32) {
        for context in self.contexts.iter_mut().flatten() {
            for entry in context.qids.iter_mut() {
                if entry.is_some_and(|e| e.kind == kind && e.global == global) {
                    *entry = None;
                }
            }
        }
    }

    /// Marks the object `work` names as queued for the device thread; `true` if it exists and
    /// was not queued already.
    pub fn mark_queued(&mut self, work: Work) -> bool {
        let queued = match work {
            Work::Qp(n) => self
                .qps
                .get_mut(n)
                .map(|o| std::mem::replace(&mut o.queued, true)),
            Work::Eq(n) => self.eqs.get_mut(n).map(Eq::mark_queued),
            Work::Srq(n) => self
                .srqs
                .get_mut(n)
                .map(|o| std::mem::replace(&mut o.queued, true)),
        };
        queued == Some(false)
    }

    /// Page-list entries held by all objects (fast-registration MRs count their maximum,
    /// on-demand MRs their present pages).
    pub fn translation_entries(&self) -> u64 {
        let rings = self
            .eqs
            .iter()
            .map(|(_, eq)| eq.page_entries())
            .chain(self.cqs.iter().map(|(_, cq)| cq.buf.map.page_entries()))
            .chain(self.srqs.iter().map(|(_, srq)| srq.buf.map.page_entries()))
            .chain(self.qps.iter().map(|(_, qp)| {
                qp.sq.as_ref().map_or(0, |sq| sq.buf.map.page_entries())
                    + qp.rq.as_ref().map_or(0, |rq| rq.buf.map.page_entries())
            }));
        let mrs = self
            .mrs
            .iter()
            .map(|(_, mr)| match (&mr.backing, mr.fast_reg_max_pages) {
                (_, Some(max)) => u64::from(max),
                (MrBacking::Buffer(map), None) => map.page_entries(),
                (MrBacking::OnDemand(pages), None) => pages.held(),
                _ => 0,
            });
        rings.chain(mrs).sum()
    }

    /// Refuses an object that would need `extra` more page-list entries than the budget allows.
    pub fn check_translation_budget(&self, extra: u64) -> Result<(), CmdError> {
        if self.translation_entries().saturating_add(extra) > self.max_translation_entries {
            return Err(CmdError::new(STATUS_NO_RESOURCES));
        }
        Ok(())
    }
}

/// Largest page list of a ring.
pub const MAX_RING_PAGES: u32 = 8192;
/// Page-list entries all objects of a function together may hold by default (32 MiB of
/// translations): a guest cannot make the device allocate without bound by creating many large
/// MRs or rings. The host may set a function's own (`max_translation_entries`).
pub const MAX_TRANSLATION_ENTRIES: u64 = 1 << 22;

/// How a CQ is armed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum CqArm {
    /// Not armed.
    Disarmed,
    /// Next completion.
    Next,
    /// Next solicited or error completion.
    Solicited,
}

/// Completion queue.
pub struct Cq {
    /// CQE ring.
    pub buf: RingBuffer,
    /// Doorbell record address.
    pub dbrec_addr: u64,
    /// Completion EQ.
    pub eqn: u32,
    /// Producer index (device).
    pub pi: u16,
    /// Arm state.
    pub arm: CqArm,
    /// Moderation count.
    pub moder_count: u16,
    /// Moderation period (µs).
    pub moder_period_us: u16,
    /// CQEs written since the last event while armed, for moderation ([`Objects::cq_unreported`]).
    unreported: u32,
    /// When the first unreported CQE was written (µs since start), for the moderation timer.
    /// `Some` exactly while the CQ is among [`Objects::unreported_cqs`].
    first_unreported_us: Option<u64>,
    /// Overrun or DMA error: no more CQEs.
    pub error: bool,
    /// QPs using this CQ.
    pub users: u32,
}

impl Cq {
    /// A CQ on ring `buf`, disarmed, whose events go to EQ `eqn`, moderated by count and
    /// period (µs).
    pub fn new(
        buf: RingBuffer,
        dbrec_addr: u64,
        eqn: u32,
        moder_count: u16,
        moder_period_us: u16,
    ) -> Self {
        Self {
            buf,
            dbrec_addr,
            eqn,
            pi: 0,
            arm: CqArm::Disarmed,
            moder_count,
            moder_period_us,
            unreported: 0,
            first_unreported_us: None,
            error: false,
            users: 0,
        }
    }

    /// Whether the CQ's event is due by count: `unreported` CQEs reached the moderation count
    /// (or there is no moderation at all).
    pub fn count_reached(&self) -> bool {
        u32::from(self.moder_count.max(1)) <= self.unreported
            || self.moder_period_us == 0 && self.moder_count <= 1
    }

    /// Whether a CQE just written calls for the CQ's event by its arm: any CQE if armed for
    /// the next, a solicited or error one if armed for solicited ones.
    pub fn triggered_by(&self, cqe: &Cqe) -> bool {
        match self.arm {
            CqArm::Disarmed => false,
            CqArm::Next => true,
            CqArm::Solicited => {
                cqe.flags & CQE_FLAG_SOLICITED != 0 || cqe.status != u8::from(WcStatus::Success)
            }
        }
    }

    /// Arms the CQ for the next CQE, or the next solicited or error one; re-arming an armed CQ
    /// keeps "next" over "solicited".
    pub fn rearm(&mut self, solicited: bool) {
        self.arm = match (self.arm, solicited) {
            (CqArm::Next, _) | (_, false) => CqArm::Next,
            _ => CqArm::Solicited,
        };
    }

    /// Whether CQEs were written that the CQ's event has not reported yet.
    pub fn has_unreported(&self) -> bool {
        self.unreported > 0
    }

    /// When (µs on the device's clock) the moderation period of the first unreported CQE ends
    /// and the CQ's event is due; `None` without a period or an unreported CQE.
    pub fn moderation_due_us(&self) -> Option<u64> {
        let first = self.first_unreported_us?;
        (self.moder_period_us > 0).then(|| first.saturating_add(u64::from(self.moder_period_us)))
    }
}

/// A send WQE the engine holds, for completion and flush.
#[derive(Clone, Copy, Debug)]
pub struct InflightSend {
    /// Ring index.
    pub index: u16,
    /// `wr_id`.
    pub wr_id: u64,
    /// `WR_*` opcode.
    pub opcode: u8,
    /// Whether it needs a CQE on success.
    pub signaled: bool,
}

/// A WQE copied out of a push window.
#[derive(Clone, Debug)]
pub struct PushedWqe {
    /// Ring index it stands for.
    pub index: u16,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

/// Most pushed WQEs buffered per QP; more are fetched from the ring (the driver writes pushed
/// WQEs to the ring too).
pub const MAX_PUSHED_PER_QP: usize = 16;

/// A work queue (SQ or RQ) of a QP.
pub struct WorkQueue {
    /// The ring.
    pub buf: RingBuffer,
    /// Producer index the device knows (doorbell or doorbell record).
    pub pi: u16,
    /// Next WQE the device will fetch (SQ) or hand out (RQ).
    pub fetch: u16,
    /// Completed up to (SQ: CQE written or skipped).
    pub ci: u16,
}

/// Queue pair.
pub struct Qp {
    /// Type.
    pub qp_type: QpType,
    /// State.
    pub state: QpState,
    /// PD tag (0 for XRC_TGT: each request's SRQ has its PD).
    pub pd: u32,
    /// XRC_TGT: its XRC domain; 0 otherwise.
    pub xrcd: u32,
    /// Send CQ.
    pub sq_cqn: u32,
    /// Receive CQ.
    pub rq_cqn: u32,
    /// SRQ or `NONE`.
    pub srqn: u32,
    /// `QP_FLAG_*`.
    pub flags: u8,
    /// Doorbell record.
    pub dbrec_addr: u64,
    /// Send queue (absent on XRC_TGT).
    pub sq: Option<WorkQueue>,
    /// Receive queue (absent with an SRQ).
    pub rq: Option<WorkQueue>,
    /// Attributes as last modified.
    pub attrs: QpAttrs,
    /// Send WQEs handed to the engine, oldest first.
    pub inflight: VecDeque<InflightSend>,
    /// WQEs taken from push windows, not yet processed.
    pub pushed: VecDeque<PushedWqe>,
    /// SQ doorbells whose first WQE has not reached the wire yet (doorbell-to-wire latency).
    pub rang: crate::latency::PendingDoorbells,
    /// New RQ WQEs were announced.
    pub rq_notified: bool,
    /// Queued for the device thread.
    pub queued: bool,
    /// Its transport state (PSNs, WQEs in flight, timers, the responder's progress), which the
    /// engine borrows for a turn ([`crate::engine::EngineHost::check_out`]): `None` while it
    /// does.
    pub transport: Option<Box<QpTransport>>,
}

impl Qp {
    /// Moves the QP to ERR; returns whether it was in another state. Its transport stops with
    /// it; one lent to the engine stops when the engine gives it back. A QP in ERR already is
    /// left as it is: what its transport still has to send (the NAK of the error that failed
    /// it) goes out.
    pub fn enter_error(&mut self) -> bool {
        if self.state == QpState::Err {
            return false;
        }
        self.state = QpState::Err;
        if let Some(transport) = self.transport.as_mut() {
            transport.enter_error();
        }
        true
    }

    /// Takes a new SQ producer index (and a pushed WQE, which stands for `index - 1`),
    /// announced `since` (if known: then the doorbell-to-wire interval is sampled) by a
    /// doorbell, a push or a record. `false` if the QP has no send queue (XRC_TGT) or the index
    /// is not valid: it may not move backwards, or past the consumer by more than the ring.
    pub fn ring_sq(
        &mut self,
        index: u16,
        pushed: Option<Vec<u8>>,
        noticed: crate::latency::Noticed,
        since: Option<Instant>,
    ) -> bool {
        let Some(sq) = self.sq.as_mut() else {
            return false;
        };
        if !sq.buf.ring.advance_valid(sq.pi, index, sq.ci) {
            return false;
        }
        if let Some(since) = since.filter(|_| index != sq.pi) {
            self.rang.rang(sq.pi, noticed, since);
        }
        sq.pi = index;
        if let Some(bytes) = pushed {
            if self.pushed.len() < MAX_PUSHED_PER_QP {
                self.pushed.push_back(PushedWqe {
                    index: index.wrapping_sub(1),
                    bytes,
                });
            }
        }
        true
    }

    /// New receive WQEs were announced (`DB_RQ` or the record): the engine may end an RNR
    /// wait. `false` if the QP has no receive queue of its own.
    pub fn announce_recv(&mut self) -> bool {
        if self.rq.is_none() {
            return false;
        }
        self.rq_notified = true;
        true
    }

    /// The CQEs this QP's send queue still owes its CQ: one for each signalled WQE the engine
    /// holds, and one for each WQE posted and not fetched yet (whose flag the device has not
    /// read: counted as signalled).
    pub fn owed_send_cqes(&self) -> u32 {
        let Some(sq) = self.sq.as_ref() else { return 0 };
        let held = self.inflight.iter().filter(|w| w.signaled).count() as u32;
        held + u32::from(sq.pi.wrapping_sub(sq.fetch))
    }
}

/// What makes an SRQ an XRC SRQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XrcSrq {
    /// The XRC domain whose XRC_TGT QPs deliver into it.
    pub xrcd: u32,
    /// The CQ of its receive completions.
    pub cqn: u32,
}

/// Shared receive queue.
pub struct Srq {
    /// The ring.
    pub buf: RingBuffer,
    /// Doorbell record.
    pub dbrec_addr: u64,
    /// PD tag.
    pub pd: u32,
    /// Limit (0 = disarmed).
    pub limit: u32,
    /// Next WQE to hand out.
    pub ci: u16,
    /// An XRC SRQ's domain and CQ; `None` for a basic SRQ.
    pub xrc: Option<XrcSrq>,
    /// QPs using this SRQ.
    pub users: u32,
    /// Queued for the device thread.
    pub queued: bool,
}

/// A QID translation entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct QidEntry {
    /// `QID_KIND_*`.
    pub kind: u8,
    /// Global number.
    pub global: u32,
}

/// A context: its doorbell page's QID translation table.
pub struct Context {
    /// Local QID → queue.
    pub qids: Vec<Option<QidEntry>>,
}

impl Context {
    /// An empty table.
    pub fn new() -> Self {
        Self {
            qids: vec![None; QID_TABLE_LEN],
        }
    }
}

impl Default for Context {
    fn default() -> Self {
        Self::new()
    }
}
