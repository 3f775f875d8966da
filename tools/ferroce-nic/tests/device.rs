// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The device model driven through BAR0 and DMA by the test guest.

mod common;

use common::*;
use ferroce_hw::*;
use ferroce_nic::engine::{EngineHost, RecvCompletion, StubRecord};
use ferroce_nic::lies::Lie;
use ferroce_nic::memory::GuestMemory;

#[test]
fn identification_and_limits() {
    let mut g = Guest::new();
    assert_eq!(g.r32(REG_ID), ID_MAGIC);
    assert_eq!(g.r32(REG_IF_VERSION), IF_VERSION);
    assert_ne!(g.r32(REG_CAPS) & CAP_WQE_PUSH, 0);
    assert_eq!(g.r32(REG_NUM_MSIX), u32::from(VECTORS));
    assert_eq!(g.r32(REG_MAX_QP), 64);
    assert_eq!(g.r32(REG_GID_TABLE_LEN), GID_TABLE_LEN);
    assert_eq!(g.r32(REG_DB_AREA_OFFSET), DB_AREA_OFFSET as u32);
    assert_eq!(g.r32(REG_NUM_DB_PAGES), NUM_DB_PAGES as u32);
    // A 64-bit read covers two registers; narrow reads see register bytes.
    assert_eq!(
        g.r64(REG_ID),
        u64::from(IF_VERSION) << 32 | u64::from(ID_MAGIC)
    );
    let mut byte = [0u8; 1];
    g.dev.bar0_read(REG_ID as u64 + 1, &mut byte);
    assert_eq!(byte[0], ID_MAGIC.to_le_bytes()[1]);
    g.w32(REG_SCRATCH, 0xdead_beef);
    assert_eq!(g.r32(REG_SCRATCH), 0xdead_beef);
    // Read-only registers ignore writes.
    g.w32(REG_ID, 0);
    assert_eq!(g.r32(REG_ID), ID_MAGIC);
}

#[test]
fn reset_drops_every_object() {
    let mut g = Guest::new();
    g.bring_up();
    let eqn = g.create_ceq(4, 2);
    let cq = GuestCq::create(&mut g, eqn, 4);
    let _qp = GuestQp::create(&mut g, QpType::Rc, cq.cqn, cq.cqn, NONE);
    assert_eq!(g.dev.core.objects().qps().len(), 1);
    g.reset();
    assert!(g.dev.core.objects().qps().is_empty());
    assert!(g.dev.core.objects().cqs().is_empty());
    assert!(g.dev.core.objects().eqs().is_empty());
    assert!(!g.dev.core.cmdq().is_enabled());
    assert_eq!(g.r32(REG_DEV_STATUS) & STATUS_ENABLED, 0);
    // And it comes back up.
    g.bring_up();
    assert_eq!(g.cmd(&NopCmd::default()).status, STATUS_OK);
}

