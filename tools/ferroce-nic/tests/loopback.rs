// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Local loopback: RoCE frames the engine sends to its own port's MAC are received by the same
//! engine (the same checks as a frame from the wire) and never reach the wire.

mod common;

use std::time::Duration;

use common::roce::*;
use common::CqeStatus;
use ferroce_hw::*;
use ferroce_nic::engine::faults::{FaultConfig, FaultDirection, FaultFrames};
use ferroce_nic::engine::wire::LOOPBACK_CAPACITY;

/// A node's trace while a test looks at it: [`Trace::start`] turns it on into a file of its
/// own, [`Trace::events`] turns it off and reads the events back (the file is removed).
struct Trace {
    path: std::path::PathBuf,
}

impl Trace {
    /// Traces `node` from now on, into a file named after `name` and the process.
    fn start(node: &Node, name: &str) -> Self {
        let path =
            std::env::temp_dir().join(format!("ferroce-{name}-{}.jsonl", std::process::id()));
        node.trace.start(&path).expect("trace");
        Self { path }
    }

    /// Stops tracing `node` and returns the events of kind `ev`, in order.
    fn events(self, node: &Node, ev: &str) -> Vec<serde_json::Value> {
        node.trace.stop().expect("trace");
        let text = std::fs::read_to_string(&self.path).expect("read trace");
        let _ = std::fs::remove_file(&self.path);
        text.lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("json line"))
            .filter(|e| e["ev"] == ev)
            .collect()
    }
}

/// SEND (with immediate), WRITE (with immediate), READ and an atomic of `len` bytes between the
/// two QPs of `s`, both ways, checked byte for byte.
fn transfer_all_kinds(s: &mut Solo, len: usize, seed: u64) {
    let quarter = (s.n.buf_len / 4) as u64;
    let (a_src, a_dst) = (s.n.buf, s.n.buf + quarter);
    let (b_src, b_dst) = (s.n.buf + 2 * quarter, s.n.buf + 3 * quarter);
    let key = s.n.key;
    let n = len as u32;

    for (i, opcode) in [WR_SEND, WR_SEND_WITH_IMM].into_iter().enumerate() {
        let data = s.n.fill(a_src, len, seed + i as u64);
        s.n.g.write(b_dst, &vec![0xee; len]);
        s.qb.post_recv(&mut s.n, 500 + i as u64, b_dst, n);
        s.qa.post(&mut s.n, 100 + i as u64, opcode, a_src, n, &[0; 40], 0x1234);
        let (ca, cb) = s.wait_cqes(1, 1);
        assert_eq!(
            (ca[0].wr_id, ca[0].wc_status()),
            (100 + i as u64, WcStatus::Success)
        );
        assert_eq!(
            (cb[0].wr_id, cb[0].wc_status(), cb[0].opcode, cb[0].byte_len),
            (500 + i as u64, WcStatus::Success, CQE_OP_RECV, n)
        );
        if opcode == WR_SEND_WITH_IMM {
            assert_eq!(cb[0].imm_or_inv, 0x1234);
        }
        assert!(s.n.g.read(b_dst, len) == data, "SEND of {len} bytes");
    }

    // WRITE from b to a this time, so that both QPs are requester and responder.
    for (i, opcode) in [WR_RDMA_WRITE, WR_RDMA_WRITE_WITH_IMM]
        .into_iter()
        .enumerate()
    {
        let data = s.n.fill(b_src, len, seed + 10 + i as u64);
        let imm = opcode == WR_RDMA_WRITE_WITH_IMM;
        if imm {
            s.qa.post_recv(&mut s.n, 600, a_dst, 0);
        }
        let seg = rdma_seg(a_dst, key);
        s.qb.post(&mut s.n, 200 + i as u64, opcode, b_src, n, &seg, 0xcafe);
        let (ca, cb) = s.wait_cqes(usize::from(imm), 1);
        assert_eq!(
            (cb[0].wc_status(), cb[0].opcode),
            (WcStatus::Success, CQE_OP_RDMA_WRITE)
        );
        if imm {
            assert_eq!(
                (ca[0].opcode, ca[0].imm_or_inv, ca[0].byte_len),
                (CQE_OP_RECV_RDMA_WITH_IMM, 0xcafe, n)
            );
        }
        assert!(s.n.g.read(a_dst, len) == data, "WRITE of {len} bytes");
    }

    let data = s.n.fill(b_src, len, seed + 20);
    let seg = rdma_seg(b_src, key);
    s.qa.post(&mut s.n, 300, WR_RDMA_READ, a_dst, n, &seg, 0);
    let (ca, _) = s.wait_cqes(1, 0);
    assert_eq!(
        (ca[0].wc_status(), ca[0].opcode, ca[0].byte_len),
        (WcStatus::Success, CQE_OP_RDMA_READ, n)
    );
    assert!(s.n.g.read(a_dst, len) == data, "READ of {len} bytes");

    let (target, result) = (b_src, a_src);
    s.n.g.write(target, &7u64.to_le_bytes());
    let seg = atomic_seg(target, key, 7, seed);
    s.qa.post(&mut s.n, 400, WR_ATOMIC_CMP_SWAP, result, 8, &seg, 0);
    let (ca, _) = s.wait_cqes(1, 0);
    assert_eq!((ca[0].wc_status(), ca[0].byte_len), (WcStatus::Success, 8));
    assert_eq!(s.n.g.read(result, 8), 7u64.to_le_bytes());
    assert_eq!(s.n.g.read(target, 8), seed.to_le_bytes());
}

