// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The requester: turns send WQEs into request packets (segmented at the path MTU), assigns
//! PSNs, keeps the window, executes local operations in order, and retransmits (go-back-N)
//! from a PSN on timeout, sequence-error NAK, RNR NAK or a gap in READ responses
//! (rxe_req.c's role). On a UC QP a SEND or RDMA WRITE is sent once, at the pace of the
//! transmit budget, and completes when its last packet is out: no window, ACK or timer.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use ferroce_hw::*;
use serde_json::json;

mod packets;
mod timers;
pub use timers::timers;

use packets::{local_operation, local_pages_ready, request_packet, send_datagram};

use super::io::{Io, Resend};
use super::psn;
use super::roce::{sge_total, QpCtx, MIN_ACK_TIMEOUT};
use super::{EngineHost, SendWork};
use crate::qp::QpAttrs;

/// Request packets sent per QP per poll.
pub const TX_BUDGET: u32 = 64;
/// Ask for an ACK at least every this many packets of a long message.
const ACK_REQ_EVERY: u32 = 16;
/// Congestion window bounds, in packets.
const MIN_CWND: u32 = 2;
const MAX_CWND: u32 = 128;
const INITIAL_CWND: u32 = 32;
/// Largest message (IBA: 2^31 bytes).
const MAX_MESSAGE: u64 = 1 << 31;
/// Adaptive retransmission timeout before the QP's first RTT sample (capped at the configured
/// local ACK timeout).
const INITIAL_RTO: Duration = Duration::from_millis(100);
/// Least variation term of the adaptive timeout (RFC 6298's clock granularity G). The clock
/// that matters is the host scheduler's, not the device's: the peer's NIC thread or vCPU may be
/// descheduled for a time slice or more (on 2 CPUs shared by 2 TCG VMs and their NICs, an ACK
/// 1.7 ms late after a 250 µs RTT is common). Replaying the fault-free scenarios' ACK delays
/// through this estimator gave 39 spurious expiries of 2,240 at 1 ms in the demo, 2 at 5 ms, 0
/// at 10 ms (tools-parity: 164, 18, 5 of 13,035).
const RTO_GRANULARITY: Duration = Duration::from_millis(10);
/// Doublings of the adaptive timeout without progress (it is capped at the configured one long
/// before).
const MAX_BACKOFF: u32 = 24;

/// What a WQE does on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// RC SEND (with immediate or invalidate).
    Send,
    /// RDMA WRITE (with immediate).
    Write,
    /// RDMA READ.
    Read,
    /// CMP_SWAP or FETCH_ADD.
    Atomic,
    /// ATOMIC_WRITE: 8 bytes from its segment, answered by an empty READ response.
    AtomicWrite,
    /// FLUSH: no payload, answered by an empty READ response.
    Flush,
    /// REG_MR, LOCAL_INV or BIND_MW: no packets.
    Local,
    /// UD or GSI SEND: one packet, unacknowledged.
    Datagram,
}

/// A send WQE the requester holds until it completes.
pub struct ReqWqe {
    /// The WQE.
    pub work: SendWork,
    /// What it does.
    pub kind: Kind,
    /// Message length.
    pub len: u64,
    /// PSNs it uses (request packets, or READ response packets).
    pub npkts: u32,
    /// Its first PSN, once started.
    pub first_psn: u32,
    /// Whether it has PSNs.
    pub started: bool,
    /// Next request packet to (re)send.
    pub next_pkt: u32,
    /// READ responses received in order.
    pub resp_pkts: u32,
    /// READ: responses the current request asks for end before this packet; a long READ is
    /// requested in window-sized pieces so that a lost response costs at most one piece.
    pub read_end: u32,
    /// READ: responses of the current piece received out of order (bit n = `resp_pkts + n`).
    pub piece_bits: u128,
    /// Completion status and byte count, once done.
    pub done: Option<(WcStatus, u32)>,
}

impl ReqWqe {
    /// Last PSN it uses.
    pub fn last_psn(&self) -> u32 {
        psn::add(self.first_psn, self.npkts.saturating_sub(1))
    }

    /// Request packets a pass over it sends.
    fn request_packets(&self) -> u32 {
        match self.kind {
            Kind::Send | Kind::Write => self.npkts,
            _ => 1,
        }
    }