#[test]
fn every_command_round_trips() {
    let mut g = Guest::new();
    g.bring_up();
    g.ok(&NopCmd::default());

    // Port and companion MAC.
    let info = g.ok(&QueryPortCmd { port: 1, rsvd: 0 });
    assert_eq!(info.state, PORT_STATE_ACTIVE);
    assert_eq!(info.mac, [0x52, 0x54, 0x00, 0x12, 0x34, 0x56]);
    g.ok(&SetPortCmd {
        port: 1,
        active_mtu: MTU_4096,
        ..SetPortCmd::default()
    });
    assert_eq!(
        g.ok(&QueryPortCmd { port: 1, rsvd: 0 }).active_mtu,
        MTU_4096
    );

    // EQ create / modify.
    let eqn = g.create_ceq(4, 2);
    assert!(eqn >= EQN_FIRST_COMPLETION);
    g.ok(&ModifyEqCmd {
        eqn,
        vector: 3,
        rsvd: 0,
    });

    // CQ create / modify.
    let cq = GuestCq::create(&mut g, eqn, 5);
    g.ok(&ModifyCqCmd {
        cqn: cq.cqn,
        moder_count: 4,
        moder_period_us: 100,
        ..ModifyCqCmd::default()
    });

    // SRQ create / modify.
    let srq_ring = g.alloc(64 << 4, 4096);
    let srq_dbrec = g.alloc(64, 64);
    let srqn = g
        .ok(&CreateSrqCmd {
            ring: BufDesc {
                addr: srq_ring,
                ..BufDesc::default()
            },
            dbrec_addr: srq_dbrec,
            pd: 1,
            limit: 2,
            log_size: 4,
            log_stride: 6,
            ..CreateSrqCmd::default()
        })
        .srqn;
    g.ok(&ModifySrqCmd { srqn, limit: 4 });

    // QPs: RC with SRQ, UD, GSI (fixed QPN 1).
    let rc = GuestQp::create(&mut g, QpType::Rc, cq.cqn, cq.cqn, srqn);
    let ud = GuestQp::create(&mut g, QpType::Ud, cq.cqn, cq.cqn, NONE);
    let gsi = GuestQp::create(&mut g, QpType::Gsi, cq.cqn, cq.cqn, NONE);
    assert_eq!(gsi.qpn, GSI_QPN);
    assert!(rc.qpn >= FIRST_QPN && ud.qpn >= FIRST_QPN && rc.qpn != ud.qpn);
    rc.connect(&mut g);
    let out = g.alloc(ModifyQpCmd::SIZE, 8);
    let c = g.cmd_out(&QueryQpCmd { qpn: rc.qpn }, out);
    assert_eq!(c.status, STATUS_OK);
    assert_eq!(
        c.reply::<QueryQpCmd>(),
        Some(QpStateReply {
            state: QpState::Rts
        })
    );
    let image = ModifyQpCmd::read_from(&g.read(out, ModifyQpCmd::SIZE)).expect("image");
    assert_eq!(
        (
            image.qpn,
            QpState::try_from(image.new_state),
            image.dest_qpn,
            image.path_mtu
        ),
        (rc.qpn, Ok(QpState::Rts), 0x12, MTU_1024)
    );

    // MRs: contiguous, page list, all memory, fast registration.
    let buf = g.alloc(8192, 4096);
    let contig = g
        .ok(&CreateMrCmd {
            iova: 0x7000_0000,
            length: 8192,
            pages: BufDesc {
                addr: buf,
                ..BufDesc::default()
            },
            pd: 1,
            access: ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE,
            key_variant: 0x5a,
            ..CreateMrCmd::default()
        })
        .key;
    assert_eq!(contig & 0xff, 0x5a);
    let pbl = g.alloc(16, 8);
    let page_a = g.alloc(4096, 4096);
    let page_b = g.alloc(4096, 4096);
    g.write(pbl, &[page_a.to_le_bytes(), page_b.to_le_bytes()].concat());
    let paged = g
        .ok(&CreateMrCmd {
            iova: 0x4000_0800,
            length: 4096,
            pages: BufDesc {
                addr: pbl,
                page_count: 2,
                log_page_size: 12,
                ..BufDesc::default()
            },
            pd: 1,
            access: ACCESS_REMOTE_READ,
            ..CreateMrCmd::default()
        })
        .key;
    let dma_mr = g
        .ok(&CreateMrCmd {
            pd: 1,
            access: ACCESS_LOCAL_WRITE,
            flags: MR_FLAG_ALL_MEMORY,
            ..CreateMrCmd::default()
        })
        .key;
    let fast = g
        .ok(&CreateMrCmd {
            pd: 1,
            flags: MR_FLAG_FAST_REG,
            max_pages: 16,
            ..CreateMrCmd::default()
        })
        .key;
    assert_eq!(g.dev.core.objects().mrs().len(), 4);
    // The page-list MR translates across its page boundary, and protection is checked.
    g.write(page_a + 0xffe, &[1, 2]);
    g.write(page_b, &[3, 4]);
    let mut four = [0u8; 4];
    g.dev
        .core
        .read_payload(1, paged, 0x4000_0ffe, &mut four, ACCESS_REMOTE_READ)
        .expect("read across pages");
    assert_eq!(four, [1, 2, 3, 4]);
    assert!(
        g.dev
            .core
            .read_payload(2, paged, 0x4000_0ffe, &mut four, 0)
            .is_err(),
        "PD mismatch"
    );
    assert!(
        g.dev
            .core
            .read_payload(1, paged, 0x4000_17ff, &mut four, 0)
            .is_err(),
        "beyond the end"
    );
    assert!(
        g.dev
            .core
            .write_payload(1, paged, 0x4000_0800, &four, ACCESS_REMOTE_WRITE)
            .is_err(),
        "no write access"
    );

    // AH.
    let ah = g
        .ok(&CreateAhCmd {
            pd: 1,
            sgid_index: 3,
            dmac: [2, 0, 0, 0, 0, 1],
            vlan: VLAN_NONE,
            hop_limit: 64,
            ..CreateAhCmd::default()
        })
        .ah;

    // GIDs.
    let mac = [0x52, 0x54, 0x00, 0x12, 0x34, 0x56];
    g.ok(&SetGidCmd {
        index: 0,
        gid_type: GID_TYPE_ROCE_V1,
        family: GID_FAMILY_IPV6,
        gid: gid_from_mac(mac),
        mac,
        vlan: VLAN_NONE,
        ..SetGidCmd::default()
    });
    g.ok(&ClearGidCmd { index: 0, rsvd: 0 });

    // Counters.
    let out = g.alloc(8 * NUM_COUNTERS, 8);
    let c = g.cmd_out(
        &QueryCountersCmd {
            first: 0,
            count: NUM_COUNTERS as u32,
        },
        out,
    );
    assert_eq!(c.status, STATUS_OK);
    assert_eq!(
        c.reply::<QueryCountersCmd>(),
        Some(QueryCountersReply {
            copied: NUM_COUNTERS as u32
        })
    );
    let counters = g.read(out, 8 * NUM_COUNTERS);
    assert!(read_u64(&counters, COUNTER_COMMANDS * 8) > 10);
    assert!(read_u64(&counters, COUNTER_MMIO_WRITES * 8) > 10);

    // Contexts and QID translation.
    let ctx = g.ok(&AllocCtxCmd::default()).ctx;
    assert_eq!(ctx, 1, "context 0 is the kernel's");
    g.ok(&MapQidCmd {
        ctx,
        local_qid: 5,
        global: ud.qpn,
        kind: QID_KIND_QP,
        ..MapQidCmd::default()
    });
    g.ok(&UnmapQidCmd { ctx, local_qid: 5 });
    g.ok(&FreeCtxCmd { ctx, rsvd: 0 });

    // Destroy in dependency order; busy objects refuse first.
    assert_eq!(
        g.cmd(&DestroyCqCmd {
            cqn: cq.cqn,
            rsvd: 0
        })
        .status,
        STATUS_BUSY
    );
    assert_eq!(g.cmd(&DestroySrqCmd { srqn, rsvd: 0 }).status, STATUS_BUSY);
    assert_eq!(g.cmd(&DestroyEqCmd { eqn, rsvd: 0 }).status, STATUS_BUSY);
    for qpn in [rc.qpn, ud.qpn, gsi.qpn] {
        g.ok(&DestroyQpCmd { qpn, rsvd: 0 });
    }
    g.ok(&DestroySrqCmd { srqn, rsvd: 0 });
    g.ok(&DestroyCqCmd {
        cqn: cq.cqn,
        rsvd: 0,
    });
    g.ok(&DestroyEqCmd { eqn, rsvd: 0 });
    for key in [contig, paged, dma_mr, fast] {
        g.ok(&DestroyMrCmd { key, rsvd: 0 });
    }
    g.ok(&DestroyAhCmd { ah, rsvd: 0 });
    // Every opcode was exercised.
    assert_eq!(g.counters.get(COUNTER_COMMAND_ERRORS), 3);
}

