// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! XRC (IBA 9.2, transport type 101): an XRC_INI QP sends RC's operations in XRC opcodes, each
//! request naming an XRC SRQ at the target in its XRCETH; the XRC_TGT QP delivers it into that
//! SRQ if it belongs to the QP's XRC domain, with the SRQ's PD and on the SRQ's CQ, and NAKs a
//! request naming any other SRQ with a Remote Access Error. The commands that make XRC QPs and
//! SRQs check their shapes.

mod common;

use common::roce::*;
use common::xrc::*;
use common::CqeStatus;
use ferroce_hw::*;
use ferroce_nic::engine::faults::FaultConfig;
use ferroce_nic::engine::headers::{syndrome, Headers, Reth};
use ferroce_nic::engine::opcode::op;

fn conn(mtu: u8) -> Conn {
    Conn {
        mtu,
        ..Conn::default()
    }
}

fn qp_state(n: &Node, qpn: u32) -> Option<QpState> {
    n.g.dev.core.objects().qps().get(qpn).map(|qp| qp.state)
}

fn u64_at(n: &Node, addr: u64) -> u64 {
    u64::from_le_bytes(n.g.read(addr, 8).try_into().expect("8 bytes"))
}

/// A receive completion of XRC SRQ `srqn` through XRC_TGT QP `qpn`.
fn assert_xrc_recv(c: &Cqe, wr_id: u64, srqn: u32, qpn: u32, opcode: u8, byte_len: u32) {
    assert_eq!(
        (c.wr_id, c.wc_status(), c.opcode, c.byte_len),
        (wr_id, WcStatus::Success, opcode, byte_len),
        "{c:?}"
    );
    assert_eq!(
        (c.flags & CQE_FLAG_XRC, c.srqn, c.qpn),
        (CQE_FLAG_XRC, srqn, qpn),
        "an XRC receive names its SRQ and the target QP: {c:?}"
    );
}

/// SEND, SEND_WITH_IMM, WRITE, WRITE_WITH_IMM, READ, CMP_SWAP and FETCH_ADD from the
/// initiator, each through the SRQ its WQE names, checked byte for byte.
fn every_operation(mtu: u8, len: usize) {
    let (mut p, mut srq) = xrc_pair(4 * MIB, conn(mtu));
    let (srqn, tgt) = (srq.srqn, p.qb.qpn);
    let n = len as u32;
    let (a_src, a_dst) = (p.a.buf, p.a.buf + 2 * MIB as u64);
    let (b_src, b_dst) = (p.b.buf, p.b.buf + 2 * MIB as u64);
    let b_key = p.b.key;

    for (i, opcode) in [WR_SEND, WR_SEND_WITH_IMM].into_iter().enumerate() {
        let data = p.a.fill(a_src, len, i as u64);
        srq.post(&mut p.b, 500 + i as u64, b_dst, n, b_key);
        p.qa.post(&mut p.a, 100 + i as u64, opcode, a_src, n, &[0; 40], 0xabcd);
        let (ca, cb) = p.wait_cqes(1, 1);
        assert_eq!(
            (ca[0].wr_id, ca[0].wc_status()),
            (100 + i as u64, WcStatus::Success)
        );
        assert_xrc_recv(&cb[0], 500 + i as u64, srqn, tgt, CQE_OP_RECV, n);
        assert_eq!(cb[0].wqe_index, i as u16, "the SRQ slot");
        if opcode == WR_SEND_WITH_IMM {
            assert_eq!(
                (cb[0].flags & CQE_FLAG_WITH_IMM, cb[0].imm_or_inv),
                (CQE_FLAG_WITH_IMM, 0xabcd)
            );
        }
        assert!(
            p.b.g.read(b_dst, len) == data,
            "SEND of {len} bytes at MTU {mtu}"
        );
    }

    for (i, opcode) in [WR_RDMA_WRITE, WR_RDMA_WRITE_WITH_IMM]
        .into_iter()
        .enumerate()
    {
        let data = p.a.fill(a_src, len, 10 + i as u64);
        let imm = opcode == WR_RDMA_WRITE_WITH_IMM;
        if imm {
            srq.post(&mut p.b, 600, b_dst, 0, b_key);
        }
        p.qa.post(
            &mut p.a,
            200,
            opcode,
            a_src,
            n,
            &rdma_seg(b_dst, b_key),
            0xcafe,
        );
        let (ca, cb) = p.wait_cqes(1, usize::from(imm));
        assert_eq!(ca[0].wc_status(), WcStatus::Success);
        if imm {
            assert_xrc_recv(&cb[0], 600, srqn, tgt, CQE_OP_RECV_RDMA_WITH_IMM, n);
            assert_eq!(cb[0].imm_or_inv, 0xcafe);
        }
        assert!(
            p.b.g.read(b_dst, len) == data,
            "WRITE of {len} bytes at MTU {mtu}"
        );
    }

    let data = p.b.fill(b_src, len, 20);
    p.qa.post(
        &mut p.a,
        300,
        WR_RDMA_READ,
        a_dst,
        n,
        &rdma_seg(b_src, b_key),
        0,
    );
    let (ca, _) = p.wait_cqes(1, 0);
    assert_eq!((ca[0].wc_status(), ca[0].byte_len), (WcStatus::Success, n));
    assert!(
        p.a.g.read(a_dst, len) == data,
        "READ of {len} bytes at MTU {mtu}"
    );

    let (target, result) = (b_src + 8192, a_dst);
    p.b.g.write(target, &5u64.to_le_bytes());
    for (wr_id, opcode, compare_add, swap, original, after) in [
        (1, WR_ATOMIC_CMP_SWAP, 5, 9, 5, 9),
        (2, WR_ATOMIC_FETCH_ADD, 10, 0, 9, 19),
    ] {
        let seg = atomic_seg(target, b_key, compare_add, swap);
        p.qa.post(&mut p.a, wr_id, opcode, result, 8, &seg, 0);
        let (ca, _) = p.wait_cqes(1, 0);
        assert_eq!((ca[0].wr_id, ca[0].wc_status()), (wr_id, WcStatus::Success));
        assert_eq!(
            (u64_at(&p.a, result), u64_at(&p.b, target)),
            (original, after)
        );
    }
    assert_eq!(qp_state(&p.b, tgt), Some(QpState::Rts));
}

