// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Building send and receive WQEs from requests: the one place that turns a work request into
//! the hardware format and refuses what the queue cannot carry. The driver converts `ib_send_wr`
//! and the provider `ibv_send_wr` (and the `ibv_wr_*` calls) into these types.

use super::*;

/// Why a work request cannot become a WQE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BuildError {
    /// The WQE would be malformed ([`validate_send_wqe`], [`validate_recv_wqe`]).
    Wqe(WqeError),
    /// A UD or GSI send without an address vector.
    NoAddress,
    /// An atomic whose remote address is not 8-byte aligned or whose result SGE is not one
    /// of at least 8 bytes; an atomic write or a flush with data to send.
    AtomicOperand,
    /// A flush with no placement type, an undefined one or level, or a range over 2^31
    /// bytes.
    FlushOperand,
    /// More than the queue's stride or the output holds.
    TooBig,
    /// A wire operation of an XRC_INI QP that names no XRC SRQ at the target.
    #[cfg(userspace)] // Kernel ULPs have no XRC.
    NoXrcSrqn,
}

/// The operation of a send request with its operands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendOp {
    /// SEND.
    Send,
    /// SEND with immediate data (stored as the consumer gave it, network order).
    SendWithImm(u32),
    /// SEND with invalidate of the responder's key.
    SendWithInv(u32),
    /// RDMA WRITE.
    Write {
        /// Remote virtual address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
    },
    /// RDMA WRITE with immediate.
    WriteWithImm {
        /// Remote virtual address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
        /// Immediate data (network order).
        imm: u32,
    },
    /// RDMA READ.
    Read {
        /// Remote virtual address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
    },
    /// Atomic compare and swap.
    CmpSwap {
        /// Remote virtual address (8-byte aligned).
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
        /// Value compared with.
        compare: u64,
        /// Value stored if equal.
        swap: u64,
    },
    /// Atomic fetch and add.
    FetchAdd {
        /// Remote virtual address (8-byte aligned).
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
        /// Addend.
        add: u64,
    },
    /// Fast registration of an MR.
    RegMr(RegMrSeg),
    /// Local invalidate of a key.
    LocalInv(u32),
    /// Binding of a memory window.
    #[cfg_attr(
        not(userspace),
        expect(
            dead_code,
            reason = "kernel consumers bind no windows (ib_core has no such WR)"
        )
    )]
    BindMw(BindMwSeg),
    /// Atomic write of 8 bytes (IBTA 1.5).
    #[cfg_attr(
        not(userspace),
        expect(dead_code, reason = "no kernel consumer posts atomic writes")
    )]
    AtomicWrite {
        /// Remote virtual address (8-byte aligned).
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
        /// The bytes stored, in memory order.
        value: [u8; 8],
    },
    /// Flush (IBTA 1.5).
    #[cfg_attr(
        not(userspace),
        expect(dead_code, reason = "no kernel consumer posts flushes")
    )]
    Flush {
        /// Remote virtual address (`FLUSH_RANGE`).
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
        /// Bytes (`FLUSH_RANGE`).
        length: u64,
        /// `FLUSH_GLOBAL` and/or `FLUSH_PERSISTENT`.
        placement: u8,
        /// `FLUSH_RANGE` or `FLUSH_MR`.
        level: u8,
    },
}

impl SendOp {
    /// The hardware `WR_*` opcode.
    pub const fn opcode(&self) -> u8 {
        match self {
            SendOp::Send => WR_SEND,
            SendOp::SendWithImm(_) => WR_SEND_WITH_IMM,
            SendOp::SendWithInv(_) => WR_SEND_WITH_INV,
            SendOp::Write { .. } => WR_RDMA_WRITE,
            SendOp::WriteWithImm { .. } => WR_RDMA_WRITE_WITH_IMM,
            SendOp::Read { .. } => WR_RDMA_READ,
            SendOp::CmpSwap { .. } => WR_ATOMIC_CMP_SWAP,
            SendOp::FetchAdd { .. } => WR_ATOMIC_FETCH_ADD,
            SendOp::RegMr(_) => WR_REG_MR,
            SendOp::LocalInv(_) => WR_LOCAL_INV,
            SendOp::BindMw(_) => WR_BIND_MW,
            SendOp::AtomicWrite { .. } => WR_ATOMIC_WRITE,
            SendOp::Flush { .. } => WR_FLUSH,
        }
    }

    const fn is_atomic(&self) -> bool {
        matches!(self, SendOp::CmpSwap { .. } | SendOp::FetchAdd { .. })
    }

    /// Whether the operation carries all it needs in its segment (no data to gather).
    const fn takes_no_data(&self) -> bool {
        matches!(self, SendOp::AtomicWrite { .. } | SendOp::Flush { .. })
    }
}