#[test]
fn command_completion_raises_the_command_eq_vector() {
    let mut g = Guest::new();
    g.bring_up();
    g.irq.take();
    // Not armed: the EQE is written but no interrupt.
    g.cmd(&NopCmd::default());
    assert!(g.irq.take().is_empty());
    let eqes = g.poll_eq(EQN_CMD);
    assert_eq!(eqes.len(), 1);
    assert_eq!(
        (EventType::try_from(eqes[0].event_type), eqes[0].data0),
        (Ok(EventType::CmdDone), g.token)
    );
    // Armed: the next command completion interrupts once, then it is disarmed.
    g.arm_eq(EQN_CMD);
    g.cmd(&NopCmd::default());
    g.cmd(&NopCmd::default());
    assert_eq!(g.irq.take(), vec![CMD_EQ_VECTOR as u16]);
    assert_eq!(g.poll_eq(EQN_CMD).len(), 2);
    // Arming with EQEs already pending fires at once.
    g.cmd(&NopCmd::default());
    g.arm_eq(EQN_CMD);
    assert_eq!(g.irq.take(), vec![CMD_EQ_VECTOR as u16]);
    assert!(g.counters.get(COUNTER_INTERRUPTS) >= 2);
}

#[test]
fn async_events_for_port_changes() {
    let mut g = Guest::new();
    g.bring_up();
    g.arm_eq(EQN_ASYNC);
    g.irq.take();
    // Host requests are applied by the device thread.
    g.dev.core.request_port_state(false);
    g.run();
    g.dev.core.request_port_state(true);
    g.run();
    assert_eq!(g.irq.take(), vec![AEQ_VECTOR as u16]);
    let events: Vec<_> = g
        .poll_eq(EQN_ASYNC)
        .iter()
        .map(|e| EventType::try_from(e.event_type))
        .collect();
    assert_eq!(events, [Ok(EventType::PortDown), Ok(EventType::PortActive)]);
}