#[test]
fn every_rc_operation_goes_through_the_named_srq() {
    every_operation(MTU_1024, 3000);
    // A READ of 96 KiB is asked for in window-sized pieces.
    every_operation(MTU_1024, 96 << 10);
    every_operation(MTU_4096, 10_000);
}

#[test]
fn every_frame_of_an_xrc_connection_is_xrc_and_names_the_srq() {
    let mut s = Scripted::with(MIB, Conn::default(), Qp::create_xrc_ini);
    s.qp.xrc_srqn = 0x12_3456;
    let buf = s.n.buf;
    let seg = rdma_seg(0x10_0000, 0x1234);
    s.qp.post(&mut s.n, 1, WR_SEND, buf, 2500, &[0; 40], 0);
    s.qp.post(&mut s.n, 2, WR_RDMA_WRITE, buf, 100, &seg, 0);
    s.qp.post(&mut s.n, 3, WR_RDMA_READ, buf, 100, &seg, 0);
    s.qp.post(
        &mut s.n,
        4,
        WR_ATOMIC_FETCH_ADD,
        buf,
        8,
        &atomic_seg(0x10_0000, 0x1234, 1, 0),
        0,
    );
    let sent = s.sent();
    let got: Vec<(u8, Option<u32>)> = sent.iter().map(|p| (p.bth.opcode, p.xrceth)).collect();
    let srqn = Some(0x12_3456);
    assert_eq!(
        got,
        [
            (op::XRC | op::RC_SEND_FIRST, srqn),
            (op::XRC | op::RC_SEND_MIDDLE, srqn),
            (op::XRC | op::RC_SEND_LAST, srqn),
            (op::XRC_WRITE_ONLY, srqn),
            (op::XRC_READ_REQUEST, srqn),
            (op::XRC | op::RC_FETCH_ADD, srqn),
        ]
    );
    // An RC ACK is not an XRC connection's: dropped; the XRC one completes.
    let last = sent[3].bth.psn; // the WRITE's
    let drops = s.n.counter(COUNTER_DROPS);
    s.inject(&s.ack(last, syndrome::ACK), &[]);
    assert!(
        s.cqes.is_empty(),
        "an RC ACK completed XRC work: {:?}",
        statuses(&s.cqes)
    );
    assert_eq!(s.n.counter(COUNTER_DROPS), drops + 1);
    let mut ack = s.ack(last, syndrome::ACK);
    ack.bth.opcode = op::XRC_ACKNOWLEDGE;
    s.inject(&ack, &[]);
    assert_eq!(
        statuses(&s.cqes),
        [(1, WcStatus::Success), (2, WcStatus::Success)]
    );
}

