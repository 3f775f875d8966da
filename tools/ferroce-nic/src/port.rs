// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The converged Ethernet port. The NIC sits between the VM's virtio-net NIC (same MAC) and the
//! L2 segment. The virtio-net side is a unix datagram socket carrying one whole Ethernet frame
//! per datagram (QEMU's `-netdev dgram` framing); the segment side is a [`Wire`]: the same kind
//! of socket, a TAP device, a UDP tunnel or rings shared with another NIC ([`shm`]). Frames from the segment that are RoCE and
//! addressed to the port's MAC or to a multicast MAC go to the engine; everything else goes to
//! the virtio-net (netdev) side, and everything from the virtio-net goes to the segment. A peer
//! socket that does not exist or does not listen loses the frame, like an unplugged cable. RoCE
//! frames the engine sends to the port's own MAC never come here: the engine receives them
//! itself ([`crate::engine::wire::LoopbackQueue`]). The host's IGMP and MLD membership
//! messages, both ways, are traced ([`membership`]).
//!
//! A NIC with several functions (`serve --functions N`) shares the port among them through an
//! embedded [`switch`]: frames between its functions stay inside the NIC, and each function
//! has its own netdev side for its own VM.

use std::io::ErrorKind;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, OnceLock};

use serde_json::json;

use crate::function::Function;
use crate::trace::Tracer;

pub mod batch;
pub mod membership;
pub mod shm;
pub mod switch;
pub mod wire;

use batch::RecvBatch;
pub use switch::{Source, Switch, SwitchSink, Vport};
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
    /// Frames to the netdev (from the wire or another function).
    pub to_host: AtomicU64,
    /// Frames from the netdev (to the wire or another function).
    pub from_host: AtomicU64,
    /// Frames to the engine (from the wire or another function).
    pub to_engine: AtomicU64,
    /// Frames from this function to another function of the NIC, switched inside it.
    pub switched: AtomicU64,
    /// Frames lost because a peer socket was absent (an unplugged cable) or would not take them;
    /// those the engine's queue could not take count in its `queue_drops`.
    pub lost: AtomicU64,
    /// The wire the port was given (`--wire`), once it is open.
    pub wire: OnceLock<String>,
    /// What a shared-memory cable counts, when the wire is one.
    pub cable: OnceLock<Arc<shm::CableStats>>,
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

/// The sockets of a started port.
pub struct Port {
    wire: Option<Wire>,
    /// Each function's netdev side: its bound socket and QEMU's, where frames for its guest's
    /// IP stack go (function 0 from [`PortConfig`], the others from [`Port::add_function`]).
    netdevs: Vec<Option<(UnixDatagram, PathBuf)>>,
    switch: Arc<OnceLock<Switch>>,
    /// Pass-through counts of function 0.
    pub stats: Arc<PortStats>,
}

impl Port {
    /// Binds the NIC's sockets and opens its wire.
    pub fn bind(config: PortConfig, stats: Arc<PortStats>) -> anyhow::Result<Self> {
        let wire = config.wire.as_ref().map(Wire::open).transpose()?;
        if let Some(spec) = &config.wire {
            let _ = stats.wire.set(spec.to_string());
        }
        if let Some(Wire::Shm(cable)) = &wire {
            let _ = stats.cable.set(cable.stats());
        }
        let mut port = Self {
            wire,
            netdevs: Vec::new(),
            switch: Arc::default(),
            stats,
        };
        port.add_function(config.netdev_socket.as_deref(), config.netdev_peer)?;
        Ok(port)
    }

    /// Adds the next function's vport: its netdev socket (bound here) and QEMU's peer.
    /// Returns the function's index.
    pub fn add_function(
        &mut self,
        netdev_socket: Option<&Path>,
        netdev_peer: Option<PathBuf>,
    ) -> anyhow::Result<usize> {
        let netdev = netdev_socket.map(wire::bind_unix).transpose()?;
        self.netdevs.push(netdev.zip(netdev_peer));
        Ok(self.netdevs.len() - 1)
    }

    /// The transmit side of function `vport`'s engine: the switch.
    pub fn sink(&self, vport: usize) -> SwitchSink {
        SwitchSink::new(self.switch.clone(), vport)
    }

    /// Starts switching for `functions` (function 0 first, one per [`Port::add_function`]):
    /// a thread for the wire and one for each function's netdev.
    pub fn spawn(self, functions: &[Arc<Function>]) -> anyhow::Result<()> {
        anyhow::ensure!(
            functions.len() == self.netdevs.len(),
            "{} functions for a port with {} vports",
            functions.len(),
            self.netdevs.len()
        );
        let mut netdevs = Vec::new();
        let mut vports = Vec::new();
        for (nic, netdev) in functions.iter().zip(self.netdevs) {
            let theirs = match &netdev {
                Some((sock, _)) => Some(sock.try_clone()?),
                None => None,
            };
            netdevs.push(theirs);
            vports.push(Vport::of(nic, netdev));
        }
        let uplink = match &self.wire {
            Some(wire) => Some(wire.try_clone()?),
            None => None,
        };
        if self.switch.set(Switch::new(uplink, vports)).is_err() {
            anyhow::bail!("the port is started already");
        }
        if let Some(wire) = self.wire {
            let switch = self.switch.clone();
            std::thread::Builder::new()
                .name("ferroce-wire".into())
                .spawn(move || {
                    forward_from(
                        "wire socket",
                        |batch| wire.recv_batch(batch),
                        &switch,
                        Source::Uplink,
                    )
                })?;
        }
        for (n, netdev) in netdevs.into_iter().enumerate() {
            let Some(netdev) = netdev else {
                continue;
            };
            let switch = self.switch.clone();
            std::thread::Builder::new()
                .name(format!("ferroce-netdev{n}"))
                .spawn(move || {
                    forward_from(
                        "netdev socket",
                        |batch| batch::recv_many(&netdev, batch),
                        &switch,
                        Source::Netdev(n),
                    )
                })?;
        }
        Ok(())
    }
}

/// Receives frames with `recv` (a batch at a time) and switches them as coming from `from`,
/// until `recv` fails.
fn forward_from(
    what: &str,
    recv: impl Fn(&mut RecvBatch) -> std::io::Result<usize>,
    switch: &OnceLock<Switch>,
    from: Source,
) {
    let mut batch = RecvBatch::new(65536);
    loop {
        let n = match recv(&mut batch) {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!("{what}: {e}");
                return;
            }
        };
        if let Some(switch) = switch.get() {
            switch.forward_all(from, batch.frames(n));
        }
    }
}
