// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The port's cable: what carries its Ethernet frames to the segment. Three kinds, one whole
//! frame per datagram or read in each:
//!
//! - `unix:SOCKET,PEER`: a unix datagram socket bound at SOCKET, sending to PEER (the harness's
//!   switch, or QEMU's `-netdev dgram` with unix addresses);
//! - `tap:NAME`: a Linux TAP device (`IFF_TAP | IFF_NO_PI`), created if it is missing, so that
//!   the port can be enslaved to a bridge, an Open vSwitch or a VXLAN like a VM's tap;
//! - `udp:LOCAL,REMOTE`: a UDP socket bound at LOCAL sending each frame as one datagram to
//!   REMOTE, QEMU's `-netdev dgram` framing with inet addresses, so that a ferroce port and a
//!   plain QEMU NIC on another host can share a segment;
//! - `shm:MEMFD,NOTIFY,SIDE`: rings in a memfd shared with another NIC on the host, a cable
//!   between two NICs without a system call per batch ([`super::shm`]).
//!
//! A peer that is absent or does not take a frame loses it, like an unplugged cable: the
//! caller counts it.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, ErrorKind, Read as _, Write as _};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd as _;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use anyhow::{bail, Context as _};

use super::batch::{self, RecvBatch};
use super::shm::{ShmCable, Side};

/// Where a port's frames go, as given on the command line (`--wire`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WireSpec {
    /// `unix:SOCKET,PEER`.
    Unix {
        /// Bound by the NIC: the segment sends here.
        socket: PathBuf,
        /// The segment's socket: frames go there.
        peer: PathBuf,
    },
    /// `tap:NAME`.
    Tap {
        /// The interface name (at most 15 bytes).
        name: String,
    },
    /// `udp:LOCAL,REMOTE` (`HOST:PORT` each; IPv6 hosts in brackets).
    Udp {
        /// Bound by the NIC.
        local: SocketAddr,
        /// Where frames go.
        remote: SocketAddr,
    },
    /// `shm:MEMFD,NOTIFY,SIDE`: descriptors the NIC inherits (a memfd and one end of a
    /// datagram socketpair, the other NIC has the same memfd and the other end) and its side.
    Shm {
        /// The memfd both NICs map.
        memfd: i32,
        /// This NIC's end of the socketpair.
        notify: i32,
        /// `a` or `b`: which ring this NIC sends on.
        side: Side,
    },
}

/// Longest interface name the kernel takes (`IFNAMSIZ` less its NUL).
const MAX_IFNAME: usize = libc::IFNAMSIZ - 1;

impl FromStr for WireSpec {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<Self> {
        let Some((kind, rest)) = s.split_once(':') else {
            bail!(
                "wire '{s}': expected unix:SOCKET,PEER, tap:NAME, udp:LOCAL,REMOTE or \
                 shm:MEMFD,NOTIFY,SIDE"
            );
        };
        let pair = || {
            rest.split_once(',')
                .filter(|(a, b)| !a.is_empty() && !b.is_empty())
                .with_context(|| format!("wire '{s}': {kind} takes two addresses, LOCAL,REMOTE"))
        };
        match kind {
            "unix" => {
                let (socket, peer) = pair()?;
                Ok(Self::Unix {
                    socket: socket.into(),
                    peer: peer.into(),
                })
            }
            "tap" => {
                if rest.is_empty() || rest.len() > MAX_IFNAME || rest.contains(['/', ' ', ',']) {
                    bail!("wire '{s}': a TAP name has 1 to {MAX_IFNAME} bytes, no '/', ' ' or ','");
                }
                Ok(Self::Tap { name: rest.into() })
            }
            "udp" => {
                let (local, remote) = pair()?;
                let addr = |a: &str| -> anyhow::Result<SocketAddr> {
                    a.parse()
                        .with_context(|| format!("wire '{s}': '{a}' is not an IP:PORT address"))
                };
                Ok(Self::Udp {
                    local: addr(local)?,
                    remote: addr(remote)?,
                })
            }
            "shm" => {
                let parts: Vec<&str> = rest.split(',').collect();
                let [memfd, notify, side] = parts[..] else {
                    bail!("wire '{s}': shm takes MEMFD,NOTIFY,SIDE (two descriptors, a or b)");
                };
                let fd = |a: &str, what: &str| -> anyhow::Result<i32> {
                    a.parse::<u16>().map(i32::from).with_context(|| {
                        format!("wire '{s}': {what} '{a}' is not a descriptor number")
                    })
                };
                Ok(Self::Shm {
                    memfd: fd(memfd, "MEMFD")?,
                    notify: fd(notify, "NOTIFY")?,
                    side: side
                        .parse()
                        .map_err(|e| anyhow::anyhow!("wire '{s}': {e}"))?,
                })
            }
            _ => bail!("wire '{s}': unknown kind '{kind}' (unix, tap, udp or shm)"),
        }
    }
}

