// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Queues of the device model driven through BAR0 and DMA by the test guest: CQ doorbell records,
//! arming and moderation, ring wrap, send and receive doorbells, SRQ limits, the async EQ.

mod common;

use common::*;
use ferroce_hw::*;
use ferroce_nic::engine::{EngineHost, RecvCompletion, StubRecord};

#[test]
fn cq_doorbell_record_tracks_the_consumer_and_detects_overrun() {
    let mut g = Guest::new();
    g.bring_up();
    let eqn = g.create_ceq(4, 2);
    let mut cq = GuestCq::create(&mut g, eqn, 2);
    let cqe = |wr_id| Cqe {
        wr_id,
        qpn: 7,
        ..Cqe::default()
    };
    for wr_id in 0..4 {
        g.dev.core.write_cqe(cq.cqn, cqe(wr_id)).expect("room");
    }
    // Consuming without publishing the consumer index frees nothing.
    let ring = Ring::new(2, MAX_LOG_QUEUE).expect("ring");
    let first = Cqe::read_from(&g.read(cq.base, 64)).expect("cqe");
    assert!(ring.entry_valid(0, first.owner));
    // Publish 2 consumed: two more fit.
    g.write_u32(cq.dbrec, 2);
    g.dev.core.write_cqe(cq.cqn, cqe(4)).expect("room after ci");
    g.dev.core.write_cqe(cq.cqn, cqe(5)).expect("room after ci");
    assert!(g.dev.core.write_cqe(cq.cqn, cqe(6)).is_err(), "overrun");
    let events = g.poll_eq(EQN_ASYNC);
    assert_eq!(
        (EventType::try_from(events[0].event_type), events[0].data0),
        (Ok(EventType::CqError), cq.cqn)
    );
    assert!(
        g.dev.core.write_cqe(cq.cqn, cqe(7)).is_err(),
        "stays in error"
    );
    cq.ci = 2;
    let polled: Vec<u64> = cq.poll(&g).iter().map(|c| c.wr_id).collect();
    assert_eq!(polled, [2, 3, 4, 5]);
    assert_eq!(g.counters.get(COUNTER_CQES), 6);
}

/// perftest's `ctx_notify_events` (ib_send_lat -e): wait for the event, ack it, re-arm, and
/// only then poll the CQE that caused it. The re-arm must not fire for that CQE (it is not a
/// new one), or the next wait returns at once, the poll after it finds nothing, and the test
/// falls out of step ("Couldn't post send", or a hang).
#[test]
fn cq_rearm_before_polling_gets_one_event_per_new_cqe() {
    let mut g = Guest::new();
    g.bring_up();
    let eqn = g.create_ceq(4, 2);
    g.arm_eq(eqn);
    let mut cq = GuestCq::create(&mut g, eqn, 4);
    let arm = |g: &mut Guest, cqn: u32| {
        g.w32(
            db_page_offset(0) + DB_CQ_ARM,
            CqArmDoorbell {
                qid: cqn as u16,
                solicited: false,
            }
            .encode(),
        );
        g.run();
    };
    arm(&mut g, cq.cqn);
    for wr_id in 0..8u64 {
        g.dev
            .core
            .write_cqe(
                cq.cqn,
                Cqe {
                    wr_id,
                    ..Cqe::default()
                },
            )
            .expect("cqe");
        g.run();
        assert_eq!(g.poll_eq(eqn).len(), 1, "CQE {wr_id}: one event");
        // Re-arm with the CQE still unpolled: no event now.
        arm(&mut g, cq.cqn);
        assert!(g.poll_eq(eqn).is_empty(), "CQE {wr_id}: re-arm fired");
        let polled: Vec<u64> = cq.poll(&g).iter().map(|c| c.wr_id).collect();
        assert_eq!(polled, [wr_id]);
    }
    // Arms applied in order with CQEs: one written right after the doorbell (before the device
    // thread runs) fires the event.
    g.w32(
        db_page_offset(0) + DB_CQ_ARM,
        CqArmDoorbell {
            qid: cq.cqn as u16,
            solicited: false,
        }
        .encode(),
    );
    g.dev.core.write_cqe(cq.cqn, Cqe::default()).expect("cqe");
    g.run();
    assert_eq!(g.poll_eq(eqn).len(), 1);
}