    /// Whether it waits for a response of its own (not just an ACK).
    pub fn needs_response(&self) -> bool {
        matches!(
            self.kind,
            Kind::Read | Kind::Atomic | Kind::AtomicWrite | Kind::Flush
        )
    }

    /// Whether it is on the wire and not done.
    pub fn outstanding(&self) -> bool {
        self.started && self.done.is_none()
    }

    /// The first PSN of it not yet acknowledged or answered, given the QP's `una`. An atomic,
    /// ATOMIC WRITE or FLUSH is answered only by its own response, never by an ACK past it:
    /// until then its one PSN is what a go-back resends.
    pub fn first_unacked(&self, una: u32) -> u32 {
        match self.kind {
            Kind::Read => psn::add(self.first_psn, self.resp_pkts),
            Kind::Atomic | Kind::AtomicWrite | Kind::Flush => self.first_psn,
            _ if psn::after(una, self.first_psn) => una,
            _ => self.first_psn,
        }
    }
}

/// The send side of a QP.
#[derive(Default)]
pub struct Requester {
    /// WQEs in ring order, until completed (bounded by the SQ size).
    pub wqes: VecDeque<ReqWqe>,
    /// PSN of the next WQE to start.
    pub next_psn: u32,
    /// Oldest PSN not acknowledged.
    pub una: u32,
    /// One past the highest PSN ever sent (packets before it are retransmissions).
    pub high_psn: u32,
    /// First WQE with packets left to send.
    pub cursor: usize,
    /// Transport retries left.
    pub retry_left: u8,
    /// RNR retries left.
    pub rnr_left: u8,
    /// Retransmission deadline: the adaptive timeout ([`Requester::rto`]) after the last
    /// (re)transmission or progress, at most the configured local ACK timeout after
    /// `stall_since`.
    pub timer: Option<Instant>,
    /// Since when the QP has made no progress, or when it last counted a retry against
    /// `retry_cnt`: a retry counts once the configured timeout has passed since.
    pub stall_since: Option<Instant>,
    /// Smoothed round-trip time, once measured.
    pub srtt: Option<Duration>,
    /// Round-trip time variation.
    pub rttvar: Duration,
    /// Doublings of the adaptive timeout since the last RTT sample.
    pub backoff: u32,
    /// The packet being timed: a PSN sent once with AckReq, and when. Cleared by a go-back
    /// that resends it (Karn's rule: a retransmitted packet gives no sample).
    pub rtt_probe: Option<(u32, Instant)>,
    /// No sending before this (RNR NAK).
    pub rnr_until: Option<Instant>,
    /// Congestion window in packets.
    pub cwnd: u32,
    cwnd_acked: u32,
    /// PSN last retransmitted from without progress since (suppresses repeated go-backs).
    pub last_retry_psn: Option<u32>,
    /// Packets sent since the last go-back.
    pub sent_since_rewind: u32,
    /// Packets that were in flight when the last go-back began: their answers, still on the
    /// way, report the same loss again and again.
    rewound_span: u32,
    /// Why the last go-back was: what it sends again is counted by it ([`Resend`]).
    went_back: GoBack,
    retry_cnt: u8,
    rnr_retry: u8,
    max_rd_atomic: u8,
}

/// Why the requester went back to send again from a PSN: the trace's `reason` and the counter
/// of what it sends again.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GoBack {
    /// The retransmission timer expired and the retry count was charged.
    #[default]
    Timeout,
    /// The adaptive retransmission timer expired before the configured timeout.
    Rto,
    /// An RNR NAK: the responder had no receive WQE (flow control, not loss).
    RnrNak,
    /// A sequence NAK: the responder saw a gap.
    SequenceNak,
    /// An ACK past a READ or atomic whose response never came.
    ImpliedNak,
    /// READ responses with a gap.
    ReadGap,
}