/// A send WQE as the device takes it: its operation with the operands, read back once from the
/// control and operation segments ([`SendOp::parse`]).
#[cfg(userspace)] // The device parses WQEs.
#[derive(Clone, Copy, Debug)]
pub struct ParsedOp {
    /// The operation and its operands.
    pub op: SendOp,
    /// UD and GSI: where the datagram goes.
    pub ud: Option<UdAddress>,
}

#[cfg(userspace)] // The device parses WQEs.
impl SendOp {
    /// The operation a send WQE of a `qp_type` QP carries, from its control segment and its
    /// 40-byte operation segment: the inverse of [`build_send_wqe`]'s encoding. Refused, as
    /// [`validate_send_wqe`] refuses it, if the opcode is not a send opcode of the QP type.
    pub fn parse(ctrl: &WqeCtrl, seg: &[u8; 40], qp_type: QpType) -> Result<ParsedOp, WqeError> {
        if !send_opcode_valid(ctrl.opcode) {
            return Err(WqeError::BadOpcode);
        }
        if !send_opcode_allowed(qp_type, ctrl.opcode) {
            return Err(WqeError::BadQpType);
        }
        if qp_type.is_datagram() {
            let ud = if ctrl.flags & WQE_FLAG_AV != 0 {
                UdAddress::Av(UdAvSeg::decode(seg))
            } else {
                UdAddress::Handle(UdSeg::decode(seg))
            };
            let op = match ctrl.opcode {
                WR_SEND_WITH_IMM => SendOp::SendWithImm(ctrl.imm_or_inv),
                _ => SendOp::Send,
            };
            return Ok(ParsedOp { op, ud: Some(ud) });
        }
        let rdma = RdmaSeg::decode(seg);
        let (remote_addr, rkey) = (rdma.remote_addr, rdma.rkey);
        let op = match ctrl.opcode {
            WR_SEND => SendOp::Send,
            WR_SEND_WITH_IMM => SendOp::SendWithImm(ctrl.imm_or_inv),
            WR_SEND_WITH_INV => SendOp::SendWithInv(ctrl.imm_or_inv),
            WR_RDMA_WRITE => SendOp::Write { remote_addr, rkey },
            WR_RDMA_WRITE_WITH_IMM => SendOp::WriteWithImm {
                remote_addr,
                rkey,
                imm: ctrl.imm_or_inv,
            },
            WR_RDMA_READ => SendOp::Read { remote_addr, rkey },
            WR_ATOMIC_CMP_SWAP => {
                let a = AtomicSeg::decode(seg);
                SendOp::CmpSwap {
                    remote_addr: a.remote_addr,
                    rkey: a.rkey,
                    compare: a.compare_add,
                    swap: a.swap,
                }
            }
            WR_ATOMIC_FETCH_ADD => {
                let a = AtomicSeg::decode(seg);
                SendOp::FetchAdd {
                    remote_addr: a.remote_addr,
                    rkey: a.rkey,
                    add: a.compare_add,
                }
            }
            WR_REG_MR => SendOp::RegMr(RegMrSeg::decode(seg)),
            WR_LOCAL_INV => SendOp::LocalInv(ctrl.imm_or_inv),
            WR_BIND_MW => SendOp::BindMw(BindMwSeg::decode(seg)),
            WR_ATOMIC_WRITE => {
                let a = AtomicWriteSeg::decode(seg);
                SendOp::AtomicWrite {
                    remote_addr: a.remote_addr,
                    rkey: a.rkey,
                    value: a.value,
                }
            }
            WR_FLUSH => {
                let f = FlushSeg::decode(seg);
                SendOp::Flush {
                    remote_addr: f.remote_addr,
                    rkey: f.rkey,
                    length: f.length,
                    placement: f.placement,
                    level: f.level,
                }
            }
            _ => return Err(WqeError::BadOpcode),
        };
        Ok(ParsedOp { op, ud: None })
    }
}

/// Where the data of a send comes from.
#[derive(Clone, Copy, Debug)]
pub enum Payload<'a> {
    /// Scatter/gather entries the device reads by DMA.
    Sges(&'a [Sge]),
    /// Bytes copied into the WQE (the pieces are concatenated).
    Inline(&'a [&'a [u8]]),
}

/// The destination of a UD send.
#[derive(Clone, Copy, Debug)]
pub enum UdAddress {
    /// The address vector itself, with `remote_qpn` and `remote_qkey` filled in (`WQE_FLAG_AV`;
    /// the kernel's QPs).
    Av(UdAvSeg),
    /// An AH the kernel created in the device (`CMD_CREATE_AH`), with the destination QP and
    /// Q_Key: the only form a QP with [`QP_FLAG_AH_HANDLES`] takes.
    #[cfg(userspace)] // The provider's: the kernel's QPs send with the vector.
    Handle(UdSeg),
}

