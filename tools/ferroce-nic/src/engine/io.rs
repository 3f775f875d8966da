// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The engine's transmit path ([`Io`]): builds a packet's frame, counts and traces it, passes
//! it through the transmit faults, and sends it to the wire or, addressed to the port's own
//! MAC, to the loopback queue.

use std::sync::Arc;
use std::time::Instant;

use ferroce_hw::*;
use serde_json::json;

use super::faults::FaultInjector;
use super::frame;
use super::frame::Route;
use super::headers::Headers;
use super::opcode::{self, flag, OpInfo};
use super::wire::{FrameSink, LoopbackQueue, RxQueue};
use super::EngineHost;
use crate::trace::Tracer;

/// The transmit path: builds frames, counts and traces them, applies transmit faults, and
/// sends them to the wire or, when addressed to the port's own MAC, to the loopback queue.
pub struct Io {
    /// Where frames go once past the transmit faults.
    pub(super) egress: Egress,
    pub(super) rx: Arc<RxQueue>,
    pub(super) tx_faults: FaultInjector,
    pub(super) rx_faults: FaultInjector,
    /// Receive-direction faults of looped-back frames.
    pub(super) loop_faults: FaultInjector,
    /// Looped-back frames taken from the queue so far.
    pub(super) looped: u64,
    /// The trace.
    pub trace: Arc<Tracer>,
    /// The payload of the packet being built ([`Io::send_payload`]).
    pub payload: Payload,
    /// The last frame's buffer, sent and not kept: the next frame is built in it.
    pub(super) spare: Vec<u8>,
}

/// A packet's payload on its way into a frame: one buffer, reused by every packet. It grows
/// when a larger payload comes and is never cleared (each packet overwrites what it sends), so
/// that a packet costs no allocation and no zeroing.
#[derive(Default)]
pub struct Payload(Vec<u8>);

impl Payload {
    /// The first `len` bytes, for the packet to fill.
    pub fn room(&mut self, len: usize) -> &mut [u8] {
        if self.0.len() < len {
            self.0.resize(len, 0);
        }
        &mut self.0[..len]
    }

    /// Puts `bytes` in; returns their length.
    pub fn set(&mut self, bytes: &[u8]) -> usize {
        self.room(bytes.len()).copy_from_slice(bytes);
        bytes.len()
    }
}

/// Counts and traces a frame the port did not carry because it is down (`dir`: `"tx"` to the
/// wire, `"rx"` from it).
pub(super) fn port_down_drop(host: &dyn EngineHost, trace: &Tracer, dir: &str) {
    host.count(COUNTER_PORT_DOWN_DROPS, 1);
    trace.event("drop", || json!({"why": "port down", "dir": dir}));
}

/// The port's side of the transmit path: the wire, and the loopback queue of frames to the
/// port's own MAC.
pub(super) struct Egress {
    /// The wire.
    pub(super) sink: Box<dyn FrameSink>,
    /// Frames to the port's own MAC, which the engine receives itself.
    pub(super) loopback: LoopbackQueue,
    /// The port's MAC.
    pub(super) mac: [u8; 6],
}

impl Egress {
    /// Sends a frame that left the transmit faults: to the loopback queue if its destination
    /// MAC is the port's own (a full queue drops it), to the wire otherwise. A multicast frame
    /// goes both ways: the group's QPs on this port get it too, as on a switch port that hears
    /// its own groups. A port that is down sends nothing to the wire.
    ///
    /// Returns the frame's buffer if nothing kept it (it went to the wire only), for the next
    /// frame.
    fn transmit(
        &mut self,
        frame: Vec<u8>,
        host: &dyn EngineHost,
        trace: &Tracer,
    ) -> Option<Vec<u8>> {
        let multicast = frame.first().is_some_and(|b| b & 1 != 0);
        if frame.get(..6) != Some(&self.mac[..]) {
            if !host.port_active() {
                port_down_drop(host, trace, "tx");
                if !multicast {
                    return Some(frame);
                }
            } else if !multicast {
                return self.sink.send_owned(frame);
            } else {
                self.sink.send(&frame);
            }
        }
        if !self.loopback.push(frame) {
            host.count(COUNTER_QUEUE_DROPS, 1);
            trace.event("drop", || json!({"why": "loopback queue full"}));
        }
        None
    }
}

/// Whether a packet was sent before, and why it goes again (each kind has its counter).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resend {
    /// Its first time on the wire.
    No,
    /// Again after the retransmission timer expired (`COUNTER_RETRANSMITS`): a loss, or only
    /// a peer late to answer.
    AfterTimeout,
    /// Again after the peer reported a loss: a NAK, or answers that imply one
    /// (`COUNTER_RETRANSMITS` and `COUNTER_NAK_RETRANSMITS`).
    AfterNak,
    /// An answer again, to a duplicate request: its requester went back (`COUNTER_RETRANSMITS`).
    Replay,
    /// Again after an RNR NAK, which refused it and what followed it (`COUNTER_RNR_RESENDS`).
    AfterRnr,
}