impl GoBack {
    /// Its name in the trace.
    pub fn name(self) -> &'static str {
        match self {
            GoBack::Timeout => "timeout",
            GoBack::Rto => "rto",
            GoBack::RnrNak => "RNR NAK",
            GoBack::SequenceNak => "sequence NAK",
            GoBack::ImpliedNak => "implied NAK",
            GoBack::ReadGap => "READ response gap",
        }
    }

    /// What the packets sent again after it are.
    fn resend(self) -> Resend {
        match self {
            GoBack::Timeout | GoBack::Rto => Resend::AfterTimeout,
            GoBack::RnrNak => Resend::AfterRnr,
            GoBack::SequenceNak | GoBack::ImpliedNak | GoBack::ReadGap => Resend::AfterNak,
        }
    }
}

impl Requester {
    /// Starts afresh on RTR → RTS.
    pub fn reset(&mut self, attrs: &QpAttrs) {
        *self = Requester {
            next_psn: attrs.sq_psn & PSN_MASK,
            una: attrs.sq_psn & PSN_MASK,
            high_psn: attrs.sq_psn & PSN_MASK,
            cwnd: INITIAL_CWND,
            ..Requester::default()
        };
        self.update_limits(attrs);
        self.retry_left = self.retry_cnt;
        self.rnr_left = self.rnr_retry;
    }

    /// Takes new retry counts and limits.
    pub fn update_limits(&mut self, attrs: &QpAttrs) {
        self.retry_cnt = attrs.retry_cnt.min(7);
        self.rnr_retry = attrs.rnr_retry.min(7);
        self.max_rd_atomic = attrs.max_rd_atomic.clamp(1, MAX_RD_ATOMIC);
    }

    /// Forgets all WQEs (the QP went to ERR; the shell flushes them).
    pub fn clear(&mut self) {
        self.wqes.clear();
        self.cursor = 0;
        self.timer = None;
        self.stall_since = None;
        self.rtt_probe = None;
        self.rnr_until = None;
    }

    /// Whether anything is in progress.
    pub fn busy(&self) -> bool {
        !self.wqes.is_empty()
    }

