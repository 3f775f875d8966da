// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The requester against a peer the test plays by hand ([`Scripted`]): responses that are
//! forged, stale, ahead of what was sent or from another host complete nothing.

mod common;

use std::time::Duration;

use common::objects::{create_mw, next_key};
use common::roce::*;
use ferroce_hw::*;
use ferroce_nic::engine::headers::syndrome;
use ferroce_nic::engine::opcode::op;
use ferroce_nic::engine::psn;
use ferroce_nic::engine::EngineHost;

#[test]
fn ack_from_another_host_completes_nothing() {
    let mut s = Scripted::new(MIB, Conn::default());
    let at = one_write(&mut s, 1);
    assert_eq!(at, s.sq_psn);
    let drops = s.n.counter(COUNTER_DROPS);
    let ack = s.ack(at, syndrome::ACK);
    s.inject_from(stranger_gid(), &ack, &[]);
    assert!(
        s.cqes.is_empty(),
        "an ACK from another host completed the WRITE: {:?}",
        statuses(&s.cqes)
    );
    assert_eq!(s.n.counter(COUNTER_DROPS), drops + 1, "counted as a drop");
    s.inject(&ack, &[]);
    assert_eq!(statuses(&s.cqes), [(1, WcStatus::Success)]);
}

/// An ACK covers the messages on both sides of a local operation (done at once, without PSNs)
/// between them. SRP and RNBD post a fast registration between SENDs: with the requester's
/// ACK walk stopping at the local operation, the SEND after it stayed outstanding though
/// acknowledged, no later ACK came, and it ended in RetryExcErr without a retransmission.
#[test]
fn one_ack_completes_the_messages_around_a_local_operation() {
    let mut s = Scripted::new(MIB, Conn::default());
    let (mr, buf) = (s.n.key, s.n.buf);
    let mw = next_key(create_mw(&mut s.n.g, MW_TYPE_2));
    let first = one_write(&mut s, 1);
    let bind = BindMwSeg {
        addr: buf,
        length: 64,
        mw_key: mw,
        mr_key: mr,
        access: ACCESS_REMOTE_WRITE,
        ..BindMwSeg::default()
    };
    s.qp.post(&mut s.n, 2, WR_BIND_MW, 0, 0, &bind.encode(), 0);
    let second = one_write(&mut s, 3);
    assert_eq!(second, psn::add(first, 1), "the bind takes no PSN");
    assert!(
        s.cqes.is_empty(),
        "completed before any ACK: {:?}",
        statuses(&s.cqes)
    );
    let ack = s.ack(second, syndrome::ACK);
    s.inject(&ack, &[]);
    s.run(4);
    assert_eq!(
        statuses(&s.cqes),
        [
            (1, WcStatus::Success),
            (2, WcStatus::Success),
            (3, WcStatus::Success)
        ],
        "one ACK of the second WRITE"
    );
}

#[test]
fn ack_beyond_the_last_sent_psn_completes_nothing() {
    let mut s = Scripted::new(MIB, Conn::default());
    let first = one_write(&mut s, 1);
    let second = one_write(&mut s, 2);
    assert_eq!(second, psn::add(first, 1));
    let drops = s.n.counter(COUNTER_DROPS);
    // Ahead of everything sent, but less than 2^23 ahead: "after" in PSN arithmetic (a
    // forged ACK, or one left over from 2^23 PSNs ago).
    for ahead in [2, 1000, (1 << 23) - 1] {
        let ack = s.ack(psn::add(second, ahead), syndrome::ACK);
        s.inject(&ack, &[]);
        assert!(
            s.cqes.is_empty(),
            "an ACK {ahead} PSNs beyond the last one sent completed: {:?}",
            statuses(&s.cqes)
        );
    }
    assert_eq!(s.n.counter(COUNTER_DROPS), drops + 3, "counted as drops");
    let ack = s.ack(second, syndrome::ACK);
    s.inject(&ack, &[]);
    assert_eq!(
        statuses(&s.cqes),
        [(1, WcStatus::Success), (2, WcStatus::Success)]
    );
}

