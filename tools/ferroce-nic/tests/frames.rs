// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The wire boundary under fuzzing, on the stable toolchain: random and half-valid RoCE frames
//! against a live RC connection (receives posted, a WRITE, a READ and an atomic outstanding,
//! an MR the frames' keys may name), so that responder and completer see them, not only the
//! parsers. From the peer's GID or another's; every header combination the builder makes, then
//! bytes flipped. The device must not panic or go fatal, and nothing may complete twice.
//! (`make fuzz` drives the libFuzzer frame target, which knows only the parsers' side;
//! `PROPTEST_CASES=N` makes this run longer.)

mod common;

use common::roce::*;
use ferroce_hw::*;
use ferroce_nic::engine::headers::{Aeth, AtomicEth, Deth, PacketBuilder, Reth};
use proptest::prelude::*;

/// One frame the test puts on the wire.
#[derive(Clone, Debug)]
struct Frame {
    opcode: u8,
    /// Destination QP: the connection's, or any.
    to_qp: Option<u32>,
    /// PSN relative to what the node expects (receive) or sent (send), or any.
    psn: Result<i32, u32>,
    reth: Option<(u64, Option<u32>, u32)>,
    aeth: Option<(u8, u32)>,
    atomic: Option<(u64, u64, u64)>,
    atomic_ack: Option<u64>,
    deth: Option<(u32, u32)>,
    imm: Option<[u8; 4]>,
    ieth: Option<u32>,
    payload: Vec<u8>,
    stranger: bool,
    /// Bytes of the frame to overwrite (offset, value).
    flips: Vec<(usize, u8)>,
}

fn opcode() -> impl Strategy<Value = u8> {
    prop_oneof![
        8 => 0x00u8..=0x14,  // RC: every request, response and ACK
        1 => 0x60u8..=0x65,  // UD
        1 => any::<u8>(),
    ]
}

fn frame() -> impl Strategy<Value = Frame> {
    (
        (
            opcode(),
            prop_oneof![4 => Just(None), 1 => any::<u32>().prop_map(Some)],
            prop_oneof![6 => (-4i32..12).prop_map(Ok), 1 => any::<u32>().prop_map(Err)],
            proptest::option::of((
                prop_oneof![Just(0u64), 0u64..1 << 20, any::<u64>()],
                proptest::option::of(any::<u32>()),
                prop_oneof![0u32..4096, any::<u32>()],
            )),
            proptest::option::of((any::<u8>(), any::<u32>())),
            proptest::option::of((any::<u64>(), any::<u64>(), any::<u64>())),
        ),
        (
            proptest::option::of(any::<u64>()),
            proptest::option::of((any::<u32>(), any::<u32>())),
            proptest::option::of(any::<[u8; 4]>()),
            proptest::option::of(any::<u32>()),
            proptest::collection::vec(any::<u8>(), 0..1100),
            prop_oneof![9 => Just(false), 1 => Just(true)],
            proptest::collection::vec((0usize..200, any::<u8>()), 0..3),
        ),
    )
        .prop_map(
            |(
                (opcode, to_qp, psn, reth, aeth, atomic),
                (atomic_ack, deth, imm, ieth, payload, stranger, flips),
            )| Frame {
                opcode,
                to_qp,
                psn,
                reth,
                aeth,
                atomic,
                atomic_ack,
                deth,
                imm,
                ieth,
                payload,
                stranger,
                flips,
            },
        )
}

/// A connection with work in every direction: receives posted, a WRITE, a READ and an atomic
/// sent and not answered.
fn busy() -> Scripted {
    let mut s = Scripted::new(MIB, Conn::default());
    let buf = s.n.buf;
    for i in 0..4 {
        s.qp.post_recv(&mut s.n, 100 + i, buf + 0x1_0000 + i * 0x1000, 0x1000);
    }
    let seg = rdma_seg(0x10_0000, 0x1234);
    s.qp.post(&mut s.n, 1, WR_RDMA_WRITE, buf, 2000, &seg, 0);
    s.qp.post(&mut s.n, 2, WR_RDMA_READ, buf + 0x4000, 3000, &seg, 0);
    let atomic = atomic_seg(0x10_0000, 0x1234, 5, 6);
    s.qp.post(&mut s.n, 3, WR_ATOMIC_CMP_SWAP, buf + 0x8000, 8, &atomic, 0);
    let _ = s.sent();
    s
}

fn inject(s: &mut Scripted, f: &Frame) {
    let psn = match f.psn {
        Ok(off) if f.opcode >= 0x0d && f.opcode <= 0x12 => s.sq_psn.wrapping_add_signed(off),
        Ok(off) => s.rq_psn.wrapping_add_signed(off),
        Err(any) => any,
    };
    let mut b = PacketBuilder::new(f.opcode, f.to_qp.unwrap_or(s.qp.qpn), psn);
    b.reth = f.reth.map(|(va, rkey, len)| Reth {
        va: if va < 1 << 20 { s.n.buf + va } else { va },
        rkey: rkey.unwrap_or(s.n.key),
        len,
    });
    b.aeth = f.aeth.map(|(syndrome, msn)| Aeth { syndrome, msn });
    b.atomic = f.atomic.map(|(va, swap_add, compare)| AtomicEth {
        va: s.n.buf + (va % (1 << 20)) / 8 * 8,
        rkey: s.n.key,
        swap_add,
        compare,
    });
    b.atomic_ack = f.atomic_ack;
    b.deth = f.deth.map(|(qkey, src_qpn)| Deth { qkey, src_qpn });
    b.imm = f.imm;
    b.ieth = f.ieth;
    let sgid = if f.stranger {
        stranger_gid()
    } else {
        s.peer_gid
    };
    let mut bytes = s.frame_from(sgid, &b, &f.payload);
    for &(at, value) in &f.flips {
        if let Some(byte) = bytes.get_mut(at) {
            *byte = value;
        }
    }
    s.wire.sink.send(&bytes);
    s.run(2);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn frames_against_a_live_connection(frames in proptest::collection::vec(frame(), 1..24)) {
        let mut s = busy();
        for f in &frames {
            inject(&mut s, f);
        }
        s.run(8);
        prop_assert_eq!(s.n.g.dev.core.regs().fatal_code(), FATAL_NONE);
        // Nothing completes twice: each posted WR (and receive) at most once.
        let mut ids: Vec<u64> = s.cqes.iter().map(|c| c.wr_id).collect();
        let all = ids.len();
        ids.sort_unstable();
        ids.dedup();
        prop_assert_eq!(ids.len(), all, "a WR completed twice: {:?}", statuses(&s.cqes));
        prop_assert!(ids.iter().all(|id| [1, 2, 3, 100, 101, 102, 103].contains(id)));
    }
}
