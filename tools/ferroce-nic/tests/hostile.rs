// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Hostile guests: random command fields, ring indexes, doorbells, doorbell records, WQEs and
//! MMIO must give error statuses or events, never a panic or an out-of-bounds access.

mod common;

use common::fuzz::{self, still_works};
use common::roce::{self, Node};
use common::seeds;
use common::*;
use ferroce_hw::*;
use ferroce_nic::engine::wire::back_to_back;
use ferroce_nic::engine::EngineHost;
use proptest::prelude::*;

/// A guest with one of everything, for fuzzing against live objects.
fn populated() -> (Guest, GuestCq, GuestQp) {
    let mut g = Guest::new();
    g.bring_up();
    let eqn = g.create_ceq(4, 2);
    let cq = GuestCq::create(&mut g, eqn, 4);
    let qp = GuestQp::create(&mut g, QpType::Rc, cq.cqn, cq.cqn, NONE);
    qp.connect(&mut g);
    (g, cq, qp)
}

fn addr_strategy() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        Just(u64::MAX),
        Just(u64::MAX - 7),
        (RAM_BASE..RAM_BASE + RAM_SIZE as u64),
        any::<u64>(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_command_payloads(opcode_index in 0..CMD_OPCODES.len() + 1, payload in proptest::collection::vec(any::<u8>(), 0..CMD_PAYLOAD_SIZE), out in addr_strategy(), flags in prop_oneof![Just(0u16), any::<u16>()]) {
        let (mut g, _cq, _qp) = populated();
        let opcode = CMD_OPCODES.get(opcode_index).copied().unwrap_or(0x7777);
        let ring = Ring::new(g.cmd_log, MAX_LOG_CMDQ).expect("ring");
        let index = g.cmd_pi;
        let header = CmdHeader { opcode, flags, token: 42, out_addr: out };
        g.write(g.cmd_sq + u64::from(ring.slot(index)) * CMD_ENTRY_SIZE as u64, &encode_command(&header, &payload));
        g.cmd_pi = index.wrapping_add(1);
        g.w32(REG_CMDQ_DB, u32::from(g.cmd_pi));
        g.run();
        still_works(&mut g);
    }

    #[test]
    fn structured_commands_with_hostile_fields(
        addr in addr_strategy(),
        pages in prop_oneof![Just(0u32), 1u32..4, Just(u32::MAX)],
        log_page in any::<u8>(),
        log_size in prop_oneof![0u8..20, any::<u8>()],
        stride in prop_oneof![0u8..12, any::<u8>()],
        number in prop_oneof![0u32..70, Just(NONE), any::<u32>()],
        word in any::<u32>(),
        byte in any::<u8>(),
    ) {
        let (mut g, cq, qp) = populated();
        let ring = BufDesc { addr, page_count: pages, log_page_size: log_page, rsvd: [0; 3] };
        g.cmd(&CreateEqCmd { ring, log_size, vector: word as u16, ..CreateEqCmd::default() });
        g.cmd(&CreateCqCmd { ring, dbrec_addr: addr, eqn: number, log_size, moder_count: word as u16, ..CreateCqCmd::default() });
        g.cmd(&CreateQpCmd { sq: ring, rq: ring, dbrec_addr: addr, pd: word, sq_cqn: number, rq_cqn: cq.cqn, srqn: number, qp_type: byte, sq_log_size: log_size, sq_log_stride: stride, rq_log_size: log_size, rq_log_stride: stride, ..CreateQpCmd::default() });
        g.cmd(&CreateSrqCmd { ring, dbrec_addr: addr, limit: word, log_size, log_stride: stride, ..CreateSrqCmd::default() });
        g.cmd(&CreateMrCmd { iova: addr, length: u64::from(word) << 8, pages: ring, pd: 1, access: u32::from(byte), flags: byte, max_pages: word, ..CreateMrCmd::default() });
        g.cmd(&CreateAhCmd { pd: 1, flow_label: word, sgid_index: byte, vlan: word as u16, ..CreateAhCmd::default() });
        g.cmd(&ModifyQpCmd { qpn: number, attr_mask: word, new_state: byte, cur_state: byte, path_mtu: byte, sgid_index: byte, dest_qpn: word, rq_psn: word, sq_psn: word, access_flags: word, timeout: byte, retry_cnt: byte, rnr_retry: byte, min_rnr_timer: byte, max_rd_atomic: byte, max_dest_rd_atomic: byte, pkey_index: word as u16, vlan: word as u16, flow_label: word, ..ModifyQpCmd::default() });
        g.cmd(&ModifyQpCmd { qpn: qp.qpn, attr_mask: word, new_state: byte % 8, ..ModifyQpCmd::default() });
        g.cmd_out(&QueryQpCmd { qpn: number }, addr);
        g.cmd_out(&QueryCountersCmd { first: number, count: word }, addr);
        g.cmd(&SetGidCmd { index: number, gid_type: byte, family: byte, gid: [byte; 16], vlan: word as u16, ..SetGidCmd::default() });
        g.cmd(&ClearGidCmd { index: number, rsvd: 0 });
        g.cmd(&MapQidCmd { ctx: number, local_qid: word, global: number, kind: byte, ..MapQidCmd::default() });
        g.cmd(&UnmapQidCmd { ctx: number, local_qid: word });
        g.cmd(&FreeCtxCmd { ctx: number, rsvd: 0 });
        g.cmd(&ModifyEqCmd { eqn: number, vector: word as u16, rsvd: 0 });
        g.cmd(&ModifyCqCmd { cqn: number, moder_count: word as u16, moder_period_us: word as u16, ..ModifyCqCmd::default() });
        g.cmd(&ModifySrqCmd { srqn: number, limit: word });
        g.cmd(&SetPortCmd { port: number, active_mtu: byte, ..SetPortCmd::default() });
        for destroy in [CMD_DESTROY_EQ, CMD_DESTROY_CQ, CMD_DESTROY_QP, CMD_DESTROY_MR, CMD_DESTROY_AH, CMD_DESTROY_SRQ] {
            g.cmd_raw(destroy, &number.to_le_bytes(), 0);
        }
        still_works(&mut g);
    }

    #[test]
    fn hostile_ring_indexes_and_doorbell_records(
        sq_index in any::<u16>(),
        cmd_pi in any::<u16>(),
        eq_ci in any::<u16>(),
        cq_ci in any::<u32>(),
        rq_pi in any::<u32>(),
        qid in any::<u16>(),
        ctx in 0usize..NUM_DB_PAGES,
        reg in prop_oneof![Just(DB_SQ), Just(DB_RQ), Just(DB_SRQ), Just(DB_CQ_ARM), Just(DB_PUSH), (0usize..0x800).prop_map(|o| o & !3)],
        garbage in proptest::collection::vec(any::<u8>(), 512),
    ) {
        let (mut g, cq, qp) = populated();
        // Garbage WQEs in the whole send ring, then a doorbell anywhere.
        for slot in 0..(1u64 << qp.sq_log) {
            g.write(qp.sq + slot * 512, &garbage);
        }
        g.w32(db_page_offset(0) + DB_SQ, Doorbell { qid: qp.qpn as u16, index: sq_index }.encode());
        g.run();
        // Push window garbage and push doorbell.
        for (i, chunk) in garbage.chunks(8).enumerate() {
            g.dev.bar0_write((db_page_offset(ctx) + PUSH_WINDOW_OFFSET + i * 8) as u64, chunk);
        }
        g.w32(db_page_offset(ctx) + reg, Doorbell { qid, index: sq_index }.encode());
        g.w32(db_page_offset(0) + reg, Doorbell { qid, index: sq_index }.encode());
        // Doorbell records with nonsense.
        g.write_u32(cq.dbrec, cq_ci);
        g.write_u32(qp.dbrec + 4, rq_pi);
        let _ = g.dev.core.take_recv(qp.qpn);
        let _ = g.dev.core.write_cqe(cq.cqn, Cqe::default());
        let _ = g.dev.core.complete_send(qp.qpn, sq_index, WcStatus::Success, 0);
        // EQ doorbell with a consumer beyond the producer, for every EQ number.
        for eqn in [0u8, 1, 2, 200] {
            g.w32(REG_EQ_DB, EqDoorbell { eqn, ci: eq_ci, arm: true }.encode());
        }
        // Command doorbell far ahead: the queue stops with an error, never runs stale entries.
        g.w32(REG_CMDQ_DB, u32::from(cmd_pi));
        g.run();
        still_works(&mut g);
    }

    #[test]
    fn random_mmio(ops in proptest::collection::vec((0u64..(BAR0_SIZE as u64 + 16), prop_oneof![Just(1usize), Just(2), Just(4), Just(8), 0usize..16], any::<u64>(), any::<bool>()), 1..64)) {
        let (mut g, _cq, _qp) = populated();
        for (offset, len, value, write) in ops {
            let bytes = value.to_le_bytes();
            let mut data = vec![0u8; len];
            for (i, b) in data.iter_mut().enumerate() {
                *b = bytes[i % 8];
            }
            if write {
                g.dev.bar0_write(offset, &data);
            } else {
                g.dev.bar0_read(offset, &mut data);
            }
            g.run();
        }
        still_works(&mut g);
    }
}