#[test]
fn a_wqe_naming_no_24_bit_srq_is_malformed() {
    let (mut p, _srq) = xrc_pair(MIB, Conn::default());
    p.qa.xrc_srqn = 1 << 24;
    let buf = p.a.buf;
    p.qa.post(&mut p.a, 1, WR_SEND, buf, 10, &[0; 40], 0);
    p.pump_until(std::time::Duration::from_secs(10), |p| {
        qp_state(&p.a, p.qa.qpn) == Some(QpState::Err)
    });
    let events = p.a.g.poll_eq(EQN_ASYNC);
    assert!(
        events.iter().any(
            |e| EventType::try_from(e.event_type) == Ok(EventType::QpFatal)
                && e.subtype == WQE_ERR_BAD_XRC_SRQN
                && e.data0 == p.qa.qpn
        ),
        "{events:?}"
    );
}

/// A request to the scripted target naming `srqn`, at the PSN it expects.
fn send_only(s: &Scripted, srqn: u32, psn: u32) -> Headers {
    let mut b = Headers::new(op::XRC_SEND_ONLY, s.qp.qpn, psn);
    b.xrceth = Some(srqn);
    b.bth.ack_req = true;
    b
}

/// What the target answered: (opcode, syndrome) of each packet.
fn answers(s: &mut Scripted) -> Vec<(u8, Option<u8>)> {
    s.sent()
        .iter()
        .map(|p| (p.bth.opcode, p.aeth.map(|a| a.syndrome)))
        .collect()
}

fn assert_refused(s: &mut Scripted, what: &str, recvs: &[(u64, WcStatus)]) {
    assert_eq!(
        answers(s),
        [(op::XRC_ACKNOWLEDGE, Some(syndrome::NAK_REMOTE_ACCESS))],
        "{what}: a Remote Access Error NAK"
    );
    assert_eq!(qp_state(&s.n, s.qp.qpn), Some(QpState::Err), "{what}");
    let events = s.n.g.poll_eq(EQN_ASYNC);
    assert!(
        events.iter().any(
            |e| EventType::try_from(e.event_type) == Ok(EventType::QpAccessErr)
                && e.data0 == s.qp.qpn
        ),
        "{what}: QP_ACCESS_ERR: {events:?}"
    );
    assert_eq!(statuses(&s.cqes), recvs, "{what}");
}

#[test]
fn a_request_naming_an_srq_the_target_may_not_use_is_refused() {
    type Other = fn(&mut Scripted) -> u32;
    let cases: [(&str, Other); 3] = [
        ("an XRC SRQ of another XRC domain", |s| {
            let cqn = s.n.cq.cqn;
            XrcSrq::create(&mut s.n, XRCD + 1, PD, cqn).srqn
        }),
        ("a basic SRQ", |s| {
            let ring = s.n.g.alloc(64 << 4, 4096);
            let dbrec = s.n.g.alloc(64, 64);
            s.n.g
                .ok(&CreateSrqCmd {
                    ring: BufDesc {
                        addr: ring,
                        ..BufDesc::default()
                    },
                    dbrec_addr: dbrec,
                    pd: PD,
                    log_size: 4,
                    log_stride: 6,
                    ..CreateSrqCmd::default()
                })
                .srqn
        }),
        ("no SRQ at all", |_| 0x00ab_cdef),
    ];
    for (what, other) in cases {
        let (mut s, mut srq) = scripted_target(MIB, Conn::default());
        let other = other(&mut s);
        let dst = s.n.buf;
        s.n.g.write(dst, &[0xee; 16]);
        let key = s.n.key;
        srq.post(&mut s.n, 1, dst, 64, key);
        let b = send_only(&s, other, s.rq_psn);
        s.inject(&b, b"not for you");
        assert_refused(&mut s, what, &[]);
        assert_eq!(s.n.g.read(dst, 16), [0xee; 16], "{what}: nothing written");
    }
}