#[test]
fn ack_does_not_complete_a_half_sent_message() {
    let mut s = Scripted::new(MIB, Conn::default());
    let seg = rdma_seg(0x10_0000, 0x1234);
    let buf = s.n.buf;
    // 100 packets at a 1024-byte MTU: more than the initial window.
    s.qp.post(&mut s.n, 1, WR_RDMA_WRITE, buf, 100 << 10, &seg, 0);
    let mut sent = s.sent();
    assert!(
        !sent.is_empty() && sent.len() < 100,
        "sent {} packets",
        sent.len()
    );
    let last_psn = psn::add(s.sq_psn, 99);
    let ack = s.ack(last_psn, syndrome::ACK);
    s.inject(&ack, &[]);
    assert!(
        s.cqes.is_empty(),
        "an ACK for the last PSN completed a WRITE of which {} of 100 packets were sent: {:?}",
        sent.len(),
        statuses(&s.cqes)
    );
    // The real ACKs, a window at a time, complete it once every packet went out.
    let mut psns: Vec<u32> = sent.iter().map(|p| p.bth.psn).collect();
    for _ in 0..100 {
        if !s.cqes.is_empty() {
            break;
        }
        let Some(last) = sent.last() else {
            s.run(4);
            continue;
        };
        let ack = s.ack(last.bth.psn, syndrome::ACK);
        s.inject(&ack, &[]);
        sent = s.sent();
        psns.extend(sent.iter().map(|p| p.bth.psn));
    }
    assert_eq!(statuses(&s.cqes), [(1, WcStatus::Success)]);
    psns.sort_by_key(|p| psn::diff(*p, s.sq_psn));
    psns.dedup();
    assert_eq!(psns.len(), 100, "every packet was sent");
}

#[test]
fn nak_outside_the_window_or_from_another_host_is_dropped() {
    let mut s = Scripted::new(MIB, Conn::default());
    let at = one_write(&mut s, 1);
    let drops = s.n.counter(COUNTER_DROPS);
    // A NAK acknowledges everything before its PSN: one far ahead must not.
    let nak = s.ack(psn::add(at, 500), syndrome::NAK_REMOTE_ACCESS);
    s.inject(&nak, &[]);
    assert!(
        s.cqes.is_empty(),
        "a NAK beyond the window completed the WRITE: {:?}",
        statuses(&s.cqes)
    );
    let nak = s.ack(at, syndrome::NAK_REMOTE_ACCESS);
    s.inject_from(stranger_gid(), &nak, &[]);
    assert!(
        s.cqes.is_empty(),
        "a NAK from another host failed the WRITE: {:?}",
        statuses(&s.cqes)
    );
    assert_eq!(s.n.counter(COUNTER_DROPS), drops + 2, "counted as drops");
    s.inject(&nak, &[]);
    assert_eq!(statuses(&s.cqes), [(1, WcStatus::RemAccessErr)]);
}

#[test]
fn stale_rnr_nak_does_not_stop_retransmission() {
    let mut s = Scripted::new(MIB, fast_timeout());
    let at = one_write(&mut s, 1);
    // An RNR NAK for a PSN before the window (acknowledged long ago).
    let nak = s.ack(psn::sub(at, 3), syndrome::RNR_NAK | 1);
    s.inject(&nak, &[]);
    let again = sent_during(&mut s, 30);
    assert!(
        again.iter().any(|p| p.bth.psn == at),
        "the unacknowledged WRITE was never retransmitted after a stale RNR NAK"
    );
}

