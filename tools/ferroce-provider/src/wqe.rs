// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Building send and receive WQEs in the hardware format (ferroce-hw.rst, "Work queue
//! entries") from validated requests. Everything here is plain data: the FFI layer turns
//! `ibv_send_wr` / `ibv_recv_wr` into these types.

use ferroce_hw::{
    send_wqe_size, validate_recv_wqe, validate_send_wqe, AtomicSeg, RdmaSeg, RecvWqeHeader, Sge,
    UdAvSeg, WqeCtrl, QPT_GSI, QPT_RC, QPT_UD, WQE_FLAG_AV, WQE_FLAG_FENCE, WQE_FLAG_INLINE,
    WQE_FLAG_SIGNALED, WQE_FLAG_SOLICITED, WQE_HEADER_SIZE, WQE_SEG_OFFSET, WR_ATOMIC_CMP_SWAP,
    WR_ATOMIC_FETCH_ADD, WR_RDMA_READ, WR_RDMA_WRITE, WR_RDMA_WRITE_WITH_IMM, WR_SEND,
    WR_SEND_WITH_IMM, WR_SEND_WITH_INV,
};
use libc::EINVAL;

/// The operation of a send request with its operands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SendOp {
    /// SEND.
    Send,
    /// SEND with immediate data (stored as the application gave it, network order).
    SendWithImm(u32),
    /// SEND with invalidate of the responder's key.
    SendWithInv(u32),
    /// RDMA WRITE.
    Write { remote_addr: u64, rkey: u32 },
    /// RDMA WRITE with immediate.
    WriteWithImm {
        remote_addr: u64,
        rkey: u32,
        imm: u32,
    },
    /// RDMA READ.
    Read { remote_addr: u64, rkey: u32 },
    /// Atomic compare and swap.
    CmpSwap {
        remote_addr: u64,
        rkey: u32,
        compare: u64,
        swap: u64,
    },
    /// Atomic fetch and add.
    FetchAdd {
        remote_addr: u64,
        rkey: u32,
        add: u64,
    },
}

impl SendOp {
    /// The hardware `WR_*` opcode.
    pub(crate) fn opcode(&self) -> u8 {
        match self {
            SendOp::Send => WR_SEND,
            SendOp::SendWithImm(_) => WR_SEND_WITH_IMM,
            SendOp::SendWithInv(_) => WR_SEND_WITH_INV,
            SendOp::Write { .. } => WR_RDMA_WRITE,
            SendOp::WriteWithImm { .. } => WR_RDMA_WRITE_WITH_IMM,
            SendOp::Read { .. } => WR_RDMA_READ,
            SendOp::CmpSwap { .. } => WR_ATOMIC_CMP_SWAP,
            SendOp::FetchAdd { .. } => WR_ATOMIC_FETCH_ADD,
        }
    }

    fn is_atomic(&self) -> bool {
        matches!(self, SendOp::CmpSwap { .. } | SendOp::FetchAdd { .. })
    }
}

/// Where the data of a send comes from.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Payload<'a> {
    /// Scatter/gather entries the device reads by DMA.
    Sges(&'a [Sge]),
    /// Bytes copied into the WQE (the pieces are concatenated).
    Inline(&'a [&'a [u8]]),
}

/// A send work request, checked against the QP by [`build_send_wqe`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct SendRequest<'a> {
    pub(crate) wr_id: u64,
    pub(crate) op: SendOp,
    pub(crate) signaled: bool,
    pub(crate) solicited: bool,
    pub(crate) fence: bool,
    pub(crate) payload: Payload<'a>,
    /// UD: the address vector with `remote_qpn` and `remote_qkey` filled in.
    pub(crate) ud: Option<UdAvSeg>,
}

/// What a send queue accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SqLimits {
    /// `QPT_*`.
    pub(crate) qp_type: u8,
    /// WQE stride in bytes.
    pub(crate) stride: usize,
    /// SGEs per WQE.
    pub(crate) max_sge: u32,
    /// Inline bytes per WQE.
    pub(crate) max_inline: u32,
}

