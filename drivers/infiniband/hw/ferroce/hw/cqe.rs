// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Completion queue entries: layout, opcodes, flags and work completion status.

use super::*;
use core::mem::offset_of;

hw_layout! {
    /// Completion queue entry (64 bytes).
    pub struct Cqe(64) {
        /// The WQE's `wr_id`.
        pub wr_id: u64,
        /// Bytes transferred (receives, READ, atomics).
        pub byte_len: u32,
        /// Immediate data or invalidated key (see `flags`).
        pub imm_or_inv: u32,
        /// Local QP number.
        pub qpn: u32,
        /// Source QP (UD / GSI receives).
        pub src_qpn: u32,
        /// Index of the completed WQE in its ring.
        pub wqe_index: u16,
        /// `CQE_OP_*`.
        pub opcode: u8,
        /// `WC_*` status.
        pub status: u8,
        /// `CQE_FLAG_*`.
        pub flags: u8,
        /// Vendor error detail.
        pub vendor_err: u8,
        /// VLAN of a UD receive, or [`VLAN_NONE`].
        pub vlan: u16,
        /// Source MAC of a UD receive.
        pub smac: [u8; 6],
        /// `NET_HDR_*` of a UD receive.
        pub network_hdr_type: u8,
        /// Reserved.
        pub rsvd0: u8,
        /// P_Key index.
        pub pkey_index: u16,
        /// Reserved.
        pub rsvd1: u16,
        /// The XRC SRQ a receive with [`CQE_FLAG_XRC`] took its WQE from (`wqe_index` is
        /// its slot there, `qpn` the XRC_TGT QP that received the message).
        pub srqn: u32,
        /// Reserved.
        pub rsvd2: [u8; 12],
        /// Reserved.
        pub rsvd3: u16,
        /// Reserved.
        pub rsvd4: u8,
        /// Owner bit (bit 0), written last; see [`Ring::owner`].
        pub owner: u8,
    }
}

/// Offset of the CQE owner byte: the last.
pub const CQE_OWNER_OFFSET: usize = 63;
const _: () = assert!(CQE_OWNER_OFFSET == Cqe::SIZE - 1);
/// Offset of the EQE owner byte.
pub const EQE_OWNER_OFFSET: usize = 15;
/// Offset of the command completion owner byte.
pub const CMD_COMPLETION_OWNER_OFFSET: usize = 31;
const _: () = assert!(offset_of!(Cqe, owner) == CQE_OWNER_OFFSET);
const _: () = assert!(offset_of!(Eqe, owner) == EQE_OWNER_OFFSET);
const _: () = assert!(offset_of!(CmdCompletion, owner) == CMD_COMPLETION_OWNER_OFFSET);

hw_codes! {
    /// Returns a short name for a CQE opcode, for messages and traces.
    #[cfg(userspace)] // The NIC's trace names them.
    fn cqe_opcode_name(u8);
    {
        /// SEND completed.
        CQE_OP_SEND = 0x00 => "send",
        /// RDMA WRITE completed.
        CQE_OP_RDMA_WRITE = 0x01 => "rdma_write",
        /// RDMA READ completed.
        CQE_OP_RDMA_READ = 0x02 => "rdma_read",
        /// Compare and swap completed.
        CQE_OP_CMP_SWAP = 0x03 => "cmp_swap",
        /// Fetch and add completed.
        CQE_OP_FETCH_ADD = 0x04 => "fetch_add",
        /// REG_MR completed.
        CQE_OP_REG_MR = 0x05 => "reg_mr",
        /// LOCAL_INV completed.
        CQE_OP_LOCAL_INV = 0x06 => "local_inv",
        /// BIND_MW completed.
        CQE_OP_BIND_MW = 0x07 => "bind_mw",
        /// Atomic write.
        CQE_OP_ATOMIC_WRITE = 0x08 => "atomic_write",
        /// Flush.
        CQE_OP_FLUSH = 0x09 => "flush",
        /// Receive completed (SEND, SEND_WITH_IMM, SEND_WITH_INV).
        CQE_OP_RECV = 0x80 => "recv",
        /// Receive of an RDMA WRITE with immediate.
        CQE_OP_RECV_RDMA_WITH_IMM = 0x81 => "recv_rdma_with_imm",
        /// Not a completion: the last CQE of a ring the CQ left (`CMD_RESIZE_CQ`); the CQE of its
        /// index is in the new ring.
        #[cfg(userspace)] // Kernel CQs are not resized: in one, it is an undefined opcode.
        CQE_OP_RESIZE = 0x7f => "resize",
    }
}