/// An RC QP pair on one NIC, addressed to the NIC's own MAC and GID (RoCE v2 over IPv4 and
/// IPv6, RoCE v1): every operation completes, every packet is counted as sent and received, and
/// not one frame reaches the wire.
#[test]
fn rc_pair_on_one_nic_over_loopback() {
    for (sgid_index, mtu) in [(3, MTU_1024), (1, MTU_4096), (0, MTU_256)] {
        let mut s = Solo::new(
            4 * MIB,
            Conn {
                sgid_index,
                mtu,
                ..Conn::default()
            },
        );
        for (i, len) in [0, 1, 5000, MIB].into_iter().enumerate() {
            transfer_all_kinds(&mut s, len, i as u64 * 100 + u64::from(sgid_index));
        }
        let what = format!("GID {sgid_index}");
        assert!(s.wire.rx.is_empty(), "{what}: a frame reached the wire");
        assert_eq!(s.n.counter(COUNTER_DROPS), 0, "{what}");
        assert_eq!(s.n.counter(COUNTER_ICRC_ERRORS), 0, "{what}");
        // On a clean loopback nothing is lost, so nothing is retransmitted (the NIC's time is
        // virtual: a test thread descheduled on a loaded host no longer looks like a lost ACK).
        assert_eq!(s.n.counter(COUNTER_RETRANSMITS), 0, "{what}");
        let (tx, rx) = (
            s.n.counter(COUNTER_TX_PACKETS),
            s.n.counter(COUNTER_RX_PACKETS),
        );
        assert!(tx > 1000, "{what}: {tx} packets");
        assert_eq!(tx, rx, "{what}: every looped packet is received");
        assert!(!s.n.g.dev.engine.busy(), "{what}: nothing left queued");
    }
}

/// The trace shows each looped-back frame twice: sent and received, both marked `loopback`.
#[test]
fn looped_frames_are_traced_as_tx_and_rx() {
    let mut s = Solo::new(MIB, Conn::default());
    let trace = Trace::start(&s.n, "loopback");
    let (src, dst) = (s.n.buf, s.n.buf + 65536);
    s.qb.post_recv(&mut s.n, 1, dst, 4096);
    s.qa.post(&mut s.n, 2, WR_SEND, src, 3000, &[0; 40], 0);
    let (ca, cb) = s.wait_cqes(1, 1);
    assert_eq!(
        (ca[0].wc_status(), cb[0].wc_status()),
        (WcStatus::Success, WcStatus::Success)
    );
    let frames = trace.events(&s.n, "frame");
    let count = |dir: &str| frames.iter().filter(|e| e["dir"] == dir).count();
    // Three SEND packets at MTU 1024 and the ACK.
    assert_eq!((count("tx"), count("rx")), (4, 4), "{frames:?}");
    assert!(
        frames.iter().all(|e| e["loopback"] == true),
        "every frame is marked: {frames:?}"
    );
}