#[test]
fn a_message_cannot_change_its_srq_midway() {
    let (mut s, mut srq) = scripted_target(MIB, Conn::default());
    let cqn = s.n.cq.cqn;
    let mut other = XrcSrq::create(&mut s.n, XRCD, PD, cqn);
    let (dst, key) = (s.n.buf, s.n.key);
    srq.post(&mut s.n, 1, dst, 4096, key);
    other.post(&mut s.n, 2, dst + 8192, 4096, key);
    let mut first = Headers::new(op::XRC | op::RC_SEND_FIRST, s.qp.qpn, s.rq_psn);
    first.xrceth = Some(srq.srqn);
    s.inject(&first, &[1; 1024]);
    let mut last = Headers::new(op::XRC | op::RC_SEND_LAST, s.qp.qpn, s.rq_psn + 1);
    last.xrceth = Some(other.srqn);
    last.bth.ack_req = true;
    s.inject(&last, &[2; 10]);
    // The receive the message took completes with the error.
    let what = "a LAST naming another SRQ than its FIRST";
    assert_refused(&mut s, what, &[(1, WcStatus::RemAccessErr)]);
    assert_eq!(s.cqes[0].srqn, srq.srqn);
}

#[test]
fn the_target_checks_memory_in_the_pd_of_the_srq_named() {
    let (mut p, srq) = xrc_pair(MIB, Conn::default());
    // A second SRQ of the domain in PD 2, with a buffer registered in PD 2.
    let (cqn, half) = (p.b.cq.cqn, p.b.buf + (MIB / 2) as u64);
    let mut srq2 = XrcSrq::create(&mut p.b, XRCD, 2, cqn);
    let key2 = p.b.mr(half, 4096, ACCESS_VALID_MASK, 2);
    let (src, tgt) = (p.a.buf, p.qb.qpn);
    // Through SRQ 2, the PD 2 key works: a WRITE and a SEND into a PD 2 buffer.
    p.qa.xrc_srqn = srq2.srqn;
    let data = p.a.fill(src, 100, 1);
    p.qa.post(
        &mut p.a,
        1,
        WR_RDMA_WRITE,
        src,
        100,
        &rdma_seg(half, key2),
        0,
    );
    srq2.post(&mut p.b, 7, half + 1024, 100, key2);
    p.qa.post(&mut p.a, 2, WR_SEND, src, 100, &[0; 40], 0);
    let (ca, cb) = p.wait_cqes(2, 1);
    assert_eq!(
        statuses(&ca),
        [(1, WcStatus::Success), (2, WcStatus::Success)]
    );
    assert_xrc_recv(&cb[0], 7, srq2.srqn, tgt, CQE_OP_RECV, 100);
    assert!(p.b.g.read(half, 100) == data && p.b.g.read(half + 1024, 100) == data);
    // Through SRQ 1 (PD 1), the same key is another PD's: a Remote Access Error.
    p.qa.xrc_srqn = srq.srqn;
    p.b.g.write(half, &[0; 100]);
    p.qa.post(
        &mut p.a,
        3,
        WR_RDMA_WRITE,
        src,
        100,
        &rdma_seg(half, key2),
        0,
    );
    let (ca, _) = p.wait_cqes(1, 0);
    assert_eq!(statuses(&ca), [(3, WcStatus::RemAccessErr)]);
    assert_eq!(p.b.g.read(half, 100), [0; 100], "nothing written");
    assert_eq!(qp_state(&p.b, tgt), Some(QpState::Err));
}

#[test]
fn one_srq_serves_two_target_qps_of_its_domain() {
    let (mut p, mut srq) = xrc_pair(MIB, Conn::default());
    // A second connection into the same SRQ: INI 2 on a, TGT 2 on b.
    let mut ini2 = Qp::create_xrc_ini(&mut p.a);
    let tgt2 = Qp::create_xrc_tgt(&mut p.b, XRCD);
    ini2.connect(&mut p.a, &p.b, tgt2.qpn, 100, 200, Conn::default());
    tgt2.connect(&mut p.b, &p.a, ini2.qpn, 200, 100, Conn::default());
    ini2.xrc_srqn = srq.srqn;
    let (src, dst, key) = (p.a.buf, p.b.buf, p.b.key);
    srq.post(&mut p.b, 1, dst, 64, key);
    srq.post(&mut p.b, 2, dst + 64, 64, key);
    p.qa.post(&mut p.a, 11, WR_SEND, src, 10, &[0; 40], 0);
    ini2.post(&mut p.a, 12, WR_SEND, src, 20, &[0; 40], 0);
    let (mut ca, mut cb) = p.wait_cqes(2, 2);
    ca.sort_by_key(|c| c.wr_id);
    assert_eq!(
        statuses(&ca),
        [(11, WcStatus::Success), (12, WcStatus::Success)]
    );
    cb.sort_by_key(|c| c.qpn);
    assert_xrc_recv(&cb[0], 1, srq.srqn, p.qb.qpn, CQE_OP_RECV, 10);
    assert_xrc_recv(&cb[1], 2, srq.srqn, tgt2.qpn, CQE_OP_RECV, 20);
}