impl fmt::Display for WireSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unix { socket, peer } => {
                write!(f, "unix:{},{}", socket.display(), peer.display())
            }
            Self::Tap { name } => write!(f, "tap:{name}"),
            Self::Udp { local, remote } => write!(f, "udp:{local},{remote}"),
            Self::Shm {
                memfd,
                notify,
                side,
            } => write!(f, "shm:{memfd},{notify},{side}"),
        }
    }
}

/// An open cable; each thread that sends or receives holds its own clone.
#[derive(Debug)]
pub enum Wire {
    /// A unix datagram socket bound at the NIC's path (frames come in there), an unbound one
    /// that sends, connected to the peer once the peer is there (`send_unix`), and the peer.
    Unix(UnixDatagram, UnixDatagram, PathBuf),
    /// A TAP device's file: each read is one frame, each write sends one.
    Tap(File),
    /// A UDP socket and the address it sends to.
    Udp(UdpSocket, SocketAddr),
    /// One end of a shared-memory cable.
    Shm(Arc<ShmCable>),
}

impl Wire {
    /// Opens the cable `spec` describes.
    ///
    /// # Errors
    ///
    /// A socket that cannot be bound, or a TAP that cannot be opened, with what to do about it.
    pub fn open(spec: &WireSpec) -> anyhow::Result<Self> {
        match spec {
            WireSpec::Unix { socket, peer } => Ok(Self::Unix(
                bind_unix(socket)?,
                UnixDatagram::unbound().context("wire unix: a socket to send from")?,
                peer.clone(),
            )),
            WireSpec::Tap { name } => open_tap(name).map(Self::Tap),
            WireSpec::Udp { local, remote } => {
                let sock = UdpSocket::bind(local).map_err(|e| match e.kind() {
                    ErrorKind::AddrInUse => anyhow::anyhow!(
                        "wire udp: {local} is in use (another NIC or QEMU netdev has it)"
                    ),
                    ErrorKind::AddrNotAvailable => anyhow::anyhow!(
                        "wire udp: {local} is not an address of this host (or its namespace)"
                    ),
                    _ => anyhow::Error::new(e).context(format!("wire udp: binding {local}")),
                })?;
                make_room(&sock, UDP_BUFFER);
                Ok(Self::Udp(sock, *remote))
            }
            WireSpec::Shm {
                memfd,
                notify,
                side,
            } => Ok(Self::Shm(Arc::new(ShmCable::open(*memfd, *notify, *side)?))),
        }
    }

    /// Another handle on the same cable, for another thread.
    ///
    /// # Errors
    ///
    /// The descriptor could not be duplicated.
    pub fn try_clone(&self) -> io::Result<Self> {
        Ok(match self {
            Self::Unix(sock, out, peer) => {
                Self::Unix(sock.try_clone()?, out.try_clone()?, peer.clone())
            }
            Self::Tap(file) => Self::Tap(file.try_clone()?),
            Self::Udp(sock, remote) => Self::Udp(sock.try_clone()?, *remote),
            Self::Shm(cable) => Self::Shm(cable.clone()),
        })
    }