#[test]
fn cq_arm_next_solicited_and_moderation() {
    let mut g = Guest::new();
    g.bring_up();
    let eqn = g.create_ceq(4, 2);
    g.arm_eq(eqn);
    let mut cq = GuestCq::create(&mut g, eqn, 4);
    let arm = |g: &mut Guest, cqn: u32, solicited: bool| {
        g.w32(
            db_page_offset(0) + DB_CQ_ARM,
            CqArmDoorbell {
                qid: cqn as u16,
                solicited,
            }
            .encode(),
        );
        g.run();
    };
    g.irq.take();
    // Not armed: no event.
    g.dev.core.write_cqe(cq.cqn, Cqe::default()).expect("cqe");
    assert!(g.poll_eq(eqn).is_empty());
    // Armed "next" with an unconsumed CQE: that CQE is not new, nothing fires; the next
    // CQE does.
    arm(&mut g, cq.cqn, false);
    assert!(g.poll_eq(eqn).is_empty());
    g.dev.core.write_cqe(cq.cqn, Cqe::default()).expect("cqe");
    assert_eq!(g.poll_eq(eqn).len(), 1);
    assert_eq!(g.irq.take(), vec![2]);
    cq.poll(&g);
    // Solicited: an unsolicited success does not fire, a solicited one does.
    arm(&mut g, cq.cqn, true);
    g.dev.core.write_cqe(cq.cqn, Cqe::default()).expect("cqe");
    assert!(g.poll_eq(eqn).is_empty());
    g.dev
        .core
        .write_cqe(
            cq.cqn,
            Cqe {
                flags: CQE_FLAG_SOLICITED,
                ..Cqe::default()
            },
        )
        .expect("cqe");
    let events = g.poll_eq(eqn);
    assert_eq!(
        (
            events.len(),
            EventType::try_from(events[0].event_type),
            events[0].data0
        ),
        (1, Ok(EventType::Completion), cq.cqn)
    );
    cq.poll(&g);
    // Moderation by count: one event per 3 CQEs.
    g.ok(&ModifyCqCmd {
        cqn: cq.cqn,
        moder_count: 3,
        ..ModifyCqCmd::default()
    });
    arm(&mut g, cq.cqn, false);
    for _ in 0..2 {
        g.dev.core.write_cqe(cq.cqn, Cqe::default()).expect("cqe");
    }
    assert!(g.poll_eq(eqn).is_empty());
    g.dev.core.write_cqe(cq.cqn, Cqe::default()).expect("cqe");
    assert_eq!(g.poll_eq(eqn).len(), 1);
    cq.poll(&g);
    // Moderation by period: the timer fires it.
    g.ok(&ModifyCqCmd {
        cqn: cq.cqn,
        moder_count: 100,
        moder_period_us: 1,
        ..ModifyCqCmd::default()
    });
    arm(&mut g, cq.cqn, false);
    g.dev.core.write_cqe(cq.cqn, Cqe::default()).expect("cqe");
    g.run();
    assert!(g.poll_eq(eqn).is_empty(), "no event before the period ends");
    g.time.advance(std::time::Duration::from_millis(2));
    g.run();
    assert_eq!(g.poll_eq(eqn).len(), 1);
    assert_eq!(g.counters.get(COUNTER_CQ_ARMS), 4);
}