#[test]
fn read_response_and_atomic_ack_from_another_host_are_dropped() {
    let mut s = Scripted::new(MIB, Conn::default());
    let buf = s.n.buf;
    let seg = rdma_seg(0x10_0000, 0x1234);
    s.qp.post(&mut s.n, 1, WR_RDMA_READ, buf, 100, &seg, 0);
    let sent = s.sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].bth.opcode, op::RC_READ_REQUEST);
    let at = sent[0].bth.psn;
    let data = pattern(100, 7);
    let mut b = s.ack(at, syndrome::ACK);
    b.bth.opcode = op::RC_READ_RESPONSE_ONLY;
    s.inject_from(stranger_gid(), &b, &data);
    assert_eq!(
        s.n.g.read(buf, 100),
        vec![0; 100],
        "a READ response from another host was written into memory"
    );
    assert!(s.cqes.is_empty(), "{:?}", statuses(&s.cqes));
    s.inject(&b, &data);
    assert_eq!(s.n.g.read(buf, 100), data);
    assert_eq!(statuses(&s.cqes), [(1, WcStatus::Success)]);

    let target = buf + 4096;
    let seg = atomic_seg(0x10_0000, 0x1234, 0, 9);
    s.qp.post(&mut s.n, 2, WR_ATOMIC_CMP_SWAP, target, 8, &seg, 0);
    let sent = s.sent();
    assert_eq!(sent.len(), 1);
    let at = sent[0].bth.psn;
    let mut b = s.ack(at, syndrome::ACK);
    b.bth.opcode = op::RC_ATOMIC_ACKNOWLEDGE;
    b.atomic_ack = Some(0x1122_3344_5566_7788);
    s.inject_from(stranger_gid(), &b, &[]);
    assert_eq!(
        s.n.g.read(target, 8),
        vec![0; 8],
        "an atomic ACK from another host was written into memory"
    );
    assert_eq!(s.cqes.len(), 1, "{:?}", statuses(&s.cqes));
    s.inject(&b, &[]);
    assert_eq!(
        s.n.g.read(target, 8),
        0x1122_3344_5566_7788u64.to_le_bytes()
    );
    assert_eq!(
        statuses(&s.cqes),
        [(1, WcStatus::Success), (2, WcStatus::Success)]
    );
}

/// An RDMA READ request for `len` bytes at the node's data MR, PSN `at`.
fn read_request(s: &Scripted, at: u32, len: u32) -> Vec<u8> {
    let mut b = s.ack(at, 0);
    b.aeth = None;
    b.bth.opcode = op::RC_READ_REQUEST;
    b.bth.ack_req = true;
    b.reth = Some(ferroce_nic::engine::headers::Reth {
        va: s.n.buf,
        rkey: s.n.key,
        len,
    });
    s.frame_from(s.peer_gid, &b, &[])
}

#[test]
fn reads_beyond_max_dest_rd_atomic_are_invalid_requests() {
    let mut s = Scripted::new(
        MIB,
        Conn {
            max_dest_rd_atomic: 2,
            ..Conn::default()
        },
    );
    // Three READs arrive before the node answers any: the third has no responder resource.
    for k in 0..3 {
        let f = read_request(&s, psn::add(s.rq_psn, k), 100);
        s.wire.sink.send(&f);
    }
    let sent = s.sent();
    let seen: Vec<(u8, u32, Option<u8>)> = sent
        .iter()
        .map(|p| (p.bth.opcode, p.bth.psn, p.aeth.map(|a| a.syndrome)))
        .collect();
    assert_eq!(
        seen,
        [
            (op::RC_READ_RESPONSE_ONLY, s.rq_psn, Some(syndrome::ACK)),
            (
                op::RC_READ_RESPONSE_ONLY,
                psn::add(s.rq_psn, 1),
                Some(syndrome::ACK)
            ),
            (
                op::RC_ACKNOWLEDGE,
                psn::add(s.rq_psn, 2),
                Some(syndrome::NAK_INVALID_REQUEST)
            ),
        ],
        "two READs answered, the third NAKed"
    );
}

#[test]
fn read_longer_than_2_31_bytes_is_an_invalid_request() {
    let mut s = Scripted::new(MIB, Conn::default());
    // An MR long enough that only the length limit refuses the READ.
    let (buf, len) = (s.n.buf, 1u64 << 32);
    let key = s.n.mr(buf, len, ACCESS_VALID_MASK, PD);
    let mut b = s.ack(s.rq_psn, 0);
    b.aeth = None;
    b.bth.opcode = op::RC_READ_REQUEST;
    b.bth.ack_req = true;
    b.reth = Some(ferroce_nic::engine::headers::Reth {
        va: buf,
        rkey: key,
        len: (1 << 31) + 4096,
    });
    s.inject(&b, &[]);
    let sent = s.sent();
    let first = sent
        .first()
        .map(|p| (p.bth.opcode, p.aeth.map(|a| a.syndrome)));
    assert_eq!(
        first,
        Some((op::RC_ACKNOWLEDGE, Some(syndrome::NAK_INVALID_REQUEST))),
        "a READ of 2^31 + 4096 bytes was not refused ({} packets sent)",
        sent.len()
    );
}

