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
use super::frame::{FrameWriter, Route};
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
    /// The last frame's buffer, sent and not kept: the next frame is built in it.
    pub(super) spare: Vec<u8>,
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
    /// Sends one packet along `route`, its payload `payload`.
    pub fn send(
        &mut self,
        host: &dyn EngineHost,
        route: &Route,
        packet: &Headers,
        payload: &[u8],
        resend: Resend,
    ) {
        let built = self.build(route, packet, payload.len(), |room| {
            room.copy_from_slice(payload);
            Ok::<(), std::convert::Infallible>(())
        });
        let Ok(out) = built;
        self.transmit(host, route, packet, out, resend);
    }

    /// Sends one packet along `route` whose payload of `len` bytes `fill` writes into the
    /// frame itself (gathered from guest memory, read from an MR): the payload is copied once,
    /// from where it is to where it is sent. If `fill` fails, nothing is sent and its error is
    /// returned.
    pub fn send_with<E>(
        &mut self,
        host: &mut dyn EngineHost,
        route: &Route,
        packet: &Headers,
        len: usize,
        resend: Resend,
        fill: impl FnOnce(&mut dyn EngineHost, &mut [u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        let out = self.build(route, packet, len, |room| fill(&mut *host, room))?;
        self.transmit(host, route, packet, out, resend);
        Ok(())
    }

    /// Builds the frame of `packet` and a payload of `len` bytes that `fill` writes, in the
    /// spare buffer. If `fill` fails, the buffer stays the spare.
    fn build<E>(
        &mut self,
        route: &Route,
        packet: &Headers,
        len: usize,
        fill: impl FnOnce(&mut [u8]) -> Result<(), E>,
    ) -> Result<Vec<u8>, E> {
        let mut out = self.frame_buffer();
        let mut w = FrameWriter::over(&mut out);
        let built = frame::build_with(route, packet.transport_len(len), &mut w, |w| {
            packet.write_with(len, w, fill)
        });
        match built {
            Ok(()) => {
                w.finish();
                Ok(out)
            }
            Err(e) => {
                self.spare = out;
                Err(e)
            }
        }
    }

    /// The buffer to build the next frame in, over its old bytes ([`FrameWriter`]): the last
    /// frame's if nothing kept it, or one a far end gave back.
    fn frame_buffer(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.spare);
        // The spare went with the last frame (to a far end or the loopback queue): a new one
        // of the largest frame's size, not one that grows with the frame.
        out.reserve(frame::MAX_FRAME.saturating_sub(out.len()));
        out
    }

    /// Counts, traces and sends the built frame `out` of `packet`.
    fn transmit(
        &mut self,
        host: &dyn EngineHost,
        route: &Route,
        packet: &Headers,
        out: Vec<u8>,
        resend: Resend,
    ) {
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
