// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The requester's pass over its send queue, as explicit states ([`ReqState`]): what goes on
//! the wire next, and why the pass stops ([`Stop`], in the trace).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use ferroce_hw::*;
use serde_json::json;

use super::packets::{local_operation, local_pages_ready, request_packet, send_datagram};
use super::{fail, Kind, ReqWqe, MAX_READ_PIECE, MIN_CWND_PACKETS, TX_BUDGET};
use crate::engine::frame::Route;
use crate::engine::io::{Io, Resend};
use crate::engine::psn;
use crate::engine::roce::QpCtx;
use crate::engine::EngineHost;

/// Why a pass of the requester ([`run`]) stopped sending: its last state. The trace shows it
/// (event `requester`) each time it differs from the QP's previous pass, when it holds work
/// back; a pass that ran out of WQEs or of budget stops for no reason worth a line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// Every WQE is on the wire or done.
    Drained,
    /// [`TX_BUDGET`] packets sent: the QP waits for its next turn.
    Budget,
    /// The QP is not in RTS.
    NotRts,
    /// An RNR NAK's wait has not ended.
    RnrWait,
    /// A WQE failed: the QP goes to ERR when it completes, and nothing after it goes out.
    Failed,
    /// A READ asked for in pieces, not all asked for yet, owns the PSNs up to its end.
    UnrequestedRead,
    /// A WQE waits for the driver to map pages of its buffers (on-demand paging).
    PagesNotReady,
    /// A fenced WQE waits for the READs and atomics before it.
    Fence,
    /// A READ or atomic waits: `max_rd_atomic` of them are on the wire.
    RdAtomicLimit,
    /// The congestion window is full.
    WindowFull,
    /// The QP has no route (its source GID is gone): the timer, or on UC the WQE, fails.
    NoRoute,
    /// A LOCAL_INV waits: an earlier WQE not yet acknowledged uses the key it invalidates (a
    /// retransmission would read through it).
    KeyInUse,
}

impl Stop {
    /// Its name in the trace.
    pub fn name(self) -> &'static str {
        match self {
            Stop::Drained => "drained",
            Stop::Budget => "budget",
            Stop::NotRts => "not RTS",
            Stop::RnrWait => "RNR wait",
            Stop::Failed => "failed WQE",
            Stop::UnrequestedRead => "READ not all requested",
            Stop::PagesNotReady => "pages not ready",
            Stop::Fence => "fence",
            Stop::RdAtomicLimit => "max_rd_atomic",
            Stop::WindowFull => "window full",
            Stop::NoRoute => "no route",
            Stop::KeyInUse => "key in use",
        }
    }

    /// Whether it holds work back (a reason the trace shows).
    fn holds_back(self) -> bool {
        !matches!(self, Stop::Drained | Stop::Budget)
    }
}

