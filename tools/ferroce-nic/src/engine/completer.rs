// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The completer: consumes ACKs, NAKs, READ responses and atomic ACKs at the requester,
//! retires WQEs in order and writes their completions (rxe_comp.c's role). A response
//! implicitly acknowledges every earlier PSN; an ACK that covers a READ or atomic without its
//! response means the response was lost (an implied NAK).

use std::time::Instant;

use ferroce_hw::*;
use serde_json::json;

use super::headers::{syndrome, Packet};
use super::io::Io;
use super::opcode::{self, flag, op};
use super::psn;
use super::requester::{fail, GoBack, Kind};
use super::roce::{sge_pieces, QpCtx};
use super::EngineHost;

/// RNR NAK timer values in microseconds (IBA table 45), by code.
const RNR_TIMER_US: [u64; 32] = [
    655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920, 2560, 3840,
    5120, 7680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880, 163_840, 245_760,
    327_680, 491_520,
];

/// The RNR delay for a timer code.
pub fn rnr_delay(code: u8) -> std::time::Duration {
    std::time::Duration::from_micros(RNR_TIMER_US[usize::from(code & 0x1f)])
}

/// Acknowledges everything up to and including `through`.
fn ack_through(qp: &mut QpCtx, io: &Io, through: u32, now: Instant) {
    let una = psn::add(through, 1);
    let old_una = qp.req.una;
    let mut implied_nak = None;
    for w in qp.req.wqes.iter_mut() {
        // Done first: a local operation (REG_MR, LOCAL_INV, BIND_MW) is done without ever
        // being started (it has no PSNs), and the messages after it are acknowledged too.
        if w.done.is_some() {
            continue;
        }
        if !w.started {
            break;
        }
        if psn::after(w.last_psn(), through) {
            break;
        }
        if w.needs_response() {
            // Acknowledged past a READ or atomic whose response never came.
            implied_nak = Some(w.first_unacked(old_una));
            break;
        }
        w.done = Some((WcStatus::Success, w.len as u32));
    }
    if psn::after(una, qp.req.una) && !psn::after(una, qp.req.next_psn) {
        let advanced = psn::diff(una, qp.req.una) as u32;
        qp.req.una = una;
        let timeout = qp.ack_timeout();
        qp.req.progress(advanced, now, timeout);
    }
    if let Some(from) = implied_nak {
        implied_nak_at(qp, io, from);
    }
}

/// An implied NAK (an ACK past a READ or atomic whose response never came) is the IBA's
/// implied sequence error: the requester goes back to it, and each go-back counts against
/// `retry_cnt` as a sequence NAK's does (rxe's too). Uncounted, a responder that keeps acknowledging
/// past a READ it never answers (its ePSN moved past the READ: an off-path request took those
/// PSNs) held the requester in go-backs for ever, its window resent at once each time.
fn implied_nak_at(qp: &mut QpCtx, io: &Io, from: u32) {
    if !qp.req.believes(from) {
        return;
    }
    if qp.req.retry_left == 0 {
        if let Some(i) = wqe_at(qp, from) {
            fail(qp, i, WcStatus::RetryExcErr);
        }
        return;
    }
    let qpn = qp.qpn;
    if qp.req.rewind(from, false, io, qpn, GoBack::ImpliedNak) {
        qp.req.retry_left -= 1;
    }
}

/// The WQE index whose PSNs include `psn`.
fn wqe_at(qp: &QpCtx, at: u32) -> Option<usize> {
    qp.req
        .wqes
        .iter()
        .position(|w| w.outstanding() && psn::within(at, w.first_psn, w.last_psn()))
}

