// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The IBTA 1.5 verbs for persistent memory between two NICs: ATOMIC WRITE (an 8-byte store in
//! one piece) and FLUSH (placement types global and persistent, selectivity range and MR), and
//! what their responder refuses.

mod common;

use common::roce::*;
use common::CqeStatus;
use ferroce_hw::*;

const ALL: u32 = ACCESS_REMOTE_WRITE
    | ACCESS_REMOTE_READ
    | ACCESS_REMOTE_ATOMIC
    | ACCESS_FLUSH_GLOBAL
    | ACCESS_FLUSH_PERSISTENT;

fn pair(access: u32) -> Pair {
    Pair::new(
        MIB,
        Conn {
            access,
            ..Conn::default()
        },
    )
}

fn atomic_write(p: &mut Pair, wr_id: u64, remote_addr: u64, rkey: u32, value: u64) {
    let seg = AtomicWriteSeg {
        remote_addr,
        rkey,
        value: value.to_le_bytes(),
        ..AtomicWriteSeg::default()
    };
    p.qa.post(&mut p.a, wr_id, WR_ATOMIC_WRITE, 0, 0, &seg.encode(), 0);
}

fn flush(p: &mut Pair, wr_id: u64, seg: FlushSeg) {
    p.qa.post(&mut p.a, wr_id, WR_FLUSH, 0, 0, &seg.encode(), 0);
}

#[test]
fn atomic_write_stores_eight_bytes_and_flush_answers() {
    let mut p = pair(ALL);
    let (buf, key) = (p.b.buf, p.b.key);
    p.b.g.write(buf, &[0xee; 24]);
    atomic_write(&mut p, 1, buf + 8, key, 0x1122_3344_5566_7788);
    // A WRITE, then a FLUSH of its range, then of the whole MR, both placement types.
    let data = p.a.fill(p.a.buf, 4096, 3);
    let a_buf = p.a.buf;
    p.qa.post(
        &mut p.a,
        2,
        WR_RDMA_WRITE,
        a_buf,
        4096,
        &rdma_seg(buf + 4096, key),
        0,
    );
    let range = FlushSeg {
        remote_addr: buf + 4096,
        rkey: key,
        length: 4096,
        placement: FLUSH_GLOBAL,
        level: FLUSH_RANGE,
        ..FlushSeg::default()
    };
    flush(&mut p, 3, range);
    let whole = FlushSeg {
        rkey: key,
        placement: FLUSH_GLOBAL | FLUSH_PERSISTENT,
        level: FLUSH_MR,
        ..FlushSeg::default()
    };
    flush(&mut p, 4, whole);
    let (ca, _) = p.wait_cqes(4, 0);
    let got: Vec<_> = ca
        .iter()
        .map(|c| (c.wr_id, c.wc_status(), c.opcode))
        .collect();
    assert_eq!(
        got,
        [
            (1, WcStatus::Success, CQE_OP_ATOMIC_WRITE),
            (2, WcStatus::Success, CQE_OP_RDMA_WRITE),
            (3, WcStatus::Success, CQE_OP_FLUSH),
            (4, WcStatus::Success, CQE_OP_FLUSH),
        ]
    );
    let mut want = vec![0xee; 24];
    want[8..16].copy_from_slice(&0x1122_3344_5566_7788u64.to_le_bytes());
    assert_eq!(p.b.g.read(buf, 24), want);
    assert_eq!(p.b.g.read(buf + 4096, 4096), data);
    // Nothing was sent twice, and the answers were the empty READ responses.
    assert_eq!(p.a.counter(COUNTER_RETRANSMITS), 0);
}

