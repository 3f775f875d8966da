// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The device model driven through BAR0 and DMA by the test guest.

mod common;

use common::*;
use ferroce_hw::*;
use ferroce_nic::engine::EngineHost;
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
    g.dev.core.bus().trace().start(&path).expect("trace");
    g.bring_up();
    g.cmd(&NopCmd::default());
    g.dev.core.bus().trace().stop().expect("stop");
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
    // The first record puts the trace on the wall clock, so that two NICs' traces line up.
    let clock = &events[0];
    assert_eq!(clock["ev"], "clock");
    let unix_us = clock["unix_us"].as_u64().expect("unix_us");
    let now_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_micros() as u64;
    assert!(unix_us <= now_us && now_us - unix_us < 60_000_000);
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
