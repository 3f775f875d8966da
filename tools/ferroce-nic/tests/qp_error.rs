// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! One QP state: a QP the device moves to ERR (by any path) is in ERR in the engine too: it
//! stops sending, retransmitting, writing READ responses and executing requests.

mod common;

use common::roce::*;
use ferroce_hw::*;
use ferroce_nic::engine::headers::{syndrome, Reth};
use ferroce_nic::engine::opcode::op;

/// Posts a malformed WQE (unknown opcode): the device moves the QP to ERR and flushes.
fn fatal_wqe(s: &mut Scripted) {
    let ctrl = WqeCtrl {
        wr_id: 99,
        opcode: 0x55,
        flags: WQE_FLAG_SIGNALED,
        ..WqeCtrl::default()
    };
    s.qp.put(&s.n, ctrl, &[0; 40], &[]);
    s.qp.ring(&mut s.n);
    s.run(4);
}

/// The QP's transport state, which its QP object owns between the engine's turns: whether
/// it has work, and its requester's next deadline.
fn transport(s: &Scripted) -> (bool, Option<std::time::Instant>) {
    let t = s
        .qp_object()
        .transport
        .as_ref()
        .expect("not lent between turns");
    (t.busy(), t.next_deadline())
}

#[test]
fn qp_error_from_a_fatal_wqe_stops_the_engine() {
    let mut s = Scripted::new(MIB, fast_timeout());
    let at = one_write(&mut s, 1);
    let (busy, deadline) = transport(&s);
    assert!(busy && deadline.is_some(), "the WRITE in flight, timed");
    fatal_wqe(&mut s);
    // The device stopped the transport as it moved the QP: nothing in flight, no timer.
    assert_eq!(transport(&s), (false, None));
    assert!(
        statuses(&s.cqes)
            .iter()
            .all(|(_, st)| *st == WcStatus::WrFlushErr),
        "{:?}",
        statuses(&s.cqes)
    );
    // Nothing more leaves an ERR QP: no retransmission of the flushed WRITE.
    let later = sent_during(&mut s, 30);
    assert!(
        later.is_empty(),
        "an ERR QP sent {} packets (PSN {at:#x} again: {})",
        later.len(),
        later.iter().any(|p| p.bth.psn == at)
    );
    // Nor does it execute a request: this WRITE would land in the data MR.
    let mut b = s.ack(s.rq_psn, 0);
    b.aeth = None;
    b.bth.opcode = op::RC_WRITE_ONLY;
    b.bth.ack_req = true;
    b.reth = Some(Reth {
        va: s.n.buf,
        rkey: s.n.key,
        len: 64,
    });
    s.inject(&b, &pattern(64, 3));
    assert_eq!(
        s.n.g.read(s.n.buf, 64),
        vec![0; 64],
        "an ERR QP executed a WRITE"
    );
    assert!(s.sent().is_empty(), "an ERR QP answered a request");
}

#[test]
fn qp_error_from_a_fatal_wqe_stops_read_response_writes() {
    let mut s = Scripted::new(MIB, Conn::default());
    let buf = s.n.buf;
    let seg = rdma_seg(0x10_0000, 0x1234);
    s.qp.post(&mut s.n, 1, WR_RDMA_READ, buf, 100, &seg, 0);
    let sent = s.sent();
    assert_eq!(sent.len(), 1);
    let at = sent[0].bth.psn;
    fatal_wqe(&mut s);
    let mut b = s.ack(at, syndrome::ACK);
    b.bth.opcode = op::RC_READ_RESPONSE_ONLY;
    s.inject(&b, &pattern(100, 7));
    assert_eq!(
        s.n.g.read(buf, 100),
        vec![0; 100],
        "a READ response was written into memory for a QP in ERR"
    );
}

#[test]
fn error_completion_the_cq_cannot_take_still_moves_the_qp_to_error() {
    let mut s = Scripted::new(MIB, Conn::default());
    let at = one_write(&mut s, 1);
    // A consumer index the CQ's producer cannot be behind: the next CQE write fails (and
    // puts the CQ in error). The test stops polling the CQ so that it stays so.
    s.n.g.write_u32(s.n.cq.dbrec, 0x8000);
    let nak = s.ack(at, syndrome::NAK_REMOTE_ACCESS);
    let frame = s.frame_from(s.peer_gid, &nak, &[]);
    s.wire.sink.send(&frame);
    for _ in 0..4 {
        s.n.g.dev.process();
    }
    assert_eq!(
        s.qp_object().state,
        QpState::Err,
        "the engine failed the WRITE and went to ERR; the device's QP did not"
    );
}
