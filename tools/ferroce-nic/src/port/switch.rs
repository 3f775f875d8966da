// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The port's embedded switch, as an SR-IOV NIC's (a virtual Ethernet bridge): one uplink (the
//! [`Wire`]) and a vport per function, each vport with the function's engine and, optionally,
//! its VM's virtio-net (the netdev socket). Frames are switched by destination MAC:
//!
//! * from a function (its engine or its netdev) to another function's MAC: delivered inside
//!   the NIC, never on the wire (`switched` in the sender's port counts);
//! * from a function to any other unicast MAC: out of the uplink;
//! * from the uplink to a function's MAC: to that function;
//! * multicast and broadcast: to every other vport and, from a function, the uplink too.
//!
//! A vport takes a frame into its engine if it is RoCE for the vport's MAC or a multicast MAC
//! ([`classify`]), and otherwise passes it to its netdev. A unicast frame from the uplink for
//! no function's MAC goes to the physical function's netdev, as a one-function port passes
//! every such frame to its host. A function's engine never sends frames for its own MAC here:
//! it receives those itself ([`crate::engine::wire::LoopbackQueue`]).

use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

use crate::capture::Direction;
use crate::engine::frame::{classify, Steer, MAX_FRAME};
use crate::engine::wire::FrameSink;
use crate::function::{Function, FunctionParts};

use super::batch::{Frames, BATCH};
use super::{send_to, trace_membership, PortStats, Wire};

/// Where a frame came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The uplink (the wire).
    Uplink,
    /// Function `n`'s engine.
    Engine(usize),
    /// Function `n`'s netdev (its VM's virtio-net).
    Netdev(usize),
}

/// A function's place on the switch.
pub struct Vport {
    mac: [u8; 6],
    parts: FunctionParts,
    stats: Arc<PortStats>,
    netdev: Option<(UnixDatagram, PathBuf)>,
}

impl Vport {
    /// The vport of a function with MAC `mac`: its engine's queue and wake-up and its trace
    /// (`parts`), its port counters, and its netdev socket with the peer it sends to.
    pub fn new(
        mac: [u8; 6],
        parts: FunctionParts,
        stats: Arc<PortStats>,
        netdev: Option<(UnixDatagram, PathBuf)>,
    ) -> Self {
        Self {
            mac,
            parts,
            stats,
            netdev,
        }
    }

    /// The vport of function `nic`.
    pub fn of(nic: &Function, netdev: Option<(UnixDatagram, PathBuf)>) -> Self {
        let parts = FunctionParts {
            wake: nic.wake.clone(),
            port_rx: nic.port_rx.clone(),
            trace: nic.trace.clone(),
        };
        let mac = nic.lock().core.config().mac;
        Self::new(mac, parts, nic.port_stats.clone(), netdev)
    }

    fn stats(&self) -> &PortStats {
        &self.stats
    }