fn read_response_packet(
    qp: &mut QpCtx,
    io: &Io,
    host: &mut dyn EngineHost,
    pkt: &Packet<'_>,
    now: Instant,
) {
    let at = pkt.bth.psn;
    let Some(i) = qp.req.wqes.iter().position(|w| {
        w.kind == Kind::Read && w.outstanding() && psn::within(at, w.first_psn, w.last_psn())
    }) else {
        if !psn::before(at, qp.req.una) {
            out_of_window(qp, io, host, pkt, "READ response for no READ");
        }
        return; // Before the window: a late duplicate.
    };
    let first = qp.req.wqes[i].first_psn;
    ack_through(qp, io, psn::sub(first, 1), now);
    let Some(w) = qp.req.wqes.get(i) else { return };
    // Responses are placed as they come (each PSN has a fixed place in the buffer); a gap is
    // asked for again when the piece's last response shows it.
    let index = psn::diff(at, w.first_psn).max(0) as u32;
    if index < w.resp_pkts || index >= w.read_end {
        return; // Already have it, or not asked for (a stream from before a rewind).
    }
    let bit = index - w.resp_pkts;
    if w.piece_bits & (1u128 << bit) != 0 {
        return;
    }
    let mtu = u64::from(qp.mtu());
    let offset = u64::from(index) * mtu;
    let final_psn = index + 1 >= w.npkts;
    let ends = pkt.info.flags & (flag::LAST | flag::ONLY) != 0;
    let want_len = (w.len - offset.min(w.len)).min(mtu) as usize;
    // The READ may be requested in pieces, so a response may end a piece before the end.
    if (final_psn && !ends) || pkt.payload.len() != want_len {
        host.count(COUNTER_DROPS, 1);
        return;
    }
    let pd = qp.pd;
    let Some(status) = place(host, pd, &w.work.sges, offset, pkt.payload) else {
        return;
    };
    if status != WcStatus::Success {
        fail(qp, i, status);
        return;
    }
    let (timeout, qpn) = (qp.ack_timeout(), qp.qpn);
    let req = &mut qp.req;
    let Some(w) = req.wqes.get_mut(i) else {
        return;
    };
    w.piece_bits |= 1u128 << bit;
    let advanced = w.piece_bits.trailing_ones();
    w.piece_bits = w.piece_bits.checked_shr(advanced).unwrap_or(0);
    w.resp_pkts += advanced;
    let piece_end = index + 1 >= w.read_end;
    let missing = w.resp_pkts < w.read_end;
    let expected = psn::add(w.first_psn, w.resp_pkts);
    if w.resp_pkts >= w.npkts {
        w.done = Some((WcStatus::Success, w.len as u32));
    } else if !missing {
        // This piece is complete: request the next one.
        w.next_pkt = 0;
        req.cursor = req.cursor.min(i);
    }
    if advanced > 0 {
        let una = psn::add(first, w.resp_pkts);
        if psn::after(una, req.una) {
            req.una = una;
        }
        req.progress(advanced, now, timeout);
    }
    if piece_end && missing {
        host.count(COUNTER_SEQ_ERRORS, 1);
        if req.rewind(expected, true, io, qpn, GoBack::ReadGap) {
            req.congestion();
            req.restart_timer(now, timeout);
        }
    }
}

fn atomic_ack(qp: &mut QpCtx, io: &Io, host: &mut dyn EngineHost, pkt: &Packet<'_>, now: Instant) {
    let at = pkt.bth.psn;
    let Some(i) = qp
        .req
        .wqes
        .iter()
        .position(|w| w.kind == Kind::Atomic && w.outstanding() && w.first_psn == at)
    else {
        if !psn::before(at, qp.req.una) {
            out_of_window(qp, io, host, pkt, "atomic ACK for no atomic");
        }
        return; // Before the window: a late duplicate.
    };
    ack_through(qp, io, psn::sub(at, 1), now);
    let original = pkt.atomic_ack.unwrap_or_default();
    let pd = qp.pd;
    let sges = qp.req.wqes.get(i).map_or(&[][..], |w| &w.work.sges[..]);
    let Some(status) = place(host, pd, sges, 0, &original.to_le_bytes()) else {
        return;
    };
    answered(qp, i, at, status, now);
}

/// Writes an answer (READ response data, an atomic's original value) at message offset
/// `offset` of a WQE's own buffers: the WQE's status (`Success`, or the error it ends with), or
/// `None` if an on-demand page went away after the request was sent (its pages were present
/// then): the answer is dropped, as if lost, and asked for again (the next response's gap, or
/// the timer; an atomic's duplicate is answered from the responder's saved value) once the
/// driver has mapped the page again.
fn place(
    host: &mut dyn EngineHost,
    pd: u32,
    sges: &[Sge],
    offset: u64,
    data: &[u8],
) -> Option<WcStatus> {
    let Some(pieces) = sge_pieces(sges, offset, data.len()) else {
        return Some(WcStatus::LocLenErr);
    };
    let mut at = 0;
    for (lkey, addr, n) in pieces {
        match host.write_payload(pd, lkey, addr, &data[at..at + n], ACCESS_LOCAL_WRITE) {
            Ok(()) => at += n,
            Err(e) if e.is_page_fault() => return None,
            Err(_) => return Some(WcStatus::LocProtErr),
        }
    }
    Some(WcStatus::Success)
}

