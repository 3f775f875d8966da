// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! UC QPs: RC's SEND and RDMA WRITE without acknowledgements. A lost packet loses its message
//! (IBA 9.7.5.1.1, class D): nothing after the gap is written, the receive WQE it took serves
//! the next message, no NAK is sent and the QP stays up; the sender never retransmits.

mod common;

use common::roce::*;
use common::CqeStatus;
use ferroce_hw::*;
use ferroce_nic::engine::headers::{Headers, Reth};
use ferroce_nic::engine::opcode::op;
use ferroce_nic::engine::psn;

/// The path MTU of `Conn::default()`.
const MTU: usize = 1024;

fn uc_scripted() -> Scripted {
    Scripted::of_type(MIB, Conn::default(), QpType::Uc)
}

/// Injects UC request `opcode` at `at` with `payload` (and a RETH for a WRITE's first packet).
fn inject(s: &mut Scripted, opcode: u8, at: u32, reth: Option<Reth>, payload: &[u8]) {
    let mut b = Headers::new(opcode, s.qp.qpn, at);
    b.reth = reth;
    s.inject(&b, payload);
}

#[test]
fn sends_and_writes_cross_without_a_single_ack() {
    let mut p = Pair::of_type(MIB, Conn::default(), QpType::Uc);
    let len = 3 * MTU + 100;
    let (src, dst, wdst, key) = (p.a.buf, p.b.buf + 65536, p.b.buf + 131072, p.b.key);
    let data = p.a.fill(src, len, 1);
    p.qb.post_recv(&mut p.b, 70, dst, len as u32 + 10);
    p.qa.post(&mut p.a, 1, WR_SEND_WITH_IMM, src, len as u32, &[], 0x1234);
    let (ca, cb) = p.wait_cqes(1, 1);
    assert_eq!(statuses(&ca), [(1, WcStatus::Success)]);
    assert_eq!(
        (cb[0].wc_status(), cb[0].wr_id, cb[0].byte_len),
        (WcStatus::Success, 70, len as u32)
    );
    assert_eq!(
        (cb[0].flags & CQE_FLAG_WITH_IMM, cb[0].imm_or_inv),
        (CQE_FLAG_WITH_IMM, 0x1234)
    );
    assert!(p.b.g.read(dst, len) == data, "SEND payload");

    p.qa.post(
        &mut p.a,
        2,
        WR_RDMA_WRITE,
        src,
        len as u32,
        &rdma_seg(wdst, key),
        0,
    );
    p.qb.post_recv(&mut p.b, 71, dst, 16);
    p.qa.post(
        &mut p.a,
        3,
        WR_RDMA_WRITE_WITH_IMM,
        src,
        2000,
        &rdma_seg(wdst + 8192, key),
        0x55,
    );
    let (ca, cb) = p.wait_cqes(2, 1);
    assert_eq!(
        statuses(&ca),
        [(2, WcStatus::Success), (3, WcStatus::Success)]
    );
    assert_eq!(
        (cb[0].wr_id, cb[0].opcode, cb[0].byte_len, cb[0].imm_or_inv),
        (71, CQE_OP_RECV_RDMA_WITH_IMM, 2000, 0x55)
    );
    assert!(p.b.g.read(wdst, len) == data, "WRITE payload");
    assert!(
        p.b.g.read(wdst + 8192, 2000) == data[..2000],
        "WRITE with immediate"
    );
    // B never sent a packet: every WQE completed when its last packet left A.
    assert_eq!(p.a.counter(COUNTER_RX_PACKETS), 0, "something came back");
    assert_eq!(p.b.counter(COUNTER_DROPS), 0);
}