    /// When the requester next acts on its own: its retransmission timer expires or its RNR
    /// wait ends, whichever is earlier.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.timer.into_iter().chain(self.rnr_until).min()
    }

    /// Whether packets are on the wire.
    pub fn outstanding(&self) -> bool {
        self.wqes.iter().any(ReqWqe::outstanding)
    }

    /// Whether a report of a loss at `from` is believed: a repeated report of the same loss
    /// is, once a window, and at least what was in flight at the go-back, has been resent
    /// since. Then the retransmission itself was lost, not just packets sent before it (after
    /// a timeout the window is 2 packets, and the answers to a whole earlier window are still
    /// arriving, each implying the loss).
    pub fn believes(&self, from: u32) -> bool {
        self.last_retry_psn != Some(from)
            || self.sent_since_rewind >= self.cwnd.max(self.rewound_span)
    }

    /// Called when the responder made progress (`una` already moved): retries refill and the
    /// window opens. The timed packet, if now acknowledged, gives an RTT sample, which ends the
    /// backoff; progress on retransmitted packets keeps it (Karn's algorithm: otherwise a round
    /// trip grown beyond the adaptive timeout would be retransmitted spuriously forever, as no
    /// sample could teach it).
    pub fn progress(&mut self, advanced: u32, now: Instant, timeout: Option<Duration>) {
        if let Some((at, sent)) = self.rtt_probe {
            if psn::after(self.una, at) {
                self.rtt_probe = None;
                self.rtt_sample(now.saturating_duration_since(sent));
                self.backoff = 0;
            }
        }
        self.retry_left = self.retry_cnt;
        self.rnr_left = self.rnr_retry;
        self.last_retry_psn = None;
        self.stall_since = Some(now);
        self.cwnd_acked = self.cwnd_acked.saturating_add(advanced);
        if self.cwnd_acked >= self.cwnd {
            self.cwnd_acked = 0;
            self.cwnd = (self.cwnd + 1).min(MAX_CWND);
        }
        self.timer = None;
        if self.outstanding() {
            self.restart_timer(now, timeout);
        }
    }

    /// Takes a round-trip time sample (RFC 6298 2.2, 2.3).
    fn rtt_sample(&mut self, rtt: Duration) {
        match self.srtt {
            None => {
                self.srtt = Some(rtt);
                self.rttvar = rtt / 2;
            }
            Some(srtt) => {
                let delta = srtt.abs_diff(rtt);
                self.rttvar = (self.rttvar * 3 + delta) / 4;
                self.srtt = Some((srtt * 7 + rtt) / 8);
            }
        }
    }

    /// The adaptive retransmission timeout under the configured local ACK timeout `timeout`:
    /// `srtt + max(4 rttvar, 1 ms)` (before a sample: 100 ms), at least [`MIN_ACK_TIMEOUT`],
    /// doubled per backoff step, at most `timeout`.
    pub fn rto(&self, timeout: Duration) -> Duration {
        let base = self.srtt.map_or(INITIAL_RTO, |srtt| {
            srtt + (self.rttvar * 4).max(RTO_GRANULARITY)
        });
        let base = base.max(MIN_ACK_TIMEOUT).min(timeout);
        base.checked_mul(1 << self.backoff.min(MAX_BACKOFF))
            .unwrap_or(timeout)
            .min(timeout)
    }

    /// (Re)starts the retransmission timer at `now`: it expires after the adaptive timeout, or
    /// when the configured one has passed since `stall_since`, whichever comes first. None for
    /// an infinite (0) timeout.
    pub fn restart_timer(&mut self, now: Instant, timeout: Option<Duration>) {
        let Some(t) = timeout else {
            self.timer = None;
            return;
        };
        let stall = *self.stall_since.get_or_insert(now);
        let full = (stall + t).max(now + MIN_ACK_TIMEOUT);
        self.timer = Some((now + self.rto(t)).min(full));
    }

    /// Starts the retransmission timer if it is not running (a packet went out); the stall
    /// starts now.
    fn arm(&mut self, now: Instant, timeout: Option<Duration>) {
        if self.timer.is_none() {
            self.stall_since = Some(now);
            self.restart_timer(now, timeout);
        }
    }

    /// After an RNR NAK: the responder discards every packet after the one it refused, so the
    /// retry goes out as a probe of the least window, which grows again once it is answered
    /// (resending a whole window into a responder without receive WQEs only to have it refused
    /// again cost tools-parity's ib_send_bw 68 frames per RNR NAK).
    pub fn probe(&mut self) {
        self.cwnd = MIN_CWND;
        self.cwnd_acked = 0;
        self.went_back = GoBack::RnrNak;
    }

    /// Halves the window after a loss.
    pub fn congestion(&mut self) {
        self.cwnd = (self.cwnd / 2).max(MIN_CWND);
        self.cwnd_acked = 0;
    }

    /// Goes back to resend from `from`. Unless `force`, a second request for the same PSN
    /// without progress in between is ignored (several NAKs or gaps report one loss).
    pub fn rewind(&mut self, from: u32, force: bool, io: &Io, qpn: u32, why: GoBack) -> bool {
        if !force && !self.believes(from) {
            return false;
        }
        let Some(i) = self
            .wqes
            .iter()
            .position(|w| w.outstanding() && psn::within(from, w.first_psn, w.last_psn()))
        else {
            return false;
        };
        self.last_retry_psn = Some(from);
        self.sent_since_rewind = 0;
        self.went_back = why;
        self.rewound_span = psn::diff(self.high_psn, from).max(0) as u32;
        // Karn: the timed packet gives no sample once it is sent again.
        if self.rtt_probe.is_some_and(|(at, _)| !psn::before(at, from)) {
            self.rtt_probe = None;
        }
        for (n, w) in self.wqes.iter_mut().enumerate().skip(i) {
            if !w.outstanding() {
                continue;
            }
            w.next_pkt = if n == i && matches!(w.kind, Kind::Send | Kind::Write) {
                psn::diff(from, w.first_psn).max(0) as u32
            } else {
                0
            };
        }
        self.cursor = self.cursor.min(i);
        io.trace.event(
            "retransmit",
            || json!({"qpn": qpn, "psn": from, "reason": why.name()}),
        );
        true
    }
}

