// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The RoCE transport engine: per-QP transport state (which each QP object owns), QP turns,
//! frame reception and dispatch, and the transmit
//! path shared by the three state machines ([`super::requester`], [`super::responder`],
//! [`super::completer`]), in the manner of Linux rxe.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferroce_hw::*;
use serde_json::json;

use super::faults::{FaultControl, FaultInjector};
use super::frame::{self, RoceFrame, Route};
use super::headers::Packet;
use super::icrc::NetKind;
use super::io::{kind_counters, mac_text, port_down_drop, Egress, Io};
use super::opcode::{flag, Transport};
use super::requester::Requester;
use super::responder::Responder;
use super::wire::{LoopbackQueue, PortEnd};
use super::{Engine, EngineHost, SendWork};
use crate::capture::Direction;
use crate::qp::attrs::QpAttrs;
use crate::trace::Tracer;

/// Q_Key of the GSI QP (IBA 13.5.3.1).
pub const GSI_QKEY: u32 = 0x8001_0000;
/// Frames taken from the receive queue per poll.
pub const RX_BUDGET: usize = 512;
/// Looped-back frames received per drain; the rest wait for the next one.
const LOOPBACK_BUDGET: usize = 4096;
/// Rounds of QP work per poll while looped-back frames keep arriving (each round is what a
/// poll does: ACKs, timers, requests, READ responses, completions).
const LOOPBACK_ROUNDS: usize = 8;
/// Shortest retransmission timeout: the emulated device polls at a granularity well above the
/// IBA's 4.096 µs unit.
pub const MIN_ACK_TIMEOUT: Duration = Duration::from_millis(1);

/// One QP's transport state: what its requester, completer and responder keep between
/// packets (rxe keeps the same in `rxe_qp`'s `req`, `comp` and `resp`).
///
/// The device's QP object owns it (`objects::Qp`), beside the QP's state and
/// attributes, and the engine borrows it for a turn ([`EngineHost::check_out`]). The device
/// acts on it itself when a command or a fault moves the QP: [`QpTransport::modified`],
/// [`QpTransport::enter_error`].
#[derive(Default)]
pub struct QpTransport {
    /// Send side (requester and completer).
    pub req: Requester,
    /// Receive side.
    pub resp: Responder,
}

impl QpTransport {
    /// What a modify command from `old` to `new` (attributes `attrs`, already applied) does to
    /// the transport: RESET forgets the connection, RTR starts the responder at the receive
    /// PSN, RTS from INIT or RTR the requester at the send PSN, ERR stops both, and any other
    /// modify takes new retry counts and limits.
    pub fn modified(&mut self, old: QpState, new: QpState, attrs: &QpAttrs) {
        match new {
            QpState::Reset => *self = Self::default(),
            QpState::Rtr if old != QpState::Rtr => self.resp.reset(attrs.rq_psn),
            QpState::Rts if old == QpState::Rtr || old == QpState::Init => {
                self.req.reset(attrs);
            }
            QpState::Err => self.enter_error(),
            _ => self.req.update_limits(attrs),
        }
    }

    /// Enters ERR: nothing more is sent or retransmitted (the WQEs are dropped: the device
    /// flushes them), no READ response is sent or written, no request executed; the responder
    /// starts afresh at the PSN it expected.
    pub fn enter_error(&mut self) {
        self.req.clear();
        let epsn = self.resp.epsn;
        self.resp.reset(epsn);
    }

    /// Whether the QP has work for a poll's round: WQEs queued or in flight (and their
    /// timers), an ACK or READ responses to send.
    pub fn busy(&self) -> bool {
        self.req.busy() || self.resp.busy()
    }

    /// XRC_TGT: XRC SRQ `srqn` was destroyed (see [`Responder::srq_destroyed`]).
    pub fn srq_destroyed(&mut self, srqn: u32) {
        self.resp.srq_destroyed(srqn);
    }