/// The CQE opcode for a completed send WQE opcode.
pub const fn cqe_opcode_for_send(wr_opcode: u8) -> u8 {
    match wr_opcode {
        WR_RDMA_WRITE | WR_RDMA_WRITE_WITH_IMM => CQE_OP_RDMA_WRITE,
        WR_RDMA_READ => CQE_OP_RDMA_READ,
        WR_ATOMIC_CMP_SWAP => CQE_OP_CMP_SWAP,
        WR_ATOMIC_FETCH_ADD => CQE_OP_FETCH_ADD,
        WR_REG_MR => CQE_OP_REG_MR,
        WR_LOCAL_INV => CQE_OP_LOCAL_INV,
        WR_BIND_MW => CQE_OP_BIND_MW,
        WR_ATOMIC_WRITE => CQE_OP_ATOMIC_WRITE,
        WR_FLUSH => CQE_OP_FLUSH,
        _ => CQE_OP_SEND,
    }
}

/// What the poster of a WQE remembers of it, to check the CQE the device writes for it: the
/// driver and the provider keep one per ring slot and trust no CQE that disagrees.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Posted {
    /// The consumer's `wr_id` (the CQE must carry it back unchanged).
    pub wr_id: u64,
    /// The `CQE_OP_*` a successful completion has (any receive opcode for a receive).
    pub opcode: u8,
    /// Most bytes a successful completion can report: the payload of a send, READ or atomic
    /// (8), the buffers of a receive.
    pub len: u32,
    /// Whether the WQE gets a CQE when it succeeds (a receive always does). The device
    /// completes a queue in order, so a CQE that goes past a signaled WQE still waiting for
    /// its own means that one was lost.
    pub signaled: bool,
}

/// How a CQE disagrees with the WQE it claims to complete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CqeMismatch {
    /// Not the `wr_id` that was posted.
    WrId,
    /// An opcode of another kind of work request.
    Opcode,
    /// More bytes than the WQE had room for.
    ByteLen,
}

impl Posted {
    /// A send queue WQE built from `req`.
    pub fn send(req: &SendRequest<'_>) -> Self {
        let payload = match req.payload {
            Payload::Sges(sges) => sges.iter().fold(0u32, |n, s| n.saturating_add(s.length)),
            Payload::Inline(pieces) => pieces.iter().fold(0u32, |n, p| {
                n.saturating_add(u32::try_from(p.len()).unwrap_or(u32::MAX))
            }),
        };
        let len = match req.op {
            SendOp::CmpSwap { .. } | SendOp::FetchAdd { .. } => 8,
            _ => payload,
        };
        Self {
            wr_id: req.wr_id,
            opcode: cqe_opcode_for_send(req.op.opcode()),
            len,
            signaled: req.signaled,
        }
    }

    /// A receive WQE with buffers `sges` (in an RQ or an SRQ).
    pub fn recv(wr_id: u64, sges: &[Sge]) -> Self {
        Self {
            wr_id,
            opcode: CQE_OP_RECV,
            len: sges.iter().fold(0u32, |n, s| n.saturating_add(s.length)),
            signaled: true,
        }
    }

    /// Whether `cqe` can be the completion of this WQE. Error completions (flushes among them)
    /// carry the `wr_id` but no meaningful opcode or length.
    pub fn check(&self, cqe: &Cqe) -> Result<(), CqeMismatch> {
        if cqe.wr_id != self.wr_id {
            return Err(CqeMismatch::WrId);
        }
        if cqe.status != WcStatus::Success as u8 {
            return Ok(());
        }
        let opcode_ok = if self.opcode & CQE_OP_RECV != 0 {
            matches!(cqe.opcode, CQE_OP_RECV | CQE_OP_RECV_RDMA_WITH_IMM)
        } else {
            cqe.opcode == self.opcode
        };
        if !opcode_ok {
            return Err(CqeMismatch::Opcode);
        }
        // An RDMA WRITE with immediate consumes a receive for its immediate data alone: its
        // length is the WRITE's, into memory its rkey names, which the receive's buffers (often
        // none: RTRS posts receives without SGEs) do not bound.
        if cqe.opcode != CQE_OP_RECV_RDMA_WITH_IMM && cqe.byte_len > self.len {
            return Err(CqeMismatch::ByteLen);
        }
        Ok(())
    }
}

