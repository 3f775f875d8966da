// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Tests of the hardware interface definitions: layouts, ring arithmetic, doorbells, tables.

use core::mem::offset_of;

use ferroce_hw::*;

#[test]
fn ring_index_wraps_at_16_bits() {
    let ring = Ring::new(3, MAX_LOG_QUEUE).expect("ring");
    assert_eq!(ring.size(), 8);
    assert_eq!(ring.slot(9), 1);
    assert_eq!(ring.slot(0xffff), 7);
    // Producer past the 16-bit wrap, consumer before it.
    let (pi, ci) = (2u16, 0xfffeu16);
    assert_eq!(ring.used(pi, ci), 4);
    assert!(!ring.is_empty(pi, ci));
    assert!(!ring.is_full(pi, ci));
    assert!(ring.is_full(ci.wrapping_add(8), ci));
    assert!(ring.producer_valid(ci.wrapping_add(8), ci));
    assert!(!ring.producer_valid(ci.wrapping_add(9), ci));
    assert!(ring.advance_valid(0xfffe, 3, 0xfffc));
    assert!(
        !ring.advance_valid(5, 3, 0),
        "a producer never moves backwards"
    );
    assert!(Ring::new(16, MAX_LOG_QUEUE).is_none());
    assert!(Ring::new(5, 4).is_none());
}

#[test]
fn owner_bit_alternates_per_pass_and_survives_the_wrap() {
    let ring = Ring::new(2, MAX_LOG_QUEUE).expect("ring");
    let owners: Vec<u8> = (0u16..12).map(|i| ring.owner(i)).collect();
    assert_eq!(owners, [1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1]);
    // Index 0xffff is on an odd pass, 0 (after the wrap) on an even one: phases stay
    // consistent because 65536 is a multiple of twice every ring size.
    assert_eq!(ring.owner(0xffff), 0);
    assert_eq!(ring.owner(0), 1);
    for log in 0..=MAX_LOG_QUEUE {
        let ring = Ring::new(log, MAX_LOG_QUEUE).expect("ring");
        assert_ne!(ring.owner(0xffff), ring.owner(0));
        assert!(ring.entry_valid(0, 1));
        assert!(
            !ring.entry_valid(0, 0),
            "a zeroed ring holds no valid entry"
        );
    }
}

#[test]
fn doorbell_formats_round_trip() {
    let db = Doorbell {
        qid: 0x1234,
        index: 0xfffe,
    };
    assert_eq!(db.encode(), 0x1234_fffe);
    assert_eq!(Doorbell::decode(db.encode()), db);
    let arm = CqArmDoorbell {
        qid: 7,
        solicited: true,
    };
    assert_eq!(arm.encode(), 0x0007_0001);
    assert_eq!(CqArmDoorbell::decode(arm.encode()), arm);
    let eq = EqDoorbell {
        eqn: 3,
        ci: 0x8001,
        arm: true,
    };
    assert_eq!(eq.encode(), 0x8003_8001);
    assert_eq!(EqDoorbell::decode(eq.encode()), eq);
}

#[test]
fn layouts_have_the_documented_sizes_and_offsets() {
    assert_eq!(CmdHeader::SIZE + CMD_PAYLOAD_SIZE, 128);
    assert_eq!(CmdCompletion::SIZE, 32);
    assert_eq!(Eqe::SIZE, 16);
    assert_eq!(Cqe::SIZE, 64);
    assert_eq!(WqeCtrl::SIZE, 24);
    assert_eq!(WQE_HEADER_SIZE, 64);
    assert_eq!(Sge::SIZE, 16);
    assert_eq!(RecvWqeHeader::SIZE, 16);
    assert_eq!(BufDesc::SIZE, 16);
    assert_eq!(ModifyQpCmd::SIZE, 72);
    assert_eq!(offset_of!(Cqe, wqe_index), 24);
    assert_eq!(offset_of!(Cqe, opcode), 26);
    assert_eq!(offset_of!(Cqe, status), 27);
    assert_eq!(offset_of!(Cqe, smac), 32);
    assert_eq!(offset_of!(ModifyQpCmd, dgid), 12);
    assert_eq!(offset_of!(ModifyQpCmd, flow_label), 36);
    assert_eq!(offset_of!(CreateQpCmd, qp_type), 56);
    assert_eq!(offset_of!(CmdCompletion, results), 16);
    assert_eq!(offset_of!(WqeCtrl, inline_len), 12);
}

