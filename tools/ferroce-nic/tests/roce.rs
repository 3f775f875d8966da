// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The RoCE engine end to end: two NICs back to back, each driven by a test guest.

mod common;

use common::roce::*;
use ferroce_hw::*;

const MIB: usize = 1 << 20;

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
            (ca[0].wr_id, ca[0].status),
            (100 + i as u64, WC_SUCCESS),
            "{len}"
        );
        assert_eq!((cb[0].wr_id, cb[0].status), (500 + i as u64, WC_SUCCESS));
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
            (ca[0].status, ca[0].opcode),
            (WC_SUCCESS, CQE_OP_RDMA_WRITE)
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
        (ca[0].status, ca[0].opcode, ca[0].byte_len),
        (WC_SUCCESS, CQE_OP_RDMA_READ, n)
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
