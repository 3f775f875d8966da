// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The RoCE engine end to end: two NICs back to back, each driven by a test guest.

mod common;

use common::roce::*;
use common::CqeStatus;
use ferroce_hw::*;

fn conn(mtu: u8) -> Conn {
    Conn {
        mtu,
        ..Conn::default()
    }
}

/// SEND, WRITE, READ and the immediate variants of `len` bytes, checked byte for byte.
fn transfer_all_kinds(p: &mut Pair, len: usize, seed: u64) {
    let half = (p.a.buf_len / 2) as u64;
    let (a_src, a_dst) = (p.a.buf, p.a.buf + half);
    let (b_src, b_dst) = (p.b.buf, p.b.buf + half);
    let n = len as u32;

    // SEND and SEND_WITH_IMM.
    for (i, opcode) in [WR_SEND, WR_SEND_WITH_IMM].into_iter().enumerate() {
        let data = p.a.fill(a_src, len, seed + i as u64);
        p.b.g.write(b_dst, &vec![0xee; len]);
        p.qb.post_recv(&mut p.b, 500 + i as u64, b_dst, n);
        p.qa.post(
            &mut p.a,
            100 + i as u64,
            opcode,
            a_src,
            n,
            &[0; 40],
            0x1234_5678,
        );
        let (ca, cb) = p.wait_cqes(1, 1);
        assert_eq!(
            (ca[0].wr_id, ca[0].wc_status()),
            (100 + i as u64, WcStatus::Success),
            "{len}"
        );
        assert_eq!(
            (cb[0].wr_id, cb[0].wc_status()),
            (500 + i as u64, WcStatus::Success)
        );
        assert_eq!((cb[0].opcode, cb[0].byte_len), (CQE_OP_RECV, n));
        if opcode == WR_SEND_WITH_IMM {
            assert_eq!(cb[0].flags & CQE_FLAG_WITH_IMM, CQE_FLAG_WITH_IMM);
            assert_eq!(cb[0].imm_or_inv, 0x1234_5678);
        }
        assert!(p.b.g.read(b_dst, len) == data, "SEND of {len} bytes");
    }

    // WRITE and WRITE_WITH_IMM.
    for (i, opcode) in [WR_RDMA_WRITE, WR_RDMA_WRITE_WITH_IMM]
        .into_iter()
        .enumerate()
    {
        let data = p.a.fill(a_src, len, seed + 10 + i as u64);
        let imm = opcode == WR_RDMA_WRITE_WITH_IMM;
        if imm {
            p.qb.post_recv(&mut p.b, 600, b_dst, 0);
        }
        let seg = rdma_seg(b_dst, p.b.key);
        p.qa.post(&mut p.a, 200 + i as u64, opcode, a_src, n, &seg, 0xcafe);
        let (ca, cb) = p.wait_cqes(1, usize::from(imm));
        assert_eq!(
            (ca[0].wc_status(), ca[0].opcode),
            (WcStatus::Success, CQE_OP_RDMA_WRITE)
        );
        if imm {
            assert_eq!(
                (cb[0].opcode, cb[0].imm_or_inv, cb[0].byte_len),
                (CQE_OP_RECV_RDMA_WITH_IMM, 0xcafe, n)
            );
        }
        assert!(p.b.g.read(b_dst, len) == data, "WRITE of {len} bytes");
    }

    // READ.
    let data = p.b.fill(b_src, len, seed + 20);
    let seg = rdma_seg(b_src, p.b.key);
    p.qa.post(&mut p.a, 300, WR_RDMA_READ, a_dst, n, &seg, 0);
    let (ca, _) = p.wait_cqes(1, 0);
    assert_eq!(
        (ca[0].wc_status(), ca[0].opcode, ca[0].byte_len),
        (WcStatus::Success, CQE_OP_RDMA_READ, n)
    );
    assert!(p.a.g.read(a_dst, len) == data, "READ of {len} bytes");
}

#[test]
fn rc_operations_at_every_mtu_and_size() {
    for mtu in [MTU_256, MTU_1024, MTU_4096] {
        let mut p = Pair::new(4 * MIB, conn(mtu));
        let mtu_len = mtu_bytes(mtu).unwrap_or(0) as usize;
        for (i, len) in [
            0,
            1,
            255,
            mtu_len - 1,
            mtu_len,
            mtu_len + 1,
            3 * mtu_len + 7,
            65536,
            MIB,
        ]
        .into_iter()
        .enumerate()
        {
            transfer_all_kinds(&mut p, len, i as u64 * 100);
        }
        assert_eq!(p.a.counter(COUNTER_ICRC_ERRORS), 0);
        assert_eq!(p.b.counter(COUNTER_DROPS), 0);
    }
}

#[test]
fn rc_over_roce_v1_and_ipv6_gids() {
    // GID 0: link-local RoCE v1 (GRH); 1: link-local v2 over IPv6; 2: IPv4-mapped v1.
    for sgid_index in [0, 1, 2] {
        let mut p = Pair::new(
            MIB,
            Conn {
                sgid_index,
                ..Conn::default()
            },
        );
        transfer_all_kinds(&mut p, 5000, u64::from(sgid_index));
        assert_eq!(p.b.counter(COUNTER_DROPS), 0, "GID {sgid_index}");
    }
}

