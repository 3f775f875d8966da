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

/// A poll visits the QPs that have work and no other: with 512 connected, idle QPs on each
/// NIC, a WRITE in flight makes its QP (and, for its ACK, the peer's) the only active one, and
/// once it has completed no QP is.
#[test]
fn a_poll_visits_only_the_qps_with_work() {
    let mut p = Pair::among_idle(MIB, conn(MTU_1024), 512);
    assert_eq!(p.a.g.dev.engine.active_qps(), 0);
    let seg = rdma_seg(p.b.buf + 4096, p.b.key);
    let src = p.a.buf;
    p.qa.post(&mut p.a, 1, WR_RDMA_WRITE, src, 8192, &seg, 0);
    p.a.g.dev.process();
    assert_eq!(
        p.a.g.dev.engine.active_qps(),
        1,
        "the writer, its WRITE in flight"
    );
    let (ca, _) = p.wait_cqes(1, 0);
    assert_eq!(ca[0].wc_status(), WcStatus::Success);
    p.b.g.dev.process_all();
    assert_eq!(p.a.g.dev.engine.active_qps(), 0);
    assert_eq!(p.b.g.dev.engine.active_qps(), 0);
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
    let latency = |p: &Pair, kind: &str| p.a.g.dev.core.latency().summary()[kind]["count"].clone();
    assert_eq!(
        latency(&p, "rung"),
        1,
        "one doorbell-to-wire sample per doorbell"
    );
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
    assert_eq!(latency(&p, "rung"), 2, "the chain of 32 and the 8 SENDs");
    assert_eq!(latency(&p, "pushed"), 1);
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