#[test]
fn gid_table_set_and_clear() {
    let mut g = Guest::new();
    g.bring_up();
    let mac = [0x52, 0x54, 0x00, 0x12, 0x34, 0x56];
    let link_local = gid_from_mac(mac);
    let v4 = std::net::Ipv4Addr::new(10, 0, 1, 36)
        .to_ipv6_mapped()
        .octets();
    for (index, gid, gid_type, family) in [
        (0, link_local, GID_TYPE_ROCE_V1, GID_FAMILY_IPV6),
        (1, link_local, GID_TYPE_ROCE_V2, GID_FAMILY_IPV6),
        (2, v4, GID_TYPE_ROCE_V1, GID_FAMILY_IPV4),
        (3, v4, GID_TYPE_ROCE_V2, GID_FAMILY_IPV4),
    ] {
        g.ok(&SetGidCmd {
            index,
            gid_type,
            family,
            gid,
            mac,
            vlan: VLAN_NONE,
            ..SetGidCmd::default()
        });
    }
    let table = ferroce_nic::control::gids_json(&g.dev);
    let gids = table["gids"].as_array().expect("array");
    assert_eq!(gids.len(), 4);
    assert_eq!(gids[0]["gid"], "fe80::5054:ff:fe12:3456");
    assert_eq!(gids[1]["type"], "RoCEv2");
    assert_eq!(gids[3]["gid"], "::ffff:10.0.1.36");
    assert_eq!(gids[3]["family"], "ipv4");
    // Family must agree with the address; type, index and MAC are checked.
    let bad_family = SetGidCmd {
        index: 4,
        gid_type: GID_TYPE_ROCE_V2,
        family: GID_FAMILY_IPV6,
        gid: v4,
        mac,
        vlan: VLAN_NONE,
        ..SetGidCmd::default()
    };
    assert_eq!(g.cmd(&bad_family).status, STATUS_BAD_PARAM);
    assert_eq!(
        g.cmd(&SetGidCmd {
            gid_type: 3,
            ..bad_family
        })
        .status,
        STATUS_BAD_PARAM
    );
    assert_eq!(
        g.cmd(&SetGidCmd {
            index: GID_TABLE_LEN,
            family: GID_FAMILY_IPV4,
            ..bad_family
        })
        .status,
        STATUS_BAD_PARAM
    );
    assert_eq!(
        g.cmd(&SetGidCmd {
            mac: [1, 0, 0, 0, 0, 0],
            family: GID_FAMILY_IPV4,
            ..bad_family
        })
        .status,
        STATUS_BAD_PARAM
    );
    g.ok(&ClearGidCmd { index: 2, rsvd: 0 });
    assert!(g.dev.core.objects().gid(2).is_none());
    assert_eq!(
        ferroce_nic::control::gids_json(&g.dev)["gids"]
            .as_array()
            .map(Vec::len),
        Some(3)
    );
}

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
    std::thread::sleep(std::time::Duration::from_millis(2));
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
        assert_eq!(RdmaSeg::decode(&log.sends[0].seg).rkey, 0x1234);
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