#[test]
fn chain_of_32_wrs_one_doorbell_inline_and_push() {
    let mut p = Pair::new(4 * MIB, conn(MTU_4096));
    let (a_src, b_dst) = (p.a.buf, p.b.buf + 2 * MIB as u64);
    let data = p.a.fill(a_src, 32 * 4096, 77);
    let (doorbells, fetches) = (
        p.a.counter(COUNTER_DOORBELLS),
        p.a.counter(COUNTER_WQE_FETCHES),
    );
    for i in 0..32u64 {
        let sge = Sge {
            addr: a_src + i * 4096,
            length: 4096,
            lkey: p.a.key,
        };
        let ctrl = WqeCtrl {
            wr_id: i,
            opcode: WR_RDMA_WRITE,
            flags: WQE_FLAG_SIGNALED,
            num_sge: 1,
            ..WqeCtrl::default()
        };
        let seg = rdma_seg(b_dst + i * 4096, p.b.key);
        p.qa.put(&p.a, ctrl, &seg, &sge.encode());
    }
    p.qa.ring(&mut p.a);
    let (ca, _) = p.wait_cqes(32, 0);
    assert_eq!(p.a.counter(COUNTER_DOORBELLS) - doorbells, 1);
    assert_eq!(p.a.counter(COUNTER_WQE_FETCHES) - fetches, 32);
    assert_eq!(
        ca.iter().map(|c| c.wr_id).collect::<Vec<_>>(),
        (0..32).collect::<Vec<_>>()
    );
    assert!(ca.iter().all(|c| c.wc_status() == WcStatus::Success));
    assert!(p.b.g.read(b_dst, 32 * 4096) == data);

    // Inline SENDs: no payload DMA read at the sender.
    let reads = p.a.counter(COUNTER_PAYLOAD_DMA_READS);
    let payload: Vec<u8> = (0..=255u8).collect();
    for i in 0..8u64 {
        p.qb.post_recv(&mut p.b, i, b_dst + i * 256, 256);
        let ctrl = WqeCtrl {
            wr_id: 100 + i,
            opcode: WR_SEND,
            flags: WQE_FLAG_INLINE | WQE_FLAG_SIGNALED,
            inline_len: 256,
            ..WqeCtrl::default()
        };
        p.qa.put(&p.a, ctrl, &[0; 40], &payload);
    }
    p.qa.ring(&mut p.a);
    let (ca, cb) = p.wait_cqes(8, 8);
    assert!(ca
        .iter()
        .chain(&cb)
        .all(|c| c.wc_status() == WcStatus::Success));
    assert_eq!(
        p.a.counter(COUNTER_PAYLOAD_DMA_READS),
        reads,
        "inline: no payload DMA"
    );
    for i in 0..8 {
        assert_eq!(p.b.g.read(b_dst + i * 256, 256), payload);
    }

    // A pushed WQE: taken from the push window, never fetched.
    let fetches = p.a.counter(COUNTER_WQE_FETCHES);
    p.qb.post_recv(&mut p.b, 9, b_dst, 64);
    let ctrl = WqeCtrl {
        wr_id: 200,
        opcode: WR_SEND,
        flags: WQE_FLAG_INLINE | WQE_FLAG_SIGNALED,
        inline_len: 8,
        ..WqeCtrl::default()
    };
    let wqe = p.qa.put(&p.a, ctrl, &[0; 40], b"pushed!!");
    let window = db_page_offset(0) + PUSH_WINDOW_OFFSET;
    for (i, chunk) in wqe[..128].chunks(8).enumerate() {
        p.a.g.dev.bar0_write((window + i * 8) as u64, chunk);
    }
    p.a.g.w32(
        db_page_offset(0) + DB_PUSH,
        Doorbell {
            qid: p.qa.qpn as u16,
            index: p.qa.sq_pi,
        }
        .encode(),
    );
    let (ca, cb) = p.wait_cqes(1, 1);
    assert_eq!((ca[0].wr_id, cb[0].byte_len), (200, 8));
    assert_eq!(p.b.g.read(b_dst, 8), b"pushed!!");
    assert_eq!(
        p.a.counter(COUNTER_WQE_FETCHES),
        fetches,
        "pushed: no fetch"
    );
    assert_eq!(p.a.counter(COUNTER_WQE_PUSHES), 1);
}

#[test]
fn atomics_compare_swap_and_fetch_add() {
    let mut p = Pair::new(MIB, Conn::default());
    let (target, result) = (p.b.buf + 4096, p.a.buf + 8192);
    p.b.g.write(target, &5u64.to_le_bytes());
    let u64_at = |p: &Pair, node_b: bool, addr| {
        let node = if node_b { &p.b } else { &p.a };
        u64::from_le_bytes(node.g.read(addr, 8).try_into().expect("8 bytes"))
    };
    let key = p.b.key;
    for (wr_id, opcode, compare_add, swap, original, after) in [
        (1, WR_ATOMIC_CMP_SWAP, 5, 9, 5, 9),
        (2, WR_ATOMIC_CMP_SWAP, 5, 1, 9, 9),
        (3, WR_ATOMIC_FETCH_ADD, 10, 0, 9, 19),
        (4, WR_ATOMIC_FETCH_ADD, u64::MAX, 0, 19, 18),
    ] {
        let seg = atomic_seg(target, key, compare_add, swap);
        p.qa.post(&mut p.a, wr_id, opcode, result, 8, &seg, 0);
        let (ca, _) = p.wait_cqes(1, 0);
        assert_eq!(
            (ca[0].wr_id, ca[0].wc_status(), ca[0].byte_len),
            (wr_id, WcStatus::Success, 8)
        );
        assert_eq!(u64_at(&p, false, result), original, "wr {wr_id}");
        assert_eq!(u64_at(&p, true, target), after, "wr {wr_id}");
    }
    // Misaligned: invalid request.
    let seg = atomic_seg(target + 4, key, 0, 0);
    p.qa.post(&mut p.a, 9, WR_ATOMIC_FETCH_ADD, result, 8, &seg, 0);
    let (ca, _) = p.wait_cqes(1, 0);
    assert_eq!(ca[0].wc_status(), WcStatus::RemInvReqErr);
    assert_eq!(u64_at(&p, true, target), 18);
}

/// A UD or GSI QP on each node, and an AH on `a` towards `b` from GID `sgid_index`.
fn datagram_pair(qp_type: QpType, qkey: u32, sgid_index: u8) -> (Node, Node, Qp, Qp, u32) {
    let (pa, pb) = ferroce_nic::engine::wire::back_to_back();
    let mut a = Node::new(1, MIB, pa);
    let mut b = Node::new(2, MIB, pb);
    let qa = Qp::create(&mut a, qp_type);
    let qb = Qp::create(&mut b, qp_type);
    qa.activate_ud(&mut a, qkey);
    qb.activate_ud(&mut b, qkey);
    let ah =
        a.g.ok(&CreateAhCmd {
            pd: PD,
            dgid: b.gid(sgid_index),
            dmac: b.mac,
            vlan: VLAN_NONE,
            sgid_index,
            hop_limit: 64,
            ..CreateAhCmd::default()
        })
        .ah;
    (a, b, qa, qb, ah)
}

fn pump(a: &mut Node, b: &mut Node, rounds: usize) {
    for _ in 0..rounds {
        a.g.dev.process();
        b.g.dev.process();
    }
}