    /// Takes `frame` into the function: its engine or its netdev.
    fn deliver(&self, frame: &[u8]) {
        if classify(frame, &self.mac) == Steer::Engine {
            if frame.len() <= MAX_FRAME {
                self.stats().to_engine.fetch_add(1, Ordering::Relaxed);
                // In a buffer the engine gave back, if it gave one. A full queue counts in the
                // engine's `queue_drops`.
                let mut buffer = self.parts.port_rx.take_free().unwrap_or_default();
                buffer.clear();
                buffer.extend_from_slice(frame);
                self.parts.port_rx.push(buffer);
                self.parts.wake.signal();
            }
        } else if let Some((sock, peer)) = &self.netdev {
            let trace = &self.parts.trace;
            trace.capture.frame(Direction::In, frame, None);
            trace_membership(trace, "rx", frame);
            let counter = if send_to(sock, frame, peer) {
                &self.stats().to_host
            } else {
                &self.stats().lost
            };
            counter.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The switch: the uplink and the functions' vports (index = function index).
pub struct Switch {
    uplink: Option<Wire>,
    vports: Vec<Vport>,
}

impl Switch {
    /// A switch of `vports` (function 0 first) and the uplink `uplink`.
    pub fn new(uplink: Option<Wire>, vports: Vec<Vport>) -> Self {
        Self { uplink, vports }
    }

    fn to_uplink(&self, from: &Vport, frames: &[&[u8]]) {
        let Some(wire) = &self.uplink else {
            return;
        };
        let lost = frames.len() - wire.send_batch(frames);
        if lost > 0 {
            from.stats().lost.fetch_add(lost as u64, Ordering::Relaxed);
        }
    }

    /// Switches one frame from `from`.
    pub fn forward(&self, from: Source, frame: &[u8]) {
        self.forward_all(from, std::iter::once(frame));
    }

    /// Switches frames from `from`, in order; those for the uplink leave together, many per
    /// system call.
    pub fn forward_all<'a>(&self, from: Source, frames: impl IntoIterator<Item = &'a [u8]>) {
        let mut uplink = Vec::new();
        for frame in frames {
            self.switch(from, frame, &mut uplink);
        }
        let sender = match from {
            Source::Uplink => None,
            Source::Engine(n) | Source::Netdev(n) => self.vports.get(n),
        };
        if let (Some(sender), false) = (sender, uplink.is_empty()) {
            self.to_uplink(sender, &uplink);
        }
    }

    /// Takes one frame from `from` where it goes; a frame for the uplink is added to `uplink`.
    fn switch<'a>(&self, from: Source, frame: &'a [u8], uplink: &mut Vec<&'a [u8]>) {
        let Some(dmac) = frame.get(..6) else {
            return;
        };
        let multicast = dmac[0] & 1 != 0;
        let local = self.vports.iter().position(|v| v.mac == dmac);
        let origin = match from {
            Source::Uplink => None,
            Source::Engine(n) | Source::Netdev(n) => Some(n),
        };
        let Some(n) = origin else {
            match (multicast, local) {
                (true, _) => self.vports.iter().for_each(|v| v.deliver(frame)),
                (false, Some(to)) => self.vports[to].deliver(frame),
                (false, None) => {
                    if let Some(pf) = self.vports.first() {
                        pf.deliver(frame);
                    }
                }
            }
            return;
        };
        let Some(sender) = self.vports.get(n) else {
            return;
        };
        if let Source::Netdev(_) = from {
            sender
                .parts
                .trace
                .capture
                .frame(Direction::Out, frame, None);
            trace_membership(&sender.parts.trace, "tx", frame);
            sender.stats().from_host.fetch_add(1, Ordering::Relaxed);
        }
        match local {
            Some(to) if to != n && !multicast => {
                sender.stats().switched.fetch_add(1, Ordering::Relaxed);
                self.vports[to].deliver(frame);
            }
            _ if multicast => {
                for (i, v) in self.vports.iter().enumerate() {
                    if i != n {
                        v.deliver(frame);
                    }
                }
                uplink.push(frame);
            }
            _ => uplink.push(frame),
        }
    }
}

/// A function engine's transmit side: its frames enter the switch at its vport, a round's worth
/// at a time ([`FrameSink::flush`], or every [`BATCH`] frames). Frames sent before the switch is
/// in place ([`super::Port::spawn`]) are lost, as on an unplugged cable.
pub struct SwitchSink {
    switch: Arc<OnceLock<Switch>>,
    vport: usize,
    waiting: Frames,
}

impl SwitchSink {
    /// The sink of vport `vport` of the switch that `switch` will hold.
    pub fn new(switch: Arc<OnceLock<Switch>>, vport: usize) -> Self {
        Self {
            switch,
            vport,
            waiting: Frames::default(),
        }
    }

    /// Sends the batch once it is full.
    fn flush_full(&mut self) {
        if self.waiting.len() >= BATCH {
            self.flush();
        }
    }
}

impl FrameSink for SwitchSink {
    fn send(&mut self, frame: &[u8]) {
        self.waiting.push_copy(frame);
        self.flush_full();
    }

    /// Keeps the frame itself until the round ends, and gives the engine the buffer of a frame
    /// that left.
    fn send_owned(&mut self, frame: Vec<u8>) -> Option<Vec<u8>> {
        self.waiting.push(frame);
        self.flush_full();
        self.waiting.take_free()
    }

    fn flush(&mut self) {
        if self.waiting.is_empty() {
            return;
        }
        if let Some(switch) = self.switch.get() {
            switch.forward_all(Source::Engine(self.vport), self.waiting.iter());
        }
        self.waiting.clear();
    }
}