#[test]
fn an_empty_srq_is_receiver_not_ready_until_a_receive_is_posted() {
    let (mut p, mut srq) = xrc_pair(MIB, Conn::default());
    let (src, dst, key) = (p.a.buf, p.b.buf, p.b.key);
    p.qa.post(&mut p.a, 1, WR_SEND, src, 10, &[0; 40], 0);
    p.pump_until(std::time::Duration::from_secs(10), |p| {
        p.b.counter(COUNTER_NAKS_SENT) > 0
    });
    assert!(p.cqes_a.is_empty(), "{:?}", statuses(&p.cqes_a));
    srq.post(&mut p.b, 5, dst, 64, key);
    let (ca, cb) = p.wait_cqes(1, 1);
    assert_eq!(statuses(&ca), [(1, WcStatus::Success)]);
    assert_xrc_recv(&cb[0], 5, srq.srqn, p.qb.qpn, CQE_OP_RECV, 10);
    assert!(p.a.counter(COUNTER_RNR_RETRIES) > 0);
}

/// A SEND, a READ and four FETCH_ADDs on an XRC connection whose frames both NICs drop (10 %),
/// duplicate and reorder (5 %) in both directions, with a local ACK timeout of 1 ms: everything
/// arrives, once. Returns the pair as the run left it.
fn lossy_xrc_run() -> Pair {
    let (mut p, mut srq) = xrc_pair(4 * MIB, fast_timeout());
    for (n, seed) in [(&p.a, 7), (&p.b, 8)] {
        n.faults.set(FaultConfig {
            drop: 0.1,
            duplicate: 0.05,
            reorder: 0.05,
            seed,
            ..FaultConfig::default()
        });
    }
    let (a_src, a_dst, b_src, b_dst, key) = (
        p.a.buf,
        p.a.buf + 2 * MIB as u64,
        p.b.buf,
        p.b.buf + 2 * MIB as u64,
        p.b.key,
    );
    let len = 40_000;
    let sent = p.a.fill(a_src, len, 3);
    let read = p.b.fill(b_src, len, 4);
    let target = b_src + MIB as u64;
    p.b.g.write(target, &0u64.to_le_bytes());
    srq.post(&mut p.b, 9, b_dst, len as u32, key);
    p.qa.post(&mut p.a, 1, WR_SEND, a_src, len as u32, &[0; 40], 0);
    p.qa.post(
        &mut p.a,
        2,
        WR_RDMA_READ,
        a_dst,
        len as u32,
        &rdma_seg(b_src, key),
        0,
    );
    for i in 0..4 {
        let seg = atomic_seg(target, key, 1, 0);
        p.qa.post(
            &mut p.a,
            10 + i,
            WR_ATOMIC_FETCH_ADD,
            a_dst + MIB as u64 + 8 * i,
            8,
            &seg,
            0,
        );
    }
    let (ca, cb) = p.wait_cqes(6, 1);
    assert!(
        ca.iter().all(|c| c.wc_status() == WcStatus::Success),
        "{:?}",
        statuses(&ca)
    );
    assert_xrc_recv(&cb[0], 9, srq.srqn, p.qb.qpn, CQE_OP_RECV, len as u32);
    assert!(p.b.g.read(b_dst, len) == sent, "SEND");
    assert!(p.a.g.read(a_dst, len) == read, "READ");
    assert_eq!(u64_at(&p.b, target), 4, "each FETCH_ADD once");
    p
}

#[test]
fn losses_duplicates_and_reordering_on_an_xrc_connection_lose_nothing() {
    let p = lossy_xrc_run();
    assert!(p.a.counter(COUNTER_RETRANSMITS) + p.b.counter(COUNTER_DUPLICATES) > 0);
}

/// The lossy run twice in one process ends the same: every counter of both NICs, the faults
/// injected and the device time it took. A run is a function of its inputs and seeds; a timer
/// that read the host's clock again (or a QP order that varied) would show here.
#[test]
fn a_lossy_xrc_run_replays_exactly() {
    let outcome = || {
        let p = lossy_xrc_run();
        let counters = [&p.a, &p.b].map(|n| n.g.counters.named());
        let faults = [&p.a, &p.b].map(|n| n.faults.stats());
        (counters, faults, p.time().elapsed())
    };
    let first = outcome();
    assert!(first.1[0].dropped + first.1[1].dropped > 0, "{:?}", first.1);
    assert_eq!(first, outcome());
}