#[test]
fn ud_and_gsi_datagrams() {
    for (qp_type, qkey, sgid_index, hdr) in [
        (QpType::Ud, 0x1111, 3, NET_HDR_IPV4),
        (QpType::Ud, 0x1111, 1, NET_HDR_IPV6),
        (QpType::Ud, 0x1111, 0, NET_HDR_GRH),
        (QpType::Gsi, 0x8001_0000, 3, NET_HDR_IPV4),
    ] {
        let (mut a, mut b, mut qa, mut qb, ah) = datagram_pair(qp_type, qkey, sgid_index);
        let data = a.fill(a.buf, 1000, 3);
        let dst = b.buf + 8192;
        qb.post_recv(&mut b, 7, dst, 2048);
        let remote_qpn = qb.qpn;
        let ud = |qkey| {
            UdSeg {
                ah,
                remote_qpn,
                remote_qkey: qkey,
                ..UdSeg::default()
            }
            .encode()
        };
        let src = a.buf;
        qa.post(&mut a, 1, WR_SEND_WITH_IMM, src, 1000, &ud(qkey), 0xabcd);
        pump(&mut a, &mut b, 4);
        let ca = a.cq.poll(&a.g);
        let cb = b.cq.poll(&b.g);
        assert_eq!((ca.len(), ca[0].wc_status()), (1, WcStatus::Success));
        assert_eq!(cb.len(), 1, "type {qp_type:?} GID {sgid_index}");
        let c = cb[0];
        assert_eq!(
            (c.wc_status(), c.byte_len, c.src_qpn),
            (WcStatus::Success, 1040, qa.qpn)
        );
        assert_eq!(c.network_hdr_type, hdr);
        assert_eq!(
            c.flags & (CQE_FLAG_GRH | CQE_FLAG_WITH_IMM),
            CQE_FLAG_GRH | CQE_FLAG_WITH_IMM
        );
        assert_eq!((c.imm_or_inv, c.smac), (0xabcd, a.mac));
        assert!(b.g.read(dst + 40, 1000) == data);
        let grh = b.g.read(dst, 40);
        if hdr == NET_HDR_IPV4 {
            assert_eq!(
                (grh[20], &grh[32..36]),
                (0x45, &a.ip[..]),
                "IPv4 header image"
            );
        } else {
            assert_eq!(
                &grh[8..24],
                &a.gid(sgid_index),
                "source GID in the GRH image"
            );
        }
        // A wrong Q_Key is dropped silently; so is a datagram with no receive posted.
        let drops = b.counter(COUNTER_DROPS);
        qb.post_recv(&mut b, 8, dst, 2048);
        qa.post(&mut a, 2, WR_SEND, src, 10, &ud(0x2222), 0);
        pump(&mut a, &mut b, 4);
        assert!(b.cq.poll(&b.g).is_empty());
        assert_eq!(b.counter(COUNTER_DROPS), drops + 1);
        assert_eq!(
            a.cq.poll(&a.g).len(),
            1,
            "UD completes at the sender anyway"
        );
    }
}

/// UD sends whose WQE carries the address vector itself (`WQE_FLAG_AV`, no AH object), on UD
/// and GSI QPs, over RoCE v2 IPv4 and IPv6 and RoCE v1; the AV's traffic class, hop limit and
/// flow label reach the wire, and AH handles keep working on the same QP.
#[test]
fn ud_and_gsi_sends_with_an_inline_address_vector() {
    // (QP type, Q_Key, source GID, header, traffic class, hop limit, flow label)
    for (qp_type, qkey, sgid_index, hdr, tc, hop, fl) in [
        (QpType::Ud, 0x1111, 3, NET_HDR_IPV4, 0x00, 64, 0),
        (QpType::Ud, 0x1111, 3, NET_HDR_IPV4, 0xb9, 9, 0x0_0042),
        (QpType::Ud, 0x1111, 1, NET_HDR_IPV6, 0xb8, 7, 0xf_1234),
        (QpType::Ud, 0x1111, 0, NET_HDR_GRH, 0x20, 5, 0x1_0001),
        (QpType::Gsi, 0x8001_0000, 3, NET_HDR_IPV4, 0x10, 64, 0),
        // ib_mad's IB_QP_SET_QKEY: "the QP's own", which on QP1 is 0x80010000.
        (QpType::Gsi, 0x8000_0000, 3, NET_HDR_IPV4, 0x10, 64, 0),
    ] {
        let what = format!("type {qp_type:?} GID {sgid_index}");
        let (mut a, mut b, mut qa, mut qb, ah) = datagram_pair(qp_type, qkey, sgid_index);
        let data = a.fill(a.buf, 1000, 9);
        let dst = b.buf + 8192;
        let av = UdAvSeg {
            traffic_class: tc,
            hop_limit: hop,
            flow_label: fl,
            ..av_to(&b, sgid_index, qb.qpn, qkey)
        };
        let src = a.buf;
        qb.post_recv(&mut b, 7, dst, 2048);
        qa.post_av(&mut a, 1, WR_SEND_WITH_IMM, src, 1000, &av, 0x5151, 0);
        pump(&mut a, &mut b, 4);
        let ca = a.cq.poll(&a.g);
        let cb = b.cq.poll(&b.g);
        assert_eq!(ca.len(), 1, "{what}");
        assert_eq!(
            (ca[0].wr_id, ca[0].wc_status(), ca[0].opcode),
            (1, WcStatus::Success, CQE_OP_SEND),
            "{what}"
        );
        assert_eq!(cb.len(), 1, "{what}");
        let c = cb[0];
        assert_eq!(
            (c.wc_status(), c.byte_len, c.src_qpn, c.network_hdr_type),
            (WcStatus::Success, 1040, qa.qpn, hdr),
            "{what}"
        );
        assert_eq!((c.imm_or_inv, c.smac), (0x5151, a.mac), "{what}");
        assert!(b.g.read(dst + 40, 1000) == data, "{what}: payload");
        let grh = b.g.read(dst, 40);
        if hdr == NET_HDR_IPV4 {
            // 20 zero bytes, then the IPv4 header: TOS, TTL, source address.
            assert_eq!(
                (grh[20], grh[21], grh[28], &grh[32..36]),
                (0x45, tc, hop, &a.ip[..]),
                "{what}: IPv4 header image"
            );
        } else {
            // The IPv6 header (or GRH): version, traffic class, flow label, hop limit, SGID.
            let first = u32::from_be_bytes([grh[0], grh[1], grh[2], grh[3]]);
            assert_eq!(
                (first, grh[7], &grh[8..24]),
                (
                    6 << 28 | u32::from(tc) << 20 | fl,
                    hop,
                    &a.gid(sgid_index)[..]
                ),
                "{what}: IPv6 header image"
            );
        }
        // The AH handle path is unchanged, also right after an AV send on the same QP.
        let ud = UdSeg {
            ah,
            remote_qpn: qb.qpn,
            remote_qkey: qkey,
            ..UdSeg::default()
        };
        qb.post_recv(&mut b, 8, dst, 2048);
        qa.post(&mut a, 2, WR_SEND, src, 100, &ud.encode(), 0);
        qb.post_recv(&mut b, 9, dst, 2048);
        qa.post_av(&mut a, 3, WR_SEND, src, 100, &av, 0, 0);
        pump(&mut a, &mut b, 4);
        let ca = a.cq.poll(&a.g);
        let cb = b.cq.poll(&b.g);
        assert_eq!(
            ca.iter()
                .map(|c| (c.wr_id, c.wc_status()))
                .collect::<Vec<_>>(),
            [(2, WcStatus::Success), (3, WcStatus::Success)],
            "{what}"
        );
        assert_eq!(
            cb.iter()
                .map(|c| (c.wr_id, c.wc_status()))
                .collect::<Vec<_>>(),
            [(8, WcStatus::Success), (9, WcStatus::Success)],
            "{what}"
        );
    }
}