/// What a WQE the shell validated (`validate_send_wqe`: UC has no READ or atomics) does.
fn kind_of(opcode: u8, qp_type: QpType) -> Kind {
    if qp_type.is_datagram() {
        return Kind::Datagram;
    }
    match opcode {
        WR_RDMA_WRITE | WR_RDMA_WRITE_WITH_IMM => Kind::Write,
        WR_RDMA_READ => Kind::Read,
        WR_ATOMIC_CMP_SWAP | WR_ATOMIC_FETCH_ADD => Kind::Atomic,
        WR_ATOMIC_WRITE => Kind::AtomicWrite,
        WR_FLUSH => Kind::Flush,
        op if send_opcode_is_local(op) => Kind::Local,
        _ => Kind::Send,
    }
}

/// Queues a WQE the shell fetched (in ring order). WQEs that cannot be sent complete with an
/// error in their turn.
pub fn post(qp: &mut QpCtx, host: &mut dyn EngineHost, work: SendWork) {
    let kind = kind_of(work.ctrl.opcode, qp.qp_type);
    let inline = work.ctrl.flags & WQE_FLAG_INLINE != 0;
    let len = if inline {
        work.inline_data.len() as u64
    } else {
        sge_total(&work.sges)
    };
    let mtu = u64::from(qp.mtu());
    let mut done = None;
    if len > MAX_MESSAGE {
        done = Some((WcStatus::LocLenErr, 0));
    }
    if kind == Kind::Atomic && (inline || len < 8) {
        done = Some((WcStatus::LocLenErr, 0));
    }
    if let SendOp::Flush {
        placement,
        level,
        length,
        ..
    } = work.op
    {
        if !flush_valid(placement, level, length) {
            done = Some((WcStatus::LocQpOpErr, 0));
        }
    }
    if kind == Kind::Datagram {
        let port_mtu = mtu_bytes(host.port_mtu()).unwrap_or(1024);
        if len > u64::from(port_mtu) {
            done = Some((WcStatus::LocLenErr, 0));
        }
    }
    let npkts = match kind {
        Kind::Send | Kind::Write | Kind::Read => len.div_ceil(mtu).max(1) as u32,
        Kind::Local => 0,
        _ => 1,
    };
    qp.req.wqes.push_back(ReqWqe {
        work,
        kind,
        len: match kind {
            Kind::Atomic | Kind::AtomicWrite => 8,
            Kind::Flush => 0,
            _ => len,
        },
        npkts,
        first_psn: 0,
        started: false,
        next_pkt: 0,
        resp_pkts: 0,
        read_end: 0,
        piece_bits: 0,
        done,
    });
}

/// What the WQEs before the one `run` looks at hold it to: kept up to date as `run` moves along
/// (each WQE is added once), so that a pass over `n` WQEs costs `O(n)`, not `O(n²)`. The WQEs
/// before the cursor do not change while `run` goes (it changes only the one it looks at).
#[derive(Default)]
struct Earlier {
    /// WQEs accounted for: `wqes[..len]`.
    len: usize,
    /// A READ asked for in pieces, not all requested yet: it owns the PSNs up to its end.
    unrequested_read: bool,
    /// A READ or atomic not done (a fenced WQE waits for them all).
    pending_response: bool,
    /// READs and atomics on the wire and not done (bounded by `max_rd_atomic`).
    responses_outstanding: usize,
}

impl Earlier {
    /// Accounts for the WQEs up to (not including) `i`.
    fn up_to(&mut self, wqes: &VecDeque<ReqWqe>, i: usize) {
        for e in wqes.range(self.len.min(i)..i) {
            self.unrequested_read |=
                e.kind == Kind::Read && e.outstanding() && e.read_end < e.npkts;
            self.pending_response |= e.needs_response() && e.done.is_none();
            if e.needs_response() && e.outstanding() {
                self.responses_outstanding += 1;
            }
        }
        self.len = self.len.max(i);
    }
}