/// Removes the CQEs that `remove` picks from the CQEs written after consumer index `ci` (as
/// mlx5's `cq_clean`, for a QP just destroyed): the CQEs after them move up over the gap, so the
/// consumer index moves past it by the number returned. `read(i)` is the CQE at index `i` if the
/// device wrote it in this pass (its owner byte says so); `write_body(i, body)` writes the bytes
/// before the owner byte at index `i`, which holds a CQE of this pass already and keeps its
/// owner byte. The device must write no CQE `remove` picks meanwhile; it may append others.
pub fn clean_cqes(
    ring: Ring,
    ci: u16,
    mut read: impl FnMut(u16) -> Option<[u8; CQE_SIZE]>,
    mut remove: impl FnMut(&Cqe) -> bool,
    mut write_body: impl FnMut(u16, &[u8]),
) -> u16 {
    let mut end = ci;
    while ring.used(end, ci) < ring.size() && read(end).is_some() {
        end = end.wrapping_add(1);
    }
    let mut freed: u16 = 0;
    let mut index = end;
    while index != ci {
        index = index.wrapping_sub(1);
        let Some(bytes) = read(index) else {
            break;
        };
        if remove(&Cqe::decode(&bytes)) {
            freed += 1;
        } else if freed > 0 {
            write_body(index.wrapping_add(freed), &bytes[..CQE_OWNER_OFFSET]);
        }
    }
    freed
}

// CQE flags.
/// `imm_or_inv` holds immediate data.
pub const CQE_FLAG_WITH_IMM: u8 = 1 << 0;
/// `imm_or_inv` holds an invalidated key.
pub const CQE_FLAG_WITH_INV: u8 = 1 << 1;
/// A GRH (or IP header image) precedes the payload in the receive buffer (UD / GSI).
pub const CQE_FLAG_GRH: u8 = 1 << 2;
/// The sender requested a solicited event.
#[cfg(userspace)] // The provider reports solicited events.
pub const CQE_FLAG_SOLICITED: u8 = 1 << 3;
/// A receive completion of an XRC SRQ (`srqn`): it goes to the SRQ's CQ, not the QP's.
#[cfg(userspace)] // Kernel ULPs have no XRC.
pub const CQE_FLAG_XRC: u8 = 1 << 4;

/// Network header type of a UD receive: RoCE v1 (GRH).
pub const NET_HDR_GRH: u8 = 0;
/// RoCE v2 over IPv4.
pub const NET_HDR_IPV4: u8 = 1;
/// RoCE v2 over IPv6.
pub const NET_HDR_IPV6: u8 = 2;

hw_enum! {
    /// Work completion status (IB `ib_wc_status` values).
    pub enum WcStatus {
        /// Success.
        Success = 0,
        /// Local length error.
        LocLenErr = 1,
        /// Local QP operation error.
        LocQpOpErr = 2,
        /// Local protection error.
        LocProtErr = 4,
        /// Flushed: the QP is in error.
        WrFlushErr = 5,
        /// A memory window bind failed.
        MwBindErr = 6,
        /// Bad response.
        BadRespErr = 7,
        /// Local access error.
        LocAccessErr = 8,
        /// Remote invalid request.
        RemInvReqErr = 9,
        /// Remote access error.
        RemAccessErr = 10,
        /// Remote operation error.
        RemOpErr = 11,
        /// Transport retries exceeded.
        RetryExcErr = 12,
        /// RNR retries exceeded.
        RnrRetryExcErr = 13,
        /// Fatal error.
        FatalErr = 19,
        /// General error.
        GeneralErr = 21,
    }
}

/// Size of an EQE ring entry.
pub const EQE_SIZE: usize = Eqe::SIZE;
/// Size of a CQE ring entry.
pub const CQE_SIZE: usize = Cqe::SIZE;