    /// When the requester next acts on its own (see [`Requester::next_deadline`]).
    pub fn next_deadline(&self) -> Option<Instant> {
        self.req.next_deadline()
    }
}

/// A QP during one of its turns in the engine (a received frame, a poll's round, new send
/// work): the device's facts about it as they are at the turn's start, and its transport state,
/// lent by the device ([`EngineHost::check_out`]) and given back at the turn's end
/// ([`EngineHost::check_in`], through [`QpCtx::into_transport`]).
///
/// Nothing here outlives the turn but the transport: the state, the attributes and the PD are
/// the device's, read afresh at every check-out, so that nothing has to be kept in step. When
/// the engine finds an error, it moves the device's QP first (an error completion, `qp_error`)
/// and then the turn's ([`QpCtx::enter_error`]); when the device moves it during the turn (an
/// error completion it wrote, a broken receive queue), the check-in stops the transport.
pub struct QpCtx {
    /// QP number.
    pub qpn: u32,
    /// Type.
    pub qp_type: QpType,
    /// State, the device's at the turn's start (ERR if the engine failed the QP since).
    pub state: QpState,
    /// Protection domain (0 for XRC_TGT: each request's SRQ has its own).
    pub pd: u32,
    /// Attributes, the device's.
    pub attrs: QpAttrs,
    /// The transport state, lent: its requester and responder are the turn's `req` and `resp`
    /// (through `Deref`). Boxed, so that lending it moves a pointer.
    transport: Box<QpTransport>,
}

impl std::ops::Deref for QpCtx {
    type Target = QpTransport;

    fn deref(&self) -> &QpTransport {
        &self.transport
    }
}

impl std::ops::DerefMut for QpCtx {
    fn deref_mut(&mut self) -> &mut QpTransport {
        &mut self.transport
    }
}

impl QpCtx {
    /// QP `qpn`'s turn, with the device's facts and the transport it lends.
    pub fn lent(
        qpn: u32,
        qp_type: QpType,
        state: QpState,
        pd: u32,
        attrs: QpAttrs,
        transport: Box<QpTransport>,
    ) -> Self {
        Self {
            qpn,
            qp_type,
            state,
            pd,
            attrs,
            transport,
        }
    }

    /// Ends the turn: the transport to give back to the device, whose QP is now in state
    /// `device` (`None`: gone). If the device moved the QP to ERR during the turn, the transport
    /// stops here, before it is kept.
    pub fn into_transport(mut self, device: Option<QpState>, trace: &Tracer) -> Box<QpTransport> {
        if self.state != QpState::Err && matches!(device, Some(QpState::Err) | None) {
            let was: u8 = self.state.into();
            trace.event(
                "qp_error",
                || json!({"qpn": self.qpn, "was": was, "why": "device"}),
            );
            self.enter_error();
        }
        self.transport
    }

    /// Enters ERR for the rest of the turn (see [`QpTransport::enter_error`]).
    pub fn enter_error(&mut self) {
        self.state = QpState::Err;
        self.transport.enter_error();
    }

    /// The opcode of this QP's transport for RC opcode `rc` (see [`Transport::opcode`]).
    pub fn opcode(&self, rc: u8) -> u8 {
        Transport::of(self.qp_type).opcode(rc)
    }

    /// Path MTU in bytes (1024 if unset).
    pub fn mtu(&self) -> u32 {
        self.attrs.mtu()
    }

    /// The local ACK timeout; `None` for the IBA's "infinite" (0).
    pub fn ack_timeout(&self) -> Option<Duration> {
        let exp = u32::from(self.attrs.timeout.min(31));
        (exp != 0).then(|| Duration::from_nanos(4096u64 << exp).max(MIN_ACK_TIMEOUT))
    }