#[test]
fn a_long_message_goes_out_in_one_pass_with_no_ack_requested() {
    let mut s = uc_scripted();
    // 200 packets: more than any congestion window, which no ACK would ever open on UC.
    let len = 200 * MTU;
    let src = s.n.buf;
    s.n.fill(src, len, 2);
    s.qp.post(&mut s.n, 5, WR_SEND, src, len as u32, &[], 0);
    let mut sent = Vec::new();
    for _ in 0..20 {
        sent.extend(s.sent());
        if !s.cqes.is_empty() {
            break;
        }
    }
    assert_eq!(statuses(&s.cqes), [(5, WcStatus::Success)]);
    assert_eq!(sent.len(), 200);
    assert_eq!(sent[0].bth.opcode, op::UC_SEND_FIRST);
    assert!(sent[1..199]
        .iter()
        .all(|p| p.bth.opcode == op::UC_SEND_MIDDLE));
    assert_eq!(sent[199].bth.opcode, op::UC_SEND_LAST);
    for (k, p) in sent.iter().enumerate() {
        assert_eq!(p.bth.psn, psn::add(s.sq_psn, k as u32), "PSN of packet {k}");
        assert!(!p.bth.ack_req, "packet {k} asks for an ACK");
    }
    // Nothing is ever sent again.
    assert!(sent_during(&mut s, 50).is_empty(), "a UC packet was resent");
}

#[test]
fn a_lost_middle_packet_drops_the_message_and_the_wqe_takes_the_next() {
    let mut s = uc_scripted();
    let dst = s.n.buf + 4096;
    s.qp.post_recv(&mut s.n, 9, dst, 8192);
    let at = s.rq_psn;
    let (seq, drops) = (s.n.counter(COUNTER_SEQ_ERRORS), s.n.counter(COUNTER_DROPS));
    inject(&mut s, op::UC_SEND_FIRST, at, None, &pattern(MTU, 1));
    // at + 1 (a MIDDLE) is lost.
    inject(
        &mut s,
        op::UC_SEND_LAST,
        psn::add(at, 2),
        None,
        &pattern(100, 3),
    );
    assert!(s.cqes.is_empty(), "a message with a hole completed");
    assert!(s.sent().is_empty(), "UC answered a loss");
    assert_eq!(s.n.counter(COUNTER_SEQ_ERRORS), seq + 1);
    assert_eq!(s.n.counter(COUNTER_DROPS), drops + 1);
    // A new message, at whatever PSN its sender has reached, lands at the WQE's start.
    let msg = pattern(300, 5);
    inject(&mut s, op::UC_SEND_ONLY, psn::add(at, 7), None, &msg);
    assert_eq!(statuses(&s.cqes), [(9, WcStatus::Success)]);
    assert_eq!(s.cqes[0].byte_len, 300);
    assert!(s.n.g.read(dst, 300) == msg);
    // And the QP goes on from there.
    s.qp.post_recv(&mut s.n, 10, dst + 8192, 64);
    inject(&mut s, op::UC_SEND_ONLY, psn::add(at, 8), None, &msg[..64]);
    assert_eq!(s.cqes.len(), 2);
    assert_eq!(s.cqes[1].wc_status(), WcStatus::Success);
}

#[test]
fn a_lost_first_packet_drops_what_follows_it() {
    let mut s = uc_scripted();
    let dst = s.n.buf + 4096;
    let at = s.rq_psn;
    let key = s.n.key;
    // WRITE FIRST at `at` is lost: the MIDDLE and LAST after it have no RETH to go by.
    inject(
        &mut s,
        op::UC_WRITE_MIDDLE,
        psn::add(at, 1),
        None,
        &pattern(MTU, 1),
    );
    inject(
        &mut s,
        op::UC_WRITE_LAST,
        psn::add(at, 2),
        None,
        &pattern(10, 2),
    );
    assert!(
        s.n.g.read(dst, 3 * MTU).iter().all(|&b| b == 0),
        "written without a RETH"
    );
    // A WRITE whose middle is lost: its first packet is written, nothing after it.
    let reth = Reth {
        va: dst,
        rkey: key,
        len: (2 * MTU + 10) as u32,
    };
    let first = pattern(MTU, 4);
    inject(
        &mut s,
        op::UC_WRITE_FIRST,
        psn::add(at, 3),
        Some(reth),
        &first,
    );
    inject(
        &mut s,
        op::UC_WRITE_LAST,
        psn::add(at, 5),
        None,
        &pattern(10, 5),
    );
    assert!(s.n.g.read(dst, MTU) == first);
    assert!(s.n.g.read(dst + 2 * MTU as u64, 10).iter().all(|&b| b == 0));
    assert!(s.sent().is_empty() && s.cqes.is_empty());
}