/// However deep the ring, the device holds a bounded number of a QP's send WQEs (each a copy it
/// keeps until completion); the rest wait in the ring and go out as completions make room.
#[test]
fn the_device_holds_a_bounded_number_of_send_wqes() {
    const POSTED: u64 = 200;
    let mut s = Scripted::new(MIB, Conn::default());
    let seg = rdma_seg(0x10_0000, 0x1234);
    let buf = s.n.buf;
    for wr_id in 0..POSTED {
        s.qp.post(&mut s.n, wr_id, WR_RDMA_WRITE, buf, 100, &seg, 0);
    }
    let held = |s: &Scripted| s.qp_object().inflight.len();
    let mut most = 0;
    for _ in 0..1000 {
        let sent = s.sent();
        most = most.max(held(&s));
        if let Some(last) = sent
            .iter()
            .map(|p| p.bth.psn)
            .max_by_key(|&p| psn::diff(p, s.sq_psn))
        {
            let ack = s.ack(last, syndrome::ACK);
            s.inject(&ack, &[]);
        }
        if s.cqes.len() as u64 == POSTED {
            break;
        }
    }
    assert!(
        most <= ferroce_nic::qp::MAX_HELD_SENDS,
        "the device held {most} WQEs of one QP"
    );
    let wr_ids: Vec<u64> = s.cqes.iter().map(|c| c.wr_id).collect();
    assert_eq!(
        wr_ids,
        (0..POSTED).collect::<Vec<_>>(),
        "every WRITE completed, in order"
    );
}

/// A SEND ONLY with AckReq at `at`, carrying `payload`.
fn send_request(s: &Scripted, at: u32, payload: &[u8]) -> Vec<u8> {
    let mut b = s.ack(at, 0);
    b.aeth = None;
    b.bth.opcode = op::RC_SEND_ONLY;
    b.bth.ack_req = true;
    s.frame_from(s.peer_gid, &b, payload)
}

/// A peer queues `reads` READs of `len` bytes each, then a SEND with AckReq; returns the
/// node, the PSN of the SEND, and the READs' first PSNs.
fn reads_then_a_send(reads: u32, len: u32) -> (Scripted, u32, Vec<u32>) {
    let mut s = Scripted::new(
        len as usize,
        Conn {
            mtu: MTU_4096,
            ..Conn::default()
        },
    );
    let buf = s.n.buf;
    s.qp.post_recv(&mut s.n, 9, buf, 64);
    let per_read = len.div_ceil(4096);
    let firsts: Vec<u32> = (0..reads)
        .map(|k| psn::add(s.rq_psn, k * per_read))
        .collect();
    for &at in &firsts {
        let f = read_request(&s, at, len);
        s.wire.sink.send(&f);
    }
    let send = psn::add(s.rq_psn, reads * per_read);
    let f = send_request(&s, send, &[7; 32]);
    s.wire.sink.send(&f);
    (s, send, firsts)
}

/// Issue 36, defect 1: 16 READs of 64 MiB (max_dest_rd_atomic) and a SEND with AckReq once
/// held the device thread until all 262,144 responses were sent, every command and doorbell of
/// every function waiting. Now a device round sends at most a budget of them, and a command
/// posted meanwhile completes in the next round.
#[test]
fn a_peers_reads_take_the_device_a_budget_at_a_time() {
    use ferroce_nic::engine::responder::REPLY_BUDGET;
    let (mut s, _, _) = reads_then_a_send(16, 64 << 20);
    let mut most = 0;
    for round in 0..64 {
        let before = s.n.counter(COUNTER_TX_PACKETS);
        s.n.g.dev.process();
        let sent = s.n.counter(COUNTER_TX_PACKETS) - before;
        most = most.max(sent);
        assert!(
            sent <= u64::from(REPLY_BUDGET),
            "round {round}: {sent} frames sent in one device round"
        );
        assert!(sent > 0, "round {round}: the responses stopped");
        s.take_sent();
        if round % 8 == 0 {
            // Posted and polled within one round (Guest::cmd asserts its completion).
            s.n.g.cmd_raw(CMD_NOP, &[], 0);
        }
    }
    eprintln!("16 x 64 MiB READs: at most {most} frames a device round");
}