    /// Whether frame `f` came along this connected (RC or UC) QP's path: from the QP's remote
    /// GID to its own source GID, in the RoCE version of that GID. (That its BTH named this QP
    /// is how it was steered here.) Anything else is another host's, forged or misrouted.
    pub fn from_peer(&self, host: &dyn EngineHost, f: &RoceFrame<'_>) -> bool {
        let Some(sgid) = host.gid(u32::from(self.attrs.sgid_index)) else {
            return false;
        };
        let v1 = sgid.gid_type == GID_TYPE_ROCE_V1;
        f.sgid == self.attrs.dgid && f.dgid == sgid.gid && (f.kind == NetKind::V1) == v1
    }

    /// The route of this connected QP's connection.
    pub fn route(&self, host: &dyn EngineHost) -> Option<Route> {
        route_for(
            host,
            self.attrs.sgid_index,
            self.attrs.dgid,
            self.attrs.dmac,
            self.attrs.traffic_class,
            self.attrs.hop_limit,
            if self.attrs.flow_label != 0 {
                self.attrs.flow_label
            } else {
                frame::flow_label_for(self.qpn, self.attrs.dest_qpn)
            },
        )
    }
}

/// The route from source GID `sgid_index` to `dgid` via next hop `dmac`; `None` if the port
/// has no such GID. The VLAN (and the MAC and RoCE version) are the GID entry's, which the
/// driver programmed: whatever VLAN an address vector names, a consumer cannot pick another.
pub fn route_for(
    host: &dyn EngineHost,
    sgid_index: u8,
    dgid: [u8; 16],
    dmac: [u8; 6],
    traffic_class: u8,
    hop_limit: u8,
    flow_label: u32,
) -> Option<Route> {
    let sgid = host.gid(u32::from(sgid_index))?;
    let vlan = sgid.vlan;
    Some(Route {
        smac: sgid.mac,
        dmac,
        vlan: (vlan != VLAN_NONE).then_some(vlan),
        v1: sgid.gid_type == GID_TYPE_ROCE_V1,
        sgid: sgid.gid,
        dgid,
        traffic_class,
        hop_limit: if hop_limit == 0 { 64 } else { hop_limit },
        flow_label,
    })
}

/// The RoCEv2 (and v1) engine.
pub struct RoceEngine {
    /// The QPs with something to do in a poll's round ([`QpTransport::busy`]), each with its
    /// requester's next deadline as of its last turn. A poll visits these and no other: a QP
    /// enters when a WQE, a frame or a modify gives it work and leaves when its turn ends
    /// without any, so that idle QPs cost a turn nothing. Every busy QP is in it. In QPN
    /// order: QPs take their turns in the same order in every run (with a seeded fault stream,
    /// a run is then a function of its inputs). The QPs themselves, and their transport state,
    /// are the device's.
    active: BTreeMap<u32, Option<Instant>>,
    io: Io,
    /// Buffers a poll reuses, so that a round allocates nothing of its own: the frames taken
    /// from the wire, those through the receive faults, and the QPs of a round.
    scratch: Scratch,
}

/// The engine's reusable buffers (empty between uses; they keep their capacity).
#[derive(Default)]
struct Scratch {
    arrived: VecDeque<Vec<u8>>,
    received: VecDeque<Vec<u8>>,
    looped: Vec<Vec<u8>>,
    done: Vec<Vec<u8>>,
    qpns: Vec<u32>,
}

impl RoceEngine {
    /// An engine for the port with MAC `mac`, wired to `port`, with faults from `faults`.
    pub fn new(mac: [u8; 6], port: PortEnd, faults: Arc<FaultControl>, trace: Arc<Tracer>) -> Self {
        Self {
            active: BTreeMap::new(),
            scratch: Scratch::default(),
            io: Io {
                egress: Egress {
                    sink: port.sink,
                    loopback: LoopbackQueue::default(),
                    mac,
                },
                rx: port.rx,
                // Every frame is captured once: as it leaves the transmit faults (looped-back
                // frames included, to the port's own MAC) or the receive faults of the wire.
                tx_faults: FaultInjector::new(faults.clone(), true)
                    .capturing(trace.clone(), Direction::Out),
                rx_faults: FaultInjector::new(faults.clone(), false)
                    .capturing(trace.clone(), Direction::In),
                loop_faults: FaultInjector::loopback(faults),
                looped: 0,
                trace,
                spare: Vec::with_capacity(frame::MAX_FRAME),
            },
        }
    }