#[test]
fn encode_decode_round_trip_little_endian() {
    let cqe = Cqe {
        wr_id: 0x0102_0304_0506_0708,
        byte_len: 0x1122_3344,
        qpn: 9,
        wqe_index: 0xabcd,
        opcode: CQE_OP_RECV,
        status: WcStatus::WrFlushErr.into(),
        smac: [1, 2, 3, 4, 5, 6],
        owner: 1,
        ..Cqe::default()
    };
    let bytes = cqe.encode();
    assert_eq!(&bytes[..8], &[8, 7, 6, 5, 4, 3, 2, 1]);
    assert_eq!(&bytes[24..26], &[0xcd, 0xab]);
    assert_eq!(bytes[CQE_OWNER_OFFSET], 1);
    assert_eq!(Cqe::decode(&bytes), cqe);
    assert_eq!(Cqe::read_from(&bytes[..63]), None);
    let mut short = [0u8; 10];
    assert!(!cqe.write_to(&mut short));
    let cmd = CreateQpCmd {
        qp_type: QpType::Rc.into(),
        srqn: NONE,
        sq_log_stride: 7,
        ..CreateQpCmd::default()
    };
    assert_eq!(CreateQpCmd::from_payload(&cmd.to_payload()), cmd);
    // A short payload decodes as zeros rather than panicking.
    assert_eq!(
        CreateQpCmd::from_payload(&[u8::from(QpType::Rc)]),
        CreateQpCmd {
            sq: BufDesc {
                addr: 2,
                ..BufDesc::default()
            },
            ..CreateQpCmd::default()
        }
    );
    let entry = encode_command(
        &CmdHeader {
            opcode: CMD_SET_GID,
            token: 5,
            ..CmdHeader::default()
        },
        &[0xaa; 200],
    );
    assert_eq!(command_payload(&entry).len(), CMD_PAYLOAD_SIZE);
    assert_eq!(read_u32(&entry, 4), 5);
}

#[test]
fn port_info_round_trips_through_results() {
    let info = PortInfo {
        state: PORT_STATE_ACTIVE,
        active_mtu: MTU_1024,
        max_mtu: MTU_4096,
        mac: [0x52, 0x54, 0, 0x12, 0x34, 0x56],
    };
    assert_eq!(PortInfo::from_results(info.to_results()), Some(info));
}

#[test]
fn qp_state_machine_follows_ib() {
    assert!(QpState::Reset.can_move_to(QpState::Init));
    assert!(QpState::Init.can_move_to(QpState::Rtr));
    assert!(QpState::Rtr.can_move_to(QpState::Rts));
    assert!(QpState::Rts.can_move_to(QpState::Sqd));
    assert!(QpState::Sqe.can_move_to(QpState::Rts));
    assert!(QpState::Rts.can_move_to(QpState::Err));
    assert!(QpState::Err.can_move_to(QpState::Reset));
    assert!(!QpState::Reset.can_move_to(QpState::Rts));
    assert!(!QpState::Init.can_move_to(QpState::Rts));
    assert!(!QpState::Err.can_move_to(QpState::Rts));
    // Undefined states do not decode; every defined one round-trips.
    assert_eq!(QpState::try_from(9), Err(9));
    assert_eq!(QpState::from_raw(QP_STATE_ANY), None);
    for &state in QpState::ALL {
        assert_eq!(QpState::try_from(u8::from(state)), Ok(state));
        assert!(state.can_move_to(QpState::Err) && state.can_move_to(QpState::Reset));
    }
}

#[test]
fn wqe_validation() {
    let ctrl = WqeCtrl {
        opcode: WR_SEND,
        flags: WQE_FLAG_INLINE,
        inline_len: 256,
        ..WqeCtrl::default()
    };
    assert_eq!(validate_send_wqe(&ctrl, QpType::Rc, 512), Ok(()));
    assert_eq!(
        validate_send_wqe(&ctrl, QpType::Rc, 256),
        Err(WqeError::BadInline)
    );
    let too_long = WqeCtrl {
        inline_len: 257,
        ..ctrl
    };
    assert_eq!(
        validate_send_wqe(&too_long, QpType::Rc, 1024),
        Err(WqeError::BadInline)
    );
    let sges = WqeCtrl {
        opcode: WR_RDMA_WRITE,
        num_sge: 4,
        ..WqeCtrl::default()
    };
    assert_eq!(validate_send_wqe(&sges, QpType::Rc, 128), Ok(()));
    assert_eq!(
        validate_send_wqe(&sges, QpType::Rc, 64),
        Err(WqeError::BadSgeCount)
    );
    assert_eq!(
        validate_send_wqe(&sges, QpType::Ud, 128),
        Err(WqeError::BadQpType)
    );
    let bad = WqeCtrl {
        opcode: 0x42,
        ..WqeCtrl::default()
    };
    assert_eq!(
        validate_send_wqe(&bad, QpType::Rc, 1024),
        Err(WqeError::BadOpcode)
    );
    assert_eq!(send_wqe_size(0, 1), 80);
    let header = RecvWqeHeader {
        num_sge: 3,
        ..RecvWqeHeader::default()
    };
    assert_eq!(validate_recv_wqe(&header, 64), Ok(()));
    assert_eq!(validate_recv_wqe(&header, 32), Err(WqeError::BadSgeCount));
    assert_eq!(wqe_sge(&[0u8; 64], 64, 0), None);
    assert_eq!(wqe_sge(&[0u8; 80], 64, usize::MAX), None);
}