/// Issue 39: turns are fair across QPs. A peer has queued 1 GiB of READs on one QP (16 of
/// 64 MiB); a second QP of the same node posts a SEND. Its SEND goes out in the next device
/// round, beside one budget of READ responses, and completes in the round its ACK arrives,
/// while the READs have nearly all of their 262,144 responses still to send.
#[test]
fn a_send_is_not_held_behind_another_qps_read_backlog() {
    use ferroce_nic::engine::headers::{Aeth, Headers};
    use ferroce_nic::engine::responder::REPLY_BUDGET;
    let (mut s, _, _) = reads_then_a_send(16, 64 << 20);
    let mut other = Qp::create(&mut s.n, QpType::Rc);
    let conn = Conn {
        mtu: MTU_4096,
        ..Conn::default()
    };
    let (peer_gid, peer_mac) = (s.peer_gid, s.peer_mac);
    other.connect_to(&mut s.n, peer_gid, peer_mac, 0x78, 1000, 2000, conn);
    // The commands that made the QP ran device rounds: the READs are under way.
    let before = s.n.counter(COUNTER_TX_READ_RESPONSES);
    assert!(before > 0);
    s.take_sent();
    let buf = s.n.buf;
    other.post(&mut s.n, 5, WR_SEND, buf, 32, &[], 0);
    s.round();
    let sent = s.take_sent();
    assert!(
        sent.iter()
            .any(|p| p.bth.dest_qpn == 0x78 && p.bth.psn == 1000),
        "the SEND went out in the first round"
    );
    let responses = sent.iter().filter(|p| p.bth.dest_qpn == s.peer_qpn).count();
    assert!(
        responses <= REPLY_BUDGET as usize,
        "{responses} READ responses in one round"
    );
    let mut ack = Headers::new(op::RC_ACKNOWLEDGE, other.qpn, 1000);
    ack.aeth = Some(Aeth {
        syndrome: syndrome::ACK,
        msn: 1,
    });
    let frame = s.frame_from(peer_gid, &ack, &[]);
    s.wire.sink.send(&frame);
    s.round();
    // (9: the receive of the READ peer's SEND, which came behind its READs.)
    assert_eq!(
        statuses(&s.cqes),
        [(9, WcStatus::Success), (5, WcStatus::Success)],
        "completed in the next round"
    );
    let total = s.n.counter(COUNTER_TX_READ_RESPONSES) - before;
    assert!(
        total <= 2 * u64::from(REPLY_BUDGET),
        "{total} READ responses sent meanwhile"
    );
}

/// The same answered in full: every READ's responses in PSN order, one READ after the
/// other, and the SEND's ACK after the last of them (an ACK must not overtake a READ response:
/// the requester would take the response for lost).
#[test]
fn queued_read_responses_go_out_in_order_before_the_ack_behind_them() {
    let (mut s, send, firsts) = reads_then_a_send(16, 256 << 10);
    let mut sent = Vec::new();
    for _ in 0..200 {
        s.round();
        sent.extend(s.take_sent());
    }
    let psns: Vec<u32> = sent.iter().map(|p| p.bth.psn).collect();
    let expected: Vec<u32> = (0..=psn::diff(send, firsts[0]) as u32)
        .map(|k| psn::add(firsts[0], k))
        .collect();
    assert_eq!(psns, expected, "responses then the ACK, in PSN order");
    let last = sent.last().expect("the ACK");
    assert_eq!(
        (last.bth.opcode, last.aeth.map(|a| a.syndrome)),
        (op::RC_ACKNOWLEDGE, Some(syndrome::ACK))
    );
    assert!(sent[..sent.len() - 1]
        .iter()
        .all(|p| p.bth.opcode != op::RC_ACKNOWLEDGE));
    assert_eq!(statuses(&s.cqes), [(9, WcStatus::Success)]);
}