    /// Receives one frame from the wire, or one the engine looped back to itself (`looped`):
    /// both take the same checks.
    fn receive(&mut self, host: &mut dyn EngineHost, bytes: &[u8], now: Instant, looped: bool) {
        host.count(COUNTER_RX_PACKETS, 1);
        host.count(COUNTER_RX_BYTES, bytes.len() as u64);
        let drop = |host: &mut dyn EngineHost, why: &str, trace: &Tracer| {
            host.count(COUNTER_DROPS, 1);
            trace.event("drop", || json!({"why": why}));
        };
        let f = match frame::parse(bytes) {
            Ok(f) => f,
            Err(e) => return drop(host, &e.to_string(), &self.io.trace),
        };
        // A group's datagram: multicast MAC and GID (rdma_cm's MAC is the GID's, RFC 1112/2464).
        let multicast = f.dmac[0] & 1 != 0;
        if f.dmac != self.io.egress.mac && !multicast {
            return drop(host, "not our MAC", &self.io.trace);
        }
        if !f.icrc_ok {
            host.count(COUNTER_ICRC_ERRORS, 1);
            return drop(host, "ICRC", &self.io.trace);
        }
        let want_type = if f.kind == NetKind::V1 {
            GID_TYPE_ROCE_V1
        } else {
            GID_TYPE_ROCE_V2
        };
        let ours = host.has_gid(&f.dgid, want_type);
        if multicast != is_multicast_gid(&f.dgid) || !(ours || multicast) {
            return drop(host, "not our GID", &self.io.trace);
        }
        let pkt = match Packet::parse(f.transport) {
            Ok(p) => p,
            Err(e) => return drop(host, &e.to_string(), &self.io.trace),
        };
        if pkt.bth.pkey & 0x7fff != 0x7fff {
            return drop(host, "P_Key", &self.io.trace);
        }
        if let Some((_, rx)) = kind_counters(pkt.info) {
            host.count(rx, 1);
        }
        self.io.trace.event("frame", || {
            let mut event = json!({"dir": "rx", "qpn": pkt.bth.dest_qpn,
                "opcode": pkt.bth.opcode, "psn": pkt.bth.psn, "len": bytes.len()});
            if let (Some(dmac), Some(smac)) = (bytes.get(0..6), bytes.get(6..12)) {
                event["dmac"] = json!(mac_text(dmac));
                event["smac"] = json!(mac_text(smac));
            }
            if looped {
                event["loopback"] = json!(true);
            }
            event
        });
        if multicast {
            return self.receive_multicast(host, &pkt, &f);
        }
        let Some(mut qp) = host.check_out(pkt.bth.dest_qpn) else {
            return drop(host, "no such QP", &self.io.trace);
        };
        self.receive_on(&mut qp, host, &pkt, &f, now);
        self.give_back(host, qp);
    }