/// WQE `i`, whose one PSN `at` was answered, is done with `status`.
fn answered(qp: &mut QpCtx, i: usize, at: u32, status: WcStatus, now: Instant) {
    if let Some(w) = qp.req.wqes.get_mut(i) {
        w.done = Some((status, w.len as u32));
    }
    let una = psn::add(at, 1);
    if psn::after(una, qp.req.una) {
        qp.req.una = una;
    }
    let timeout = qp.ack_timeout();
    qp.req.progress(1, now, timeout);
}

/// The answer to an ATOMIC WRITE or a FLUSH (`i`, at the packet's PSN): an RDMA READ response
/// only, with no payload and an ACK in its AETH (a NAK comes as an ACKNOWLEDGE).
fn write_or_flush_answer(
    qp: &mut QpCtx,
    io: &Io,
    host: &mut dyn EngineHost,
    i: usize,
    pkt: &Packet<'_>,
    now: Instant,
) {
    let ack = pkt
        .aeth
        .is_some_and(|a| syndrome::kind(a.syndrome) == syndrome::KIND_ACK);
    if opcode::rc_equivalent(pkt.bth.opcode) != op::RC_READ_RESPONSE_ONLY
        || !pkt.payload.is_empty()
        || !ack
    {
        return out_of_window(qp, io, host, pkt, "not an ATOMIC WRITE or FLUSH answer");
    }
    let at = pkt.bth.psn;
    ack_through(qp, io, psn::sub(at, 1), now);
    answered(qp, i, at, WcStatus::Success, now);
}

/// Drops a response outside the requester's window, counting it.
fn out_of_window(qp: &QpCtx, io: &Io, host: &mut dyn EngineHost, pkt: &Packet<'_>, why: &str) {
    host.count(COUNTER_DROPS, 1);
    io.trace.event("drop", || {
        json!({"why": why, "qpn": qp.qpn, "opcode": pkt.bth.opcode, "psn": pkt.bth.psn,
            "una": qp.req.una, "high_psn": qp.req.high_psn})
    });
}

/// The states of the completer for one response packet, after the requester's side of IBA
/// vol 1 ch. 9.9 (for shape, rxe's `enum comp_state`). Each state is a method of [`Response`]
/// that does its part and names the next; [`receive_response`] drives them until
/// [`CompState::Done`]. The flow only goes forward:
///
/// ```text
/// CHK_PSN ─┬─ at or past high_psn ──────────────────────────────────────→ DROP
///          └─ CHK_ACK ─┬─ ACKNOWLEDGE ─┬─ stale (before una - 1; a NAK before una) → DROP
///                      │               ├─ ACK ──→ ACK
///                      │               └─ NAK ──→ NAK ─┬─ RNR ────────────→ RNR_RETRY
///                      │                               ├─ PSN sequence ───→ SEQ_RETRY
///                      │                               └─ any other ──────→ ERROR
///                      ├─ ATOMIC ACKNOWLEDGE ──────────────────────────────→ ATOMIC
///                      ├─ READ response answering an ATOMIC WRITE or FLUSH ─→ WRITE_FLUSH_ANSWER
///                      └─ READ response ───────────────────────────────────→ READ
/// Every path ends in DONE; the WQEs it finished are completed by [`complete`].
/// ```
///
/// Only a response inside the window completes work: a PSN at or past `high_psn` answers a
/// packet never sent (a forged response, one from 2^23 PSNs ago, or an ACK of a message only
/// part sent); an ACK before `una - 1` (the duplicate of the last one) or a NAK before `una`
/// is stale. Those are dropped and counted. READ responses and atomic ACKs must also match an
/// outstanding READ's requested PSNs or an outstanding atomic's PSN; late duplicates of ones
/// already taken are dropped silently. A NAK's trace event names the state it leads to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CompState {
    /// The PSN against the window: at or past `high_psn` it answers nothing sent.
    ChkPsn,
    /// What the response is, by opcode (and an ACKNOWLEDGE's AETH syndrome).
    ChkAck,
    /// An ACK: everything through its PSN is acknowledged ([`ack_through`]); an ACK past a
    /// READ or atomic whose response never came is an implied NAK.
    Ack,
    /// A NAK (its syndrome): counted and traced; everything before its PSN is acknowledged.
    Nak(u8),
    /// IBA 9.7.5.2.8: an RNR NAK (its syndrome's timer): the requester waits out the timer and
    /// goes back to the NAKed PSN, charging `rnr_retry` (7: infinite); none left fails the WQE
    /// with `RnrRetryExcErr`. An RNR NAK of no outstanding WQE changes nothing.
    RnrRetry(u8),
    /// IBA 9.7.5.2.1: a PSN sequence error NAK: the requester goes back to its PSN (once per
    /// PSN), charging `retry_cnt` and halving the window; none left fails the WQE with
    /// `RetryExcErr`.
    SeqRetry,
    /// IBA 9.7.5.2.2–4: Invalid Request, Remote Access or Remote Operational Error (or an
    /// unknown NAK code: a bad response): the NAKed WQE fails with that status, and with it
    /// the QP.
    Error(WcStatus),
    /// An atomic's original value, written to the WQE's buffer; the atomic is done.
    Atomic,
    /// The empty READ response that answers an ATOMIC WRITE or FLUSH (WQE `i`).
    WriteFlushAnswer(usize),
    /// A READ response, placed at its PSN's offset of the READ's buffer; a gap at the end of a
    /// piece goes back for it.
    Read,
    /// Dropped and counted, and why.
    Drop(&'static str),
    /// The packet is finished with.
    Done,
}