/// Sends what the window, fences and RD/atomic limits allow.
pub fn run(qp: &mut QpCtx, io: &mut Io, host: &mut dyn EngineHost, now: Instant) {
    if qp.state != QpState::Rts {
        return;
    }
    if let Some(until) = qp.req.rnr_until {
        if now < until {
            return;
        }
        qp.req.rnr_until = None;
    }
    let Some(pd) = host.qp_pd(qp.qpn) else {
        return;
    };
    let route = if qp.qp_type.is_connected() {
        qp.route(host)
    } else {
        None
    };
    // UC: no ACKs come to open a window or end a timer.
    let reliable = qp.qp_type.is_reliable();
    let timeout = qp.ack_timeout();
    let mut budget = TX_BUDGET;
    let mut earlier = Earlier::default();
    while budget > 0 && qp.req.cursor < qp.req.wqes.len() {
        let i = qp.req.cursor;
        let req = &mut qp.req;
        earlier.up_to(&req.wqes, i);
        let Some(w) = req.wqes.get(i) else { break };
        match w.done {
            // Failed: the QP goes to ERR when it completes; nothing after it goes out.
            Some((status, _)) if status != WcStatus::Success => break,
            Some(_) => {
                req.cursor += 1;
                continue;
            }
            None => {}
        }
        // A READ asked for in pieces owns the PSNs up to its end: nothing after it may go out
        // before its last piece is requested, or the responder sees a PSN gap.
        if earlier.unrequested_read {
            break;
        }
        if !w.started && !local_pages_ready(host, w) {
            // Waits for the driver to map its pages; the engine polls while WQEs are queued.
            break;
        }
        if !w.started {
            match w.kind {
                Kind::Local => {
                    let status = local_operation(host, pd, qp.qpn, &w.work);
                    if let Some(w) = req.wqes.get_mut(i) {
                        w.done = Some((status, 0));
                    }
                    req.cursor += 1;
                    continue;
                }
                Kind::Datagram => {
                    let status = send_datagram(qp, io, host, pd, i);
                    if let Some(w) = qp.req.wqes.get_mut(i) {
                        w.done = Some((status, w.len as u32));
                    }
                    qp.req.cursor += 1;
                    budget -= 1;
                    continue;
                }
                _ => {}
            }
            if w.work.ctrl.flags & WQE_FLAG_FENCE != 0 && earlier.pending_response {
                break;
            }
            if w.needs_response() && earlier.responses_outstanding >= usize::from(req.max_rd_atomic)
            {
                break;
            }
            if reliable
                && req.next_psn != req.una
                && psn::diff(req.next_psn, req.una) >= req.cwnd as i32
            {
                break;
            }
            let first = req.next_psn;
            req.next_psn = psn::add(first, w.npkts);
            if let Some(w) = req.wqes.get_mut(i) {
                w.first_psn = first;
                w.started = true;
                w.next_pkt = 0;
            }
        }
        let Some(route) = route.as_ref() else {
            // No source GID: nothing can be sent; the retransmission timer ends the WQE (no
            // timer runs on UC: it ends now).
            if reliable {
                qp.req.arm(now, timeout);
            } else {
                fail(qp, i, WcStatus::LocQpOpErr);
            }
            break;
        };
        let Some(w) = qp.req.wqes.get(i) else { break };
        if w.next_pkt >= w.request_packets() {
            // Already sent (the cursor came back for an earlier READ's next piece).
            qp.req.cursor += 1;
            continue;
        }
        // Acknowledged while a go-back was resending it (the first transmission's ACK came
        // late): the resend goes on from the first packet not yet acknowledged.
        if reliable && matches!(w.kind, Kind::Send | Kind::Write) {
            let acked = psn::diff(qp.req.una, w.first_psn);
            if acked > 0 && (acked as u32) > w.next_pkt && (acked as u32) < w.npkts {
                if let Some(w) = qp.req.wqes.get_mut(i) {
                    w.next_pkt = acked as u32;
                }
                continue;
            }
        }
        let k = w.next_pkt;
        let pkt_psn = match w.kind {
            Kind::Read => psn::add(w.first_psn, w.resp_pkts),
            _ => psn::add(w.first_psn, k),
        };
        if reliable && pkt_psn != qp.req.una && psn::diff(pkt_psn, qp.req.una) >= qp.req.cwnd as i32
        {
            break;
        }
        let retransmit = psn::before(pkt_psn, qp.req.high_psn);
        let resend = if retransmit {
            qp.req.went_back.resend()
        } else {
            Resend::No
        };
        // A READ piece lost in part is asked for again up to its old end (a duplicate request
        // must lie within the original); a new piece is a window long.
        let read_pieces = if w.resp_pkts < w.read_end {
            w.read_end - w.resp_pkts
        } else {
            qp.req.cwnd.max(MIN_CWND)
        };
        // Ask for an ACK when this packet fills the window, or nothing would open it again.
        let window_full =
            reliable && psn::diff(psn::add(pkt_psn, 1), qp.req.una) >= qp.req.cwnd as i32;
        let built =
            request_packet(qp, host, pd, w, k, read_pieces, &mut io.payload).map(|(mut b, len)| {
                b.bth.ack_req |= window_full;
                (b, len)
            });
        let req = &mut qp.req;
        let Some(w) = req.wqes.get_mut(i) else { break };
        // The WQE's first frame (not a resend): its doorbell's latency is sampled.
        let first_frame = (k == 0 && !retransmit).then_some(w.work.index);
        match built {
            Ok((packet, len)) => {
                let end = match w.kind {
                    Kind::Read => {
                        w.read_end = (w.resp_pkts + read_pieces).min(w.npkts);
                        psn::add(w.first_psn, w.read_end)
                    }
                    _ => psn::add(pkt_psn, 1),
                };
                req.sent_since_rewind = req.sent_since_rewind.saturating_add(1);
                if psn::after(end, req.high_psn) {
                    req.high_psn = end;
                }
                w.next_pkt += 1;
                if w.next_pkt >= w.request_packets() {
                    req.cursor += 1;
                    if !reliable {
                        w.done = Some((WcStatus::Success, w.len as u32));
                    }
                }
                if reliable {
                    if !retransmit && packet.bth.ack_req && req.rtt_probe.is_none() {
                        req.rtt_probe = Some((pkt_psn, now));
                    }
                    req.arm(now, timeout);
                }
                io.send_payload(host, route, &packet, len, resend);
                if let Some(index) = first_frame {
                    host.wqe_on_wire(qp.qpn, index);
                }
                budget -= 1;
            }
            Err(status) => {
                // A page of its buffers went away since it started (an invalidation): it
                // waits for it again rather than failing.
                if !local_pages_ready(host, w) {
                    break;
                }
                w.done = Some((status, 0));
                req.cursor += 1;
            }
        }
    }
}