    /// QP `qp`'s turn for frame `f` (packet `pkt`) that named it.
    fn receive_on(
        &mut self,
        qp: &mut QpCtx,
        host: &mut dyn EngineHost,
        pkt: &Packet<'_>,
        f: &RoceFrame<'_>,
        now: Instant,
    ) {
        let drop = |host: &mut dyn EngineHost, why: &str, trace: &Tracer| {
            host.count(COUNTER_DROPS, 1);
            trace.event("drop", || json!({"why": why}));
        };
        let transport = pkt.info.transport();
        if transport != Transport::of(qp.qp_type)
            || !matches!(qp.state, QpState::Rtr | QpState::Rts | QpState::Sqd)
        {
            return drop(host, "QP type or state", &self.io.trace);
        }
        if transport != Transport::Ud && !qp.from_peer(host, f) {
            return drop(host, "not from the QP's peer", &self.io.trace);
        }
        // An XRC connection's halves: XRC_INI sends requests, XRC_TGT answers them.
        let request = pkt.info.has(flag::REQ);
        if (qp.qp_type == QpType::XrcIni && request) || (qp.qp_type == QpType::XrcTgt && !request) {
            return drop(host, "XRC: the other half's packet", &self.io.trace);
        }
        if transport == Transport::Ud {
            super::responder::receive_ud(qp, &mut self.io, host, pkt, f);
        } else if pkt.info.has(flag::REQ) {
            super::responder::receive_request(qp, &mut self.io, host, pkt, now);
        } else if qp.state != QpState::Rtr {
            super::completer::receive_response(qp, &mut self.io, host, pkt, now);
            // An error the response revealed ends the QP now, not at the next poll: nothing
            // after it is sent, and no later response is written.
            super::completer::complete(qp, host);
        } else {
            drop(host, "response before RTS", &self.io.trace);
        }
    }

    /// Ends `qp`'s turn: its transport goes back to the device, and the QP stays in the
    /// active set while it has work.
    fn give_back(&mut self, host: &mut dyn EngineHost, qp: QpCtx) {
        let qpn = qp.qpn;
        let transport = qp.into_transport(host.qp_state(qpn), &self.io.trace);
        self.settle(qpn, &transport);
        host.check_in(qpn, transport);
    }

    /// Keeps QP `qpn` in the active set, with its deadline, while its `transport` has work,
    /// and takes it out when it has none: wherever a QP's turn or a modify ends.
    fn settle(&mut self, qpn: u32, transport: &QpTransport) {
        if transport.busy() {
            self.active.insert(qpn, transport.next_deadline());
        } else {
            self.active.remove(&qpn);
        }
    }

    /// Delivers a datagram sent to a multicast group to every UD QP attached to it that can
    /// receive (each takes its own receive WQE and checks its own Q_Key).
    fn receive_multicast(
        &mut self,
        host: &mut dyn EngineHost,
        pkt: &Packet<'_>,
        f: &RoceFrame<'_>,
    ) {
        let drop = |host: &mut dyn EngineHost, why: &str| {
            host.count(COUNTER_DROPS, 1);
            self.io.trace.event("drop", || json!({"why": why}));
        };
        if pkt.bth.dest_qpn != MCAST_QPN || pkt.info.transport() != Transport::Ud {
            return drop(host, "multicast: not a datagram to QPN 0xffffff");
        }
        let members = host.mcast_members(&f.dgid);
        if members.is_empty() {
            return drop(host, "multicast: no QP attached");
        }
        for qpn in members {
            let Some(mut qp) = host.check_out(qpn) else {
                continue;
            };
            if qp.qp_type == QpType::Ud
                && matches!(qp.state, QpState::Rtr | QpState::Rts | QpState::Sqd)
            {
                super::responder::receive_ud(&mut qp, &mut self.io, host, pkt, f);
            }
            self.give_back(host, qp);
        }
    }

    /// Receives the frames waiting in the loopback queue, oldest first, through the receive
    /// faults. Frames they cause the engine to loop back join the queue behind them and are
    /// received in turn (a loop, never a nested receive), up to [`LOOPBACK_BUDGET`] frames.
    fn drain_loopback(&mut self, host: &mut dyn EngineHost, now: Instant) {
        let mut ready = std::mem::take(&mut self.scratch.looped);
        self.io.loop_faults.release(now, &mut |f| ready.push(f));
        for f in ready.drain(..) {
            self.receive(host, &f, now, true);
        }
        for _ in 0..LOOPBACK_BUDGET {
            let Some(f) = self.io.egress.loopback.pop() else {
                break;
            };
            self.io.looped += 1;
            self.io.loop_faults.process(f, now, &mut |f| ready.push(f));
            for f in ready.drain(..) {
                self.receive(host, &f, now, true);
            }
        }
        self.scratch.looped = ready;
    }

