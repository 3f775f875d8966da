// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The converged port over real unix datagram sockets: RoCE frames for the port's MAC go to the
//! engine, everything else passes through both ways, and a missing peer loses frames quietly.
//! With several functions, the port's embedded switch carries frames between them inside the
//! NIC and everything else to the wire; RC traffic between two functions never leaves.

mod common;

use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use common::roce::*;
use common::CqeStatus;
use ferroce_hw::*;
use ferroce_nic::device::DeviceConfig;
use ferroce_nic::engine::faults::{FaultConfig, FaultControl};
use ferroce_nic::engine::frame::{self, Route};
use ferroce_nic::engine::wire::{FrameSink, PortEnd, RxQueue};
use ferroce_nic::function::{Function, FunctionParts};
use ferroce_nic::port::{
    Port, PortConfig, PortStats, Source, Switch, SwitchSink, Vport, Wire, WireSpec,
};

fn wait(mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < Duration::from_secs(5), "timed out");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A function of MAC `mac` on a started port whose netdev side is `dir`'s `nic-netdev` (QEMU's
/// at `qemu`) and whose segment side is `wire`: the engine's sink, the port's counts and the
/// function.
fn start_port(
    dir: &std::path::Path,
    mac: [u8; 6],
    wire: WireSpec,
) -> (SwitchSink, Arc<PortStats>, Arc<Function>) {
    let stats = Arc::new(PortStats::default());
    let port = Port::bind(
        PortConfig {
            netdev_socket: Some(dir.join("nic-netdev")),
            netdev_peer: Some(dir.join("qemu")),
            wire: Some(wire),
        },
        stats.clone(),
    )
    .expect("bind");
    let sink = port.sink(0);
    let nic = Function::with_port(
        DeviceConfig {
            mac,
            ..DeviceConfig::default()
        },
        Box::new(ferroce_nic::engine::wire::NullSink),
        FaultControl::new(FaultConfig::default()),
        stats.clone(),
    )
    .expect("a function");
    port.spawn(std::slice::from_ref(&nic)).expect("spawn");
    (sink, stats, nic)
}

/// An ARP broadcast, as from the segment.
fn arp_broadcast() -> Vec<u8> {
    [
        [0xff; 6].as_slice(),
        &[2, 0, 0, 0, 0, 1],
        &[0x08, 0x06],
        &[0; 28],
    ]
    .concat()
}