#[test]
fn what_the_responder_refuses() {
    // The QP grants no flush: a FLUSH is a remote access error, and the QP goes to ERR.
    let mut p = pair(ACCESS_REMOTE_WRITE);
    let (buf, key) = (p.b.buf, p.b.key);
    let seg = FlushSeg {
        remote_addr: buf,
        rkey: key,
        length: 64,
        placement: FLUSH_PERSISTENT,
        ..FlushSeg::default()
    };
    flush(&mut p, 1, seg);
    let (ca, _) = p.wait_cqes(1, 0);
    assert_eq!(ca[0].wc_status(), WcStatus::RemAccessErr);

    // An MR without flush rights, through a QP that has them.
    let mut p = pair(ALL);
    let (buf, b_buf_len) = (p.b.buf, p.b.buf_len as u64);
    let no_flush =
        p.b.mr(buf, b_buf_len, ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE, PD);
    let seg = FlushSeg {
        remote_addr: buf,
        rkey: no_flush,
        placement: FLUSH_GLOBAL,
        level: FLUSH_MR,
        ..FlushSeg::default()
    };
    flush(&mut p, 1, seg);
    let (ca, _) = p.wait_cqes(1, 0);
    assert_eq!(ca[0].wc_status(), WcStatus::RemAccessErr);

    // An ATOMIC WRITE to an address that is not 8-byte aligned: an invalid request.
    let mut p = pair(ALL);
    let (buf, key) = (p.b.buf, p.b.key);
    p.b.g.write(buf, &[0xee; 16]);
    atomic_write(&mut p, 1, buf + 4, key, u64::MAX);
    let (ca, _) = p.wait_cqes(1, 0);
    assert_eq!(ca[0].wc_status(), WcStatus::RemInvReqErr);
    assert_eq!(p.b.g.read(buf, 16), [0xee; 16], "a refused store wrote");

    // A FLUSH that names no placement type is refused before it is sent.
    let mut p = pair(ALL);
    let seg = FlushSeg {
        rkey: p.b.key,
        level: FLUSH_MR,
        ..FlushSeg::default()
    };
    flush(&mut p, 1, seg);
    let (ca, _) = p.wait_cqes(1, 0);
    assert_eq!(ca[0].wc_status(), WcStatus::LocQpOpErr);
    assert_eq!(p.a.counter(COUNTER_TX_PACKETS), 0);
}

#[test]
fn a_duplicate_atomic_write_is_answered_again_not_executed_again() {
    use ferroce_nic::engine::headers::{Feth, Headers, Reth};
    use ferroce_nic::engine::opcode::op;

    let mut s = Scripted::new(
        MIB,
        Conn {
            access: ALL,
            ..Conn::default()
        },
    );
    let (buf, key, at) = (s.n.buf, s.n.key, s.rq_psn);
    let mut b = Headers::new(op::RC_ATOMIC_WRITE, s.qp.qpn, at);
    b.bth.ack_req = true;
    b.reth = Some(Reth {
        va: buf,
        rkey: key,
        len: 8,
    });
    s.inject(&b, &7u64.to_le_bytes());
    let answers = |sent: &[Sent]| {
        sent.iter()
            .map(|p| (p.bth.opcode, p.bth.psn, p.payload.len()))
            .collect::<Vec<_>>()
    };
    let first = s.sent();
    assert_eq!(answers(&first), [(op::RC_READ_RESPONSE_ONLY, at, 0)]);
    assert_eq!(s.n.g.read(buf, 8), 7u64.to_le_bytes());
    // A later store of the node's own, then the requester's retransmission of the first.
    s.n.g.write(buf, &9u64.to_le_bytes());
    s.inject(&b, &7u64.to_le_bytes());
    assert_eq!(answers(&s.sent()), [(op::RC_READ_RESPONSE_ONLY, at, 0)]);
    assert_eq!(
        s.n.g.read(buf, 8),
        9u64.to_le_bytes(),
        "the duplicate was executed"
    );
    // The next PSN: a FLUSH of the whole MR, answered likewise.
    let mut f = Headers::new(op::RC_FLUSH, s.qp.qpn, at + 1);
    f.bth.ack_req = true;
    f.feth = Some(Feth {
        placement: FLUSH_GLOBAL,
        level: FLUSH_MR,
    });
    f.reth = Some(Reth {
        va: 0,
        rkey: key,
        len: 0,
    });
    s.inject(&f, &[]);
    assert_eq!(answers(&s.sent()), [(op::RC_READ_RESPONSE_ONLY, at + 1, 0)]);
}