    /// One round of the timed and pending work of every QP that has some; what a QP loops
    /// back is received before the next QP's turn.
    fn service_qps(&mut self, host: &mut dyn EngineHost, now: Instant) {
        let mut qpns = std::mem::take(&mut self.scratch.qpns);
        qpns.extend(self.active.keys());
        // The ACK a timer waits for may be among the frames a poll did not take yet (more
        // arrived than [`RX_BUDGET`]): timers expire only once everything received was seen.
        let all_received = self.io.rx.is_empty();
        for qpn in qpns.drain(..) {
            if let Some(mut qp) = host.check_out(qpn) {
                super::responder::flush_ack(&mut qp);
                super::responder::send_replies(&mut qp, &mut self.io, host);
                if all_received {
                    super::requester::timers(&mut qp, &mut self.io, host, now);
                }
                super::requester::run(&mut qp, &mut self.io, host, now);
                super::completer::complete(&mut qp, host);
                self.give_back(host, qp);
            } else {
                self.active.remove(&qpn);
            }
            if !self.io.egress.loopback.is_empty() {
                self.drain_loopback(host, now);
            }
        }
        self.scratch.qpns = qpns;
    }
}

impl Engine for RoceEngine {
    fn qp_modified(&mut self, qpn: u32, _state: QpState, transport: &QpTransport) {
        self.settle(qpn, transport);
    }

    fn qp_destroyed(&mut self, qpn: u32) {
        self.active.remove(&qpn);
    }

    fn post_send(&mut self, host: &mut dyn EngineHost, work: SendWork) {
        let now = host.now();
        let Some(mut qp) = host.check_out(work.qpn) else {
            // No such QP (cannot happen for work the shell fetched): fail it.
            let _ = host.complete_send(work.qpn, work.index, WcStatus::LocQpOpErr, 0);
            return;
        };
        // A QP in ERR: the device flushes the WQE with the rest of the QP's.
        if qp.state != QpState::Err {
            super::requester::post(&mut qp, host, work);
            super::requester::run(&mut qp, &mut self.io, host, now);
            super::completer::complete(&mut qp, host);
        }
        self.give_back(host, qp);
        if !self.io.egress.loopback.is_empty() {
            self.drain_loopback(host, now);
        }
    }

    fn poll(&mut self, host: &mut dyn EngineHost) {
        let now = host.now();
        self.io.release(host, now);
        let mut arrived = std::mem::take(&mut self.scratch.arrived);
        self.io.rx.take(RX_BUDGET, &mut arrived);
        if !host.port_active() {
            for _ in arrived.drain(..) {
                port_down_drop(host, &self.io.trace, "rx");
            }
        }
        let mut received = std::mem::take(&mut self.scratch.received);
        for f in arrived.drain(..) {
            self.io
                .rx_faults
                .process(f, now, &mut |f| received.push_back(f));
        }
        self.scratch.arrived = arrived;
        self.io
            .rx_faults
            .release(now, &mut |f| received.push_back(f));
        let overflows = self.io.rx.take_overflows();
        if overflows > 0 {
            host.count(COUNTER_QUEUE_DROPS, overflows);
        }
        let mut done = std::mem::take(&mut self.scratch.done);
        for f in received.drain(..) {
            self.receive(host, &f, now, false);
            done.push(f);
        }
        self.scratch.received = received;
        // The buffers go back to the queue, for whoever fills it to fill again.
        self.io.rx.recycle(&mut done);
        self.scratch.done = done;
        self.drain_loopback(host, now);
        // Looped-back traffic answers within the poll: another round while the last one
        // received looped-back frames (ACKs to flush, completions, the next window).
        for _ in 0..LOOPBACK_ROUNDS {
            let looped = self.io.looped;
            self.service_qps(host, now);
            if self.io.looped == looped {
                break;
            }
        }
    }