/// Fails WQE `i` (and with it the QP) with `status`.
pub fn fail(qp: &mut QpCtx, i: usize, status: WcStatus) {
    if let Some(w) = qp.req.wqes.get_mut(i) {
        w.done = Some((status, 0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn rto_from_samples_clamped_and_backed_off() {
        let mut r = Requester::default();
        assert_eq!(r.rto(1000 * MS), INITIAL_RTO, "before a sample");
        assert_eq!(r.rto(10 * MS), 10 * MS, "capped at the configured timeout");
        r.rtt_sample(Duration::from_micros(100));
        // 100 µs + max(4 × 50 µs, 10 ms).
        assert_eq!(r.rto(1000 * MS), Duration::from_micros(10_100));
        for _ in 0..50 {
            r.rtt_sample(Duration::from_micros(100));
        }
        assert!(r.rto(1000 * MS) >= MIN_ACK_TIMEOUT);
        r.rtt_sample(40 * MS);
        let grown = r.rto(1000 * MS);
        assert!(
            grown > 20 * MS,
            "a late sample widens the variation: {grown:?}"
        );
        r.backoff = 3;
        assert_eq!(r.rto(1000 * MS), grown * 8);
        assert_eq!(r.rto(50 * MS), 50 * MS);
        r.backoff = MAX_BACKOFF;
        assert_eq!(r.rto(4000 * MS), 4000 * MS);
    }

    #[test]
    fn timer_never_runs_past_the_configured_timeout_since_the_stall() {
        let mut r = Requester::default();
        r.rtt_sample(Duration::from_micros(100));
        let t0 = Instant::now();
        r.arm(t0, Some(100 * MS));
        assert_eq!(r.timer, Some(t0 + Duration::from_micros(10_100)));
        r.backoff = 10;
        let later = t0 + 30 * MS;
        r.restart_timer(later, Some(100 * MS));
        assert_eq!(r.timer, Some(t0 + 100 * MS), "stall + configured timeout");
        r.restart_timer(later, None);
        assert_eq!(r.timer, None, "timeout 0: no timer");
    }
}