/// An inline address vector that CMD_CREATE_AH would refuse, or whose source GID entry is empty,
/// completes the WQE with the error a bad AH handle gets, sends nothing, and moves the QP to ERR.
#[test]
fn bad_inline_address_vector_completes_with_an_error() {
    type Spoil = fn(&mut UdAvSeg);
    let cases: [(&str, Spoil); 6] = [
        ("empty GID entry", |av| av.sgid_index = 9),
        ("GID index beyond the table", |av| {
            av.sgid_index = GID_TABLE_LEN as u8
        }),
        ("GID index 255", |av| av.sgid_index = 255),
        ("flow label over 20 bits", |av| {
            av.flow_label = FLOW_LABEL_MASK + 1
        }),
        ("VLAN over 4095", |av| av.vlan = 4096),
        ("reserved byte", |av| av.rsvd = 1),
    ];
    // The reference: an AH handle that does not exist.
    let (mut a, mut b, mut qa, qb, _) = datagram_pair(QpType::Ud, 0x1111, 3);
    let bad_ah = UdSeg {
        ah: 0xdead,
        remote_qpn: qb.qpn,
        remote_qkey: 0x1111,
        ..UdSeg::default()
    };
    let src = a.buf;
    qa.post(&mut a, 1, WR_SEND, src, 10, &bad_ah.encode(), 0);
    pump(&mut a, &mut b, 4);
    let bad_ah_status = a.cq.poll(&a.g).first().map(|c| c.wc_status());
    assert_eq!(bad_ah_status, Some(WcStatus::LocQpOpErr));

    for (what, spoil) in cases {
        let (mut a, mut b, mut qa, mut qb, _) = datagram_pair(QpType::Ud, 0x1111, 3);
        let mut av = av_to(&b, 3, qb.qpn, 0x1111);
        spoil(&mut av);
        let dst = b.buf;
        qb.post_recv(&mut b, 7, dst, 2048);
        let (src, tx) = (a.buf, a.counter(COUNTER_TX_PACKETS));
        qa.post_av(&mut a, 1, WR_SEND, src, 10, &av, 0, 0);
        pump(&mut a, &mut b, 4);
        let ca = a.cq.poll(&a.g);
        assert_eq!(
            ca.iter()
                .map(|c| (c.wr_id, Some(c.wc_status())))
                .collect::<Vec<_>>(),
            [(1, bad_ah_status)],
            "{what}"
        );
        assert_eq!(a.counter(COUNTER_TX_PACKETS), tx, "{what}: nothing sent");
        assert!(b.cq.poll(&b.g).is_empty(), "{what}");
        assert_eq!(
            a.g.dev.core.objects().qps().get(qa.qpn).map(|q| q.state),
            Some(QpState::Err),
            "{what}"
        );
    }
}

/// The VLAN a UD send goes out on is its source GID entry's (the driver's, from the netdev),
/// never the one an inline address vector names: a process cannot send on a VLAN it has no
/// GID on.
#[test]
fn an_address_vector_cannot_pick_the_vlan() {
    let (mut a, mut b, mut qa, mut qb, _) = datagram_pair(QpType::Ud, 0x1111, 3);
    let av = UdAvSeg {
        vlan: 123,
        ..av_to(&b, 3, qb.qpn, 0x1111)
    };
    let (src, dst) = (a.buf, b.buf);
    qb.post_recv(&mut b, 7, dst, 2048);
    qa.post_av(&mut a, 1, WR_SEND, src, 10, &av, 0, 0);
    pump(&mut a, &mut b, 4);
    assert_eq!(
        a.cq.poll(&a.g).first().map(|c| c.wc_status()),
        Some(WcStatus::Success)
    );
    let cb = b.cq.poll(&b.g);
    assert_eq!(
        cb.iter().map(|c| (c.wr_id, c.vlan)).collect::<Vec<_>>(),
        [(7, VLAN_NONE)],
        "untagged, as GID 3 is"
    );
}

/// A process's UD QP (`QP_FLAG_AH_HANDLES`, set by the kernel) names destinations by the
/// kernel's AHs only: a WQE with an inline address vector, which the process could fill with any
/// source GID, is malformed; nothing is sent and the QP goes to ERR. By AH number it sends.
#[test]
fn a_process_qp_takes_no_inline_address_vector() {
    let (pa, pb) = ferroce_nic::engine::wire::back_to_back();
    let mut a = Node::new(1, MIB, pa);
    let mut b = Node::new(2, MIB, pb);
    let mut qa = Qp::create_with_flags(&mut a, QpType::Ud, QP_FLAG_AH_HANDLES);
    let mut qb = Qp::create(&mut b, QpType::Ud);
    qa.activate_ud(&mut a, 0x1111);
    qb.activate_ud(&mut b, 0x1111);
    let ah =
        a.g.ok(&CreateAhCmd {
            pd: PD,
            dgid: b.gid(3),
            dmac: b.mac,
            vlan: VLAN_NONE,
            sgid_index: 3,
            hop_limit: 64,
            ..CreateAhCmd::default()
        })
        .ah;
    let (src, dst) = (a.buf, b.buf);
    qb.post_recv(&mut b, 7, dst, 2048);
    let ud = UdSeg {
        ah,
        remote_qpn: qb.qpn,
        remote_qkey: 0x1111,
        ..UdSeg::default()
    };
    qa.post(&mut a, 1, WR_SEND, src, 10, &ud.encode(), 0);
    pump(&mut a, &mut b, 4);
    assert_eq!(
        a.cq.poll(&a.g).first().map(|c| c.wc_status()),
        Some(WcStatus::Success)
    );
    assert_eq!(b.cq.poll(&b.g).len(), 1);
    let tx = a.counter(COUNTER_TX_PACKETS);
    let av = av_to(&b, 0, qb.qpn, 0x1111);
    qb.post_recv(&mut b, 8, dst, 2048);
    qa.post_av(&mut a, 2, WR_SEND, src, 10, &av, 0, 0);
    pump(&mut a, &mut b, 4);
    assert_eq!(a.counter(COUNTER_TX_PACKETS), tx, "nothing sent");
    assert!(b.cq.poll(&b.g).is_empty());
    assert_eq!(
        a.g.dev.core.objects().qps().get(qa.qpn).map(|q| q.state),
        Some(QpState::Err)
    );
}