/// Writes the WQE for `req` into `out` (one stride slot, zeroed first) and returns the bytes
/// it uses (header plus SGEs or padded inline data). `EINVAL` for a request the QP cannot
/// carry; `out` is then left zeroed.
pub(crate) fn build_send_wqe(
    req: &SendRequest<'_>,
    limits: &SqLimits,
    out: &mut [u8],
) -> Result<usize, i32> {
    out.fill(0);
    let ud = matches!(limits.qp_type, QPT_UD | QPT_GSI);
    if !ud && limits.qp_type != QPT_RC {
        return Err(EINVAL);
    }
    if ud && (!matches!(req.op, SendOp::Send | SendOp::SendWithImm(_)) || req.ud.is_none()) {
        return Err(EINVAL);
    }

    let mut flags = 0;
    if req.signaled {
        flags |= WQE_FLAG_SIGNALED;
    }
    if req.solicited {
        flags |= WQE_FLAG_SOLICITED;
    }
    if req.fence {
        flags |= WQE_FLAG_FENCE;
    }
    if ud {
        flags |= WQE_FLAG_AV;
    }
    let (num_sge, inline_len) = match req.payload {
        Payload::Sges(sges) => {
            if sges.len() > limits.max_sge as usize {
                return Err(EINVAL);
            }
            if req.op.is_atomic() && (sges.len() != 1 || sges[0].length < 8) {
                return Err(EINVAL);
            }
            (sges.len(), 0)
        }
        Payload::Inline(pieces) => {
            if matches!(req.op, SendOp::Read { .. }) || req.op.is_atomic() {
                return Err(EINVAL);
            }
            let len = pieces
                .iter()
                .try_fold(0usize, |n, p| n.checked_add(p.len()));
            match len {
                Some(len) if len <= limits.max_inline as usize => {
                    flags |= WQE_FLAG_INLINE;
                    (0, len)
                }
                _ => return Err(EINVAL),
            }
        }
    };
    let (Ok(num_sge_u8), Ok(inline_u16)) = (u8::try_from(num_sge), u16::try_from(inline_len))
    else {
        return Err(EINVAL);
    };
    let size = send_wqe_size(u32::from(num_sge_u8), u32::from(inline_u16));
    if size > limits.stride || size > out.len() {
        return Err(EINVAL);
    }

    let imm_or_inv = match req.op {
        SendOp::SendWithImm(imm) | SendOp::WriteWithImm { imm, .. } => imm,
        SendOp::SendWithInv(key) => key,
        _ => 0,
    };
    let ctrl = WqeCtrl {
        wr_id: req.wr_id,
        opcode: req.op.opcode(),
        flags,
        num_sge: num_sge_u8,
        inline_len: inline_u16,
        imm_or_inv,
        ..WqeCtrl::default()
    };
    validate_send_wqe(&ctrl, limits.qp_type, limits.stride).map_err(|_| EINVAL)?;
    ctrl.write_to(out);

    let seg = &mut out[WQE_SEG_OFFSET..WQE_HEADER_SIZE];
    match (req.op, req.ud) {
        (_, Some(av)) if ud => {
            av.write_to(seg);
        }
        (
            SendOp::Write { remote_addr, rkey }
            | SendOp::WriteWithImm {
                remote_addr, rkey, ..
            }
            | SendOp::Read { remote_addr, rkey },
            _,
        ) => {
            RdmaSeg {
                remote_addr,
                rkey,
                ..RdmaSeg::default()
            }
            .write_to(seg);
        }
        (
            SendOp::CmpSwap {
                remote_addr,
                rkey,
                compare,
                swap,
            },
            _,
        ) => {
            AtomicSeg {
                remote_addr,
                rkey,
                compare_add: compare,
                swap,
                ..AtomicSeg::default()
            }
            .write_to(seg);
        }
        (
            SendOp::FetchAdd {
                remote_addr,
                rkey,
                add,
            },
            _,
        ) => {
            AtomicSeg {
                remote_addr,
                rkey,
                compare_add: add,
                ..AtomicSeg::default()
            }
            .write_to(seg);
        }
        _ => {}
    }
    if req.op.is_atomic() {
        let addr = match req.op {
            SendOp::CmpSwap { remote_addr, .. } | SendOp::FetchAdd { remote_addr, .. } => {
                remote_addr
            }
            _ => 0,
        };
        if addr % 8 != 0 {
            out.fill(0);
            return Err(EINVAL);
        }
    }

    let body = &mut out[WQE_HEADER_SIZE..size];
    match req.payload {
        Payload::Sges(sges) => {
            for (sge, dst) in sges.iter().zip(body.chunks_exact_mut(Sge::SIZE)) {
                sge.write_to(dst);
            }
        }
        Payload::Inline(pieces) => {
            let mut at = 0;
            for piece in pieces {
                body[at..at + piece.len()].copy_from_slice(piece);
                at += piece.len();
            }
        }
    }
    Ok(size)
}