#[test]
fn rings_wrap() {
    let mut g = Guest::new();
    g.bring_up();
    // A 4-entry command queue, 40 commands: ten passes, owner bits flip each pass.
    g.w32(REG_CMDQ_CTRL, 0);
    g.setup_cmdq(2);
    for _ in 0..40 {
        assert_eq!(g.cmd(&NopCmd::default()).status, STATUS_OK);
    }
    assert_eq!(g.r32(REG_CMDQ_CI), 40);
    // An 8-entry CQ through 100 CQEs with the consumer keeping up.
    let eqn = g.create_ceq(2, 2);
    let mut cq = GuestCq::create(&mut g, eqn, 3);
    let mut seen = Vec::new();
    for wr_id in 0..100u64 {
        g.dev
            .core
            .write_cqe(
                cq.cqn,
                Cqe {
                    wr_id,
                    ..Cqe::default()
                },
            )
            .expect("cqe");
        if wr_id % 5 == 4 {
            seen.extend(cq.poll(&g).iter().map(|c| c.wr_id));
        }
    }
    assert_eq!(seen, (0..100).collect::<Vec<_>>());
    // The 64-entry command EQ through 150 events, polled each time.
    g.poll_eq(EQN_CMD);
    for _ in 0..150 {
        g.cmd(&NopCmd::default());
        assert_eq!(g.poll_eq(EQN_CMD).len(), 1);
    }
    // Indexes wrap at 16 bits: start a CQ's consumer near the wrap by walking it there.
    let mut cq = GuestCq::create(&mut g, eqn, 0);
    for wr_id in 0..70_000u64 {
        g.dev
            .core
            .write_cqe(
                cq.cqn,
                Cqe {
                    wr_id,
                    ..Cqe::default()
                },
            )
            .expect("cqe");
        let got = cq.poll(&g);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].wr_id, wr_id);
    }
}