#[test]
fn a_bad_rkey_or_a_missing_wqe_drops_the_message_not_the_qp() {
    let mut s = uc_scripted();
    let dst = s.n.buf + 4096;
    let at = s.rq_psn;
    let key = s.n.key;
    let data = pattern(64, 6);
    let bad = Reth {
        va: dst,
        rkey: key ^ 0x100,
        len: 64,
    };
    inject(&mut s, op::UC_WRITE_ONLY, at, Some(bad), &data);
    let beyond = Reth {
        va: s.n.buf + MIB as u64 - 32,
        rkey: key,
        len: 64,
    };
    inject(
        &mut s,
        op::UC_WRITE_ONLY,
        psn::add(at, 1),
        Some(beyond),
        &data,
    );
    // No receive WQE: no RNR NAK, the SEND is gone.
    inject(&mut s, op::UC_SEND_ONLY, psn::add(at, 2), None, &data);
    assert!(s.n.g.read(dst, 64).iter().all(|&b| b == 0));
    assert!(s.sent().is_empty(), "UC sent a NAK");
    assert!(s.cqes.is_empty());
    // The QP is still up: the next ones land.
    s.qp.post_recv(&mut s.n, 11, dst + 1024, 64);
    let good = Reth { rkey: key, ..bad };
    inject(
        &mut s,
        op::UC_WRITE_ONLY,
        psn::add(at, 3),
        Some(good),
        &data,
    );
    inject(&mut s, op::UC_SEND_ONLY, psn::add(at, 4), None, &data);
    assert!(s.n.g.read(dst, 64) == data);
    assert!(s.n.g.read(dst + 1024, 64) == data);
    assert_eq!(statuses(&s.cqes), [(11, WcStatus::Success)]);
}

#[test]
fn uc_refuses_read_and_atomics_as_malformed() {
    for opcode in [
        WR_RDMA_READ,
        WR_ATOMIC_CMP_SWAP,
        WR_ATOMIC_FETCH_ADD,
        WR_SEND_WITH_INV,
    ] {
        let mut s = uc_scripted();
        let src = s.n.buf;
        let key = s.n.key;
        s.qp.post(&mut s.n, 1, opcode, src, 8, &rdma_seg(src + 64, key), 0);
        let sent = s.sent();
        assert!(sent.is_empty(), "opcode {opcode}: sent {}", sent.len());
        assert_eq!(s.cqes.len(), 1, "opcode {opcode}");
        assert_ne!(s.cqes[0].wc_status(), WcStatus::Success, "opcode {opcode}");
    }
}

#[test]
fn rc_and_uc_packets_do_not_cross() {
    let mut s = uc_scripted();
    let dst = s.n.buf + 4096;
    s.qp.post_recv(&mut s.n, 12, dst, 64);
    let (drops, at) = (s.n.counter(COUNTER_DROPS), s.rq_psn);
    inject(&mut s, op::RC_SEND_ONLY, at, None, &pattern(64, 7));
    assert!(s.cqes.is_empty(), "an RC SEND reached a UC QP");
    assert_eq!(s.n.counter(COUNTER_DROPS), drops + 1);

    let mut r = Scripted::new(MIB, Conn::default());
    let dst = r.n.buf + 4096;
    r.qp.post_recv(&mut r.n, 13, dst, 64);
    let mut b = Headers::new(op::UC_SEND_ONLY, r.qp.qpn, r.rq_psn);
    b.bth.ack_req = true;
    r.inject(&b, &pattern(64, 8));
    assert!(r.cqes.is_empty(), "a UC SEND reached an RC QP");
    assert!(r.sent().is_empty());
}
