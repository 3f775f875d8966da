// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The port's packet capture (`serve --pcap`): every frame the engine sends and receives, once,
//! with its direction, as many as the counters count; dropped frames of the fault injection
//! captured with their comment. `FERROCE_CAPTURE_OUT=DIR` keeps the files (the harness's
//! capture checks are tried on them).

mod common;

use std::fs::File;
use std::path::PathBuf;

use common::roce::*;
use common::CqeStatus;
use ferroce_hw::*;
use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketOption;
use pcap_file::pcapng::{Block, PcapNgReader};

/// (outbound, comment) of every packet of a capture.
fn packets(path: &PathBuf) -> Vec<(bool, Option<String>)> {
    let mut reader = PcapNgReader::new(File::open(path).expect("capture")).expect("pcapng");
    let mut out = Vec::new();
    while let Some(block) = reader.next_block() {
        if let Block::EnhancedPacket(epb) = block.expect("block") {
            let mut packet = (false, None);
            for option in &epb.options {
                match option {
                    EnhancedPacketOption::Flags(f) => packet.0 = f & 3 == 2,
                    EnhancedPacketOption::Comment(c) => packet.1 = Some(c.to_string()),
                    _ => {}
                }
            }
            out.push(packet);
        }
    }
    out
}

/// Stops `node`'s capture and returns its packets (the file removed unless `keep`).
fn stop(node: &Node, path: &PathBuf, keep: bool) -> Vec<(bool, Option<String>)> {
    node.trace.capture.stop().expect("stop");
    let captured = packets(path);
    if !keep {
        let _ = std::fs::remove_file(path);
    }
    captured
}

fn capture_path(name: &str) -> (PathBuf, bool) {
    match std::env::var_os("FERROCE_CAPTURE_OUT") {
        Some(dir) => (PathBuf::from(dir).join(name), true),
        None => (
            std::env::temp_dir().join(format!("{}-{name}", std::process::id())),
            false,
        ),
    }
}

#[test]
fn every_frame_is_captured_once_with_its_direction() {
    let mut p = Pair::new(MIB, Conn::default());
    let (path, keep) = capture_path("rc-a.pcapng");
    p.a.trace.capture.start(&path, p.a.mac).expect("capture");
    // SEND with immediate, WRITE, READ and an atomic: BTH, ImmDt, RETH, AETH, AtomicETH.
    let (src, dst) = (p.a.buf, p.b.buf + 0x8000);
    p.a.fill(src, 3000, 1);
    p.qb.post_recv(&mut p.b, 1, dst, 4096);
    p.qa.post(&mut p.a, 1, WR_SEND_WITH_IMM, src, 3000, &[0; 40], 7);
    p.qa.post(
        &mut p.a,
        2,
        WR_RDMA_WRITE,
        src,
        3000,
        &rdma_seg(dst, p.b.key),
        0,
    );
    p.qa.post(
        &mut p.a,
        3,
        WR_RDMA_READ,
        src,
        3000,
        &rdma_seg(dst, p.b.key),
        0,
    );
    let seg = atomic_seg(dst, p.b.key, 1, 0);
    p.qa.post(&mut p.a, 4, WR_ATOMIC_FETCH_ADD, src + 0x4000, 8, &seg, 0);
    let (ca, _) = p.wait_cqes(4, 1);
    assert!(ca.iter().all(|c| c.wc_status() == WcStatus::Success));
    let captured = stop(&p.a, &path, keep);
    let out = captured.iter().filter(|(o, _)| *o).count() as u64;
    let inbound = captured.len() as u64 - out;
    assert_eq!(out, p.a.counter(COUNTER_TX_PACKETS));
    assert_eq!(inbound, p.a.counter(COUNTER_RX_PACKETS));
    assert!(out >= 4 && inbound >= 4, "{out} out, {inbound} in");
    assert!(captured.iter().all(|(_, c)| c.is_none()));
}

#[test]
fn dropped_frames_are_captured_with_a_comment() {
    let mut p = Pair::new(MIB, fast_timeout());
    let (path, keep) = capture_path("lossy-a.pcapng");
    p.a.trace.capture.start(&path, p.a.mac).expect("capture");
    p.a.faults
        .command(&["drop", "0.3"])
        .and_then(|_| p.a.faults.command(&["seed", "5"]))
        .expect("faults");
    let (src, dst) = (p.a.buf, p.b.buf + 0x8000);
    for i in 0..20 {
        p.qa.post(
            &mut p.a,
            i,
            WR_RDMA_WRITE,
            src,
            2048,
            &rdma_seg(dst, p.b.key),
            0,
        );
    }
    let (ca, _) = p.wait_cqes(20, 0);
    assert!(ca.iter().all(|c| c.wc_status() == WcStatus::Success));
    let captured = stop(&p.a, &path, keep);
    let dropped = captured
        .iter()
        .filter(|(_, c)| c.as_deref() == Some("fault: dropped"))
        .count() as u64;
    assert_eq!(dropped, p.a.faults.stats().dropped);
    assert!(dropped > 0);
}