/// A UD (or GSI) QP on one NIC, sending to itself and to a second QP of the NIC, with an AH and
/// with an inline address vector; a burst of datagrams all arrives.
#[test]
fn ud_to_self() {
    for (qp_type, qkey, sgid_index, hdr) in [
        (QpType::Ud, 0x1111, 3, NET_HDR_IPV4),
        (QpType::Ud, 0x1111, 1, NET_HDR_IPV6),
        (QpType::Ud, 0x1111, 0, NET_HDR_GRH),
        (QpType::Gsi, 0x8001_0000, 3, NET_HDR_IPV4),
    ] {
        let what = format!("type {qp_type:?} GID {sgid_index}");
        let (port, wire) = ferroce_nic::engine::wire::back_to_back();
        let mut n = Node::new(1, MIB, port);
        let mut qa = Qp::create(&mut n, qp_type);
        qa.activate_ud(&mut n, qkey);
        let ah =
            n.g.ok(&CreateAhCmd {
                pd: PD,
                dgid: n.gid(sgid_index),
                dmac: n.mac,
                vlan: VLAN_NONE,
                sgid_index,
                hop_limit: 64,
                ..CreateAhCmd::default()
            })
            .ah;
        let data = n.fill(n.buf, 1000, 3);
        let dst = n.buf + 8192;
        // To itself, through the AH.
        qa.post_recv(&mut n, 7, dst, 2048);
        let ud = UdSeg {
            ah,
            remote_qpn: qa.qpn,
            remote_qkey: qkey,
            ..UdSeg::default()
        };
        let src = n.buf;
        qa.post(&mut n, 1, WR_SEND_WITH_IMM, src, 1000, &ud.encode(), 0xabcd);
        n.g.dev.process_all();
        let cqes = n.cq.poll(&n.g);
        assert_eq!(cqes.len(), 2, "{what}: {cqes:?}");
        let send = cqes.iter().find(|c| c.wr_id == 1).expect("send CQE");
        let recv = cqes.iter().find(|c| c.wr_id == 7).expect("receive CQE");
        assert_eq!(send.wc_status(), WcStatus::Success, "{what}");
        assert_eq!(
            (
                recv.wc_status(),
                recv.byte_len,
                recv.src_qpn,
                recv.network_hdr_type
            ),
            (WcStatus::Success, 1040, qa.qpn, hdr),
            "{what}"
        );
        assert_eq!((recv.imm_or_inv, recv.smac), (0xabcd, n.mac), "{what}");
        assert!(n.g.read(dst + 40, 1000) == data, "{what}: payload");

        // A second QP, through an inline address vector: a burst of 200 datagrams, one
        // doorbell's worth of work at a time, all received.
        if qp_type == QpType::Ud {
            let mut qb = Qp::create(&mut n, QpType::Ud);
            qb.activate_ud(&mut n, qkey);
            let av = av_to(&n, sgid_index, qb.qpn, qkey);
            for i in 0..200u64 {
                qb.post_recv(&mut n, 1000 + i, dst + i * 64, 64);
            }
            n.g.dev.process_all();
            for i in 0..200u64 {
                qa.post_av(&mut n, 2000 + i, WR_SEND, src, 16, &av, 0, 0);
            }
            n.g.dev.process_all();
            let cqes = n.cq.poll(&n.g);
            let received = cqes
                .iter()
                .filter(|c| c.qpn == qb.qpn && c.wc_status() == WcStatus::Success)
                .count();
            assert_eq!(received, 200, "{what}");
            assert_eq!(cqes.len(), 400, "{what}");
        }
        assert!(wire.rx.is_empty(), "{what}: a frame reached the wire");
        assert_eq!(n.counter(COUNTER_DROPS), 0, "{what}");
    }
}

/// Faults on both directions of a single NIC (each looped frame passes the transmit and the
/// receive faults): RC still delivers every byte, recovering by retransmission.
#[test]
fn rc_loopback_recovers_under_faults() {
    let mut s = Solo::new(
        4 * MIB,
        Conn {
            mtu: MTU_4096,
            timeout: 9,
            ..Conn::default()
        },
    );
    s.n.faults.set(FaultConfig {
        drop: 0.05,
        duplicate: 0.05,
        reorder: 0.05,
        corrupt: 0.01,
        delay: 0.02,
        delay_us: 500,
        seed: 11,
        direction: FaultDirection::Both,
        frames: FaultFrames::All,
    });
    for round in 0..2 {
        transfer_all_kinds(&mut s, MIB, 1000 + round);
    }
    let stats = s.n.faults.stats();
    assert!(stats.dropped > 0 && stats.duplicated > 0, "{stats:?}");
    assert!(s.n.counter(COUNTER_RETRANSMITS) > 0);
    assert!(s.wire.rx.is_empty(), "a frame reached the wire");
    // Nothing completes twice, once every held frame and timer is done.
    s.settle(Duration::from_secs(10));
    assert!(s.cqes.is_empty(), "{:?}", s.cqes);
}