/// One response packet going through the completer's states.
struct Response<'r, 'p> {
    qp: &'r mut QpCtx,
    io: &'r mut Io,
    host: &'r mut dyn EngineHost,
    pkt: &'r Packet<'p>,
    now: Instant,
}

/// Handles a response packet addressed to `qp` (from its peer: the engine checked the path):
/// runs the completer's states (`CompState`) from CHK_PSN to DONE.
pub fn receive_response(
    qp: &mut QpCtx,
    io: &mut Io,
    host: &mut dyn EngineHost,
    pkt: &Packet<'_>,
    now: Instant,
) {
    let mut r = Response {
        qp,
        io,
        host,
        pkt,
        now,
    };
    let mut state = CompState::ChkPsn;
    while state != CompState::Done {
        state = r.step(state);
    }
}

impl Response<'_, '_> {
    fn step(&mut self, state: CompState) -> CompState {
        use CompState::*;
        match state {
            ChkPsn => self.chk_psn(),
            ChkAck => self.chk_ack(),
            Ack => self.ack(),
            Nak(syn) => self.nak(syn),
            RnrRetry(syn) => self.rnr_retry(syn),
            SeqRetry => self.seq_retry(),
            Error(status) => self.error(status),
            Atomic => {
                atomic_ack(self.qp, self.io, self.host, self.pkt, self.now);
                Done
            }
            WriteFlushAnswer(i) => {
                write_or_flush_answer(self.qp, self.io, self.host, i, self.pkt, self.now);
                Done
            }
            Read => {
                read_response_packet(self.qp, self.io, self.host, self.pkt, self.now);
                Done
            }
            Drop(why) => {
                out_of_window(self.qp, self.io, self.host, self.pkt, why);
                Done
            }
            Done => Done,
        }
    }

    /// The packet's PSN.
    fn at(&self) -> u32 {
        self.pkt.bth.psn
    }

    fn chk_psn(&mut self) -> CompState {
        if !psn::before(self.at(), self.qp.req.high_psn) {
            return CompState::Drop("response beyond the last PSN sent");
        }
        CompState::ChkAck
    }

    fn chk_ack(&mut self) -> CompState {
        let (pkt, at) = (self.pkt, self.at());
        match opcode::rc_equivalent(pkt.bth.opcode) {
            op::RC_ACKNOWLEDGE => {
                let syn = pkt.aeth.map_or(syndrome::ACK, |a| a.syndrome);
                let ack = syndrome::kind(syn) == syndrome::KIND_ACK;
                let oldest = if ack {
                    psn::sub(self.qp.req.una, 1)
                } else {
                    self.qp.req.una
                };
                if psn::before(at, oldest) {
                    CompState::Drop("stale ACK or NAK")
                } else if ack {
                    CompState::Ack
                } else {
                    CompState::Nak(syn)
                }
            }
            op::RC_ATOMIC_ACKNOWLEDGE => CompState::Atomic,
            _ if pkt.info.has(flag::RESP) && pkt.info.has(flag::PAYLOAD) => {
                let single = self.qp.req.wqes.iter().position(|w| {
                    matches!(w.kind, Kind::AtomicWrite | Kind::Flush)
                        && w.outstanding()
                        && w.first_psn == at
                });
                single.map_or(CompState::Read, CompState::WriteFlushAnswer)
            }
            _ => CompState::Done,
        }
    }

    fn ack(&mut self) -> CompState {
        let (qpn, at) = (self.qp.qpn, self.at());
        self.io
            .trace
            .event("ack", || json!({"dir": "rx", "qpn": qpn, "psn": at}));
        ack_through(self.qp, self.io, at, self.now);
        CompState::Done
    }