/// Found by the pair fuzz target: a responder that acknowledges past a READ it never answers
/// (an off-path READ request had taken those PSNs, so the requester's READ is a duplicate
/// outside any READ the responder knows, dropped) held the requester in implied-NAK go-backs
/// for ever: its window resent at once on every ACK, no retry counted, and no device time
/// passing. Each go-back now counts against retry_cnt, as a sequence NAK's does.
#[test]
fn acks_past_a_read_never_answered_use_up_the_retries() {
    let conn = Conn {
        retry_cnt: 3,
        ..Conn::default()
    };
    let mut s = Scripted::new(MIB, conn);
    let buf = s.n.buf;
    let seg = rdma_seg(0x10_0000, 0x1234);
    s.qp.post(&mut s.n, 1, WR_RDMA_READ, buf, 64, &seg, 0);
    // A window of SENDs behind it, which the responder acknowledges as they come.
    let sends = 40;
    for k in 0..sends {
        s.qp.post(&mut s.n, 2 + k, WR_SEND, buf + 0x1000, 64, &[0; 40], 0);
    }
    let start = s.n.g.time.now();
    let mut go_backs = 0;
    for _ in 0..500 {
        if !s.cqes.is_empty() {
            break;
        }
        let sent = s.sent();
        go_backs += sent.iter().filter(|p| p.bth.psn == s.sq_psn).count();
        for p in sent {
            let ack = s.ack(p.bth.psn, 0x1f);
            s.inject(&ack, &[]);
        }
    }
    let mut expected = vec![(1, WcStatus::RetryExcErr)];
    expected.extend((2..2 + sends).map(|id| (id, WcStatus::WrFlushErr)));
    assert_eq!(
        statuses(&s.cqes),
        expected,
        "after {go_backs} sends of the READ"
    );
    assert_eq!(s.n.g.time.now(), start, "no timer took part");
    // Each ACK of a new SEND is progress and refills the retries; once the last is
    // acknowledged, 3 go-backs count and the next one fails the READ.
    assert!(
        go_backs <= 1 + sends as usize + 3,
        "{go_backs} sends of the READ"
    );
}

/// Found by the pair fuzz target: once an ACK past an atomic, ATOMIC WRITE or FLUSH had moved
/// the oldest unacknowledged PSN beyond it, a go-back for it (another ACK past it, or the
/// timer) started from that PSN, which no WQE holds: the request was never sent again, and
/// it could only fail. A go-back now resends its own PSN.
#[test]
fn an_answer_never_sent_is_asked_for_again_after_an_ack_past_it() {
    let atomic_write = AtomicWriteSeg {
        remote_addr: 0x10_0000,
        rkey: 0x1234,
        value: 7u64.to_le_bytes(),
        ..AtomicWriteSeg::default()
    };
    let flush = FlushSeg {
        remote_addr: 0x10_0000,
        rkey: 0x1234,
        length: 64,
        placement: FLUSH_GLOBAL,
        ..FlushSeg::default()
    };
    let seg = |bytes: &[u8]| {
        let mut seg = [0u8; 40];
        seg[..bytes.len()].copy_from_slice(bytes);
        seg
    };
    for (name, opcode, len, seg) in [
        (
            "CMP_SWAP",
            WR_ATOMIC_CMP_SWAP,
            8,
            atomic_seg(0x10_0000, 0x1234, 5, 6),
        ),
        (
            "ATOMIC_WRITE",
            WR_ATOMIC_WRITE,
            0,
            seg(&atomic_write.encode()),
        ),
        ("FLUSH", WR_FLUSH, 0, seg(&flush.encode())),
    ] {
        let mut s = Scripted::new(MIB, fast_timeout());
        let buf = s.n.buf;
        s.qp.post(&mut s.n, 1, opcode, buf, len, &seg, 0);
        s.qp.post(&mut s.n, 2, WR_SEND, buf + 0x1000, 64, &[0; 40], 0);
        let first: Vec<u32> = s.sent().iter().map(|p| p.bth.psn).collect();
        assert_eq!(first, [s.sq_psn, psn::add(s.sq_psn, 1)], "{name}");
        // The SEND's ACK implies the answer was lost: it is asked for again ...
        let ack = s.ack(psn::add(s.sq_psn, 1), 0x1f);
        s.inject(&ack, &[]);
        let again: Vec<u32> = s.sent().iter().map(|p| p.bth.psn).collect();
        assert_eq!(
            again.first(),
            Some(&s.sq_psn),
            "{name}: after the ACK past it"
        );
        // ... and, unanswered again, once more when the timer expires.
        let later: Vec<u32> = sent_during(&mut s, 20).iter().map(|p| p.bth.psn).collect();
        assert!(
            later.first() == Some(&s.sq_psn),
            "{name}: after its timeout, sent {later:?} (its PSN {:#x})",
            s.sq_psn
        );
    }
}