#[test]
fn destroying_an_srq_ends_the_message_being_received_into_it() {
    let (mut s, mut srq) = scripted_target(MIB, Conn::default());
    let (dst, key, cqn) = (s.n.buf, s.n.key, s.n.cq.cqn);
    srq.post(&mut s.n, 1, dst, 4096, key);
    let mut first = Headers::new(op::XRC | op::RC_SEND_FIRST, s.qp.qpn, s.rq_psn);
    first.xrceth = Some(srq.srqn);
    s.inject(&first, &[1; 1024]);
    s.n.g.ok(&DestroySrqCmd {
        srqn: srq.srqn,
        rsvd: 0,
    });
    // The number comes back for a new SRQ of the same domain, with a receive posted.
    let mut again = XrcSrq::create(&mut s.n, XRCD, PD, cqn);
    again.post(&mut s.n, 2, dst + 8192, 4096, key);
    let mut last = Headers::new(op::XRC | op::RC_SEND_LAST, s.qp.qpn, s.rq_psn + 1);
    last.xrceth = Some(again.srqn);
    last.bth.ack_req = true;
    s.inject(&last, &[2; 10]);
    let got = answers(&mut s);
    assert!(
        got.iter()
            .any(|&(o, syn)| o == op::XRC_ACKNOWLEDGE && syn.is_some_and(|s| s & 0xe0 == 0x60)),
        "a NAK: {got:?}"
    );
    assert!(
        s.cqes.iter().all(|c| c.wr_id != 2),
        "the new SRQ's receive completed: {:?}",
        s.cqes
    );
    assert_eq!(s.n.g.read(dst + 8192, 10), [0; 10]);
}

#[test]
fn xrc_halves_take_only_their_own_packets() {
    // An RC request to an XRC_TGT QP, and an XRC response to it: dropped.
    let (mut s, mut srq) = scripted_target(MIB, Conn::default());
    let dst = s.n.buf;
    let key = s.n.key;
    srq.post(&mut s.n, 1, dst, 64, key);
    let drops = s.n.counter(COUNTER_DROPS);
    let mut rc = Headers::new(op::RC_SEND_ONLY, s.qp.qpn, s.rq_psn);
    rc.bth.ack_req = true;
    s.inject(&rc, b"rc");
    let mut ack = s.ack(s.rq_psn, syndrome::ACK);
    ack.bth.opcode = op::XRC_ACKNOWLEDGE;
    s.inject(&ack, &[]);
    assert_eq!(s.n.counter(COUNTER_DROPS), drops + 2);
    assert!(s.sent().is_empty() && s.cqes.is_empty());
    // The QP still expects that PSN.
    let b = send_only(&s, srq.srqn, s.rq_psn);
    s.inject(&b, b"xrc");
    assert_eq!(
        answers(&mut s),
        [(op::XRC_ACKNOWLEDGE, Some(syndrome::ACK))]
    );
    assert_xrc_recv(&s.cqes[0], 1, srq.srqn, s.qp.qpn, CQE_OP_RECV, 3);

    // An XRC request to an XRC_INI QP: dropped.
    let mut s = Scripted::with(MIB, Conn::default(), Qp::create_xrc_ini);
    let drops = s.n.counter(COUNTER_DROPS);
    let b = send_only(&s, 1, s.rq_psn);
    s.inject(&b, b"x");
    assert_eq!(s.n.counter(COUNTER_DROPS), drops + 1);
    assert!(s.sent().is_empty());
}

#[test]
fn an_xrc_request_to_an_rc_qp_is_dropped_and_changes_nothing() {
    let mut s = Scripted::new(MIB, Conn::default());
    let dst = s.n.buf;
    s.qp.post_recv(&mut s.n, 5, dst, 64);
    let drops = s.n.counter(COUNTER_DROPS);
    let mut xrc = Headers::new(op::XRC_SEND_ONLY, s.qp.qpn, s.rq_psn);
    xrc.xrceth = Some(1);
    xrc.bth.ack_req = true;
    s.inject(&xrc, b"xrc");
    assert!(
        s.cqes.is_empty(),
        "an XRC SEND took the receive: {:?}",
        statuses(&s.cqes)
    );
    assert!(s.sent().is_empty(), "an XRC SEND was answered");
    assert_eq!(s.n.counter(COUNTER_DROPS), drops + 1, "counted as a drop");
    // The QP still expects that PSN: an RC SEND there takes the receive.
    let mut rc = Headers::new(op::RC_SEND_ONLY, s.qp.qpn, s.rq_psn);
    rc.bth.ack_req = true;
    s.inject(&rc, b"rc");
    assert_eq!(
        s.cqes
            .iter()
            .map(|c| (c.wr_id, c.wc_status(), c.byte_len))
            .collect::<Vec<_>>(),
        [(5, WcStatus::Success, 2)]
    );
    assert_eq!(s.n.g.read(dst, 2), b"rc");
}