    fn nak(&mut self, syn: u8) -> CompState {
        let next = if syndrome::kind(syn) == syndrome::KIND_RNR {
            CompState::RnrRetry(syn)
        } else {
            match syn {
                syndrome::NAK_PSN_SEQ_ERROR => CompState::SeqRetry,
                syndrome::NAK_INVALID_REQUEST => CompState::Error(WcStatus::RemInvReqErr),
                syndrome::NAK_REMOTE_ACCESS => CompState::Error(WcStatus::RemAccessErr),
                syndrome::NAK_REMOTE_OP => CompState::Error(WcStatus::RemOpErr),
                _ => CompState::Error(WcStatus::BadRespErr),
            }
        };
        let (qpn, at) = (self.qp.qpn, self.at());
        self.host.count(COUNTER_NAKS_RECEIVED, 1);
        self.io.trace.event("nak", || {
            json!({"dir": "rx", "qpn": qpn, "psn": at, "syndrome": syn,
                "state": next.name()})
        });
        ack_through(self.qp, self.io, psn::sub(at, 1), self.now);
        next
    }

    fn rnr_retry(&mut self, syn: u8) -> CompState {
        let (qp, at) = (&mut *self.qp, self.pkt.bth.psn);
        self.host.count(COUNTER_RNR_RETRIES, 1);
        // An RNR NAK of no outstanding WQE (stale, or forged) changes nothing: it must not
        // stop the retransmission timer that the outstanding ones still need.
        let Some(i) = wqe_at(qp, at) else {
            return CompState::Done;
        };
        let infinite = qp.attrs.rnr_retry >= 7;
        if !infinite && qp.req.rnr_left == 0 {
            fail(qp, i, WcStatus::RnrRetryExcErr);
            return CompState::Done;
        }
        if !infinite {
            qp.req.rnr_left -= 1;
        }
        qp.req.rnr_until = Some(self.now + rnr_delay(syn));
        qp.req.timer = None;
        let qpn = qp.qpn;
        qp.req.rewind(at, true, self.io, qpn, GoBack::RnrNak);
        qp.req.probe();
        CompState::Done
    }

    fn seq_retry(&mut self) -> CompState {
        let (qp, at) = (&mut *self.qp, self.pkt.bth.psn);
        if qp.req.last_retry_psn == Some(at) {
            return CompState::Done;
        }
        if qp.req.retry_left == 0 {
            if let Some(i) = wqe_at(qp, at) {
                fail(qp, i, WcStatus::RetryExcErr);
            }
            return CompState::Done;
        }
        qp.req.retry_left -= 1;
        qp.req.congestion();
        let qpn = qp.qpn;
        qp.req.rewind(at, false, self.io, qpn, GoBack::SequenceNak);
        CompState::Done
    }

    fn error(&mut self, status: WcStatus) -> CompState {
        if let Some(i) = wqe_at(self.qp, self.at()) {
            fail(self.qp, i, status);
        }
        CompState::Done
    }
}

impl CompState {
    /// Its name in the trace (IBA's words, as the diagram's).
    fn name(self) -> &'static str {
        match self {
            CompState::ChkPsn => "CHK_PSN",
            CompState::ChkAck => "CHK_ACK",
            CompState::Ack => "ACK",
            CompState::Nak(_) => "NAK",
            CompState::RnrRetry(_) => "RNR_RETRY",
            CompState::SeqRetry => "SEQ_RETRY",
            CompState::Error(_) => "ERROR",
            CompState::Atomic => "ATOMIC",
            CompState::WriteFlushAnswer(_) => "WRITE_FLUSH_ANSWER",
            CompState::Read => "READ",
            CompState::Drop(_) => "DROP",
            CompState::Done => "DONE",
        }
    }
}

/// Writes the completions of finished WQEs, in order.
pub fn complete(qp: &mut QpCtx, host: &mut dyn EngineHost) {
    while let Some((status, byte_len)) = qp.req.wqes.front().and_then(|w| w.done) {
        let Some(w) = qp.req.wqes.pop_front() else {
            break;
        };
        qp.req.cursor = qp.req.cursor.saturating_sub(1);
        // The shell writes the CQE (if signalled or failed) and, on error, moves the QP to ERR
        // and flushes everything after it.
        let _ = host.complete_send(qp.qpn, w.work.index, status, byte_len);
        if status != WcStatus::Success {
            qp.enter_error();
            break;
        }
    }
    if !qp.req.outstanding() && qp.req.wqes.is_empty() {
        qp.req.timer = None;
    }
}