/// A burst larger than the loopback queue, all at once (datagrams held back by a transmit
/// delay and released together): the queue keeps its bound, the excess is dropped and counted,
/// nothing panics, and the NIC carries on.
#[test]
fn loopback_burst_beyond_the_queue_is_dropped_not_queued() {
    const QPS: usize = 3;
    const PER_QP: usize = 200;
    let total = QPS * PER_QP;
    assert!(total > LOOPBACK_CAPACITY);
    let (port, wire) = ferroce_nic::engine::wire::back_to_back();
    let mut n = Node::new(1, MIB, port);
    let qkey = 0x1111;
    let mut qps: Vec<Qp> = (0..QPS).map(|_| Qp::create(&mut n, QpType::Ud)).collect();
    let dst = n.buf + 65536;
    for (q, qp) in qps.iter_mut().enumerate() {
        qp.activate_ud(&mut n, qkey);
        for i in 0..PER_QP {
            let slot = (q * PER_QP + i) as u64;
            qp.post_recv(&mut n, slot, dst + slot * 64, 64);
        }
    }
    n.g.dev.process_all();
    let hold = Duration::from_secs(1);
    n.faults.set(FaultConfig {
        delay: 1.0,
        delay_us: hold.as_micros() as u64,
        direction: FaultDirection::Tx,
        ..FaultConfig::default()
    });
    let posted = n.g.time.now();
    let src = n.buf;
    for qp in qps.iter_mut() {
        let av = av_to(&n, 3, qp.qpn, qkey);
        for i in 0..PER_QP {
            qp.post_av(&mut n, 10_000 + i as u64, WR_SEND, src, 8, &av, 0, 0);
        }
    }
    n.g.dev.process_all();
    // The first datagram is released at `posted + hold` at the earliest: all were held when
    // the last was sent. (A bound on device time, which only the test moves: posting took
    // none, however slow the host.)
    let all_sent = n.g.time.now();
    assert!(
        all_sent - posted < hold,
        "posting took {:?}: the first datagrams were released before the last was sent",
        all_sent - posted
    );
    // UD completes at the sender once the datagram is handed to the port.
    let sent = n.cq.poll(&n.g);
    assert_eq!(sent.len(), total);
    assert!(sent
        .iter()
        .all(|c| c.wc_status() == WcStatus::Success && c.wr_id >= 10_000));
    assert!(n.g.dev.engine.busy(), "the datagrams are held");
    let drops = n.counter(COUNTER_QUEUE_DROPS);
    // The last datagram is released by `all_sent + hold`.
    n.g.time
        .advance_to(all_sent + hold + Duration::from_millis(50));
    n.g.dev.process_all();
    let received = n.cq.poll(&n.g);
    assert_eq!(received.len(), LOOPBACK_CAPACITY);
    assert!(received
        .iter()
        .all(|c| c.wc_status() == WcStatus::Success && c.wr_id < 10_000));
    assert_eq!(
        n.counter(COUNTER_QUEUE_DROPS) - drops,
        (total - LOOPBACK_CAPACITY) as u64
    );
    assert!(!n.g.dev.engine.busy());
    assert!(wire.rx.is_empty(), "a frame reached the wire");

    // Without the fault, the next datagram goes straight through.
    n.faults.command(&["off"]).expect("fault off");
    let av = av_to(&n, 3, qps[0].qpn, qkey);
    qps[0].post_recv(&mut n, 99, dst, 64);
    qps[0].post_av(&mut n, 98, WR_SEND, src, 8, &av, 0, 0);
    n.g.dev.process_all();
    let cqes = n.cq.poll(&n.g);
    assert_eq!(cqes.len(), 2, "{cqes:?}");
    assert!(cqes.iter().all(|c| c.wc_status() == WcStatus::Success));
}

