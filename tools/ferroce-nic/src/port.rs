// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The converged Ethernet port. The NIC sits between the VM's virtio-net NIC (same MAC) and the
//! L2 segment. The virtio-net side is a unix datagram socket carrying one whole Ethernet frame
//! per datagram (QEMU's `-netdev dgram` framing); the segment side is a [`Wire`]: the same kind
//! of socket, a TAP device or a UDP tunnel. Frames from the segment that are RoCE and
//! addressed to the port's MAC or to a multicast MAC go to the engine; everything else goes to
//! the virtio-net (netdev) side, and everything from the virtio-net goes to the segment. A peer
//! socket that does not exist or does not listen loses the frame, like an unplugged cable. RoCE
//! frames the engine sends to the port's own MAC never come here: the engine receives them
//! itself ([`crate::engine::wire::LoopbackQueue`]). The host's IGMP and MLD membership
//! messages, both ways, are traced ([`membership`]).

use std::io::ErrorKind;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use serde_json::json;

use crate::capture::Direction;
use crate::engine::frame::{classify, Steer, MAX_FRAME};
use crate::engine::wire::FrameSink;
use crate::server::Nic;
use crate::trace::Tracer;

pub mod membership;
pub mod wire;

pub use wire::{Wire, WireSpec};

/// Traces `frame` if it is an IGMP or MLD membership message (`dir`: `"tx"` from the host to
/// the wire, `"rx"` the other way).
fn trace_membership(trace: &Tracer, dir: &str, frame: &[u8]) {
    if !trace.enabled() {
        return;
    }
    if let Some(m) = membership::membership(frame) {
        trace.event("membership", || {
            json!({"dir": dir, "proto": m.proto, "kind": m.kind, "type": m.msg_type,
                "groups": m.groups})
        });
    }
}

/// The port's two sides (both optional: a NIC without a wire has no cable).
#[derive(Clone, Debug, Default)]
pub struct PortConfig {
    /// Bound by the NIC; QEMU's virtio-net `-netdev dgram` sends here.
    pub netdev_socket: Option<PathBuf>,
    /// Where QEMU's netdev is bound; frames for the guest's IP stack go there.
    pub netdev_peer: Option<PathBuf>,
    /// The segment side.
    pub wire: Option<WireSpec>,
}

/// Frame counts of the pass-through paths.
#[derive(Default)]
pub struct PortStats {
    /// Wire → netdev frames.
    pub to_host: AtomicU64,
    /// Netdev → wire frames.
    pub from_host: AtomicU64,
    /// Wire → engine frames.
    pub to_engine: AtomicU64,
    /// Frames lost because a peer socket was absent (an unplugged cable) or would not take them;
    /// those the engine's queue could not take count in its `queue_drops`.
    pub lost: AtomicU64,
    /// The wire the port was given (`--wire`), once it is open.
    pub wire: OnceLock<String>,
}

/// Sends `frame` to `peer`; an absent or closed peer loses it (`false`).
fn send_to(sock: &UnixDatagram, frame: &[u8], peer: &Path) -> bool {
    match sock.send_to(frame, peer) {
        Ok(_) => true,
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::NotFound | ErrorKind::ConnectionRefused | ErrorKind::WouldBlock
            ) =>
        {
            false
        }
        Err(e) => {
            tracing::debug!("sending to {}: {e}", peer.display());
            false
        }
    }
}

/// The engine's transmit side: frames go to the segment.
pub struct WireSink {
    wire: Wire,
    stats: Arc<PortStats>,
}

impl FrameSink for WireSink {
    fn send(&mut self, frame: &[u8]) {
        if !self.wire.send(frame) {
            self.stats.lost.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The sockets of a started port.
pub struct Port {
    wire: Option<Wire>,
    netdev: Option<UnixDatagram>,
    config: PortConfig,
    /// Pass-through counts.
    pub stats: Arc<PortStats>,
}

impl Port {
    /// Binds the NIC's sockets and opens its wire.
    pub fn bind(config: PortConfig, stats: Arc<PortStats>) -> anyhow::Result<Self> {
        let wire = config.wire.as_ref().map(Wire::open).transpose()?;
        if let Some(spec) = &config.wire {
            let _ = stats.wire.set(spec.to_string());
        }
        let netdev = config
            .netdev_socket
            .as_deref()
            .map(wire::bind_unix)
            .transpose()?;
        Ok(Self {
            wire,
            netdev,
            config,
            stats,
        })
    }

    /// The engine's sink, if the port has a wire side.
    pub fn sink(&self) -> anyhow::Result<Option<WireSink>> {
        let Some(wire) = &self.wire else {
            return Ok(None);
        };
        Ok(Some(WireSink {
            wire: wire.try_clone()?,
            stats: self.stats.clone(),
        }))
    }

    /// Starts the two forwarding threads: wire → engine or netdev, netdev → wire.
    pub fn spawn(self, nic: Arc<Nic>) -> anyhow::Result<()> {
        let (mac, trace) = {
            let dev = nic.lock();
            (dev.core.config().mac, dev.core.trace_handle())
        };
        if let Some(wire) = &self.wire {
            let rx = wire.try_clone()?;
            let netdev = match &self.netdev {
                Some(s) => Some(s.try_clone()?),
                None => None,
            };
            let peer = self.config.netdev_peer.clone();
            let stats = self.stats.clone();
            let nic = nic.clone();
            let trace = trace.clone();
            std::thread::Builder::new()
                .name("ferroce-wire".into())
                .spawn(move || {
                    let mut buf = vec![0u8; 65536];
                    loop {
                        let n = match rx.recv(&mut buf) {
                            Ok(n) => n,
                            Err(e) => {
                                tracing::warn!("wire socket: {e}");
                                return;
                            }
                        };
                        let frame = &buf[..n];
                        if classify(frame, &mac) == Steer::Engine && n <= MAX_FRAME {
                            stats.to_engine.fetch_add(1, Ordering::Relaxed);
                            // A full queue counts in the engine's `queue_drops`.
                            nic.port_rx.push(frame.to_vec());
                            nic.doorbell.ring();
                        } else if let (Some(sock), Some(peer)) = (&netdev, &peer) {
                            trace.capture.frame(Direction::In, frame, None);
                            trace_membership(&trace, "rx", frame);
                            if send_to(sock, frame, peer) {
                                stats.to_host.fetch_add(1, Ordering::Relaxed);
                            } else {
                                stats.lost.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                })?;
        }
        if let Some(netdev) = self.netdev {
            let wire = match &self.wire {
                Some(s) => Some(s.try_clone()?),
                None => None,
            };
            let stats = self.stats.clone();
            std::thread::Builder::new()
                .name("ferroce-netdev".into())
                .spawn(move || {
                    let mut buf = vec![0u8; 65536];
                    loop {
                        let n = match netdev.recv(&mut buf) {
                            Ok(n) => n,
                            Err(e) => {
                                tracing::warn!("netdev socket: {e}");
                                return;
                            }
                        };
                        if let Some(wire) = &wire {
                            trace.capture.frame(Direction::Out, &buf[..n], None);
                            trace_membership(&trace, "tx", &buf[..n]);
                            if wire.send(&buf[..n]) {
                                stats.from_host.fetch_add(1, Ordering::Relaxed);
                            } else {
                                stats.lost.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                })?;
        }
        Ok(())
    }
}