/// `WQE_FLAG_AV` is for UD and GSI QPs only: on an RC QP the WQE is malformed, the QP goes to
/// ERR with a `QP_FATAL` / `WQE_ERR_BAD_QP_TYPE` event, and nothing is sent.
#[test]
fn inline_address_vector_on_an_rc_qp_is_a_bad_wqe() {
    let ctrl = WqeCtrl {
        opcode: WR_SEND,
        flags: WQE_FLAG_SIGNALED | WQE_FLAG_AV,
        ..WqeCtrl::default()
    };
    assert_eq!(
        validate_send_wqe(&ctrl, QpType::Rc, 512),
        Err(WqeError::BadQpType)
    );
    for qp_type in [QpType::Ud, QpType::Gsi] {
        assert_eq!(validate_send_wqe(&ctrl, qp_type, 512), Ok(()));
    }

    let mut p = Pair::new(MIB, Conn::default());
    let av = av_to(&p.b, 3, p.qb.qpn, 0);
    let (src, dst) = (p.a.buf, p.b.buf);
    let tx = p.a.counter(COUNTER_TX_PACKETS);
    p.qb.post_recv(&mut p.b, 7, dst, 64);
    p.qa.post_av(&mut p.a, 1, WR_SEND, src, 10, &av, 0, 0);
    let (ca, _) = p.wait_cqes(1, 0);
    assert_eq!((ca[0].wr_id, ca[0].wc_status()), (1, WcStatus::WrFlushErr));
    let events = p.a.g.poll_eq(EQN_ASYNC);
    assert!(
        events.iter().any(|e| (e.event_type, e.subtype, e.data0)
            == (EventType::QpFatal.into(), WQE_ERR_BAD_QP_TYPE, p.qa.qpn)),
        "{events:?}"
    );
    assert_eq!(
        p.a.g
            .dev
            .core
            .objects()
            .qps()
            .get(p.qa.qpn)
            .map(|q| q.state),
        Some(QpState::Err)
    );
    assert_eq!(p.a.counter(COUNTER_TX_PACKETS), tx, "nothing sent");
    for _ in 0..4 {
        p.step();
    }
    assert!(p.cqes_b.is_empty());
}

/// A fresh pair, a `len`-byte request from `a` to `b`'s `[addr, addr + len)` under `rkey`;
/// returns `a`'s completion status and whether `b`'s buffer stayed as it was.
fn violation(
    opcode: u8,
    len: u32,
    target: impl Fn(&mut Node) -> (u64, u32),
) -> (WcStatus, bool, Pair) {
    let mut p = Pair::new(MIB, Conn::default());
    let before = p.b.fill(p.b.buf, MIB, 42);
    let (addr, rkey) = target(&mut p.b);
    let seg = rdma_seg(addr, rkey);
    let src = p.a.buf;
    p.qa.post(&mut p.a, 1, opcode, src, len, &seg, 0);
    let (ca, _) = p.wait_cqes(1, 0);
    p.pump_until(std::time::Duration::from_secs(5), |p| {
        !p.b.g.dev.engine.busy() && !p.a.g.dev.engine.busy()
    });
    let unchanged = p.b.g.read(p.b.buf, MIB) == before;
    (ca[0].wc_status(), unchanged, p)
}

/// Picks the target address and R_Key of a violation (registering an MR if needed).
type Target = fn(&mut Node) -> (u64, u32);

#[test]
fn protection_violations_nak_and_leave_memory_alone() {
    let cases: [(&str, u8, u32, Target); 6] = [
        ("bad rkey", WR_RDMA_WRITE, 4096, |b| (b.buf, b.key ^ 0x55)),
        ("beyond the end", WR_RDMA_WRITE, 200, |b| {
            (b.buf + MIB as u64 - 100, b.key)
        }),
        ("no remote write", WR_RDMA_WRITE, 64, |b| {
            let addr = b.buf + 4096;
            (addr, b.mr(addr, 4096, ACCESS_REMOTE_READ, PD))
        }),
        ("other PD", WR_RDMA_WRITE, 64, |b| {
            let addr = b.buf + 4096;
            (addr, b.mr(addr, 4096, ACCESS_VALID_MASK, PD + 1))
        }),
        ("no remote read", WR_RDMA_READ, 64, |b| {
            let addr = b.buf + 4096;
            (
                addr,
                b.mr(addr, 4096, ACCESS_REMOTE_WRITE | ACCESS_LOCAL_WRITE, PD),
            )
        }),
        ("multi-packet beyond the end", WR_RDMA_WRITE, 8192, |b| {
            (b.buf + MIB as u64 - 4096, b.key)
        }),
    ];
    for (what, opcode, len, target) in cases {
        let (status, unchanged, p) = violation(opcode, len, target);
        assert_eq!(status, WcStatus::RemAccessErr, "{what}");
        assert!(unchanged, "{what}: target memory changed");
        assert!(p.b.counter(COUNTER_NAKS_SENT) >= 1, "{what}");
        assert!(p.a.counter(COUNTER_NAKS_RECEIVED) >= 1, "{what}");
        // The responder's QP is in ERR, with an access error event.
        assert_eq!(
            p.b.g
                .dev
                .core
                .objects()
                .qps()
                .get(p.qb.qpn)
                .map(|q| q.state),
            Some(QpState::Err)
        );
    }
}