    /// Sends one frame; `false` when it was lost (the peer is absent, refuses, or is full).
    pub fn send(&self, frame: &[u8]) -> bool {
        let sent = match self {
            Self::Unix(_, out, peer) => send_unix(out, peer, frame),
            Self::Tap(file) => (&*file).write(frame).map(drop),
            Self::Udp(sock, remote) => sock.send_to(frame, remote).map(drop),
            Self::Shm(cable) => return cable.send(&[frame]) == 1,
        };
        match sent {
            Ok(()) => true,
            Err(e) => {
                if !is_unplugged(&e) {
                    tracing::debug!("wire: sending a frame of {} bytes: {e}", frame.len());
                }
                false
            }
        }
    }

    /// Sends `frames` in order, many per system call where the cable allows; returns how many
    /// were sent (the others were lost, as [`Wire::send`] loses them).
    pub fn send_batch(&self, frames: &[&[u8]]) -> usize {
        if let Self::Shm(cable) = self {
            return cable.send(frames);
        }
        let Self::Unix(_, out, peer) = self else {
            return frames.iter().filter(|f| self.send(f)).count();
        };
        let (mut at, mut sent, mut reconnected) = (0, 0, false);
        while at < frames.len() {
            match batch::send_many(out, &frames[at..]) {
                Ok(n) if n > 0 => {
                    at += n;
                    sent += n;
                }
                Err(e) if !reconnected && needs_connect(&e) => {
                    // At most once a batch: with the peer absent, each frame is then tried
                    // once and lost.
                    reconnected = true;
                    if let Err(e) = out.connect(peer) {
                        if !is_unplugged(&e) {
                            tracing::debug!("wire: connecting to {}: {e}", peer.display());
                        }
                    }
                }
                other => {
                    if let Err(e) = other {
                        if !is_unplugged(&e) && !needs_connect(&e) {
                            tracing::debug!("wire: sending a batch of frames: {e}");
                        }
                    }
                    at += 1; // this frame is lost
                }
            }
        }
        sent
    }

    /// Receives one frame or more into `batch`, waiting for the first; how many. A unix cable
    /// takes all that is queued, up to a batch, in one call; the others a frame at a time.
    ///
    /// # Errors
    ///
    /// As [`Wire::recv`].
    pub fn recv_batch(&self, batch: &mut RecvBatch) -> io::Result<usize> {
        match self {
            Self::Unix(sock, ..) => return batch::recv_many(sock, batch),
            Self::Shm(cable) => return cable.recv_batch(batch),
            _ => {}
        }
        let n = self.recv(batch.first())?;
        batch.set_first(n);
        Ok(1)
    }

    /// Receives one frame into `buf`, waiting for it; its length. A UDP wire takes datagrams
    /// from its REMOTE only: anyone else who sends to LOCAL is not on this cable.
    ///
    /// # Errors
    ///
    /// The cable failed for good (a receive error other than an interrupted call, or a
    /// refused datagram, which a UDP socket reports when a former frame found no listener).
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let got = match self {
                Self::Unix(sock, ..) => sock.recv(buf),
                Self::Tap(file) => (&*file).read(buf),
                Self::Udp(sock, remote) => match sock.recv_from(buf) {
                    Ok((_, from)) if from != *remote => continue,
                    other => other.map(|(n, _)| n),
                },
                Self::Shm(cable) => cable.recv(buf),
            };
            match got {
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::Interrupted | ErrorKind::ConnectionRefused
                    ) => {}
                other => return other,
            }
        }
    }
}

/// Sends `frame` to `peer` on `out`, connected to it. A `sendto` with the peer's path looks the
/// path up on every frame: 40 % of the device thread's time in sending, in a profile of
/// ib_write_bw at MTU 1500. The first send connects; so does the one after the peer went away
/// (the kernel then disconnected the socket: `ECONNREFUSED`, or `ENOTCONN` on the next send),
/// so a peer bound again at the path takes the frame. The sending socket is not the bound one:
/// a connected socket takes datagrams only from its peer, and the bound one takes them from
/// whoever is at the other end now.
fn send_unix(out: &UnixDatagram, peer: &Path, frame: &[u8]) -> io::Result<()> {
    match out.send(frame) {
        Err(e) if needs_connect(&e) => {
            out.connect(peer)?;
            out.send(frame).map(drop)
        }
        sent => sent.map(drop),
    }
}