#[test]
fn qid_translation_confines_user_contexts() {
    let mut g = Guest::new();
    g.bring_up();
    let eqn = g.create_ceq(4, 2);
    let cq = GuestCq::create(&mut g, eqn, 6);
    let mut qp = GuestQp::create(&mut g, QpType::Rc, cq.cqn, cq.cqn, NONE);
    qp.connect(&mut g);
    let ctx = g.ok(&AllocCtxCmd::default()).ctx as usize;
    g.ok(&MapQidCmd {
        ctx: ctx as u32,
        local_qid: 9,
        global: qp.qpn,
        kind: QID_KIND_QP,
        ..MapQidCmd::default()
    });
    let ctrl = WqeCtrl {
        wr_id: 1,
        opcode: WR_SEND,
        ..WqeCtrl::default()
    };
    qp.put_send(&g, ctrl, &[0; 40], &[]);
    qp.ring_sq(&mut g, ctx, 9);
    assert_eq!(
        g.log.lock().expect("log").sends.len(),
        1,
        "local QID 9 of the context reaches the QP"
    );
    // The QP's global number means nothing on the user page; another context reaches nothing.
    let bad = g.counters.get(COUNTER_BAD_DOORBELLS);
    qp.put_send(&g, ctrl, &[0; 40], &[]);
    qp.ring_sq(&mut g, ctx, qp.qpn as u16);
    qp.ring_sq(&mut g, ctx + 1, 9);
    assert_eq!(g.counters.get(COUNTER_BAD_DOORBELLS) - bad, 2);
    let events = g.poll_eq(EQN_ASYNC);
    assert!(events
        .iter()
        .all(|e| EventType::try_from(e.event_type) == Ok(EventType::DoorbellError)));
    assert_eq!(events.len(), 2);
    // A CQ arm through a QP mapping is refused (kind mismatch).
    g.w32(
        db_page_offset(ctx) + DB_CQ_ARM,
        CqArmDoorbell {
            qid: 9,
            solicited: false,
        }
        .encode(),
    );
    assert_eq!(g.counters.get(COUNTER_BAD_DOORBELLS) - bad, 3);
    // Destroying the QP removes its mapping, so a reused QPN is unreachable from the context.
    assert_eq!(
        GuestQp::modify(&mut g, qp.qpn, QpState::Reset, 0).status,
        STATUS_OK
    );
    g.ok(&DestroyQpCmd {
        qpn: qp.qpn,
        rsvd: 0,
    });
    assert!(g
        .dev
        .core
        .objects()
        .translate_qid(ctx, 9, QID_KIND_QP)
        .is_none());
    g.ok(&FreeCtxCmd {
        ctx: ctx as u32,
        rsvd: 0,
    });
    assert_eq!(
        g.cmd(&FreeCtxCmd { ctx: 0, rsvd: 0 }).status,
        STATUS_BAD_PARAM
    );
}

/// A context number (doorbell page) handed to a new process carries nothing of the old one: no
/// push window bytes, no QID mappings, no doorbell errors still waiting to be reported.
#[test]
fn freed_context_leaves_nothing_to_the_next_tenant() {
    let mut g = Guest::new();
    g.bring_up();
    let eqn = g.create_ceq(4, 2);
    let cq = GuestCq::create(&mut g, eqn, 6);
    let mut qp = GuestQp::create(&mut g, QpType::Rc, cq.cqn, cq.cqn, NONE);
    qp.connect(&mut g);
    let ctx = g.ok(&AllocCtxCmd::default()).ctx;
    for local_qid in [3u32, 9] {
        g.ok(&MapQidCmd {
            ctx,
            local_qid,
            global: qp.qpn,
            kind: QID_KIND_QP,
            ..MapQidCmd::default()
        });
    }
    let page = db_page_offset(ctx as usize);
    // The old tenant pushes a WQE through its window...
    let ctrl = WqeCtrl {
        wr_id: 0x01d,
        opcode: WR_SEND,
        flags: WQE_FLAG_INLINE,
        inline_len: 8,
        ..WqeCtrl::default()
    };
    let wqe = qp.put_send(&g, ctrl, &[0; 40], b"secret!!");
    for (i, chunk) in wqe[..128].chunks(8).enumerate() {
        g.dev
            .bar0_write((page + PUSH_WINDOW_OFFSET + i * 8) as u64, chunk);
    }
    // ...and rings a doorbell the device rejects, whose report is still waiting when the
    // context is freed (FREE_CTX executed straight away, not after a `process` round).
    g.w32(page + DB_SQ, Doorbell { qid: 200, index: 1 }.encode());
    let free = CmdHeader {
        opcode: CMD_FREE_CTX,
        ..CmdHeader::default()
    };
    g.dev
        .execute(&free, &FreeCtxCmd { ctx, rsvd: 0 }.to_payload())
        .expect("FREE_CTX");
    let alloc = CmdHeader {
        opcode: CMD_ALLOC_CTX,
        ..CmdHeader::default()
    };
    let again = g
        .dev
        .execute(&alloc, &AllocCtxCmd::default().to_payload())
        .expect("ALLOC_CTX");
    assert_eq!(
        again[0], ctx,
        "the next process gets the same context number"
    );

    let window = g
        .dev
        .core
        .doorbells()
        .push_window(ctx as usize)
        .expect("window");
    assert!(
        window.iter().all(|&b| b == 0),
        "the old tenant's pushed WQE is still in the push window: {:02x?}",
        &window[..32]
    );
    for local_qid in [3u16, 9] {
        assert_eq!(
            g.dev
                .core
                .objects()
                .translate_qid(ctx as usize, local_qid, QID_KIND_QP),
            None,
            "local QID {local_qid} still mapped"
        );
    }
    // The old local QIDs reach nothing: a send and a push doorbell are both rejected, and no WQE
    // is fetched or pushed.
    let (bad, fetches, pushes) = (
        g.counters.get(COUNTER_BAD_DOORBELLS),
        g.counters.get(COUNTER_WQE_FETCHES),
        g.counters.get(COUNTER_WQE_PUSHES),
    );
    let sends = g.log.lock().expect("log").sends.len();
    let (sq, push) = (
        Doorbell {
            qid: 9,
            index: qp.sq_pi,
        }
        .encode(),
        Doorbell {
            qid: 3,
            index: qp.sq_pi,
        }
        .encode(),
    );
    g.w32(page + DB_SQ, sq);
    g.w32(page + DB_PUSH, push);
    g.run();
    assert_eq!(g.counters.get(COUNTER_BAD_DOORBELLS) - bad, 2);
    assert_eq!(g.counters.get(COUNTER_WQE_FETCHES), fetches, "WQE fetched");
    assert_eq!(g.counters.get(COUNTER_WQE_PUSHES), pushes, "WQE pushed");
    assert_eq!(g.log.lock().expect("log").sends.len(), sends);
    // Only the new tenant's two doorbell errors are reported, not the old one's.
    let reported: Vec<(u32, u32)> = g
        .poll_eq(EQN_ASYNC)
        .iter()
        .filter(|e| EventType::try_from(e.event_type) == Ok(EventType::DoorbellError))
        .map(|e| (e.data0, e.data1))
        .collect();
    assert_eq!(reported, vec![(ctx, sq), (ctx, push)]);
}