    fn flush(&mut self) {
        self.io.egress.sink.flush();
    }

    fn busy(&self) -> bool {
        self.frames_waiting() || self.io.next_release().is_some() || !self.active.is_empty()
    }

    fn next_deadline(&self) -> Option<Instant> {
        // Only a QP with WQEs has timers.
        self.active
            .values()
            .flatten()
            .copied()
            .chain(self.io.next_release())
            .min()
    }

    fn frames_waiting(&self) -> bool {
        !self.io.rx.is_empty() || !self.io.egress.loopback.is_empty()
    }

    fn active_qps(&self) -> usize {
        self.active.len()
    }

    fn reset(&mut self) {
        self.active.clear();
        self.io.egress.loopback.clear();
    }
}

/// The bytes `[offset, offset + len)` of a message scattered or gathered over `sges`, as
/// `(lkey, address, length)` pieces; `None` if the list is shorter, or an address would
/// overflow. The whole walk is checked first, so that nothing moves for a list that fails.
pub fn sge_pieces(sges: &[Sge], offset: u64, len: usize) -> Option<SgePieces<'_>> {
    let pieces = SgePieces {
        sges: sges.iter(),
        skip: offset,
        left: len as u64,
    };
    let mut walk = pieces.clone();
    while walk.step()?.is_some() {}
    (walk.left == 0).then_some(pieces)
}

/// The pieces of part of a message over an SGE list ([`sge_pieces`]), without a buffer.
#[derive(Clone, Debug)]
pub struct SgePieces<'a> {
    sges: std::slice::Iter<'a, Sge>,
    /// Bytes still to skip before the part starts.
    skip: u64,
    /// Bytes of the part not walked yet.
    left: u64,
}

impl SgePieces<'_> {
    /// The next piece (`Some(None)` at the end); `None` if its address overflows.
    fn step(&mut self) -> Option<Option<(u32, u64, usize)>> {
        while self.left > 0 {
            let Some(sge) = self.sges.next() else {
                return Some(None);
            };
            let sge_len = u64::from(sge.length);
            if self.skip >= sge_len {
                self.skip -= sge_len;
                continue;
            }
            let take = (sge_len - self.skip).min(self.left);
            let addr = sge.addr.checked_add(self.skip)?;
            self.left -= take;
            self.skip = 0;
            return Some(Some((sge.lkey, addr, take as usize)));
        }
        Some(None)
    }
}

impl Iterator for SgePieces<'_> {
    type Item = (u32, u64, usize);

    fn next(&mut self) -> Option<Self::Item> {
        self.step().flatten()
    }
}

/// Total length of an SGE list.
pub fn sge_total(sges: &[Sge]) -> u64 {
    sges.iter().map(|s| u64::from(s.length)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sge_pieces_span_entries() {
        let sges = [
            Sge {
                addr: 0x1000,
                length: 10,
                lkey: 1,
            },
            Sge {
                addr: 0x2000,
                length: 0,
                lkey: 2,
            },
            Sge {
                addr: 0x3000,
                length: 10,
                lkey: 3,
            },
        ];
        let pieces = |offset, len| sge_pieces(&sges, offset, len).map(Iterator::collect::<Vec<_>>);
        assert_eq!(pieces(5, 10), Some(vec![(1, 0x1005, 5), (3, 0x3000, 5)]));
        assert_eq!(pieces(0, 0), Some(vec![]));
        assert_eq!(pieces(15, 6), None);
        let overflow = [Sge {
            addr: u64::MAX,
            length: 10,
            lkey: 1,
        }];
        assert!(sge_pieces(&overflow, 5, 5).is_none());
        assert_eq!(sge_total(&sges), 20);
    }
}