/// The states of a pass of the requester over its send queue, after IBA vol 1 ch. 9.5 and
/// 9.9 (the requester's side of the transport; for shape, rxe_req.c). Each state is a method
/// of [`Pass`] that does its part and names the next; [`run`] drives them until
/// [`ReqState::Done`]:
///
/// ```text
/// START ─┬─ not RTS, RNR wait ───────────────────────────────────────────────→ DONE
///        └─ GET_WQE ─┬─ no WQE left / budget spent ─────────────────────────────→ DONE
///                    ├─ done ─────────────────────────────────→ (next) GET_WQE
///                    ├─ failed, an earlier READ unrequested, pages not mapped → DONE
///                    ├─ LOCAL_INV of a key an earlier WQE not done uses ───────→ DONE
///                    ├─ local (REG_MR, LOCAL_INV, BIND_MW) → EXECUTE_LOCAL → GET_WQE
///                    ├─ UD or GSI SEND ──────────────────────→ SEND_DATAGRAM → GET_WQE
///                    ├─ new ──→ CHK_FENCE → CHK_RD_ATOMIC → CHK_WINDOW → START_WQE ─┐
///                    └─ started ─────────────────────────────────────────────────┴→ CHK_ROUTE
///   CHK_ROUTE → SEND_PACKET ─┬─ sent, or all its packets were ─→ GET_WQE
///                            └─ window full, pages gone ────────→ DONE
/// ```
///
/// A failed check ends the pass in DONE with its [`Stop`]; the next pass (a doorbell, an ACK,
/// a timer, the next poll) begins again at START.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ReqState {
    /// The QP may send: it is in RTS and not waiting out an RNR NAK (its route is looked up
    /// once per pass).
    Start,
    /// The WQE under the cursor: one already done is stepped over; a failed one stops the
    /// pass; a new one must wait for an earlier READ asked for in pieces, and for its own
    /// on-demand pages. Local operations and datagrams go their own way; a LOCAL_INV waits
    /// while an earlier WQE not yet done uses its key.
    GetWqe,
    /// REG_MR, LOCAL_INV or BIND_MW, executed in order with the sends (no packets).
    ExecuteLocal,
    /// A UD or GSI SEND: one packet, unacknowledged; done when it is out.
    SendDatagram,
    /// IBA 10.8.3.3: a fenced WQE starts only when no READ or atomic before it is waiting for
    /// its response.
    ChkFence,
    /// IBA 9.4.4 (`max_rd_atomic`): no more READs and atomics on the wire than the responder
    /// has resources for.
    ChkRdAtomic,
    /// The congestion window (RC, XRC: UC has none) has room for the WQE's first packet.
    ChkWindow,
    /// The WQE gets its PSNs: as many as it has request packets (a READ: response packets).
    StartWqe,
    /// The connection's route: none, and nothing can be sent (a reliable QP's timer will end
    /// the WQE; a UC WQE fails now).
    ChkRoute,
    /// The WQE's next request packet is built, within the window, and sent; the timer is
    /// armed. A READ is asked for in window-sized pieces.
    SendPacket,
    /// The pass is over.
    Done(Stop),
}

/// What the WQEs before the one under the cursor hold it to: kept up to date as the cursor
/// moves along (each WQE is added once), so that a pass over `n` WQEs costs `O(n)`, not
/// `O(n²)`. The WQEs before the cursor do not change during a pass (it changes only the one
/// under the cursor).
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

/// One pass of the requester over a QP's send queue, with what its states tell each other.
struct Pass<'r> {
    qp: &'r mut QpCtx,
    io: &'r mut Io,
    host: &'r mut dyn EngineHost,
    now: Instant,
    /// The QP's protection domain (START).
    pd: u32,
    /// A connected QP's route (START).
    route: Option<Route>,
    /// RC and XRC: a window, ACKs and a retransmission timer (not UC, not datagrams).
    reliable: bool,
    /// The local ACK timeout.
    timeout: Option<Duration>,
    /// Packets the pass may still send.
    budget: u32,
    earlier: Earlier,
}

/// Sends what the window, fences and RD/atomic limits allow: one pass of the requester's
/// states (`ReqState`) from START to DONE.
pub fn run(qp: &mut QpCtx, io: &mut Io, host: &mut dyn EngineHost, now: Instant) {
    let mut pass = Pass {
        reliable: qp.qp_type.is_reliable(),
        timeout: qp.ack_timeout(),
        qp,
        io,
        host,
        now,
        pd: 0,
        route: None,
        budget: TX_BUDGET,
        earlier: Earlier::default(),
    };
    let mut state = ReqState::Start;
    let stop = loop {
        state = match state {
            ReqState::Done(stop) => break stop,
            state => pass.step(state),
        };
    };
    let qp = pass.qp;
    if qp.req.stopped != Some(stop) {
        qp.req.stopped = Some(stop);
        if stop.holds_back() {
            let qpn = qp.qpn;
            pass.io.trace.event(
                "requester",
                || json!({"qpn": qpn, "stop": stop.name(), "cursor": qp.req.cursor}),
            );
        }
    }
}