/// Found by the pair fuzz target: an RNR NAK of a WQE that had already failed (a NAK ended it
/// while an earlier READ still waited for its response) stopped the retransmission timer,
/// and the READ was never sent again nor failed: the QP hung with nothing timed. An RNR NAK
/// of no outstanding WQE now changes nothing.
#[test]
fn an_rnr_nak_of_a_failed_wqe_leaves_the_retransmission_timer_running() {
    let mut s = Scripted::new(MIB, fast_timeout());
    let buf = s.n.buf;
    let seg = rdma_seg(0x10_0000, 0x1234);
    s.qp.post(&mut s.n, 1, WR_RDMA_READ, buf, 64, &seg, 0);
    s.qp.post(&mut s.n, 2, WR_RDMA_WRITE, buf, 64, &seg, 0);
    s.sent();
    let write_psn = psn::add(s.sq_psn, 1);
    // The WRITE is refused (the READ is implied lost and sent again) ...
    let nak = s.ack(write_psn, syndrome::NAK_REMOTE_ACCESS);
    s.inject(&nak, &[]);
    s.sent();
    // ... and then RNR NAKed.
    let rnr = s.ack(write_psn, syndrome::KIND_RNR | 1);
    s.inject(&rnr, &[]);
    s.pump_until(Duration::from_secs(10), |s| !s.cqes.is_empty());
    assert_eq!(statuses(&s.cqes)[0], (1, WcStatus::RetryExcErr));
}

/// A LOCAL_INV of the key an earlier WRITE reads from waits for that WRITE's ACK: the WRITE
/// may have to be sent again. RTRS posts the LOCAL_INV of its request's MR once the server's
/// answer came, which can be before the ACK of the request (lost, or coalesced): the WRITE,
/// retransmitted after the invalidation, failed with LOC_PROT_ERR and took the QP with it
/// (rnbd-faults under 1 % loss).
#[test]
fn a_local_inv_waits_for_the_write_that_reads_through_its_key() {
    let mut s = Scripted::new(MIB, fast_timeout());
    // A fast-registration MR over 4 KiB of the node's buffer.
    let fast =
        s.n.g
            .ok(&CreateMrCmd {
                pd: PD,
                flags: MR_FLAG_FAST_REG,
                max_pages: 1,
                ..CreateMrCmd::default()
            })
            .key;
    let page = s.n.buf + 0x4_0000;
    let pbl = s.n.g.alloc(8, 8);
    s.n.g.write(pbl, &page.to_le_bytes());
    let key = mr_key(mr_key_index(fast), 0x44);
    let reg = RegMrSeg {
        iova: page,
        length: 4096,
        pbl_addr: pbl,
        key,
        access: ACCESS_LOCAL_WRITE,
        page_count: 1,
        log_page_size: 12,
        ..RegMrSeg::default()
    };
    s.n.g.dev.core.fast_register(PD, &reg).expect("register");
    // The WRITE from it, and the LOCAL_INV of its key behind it.
    let write = WqeCtrl {
        wr_id: 1,
        opcode: WR_RDMA_WRITE,
        flags: WQE_FLAG_SIGNALED,
        num_sge: 1,
        ..WqeCtrl::default()
    };
    let sge = Sge {
        addr: page,
        length: 64,
        lkey: key,
    };
    s.qp.put(&s.n, write, &rdma_seg(0x10_0000, 0x1234), &sge.encode());
    s.qp.ring(&mut s.n);
    s.qp.post(&mut s.n, 2, WR_LOCAL_INV, 0, 0, &[], key);
    let first = s.sent();
    assert_eq!(first.len(), 1, "the WRITE went out: {}", first.len());
    // Its ACK does not come: the timer sends it again, from the key still valid.
    let resent = (0..50).any(|_| sent_during(&mut s, 1).iter().any(|p| p.bth.psn == s.sq_psn));
    assert!(resent, "the WRITE is sent again: {:?}", statuses(&s.cqes));
    assert!(
        s.cqes.is_empty(),
        "nothing completed yet: {:?}",
        statuses(&s.cqes)
    );
    let ack = s.ack(s.sq_psn, syndrome::ACK);
    s.inject(&ack, &[]);
    s.run(4);
    assert_eq!(
        statuses(&s.cqes),
        [(1, WcStatus::Success), (2, WcStatus::Success)],
        "the WRITE, then the LOCAL_INV"
    );
}