/// Writes a receive WQE (RQ or SRQ) into `out` (one stride slot, zeroed first) and returns
/// the bytes used. `EINVAL` if the SGEs exceed `max_sge` or the stride.
pub(crate) fn build_recv_wqe(
    wr_id: u64,
    sges: &[Sge],
    max_sge: u32,
    out: &mut [u8],
) -> Result<usize, i32> {
    out.fill(0);
    let num_sge = u8::try_from(sges.len()).map_err(|_| EINVAL)?;
    if u32::from(num_sge) > max_sge {
        return Err(EINVAL);
    }
    let header = RecvWqeHeader {
        wr_id,
        num_sge,
        ..RecvWqeHeader::default()
    };
    validate_recv_wqe(&header, out.len()).map_err(|_| EINVAL)?;
    header.write_to(out);
    let size = RecvWqeHeader::SIZE + sges.len() * Sge::SIZE;
    for (sge, dst) in sges
        .iter()
        .zip(out[RecvWqeHeader::SIZE..size].chunks_exact_mut(Sge::SIZE))
    {
        sge.write_to(dst);
    }
    Ok(size)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferroce_hw::{wqe_sge, MAX_INLINE, MAX_SGE};

    const RC: SqLimits = SqLimits {
        qp_type: QPT_RC,
        stride: 256,
        max_sge: 8,
        max_inline: 128,
    };
    const UD: SqLimits = SqLimits {
        qp_type: QPT_UD,
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
            let n = build_send_wqe(&req(op, Payload::Sges(sg)), &RC, &mut out).expect("built");
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
        assert_eq!(build_send_wqe(&r, &RC, &mut out), Ok(64));
        assert_eq!(ctrl(&out).flags, WQE_FLAG_SOLICITED | WQE_FLAG_FENCE);
    }

    #[test]
    fn inline_data_is_concatenated_and_padded() {
        let a = [1u8, 2, 3];
        let b = [4u8; 14];
        let pieces: [&[u8]; 2] = [&a, &b];
        let mut out = [0xeeu8; 256];
        let n = build_send_wqe(&req(SendOp::Send, Payload::Inline(&pieces)), &RC, &mut out)
            .expect("inline");
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
            build_send_wqe(&req(SendOp::Send, Payload::Inline(&pieces)), &RC, &mut out),
            Ok(64 + 128)
        );
        let bigger = [7u8; 129];
        let pieces: [&[u8]; 1] = [&bigger];
        assert_eq!(
            build_send_wqe(&req(SendOp::Send, Payload::Inline(&pieces)), &RC, &mut out),
            Err(EINVAL)
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
        assert!(build_send_wqe(&req(write, Payload::Inline(&small)), &RC, &mut out).is_ok());
        let read = SendOp::Read {
            remote_addr: 1,
            rkey: 2,
        };
        assert_eq!(
            build_send_wqe(&req(read, Payload::Inline(&small)), &RC, &mut out),
            Err(EINVAL)
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
            build_send_wqe(
                &req(SendOp::Send, Payload::Inline(&pieces)),
                &limits,
                &mut out
            ),
            Err(EINVAL)
        );
    }

    #[test]
    fn sge_limits() {
        let many: Vec<Sge> = (0..9).map(sge).collect();
        let mut out = [0u8; 256];
        assert_eq!(
            build_send_wqe(&req(SendOp::Send, Payload::Sges(&many)), &RC, &mut out),
            Err(EINVAL)
        );
        // 12 SGEs would fit max_sge but not a 256-byte stride.
        let limits = SqLimits {
            max_sge: MAX_SGE,
            ..RC
        };
        let many: Vec<Sge> = (0..13).map(sge).collect();
        assert_eq!(
            build_send_wqe(&req(SendOp::Send, Payload::Sges(&many)), &limits, &mut out),
            Err(EINVAL)
        );
        assert_eq!(
            build_send_wqe(
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
            build_send_wqe(&req(op, Payload::Sges(&short)), &RC, &mut out),
            Err(EINVAL)
        );
        assert_eq!(
            build_send_wqe(&req(op, Payload::Sges(&[])), &RC, &mut out),
            Err(EINVAL)
        );
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
            build_send_wqe(&req(unaligned, Payload::Sges(&ok)), &RC, &mut out),
            Err(EINVAL)
        );
        assert!(out.iter().all(|&b| b == 0));
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
        r.ud = Some(av);
        let mut out = [0u8; 256];
        assert_eq!(build_send_wqe(&r, &UD, &mut out), Ok(80));
        let c = ctrl(&out);
        assert_eq!(c.flags, WQE_FLAG_SIGNALED | WQE_FLAG_AV);
        assert_eq!(UdAvSeg::read_from(&out[24..]), Some(av));
        // UD: no address, or an RDMA opcode, is refused.
        r.ud = None;
        assert_eq!(build_send_wqe(&r, &UD, &mut out), Err(EINVAL));
        let mut w = req(
            SendOp::Write {
                remote_addr: 0,
                rkey: 0,
            },
            Payload::Sges(&sges),
        );
        w.ud = Some(av);
        assert_eq!(build_send_wqe(&w, &UD, &mut out), Err(EINVAL));
        // An RC QP ignores no address vector: the AV flag is never set there.
        assert!(build_send_wqe(&w, &RC, &mut out).is_ok());
        assert_eq!(ctrl(&out).flags & WQE_FLAG_AV, 0);
    }

    #[test]
    fn recv_wqes() {
        let sges = [sge(1), sge(2), sge(3)];
        let mut out = [0xffu8; 64];
        assert_eq!(build_recv_wqe(99, &sges, 3, &mut out), Ok(64));
        let h = RecvWqeHeader::read_from(&out).expect("header");
        assert_eq!((h.wr_id, h.num_sge), (99, 3));
        for (i, s) in sges.iter().enumerate() {
            assert_eq!(wqe_sge(&out, 16, i), Some(*s));
        }
        // Too many for max_sge or for the stride.
        assert_eq!(build_recv_wqe(1, &sges, 2, &mut out), Err(EINVAL));
        let four = [sge(1), sge(2), sge(3), sge(4)];
        assert_eq!(build_recv_wqe(1, &four, 16, &mut out), Err(EINVAL));
        assert_eq!(build_recv_wqe(1, &[], 16, &mut out), Ok(16));
    }
}
