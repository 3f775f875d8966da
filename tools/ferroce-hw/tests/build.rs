// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The WQE builder shared by the driver and the provider (`hw/build.rs`).

use ferroce_hw::*;

/// [`build_send_wqe`], with the reason of a refusal dropped.
fn send(req: &SendRequest<'_>, limits: &SqLimits, out: &mut [u8]) -> Result<usize, ()> {
    build_send_wqe(req, limits, out).map_err(drop)
}

/// [`build_recv_wqe`], with the reason of a refusal dropped.
fn recv(wr_id: u64, sges: &[Sge], max_sge: u32, out: &mut [u8]) -> Result<usize, ()> {
    build_recv_wqe(wr_id, sges, max_sge, out).map_err(drop)
}

const RC: SqLimits = SqLimits {
    qp_type: QpType::Rc,
    stride: 256,
    max_sge: 8,
    max_inline: 128,
};
const UD: SqLimits = SqLimits {
    qp_type: QpType::Ud,
    ..RC
};

fn sge(n: u64) -> Sge {
    Sge {
        addr: 0x1000 * n,
        length: 100 + n as u32,
        lkey: 0x100 + n as u32,
    }
}

fn req(op: SendOp, payload: Payload<'_>) -> SendRequest<'_> {
    SendRequest {
        wr_id: 0xdead_beef_0000_0001,
        op,
        signaled: true,
        solicited: false,
        fence: false,
        payload,
        ud: None,
        xrc_srqn: None,
    }
}

fn ctrl(wqe: &[u8]) -> WqeCtrl {
    WqeCtrl::read_from(wqe).expect("ctrl")
}

#[test]
fn every_rc_opcode() {
    let sges = [sge(1), sge(2)];
    let one = [Sge {
        addr: 0x2000,
        length: 8,
        lkey: 7,
    }];
    let cases = [
        (SendOp::Send, WR_SEND, 0, &sges[..]),
        (
            SendOp::SendWithImm(0x0102_0304),
            WR_SEND_WITH_IMM,
            0x0102_0304,
            &sges[..],
        ),
        (
            SendOp::SendWithInv(0x4455),
            WR_SEND_WITH_INV,
            0x4455,
            &sges[..],
        ),
        (
            SendOp::Write {
                remote_addr: 0xa000,
                rkey: 9,
            },
            WR_RDMA_WRITE,
            0,
            &sges[..],
        ),
        (
            SendOp::WriteWithImm {
                remote_addr: 0xa000,
                rkey: 9,
                imm: 77,
            },
            WR_RDMA_WRITE_WITH_IMM,
            77,
            &sges[..],
        ),
        (
            SendOp::Read {
                remote_addr: 0xa000,
                rkey: 9,
            },
            WR_RDMA_READ,
            0,
            &sges[..],
        ),
        (
            SendOp::CmpSwap {
                remote_addr: 0xb000,
                rkey: 3,
                compare: 5,
                swap: 6,
            },
            WR_ATOMIC_CMP_SWAP,
            0,
            &one[..],
        ),
        (
            SendOp::FetchAdd {
                remote_addr: 0xb008,
                rkey: 3,
                add: 11,
            },
            WR_ATOMIC_FETCH_ADD,
            0,
            &one[..],
        ),
    ];
    for (op, opcode, imm, sg) in cases {
        let mut out = [0xffu8; 256];
        let n = send(&req(op, Payload::Sges(sg)), &RC, &mut out).expect("built");
        assert_eq!(n, 64 + 16 * sg.len(), "{op:?}");
        let c = ctrl(&out);
        assert_eq!(c.wr_id, 0xdead_beef_0000_0001);
        assert_eq!(c.opcode, opcode);
        assert_eq!(c.flags, WQE_FLAG_SIGNALED);
        assert_eq!(usize::from(c.num_sge), sg.len());
        assert_eq!(c.imm_or_inv, imm);
        for (i, s) in sg.iter().enumerate() {
            assert_eq!(wqe_sge(&out, 64, i), Some(*s));
        }
        assert!(out[n..].iter().all(|&b| b == 0), "{op:?}: tail not zeroed");
        let seg = &out[24..64];
        match op {
            SendOp::Write { .. } | SendOp::WriteWithImm { .. } | SendOp::Read { .. } => {
                let r = RdmaSeg::read_from(seg).expect("rdma");
                assert_eq!((r.remote_addr, r.rkey), (0xa000, 9));
            }
            SendOp::CmpSwap { .. } => {
                let a = AtomicSeg::read_from(seg).expect("atomic");
                assert_eq!(
                    (a.remote_addr, a.rkey, a.compare_add, a.swap),
                    (0xb000, 3, 5, 6)
                );
            }
            SendOp::FetchAdd { .. } => {
                let a = AtomicSeg::read_from(seg).expect("atomic");
                assert_eq!((a.remote_addr, a.compare_add, a.swap), (0xb008, 11, 0));
            }
            _ => assert!(seg.iter().all(|&b| b == 0)),
        }
    }
}

#[test]
fn flags() {
    let mut r = req(SendOp::Send, Payload::Sges(&[]));
    r.signaled = false;
    r.solicited = true;
    r.fence = true;
    let mut out = [0u8; 256];
    assert_eq!(send(&r, &RC, &mut out), Ok(64));
    assert_eq!(ctrl(&out).flags, WQE_FLAG_SOLICITED | WQE_FLAG_FENCE);
}

#[test]
fn inline_data_is_concatenated_and_padded() {
    let a = [1u8, 2, 3];
    let b = [4u8; 14];
    let pieces: [&[u8]; 2] = [&a, &b];
    let mut out = [0xeeu8; 256];
    let n = send(&req(SendOp::Send, Payload::Inline(&pieces)), &RC, &mut out).expect("inline");
    assert_eq!(n, 64 + 32);
    let c = ctrl(&out);
    assert_eq!(c.flags, WQE_FLAG_SIGNALED | WQE_FLAG_INLINE);
    assert_eq!((c.num_sge, c.inline_len), (0, 17));
    assert_eq!(&out[64..67], &a);
    assert_eq!(&out[67..81], &b);
    assert!(out[81..].iter().all(|&b| b == 0));
    // Exactly max_inline fits, one more byte does not.
    let big = [7u8; 128];
    let pieces: [&[u8]; 1] = [&big];
    assert_eq!(
        send(&req(SendOp::Send, Payload::Inline(&pieces)), &RC, &mut out),
        Ok(64 + 128)
    );
    let bigger = [7u8; 129];
    let pieces: [&[u8]; 1] = [&bigger];
    assert_eq!(
        send(&req(SendOp::Send, Payload::Inline(&pieces)), &RC, &mut out),
        Err(())
    );
    assert!(
        out.iter().all(|&b| b == 0),
        "a rejected WQE leaves the slot zeroed"
    );
    // Inline RDMA WRITE is fine, inline READ or atomic is not.
    let small: [&[u8]; 1] = [&a];
    let write = SendOp::Write {
        remote_addr: 1,
        rkey: 2,
    };
    assert!(send(&req(write, Payload::Inline(&small)), &RC, &mut out).is_ok());
    let read = SendOp::Read {
        remote_addr: 1,
        rkey: 2,
    };
    assert_eq!(
        send(&req(read, Payload::Inline(&small)), &RC, &mut out),
        Err(())
    );
}

#[test]
fn inline_must_fit_the_stride() {
    let limits = SqLimits {
        stride: 128,
        max_inline: MAX_INLINE,
        ..RC
    };
    let data = [1u8; 65];
    let pieces: [&[u8]; 1] = [&data];
    let mut out = [0u8; 128];
    assert_eq!(
        send(
            &req(SendOp::Send, Payload::Inline(&pieces)),
            &limits,
            &mut out
        ),
        Err(())
    );
}

#[test]
fn sge_limits() {
    let many: Vec<Sge> = (0..9).map(sge).collect();
    let mut out = [0u8; 256];
    assert_eq!(
        send(&req(SendOp::Send, Payload::Sges(&many)), &RC, &mut out),
        Err(())
    );
    // 12 SGEs would fit max_sge but not a 256-byte stride.
    let limits = SqLimits {
        max_sge: MAX_SGE,
        ..RC
    };
    let many: Vec<Sge> = (0..13).map(sge).collect();
    assert_eq!(
        send(&req(SendOp::Send, Payload::Sges(&many)), &limits, &mut out),
        Err(())
    );
    assert_eq!(
        send(
            &req(SendOp::Send, Payload::Sges(&many[..12])),
            &limits,
            &mut out
        ),
        Ok(256)
    );
}

#[test]
fn atomics_need_one_8_byte_sge_and_alignment() {
    let mut out = [0u8; 256];
    let op = SendOp::FetchAdd {
        remote_addr: 0x1000,
        rkey: 1,
        add: 1,
    };
    let short = [Sge {
        addr: 0,
        length: 4,
        lkey: 1,
    }];
    assert_eq!(
        send(&req(op, Payload::Sges(&short)), &RC, &mut out),
        Err(())
    );
    assert_eq!(send(&req(op, Payload::Sges(&[])), &RC, &mut out), Err(()));
    let ok = [Sge {
        addr: 0,
        length: 8,
        lkey: 1,
    }];
    let unaligned = SendOp::CmpSwap {
        remote_addr: 0x1004,
        rkey: 1,
        compare: 0,
        swap: 0,
    };
    assert_eq!(
        send(&req(unaligned, Payload::Sges(&ok)), &RC, &mut out),
        Err(())
    );
    assert!(out.iter().all(|&b| b == 0));
}

#[test]
fn atomic_writes_and_flushes_carry_their_operands_in_the_segment() {
    let mut out = [0u8; 256];
    let write = SendOp::AtomicWrite {
        remote_addr: 0x1008,
        rkey: 7,
        value: *b"8 bytes!",
    };
    assert_eq!(
        send(&req(write, Payload::Sges(&[])), &RC, &mut out),
        Ok(WQE_HEADER_SIZE)
    );
    assert_eq!(ctrl(&out).opcode, WR_ATOMIC_WRITE);
    let seg = AtomicWriteSeg::read_from(&out[WQE_SEG_OFFSET..]).expect("seg");
    assert_eq!(
        (seg.remote_addr, seg.rkey, seg.value),
        (0x1008, 7, *b"8 bytes!")
    );
    let flush = SendOp::Flush {
        remote_addr: 0x2000,
        rkey: 9,
        length: 4096,
        placement: FLUSH_GLOBAL,
        level: FLUSH_RANGE,
    };
    assert!(send(&req(flush, Payload::Sges(&[])), &RC, &mut out).is_ok());
    assert_eq!(ctrl(&out).opcode, WR_FLUSH);
    let seg = FlushSeg::read_from(&out[WQE_SEG_OFFSET..]).expect("seg");
    assert_eq!(
        (seg.length, seg.placement, seg.level),
        (4096, FLUSH_GLOBAL, FLUSH_RANGE)
    );
    // Refused: data to gather, a misaligned store, no or an unknown placement, a range too
    // long, an undefined level, and either on UC or UD.
    let bad = [
        (write, Payload::Sges(&[sge(1)]), RC),
        (
            SendOp::AtomicWrite {
                remote_addr: 0x1004,
                rkey: 7,
                value: [0; 8],
            },
            Payload::Sges(&[]),
            RC,
        ),
        (flush_op(0, FLUSH_RANGE, 64), Payload::Sges(&[]), RC),
        (flush_op(4, FLUSH_RANGE, 64), Payload::Sges(&[]), RC),
        (
            flush_op(FLUSH_GLOBAL, FLUSH_RANGE, (1 << 31) + 1),
            Payload::Sges(&[]),
            RC,
        ),
        (flush_op(FLUSH_GLOBAL, 2, 64), Payload::Sges(&[]), RC),
        (
            flush,
            Payload::Sges(&[]),
            SqLimits {
                qp_type: QpType::Uc,
                ..RC
            },
        ),
        (write, Payload::Sges(&[]), UD),
    ];
    for (op, payload, limits) in bad {
        assert_eq!(
            send(&req(op, payload), &limits, &mut out),
            Err(()),
            "{op:?}"
        );
    }
    // A whole-MR flush takes any length.
    let whole = flush_op(FLUSH_PERSISTENT, FLUSH_MR, u64::MAX);
    assert!(send(&req(whole, Payload::Sges(&[])), &RC, &mut out).is_ok());
}

fn flush_op(placement: u8, level: u8, length: u64) -> SendOp {
    SendOp::Flush {
        remote_addr: 0,
        rkey: 1,
        length,
        placement,
        level,
    }
}

/// The operation segment of a built WQE.
fn seg_of(wqe: &[u8]) -> &[u8; 40] {
    wqe[24..64].try_into().expect("40 bytes")
}

/// The device reads back what the builder wrote: [`SendOp::parse`] is its inverse, for every
/// operation a connected QP sends.
#[test]
fn parse_reads_back_every_operation_the_builder_writes() {
    let one = [Sge {
        addr: 0x2000,
        length: 8,
        lkey: 7,
    }];
    let sges = [sge(1)];
    let ops = [
        SendOp::Send,
        SendOp::SendWithImm(0x0102_0304),
        SendOp::SendWithInv(0x4455),
        SendOp::Write {
            remote_addr: 0xa000,
            rkey: 9,
        },
        SendOp::WriteWithImm {
            remote_addr: 0xa000,
            rkey: 9,
            imm: 77,
        },
        SendOp::Read {
            remote_addr: 0xa000,
            rkey: 9,
        },
        SendOp::CmpSwap {
            remote_addr: 0xb000,
            rkey: 3,
            compare: 5,
            swap: 6,
        },
        SendOp::FetchAdd {
            remote_addr: 0xb008,
            rkey: 3,
            add: 11,
        },
        SendOp::RegMr(RegMrSeg {
            iova: 0x7000,
            length: 0x3000,
            key: 0x0102_0344,
            ..RegMrSeg::default()
        }),
        SendOp::LocalInv(0x0102_0344),
        SendOp::BindMw(BindMwSeg {
            addr: 0x7100,
            length: 0x100,
            ..BindMwSeg::default()
        }),
        SendOp::AtomicWrite {
            remote_addr: 0xc000,
            rkey: 4,
            value: [1, 2, 3, 4, 5, 6, 7, 8],
        },
        SendOp::Flush {
            remote_addr: 0xd000,
            rkey: 5,
            length: 4096,
            placement: FLUSH_GLOBAL | FLUSH_PERSISTENT,
            level: FLUSH_RANGE,
        },
    ];
    for op in ops {
        let payload: &[Sge] = match op {
            SendOp::CmpSwap { .. } | SendOp::FetchAdd { .. } => &one,
            SendOp::AtomicWrite { .. }
            | SendOp::Flush { .. }
            | SendOp::RegMr(_)
            | SendOp::LocalInv(_)
            | SendOp::BindMw(_) => &[],
            _ => &sges,
        };
        let mut out = [0u8; 256];
        send(&req(op, Payload::Sges(payload)), &RC, &mut out).expect("built");
        let parsed = SendOp::parse(&ctrl(&out), seg_of(&out), QpType::Rc).expect("parsed");
        assert_eq!(parsed.op, op);
        assert!(parsed.ud.is_none(), "{op:?}");
    }
    // An opcode that is not one, or not the QP type's, is refused as validation refuses it.
    let bad = WqeCtrl {
        opcode: WR_FLUSH + 1,
        ..WqeCtrl::default()
    };
    assert_eq!(
        SendOp::parse(&bad, &[0; 40], QpType::Rc).map(|p| p.op),
        Err(WqeError::BadOpcode)
    );
    let read = WqeCtrl {
        opcode: WR_RDMA_READ,
        ..WqeCtrl::default()
    };
    assert_eq!(
        SendOp::parse(&read, &[0; 40], QpType::Ud).map(|p| p.op),
        Err(WqeError::BadQpType)
    );
}

#[test]
fn ud_sends_carry_the_address_vector() {
    let av = UdAvSeg {
        dgid: [0xfe; 16],
        dmac: [2, 0, 0, 0, 0, 1],
        vlan: 0xffff,
        remote_qpn: 0x42,
        remote_qkey: 0x1111_1111,
        flow_label: 5,
        sgid_index: 3,
        hop_limit: 64,
        traffic_class: 0,
        rsvd: 0,
    };
    let sges = [sge(1)];
    let mut r = req(SendOp::SendWithImm(9), Payload::Sges(&sges));
    r.ud = Some(UdAddress::Av(av));
    let mut out = [0u8; 256];
    assert_eq!(send(&r, &UD, &mut out), Ok(80));
    let c = ctrl(&out);
    assert_eq!(c.flags, WQE_FLAG_SIGNALED | WQE_FLAG_AV);
    assert_eq!(UdAvSeg::read_from(&out[24..]), Some(av));
    let parsed = SendOp::parse(&c, seg_of(&out), QpType::Ud).expect("parsed");
    assert_eq!(parsed.op, SendOp::SendWithImm(9));
    assert!(matches!(parsed.ud, Some(UdAddress::Av(a)) if a == av));
    // By AH number (a process's QPs): no AV flag, the UD segment instead.
    let seg = UdSeg {
        ah: 9,
        remote_qpn: 0x22,
        remote_qkey: 0x1111_1111,
        ..UdSeg::default()
    };
    r.ud = Some(UdAddress::Handle(seg));
    assert_eq!(send(&r, &UD, &mut out), Ok(80));
    assert_eq!(ctrl(&out).flags, WQE_FLAG_SIGNALED);
    assert_eq!(UdSeg::read_from(&out[24..]), Some(seg));
    let parsed = SendOp::parse(&ctrl(&out), seg_of(&out), QpType::Ud).expect("parsed");
    assert!(matches!(parsed.ud, Some(UdAddress::Handle(h)) if h == seg));
    // UD: no address, or an RDMA opcode, is refused.
    r.ud = None;
    assert_eq!(send(&r, &UD, &mut out), Err(()));
    let mut w = req(
        SendOp::Write {
            remote_addr: 0,
            rkey: 0,
        },
        Payload::Sges(&sges),
    );
    w.ud = Some(UdAddress::Av(av));
    assert_eq!(send(&w, &UD, &mut out), Err(()));
    // An RC QP ignores no address vector: the AV flag is never set there.
    assert!(send(&w, &RC, &mut out).is_ok());
    assert_eq!(ctrl(&out).flags & WQE_FLAG_AV, 0);
}

#[test]
fn recv_wqes() {
    let sges = [sge(1), sge(2), sge(3)];
    let mut out = [0xffu8; 64];
    assert_eq!(recv(99, &sges, 3, &mut out), Ok(64));
    let h = RecvWqeHeader::read_from(&out).expect("header");
    assert_eq!((h.wr_id, h.num_sge), (99, 3));
    for (i, s) in sges.iter().enumerate() {
        assert_eq!(wqe_sge(&out, 16, i), Some(*s));
    }
    // Too many for max_sge or for the stride.
    assert_eq!(recv(1, &sges, 2, &mut out), Err(()));
    let four = [sge(1), sge(2), sge(3), sge(4)];
    assert_eq!(recv(1, &four, 16, &mut out), Err(()));
    assert_eq!(recv(1, &[], 16, &mut out), Ok(16));
}