/// The hardware documentation states the queue's size.
#[test]
fn loopback_queue_size_is_documented() {
    const DOC: &str = include_str!("../../../Documentation/infiniband/ferroce-hw.rst");
    let needle = format!("FIFO of {LOOPBACK_CAPACITY} frames");
    assert!(DOC.contains(&needle), "{needle:?} not in ferroce-hw.rst");
}

/// The requester's passes are states, and the trace says why one held work back: a WRITE
/// longer than the congestion window stops at "window full", and a fenced SEND behind a READ
/// at "fence" until the READ's response is in.
#[test]
fn the_trace_names_where_the_requester_stopped() {
    let mut s = Solo::new(MIB, Conn::default());
    let trace = Trace::start(&s.n, "requester");
    let key = s.n.key;
    let (src, dst) = (s.n.buf, s.n.buf + MIB as u64 / 2);
    // 256 packets at MTU 1024, eight windows.
    s.qa.post(
        &mut s.n,
        1,
        WR_RDMA_WRITE,
        src,
        256 * 1024,
        &rdma_seg(dst, key),
        0,
    );
    let (ca, _) = s.wait_cqes(1, 0);
    assert_eq!(ca[0].wc_status(), WcStatus::Success);
    // A READ, then a fenced SEND: the SEND waits for the READ's response.
    s.qb.post_recv(&mut s.n, 2, dst, 4096);
    s.qa.post(&mut s.n, 3, WR_RDMA_READ, src, 4096, &rdma_seg(dst, key), 0);
    let fenced = WqeCtrl {
        wr_id: 4,
        opcode: WR_SEND,
        flags: WQE_FLAG_SIGNALED | WQE_FLAG_FENCE,
        num_sge: 1,
        ..WqeCtrl::default()
    };
    let sge = Sge {
        addr: src,
        length: 64,
        lkey: key,
    };
    s.qa.put(&s.n, fenced, &[0; 40], &sge.encode());
    s.qa.ring(&mut s.n);
    let (ca, cb) = s.wait_cqes(2, 1);
    assert!(ca
        .iter()
        .chain(&cb)
        .all(|c| c.wc_status() == WcStatus::Success));
    assert_eq!(
        ca.iter().map(|c| c.wr_id).collect::<Vec<_>>(),
        [3, 4],
        "the fenced SEND completes after the READ"
    );
    let stops: Vec<String> = trace
        .events(&s.n, "requester")
        .into_iter()
        .filter(|e| e["qpn"] == s.qa.qpn)
        .map(|e| e["stop"].as_str().unwrap_or_default().to_string())
        .collect();
    for stop in ["window full", "fence"] {
        assert!(stops.iter().any(|s| s == stop), "{stop}: {stops:?}");
    }
}

/// The responder's and the completer's states: a SEND that finds no receive WQE is RNR NAKed;
/// the NAK's trace events name the responder's state that sent it (ERR_RNR) and the
/// completer's that took it (RNR_RETRY); the SEND goes through once a WQE is posted.
#[test]
fn the_trace_names_the_states_a_nak_goes_through() {
    let mut s = Solo::new(MIB, Conn::default());
    let trace = Trace::start(&s.n, "completer");
    let (src, dst) = (s.n.buf, s.n.buf + 65536);
    s.qa.post(&mut s.n, 1, WR_SEND, src, 64, &[0; 40], 0);
    s.run_for(Duration::from_millis(20));
    s.qb.post_recv(&mut s.n, 2, dst, 4096);
    let (ca, cb) = s.wait_cqes(1, 1);
    assert_eq!(
        (ca[0].wc_status(), cb[0].wc_status()),
        (WcStatus::Success, WcStatus::Success)
    );
    let events = trace.events(&s.n, "nak");
    let naks = |qpn: u32, dir: &str, state: &str| {
        let naks: Vec<_> = events
            .iter()
            .filter(|e| e["qpn"] == qpn && e["dir"] == dir)
            .collect();
        !naks.is_empty() && naks.iter().all(|e| e["state"] == state)
    };
    assert!(
        naks(s.qb.qpn, "tx", "ERR_RNR"),
        "the responder's state: {events:?}"
    );
    assert!(
        naks(s.qa.qpn, "rx", "RNR_RETRY"),
        "the completer's: {events:?}"
    );
}