#[test]
fn send_doorbells_fetch_batch_inline_and_push() {
    let mut g = Guest::new();
    g.bring_up();
    let eqn = g.create_ceq(4, 2);
    let mut cq = GuestCq::create(&mut g, eqn, 7);
    let mut qp = GuestQp::create(&mut g, QpType::Rc, cq.cqn, cq.cqn, NONE);
    qp.connect(&mut g);
    let rdma = roce::rdma_seg(0x9000, 0x1234);
    let sge = Sge {
        addr: 0x2000,
        length: 64,
        lkey: 0x100,
    }
    .encode();

    // A chain of 32 WRs and one doorbell.
    let (doorbells, fetches) = (
        g.counters.get(COUNTER_DOORBELLS),
        g.counters.get(COUNTER_WQE_FETCHES),
    );
    for i in 0..32u64 {
        let ctrl = WqeCtrl {
            wr_id: i,
            opcode: WR_RDMA_WRITE,
            flags: WQE_FLAG_SIGNALED,
            num_sge: 1,
            ..WqeCtrl::default()
        };
        qp.put_send(&g, ctrl, &rdma, &sge);
    }
    qp.ring_sq(&mut g, 0, qp.qpn as u16);
    assert_eq!(g.counters.get(COUNTER_DOORBELLS) - doorbells, 1);
    assert_eq!(g.counters.get(COUNTER_WQE_FETCHES) - fetches, 32);
    {
        let log = g.log.lock().expect("log");
        assert_eq!(log.sends.len(), 32);
        assert_eq!(log.sends[31].ctrl.wr_id, 31);
        assert_eq!(log.sends[0].sges[0].lkey, 0x100);
        assert!(matches!(
            log.sends[0].op,
            SendOp::Write { rkey: 0x1234, .. }
        ));
    }

    // Inline: the payload comes inside the WQE.
    let payload: Vec<u8> = (0..=255u8).collect();
    let ctrl = WqeCtrl {
        wr_id: 100,
        opcode: WR_SEND,
        flags: WQE_FLAG_INLINE | WQE_FLAG_SIGNALED,
        inline_len: 256,
        ..WqeCtrl::default()
    };
    qp.put_send(&g, ctrl, &[0; 40], &payload);
    qp.ring_sq(&mut g, 0, qp.qpn as u16);
    assert_eq!(g.log.lock().expect("log").sends[32].inline_data, payload);

    // Push: the WQE goes through the window; no fetch.
    let fetches = g.counters.get(COUNTER_WQE_FETCHES);
    let ctrl = WqeCtrl {
        wr_id: 200,
        opcode: WR_SEND,
        flags: WQE_FLAG_INLINE | WQE_FLAG_SIGNALED,
        inline_len: 8,
        ..WqeCtrl::default()
    };
    let wqe = qp.put_send(&g, ctrl, &[0; 40], b"pushed!!");
    let window = db_page_offset(0) + PUSH_WINDOW_OFFSET;
    for (i, chunk) in wqe[..128].chunks(8).enumerate() {
        let value = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        g.dev
            .bar0_write((window + i * 8) as u64, &value.to_le_bytes());
    }
    g.w32(
        db_page_offset(0) + DB_PUSH,
        Doorbell {
            qid: qp.qpn as u16,
            index: qp.sq_pi,
        }
        .encode(),
    );
    g.run();
    assert_eq!(
        g.counters.get(COUNTER_WQE_FETCHES),
        fetches,
        "pushed WQEs are not fetched"
    );
    assert_eq!(g.counters.get(COUNTER_WQE_PUSHES), 1);
    {
        let log = g.log.lock().expect("log");
        let last = log.sends.last().expect("push");
        assert!(last.pushed);
        assert_eq!(last.inline_data, b"pushed!!");
    }

    // The engine completes the first 10 in one call: 10 CQEs in order.
    g.dev
        .core
        .complete_send(qp.qpn, 9, WcStatus::Success, 0)
        .expect("complete");
    let done: Vec<u64> = cq.poll(&g).iter().map(|c| c.wr_id).collect();
    assert_eq!(done, (0..10).collect::<Vec<_>>());
    // An error completion moves the QP to ERR and flushes everything else.
    g.dev
        .core
        .complete_send(qp.qpn, 10, WcStatus::RemAccessErr, 0)
        .expect("complete");
    g.run();
    let rest = cq.poll(&g);
    assert_eq!(
        (rest[0].wr_id, WcStatus::try_from(rest[0].status)),
        (10, Ok(WcStatus::RemAccessErr))
    );
    assert!(rest[1..]
        .iter()
        .all(|c| WcStatus::try_from(c.status) == Ok(WcStatus::WrFlushErr)));
    assert_eq!(rest.len(), 1 + 21 + 2);
    assert_eq!(rest.last().map(|c| c.wr_id), Some(200));
    assert_eq!(
        g.dev.core.objects().qps().get(qp.qpn).map(|q| q.state),
        Some(QpState::Err)
    );
}