/// Whether a send on the sending socket of a unix cable failed for want of a connection: never
/// made (`ENOTCONN`) or broken by the peer's going away (`ECONNREFUSED`).
fn needs_connect(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ENOTCONN) || e.kind() == ErrorKind::ConnectionRefused
}

/// Bytes of UDP socket buffer each way. A datagram socket cannot make its sender wait as a unix
/// one does: what arrives while the receive buffer is full is dropped (the namespace's
/// `RcvbufErrors`), and RC must retransmit it. This holds a full perftest window of 64 KiB
/// WRITEs (128 of them, in Ethernet frames, counted at the kernel's per-datagram truesize).
const UDP_BUFFER: libc::c_int = 32 << 20;

/// Gives `sock` buffers of `bytes` each way: beyond `net.core.rmem_max`/`wmem_max` where the
/// process may (`CAP_NET_ADMIN`: `SO_RCVBUFFORCE`), else as much as they allow.
fn make_room(sock: &UdpSocket, bytes: libc::c_int) {
    for (force, plain) in [
        (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
        (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
    ] {
        let set = |opt| {
            // SAFETY: `sock` is an open socket; the option's value is a `c_int` that lives
            // across the call, and its size is given.
            unsafe {
                libc::setsockopt(
                    sock.as_raw_fd(),
                    libc::SOL_SOCKET,
                    opt,
                    (&raw const bytes).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                )
            }
        };
        if set(force) != 0 && set(plain) != 0 {
            tracing::warn!("wire udp: socket buffer: {}", io::Error::last_os_error());
        }
    }
}

/// A send error that means the other end is not there (a frame lost, not a failure).
fn is_unplugged(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::NotFound | ErrorKind::ConnectionRefused | ErrorKind::WouldBlock
    ) || e.raw_os_error() == Some(libc::EIO) // a TAP whose link is down
        || e.raw_os_error() == Some(libc::ENOBUFS)
}

/// Binds a unix datagram socket at `path`, replacing a stale socket file.
pub(crate) fn bind_unix(path: &Path) -> anyhow::Result<UnixDatagram> {
    if path.exists() {
        std::fs::remove_file(path).with_context(|| format!("removing stale {}", path.display()))?;
    }
    UnixDatagram::bind(path).with_context(|| format!("binding {}", path.display()))
}

/// `TUNSETIFF` (`_IOW('T', 202, int)`, linux/if_tun.h).
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
/// `IFF_TAP` and `IFF_NO_PI` (linux/if_tun.h): Ethernet frames without the packet-info header.
const IFF_TAP: libc::c_short = 0x0002;
const IFF_NO_PI: libc::c_short = 0x1000;

/// The `struct ifreq` of `TUNSETIFF`: the name and the flags (the rest of its union unused).
#[repr(C)]
struct IfReq {
    name: [libc::c_char; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

/// Opens (and, if it does not exist, creates) TAP device `name` for Ethernet frames.
fn open_tap(name: &str) -> anyhow::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/net/tun")
        .map_err(|e| match e.kind() {
            ErrorKind::NotFound => anyhow::anyhow!(
                "wire tap:{name}: /dev/net/tun does not exist (load the tun module, or give a \
                 container the device)"
            ),
            ErrorKind::PermissionDenied => {
                anyhow::anyhow!("wire tap:{name}: /dev/net/tun: permission denied")
            }
            _ => anyhow::Error::new(e).context(format!("wire tap:{name}: opening /dev/net/tun")),
        })?;
    let mut req = IfReq {
        name: [0; libc::IFNAMSIZ],
        flags: IFF_TAP | IFF_NO_PI,
        _pad: [0; 22],
    };
    // `WireSpec` bounds the name to IFNAMSIZ - 1 bytes; the rest stays NUL.
    for (to, from) in req.name.iter_mut().zip(name.bytes().take(MAX_IFNAME)) {
        *to = from as libc::c_char;
    }
    // SAFETY: `file` is an open /dev/net/tun; TUNSETIFF reads and writes a `struct ifreq`, whose
    // name and flags `IfReq` lays out as the kernel does (and which it is as large as), and
    // `req` lives across the call.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), TUNSETIFF, &raw mut req) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        bail!(match e.raw_os_error() {
            Some(libc::EPERM) => format!(
                "wire tap:{name}: creating or attaching the TAP needs CAP_NET_ADMIN, or a TAP made \
                 for this user beforehand (ip tuntap add {name} mode tap user $USER)"
            ),
            Some(libc::EBUSY) => format!("wire tap:{name}: the TAP is in use by another process"),
            Some(libc::EINVAL) => format!(
                "wire tap:{name}: {name} exists and is not a single-queue TAP without \
                 packet information ({e})"
            ),
            _ => format!("wire tap:{name}: TUNSETIFF: {e}"),
        });
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_print_back() {
        for s in [
            "unix:/tmp/a.port,/tmp/b.port",
            "tap:fer0",
            "udp:10.0.0.1:7000,10.0.0.2:7000",
            "udp:[::1]:7000,[::1]:7001",
            "shm:3,4,a",
            "shm:10,11,b",
        ] {
            let spec: WireSpec = s.parse().expect(s);
            assert_eq!(spec.to_string(), s);
        }
        assert_eq!(
            "tap:fer0".parse::<WireSpec>().expect("tap"),
            WireSpec::Tap {
                name: "fer0".into()
            }
        );
    }

    #[test]
    fn bad_specs_say_what_is_wrong() {
        for (s, why) in [
            ("fer0", "expected unix:SOCKET,PEER"),
            ("eth:x", "unknown kind 'eth'"),
            ("unix:/tmp/a", "two addresses"),
            ("udp:10.0.0.1:7000,", "two addresses"),
            (
                "udp:10.0.0.1,10.0.0.2:7000",
                "'10.0.0.1' is not an IP:PORT address",
            ),
            ("tap:", "1 to 15 bytes"),
            ("tap:a-name-far-too-long", "1 to 15 bytes"),
            ("tap:a/b", "no '/'"),
            ("shm:3,4", "shm takes MEMFD,NOTIFY,SIDE"),
            ("shm:3,4,a,5", "shm takes MEMFD,NOTIFY,SIDE"),
            ("shm:x,4,a", "MEMFD 'x' is not a descriptor number"),
            ("shm:3,-4,a", "NOTIFY '-4' is not a descriptor number"),
            ("shm:3,4,c", "a side is a or b, not 'c'"),
        ] {
            let err = s.parse::<WireSpec>().expect_err(s).to_string();
            assert!(err.contains(why), "{s}: {err}");
        }
    }

    #[test]
    fn udp_carries_one_frame_per_datagram_both_ways() {
        let sa = UdpSocket::bind("127.0.0.1:0").expect("bind a");
        let sb = UdpSocket::bind("127.0.0.1:0").expect("bind b");
        let (la, lb) = (sa.local_addr().expect("a"), sb.local_addr().expect("b"));
        let (a, b) = (Wire::Udp(sa, lb), Wire::Udp(sb, la));
        let frame = [0x5au8; 1514];
        assert!(b.send(&frame));
        let mut buf = [0u8; 9216];
        assert_eq!(a.recv(&mut buf).expect("recv"), frame.len());
        assert_eq!(&buf[..frame.len()], &frame);
        assert!(a.try_clone().expect("clone").send(&frame[..60]));
        assert_eq!(b.recv(&mut buf).expect("recv"), 60);
        // A datagram from anyone but the other end is not a frame of this cable.
        let stranger = UdpSocket::bind("127.0.0.1:0").expect("bind");
        stranger.send_to(&[0xee; 60], la).expect("send");
        assert!(b.send(&frame[..64]));
        assert_eq!(
            a.recv(&mut buf).expect("recv"),
            64,
            "the stranger's datagram was taken"
        );
    }

    /// A fresh directory for a test's unix cable, and the paths of its ends `a` and `b`.
    fn unix_paths(test: &str) -> (PathBuf, PathBuf, PathBuf) {
        let dir = std::env::temp_dir().join(format!("ferroce-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let (a, b) = (dir.join("a.port"), dir.join("b.port"));
        (dir, a, b)
    }

    /// The end of a unix cable bound at `me`, sending to `peer`.
    fn unix_end(me: &Path, peer: &Path) -> Wire {
        let spec = WireSpec::Unix {
            socket: me.into(),
            peer: peer.into(),
        };
        Wire::open(&spec).expect("a unix cable's end")
    }

    #[test]
    fn a_unix_cable_waits_for_its_peer_and_follows_it_when_it_comes_back() {
        let (dir, pa, pb) = unix_paths("follow");
        let a = unix_end(&pa, &pb);
        let frame = [0x5au8; 1514];
        assert!(!a.send(&frame), "no peer yet: the frame is lost");
        let mut buf = [0u8; 9216];
        for round in 0..2 {
            // The peer binds (again, in round 1: a new socket at the same path).
            let b = unix_end(&pb, &pa);
            assert!(
                a.send(&frame[..100 + round]),
                "round {round}: a's frame was lost"
            );
            assert_eq!(b.recv(&mut buf).expect("recv"), 100 + round);
            assert!(b.send(&frame[..60]), "round {round}: b's frame was lost");
            assert_eq!(a.recv(&mut buf).expect("recv"), 60);
        }
        // The bound socket takes datagrams from anyone: whoever is at the other end now.
        let stranger = UnixDatagram::unbound().expect("stranger");
        stranger.send_to(&frame[..70], &pa).expect("to a");
        assert_eq!(a.recv(&mut buf).expect("recv"), 70);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_unix_cable_sends_a_batch_in_order_or_loses_it_without_a_peer() {
        let (dir, pa, pb) = unix_paths("batch");
        let a = unix_end(&pa, &pb);
        let frames: Vec<Vec<u8>> = (0..200usize).map(|i| vec![i as u8; 60 + i]).collect();
        let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        assert_eq!(a.send_batch(&refs), 0, "no peer: every frame is lost");
        let b = unix_end(&pb, &pa);
        // More than the peer's queue holds (net.unix.max_dgram_qlen): the sender waits for
        // the receiver, which takes them on another thread.
        let receiver = std::thread::spawn(move || {
            let mut batch = RecvBatch::new(2048);
            let mut got = Vec::new();
            while got.len() < 200 {
                let n = b.recv_batch(&mut batch).expect("recv");
                got.extend(batch.frames(n).map(<[u8]>::to_vec));
            }
            got
        });
        assert_eq!(a.send_batch(&refs), 200);
        assert_eq!(receiver.join().ok(), Some(frames));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Moves this test's thread into a network namespace of its own (the TAPs it makes are
    /// gone with it); `false` where that is not permitted (not root).
    fn private_netns() -> bool {
        // SAFETY: `unshare` changes only the calling thread's network namespace.
        let rc = unsafe { libc::unshare(libc::CLONE_NEWNET) };
        if rc != 0 {
            eprintln!(
                "skipped: unshare(CLONE_NEWNET): {}",
                io::Error::last_os_error()
            );
        }
        rc == 0
    }

    #[test]
    fn a_tap_is_created_and_held_by_one_port() {
        if !private_netns() {
            return;
        }
        let spec: WireSpec = "tap:fer-test0".parse().expect("spec");
        let wire = Wire::open(&spec).expect("a missing TAP is created");
        // SAFETY: The name is a NUL-terminated string.
        assert_ne!(unsafe { libc::if_nametoindex(c"fer-test0".as_ptr()) }, 0);
        // The link is down: a frame sent is lost, not an error.
        assert!(!wire.send(&[0u8; 60]));
        let err = Wire::open(&spec).expect_err("in use").to_string();
        assert!(err.contains("in use by another process"), "{err}");
        drop(wire);
        // Not persistent: closing it removed it, and it can be made again.
        Wire::open(&spec).expect("again");
    }

    /// Brings link `name` up (in this thread's network namespace).
    fn link_up(name: &std::ffi::CStr) {
        // SAFETY: a datagram socket for the ioctl, closed below.
        let sock = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0) };
        assert!(sock >= 0, "socket: {}", io::Error::last_os_error());
        // SAFETY: ifreq is plain data; all zeroes is a valid value.
        let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
        for (dst, src) in req.ifr_name.iter_mut().zip(name.to_bytes()) {
            *dst = *src as libc::c_char;
        }
        req.ifr_ifru.ifru_flags = (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        // SAFETY: SIOCSIFFLAGS reads the ifreq it is given.
        let rc = unsafe { libc::ioctl(sock, libc::SIOCSIFFLAGS, &req) };
        assert_eq!(rc, 0, "SIOCSIFFLAGS: {}", io::Error::last_os_error());
        // SAFETY: the socket is ours.
        unsafe { libc::close(sock) };
    }

    /// Waits up to 5 s for `fd` to be readable.
    fn readable(fd: i32) -> bool {
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd, ours.
        unsafe { libc::poll(&mut pfd, 1, 5000) == 1 }
    }

    #[test]
    fn a_tap_carries_frames_both_ways() {
        if !private_netns() {
            return;
        }
        let wire = Wire::open(&"tap:fer-test1".parse().expect("spec")).expect("TAP");
        link_up(c"fer-test1");
        // SAFETY: The name is a NUL-terminated string.
        let ifindex = unsafe { libc::if_nametoindex(c"fer-test1".as_ptr()) };
        let all = (libc::ETH_P_ALL as u16).to_be();
        // SAFETY: a packet socket, closed at the end.
        let pkt = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, i32::from(all)) };
        assert!(pkt >= 0, "AF_PACKET: {}", io::Error::last_os_error());
        // SAFETY: sockaddr_ll is plain data.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = all;
        sll.sll_ifindex = ifindex as i32;
        sll.sll_halen = 6;
        let sll_len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        // SAFETY: binds to the address above.
        let rc = unsafe { libc::bind(pkt, std::ptr::addr_of!(sll).cast(), sll_len) };
        assert_eq!(rc, 0, "bind: {}", io::Error::last_os_error());
        // An experimental ethertype (0x88b5): no protocol of the kernel answers it.
        let frame = |tag: u8| {
            let mut f = vec![0xff; 6];
            f.extend_from_slice(&[0x02, 0, 0, 0, 0, tag, 0x88, 0xb5]);
            f.resize(60, tag);
            f
        };
        let mut buf = [0u8; 9216];
        // The port's frame reaches the interface (the bridge a TAP is enslaved to hears it).
        assert!(wire.send(&frame(1)), "the TAP took no frame");
        let mut heard = false;
        while !heard && readable(pkt) {
            // SAFETY: reads into buf, within its length.
            let n = unsafe { libc::recv(pkt, buf.as_mut_ptr().cast(), buf.len(), 0) };
            heard = n > 0 && buf[..n as usize] == frame(1)[..];
        }
        assert!(heard, "the interface did not receive the port's frame");
        // A frame sent on the interface reaches the port.
        let out = frame(2);
        // SAFETY: sends `out` to the address above.
        let n = unsafe {
            libc::sendto(
                pkt,
                out.as_ptr().cast(),
                out.len(),
                0,
                std::ptr::addr_of!(sll).cast(),
                sll_len,
            )
        };
        assert_eq!(
            n,
            out.len() as isize,
            "sendto: {}",
            io::Error::last_os_error()
        );
        let Wire::Tap(file) = &wire else {
            unreachable!("a TAP wire")
        };
        let mut got = false;
        while !got && readable(file.as_raw_fd()) {
            let n = wire.recv(&mut buf).expect("recv");
            got = buf[..n] == out[..];
        }
        assert!(got, "the port did not receive the interface's frame");
        // SAFETY: the socket is ours.
        unsafe { libc::close(pkt) };
    }

    #[test]
    fn a_udp_address_in_use_is_named() {
        let first = UdpSocket::bind("127.0.0.1:0").expect("bind");
        let taken = first.local_addr().expect("addr");
        let err = Wire::open(&WireSpec::Udp {
            local: taken,
            remote: "127.0.0.1:9".parse().expect("addr"),
        })
        .expect_err("in use")
        .to_string();
        assert!(err.contains(&format!("{taken} is in use")), "{err}");
        let err = Wire::open(&WireSpec::Udp {
            local: "192.0.2.77:7000".parse().expect("addr"),
            remote: "127.0.0.1:9".parse().expect("addr"),
        })
        .expect_err("not ours")
        .to_string();
        assert!(err.contains("not an address of this host"), "{err}");
    }
}