#[test]
fn rnr_naks_retry_until_a_receive_is_posted() {
    let mut p = Pair::new(MIB, Conn::default());
    let data = p.a.fill(p.a.buf, 3000, 5);
    let src = p.a.buf;
    p.qa.post(&mut p.a, 1, WR_SEND, src, 3000, &[0; 40], 0);
    let start = std::time::Instant::now();
    p.pump_until(std::time::Duration::from_secs(5), |p| {
        p.a.counter(COUNTER_RNR_RETRIES) >= 3
    });
    assert!(p.cqes_a.is_empty(), "nothing completes without a receive");
    let dst = p.b.buf + 65536;
    p.qb.post_recv(&mut p.b, 2, dst, 4096);
    let (ca, cb) = p.wait_cqes(1, 1);
    assert_eq!(
        (ca[0].wc_status(), cb[0].wc_status(), cb[0].byte_len),
        (WcStatus::Success, WcStatus::Success, 3000)
    );
    assert!(p.b.g.read(dst, 3000) == data);
    assert!(start.elapsed() < std::time::Duration::from_secs(5));

    // With no RNR retries allowed, the first RNR NAK fails the WQE.
    let mut p = Pair::new(
        MIB,
        Conn {
            rnr_retry: 0,
            ..Conn::default()
        },
    );
    let src = p.a.buf;
    p.qa.post(&mut p.a, 1, WR_SEND, src, 10, &[0; 40], 0);
    let (ca, _) = p.wait_cqes(1, 0);
    assert_eq!(ca[0].wc_status(), WcStatus::RnrRetryExcErr);
}

#[test]
fn retries_exhausted_on_a_dead_wire() {
    let mut p = Pair::new(
        MIB,
        Conn {
            timeout: 10,
            retry_cnt: 2,
            ..Conn::default()
        },
    );
    p.a.faults.command(&["drop", "1"]).expect("fault");
    let src = p.a.buf;
    let seg = rdma_seg(p.b.buf, p.b.key);
    p.qa.post(&mut p.a, 1, WR_RDMA_WRITE, src, 100, &seg, 0);
    p.qa.post(&mut p.a, 2, WR_RDMA_WRITE, src, 100, &seg, 0);
    let (ca, _) = p.wait_cqes(2, 0);
    assert_eq!((ca[0].wr_id, ca[0].wc_status()), (1, WcStatus::RetryExcErr));
    assert_eq!((ca[1].wr_id, ca[1].wc_status()), (2, WcStatus::WrFlushErr));
    assert_eq!(
        p.a.counter(COUNTER_TIMEOUTS),
        3,
        "the first try and two retries"
    );
    assert_eq!(p.a.counter(COUNTER_RETRANSMITS), 4);
}

/// 64 MiB each of RC WRITE, READ and SEND over a wire that drops, duplicates and reorders 10 %
/// and corrupts 1 % of the frames in each direction: every byte arrives, every WR completes
/// exactly once, and the losses show in the counters.
#[test]
fn lossy_wire_64_mib_write_read_send() {
    use ferroce_nic::engine::faults::{FaultConfig, FaultDirection};
    const TOTAL: usize = 64 * MIB;
    const BATCH: usize = 8;
    let mut p = Pair::new(
        16 * MIB,
        Conn {
            mtu: MTU_4096,
            // 4.096 µs << 12 = 17 ms: the adaptive retransmission timer recovers tail losses
            // within milliseconds, while a retry counts only after 17 ms without progress, so
            // that neither losses in a row nor a busy host (the lead's VMs) exhaust retry_cnt.
            // (With a 2 ms timeout every 2 ms without progress counted, and about one run in
            // ten failed with RETRY_EXC_ERR.)
            timeout: 12,
            ..Conn::default()
        },
    );
    for (node, seed) in [(&p.a, 1), (&p.b, 2)] {
        node.faults.set(FaultConfig {
            drop: 0.10,
            duplicate: 0.10,
            reorder: 0.10,
            corrupt: 0.01,
            seed,
            direction: FaultDirection::Tx,
            ..FaultConfig::default()
        });
    }
    let start = std::time::Instant::now();
    let half = 8 * MIB as u64;
    let base = pattern(BATCH * MIB, 99);
    let mut wr_id = 0u64;
    for (op_index, opcode) in [WR_RDMA_WRITE, WR_RDMA_READ, WR_SEND]
        .into_iter()
        .enumerate()
    {
        for round in 0..TOTAL / (BATCH * MIB) {
            let tag = (op_index * 16 + round) as u8;
            let data: Vec<u8> = base.iter().map(|b| b ^ tag).collect();
            let (src_node, dst_node) = if opcode == WR_RDMA_READ {
                (&p.b, &p.a)
            } else {
                (&p.a, &p.b)
            };
            src_node.g.write(src_node.buf, &data);
            dst_node.g.write(dst_node.buf + half, &vec![0; data.len()]);
            let first = wr_id;
            for i in 0..BATCH as u64 {
                let offset = i * MIB as u64;
                let (local, seg) = match opcode {
                    WR_RDMA_WRITE => (p.a.buf + offset, rdma_seg(p.b.buf + half + offset, p.b.key)),
                    WR_RDMA_READ => (p.a.buf + half + offset, rdma_seg(p.b.buf + offset, p.b.key)),
                    _ => {
                        let dst = p.b.buf + half + offset;
                        p.qb.post_recv(&mut p.b, wr_id, dst, MIB as u32);
                        (p.a.buf + offset, [0; 40])
                    }
                };
                let sge = Sge {
                    addr: local,
                    length: MIB as u32,
                    lkey: p.a.key,
                };
                let ctrl = WqeCtrl {
                    wr_id,
                    opcode,
                    flags: WQE_FLAG_SIGNALED,
                    num_sge: 1,
                    ..WqeCtrl::default()
                };
                p.qa.put(&p.a, ctrl, &seg, &sge.encode());
                wr_id += 1;
            }
            p.qa.ring(&mut p.a);
            let receives = if opcode == WR_SEND { BATCH } else { 0 };
            let (ca, cb) = p.wait_cqes(BATCH, receives);
            let ids: Vec<u64> = ca.iter().map(|c| c.wr_id).collect();
            assert_eq!(
                ids,
                (first..wr_id).collect::<Vec<_>>(),
                "each WR once, in order"
            );
            let statuses: Vec<(u64, WcStatus)> = ca
                .iter()
                .chain(&cb)
                .map(|c| (c.wr_id, c.wc_status()))
                .collect();
            assert!(
                statuses.iter().all(|s| s.1 == WcStatus::Success),
                "opcode {opcode} round {round}: {statuses:?}"
            );
            assert!(cb.iter().all(|c| c.byte_len == MIB as u32));

            let dst_node = if opcode == WR_RDMA_READ { &p.a } else { &p.b };
            assert!(
                dst_node.g.read(dst_node.buf + half, data.len()) == data,
                "opcode {opcode} round {round}: data differs"
            );
        }
    }
    // Nothing completes twice: no CQE is left over.
    for _ in 0..100 {
        p.step();
    }
    assert!(p.cqes_a.is_empty() && p.cqes_b.is_empty());
    let elapsed = start.elapsed();
    let stats = p.a.faults.stats();
    let sum = |c| p.a.counter(c) + p.b.counter(c);
    eprintln!(
        "lossy wire: 3 x 64 MiB in {:.1} s; retransmits {} (a {} b {}), timeouts {}, \
         ICRC errors {}, other drops {}, duplicates {}, sequence errors {}, NAKs {}; \
         injected at a: {stats:?}",
        elapsed.as_secs_f64(),
        sum(COUNTER_RETRANSMITS),
        p.a.counter(COUNTER_RETRANSMITS),
        p.b.counter(COUNTER_RETRANSMITS),
        sum(COUNTER_TIMEOUTS),
        sum(COUNTER_ICRC_ERRORS),
        sum(COUNTER_DROPS),
        sum(COUNTER_DUPLICATES),
        sum(COUNTER_SEQ_ERRORS),
        sum(COUNTER_NAKS_SENT),
    );
    assert!(sum(COUNTER_RETRANSMITS) > 0);
    assert!(sum(COUNTER_ICRC_ERRORS) > 0);
    assert!(sum(COUNTER_DUPLICATES) > 0);
}