impl Pass<'_> {
    fn step(&mut self, state: ReqState) -> ReqState {
        use ReqState::*;
        match state {
            Start => self.start(),
            GetWqe => self.get_wqe(),
            ExecuteLocal => self.execute_local(),
            SendDatagram => self.send_datagram(),
            ChkFence => self.chk_fence(),
            ChkRdAtomic => self.chk_rd_atomic(),
            ChkWindow => self.chk_window(),
            StartWqe => self.start_wqe(),
            ChkRoute => self.chk_route(),
            SendPacket => self.send_packet(),
            Done(stop) => Done(stop),
        }
    }

    /// The WQE under the cursor (it exists: GET_WQE checked).
    fn wqe(&self) -> Option<&ReqWqe> {
        self.qp.req.wqes.get(self.qp.req.cursor)
    }

    /// Steps past the WQE under the cursor.
    fn next(&mut self) -> ReqState {
        self.qp.req.cursor += 1;
        ReqState::GetWqe
    }

    fn start(&mut self) -> ReqState {
        let qp = &mut *self.qp;
        if qp.state != QpState::Rts {
            return ReqState::Done(Stop::NotRts);
        }
        if let Some(until) = qp.req.rnr_until {
            if self.now < until {
                return ReqState::Done(Stop::RnrWait);
            }
            qp.req.rnr_until = None;
        }
        self.pd = qp.pd;
        if qp.qp_type.is_connected() {
            self.route = qp.route(self.host);
        }
        ReqState::GetWqe
    }

    fn get_wqe(&mut self) -> ReqState {
        let req = &self.qp.req;
        let i = req.cursor;
        if i >= req.wqes.len() {
            return ReqState::Done(Stop::Drained);
        }
        if self.budget == 0 {
            return ReqState::Done(Stop::Budget);
        }
        self.earlier.up_to(&req.wqes, i);
        let Some(w) = req.wqes.get(i) else {
            return ReqState::Done(Stop::Drained);
        };
        match w.done {
            Some((WcStatus::Success, _)) => return self.next(),
            Some(_) => return ReqState::Done(Stop::Failed),
            None => {}
        }
        if self.earlier.unrequested_read {
            return ReqState::Done(Stop::UnrequestedRead);
        }
        if w.started {
            return ReqState::ChkRoute;
        }
        if !local_pages_ready(self.host, w) {
            // The engine polls while WQEs are queued: the pass comes back once they are mapped.
            return ReqState::Done(Stop::PagesNotReady);
        }
        match w.kind {
            Kind::Local if self.key_in_use(i) => ReqState::Done(Stop::KeyInUse),
            Kind::Local => ReqState::ExecuteLocal,
            Kind::Datagram => ReqState::SendDatagram,
            _ => ReqState::ChkFence,
        }
    }

    /// Whether WQE `i` is a LOCAL_INV of a key that an earlier WQE, not yet done, still uses:
    /// that WQE may have to be sent again (a lost packet, a lost ACK) and read its buffers
    /// through the key. RTRS invalidates its MR as soon as the server's answer came, which can
    /// be before the ACK of its own WRITE from that MR.
    fn key_in_use(&self, i: usize) -> bool {
        let wqes = &self.qp.req.wqes;
        let Some(SendOp::LocalInv(key)) = wqes.get(i).map(|w| w.work.op) else {
            return false;
        };
        wqes.range(..i)
            .filter(|e| e.done.is_none())
            .any(|e| e.work.sges.iter().any(|s| s.lkey == key))
    }

    fn execute_local(&mut self) -> ReqState {
        let i = self.qp.req.cursor;
        let Some(w) = self.qp.req.wqes.get(i) else {
            return ReqState::GetWqe;
        };
        let status = local_operation(self.host, self.pd, self.qp.qpn, &w.work);
        if let Some(w) = self.qp.req.wqes.get_mut(i) {
            w.done = Some((status, 0));
        }
        self.next()
    }

    fn send_datagram(&mut self) -> ReqState {
        let i = self.qp.req.cursor;
        let status = send_datagram(self.qp, self.io, self.host, self.pd, i);
        if let Some(w) = self.qp.req.wqes.get_mut(i) {
            w.done = Some((status, w.len as u32));
        }
        self.budget -= 1;
        self.next()
    }

    fn chk_fence(&mut self) -> ReqState {
        let fenced = self
            .wqe()
            .is_some_and(|w| w.work.ctrl.flags & WQE_FLAG_FENCE != 0);
        if fenced && self.earlier.pending_response {
            return ReqState::Done(Stop::Fence);
        }
        ReqState::ChkRdAtomic
    }

    fn chk_rd_atomic(&mut self) -> ReqState {
        let limit = usize::from(self.qp.req.max_rd_atomic);
        if self.wqe().is_some_and(ReqWqe::needs_response)
            && self.earlier.responses_outstanding >= limit
        {
            return ReqState::Done(Stop::RdAtomicLimit);
        }
        ReqState::ChkWindow
    }

    fn chk_window(&mut self) -> ReqState {
        let req = &self.qp.req;
        if self.reliable
            && req.next_psn != req.una
            && psn::diff(req.next_psn, req.una) >= req.window() as i32
        {
            return ReqState::Done(Stop::WindowFull);
        }
        ReqState::StartWqe
    }

    fn start_wqe(&mut self) -> ReqState {
        let req = &mut self.qp.req;
        let first = req.next_psn;
        if let Some(w) = req.wqes.get_mut(req.cursor) {
            req.next_psn = psn::add(first, w.npkts);
            w.first_psn = first;
            w.started = true;
            w.next_pkt = 0;
        }
        ReqState::ChkRoute
    }

    fn chk_route(&mut self) -> ReqState {
        if self.route.is_some() {
            return ReqState::SendPacket;
        }
        if self.reliable {
            self.qp.req.arm(self.now, self.timeout);
        } else {
            fail(self.qp, self.qp.req.cursor, WcStatus::LocQpOpErr);
        }
        ReqState::Done(Stop::NoRoute)
    }

    fn send_packet(&mut self) -> ReqState {
        let (reliable, now, timeout) = (self.reliable, self.now, self.timeout);
        let Some(route) = self.route.as_ref() else {
            return ReqState::ChkRoute;
        };
        let qp = &mut *self.qp;
        let i = qp.req.cursor;
        let Some(w) = qp.req.wqes.get(i) else {
            return ReqState::GetWqe;
        };
        if w.next_pkt >= w.request_packets() {
            // Already sent (the cursor came back for an earlier READ's next piece).
            return self.next();
        }
        // Acknowledged while a go-back was resending it (the first transmission's ACK came
        // late): the resend goes on from the first packet not yet acknowledged.
        if reliable && matches!(w.kind, Kind::Send | Kind::Write) {
            let acked = psn::diff(qp.req.una, w.first_psn);
            if acked > 0 && (acked as u32) > w.next_pkt && (acked as u32) < w.npkts {
                if let Some(w) = qp.req.wqes.get_mut(i) {
                    w.next_pkt = acked as u32;
                }
                return ReqState::GetWqe;
            }
        }
        let k = w.next_pkt;
        let pkt_psn = match w.kind {
            Kind::Read => psn::add(w.first_psn, w.resp_pkts),
            _ => psn::add(w.first_psn, k),
        };
        let window = qp.req.window();
        if reliable && pkt_psn != qp.req.una && psn::diff(pkt_psn, qp.req.una) >= window as i32 {
            return ReqState::Done(Stop::WindowFull);
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
            window.clamp(MIN_CWND_PACKETS, MAX_READ_PIECE)
        };
        // Ask for an ACK when this packet fills the window, or nothing would open it again.
        let window_full = reliable && psn::diff(psn::add(pkt_psn, 1), qp.req.una) >= window as i32;
        let pd = self.pd;
        // The frame is built and sent before the WQE's state moves on (a payload its buffers
        // no longer hold fails the WQE instead).
        let sent = request_packet(qp, w, k, read_pieces).and_then(|(mut packet, body)| {
            packet.bth.ack_req |= window_full;
            self.io
                .send_with(
                    self.host,
                    route,
                    &packet,
                    body.len(),
                    resend,
                    |host, room| body.fill(host, pd, &w.work, room),
                )
                .map(|()| packet)
        });
        let req = &mut qp.req;
        let Some(w) = req.wqes.get_mut(i) else {
            return ReqState::GetWqe;
        };
        // The WQE's first frame (not a resend): its doorbell's latency is sampled.
        let first_frame = (k == 0 && !retransmit).then_some(w.work.index);
        match sent {
            Ok(packet) => {
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
                if let Some(index) = first_frame {
                    self.host.wqe_on_wire(qp.qpn, index);
                }
                self.budget -= 1;
                ReqState::GetWqe
            }
            Err(status) => {
                // A page of its buffers went away since it started (an invalidation): it
                // waits for it again rather than failing.
                if !local_pages_ready(self.host, w) {
                    return ReqState::Done(Stop::PagesNotReady);
                }
                w.done = Some((status, 0));
                req.cursor += 1;
                ReqState::GetWqe
            }
        }
    }
}