/// A send work request, checked against the QP by [`build_send_wqe`].
#[derive(Clone, Copy, Debug)]
pub struct SendRequest<'a> {
    /// Returned in the CQE.
    pub wr_id: u64,
    /// The operation and its operands.
    pub op: SendOp,
    /// Generate a CQE.
    pub signaled: bool,
    /// Ask for a solicited event at the responder.
    pub solicited: bool,
    /// Wait for earlier READs and atomics.
    pub fence: bool,
    /// The data.
    pub payload: Payload<'a>,
    /// UD: where the datagram goes.
    pub ud: Option<UdAddress>,
    /// XRC_INI: the XRC SRQ at the target that receives it (`ibv_wr_set_xrc_srqn`,
    /// `wr.qp_type.xrc.remote_srqn`).
    pub xrc_srqn: Option<u32>,
}

/// What a send queue accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SqLimits {
    /// The QP's type.
    pub qp_type: QpType,
    /// WQE stride in bytes.
    pub stride: usize,
    /// SGEs per WQE.
    pub max_sge: u32,
    /// Inline bytes per WQE.
    pub max_inline: u32,
}

/// Writes the WQE for `req` into `out` (one stride slot, zeroed first) and returns the bytes
/// it uses (header plus SGEs or padded inline data). A request the QP cannot carry is refused
/// with the reason; `out` is then left zeroed.
pub fn build_send_wqe(
    req: &SendRequest<'_>,
    limits: &SqLimits,
    out: &mut [u8],
) -> Result<usize, BuildError> {
    out.fill(0);
    let ud = limits.qp_type.is_datagram();
    if ud && !matches!(req.op, SendOp::Send | SendOp::SendWithImm(_)) {
        return Err(BuildError::Wqe(WqeError::BadQpType));
    }
    if ud && req.ud.is_none() {
        return Err(BuildError::NoAddress);
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
    if ud && matches!(req.ud, Some(UdAddress::Av(_))) {
        flags |= WQE_FLAG_AV;
    }
    let (num_sge, inline_len) = match req.payload {
        Payload::Sges(sges) => {
            if sges.len() > limits.max_sge as usize {
                return Err(BuildError::Wqe(WqeError::BadSgeCount));
            }
            if req.op.is_atomic() && (sges.len() != 1 || sges[0].length < 8) {
                return Err(BuildError::AtomicOperand);
            }
            if req.op.takes_no_data() && !sges.is_empty() {
                return Err(BuildError::AtomicOperand);
            }
            (sges.len(), 0)
        }
        Payload::Inline(pieces) => {
            if !matches!(
                req.op,
                SendOp::Send
                    | SendOp::SendWithImm(_)
                    | SendOp::SendWithInv(_)
                    | SendOp::Write { .. }
                    | SendOp::WriteWithImm { .. }
            ) {
                return Err(BuildError::Wqe(WqeError::BadInline));
            }
            let len = pieces
                .iter()
                .try_fold(0usize, |n, p| n.checked_add(p.len()));
            match len {
                Some(len) if len <= limits.max_inline as usize => {
                    flags |= WQE_FLAG_INLINE;
                    (0, len)
                }
                _ => return Err(BuildError::Wqe(WqeError::BadInline)),
            }
        }
    };
    let (Ok(num_sge_u8), Ok(inline_u16)) = (u8::try_from(num_sge), u16::try_from(inline_len))
    else {
        return Err(BuildError::Wqe(WqeError::BadSgeCount));
    };
    let size = send_wqe_size(u32::from(num_sge_u8), u32::from(inline_u16));
    if size > limits.stride || size > out.len() {
        return Err(BuildError::TooBig);
    }

    let imm_or_inv = match req.op {
        SendOp::SendWithImm(imm) | SendOp::WriteWithImm { imm, .. } => imm,
        SendOp::SendWithInv(key) | SendOp::LocalInv(key) => key,
        _ => 0,
    };
    #[cfg(userspace)]
    if limits.qp_type == QpType::XrcIni
        && !send_opcode_is_local(req.op.opcode())
        && req.xrc_srqn.is_none()
    {
        return Err(BuildError::NoXrcSrqn);
    }
    let ctrl = WqeCtrl {
        wr_id: req.wr_id,
        opcode: req.op.opcode(),
        flags,
        num_sge: num_sge_u8,
        inline_len: inline_u16,
        imm_or_inv,
        xrc_srqn: req.xrc_srqn.unwrap_or_default(),
        ..WqeCtrl::default()
    };
    validate_send_wqe(&ctrl, limits.qp_type, limits.stride).map_err(BuildError::Wqe)?;
    let atomic_addr = match req.op {
        SendOp::CmpSwap { remote_addr, .. }
        | SendOp::FetchAdd { remote_addr, .. }
        | SendOp::AtomicWrite { remote_addr, .. } => remote_addr,
        _ => 0,
    };
    if atomic_addr % 8 != 0 {
        return Err(BuildError::AtomicOperand);
    }
    if let SendOp::Flush {
        placement,
        level,
        length,
        ..
    } = req.op
    {
        if !flush_valid(placement, level, length) {
            return Err(BuildError::FlushOperand);
        }
    }

    let seg = match (req.op, req.ud) {
        (_, Some(UdAddress::Av(av))) if ud => av.encode(),
        #[cfg(userspace)]
        (_, Some(UdAddress::Handle(seg))) if ud => seg.encode(),
        (
            SendOp::Write { remote_addr, rkey }
            | SendOp::WriteWithImm {
                remote_addr, rkey, ..
            }
            | SendOp::Read { remote_addr, rkey },
            _,
        ) => RdmaSeg {
            remote_addr,
            rkey,
            ..RdmaSeg::default()
        }
        .encode(),
        (
            SendOp::CmpSwap {
                remote_addr,
                rkey,
                compare,
                swap,
            },
            _,
        ) => AtomicSeg {
            remote_addr,
            rkey,
            compare_add: compare,
            swap,
            ..AtomicSeg::default()
        }
        .encode(),
        (
            SendOp::FetchAdd {
                remote_addr,
                rkey,
                add,
            },
            _,
        ) => AtomicSeg {
            remote_addr,
            rkey,
            compare_add: add,
            ..AtomicSeg::default()
        }
        .encode(),
        (SendOp::RegMr(reg), _) => reg.encode(),
        (SendOp::BindMw(bind), _) => bind.encode(),
        (
            SendOp::AtomicWrite {
                remote_addr,
                rkey,
                value,
            },
            _,
        ) => AtomicWriteSeg {
            remote_addr,
            rkey,
            value,
            ..AtomicWriteSeg::default()
        }
        .encode(),
        (
            SendOp::Flush {
                remote_addr,
                rkey,
                length,
                placement,
                level,
            },
            _,
        ) => FlushSeg {
            remote_addr,
            rkey,
            length,
            placement,
            level,
            ..FlushSeg::default()
        }
        .encode(),
        _ => [0; RdmaSeg::SIZE],
    };

    let Some((head, body)) = out
        .get_mut(..size)
        .map(|wqe| wqe.split_at_mut(WQE_HEADER_SIZE))
    else {
        return Err(BuildError::TooBig);
    };
    let (ctrl_bytes, seg_bytes) = head.split_at_mut(WQE_SEG_OFFSET);
    ctrl_bytes.copy_from_slice(&ctrl.encode());
    seg_bytes.copy_from_slice(&seg);
    match req.payload {
        Payload::Sges(sges) => {
            write_sges(sges, body)?;
        }
        Payload::Inline(pieces) => {
            let mut at = 0;
            for piece in pieces {
                let end = at + piece.len();
                // The pieces add up to `inline_len`, which `size` covers.
                body.get_mut(at..end)
                    .ok_or(BuildError::TooBig)?
                    .copy_from_slice(piece);
                at = end;
            }
        }
    }
    Ok(size)
}

/// Writes a receive WQE (RQ or SRQ) into `out` (one stride slot, zeroed first) and returns
/// the bytes used; refused if the SGEs exceed `max_sge` or the stride.
pub fn build_recv_wqe(
    wr_id: u64,
    sges: &[Sge],
    max_sge: u32,
    out: &mut [u8],
) -> Result<usize, BuildError> {
    out.fill(0);
    let num_sge = u8::try_from(sges.len()).map_err(|_| BuildError::Wqe(WqeError::BadSgeCount))?;
    if u32::from(num_sge) > max_sge {
        return Err(BuildError::Wqe(WqeError::BadSgeCount));
    }
    let header = RecvWqeHeader {
        wr_id,
        num_sge,
        ..RecvWqeHeader::default()
    };
    validate_recv_wqe(&header, out.len()).map_err(BuildError::Wqe)?;
    let size = RecvWqeHeader::SIZE + sges.len() * Sge::SIZE;
    let Some((head, body)) = out
        .get_mut(..size)
        .map(|wqe| wqe.split_at_mut(RecvWqeHeader::SIZE))
    else {
        return Err(BuildError::TooBig);
    };
    head.copy_from_slice(&header.encode());
    write_sges(sges, body)?;
    Ok(size)
}

/// Writes `sges` one after the other at the start of `body`.
fn write_sges(sges: &[Sge], body: &mut [u8]) -> Result<(), BuildError> {
    for (i, sge) in sges.iter().enumerate() {
        let at = i * Sge::SIZE;
        body.get_mut(at..at + Sge::SIZE)
            .ok_or(BuildError::TooBig)?
            .copy_from_slice(&sge.encode());
    }
    Ok(())
}