/// 4.096 µs << `timeout`: the configured local ACK timeout.
fn ack_timeout(timeout: u8) -> std::time::Duration {
    std::time::Duration::from_nanos(4096 << timeout)
}

/// A few small WRITEs over a clean wire, so that the requester has measured the round trip.
fn measure_rtt(p: &mut Pair) {
    let (src, seg) = (p.a.buf, rdma_seg(p.b.buf, p.b.key));
    for wr_id in 0..8 {
        p.qa.post(&mut p.a, 900 + wr_id, WR_RDMA_WRITE, src, 64, &seg, 0);
        let (ca, _) = p.wait_cqes(1, 0);
        assert_eq!(ca[0].wc_status(), WcStatus::Success);
    }
}

/// Short messages over a wire dropping 5 % of the frames each way: nearly every loss is a tail
/// loss (the message's only packet, or its ACK or response), which no sequence NAK reports. The
/// configured timeout is 4.3 s; the adaptive timer recovers each loss within milliseconds, so
/// the whole run takes a fraction of what the configured timeout would cost.
#[test]
fn tail_losses_recover_by_the_adaptive_timer() {
    const TIMEOUT: u8 = 20;
    const MESSAGES: u64 = 240;
    const LEN: usize = 2000;
    let mut p = Pair::new(
        MIB,
        Conn {
            timeout: TIMEOUT,
            ..Conn::default()
        },
    );
    measure_rtt(&mut p);
    for (node, seed) in [(&p.a, 11), (&p.b, 12)] {
        node.faults.set(ferroce_nic::engine::faults::FaultConfig {
            drop: 0.05,
            seed,
            ..Default::default()
        });
    }
    let start = std::time::Instant::now();
    let budget = ack_timeout(TIMEOUT) * 3;
    let half = (MIB / 2) as u64;
    for wr_id in 0..MESSAGES {
        let data = p.a.fill(p.a.buf, LEN, wr_id);
        let (src, dst) = (p.a.buf, p.b.buf + half);
        p.b.g.write(dst, &[0; LEN]);
        let opcode = [WR_RDMA_WRITE, WR_SEND, WR_RDMA_READ][wr_id as usize % 3];
        let receives = usize::from(opcode == WR_SEND);
        match opcode {
            WR_RDMA_WRITE => {
                let seg = rdma_seg(dst, p.b.key);
                p.qa.post(&mut p.a, wr_id, opcode, src, LEN as u32, &seg, 0);
            }
            WR_SEND => {
                p.qb.post_recv(&mut p.b, wr_id, dst, LEN as u32);
                p.qa.post(&mut p.a, wr_id, opcode, src, LEN as u32, &[0; 40], 0);
            }
            _ => {
                // READ b's copy back into a's second half.
                p.b.g.write(dst, &data);
                let seg = rdma_seg(dst, p.b.key);
                p.qa.post(&mut p.a, wr_id, opcode, src + half, LEN as u32, &seg, 0);
            }
        }
        let (ca, cb) = p.wait_cqes(1, receives);
        assert_eq!((ca[0].wr_id, ca[0].wc_status()), (wr_id, WcStatus::Success));
        assert!(cb
            .iter()
            .all(|c| c.wc_status() == WcStatus::Success && c.byte_len == LEN as u32));
        let got = if opcode == WR_RDMA_READ {
            p.a.g.read(src + half, LEN)
        } else {
            p.b.g.read(dst, LEN)
        };
        assert!(
            got == data,
            "message {wr_id} (opcode {opcode}): data differs"
        );
        // Three timeouts at the configured 4.3 s would take longer than the whole run may.
        assert!(
            start.elapsed() < budget,
            "{} timeouts by message {wr_id} took {:?}; the configured timeout is {:?}",
            p.a.counter(COUNTER_TIMEOUTS),
            start.elapsed(),
            ack_timeout(TIMEOUT)
        );
    }
    let elapsed = start.elapsed();
    for _ in 0..100 {
        p.step();
    }
    assert!(
        p.cqes_a.is_empty() && p.cqes_b.is_empty(),
        "nothing completes twice"
    );
    let stats = p.a.faults.stats();
    let (timeouts, retransmits) = (
        p.a.counter(COUNTER_TIMEOUTS),
        p.a.counter(COUNTER_RETRANSMITS),
    );
    eprintln!(
        "tail losses: {MESSAGES} messages in {:.2} s; timeouts {timeouts}, retransmits \
         {retransmits}; injected at a: {stats:?}",
        elapsed.as_secs_f64()
    );
    assert!(timeouts >= 3 && retransmits >= 3, "losses were injected");
}