#[test]
fn counters_in_bar0_match_the_host_view() {
    let mut g = Guest::new();
    g.bring_up();
    let writes_before = g.r64(counter_offset(COUNTER_MMIO_WRITES));
    g.w32(REG_SCRATCH, 1);
    g.w32(REG_SCRATCH, 2);
    let writes_after = g.r64(counter_offset(COUNTER_MMIO_WRITES));
    assert_eq!(writes_after - writes_before, 2);
    assert_eq!(
        u64::from(g.r32(counter_offset(COUNTER_COMMANDS))),
        g.counters.get(COUNTER_COMMANDS)
    );
    let named = g.counters.named();
    assert!(named
        .iter()
        .any(|(name, value)| *name == "mmio_writes" && *value >= writes_after));
}

#[test]
fn host_controls_stall_hang_bogus_version_and_cqes() {
    use std::sync::atomic::Ordering;
    let mut g = Guest::new();
    g.bring_up();
    // Stall: the command stays unexecuted until released.
    g.host.stall.store(true, Ordering::Relaxed);
    let index = g.cmd_pi;
    g.write(
        g.cmd_sq + u64::from(index & 15) * 128,
        &encode_command(
            &CmdHeader {
                opcode: CMD_NOP,
                token: 999,
                ..CmdHeader::default()
            },
            &[],
        ),
    );
    g.cmd_pi += 1;
    g.w32(REG_CMDQ_DB, u32::from(g.cmd_pi));
    g.run();
    assert_eq!(g.r32(REG_CMDQ_CI), u32::from(index));
    g.host.stall.store(false, Ordering::Relaxed);
    g.run();
    assert_eq!(g.r32(REG_CMDQ_CI), u32::from(index) + 1);
    g.token = 999;
    // Hang: all-ones reads, writes ignored.
    g.host.hang.store(true, Ordering::Relaxed);
    assert_eq!(g.r32(REG_ID), u32::MAX);
    g.w32(REG_SCRATCH, 5);
    g.host.hang.store(false, Ordering::Relaxed);
    assert_ne!(g.r32(REG_SCRATCH), 5);
    // Bogus version.
    g.host.bogus_version.store(true, Ordering::Relaxed);
    assert_ne!(if_version_major(g.r32(REG_IF_VERSION)), IF_VERSION_MAJOR);
    g.host.bogus_version.store(false, Ordering::Relaxed);
    // A lie in one CQE: an undefined opcode and status.
    let eqn = g.create_ceq(4, 2);
    let mut cq = GuestCq::create(&mut g, eqn, 4);
    g.host.lies.arm(Some(Lie::CqeOpcode), 1);
    g.dev
        .core
        .write_cqe(
            cq.cqn,
            Cqe {
                wr_id: 1,
                ..Cqe::default()
            },
        )
        .expect("cqe");
    g.dev
        .core
        .write_cqe(
            cq.cqn,
            Cqe {
                wr_id: 2,
                ..Cqe::default()
            },
        )
        .expect("cqe");
    let got = cq.poll(&g);
    assert_eq!(got.len(), 2, "still a valid owner bit");
    assert_eq!(
        (got[0].wr_id, got[0].opcode, got[0].status),
        (1, 0x7e, 0xee)
    );
    assert_eq!(
        (got[1].wr_id, got[1].opcode, got[1].status),
        (2, 0, 0),
        "told once"
    );
    // Injected fatal error: status, async event, and no more command processing.
    g.dev.core.request_fatal();
    g.run();
    assert_ne!(g.r32(REG_DEV_STATUS) & STATUS_FATAL, 0);
    assert_eq!(g.r32(REG_FATAL_CODE), FATAL_INJECTED);
    assert_eq!(
        g.poll_eq(EQN_ASYNC)
            .last()
            .map(|e| EventType::try_from(e.event_type)),
        Some(Ok(EventType::DeviceFatal))
    );
    g.reset();
    assert_eq!(g.r32(REG_DEV_STATUS) & STATUS_FATAL, 0);
}