#[test]
fn gids_follow_seed_2_layout_rules() {
    // fe80:: + EUI-64 with the universal/local bit flipped, as Linux addrconf does.
    let gid = gid_from_mac([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]);
    assert_eq!(
        std::net::Ipv6Addr::from(gid).to_string(),
        "fe80::5054:ff:fe12:3456"
    );
    let v4: [u8; 16] = std::net::Ipv4Addr::new(10, 0, 1, 36)
        .to_ipv6_mapped()
        .octets();
    assert!(gid_is_ipv4_mapped(&v4));
    assert!(!gid_is_ipv4_mapped(&gid));
}

#[test]
fn bar0_map_is_consistent() {
    assert!(db_page_offset(NUM_DB_PAGES - 1) + DB_PAGE_SIZE <= BAR0_SIZE);
    assert_eq!(db_page_offset(0) % DB_PAGE_SIZE, 0);
    assert!(counter_offset(NUM_COUNTERS) <= MSIX_TABLE_OFFSET);
    assert_eq!(if_version_major(IF_VERSION), IF_VERSION_MAJOR);
    assert_eq!(&ID_MAGIC.to_le_bytes(), b"FRCE");
    assert_eq!(COUNTER_NAMES[COUNTER_MMIO_WRITES], c"mmio_writes");
    let mut names: Vec<&str> = CMD_OPCODES.iter().map(|&op| command_name(op)).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), CMD_OPCODES.len());
    assert!(!names.contains(&"unknown"));
    assert_eq!(mtu_bytes(MTU_4096), Some(4096));
    assert_eq!(mtu_bytes(0), None);
}

/// A CQ ring in memory, written as the device writes it.
struct TestCq {
    ring: Ring,
    slots: Vec<[u8; CQE_SIZE]>,
}

impl TestCq {
    fn new(log_size: u32) -> Self {
        let ring = Ring::new(log_size, MAX_LOG_QUEUE).expect("ring");
        Self {
            ring,
            slots: vec![[0; CQE_SIZE]; ring.size() as usize],
        }
    }

    fn write(&mut self, index: u16, qpn: u32, wr_id: u64) {
        let cqe = Cqe {
            qpn,
            wr_id,
            owner: self.ring.owner(index),
            ..Cqe::default()
        };
        self.slots[self.ring.slot(index) as usize] = cqe.encode();
    }

    fn read(&self, index: u16) -> Option<[u8; CQE_SIZE]> {
        let bytes = self.slots[self.ring.slot(index) as usize];
        self.ring
            .entry_valid(index, bytes[CQE_OWNER_OFFSET])
            .then_some(bytes)
    }

    /// The (qpn, wr_id) of the valid CQEs from `ci` on.
    fn valid(&self, mut ci: u16) -> Vec<(u32, u64)> {
        let mut out = Vec::new();
        while let Some(bytes) = self.read(ci) {
            let cqe = Cqe::decode(&bytes);
            out.push((cqe.qpn, cqe.wr_id));
            ci = ci.wrapping_add(1);
        }
        out
    }

    fn clean(&mut self, ci: u16, qpn: u32) -> u16 {
        let snapshot = self.slots.clone();
        let ring = self.ring;
        let mut writes = Vec::new();
        let freed = clean_cqes(
            ring,
            ci,
            |i| {
                let bytes = snapshot[ring.slot(i) as usize];
                ring.entry_valid(i, bytes[CQE_OWNER_OFFSET])
                    .then_some(bytes)
            },
            |cqe| cqe.qpn == qpn,
            |i, body| writes.push((i, body.to_vec())),
        );
        // Each move goes to an index at or above the one read, and reads go downwards: reading
        // a snapshot and applying the moves afterwards is what a ring in place sees.
        for (i, body) in writes {
            self.slots[ring.slot(i) as usize][..CQE_OWNER_OFFSET].copy_from_slice(&body);
        }
        freed
    }
}

#[test]
fn cleaning_a_cq_removes_one_qps_cqes_and_keeps_the_others_in_order() {
    let mut cq = TestCq::new(3);
    // Consumer at 65533: the CQEs straddle the 16-bit wrap and a pass of the ring.
    let ci = 65533u16;
    let written = [(5, 1), (6, 2), (5, 3), (5, 4), (6, 5), (7, 6)];
    for (n, &(qpn, wr_id)) in written.iter().enumerate() {
        cq.write(ci.wrapping_add(n as u16), qpn, wr_id);
    }
    let freed = cq.clean(ci, 5);
    assert_eq!(freed, 3);
    assert_eq!(cq.valid(ci.wrapping_add(freed)), [(6, 2), (6, 5), (7, 6)]);
    // Nothing of QP 5's is left to poll, and cleaning again removes nothing.
    assert_eq!(cq.clean(ci.wrapping_add(freed), 5), 0);
    // An empty CQ, or one without the QP's CQEs, is left alone.
    assert_eq!(TestCq::new(2).clean(0, 5), 0);
    assert_eq!(cq.clean(ci.wrapping_add(freed), 9), 0);
}

#[test]
fn a_full_cq_is_cleaned_too() {
    let mut cq = TestCq::new(2);
    for i in 0..4u16 {
        cq.write(i, if i % 2 == 0 { 5 } else { 6 }, u64::from(i));
    }
    assert_eq!(cq.clean(0, 6), 2);
    assert_eq!(cq.valid(2), [(5, 0), (5, 2)]);
}