#[test]
fn receive_queue_by_doorbell_record_and_flush() {
    let mut g = Guest::new();
    g.bring_up();
    let eqn = g.create_ceq(4, 2);
    let mut cq = GuestCq::create(&mut g, eqn, 6);
    let mut qp = GuestQp::create(&mut g, QpType::Rc, cq.cqn, cq.cqn, NONE);
    qp.connect(&mut g);
    assert!(
        g.dev.core.take_recv(qp.qpn).expect("rq").is_none(),
        "nothing posted"
    );
    for wr_id in 0..5 {
        qp.post_recv(&g, wr_id);
    }
    // The RQ doorbell is optional: it only wakes the engine.
    g.w32(
        db_page_offset(0) + DB_RQ,
        Doorbell {
            qid: qp.qpn as u16,
            index: qp.rq_pi,
        }
        .encode(),
    );
    g.run();
    assert!(matches!(
        g.log.lock().expect("log").records.last(),
        Some(StubRecord::RecvPosted { .. })
    ));
    let work = g.dev.core.take_recv(qp.qpn).expect("rq").expect("wqe");
    assert_eq!((work.wr_id, work.sges.len()), (0, 1));
    g.dev
        .core
        .complete_recv(
            qp.qpn,
            &work,
            RecvCompletion {
                opcode: CQE_OP_RECV,
                byte_len: 12,
                ..RecvCompletion::default()
            },
        )
        .expect("cqe");
    let got = cq.poll(&g);
    assert_eq!(
        (got[0].wr_id, got[0].opcode, got[0].byte_len),
        (0, CQE_OP_RECV, 12)
    );
    // To ERR: the 4 remaining receives flush.
    assert_eq!(
        GuestQp::modify(&mut g, qp.qpn, QpState::Err, 0).status,
        STATUS_OK
    );
    g.run();
    let flushed: Vec<_> = cq
        .poll(&g)
        .iter()
        .map(|c| (c.wr_id, WcStatus::try_from(c.status)))
        .collect();
    assert_eq!(
        flushed,
        (1..5)
            .map(|w| (w, Ok(WcStatus::WrFlushErr)))
            .collect::<Vec<_>>()
    );
    // Posting to a QP in ERR completes with flush at once.
    qp.post_send_noop(&mut g);
    assert_eq!(
        WcStatus::try_from(cq.poll(&g)[0].status),
        Ok(WcStatus::WrFlushErr)
    );
}

trait NoopSend {
    fn post_send_noop(&mut self, g: &mut Guest);
}

impl NoopSend for GuestQp {
    fn post_send_noop(&mut self, g: &mut Guest) {
        let ctrl = WqeCtrl {
            wr_id: 77,
            opcode: WR_SEND,
            flags: WQE_FLAG_SIGNALED,
            ..WqeCtrl::default()
        };
        self.put_send(g, ctrl, &[0; 40], &[]);
        self.ring_sq(g, 0, self.qpn as u16);
    }
}

#[test]
fn srq_limit_event() {
    let mut g = Guest::new();
    g.bring_up();
    let eqn = g.create_ceq(4, 2);
    let cq = GuestCq::create(&mut g, eqn, 4);
    let ring = g.alloc(64 << 3, 4096);
    let dbrec = g.alloc(64, 64);
    let srqn = g
        .ok(&CreateSrqCmd {
            ring: BufDesc {
                addr: ring,
                ..BufDesc::default()
            },
            dbrec_addr: dbrec,
            pd: 1,
            limit: 2,
            log_size: 3,
            log_stride: 6,
            ..CreateSrqCmd::default()
        })
        .srqn;
    let qp = GuestQp::create(&mut g, QpType::Rc, cq.cqn, cq.cqn, srqn);
    qp.connect(&mut g);
    for i in 0..3u64 {
        let mut wqe = vec![0u8; 64];
        assert!(RecvWqeHeader {
            wr_id: 1000 + i,
            num_sge: 0,
            ..RecvWqeHeader::default()
        }
        .write_to(&mut wqe));
        g.write(ring + i * 64, &wqe);
    }
    g.write_u32(dbrec, 3);
    g.w32(
        db_page_offset(0) + DB_SRQ,
        Doorbell {
            qid: srqn as u16,
            index: 3,
        }
        .encode(),
    );
    g.run();
    let work = g.dev.core.take_recv(qp.qpn).expect("srq").expect("wqe");
    assert_eq!((work.wr_id, work.srqn), (1000, Some(srqn)));
    assert!(
        g.poll_eq(EQN_ASYNC).is_empty(),
        "2 left: not below the limit"
    );
    g.dev.core.take_recv(qp.qpn).expect("srq").expect("wqe");
    let events = g.poll_eq(EQN_ASYNC);
    assert_eq!(
        (EventType::try_from(events[0].event_type), events[0].data0),
        (Ok(EventType::SrqLimit), srqn)
    );
    // Disarmed after firing.
    g.dev.core.take_recv(qp.qpn).expect("srq").expect("wqe");
    assert!(g.poll_eq(EQN_ASYNC).is_empty());
    assert!(g.dev.core.take_recv(qp.qpn).expect("srq").is_none());
}