#[test]
fn dma_errors_on_rings_are_fatal_not_panics() {
    let mut g = Guest::new();
    g.bring_up();
    // The command ring moves to unmapped memory: the device goes fatal.
    g.w32(REG_CMDQ_CTRL, 0);
    g.w64(REG_CMDQ_SQ_BASE_LO, 0x4000_0000);
    g.w32(REG_CMDQ_CTRL, CMDQ_CTRL_ENABLE);
    g.w32(REG_CMDQ_DB, 1);
    g.run();
    assert_eq!(g.r32(REG_FATAL_CODE), FATAL_CMDQ_DMA);
    assert!(g.counters.get(COUNTER_DMA_ERRORS) >= 1);
}

#[test]
fn trace_records_json_lines() {
    let mut g = Guest::new();
    let path = std::env::temp_dir().join(format!("ferroce-trace-{}.jsonl", std::process::id()));
    g.dev.core.trace().start(&path).expect("trace");
    g.bring_up();
    g.cmd(&NopCmd::default());
    g.dev.core.trace().stop().expect("stop");
    let text = std::fs::read_to_string(&path).expect("read trace");
    let _ = std::fs::remove_file(&path);
    let events: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    assert!(events.iter().any(|e| e["ev"] == "mmio" && e["dir"] == "w"));
    assert!(events
        .iter()
        .any(|e| e["ev"] == "cmd" && e["name"] == "nop"));
    assert!(events.iter().any(|e| e["ev"] == "eqe"));
    assert!(events.iter().all(|e| e["t_us"].is_u64()));
}

#[test]
fn guest_memory_bounds() {
    let g = Guest::new();
    let mut buf = [0u8; 8];
    assert!(g.mem.read(RAM_BASE - 1, &mut buf).is_err());
    assert!(g
        .mem
        .read(RAM_BASE + RAM_SIZE as u64 - 4, &mut buf)
        .is_err());
    assert!(g.mem.read(u64::MAX - 2, &mut buf).is_err());
}

