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
mod send;
mod timers;
pub use send::{run, Stop};
pub use timers::timers;

use super::io::{Io, Resend};
use super::psn;
use super::roce::{sge_total, QpCtx, MIN_ACK_TIMEOUT};
use super::{EngineHost, SendWork};
use crate::qp::attrs::QpAttrs;

/// Request packets sent per QP per poll.
pub const TX_BUDGET: u32 = 64;
/// Ask for an ACK at least every this many packets of a long message.
const ACK_REQ_EVERY: u32 = 16;
/// The congestion window is counted in bytes, so that it may hold as much data at a small path
/// MTU as at a large one (its most was 128 packets: 128 KiB at MTU 1024, 512 KiB at 4096). Its
/// start and its least are in packets, as TCP's are in segments: each packet needs an answer
/// to clock the next.
const MAX_CWND: u32 = 512 << 10;
/// The window a connection starts with, in packets.
const INITIAL_CWND_PACKETS: u32 = 32;
/// The least congestion window, in packets (after an RNR NAK, the probe).
pub(super) const MIN_CWND_PACKETS: u32 = 2;
/// A long READ is requested in pieces of at most this many responses (one bit each of
/// [`ReqWqe::piece_bits`]).
pub(super) const MAX_READ_PIECE: u32 = u128::BITS;
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
    /// Congestion window in bytes.
    cwnd: u32,
    /// Bytes acknowledged since the window last grew.
    cwnd_acked: u32,
    /// The path MTU in bytes: what a packet counts in the window.
    mtu: u32,
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
    /// Where the last pass over the send queue stopped ([`run`]), for the trace.
    stopped: Option<Stop>,
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
            ..Requester::default()
        };
        self.update_limits(attrs);
        self.set_window(INITIAL_CWND_PACKETS);
        self.retry_left = self.retry_cnt;
        self.rnr_left = self.rnr_retry;
    }

    /// Takes new retry counts and limits.
    pub fn update_limits(&mut self, attrs: &QpAttrs) {
        self.retry_cnt = attrs.retry_cnt.min(7);
        self.rnr_retry = attrs.rnr_retry.min(7);
        self.max_rd_atomic = attrs.max_rd_atomic.clamp(1, MAX_RD_ATOMIC);
        self.mtu = attrs.mtu();
    }

    /// The congestion window in packets: at least one.
    pub fn window(&self) -> u32 {
        (self.cwnd / self.mtu.max(1)).max(1)
    }

    /// Sets the window to `packets` packets.
    fn set_window(&mut self, packets: u32) {
        self.cwnd = packets.saturating_mul(self.mtu);
        self.cwnd_acked = 0;
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
            || self.sent_since_rewind >= self.window().max(self.rewound_span)
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
        // Additive increase: a packet's worth once a window's worth is acknowledged.
        self.cwnd_acked = self
            .cwnd_acked
            .saturating_add(advanced.saturating_mul(self.mtu));
        if self.cwnd_acked >= self.cwnd {
            self.cwnd_acked = 0;
            self.cwnd = (self.cwnd + self.mtu).min(MAX_CWND.max(self.mtu));
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
        self.set_window(MIN_CWND_PACKETS);
        self.went_back = GoBack::RnrNak;
    }

    /// After a retransmission timeout: one packet (the go-back resends one and waits for its
    /// answer, [`timers::timers`]).
    pub fn restart_window(&mut self) {
        self.set_window(1);
    }

    /// Halves the window after a loss.
    pub fn congestion(&mut self) {
        let halved = self.window() / 2;
        self.set_window(halved.max(MIN_CWND_PACKETS));
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

    /// The window a long transfer reaches, in packets, at path MTU `mtu` (an MTU code): one
    /// window acknowledged at a time until it grows no more.
    fn at_mtu(mtu: u8) -> Requester {
        let mut attrs = QpAttrs::initial();
        attrs.apply(&ModifyQpCmd {
            attr_mask: QP_ATTR_PATH_MTU,
            path_mtu: mtu,
            ..ModifyQpCmd::default()
        });
        let mut r = Requester::default();
        r.reset(&attrs);
        r
    }

    fn grown_window(mtu: u8) -> u32 {
        let mut r = at_mtu(mtu);
        assert_eq!(r.window(), INITIAL_CWND_PACKETS);
        let now = Instant::now();
        for _ in 0..10_000 {
            r.progress(r.window(), now, None);
        }
        r.window()
    }

    #[test]
    fn the_window_is_counted_in_bytes() {
        // 512 KiB however large the packets: at MTU 1024 a window of 128 packets held only
        // 128 KiB.
        assert_eq!(grown_window(MTU_4096), 128);
        assert_eq!(grown_window(MTU_1024), 512);
        assert_eq!(grown_window(MTU_256), 2048);
        // What a loss leaves, in packets of the QP's MTU.
        let mut r = at_mtu(MTU_1024);
        r.congestion();
        assert_eq!(r.window(), INITIAL_CWND_PACKETS / 2);
        r.probe();
        assert_eq!(r.window(), MIN_CWND_PACKETS);
        r.restart_window();
        assert_eq!(r.window(), 1);
    }

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
