// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The converged port over real unix datagram sockets: RoCE frames for the port's MAC go to the
//! engine, everything else passes through both ways, and a missing peer loses frames quietly.

use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferroce_nic::device::DeviceConfig;
use ferroce_nic::engine::faults::{FaultConfig, FaultControl};
use ferroce_nic::engine::frame::{self, Route};
use ferroce_nic::engine::wire::FrameSink;
use ferroce_nic::port::{Port, PortConfig, PortStats, WireSpec};
use ferroce_nic::server::Nic;

fn wait(mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < Duration::from_secs(5), "timed out");
        std::thread::sleep(Duration::from_millis(5));
    }
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
    let stats = Arc::new(PortStats::default());
    let port = Port::bind(
        PortConfig {
            netdev_socket: Some(path("nic-netdev")),
            netdev_peer: Some(path("qemu")),
            wire: Some(WireSpec::Unix {
                socket: path("nic-wire"),
                peer: path("switch"),
            }),
        },
        stats.clone(),
    )
    .expect("bind");
    let mut sink = port.sink().expect("sink").expect("wire side");
    let nic = Nic::with_port(
        DeviceConfig {
            mac,
            ..DeviceConfig::default()
        },
        Box::new(ferroce_nic::engine::wire::NullSink),
        FaultControl::new(FaultConfig::default()),
        stats.clone(),
    );
    port.spawn(nic.clone()).expect("spawn");

    let mut buf = [0u8; 9216];
    // ARP broadcast from the segment: to the guest's virtio-net.
    let arp = [
        [0xff; 6].as_slice(),
        &[2, 0, 0, 0, 0, 1],
        &[0x08, 0x06],
        &[0; 28],
    ]
    .concat();
    switch.send_to(&arp, path("nic-wire")).expect("send");
    let n = qemu.recv(&mut buf).expect("arp at the guest");
    assert_eq!(&buf[..n], &arp[..]);
    // Anything from the guest: to the segment.
    qemu.send_to(b"guest frame bytes", path("nic-netdev"))
        .expect("send");
    let n = switch.recv(&mut buf).expect("frame on the segment");
    assert_eq!(&buf[..n], b"guest frame bytes");
    // A RoCE frame for our MAC: to the engine, not to the guest.
    let route = Route {
        smac: [2, 0, 0, 0, 0, 1],
        dmac: mac,
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
    switch.send_to(&roce, path("nic-wire")).expect("send");
    wait(|| stats.to_engine.load(Ordering::Relaxed) == 1);
    // The engine's frames leave through the wire socket.
    sink.send(&roce);
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