#[test]
fn a_duplicate_read_through_a_foreign_srq_is_not_answered() {
    let (mut s, srq) = scripted_target(MIB, Conn::default());
    let (src, key) = (s.n.buf, s.n.key);
    let mut read = Headers::new(op::XRC_READ_REQUEST, s.qp.qpn, s.rq_psn);
    read.xrceth = Some(srq.srqn);
    read.reth = Some(Reth {
        va: src,
        rkey: key,
        len: 64,
    });
    s.inject(&read, &[]);
    assert_eq!(
        answers(&mut s),
        [(op::XRC | op::RC_READ_RESPONSE_ONLY, Some(syndrome::ACK))]
    );
    // The same READ again, naming an SRQ of no one: not answered, nothing changes.
    read.xrceth = Some(0x00ab_cdef);
    s.inject(&read, &[]);
    assert!(answers(&mut s).is_empty());
    read.xrceth = Some(srq.srqn);
    s.inject(&read, &[]);
    assert_eq!(
        answers(&mut s).len(),
        1,
        "the duplicate through its own SRQ is answered"
    );
    assert_eq!(qp_state(&s.n, s.qp.qpn), Some(QpState::Rts));
}

/// The status and syndrome (offending field + 1) of a command.
fn refused<C: Command>(n: &mut Node, cmd: &C) -> (u8, u32) {
    let c = n.g.cmd(cmd);
    (c.status, c.syndrome)
}