/// A peer that stops answering after the round trip was measured: the adaptive timer
/// retransmits early and often, but the WQE fails with RETRY_EXC_ERR only after the first try
/// and `retry_cnt` retries of the configured timeout's length.
#[test]
fn retries_count_at_the_configured_timeout_not_the_adaptive_one() {
    const TIMEOUT: u8 = 14; // 67 ms
    let mut p = Pair::new(
        MIB,
        Conn {
            timeout: TIMEOUT,
            retry_cnt: 2,
            ..Conn::default()
        },
    );
    measure_rtt(&mut p);
    p.b.faults.command(&["drop", "1"]).expect("fault");
    let (timeouts, retransmits) = (
        p.a.counter(COUNTER_TIMEOUTS),
        p.a.counter(COUNTER_RETRANSMITS),
    );
    let start = std::time::Instant::now();
    let seg = rdma_seg(p.b.buf, p.b.key);
    let src = p.a.buf;
    p.qa.post(&mut p.a, 1, WR_RDMA_WRITE, src, 100, &seg, 0);
    let (ca, _) = p.wait_cqes(1, 0);
    let elapsed = start.elapsed();
    assert_eq!((ca[0].wr_id, ca[0].wc_status()), (1, WcStatus::RetryExcErr));
    let timeouts = p.a.counter(COUNTER_TIMEOUTS) - timeouts;
    let retransmits = p.a.counter(COUNTER_RETRANSMITS) - retransmits;
    eprintln!(
        "dead peer: failed after {elapsed:?}, {timeouts} timeouts, {retransmits} retransmits"
    );
    assert!(
        elapsed >= ack_timeout(TIMEOUT) * 3,
        "the first try and two retries of {:?} each; failed after {elapsed:?}",
        ack_timeout(TIMEOUT)
    );
    assert!(
        elapsed < std::time::Duration::from_secs(20),
        "failed after {elapsed:?}"
    );
    assert!(
        timeouts > 3 && retransmits == timeouts - 1,
        "adaptive retransmissions before the counted ones: {timeouts} timeouts, \
         {retransmits} retransmits"
    );
}

/// Responses and ACKs held far longer than the measured round trip: the requester
/// retransmits spuriously, the responder answers the duplicates, and yet every WR completes
/// exactly once, each SEND consumes one receive and each FETCH_ADD adds once.
#[test]
fn spurious_retransmissions_complete_once() {
    // 4.096 µs << 16 = 268 ms: only the adaptive timer expires early.
    let mut p = Pair::new(
        MIB,
        Conn {
            timeout: 16,
            ..Conn::default()
        },
    );
    measure_rtt(&mut p);
    let retransmits = p.a.counter(COUNTER_RETRANSMITS);
    p.b.faults.command(&["direction", "tx"]).expect("fault");
    p.b.faults.command(&["delay", "1", "25000"]).expect("fault");
    let (target, result) = (p.b.buf + 4096, p.a.buf + 8192);
    p.b.g.write(target, &0u64.to_le_bytes());
    let data = p.a.fill(p.a.buf + 65536, 3000, 7);
    let (src, dst) = (p.a.buf + 65536, p.b.buf + 131072);
    let mut expected = Vec::new();
    let mut sends = 0;
    for round in 0..4u64 {
        let base = round * 10;
        let seg = rdma_seg(dst, p.b.key);
        p.qa.post(&mut p.a, base + 1, WR_RDMA_WRITE, src, 3000, &seg, 0);
        p.qb.post_recv(&mut p.b, base + 2, dst + 8192, 4096);
        p.qa.post(&mut p.a, base + 2, WR_SEND, src, 3000, &[0; 40], 0);
        let seg = rdma_seg(dst, p.b.key);
        p.qa.post(&mut p.a, base + 3, WR_RDMA_READ, src + 16384, 3000, &seg, 0);
        let seg = atomic_seg(target, p.b.key, 1, 0);
        p.qa.post(&mut p.a, base + 4, WR_ATOMIC_FETCH_ADD, result, 8, &seg, 0);
        expected.extend([base + 1, base + 2, base + 3, base + 4]);
        sends += 1;
    }
    let (ca, cb) = p.wait_cqes(expected.len(), sends);
    let ids: Vec<u64> = ca.iter().map(|c| c.wr_id).collect();
    assert_eq!(ids, expected, "each WR once, in order");
    assert!(ca
        .iter()
        .chain(&cb)
        .all(|c| c.wc_status() == WcStatus::Success));
    assert!(cb.iter().all(|c| c.byte_len == 3000));
    // Long enough for any late duplicate answer to arrive.
    p.pump_until(std::time::Duration::from_secs(5), {
        let start = std::time::Instant::now();
        move |_| start.elapsed() > std::time::Duration::from_millis(200)
    });
    assert!(
        p.cqes_a.is_empty() && p.cqes_b.is_empty(),
        "nothing completes twice"
    );
    assert!(p.b.g.read(dst, 3000) == data && p.b.g.read(dst + 8192, 3000) == data);
    assert!(p.a.g.read(src + 16384, 3000) == data);
    let u64_at = |addr| u64::from_le_bytes(p.b.g.read(addr, 8).try_into().expect("8 bytes"));
    assert_eq!(u64_at(target), 4, "each FETCH_ADD once");
    assert_eq!(
        u64::from_le_bytes(p.a.g.read(result, 8).try_into().expect("8 bytes")),
        3
    );
    let retransmits = p.a.counter(COUNTER_RETRANSMITS) - retransmits;
    eprintln!("ACKs held 25 ms: {retransmits} spurious retransmissions");
    assert!(
        retransmits > 0,
        "the delay exceeds the measured round trip: retransmissions"
    );
}

/// The round trip grows a hundredfold after it was measured (the peer's host got busy): the
/// first message is retransmitted early, and the backed-off timer, kept until a packet is
/// answered without retransmission, lets the next one measure the new round trip, instead of
/// every message being retransmitted early for ever.
#[test]
fn adaptive_timer_learns_a_longer_round_trip() {
    // 4.096 µs << 16 = 268 ms: only the adaptive timer expires early.
    let mut p = Pair::new(
        MIB,
        Conn {
            timeout: 16,
            ..Conn::default()
        },
    );
    measure_rtt(&mut p);
    p.b.faults.command(&["direction", "tx"]).expect("fault");
    p.b.faults.command(&["delay", "1", "10000"]).expect("fault");
    let (src, seg) = (p.a.buf, rdma_seg(p.b.buf, p.b.key));
    let mut per_message = Vec::new();
    for wr_id in 0..40 {
        let before = p.a.counter(COUNTER_RETRANSMITS);
        p.qa.post(&mut p.a, wr_id, WR_RDMA_WRITE, src, 64, &seg, 0);
        let (ca, _) = p.wait_cqes(1, 0);
        assert_eq!((ca[0].wr_id, ca[0].wc_status()), (wr_id, WcStatus::Success));
        per_message.push(p.a.counter(COUNTER_RETRANSMITS) - before);
    }
    eprintln!("retransmissions per message: {per_message:?}");
    let late: u64 = per_message[20..].iter().sum();
    assert!(late <= 4, "spurious retransmissions go on: {per_message:?}");
}