#[test]
fn fast_registration_and_invalidation() {
    let mut g = Guest::new();
    g.bring_up();
    let fast = g
        .ok(&CreateMrCmd {
            pd: 1,
            flags: MR_FLAG_FAST_REG,
            max_pages: 4,
            ..CreateMrCmd::default()
        })
        .key;
    let mut byte = [0u8; 1];
    assert!(
        g.dev.core.read_payload(1, fast, 0, &mut byte, 0).is_err(),
        "invalid until registered"
    );
    let pbl = g.alloc(16, 8);
    let (page_a, page_b) = (g.alloc(4096, 4096), g.alloc(4096, 4096));
    g.write(pbl, &[page_a.to_le_bytes(), page_b.to_le_bytes()].concat());
    g.write(page_b + 0x10, &[0x77]);
    let new_key = mr_key(mr_key_index(fast), 0x33);
    let seg = RegMrSeg {
        iova: 0x9000_0000,
        length: 8192,
        pbl_addr: pbl,
        key: new_key,
        access: ACCESS_LOCAL_WRITE | ACCESS_REMOTE_READ,
        page_count: 2,
        log_page_size: 12,
        ..RegMrSeg::default()
    };
    assert!(g.dev.core.fast_register(2, &seg).is_err(), "PD mismatch");
    assert!(
        g.dev
            .core
            .fast_register(
                1,
                &RegMrSeg {
                    page_count: 5,
                    ..seg
                }
            )
            .is_err(),
        "beyond max_pages"
    );
    g.dev.core.fast_register(1, &seg).expect("register");
    g.dev
        .core
        .read_payload(1, new_key, 0x9000_1010, &mut byte, ACCESS_REMOTE_READ)
        .expect("read");
    assert_eq!(byte, [0x77]);
    assert!(
        g.dev
            .core
            .read_payload(1, fast, 0x9000_1010, &mut byte, 0)
            .is_err(),
        "the old key is gone"
    );
    g.dev.core.invalidate(1, 0, new_key).expect("invalidate");
    assert!(g
        .dev
        .core
        .read_payload(1, new_key, 0x9000_1010, &mut byte, 0)
        .is_err());
    // The MR goes by its index whatever variant the driver still knows (a REG_MR that was
    // flushed leaves the device a variant behind); a second destroy finds nothing.
    let stale = mr_key(mr_key_index(new_key), (new_key as u8).wrapping_add(1));
    g.ok(&DestroyMrCmd {
        key: stale,
        rsvd: 0,
    });
    assert_eq!(
        g.cmd(&DestroyMrCmd {
            key: new_key,
            rsvd: 0
        })
        .status,
        STATUS_BAD_RESOURCE
    );
}

/// A REG_MR work request gets the access rules of CREATE_MR: only defined access bits, and
/// remote write or atomic only together with local write. A refused one leaves the MR as it was.
#[test]
fn fast_registration_follows_the_create_mr_access_rules() {
    let mut g = Guest::new();
    g.bring_up();
    // CREATE_MR refuses these (the rules REG_MR must follow).
    for access in [
        ACCESS_REMOTE_WRITE,
        ACCESS_REMOTE_ATOMIC,
        ACCESS_REMOTE_READ | ACCESS_REMOTE_WRITE,
        ACCESS_VALID_MASK + 1,
    ] {
        let c = g.cmd(&CreateMrCmd {
            pd: 1,
            access,
            flags: MR_FLAG_FAST_REG,
            max_pages: 4,
            ..CreateMrCmd::default()
        });
        assert_eq!(c.status, STATUS_BAD_PARAM, "CREATE_MR access {access:#x}");
    }
    let fast = g
        .ok(&CreateMrCmd {
            pd: 1,
            flags: MR_FLAG_FAST_REG,
            max_pages: 4,
            ..CreateMrCmd::default()
        })
        .key;
    let pbl = g.alloc(16, 8);
    let page = g.alloc(4096, 4096);
    g.write(pbl, &page.to_le_bytes());
    let new_key = mr_key(mr_key_index(fast), 0x44);
    let seg = RegMrSeg {
        iova: 0x7000_0000,
        length: 4096,
        pbl_addr: pbl,
        key: new_key,
        access: ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE,
        page_count: 1,
        log_page_size: 12,
        ..RegMrSeg::default()
    };
    let mut byte = [0u8; 1];
    for access in [
        ACCESS_REMOTE_WRITE,
        ACCESS_REMOTE_ATOMIC,
        ACCESS_REMOTE_READ | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_ATOMIC,
        ACCESS_VALID_MASK + 1,
        1 << 31,
    ] {
        assert!(
            g.dev
                .core
                .fast_register(1, &RegMrSeg { access, ..seg })
                .is_err(),
            "REG_MR with access {access:#x} was accepted"
        );
        let mr = g
            .dev
            .core
            .objects()
            .mrs()
            .get(mr_key_index(fast))
            .expect("mr");
        assert_eq!(
            (mr.key, mr.access),
            (fast, 0),
            "a refused REG_MR changed the MR"
        );
        assert!(
            g.dev
                .core
                .read_payload(1, new_key, 0x7000_0000, &mut byte, 0)
                .is_err(),
            "a refused REG_MR made the MR valid"
        );
    }
    g.dev.core.fast_register(1, &seg).expect("register");
    g.dev
        .core
        .write_payload(1, new_key, 0x7000_0010, &[0x5a], ACCESS_REMOTE_WRITE)
        .expect("remote write into a local-write MR");
    assert_eq!(g.read(page + 0x10, 1), [0x5a]);
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
            .map(|eq| eq.overruns)
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