/// A process ringing garbage at full speed cannot fill the async EQ: doorbell errors are reported
/// only while it is at most half full (all are counted), and the port's events still get through.
#[test]
fn garbage_doorbells_cannot_overrun_the_async_eq() {
    let mut g = Guest::new();
    g.bring_up();
    let bad = g.counters.get(COUNTER_BAD_DOORBELLS);
    for i in 0..1000u32 {
        // No such register on the kernel's doorbell page.
        g.w32(db_page_offset(0) + 0x20, i);
    }
    g.run();
    assert_eq!(g.counters.get(COUNTER_BAD_DOORBELLS) - bad, 1000);
    let overruns = |g: &Guest| {
        g.dev
            .core
            .objects()
            .eqs()
            .get(EQN_ASYNC)
            .map(|eq| eq.overruns())
    };
    assert_eq!(overruns(&g), Some(0));
    // The port goes down: its event has room.
    g.dev.core.request_port_state(false);
    g.run();
    let events = g.poll_eq(EQN_ASYNC);
    let kinds = |kind: EventType| {
        events
            .iter()
            .filter(|e| EventType::try_from(e.event_type) == Ok(kind))
            .count()
    };
    assert!(
        kinds(EventType::DoorbellError) <= 32,
        "{}",
        kinds(EventType::DoorbellError)
    );
    assert_eq!(kinds(EventType::PortDown), 1);
    assert_eq!(overruns(&g), Some(0));
}