#[test]
fn xrc_qps_and_srqs_are_made_in_their_shapes_only() {
    let (port, _wire) = ferroce_nic::engine::wire::back_to_back();
    let mut n = Node::new(1, MIB, port);
    let cqn = n.cq.cqn;
    let tgt = CreateQpCmd {
        qp_type: QpType::XrcTgt.into(),
        sq_cqn: NONE,
        rq_cqn: NONE,
        srqn: NONE,
        xrcd: XRCD,
        ..CreateQpCmd::default()
    };
    let bad = STATUS_BAD_PARAM;
    // An XRC_TGT QP has nothing but its domain.
    for (what, cmd, want) in [
        ("no domain", CreateQpCmd { xrcd: 0, ..tgt }, (bad, 65)),
        ("a PD", CreateQpCmd { pd: PD, ..tgt }, (bad, 41)),
        ("a send CQ", CreateQpCmd { sq_cqn: cqn, ..tgt }, (bad, 45)),
        (
            "a receive CQ",
            CreateQpCmd { rq_cqn: cqn, ..tgt },
            (bad, 49),
        ),
        (
            "a doorbell record",
            CreateQpCmd {
                dbrec_addr: 4096,
                ..tgt
            },
            (bad, 33),
        ),
        (
            "a send ring",
            CreateQpCmd {
                sq_log_size: 4,
                ..tgt
            },
            (bad, 1),
        ),
        (
            "flags",
            CreateQpCmd {
                flags: QP_FLAG_SIGNAL_ALL,
                ..tgt
            },
            (bad, 62),
        ),
    ] {
        assert_eq!(refused(&mut n, &cmd), want, "XRC_TGT with {what}");
    }
    // A domain on any other type, an XRC_INI QP with a receive side.
    let rc = Qp::create(&mut n, QpType::Rc);
    let ini = Qp::create_xrc_ini(&mut n);
    let _ = (rc, ini);
    let sq = n.g.alloc(1 << 17, 4096);
    let dbrec = n.g.alloc(64, 64);
    let ini_cmd = CreateQpCmd {
        sq: BufDesc {
            addr: sq,
            ..BufDesc::default()
        },
        dbrec_addr: dbrec,
        pd: PD,
        sq_cqn: cqn,
        rq_cqn: NONE,
        srqn: NONE,
        qp_type: QpType::XrcIni.into(),
        sq_log_size: 8,
        sq_log_stride: 9,
        ..CreateQpCmd::default()
    };
    assert_eq!(n.g.cmd(&ini_cmd).status, STATUS_OK);
    for (what, cmd, want) in [
        (
            "a receive CQ",
            CreateQpCmd {
                rq_cqn: cqn,
                ..ini_cmd
            },
            (bad, 49),
        ),
        (
            "a receive ring",
            CreateQpCmd {
                rq_log_size: 4,
                ..ini_cmd
            },
            (bad, 17),
        ),
        (
            "a domain",
            CreateQpCmd {
                xrcd: XRCD,
                ..ini_cmd
            },
            (bad, 65),
        ),
        (
            "reserved bits",
            CreateQpCmd {
                rsvd2: 1,
                ..ini_cmd
            },
            (bad, 69),
        ),
    ] {
        assert_eq!(refused(&mut n, &cmd), want, "XRC_INI with {what}");
    }
    // XRC SRQs: a domain and a CQ; a basic SRQ neither.
    let (srq, _, _) = XrcSrq::command(&mut n, XRCD, PD, cqn);
    for (what, cmd, want) in [
        ("no domain", CreateSrqCmd { xrcd: 0, ..srq }, (bad, 37)),
        (
            "no CQ",
            CreateSrqCmd { cqn: 0x999, ..srq },
            (STATUS_BAD_RESOURCE, 41),
        ),
        (
            "an undefined type",
            CreateSrqCmd { srq_type: 2, ..srq },
            (bad, 35),
        ),
        ("reserved bits", CreateSrqCmd { rsvd1: 1, ..srq }, (bad, 45)),
        (
            "a basic SRQ with a domain",
            CreateSrqCmd {
                srq_type: SrqType::Basic.into(),
                cqn: 0,
                ..srq
            },
            (bad, 37),
        ),
    ] {
        assert_eq!(refused(&mut n, &cmd), want, "SRQ: {what}");
    }
    // The SRQ's CQ stays while the SRQ does; the target QP has no queue to map.
    let made = XrcSrq::create(&mut n, XRCD, PD, cqn);
    let target = Qp::create_xrc_tgt(&mut n, XRCD);
    assert_eq!(
        refused(
            &mut n,
            &DestroyCqCmd {
                cqn,
                ..DestroyCqCmd::default()
            }
        )
        .0,
        STATUS_BUSY
    );
    let ctx = n.g.ok(&AllocCtxCmd::default()).ctx;
    let map = MapQidCmd {
        ctx,
        local_qid: 1,
        global: target.qpn,
        kind: QID_KIND_QP,
        rsvd: [0; 3],
    };
    assert_eq!(refused(&mut n, &map), (bad, 9));
    n.g.ok(&DestroyQpCmd {
        qpn: target.qpn,
        rsvd: 0,
    });
    n.g.ok(&DestroySrqCmd {
        srqn: made.srqn,
        rsvd: 0,
    });
}

#[test]
fn a_device_without_xrc_makes_no_xrc_qp_or_srq() {
    let mut g = common::Guest::with_config(|c| c.xrc = false);
    g.bring_up();
    assert_eq!(g.r32(REG_CAPS) & CAP_XRC, 0);
    let eqn = g.create_ceq(4, 2);
    let cq = common::GuestCq::create(&mut g, eqn, 4);
    let tgt = CreateQpCmd {
        qp_type: QpType::XrcTgt.into(),
        sq_cqn: NONE,
        rq_cqn: NONE,
        srqn: NONE,
        xrcd: XRCD,
        ..CreateQpCmd::default()
    };
    let c = g.cmd(&tgt);
    assert_eq!((c.status, c.syndrome), (STATUS_NOT_SUPPORTED, 57));
    let ring = g.alloc(64 << 4, 4096);
    let dbrec = g.alloc(64, 64);
    let c = g.cmd(&CreateSrqCmd {
        ring: BufDesc {
            addr: ring,
            ..BufDesc::default()
        },
        dbrec_addr: dbrec,
        pd: PD,
        log_size: 4,
        log_stride: 6,
        srq_type: SrqType::Xrc.into(),
        xrcd: XRCD,
        cqn: cq.cqn,
        ..CreateSrqCmd::default()
    });
    assert_eq!((c.status, c.syndrome), (STATUS_NOT_SUPPORTED, 35));
    let mut g = common::Guest::new();
    g.bring_up();
    assert_eq!(g.r32(REG_CAPS) & CAP_XRC, CAP_XRC, "offered by default");
}