#[test]
fn steering_and_pass_through() {
    let dir = std::env::temp_dir().join(format!("ferroce-port-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = |name: &str| -> PathBuf { dir.join(name) };
    let mac = [0x52, 0x54, 0, 0, 0, 9];
    // The VM's netdev and the switch port, as QEMU and the switch would bind them.
    let qemu = UnixDatagram::bind(path("qemu")).expect("qemu");
    let switch = UnixDatagram::bind(path("switch")).expect("switch");
    for s in [&qemu, &switch] {
        s.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
    }
    let (mut sink, stats, _nic) = start_port(
        &dir,
        mac,
        WireSpec::Unix {
            socket: path("nic-wire"),
            peer: path("switch"),
        },
    );

    let mut buf = [0u8; 9216];
    // ARP broadcast from the segment: to the guest's virtio-net.
    let arp = arp_broadcast();
    switch.send_to(&arp, path("nic-wire")).expect("send");
    let n = qemu.recv(&mut buf).expect("arp at the guest");
    assert_eq!(&buf[..n], &arp[..]);
    // Anything from the guest: to the segment.
    qemu.send_to(b"guest frame bytes", path("nic-netdev"))
        .expect("send");
    let n = switch.recv(&mut buf).expect("frame on the segment");
    assert_eq!(&buf[..n], b"guest frame bytes");
    // A RoCE frame for our MAC: to the engine, not to the guest.
    let roce = roce_to(mac);
    switch.send_to(&roce, path("nic-wire")).expect("send");
    wait(|| stats.to_engine.load(Ordering::Relaxed) == 1);
    // The engine's frames leave through the wire socket when its round ends.
    sink.send(&roce);
    sink.flush();
    let n = switch.recv(&mut buf).expect("engine frame on the segment");
    assert_eq!(&buf[..n], &roce[..]);
    // A missing peer loses the frame and nothing else happens.
    drop(qemu);
    std::fs::remove_file(path("qemu")).expect("unplug");
    switch.send_to(&arp, path("nic-wire")).expect("send");
    wait(|| stats.lost.load(Ordering::Relaxed) == 1);
    assert_eq!(stats.to_host.load(Ordering::Relaxed), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The same port on a shared-memory cable (`--wire shm`), the far end another NIC's: frames
/// steer as on sockets both ways, the engine's included.
#[test]
fn a_port_on_a_shared_memory_cable_steers_as_on_sockets() {
    use ferroce_nic::port::batch::RecvBatch;
    use ferroce_nic::port::shm::{ShmCable, Side};
    use std::os::fd::{FromRawFd, IntoRawFd};

    let dir = std::env::temp_dir().join(format!("ferroce-port-shm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = |name: &str| -> PathBuf { dir.join(name) };
    let mac = [0x52, 0x54, 0, 0, 0, 9];
    let qemu = UnixDatagram::bind(path("qemu")).expect("qemu");
    qemu.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    // SAFETY: the name is a valid C string; the result is checked.
    let fd = unsafe { libc::memfd_create(c"ferroce-port-test".as_ptr(), 0) };
    assert!(fd >= 0, "memfd_create");
    // SAFETY: a fresh descriptor of ours.
    let memfd = unsafe { std::fs::File::from_raw_fd(fd) };
    let (ours, theirs) = UnixDatagram::pair().expect("socketpair");
    let dup = |f: &std::fs::File| f.try_clone().expect("dup").into_raw_fd();
    let far = ShmCable::open(dup(&memfd), theirs.into_raw_fd(), Side::B).expect("far end");
    let (mut sink, stats, _nic) = start_port(
        &dir,
        mac,
        WireSpec::Shm {
            memfd: dup(&memfd),
            notify: ours.into_raw_fd(),
            side: Side::A,
        },
    );

    let mut buf = [0u8; 9216];
    let mut batch = RecvBatch::new(9216);
    let arp = arp_broadcast();
    assert_eq!(far.send(&[&arp]), 1);
    let n = qemu.recv(&mut buf).expect("arp at the guest");
    assert_eq!(&buf[..n], &arp[..]);
    qemu.send_to(b"guest frame bytes", path("nic-netdev"))
        .expect("send");
    let n = far.recv_batch(&mut batch).expect("frame on the cable");
    assert_eq!(
        batch.frames(n).collect::<Vec<_>>(),
        [&b"guest frame bytes"[..]]
    );
    let roce = roce_to(mac);
    assert_eq!(far.send(&[&roce]), 1);
    wait(|| stats.to_engine.load(Ordering::Relaxed) == 1);
    sink.send(&roce);
    sink.flush();
    let n = far
        .recv_batch(&mut batch)
        .expect("engine frame on the cable");
    assert_eq!(batch.frames(n).collect::<Vec<_>>(), [&roce[..]]);
    assert_eq!(stats.lost.load(Ordering::Relaxed), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

const MAC_A: [u8; 6] = [0x52, 0x54, 0, 0, 0, 1];
const MAC_B: [u8; 6] = [0x52, 0x54, 0, 0, 0, 2];

struct Bench {
    dir: PathBuf,
    switch: Arc<OnceLock<Switch>>,
    /// The far end of the uplink.
    lan: UnixDatagram,
    /// Each function's VM side of its netdev.
    qemu: [UnixDatagram; 2],
    rx: [Arc<RxQueue>; 2],
    stats: [Arc<PortStats>; 2],
}

impl Bench {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("ferroce-fn-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let path = |n: &str| dir.join(n);
        let lan = UnixDatagram::bind(path("lan")).expect("lan");
        let uplink = Wire::open(&WireSpec::Unix {
            socket: path("uplink"),
            peer: path("lan"),
        })
        .expect("uplink");
        let qemu = ["qemu-a", "qemu-b"].map(|n| UnixDatagram::bind(path(n)).expect("qemu"));
        for s in qemu.iter().chain([&lan]) {
            s.set_read_timeout(Some(Duration::from_secs(5)))
                .expect("timeout");
        }
        let rx = [RxQueue::new(), RxQueue::new()];
        let stats: [Arc<PortStats>; 2] = Default::default();
        let vports = [(MAC_A, "a"), (MAC_B, "b")]
            .into_iter()
            .enumerate()
            .map(|(i, (mac, n))| {
                let sock = UnixDatagram::bind(path(&format!("nic-{n}"))).expect("netdev");
                let parts = FunctionParts {
                    port_rx: rx[i].clone(),
                    ..FunctionParts::alone().expect("an eventfd")
                };
                let peer = path(&format!("qemu-{n}"));
                Vport::new(mac, parts, stats[i].clone(), Some((sock, peer)))
            })
            .collect();
        let switch = Arc::new(OnceLock::new());
        assert!(switch.set(Switch::new(Some(uplink), vports)).is_ok());
        Self {
            dir,
            switch,
            lan,
            qemu,
            rx,
            stats,
        }
    }

    fn forward(&self, from: Source, frame: &[u8]) {
        self.switch.get().expect("switch").forward(from, frame);
    }

    /// Whether a frame is waiting at `sock` (without waiting for one).
    fn waiting(sock: &UnixDatagram) -> Option<Vec<u8>> {
        sock.set_nonblocking(true).expect("nonblocking");
        let mut buf = [0u8; 9216];
        let got = sock.recv(&mut buf).ok().map(|n| buf[..n].to_vec());
        sock.set_nonblocking(false).expect("blocking");
        got
    }
}

impl Drop for Bench {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn eth(dmac: [u8; 6], smac: [u8; 6], body: &[u8]) -> Vec<u8> {
    [dmac.as_slice(), &smac, &[0x08, 0x06], body].concat()
}

fn roce_to(dmac: [u8; 6]) -> Vec<u8> {
    let route = Route {
        smac: [2, 0, 0, 0, 0, 9],
        dmac,
        vlan: None,
        v1: false,
        sgid: [0; 16],
        dgid: [0; 16],
        traffic_class: 0,
        hop_limit: 64,
        flow_label: 0,
    };
    let mut roce = Vec::new();
    frame::build(
        &route,
        &[0x11, 0, 0xff, 0xff, 0, 0, 0, 2, 0, 0, 0, 1, 0x1f, 0, 0, 1],
        &mut roce,
    );
    roce
}

#[test]
fn the_switch_steers_by_destination_mac() {
    let b = Bench::new("steer");
    let mut buf = [0u8; 9216];
    // From the wire, RoCE for B's MAC: B's engine only.
    b.forward(Source::Uplink, &roce_to(MAC_B));
    assert_eq!((b.rx[0].len(), b.rx[1].len()), (0, 1));
    // From the wire, a broadcast: both VMs.
    let arp = eth([0xff; 6], [2, 0, 0, 0, 0, 9], &[0; 28]);
    b.forward(Source::Uplink, &arp);
    for q in &b.qemu {
        let n = q.recv(&mut buf).expect("broadcast at each VM");
        assert_eq!(&buf[..n], &arp[..]);
    }
    // From the wire, unicast for no function: the PF's VM.
    let stray = eth([2, 0, 0, 0, 0, 0x77], [2, 0, 0, 0, 0, 9], &[1; 28]);
    b.forward(Source::Uplink, &stray);
    let n = b.qemu[0].recv(&mut buf).expect("stray at the PF");
    assert_eq!(&buf[..n], &stray[..]);
    assert_eq!(Bench::waiting(&b.qemu[1]), None);
    // From A's VM to B's MAC: B's VM, inside the NIC; not on the wire.
    let to_b = eth(MAC_B, MAC_A, &[2; 28]);
    b.forward(Source::Netdev(0), &to_b);
    let n = b.qemu[1].recv(&mut buf).expect("A to B");
    assert_eq!(&buf[..n], &to_b[..]);
    assert_eq!(
        Bench::waiting(&b.lan),
        None,
        "a frame between functions left the NIC"
    );
    assert_eq!(b.stats[0].switched.load(Ordering::Relaxed), 1);
    // From A's VM, a broadcast: B's VM and the wire, not back to A.
    let bcast = eth([0xff; 6], MAC_A, &[3; 28]);
    b.forward(Source::Netdev(0), &bcast);
    let n = b.qemu[1].recv(&mut buf).expect("broadcast at B");
    assert_eq!(&buf[..n], &bcast[..]);
    let n = b.lan.recv(&mut buf).expect("broadcast on the wire");
    assert_eq!(&buf[..n], &bcast[..]);
    assert_eq!(
        Bench::waiting(&b.qemu[0]),
        None,
        "the sender got its broadcast back"
    );
    // From B's engine to a MAC elsewhere: the wire.
    let out = roce_to([2, 0, 0, 0, 0, 0x55]);
    let mut sink = SwitchSink::new(b.switch.clone(), 1);
    sink.send(&out);
    sink.flush();
    let n = b.lan.recv(&mut buf).expect("engine frame on the wire");
    assert_eq!(&buf[..n], &out[..]);
    assert_eq!(b.stats[1].switched.load(Ordering::Relaxed), 0);
}

#[test]
fn rc_between_two_functions_stays_inside_the_nic() {
    let b = Bench::new("rc");
    let port = |i: usize| PortEnd {
        sink: Box::new(SwitchSink::new(b.switch.clone(), i)),
        rx: b.rx[i].clone(),
    };
    let conn = Conn {
        mtu: MTU_4096,
        ..Conn::default()
    };
    let mut p = Pair::with_ports(4 * MIB, conn, QpType::Rc, port(0), port(1));
    let len = 256 << 10;
    let data = p.a.fill(p.a.buf, len, 7);
    let (b_buf, b_key) = (p.b.buf, p.b.key);
    let a_buf = p.a.buf;
    let seg = rdma_seg(b_buf, b_key);
    p.qa.post(&mut p.a, 1, WR_RDMA_WRITE, a_buf, len as u32, &seg, 0);
    let (cqes, _) = p.wait_cqes(1, 0);
    assert_eq!(cqes[0].wc_status(), WcStatus::Success);
    assert_eq!(p.b.g.read(b_buf, len), data);
    let switched = |i: usize| b.stats[i].switched.load(Ordering::Relaxed);
    // 64 requests of 4 KiB one way, their ACKs the other.
    assert!(switched(0) >= 64, "A switched {}", switched(0));
    assert!(switched(1) >= 1, "B switched {}", switched(1));
    assert_eq!(
        Bench::waiting(&b.lan),
        None,
        "a frame between functions left the NIC"
    );
}