/// A QP created with `QP_FLAG_DB_RECORD` needs no doorbell: the device finds new producer
/// indexes in its record (counted as record doorbells), rejects a bad one once, takes good ones
/// again afterwards, and forgets the QP when it is destroyed. A QP without the flag is not
/// polled, and a device without `CAP_DB_RECORD` refuses the flag.
#[test]
fn doorbell_records_are_polled_instead_of_doorbells() {
    let mut g = Guest::new();
    g.bring_up();
    assert_ne!(g.r32(REG_CAPS) & CAP_DB_RECORD, 0);
    let eqn = g.create_ceq(4, 2);
    let cq = GuestCq::create(&mut g, eqn, 7);
    let (mut qp, c) =
        GuestQp::try_create(&mut g, QpType::Rc, cq.cqn, cq.cqn, NONE, QP_FLAG_DB_RECORD);
    assert_eq!(c.status, STATUS_OK);
    qp.connect(&mut g);
    let mut plain = GuestQp::create(&mut g, QpType::Rc, cq.cqn, cq.cqn, NONE);
    plain.connect(&mut g);
    let count = |g: &Guest, c: usize| g.counters.get(c);
    let (doorbells, records, fetches) = (
        count(&g, COUNTER_DOORBELLS),
        count(&g, COUNTER_RECORD_DOORBELLS),
        count(&g, COUNTER_WQE_FETCHES),
    );
    let sends = |g: &Guest| g.log.lock().expect("log").sends.len();
    let ctrl = |wr_id| WqeCtrl {
        wr_id,
        opcode: WR_SEND,
        flags: WQE_FLAG_INLINE | WQE_FLAG_SIGNALED,
        inline_len: 8,
        ..WqeCtrl::default()
    };
    // A chain of three, announced by the record alone.
    for i in 0..3 {
        qp.put_send(&g, ctrl(i), &[0; 40], b"recorded");
    }
    g.run();
    assert_eq!(sends(&g), 3);
    assert_eq!(
        count(&g, COUNTER_DOORBELLS),
        doorbells,
        "no doorbell written"
    );
    assert_eq!(count(&g, COUNTER_RECORD_DOORBELLS) - records, 1);
    assert_eq!(count(&g, COUNTER_WQE_FETCHES) - fetches, 3);
    // Nothing new in the record: nothing happens however often the device polls.
    g.run();
    g.run();
    assert_eq!(count(&g, COUNTER_RECORD_DOORBELLS) - records, 1);
    // The QP without the flag: its record alone posts nothing.
    plain.put_send(&g, ctrl(50), &[0; 40], b"unpolled");
    g.run();
    assert_eq!(sends(&g), 3);

    // More than a ring ahead: rejected, counted and reported once, however often it is read.
    let bad = count(&g, COUNTER_BAD_DOORBELLS);
    let ahead = u32::from(qp.sq_pi) + 100;
    g.write_u32(qp.dbrec, ahead);
    g.run();
    g.run();
    assert_eq!(count(&g, COUNTER_BAD_DOORBELLS) - bad, 1);
    assert_eq!(sends(&g), 3);
    let events: Vec<Eqe> = g
        .poll_eq(EQN_ASYNC)
        .into_iter()
        .filter(|e| EventType::try_from(e.event_type) == Ok(EventType::DoorbellError))
        .collect();
    assert_eq!(events.len(), 1);
    assert_eq!(
        (events[0].data0, events[0].data1),
        (ferroce_nic::records::RECORD_ERROR_CTX | qp.qpn, ahead)
    );
    // A good index again: taken.
    qp.put_send(&g, ctrl(3), &[0; 40], b"recorded");
    g.run();
    assert_eq!(sends(&g), 4);
    assert_eq!(g.log.lock().expect("log").sends[3].ctrl.wr_id, 3);

    // A receive WQE announced in the record: the engine hears of it as of a `DB_RQ`.
    let records = count(&g, COUNTER_RECORD_DOORBELLS);
    qp.post_recv(&g, 77);
    g.run();
    assert_eq!(count(&g, COUNTER_RECORD_DOORBELLS) - records, 1);

    // The device going to sleep sets the record's sleeping word (producers then ring) unless
    // its last look finds something new; waking clears it.
    let word = qp.dbrec + DB_RECORD_SLEEPING_OFFSET as u64;
    let sleeping = |g: &Guest| {
        let b = g.read(word, 4);
        u32::from_le_bytes(b.try_into().expect("4 bytes"))
    };
    assert_eq!(sleeping(&g), 0, "awake since it was created");
    assert!(g.dev.core.records_sleep());
    assert_eq!(sleeping(&g), 1);
    g.dev.core.records_wake();
    assert_eq!(sleeping(&g), 0);
    qp.put_send(&g, ctrl(4), &[0; 40], b"recorded");
    assert!(
        !g.dev.core.records_sleep(),
        "the last look before sleeping found WQE 4"
    );
    assert_eq!(sleeping(&g), 0);
    g.run();
    assert_eq!(sends(&g), 5);

    // Destroyed: no longer read (its record's memory may be someone else's now).
    g.ok(&DestroyQpCmd {
        qpn: qp.qpn,
        rsvd: 0,
    });
    assert!(!g.dev.polls_records());

    // A device that does not poll refuses the flag.
    let mut g = Guest::with_config(|c| c.db_record = false);
    g.bring_up();
    assert_eq!(g.r32(REG_CAPS) & CAP_DB_RECORD, 0);
    let eqn = g.create_ceq(4, 2);
    let cq = GuestCq::create(&mut g, eqn, 7);
    let (_, c) = GuestQp::try_create(&mut g, QpType::Rc, cq.cqn, cq.cqn, NONE, QP_FLAG_DB_RECORD);
    assert_eq!((c.status, c.syndrome), (STATUS_BAD_PARAM, 62));
}

/// Asserts that completion `c` refused its command (`what`) for the field at payload offset
/// `offset`: `STATUS_BAD_PARAM`, and the offset + 1 in the syndrome.
fn assert_refused_at(c: CmdCompletion, offset: usize, what: impl std::fmt::Debug) {
    assert_eq!(
        (c.status, c.syndrome),
        (STATUS_BAD_PARAM, offset as u32 + 1),
        "{what:?}"
    );
}