/// Whether `CMD_CREATE_AH` would accept the address vector and its source GID entry is one of
/// the four a [`Node`] programs.
fn av_usable(av: &UdAvSeg) -> bool {
    av.sgid_index < 4
        && av.flow_label <= FLOW_LABEL_MASK
        && (av.vlan == VLAN_NONE || av.vlan <= 4095)
        && av.rsvd == 0
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Random bytes as the inline address vector of a UD or GSI send (`WQE_FLAG_AV`) through the
    /// RoCE engine towards a second NIC, raw or with the fields chosen by `fix` made plausible
    /// (so that the frames reach the peer): the sender completes the WQE with success exactly
    /// when the AV is usable and with the bad-AH error otherwise, the peer completes nothing
    /// in error, nothing panics and both NICs keep answering commands.
    #[test]
    fn random_inline_address_vectors(
        bytes in proptest::collection::vec(any::<u8>(), UdAvSeg::SIZE),
        fix in prop_oneof![Just(u8::MAX), any::<u8>()],
        gsi in any::<bool>(),
        inline in any::<bool>(),
        len in 0u32..1500,
    ) {
        let (qp_type, qkey) = if gsi { (QpType::Gsi, 0x8001_0000) } else { (QpType::Ud, 0x1111) };
        let (pa, pb) = back_to_back();
        let mut a = Node::new(1, 1 << 16, pa);
        let mut b = Node::new(2, 1 << 16, pb);
        let mut qa = roce::Qp::create(&mut a, qp_type);
        let mut qb = roce::Qp::create(&mut b, qp_type);
        qa.activate_ud(&mut a, qkey);
        qb.activate_ud(&mut b, qkey);
        let mut av = UdAvSeg::read_from(&bytes).expect("40 bytes");
        if fix & 1 != 0 {
            av.sgid_index %= 6;
            av.dmac = b.mac;
            av.remote_qpn = qb.qpn;
            av.remote_qkey = qkey;
        }
        if fix & 2 != 0 {
            av.dgid = b.gid(av.sgid_index);
        }
        if fix & 4 != 0 {
            av.flow_label &= FLOW_LABEL_MASK;
        }
        if fix & 8 != 0 {
            av.vlan = VLAN_NONE;
        }
        if fix & 16 != 0 {
            av.rsvd = 0;
        }
        let dst = b.buf;
        qb.post_recv(&mut b, 7, dst, 2048);
        let src = a.buf;
        a.fill(src, len as usize, u64::from(fix));
        let len = if inline { len.min(MAX_INLINE) } else { len };
        if inline {
            let ctrl = WqeCtrl {
                wr_id: 1,
                opcode: WR_SEND,
                flags: WQE_FLAG_SIGNALED | WQE_FLAG_AV | WQE_FLAG_INLINE,
                inline_len: len as u16,
                ..WqeCtrl::default()
            };
            let data = a.g.read(src, len as usize);
            qa.put(&a, ctrl, &av.encode(), &data);
            qa.ring(&mut a);
        } else {
            qa.post_av(&mut a, 1, WR_SEND, src, len, &av, 0, 0);
        }
        for _ in 0..4 {
            a.g.dev.process();
            b.g.dev.process();
        }
        let expected = if av_usable(&av) { WcStatus::Success } else { WcStatus::LocQpOpErr };
        let ca = a.cq.poll(&a.g);
        prop_assert_eq!(ca.iter().map(|c| (c.wr_id, c.wc_status())).collect::<Vec<_>>(), vec![(1, expected)], "{:?}", av);
        let cb = b.cq.poll(&b.g);
        prop_assert!(cb.iter().all(|c| c.wc_status() == WcStatus::Success), "{:?}", cb);
        if fix == u8::MAX && expected == WcStatus::Success {
            // Addressed to the peer's QP from a GID it can answer: it arrives.
            prop_assert_eq!(cb.iter().map(|c| c.byte_len).collect::<Vec<_>>(), vec![len + 40]);
        }
        prop_assert_eq!(a.g.cmd(&NopCmd::default()).status, STATUS_OK);
        prop_assert_eq!(b.g.cmd(&NopCmd::default()).status, STATUS_OK);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// The libFuzzer command target's body on random bytes: command entries, doorbells, send
    /// and receive WQEs and device rounds on an enabled device with the RoCE engine and live
    /// QPs; the device answers a NOP afterwards (after a bring-up, if the bytes killed it).
    #[test]
    fn random_command_streams(data in proptest::collection::vec(any::<u8>(), 0..2048)) {
        fuzz::commands(&data);
    }
}

/// The seeds of the command corpus do what they are named for.
#[test]
fn the_command_seeds_reach_the_queues() {
    for (name, data) in seeds::command_seeds() {
        let live = fuzz::commands_after(&data);
        let got: Vec<(u64, WcStatus)> = live
            .s
            .cqes
            .iter()
            .map(|c| (c.wr_id, c.wc_status()))
            .collect();
        let has = |id, status| got.contains(&(id, status));
        let ok = match name {
            // A send to the UD QP itself and the first receive posted there.
            "ud-loopback" => has(9, WcStatus::Success) && has(200, WcStatus::Success),
            // Sent, never answered: nothing completes.
            "rc-write" => got.is_empty(),
            "bad-wqe" => has(12, WcStatus::WrFlushErr) || has(12, WcStatus::LocQpOpErr),
            "error-then-post" => has(10, WcStatus::WrFlushErr) && has(1, WcStatus::WrFlushErr),
            _ => true,
        };
        assert!(ok, "{name}: {got:?}");
    }
}

#[test]
fn cmdq_doorbell_beyond_the_ring_stops_the_queue() {
    let mut g = Guest::new();
    g.bring_up();
    g.w32(REG_CMDQ_DB, 1000);
    g.run();
    assert_eq!(g.r32(REG_CMDQ_STATUS), CMDQ_STATUS_ERROR);
    assert_eq!(g.r32(REG_CMDQ_CI), 0, "nothing executed");
    // Re-enabling recovers.
    g.w32(REG_CMDQ_CTRL, 0);
    g.setup_cmdq(4);
    assert_eq!(g.cmd(&NopCmd::default()).status, STATUS_OK);
}

#[test]
fn bad_cmdq_and_eq_setup_are_refused() {
    let mut g = Guest::new();
    g.reset();
    g.w64(REG_CMDQ_SQ_BASE_LO, RAM_BASE + 3);
    g.w64(REG_CMDQ_CQ_BASE_LO, RAM_BASE);
    g.w32(REG_CMDQ_LOG_SIZE, 4);
    g.w32(REG_CMDQ_CTRL, CMDQ_CTRL_ENABLE);
    assert_eq!(g.r32(REG_CMDQ_STATUS), CMDQ_STATUS_ERROR, "misaligned");
    g.w32(REG_CMDQ_LOG_SIZE, 40);
    g.w32(REG_CMDQ_CTRL, CMDQ_CTRL_ENABLE);
    assert_eq!(g.r32(REG_CMDQ_STATUS), CMDQ_STATUS_ERROR, "too large");
    g.w64(REG_EQ_SETUP_BASE_LO, RAM_BASE);
    g.w32(REG_EQ_SETUP_LOG_SIZE, 16);
    g.w32(REG_EQ_SETUP_VECTOR, 0);
    g.w32(REG_EQ_SETUP_CTRL, EQN_ASYNC | EQ_SETUP_CREATE);
    assert_eq!(g.r32(REG_EQ_SETUP_STATUS), u32::from(STATUS_BAD_SIZE));
    g.w32(REG_EQ_SETUP_LOG_SIZE, 4);
    g.w32(REG_EQ_SETUP_VECTOR, 99);
    g.w32(REG_EQ_SETUP_CTRL, EQN_ASYNC | EQ_SETUP_CREATE);
    assert_eq!(g.r32(REG_EQ_SETUP_STATUS), u32::from(STATUS_BAD_PARAM));
    g.w32(REG_EQ_SETUP_CTRL, 7 | EQ_SETUP_CREATE);
    assert_eq!(
        g.r32(REG_EQ_SETUP_STATUS),
        u32::from(STATUS_BAD_PARAM),
        "only EQ 0 and 1"
    );
}

#[test]
fn malformed_wqes_move_the_qp_to_error_with_an_event() {
    let (mut g, mut cq, mut qp) = populated();
    for (ctrl, detail) in [
        (
            WqeCtrl {
                opcode: 0x55,
                ..WqeCtrl::default()
            },
            WQE_ERR_BAD_OPCODE,
        ),
        (
            WqeCtrl {
                opcode: WR_SEND,
                num_sge: 200,
                ..WqeCtrl::default()
            },
            WQE_ERR_BAD_SGE_COUNT,
        ),
        (
            WqeCtrl {
                opcode: WR_SEND,
                flags: WQE_FLAG_INLINE,
                inline_len: 4000,
                ..WqeCtrl::default()
            },
            WQE_ERR_BAD_INLINE,
        ),
    ] {
        qp.put_send(&g, ctrl, &[0; 40], &[]);
        qp.ring_sq(&mut g, 0, qp.qpn as u16);
        let events = g.poll_eq(EQN_ASYNC);
        assert_eq!(
            (
                EventType::try_from(events[0].event_type),
                events[0].subtype,
                events[0].data0
            ),
            (Ok(EventType::QpFatal), detail, qp.qpn)
        );
        assert_eq!(
            cq.poll(&g).last().map(|c| c.wc_status()),
            Some(WcStatus::WrFlushErr)
        );
        // Back to RTS for the next case.
        assert_eq!(
            GuestQp::modify(&mut g, qp.qpn, QpState::Reset, 0).status,
            STATUS_OK
        );
        qp.sq_pi = 0;
        qp.connect(&mut g);
    }
}

#[test]
fn tables_fill_up_with_no_resources() {
    let mut g = Guest::new();
    g.bring_up();
    let mut statuses = Vec::new();
    for _ in 0..100 {
        statuses.push(
            g.cmd(&CreateAhCmd {
                pd: 1,
                vlan: VLAN_NONE,
                ..CreateAhCmd::default()
            })
            .status,
        );
    }
    assert_eq!(statuses.iter().filter(|&&s| s == STATUS_OK).count(), 16);
    assert_eq!(statuses.last(), Some(&STATUS_NO_RESOURCES));
    for _ in 0..NUM_DB_PAGES {
        g.cmd(&AllocCtxCmd::default());
    }
    assert_eq!(g.cmd(&AllocCtxCmd::default()).status, STATUS_NO_RESOURCES);
    // An MR page list longer than the limit is refused before any allocation.
    let c = g.cmd(&CreateMrCmd {
        length: 1 << 40,
        pages: BufDesc {
            addr: RAM_BASE,
            page_count: MAX_MR_PAGES + 1,
            log_page_size: 12,
            rsvd: [0; 3],
        },
        pd: 1,
        ..CreateMrCmd::default()
    });
    assert_eq!(c.status, STATUS_BAD_PARAM);
    let c = g.cmd(&CreateMrCmd {
        length: 1 << 40,
        pages: BufDesc {
            addr: RAM_BASE,
            page_count: 4,
            log_page_size: 12,
            rsvd: [0; 3],
        },
        pd: 1,
        ..CreateMrCmd::default()
    });
    assert_eq!(
        c.status, STATUS_BAD_SIZE,
        "page list too short for the length"
    );
}