/// The counters (sent, received) of a packet's kind: a SEND's, an RDMA WRITE's, a READ request
/// or a READ response; `None` for ACKs and atomics.
pub(super) fn kind_counters(info: &OpInfo) -> Option<(usize, usize)> {
    if info.has(flag::SEND) {
        Some((COUNTER_TX_SEND_PACKETS, COUNTER_RX_SEND_PACKETS))
    } else if info.has(flag::WRITE) {
        Some((COUNTER_TX_WRITE_PACKETS, COUNTER_RX_WRITE_PACKETS))
    } else if info.has(flag::READ) {
        Some((COUNTER_TX_READ_REQUESTS, COUNTER_RX_READ_REQUESTS))
    } else if info.has(flag::RESP | flag::PAYLOAD) {
        Some((COUNTER_TX_READ_RESPONSES, COUNTER_RX_READ_RESPONSES))
    } else {
        None
    }
}

impl Io {
    /// Sends one packet of QP `qpn` along `route`.
    pub fn send(
        &mut self,
        host: &dyn EngineHost,
        route: &Route,
        packet: &Headers,
        payload: &[u8],
        resend: Resend,
    ) {
        let mut out = std::mem::take(&mut self.spare);
        out.clear();
        // The spare went with the last frame (to a far end or the loopback queue): a new one
        // of the largest frame's size, not one that grows with the frame.
        out.reserve(frame::MAX_FRAME);
        frame::build_with(
            route,
            packet.transport_len(payload.len()),
            &mut out,
            |out| packet.write(payload, out),
        );
        host.count(COUNTER_TX_PACKETS, 1);
        host.count(COUNTER_TX_BYTES, out.len() as u64);
        if let Some((tx, _)) = opcode::lookup(packet.bth.opcode).and_then(kind_counters) {
            host.count(tx, 1);
        }
        match resend {
            Resend::No => {}
            Resend::AfterTimeout | Resend::Replay => host.count(COUNTER_RETRANSMITS, 1),
            Resend::AfterNak => {
                host.count(COUNTER_RETRANSMITS, 1);
                host.count(COUNTER_NAK_RETRANSMITS, 1);
            }
            Resend::AfterRnr => host.count(COUNTER_RNR_RESENDS, 1),
        }
        let retransmit = resend != Resend::No;
        let bth = packet.bth;
        let looped = route.dmac == self.egress.mac;
        self.trace.event("frame", || {
            let mut event = json!({"dir": "tx", "qpn": bth.dest_qpn, "opcode": bth.opcode,
                "psn": bth.psn, "len": out.len(), "ack_req": bth.ack_req,
                "retransmit": retransmit, "smac": mac_text(&route.smac),
                "dmac": mac_text(&route.dmac)});
            // An ACK frame may be a NAK: the AETH says which.
            if let Some(aeth) = packet.aeth {
                event["syndrome"] = json!(aeth.syndrome);
            }
            if looped {
                event["loopback"] = json!(true);
            }
            event
        });
        let Self {
            egress,
            tx_faults,
            trace,
            spare,
            ..
        } = self;
        tx_faults.pass(out, || host.now(), &mut |f| {
            if let Some(f) = egress.transmit(f, host, trace) {
                *spare = f;
            }
        });
    }

    /// Sends one packet whose payload is the first `len` bytes of [`Io::payload`].
    pub fn send_payload(
        &mut self,
        host: &dyn EngineHost,
        route: &Route,
        packet: &Headers,
        len: usize,
        resend: Resend,
    ) {
        let mut payload = std::mem::take(&mut self.payload);
        self.send(host, route, packet, payload.room(len), resend);
        self.payload = payload;
    }

    /// When the next frame a fault injector holds is due, in either direction.
    pub(super) fn next_release(&self) -> Option<Instant> {
        [&self.tx_faults, &self.rx_faults, &self.loop_faults]
            .into_iter()
            .filter_map(FaultInjector::next_release)
            .min()
    }

    pub(super) fn release(&mut self, host: &dyn EngineHost, now: Instant) {
        let Self {
            egress,
            tx_faults,
            trace,
            ..
        } = self;
        tx_faults.release(now, &mut |f| {
            egress.transmit(f, host, trace);
        });
    }
}

/// A MAC address as the trace shows it (`52:54:00:fe:00:01`).
pub(super) fn mac_text(mac: &[u8]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}