/// A CQ create or resize refused for a reserved field names that field in its syndrome (its
/// payload offset + 1), as every other command's check does.
#[test]
fn a_refused_cq_command_names_its_reserved_field() {
    use core::mem::offset_of;
    let mut g = Guest::new();
    g.bring_up();
    let eqn = g.create_ceq(4, 2);
    let ring = BufDesc {
        addr: g.alloc(64 << 4, 64),
        ..BufDesc::default()
    };
    let dbrec_addr = g.alloc(8, 8);
    let good = CreateCqCmd {
        ring,
        dbrec_addr,
        eqn,
        log_size: 4,
        ..CreateCqCmd::default()
    };
    let cases = [
        (
            CreateCqCmd { flags: 1, ..good },
            offset_of!(CreateCqCmd, flags),
        ),
        (
            CreateCqCmd { rsvd0: 1, ..good },
            offset_of!(CreateCqCmd, rsvd0),
        ),
        (
            CreateCqCmd { rsvd1: 1, ..good },
            offset_of!(CreateCqCmd, rsvd1),
        ),
    ];
    for (cmd, offset) in cases {
        assert_refused_at(g.cmd(&cmd), offset, cmd);
    }
    let cqn = g.ok(&good).cqn;
    // RESIZE_CQ likewise, each reserved field by its own offset.
    let resize = ResizeCqCmd {
        ring,
        dbrec_addr,
        cqn,
        log_size: 5,
        ..ResizeCqCmd::default()
    };
    let cases = [
        (
            ResizeCqCmd { rsvd0: 1, ..resize },
            offset_of!(ResizeCqCmd, rsvd0),
        ),
        (
            ResizeCqCmd { rsvd1: 1, ..resize },
            offset_of!(ResizeCqCmd, rsvd1),
        ),
    ];
    for (cmd, offset) in cases {
        assert_refused_at(g.cmd(&cmd), offset, cmd);
    }
}

#[test]
fn a_refused_modify_qp_or_create_ah_names_its_reserved_field() {
    use core::mem::offset_of;
    let mut g = Guest::new();
    g.bring_up();
    let eqn = g.create_ceq(4, 2);
    let cq = GuestCq::create(&mut g, eqn, 7);
    let qp = GuestQp::create(&mut g, QpType::Rc, cq.cqn, cq.cqn, NONE);
    let modify = ModifyQpCmd {
        qpn: qp.qpn,
        attr_mask: QP_ATTR_STATE,
        new_state: QpState::Init.into(),
        ..ModifyQpCmd::default()
    };
    let ah = CreateAhCmd {
        pd: 1,
        vlan: VLAN_NONE,
        ..CreateAhCmd::default()
    };
    let cases = [
        (
            g.cmd(&ModifyQpCmd {
                attr_mask: 1 << 31,
                ..modify
            }),
            offset_of!(ModifyQpCmd, attr_mask),
        ),
        (
            g.cmd(&ModifyQpCmd { rsvd: 1, ..modify }),
            offset_of!(ModifyQpCmd, rsvd),
        ),
        (
            g.cmd(&CreateAhCmd { rsvd0: 1, ..ah }),
            offset_of!(CreateAhCmd, rsvd0),
        ),
        (
            g.cmd(&CreateAhCmd { rsvd1: 1, ..ah }),
            offset_of!(CreateAhCmd, rsvd1),
        ),
    ];
    for (i, (c, offset)) in cases.into_iter().enumerate() {
        assert_refused_at(c, offset, format_args!("case {i}"));
    }
    // Neither refusal changed anything: the same commands with zeros go through.
    assert_eq!(g.cmd(&modify).status, STATUS_OK);
    assert_eq!(g.cmd(&ah).status, STATUS_OK);
}
