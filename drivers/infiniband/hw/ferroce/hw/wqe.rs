// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Work queue entries: send and receive layouts, opcodes, flags and their validation.

use super::*;

hw_codes! {
    /// Returns a short name for a send WQE opcode, for messages and traces.
    #[cfg(userspace)] // The NIC's trace names them.
    fn wr_opcode_name(u8);
    {
        /// SEND.
        WR_SEND = 0x00 => "send",
        /// SEND with immediate.
        WR_SEND_WITH_IMM = 0x01 => "send_with_imm",
        /// SEND with invalidate (`imm_or_inv` = rkey to invalidate at the responder).
        WR_SEND_WITH_INV = 0x02 => "send_with_inv",
        /// RDMA WRITE.
        WR_RDMA_WRITE = 0x03 => "rdma_write",
        /// RDMA WRITE with immediate.
        WR_RDMA_WRITE_WITH_IMM = 0x04 => "rdma_write_with_imm",
        /// RDMA READ.
        WR_RDMA_READ = 0x05 => "rdma_read",
        /// Atomic compare and swap (8 bytes, one SGE of 8 bytes receives the original value).
        WR_ATOMIC_CMP_SWAP = 0x06 => "atomic_cmp_swap",
        /// Atomic fetch and add.
        WR_ATOMIC_FETCH_ADD = 0x07 => "atomic_fetch_add",
        /// Fast registration of an MR ([`RegMrSeg`]).
        WR_REG_MR = 0x08 => "reg_mr",
        /// Local invalidate (`imm_or_inv` = key, of an MR or a type 2 memory window).
        WR_LOCAL_INV = 0x09 => "local_inv",
        /// Bind a memory window to part of an MR ([`BindMwSeg`]).
        WR_BIND_MW = 0x0a => "bind_mw",
        /// Atomic write (IBTA 1.5): an 8-byte store at an 8-byte aligned remote address, in one
        /// piece ([`AtomicWriteSeg`]; no SGEs).
        WR_ATOMIC_WRITE = 0x0b => "atomic_write",
        /// Flush (IBTA 1.5): makes earlier writes to a remote range or MR globally visible or
        /// persistent ([`FlushSeg`]; no SGEs).
        WR_FLUSH = 0x0c => "flush",
    }
}

// Flush placement types (`FlushSeg::placement`, bits; the FETH's PLT and verbs'
// `ibv_placement_type`).
/// Global visibility.
pub const FLUSH_GLOBAL: u8 = 1 << 0;
/// Persistence.
pub const FLUSH_PERSISTENT: u8 = 1 << 1;
// Flush selectivity (`FlushSeg::level`; the FETH's SEL and verbs' `ibv_selectivity_level`).
/// The range `[remote_addr, remote_addr + length)`.
#[cfg(userspace)] // Kernel ULPs post no FLUSH.
pub const FLUSH_RANGE: u8 = 0;
/// The whole MR the rkey names (`remote_addr` and `length` are not used).
pub const FLUSH_MR: u8 = 1;

// WQE flags.
/// Generate a CQE.
pub const WQE_FLAG_SIGNALED: u8 = 1 << 0;
/// Solicited event at the responder.
pub const WQE_FLAG_SOLICITED: u8 = 1 << 1;
/// Wait for prior RDMA READ / atomic to complete.
pub const WQE_FLAG_FENCE: u8 = 1 << 2;
/// Payload is inline after the header (`inline_len` bytes) instead of SGEs.
pub const WQE_FLAG_INLINE: u8 = 1 << 3;
/// The operation segment is a [`UdAvSeg`] (the address vector itself) instead of a [`UdSeg`]
/// (an AH handle). UD and GSI QPs only; on other QP types the WQE is malformed
/// ([`WqeError::BadQpType`]).
pub const WQE_FLAG_AV: u8 = 1 << 4;

hw_layout! {
    /// Control segment: the first 24 bytes of every send WQE.
    pub struct WqeCtrl(24) {
        /// Returned in the CQE.
        pub wr_id: u64,
        /// `WR_*`.
        pub opcode: u8,
        /// `WQE_FLAG_*`.
        pub flags: u8,
        /// Number of [`Sge`]s after the header (0 with `WQE_FLAG_INLINE`).
        pub num_sge: u8,
        /// Reserved, zero.
        pub rsvd0: u8,
        /// Inline payload length with `WQE_FLAG_INLINE` (≤ `MAX_INLINE`).
        pub inline_len: u16,
        /// Reserved, zero.
        pub rsvd1: u16,
        /// Immediate data (big-endian on the wire, stored as given) or key to invalidate.
        pub imm_or_inv: u32,
        /// XRC_INI QPs: the XRC SRQ at the target that the request names (its XRCETH, 24
        /// bits); wire operations need one. Ignored on other QP types and by local operations.
        pub xrc_srqn: u32,
    }
}

hw_layout! {
    /// Operation segment of RDMA WRITE / READ (40 bytes after the control segment).
    pub struct RdmaSeg(40) {
        /// Remote virtual address.
        pub remote_addr: u64,
        /// Remote key.
        pub rkey: u32,
        /// Reserved, zero.
        pub rsvd0: u32,
        /// Reserved, zero.
        pub rsvd1: [u8; 24],
    }
}

hw_layout! {
    /// Operation segment of atomics.
    pub struct AtomicSeg(40) {
        /// Remote virtual address (8-byte aligned).
        pub remote_addr: u64,
        /// Remote key.
        pub rkey: u32,
        /// Reserved, zero.
        pub rsvd0: u32,
        /// Compare value (CMP_SWAP) or addend (FETCH_ADD).
        pub compare_add: u64,
        /// Swap value (CMP_SWAP).
        pub swap: u64,
        /// Reserved, zero.
        pub rsvd1: u64,
    }
}

hw_layout! {
    /// Operation segment of ATOMIC_WRITE.
    pub struct AtomicWriteSeg(40) {
        /// Remote virtual address (8-byte aligned).
        pub remote_addr: u64,
        /// Remote key.
        pub rkey: u32,
        /// Reserved, zero.
        pub rsvd0: u32,
        /// The 8 bytes stored, as they are to be in remote memory.
        pub value: [u8; 8],
        /// Reserved, zero.
        pub rsvd1: [u8; 16],
    }
}

hw_layout! {
    /// Operation segment of FLUSH.
    pub struct FlushSeg(40) {
        /// Remote virtual address ([`FLUSH_RANGE`]).
        pub remote_addr: u64,
        /// Remote key.
        pub rkey: u32,
        /// Reserved, zero.
        pub rsvd0: u32,
        /// Bytes ([`FLUSH_RANGE`]; at most 2^31).
        pub length: u64,
        /// `FLUSH_GLOBAL` and/or `FLUSH_PERSISTENT` (at least one).
        pub placement: u8,
        /// `FLUSH_RANGE` or `FLUSH_MR`.
        pub level: u8,
        /// Reserved, zero.
        pub rsvd1: [u8; 14],
    }
}

hw_layout! {
    /// Operation segment of UD sends (also on the GSI QP).
    pub struct UdSeg(40) {
        /// Address handle.
        pub ah: u32,
        /// Destination QPN.
        pub remote_qpn: u32,
        /// Q_Key.
        pub remote_qkey: u32,
        /// Reserved, zero.
        pub rsvd0: u32,
        /// Reserved, zero.
        pub rsvd1: [u8; 24],
    }
}

hw_layout! {
    /// Operation segment of UD sends with [`WQE_FLAG_AV`]: the address vector inline, checked
    /// as `CMD_CREATE_AH` checks an AH (no AH object is needed, so none has to be created in
    /// atomic context).
    pub struct UdAvSeg(40) {
        /// Destination GID.
        pub dgid: [u8; 16],
        /// Destination (next hop) MAC.
        pub dmac: [u8; 6],
        /// VLAN ID or [`VLAN_NONE`], for the record: the device sends with the VLAN of the
        /// source GID's entry (`CMD_SET_GID`), so that a process cannot pick one.
        pub vlan: u16,
        /// Destination QPN.
        pub remote_qpn: u32,
        /// Q_Key.
        pub remote_qkey: u32,
        /// Flow label (20 bits, [`FLOW_LABEL_MASK`]; upper bits zero).
        pub flow_label: u32,
        /// Source GID index (must name a valid GID table entry).
        pub sgid_index: u8,
        /// Hop limit / TTL.
        pub hop_limit: u8,
        /// Traffic class.
        pub traffic_class: u8,
        /// Reserved, zero.
        pub rsvd: u8,
    }
}

hw_layout! {
    /// Operation segment of REG_MR (fast registration).
    pub struct RegMrSeg(40) {
        /// New I/O virtual address.
        pub iova: u64,
        /// New length.
        pub length: u64,
        /// Page list: `page_count` u64 page addresses.
        pub pbl_addr: u64,
        /// Key (index must name a fast-reg MR; the variant byte becomes the new key byte).
        pub key: u32,
        /// `ACCESS_*`.
        pub access: u32,
        /// Number of pages (≤ the MR's `max_pages`).
        pub page_count: u32,
        /// log2 of the page size.
        pub log_page_size: u8,
        /// Reserved, zero.
        pub rsvd: [u8; 3],
    }
}

hw_layout! {
    /// Operation segment of BIND_MW: the window `mw_key` names (by index) gets the key
    /// `mw_key` (its variant byte is the new key byte) and grants `access` to
    /// `[addr, addr + length)` of the MR `mr_key`, which must allow binds
    /// ([`ACCESS_MW_BIND`]) and hold the range; remote write or atomic rights need the MR's
    /// local write. A type 1 window with `length` 0 is unbound; a type 2 window must be
    /// unbound, and is bound to the QP that posts the WQE.
    pub struct BindMwSeg(40) {
        /// First byte of the window (an iova of the MR).
        pub addr: u64,
        /// Bytes.
        pub length: u64,
        /// The window's new key.
        pub mw_key: u32,
        /// The MR's key.
        pub mr_key: u32,
        /// Rights granted (`MW_ACCESS_MASK` bits).
        pub access: u32,
        /// Reserved, zero.
        pub rsvd: [u8; 12],
    }
}

/// Size of the send WQE header (control + operation segment); SGEs or inline data follow.
pub const WQE_HEADER_SIZE: usize = WqeCtrl::SIZE + RdmaSeg::SIZE;
/// Offset of the operation segment.
pub const WQE_SEG_OFFSET: usize = WqeCtrl::SIZE;
const _: () = assert!(WQE_HEADER_SIZE == 64);
// The address vector replaces the AH handle segment exactly.
const _: () = assert!(UdAvSeg::SIZE == 40 && UdAvSeg::SIZE == UdSeg::SIZE);

hw_layout! {
    /// Scatter/gather entry.
    pub struct Sge(16) {
        /// Address (an iova of the MR `lkey`).
        pub addr: u64,
        /// Length in bytes.
        pub length: u32,
        /// Local key.
        pub lkey: u32,
    }
}

hw_layout! {
    /// Receive WQE header (RQ and SRQ); SGEs follow.
    pub struct RecvWqeHeader(16) {
        /// Returned in the CQE.
        pub wr_id: u64,
        /// Number of SGEs.
        pub num_sge: u8,
        /// Reserved, zero.
        pub rsvd: [u8; 7],
    }
}

/// Largest WQE (send or receive) in bytes.
pub const MAX_WQE_SIZE: usize = 1 << MAX_LOG_WQE_STRIDE;
const _: () = assert!(MAX_WQE_SIZE <= PUSH_WINDOW_SIZE);

/// Bytes a send WQE needs: header plus SGEs or padded inline data.
pub const fn send_wqe_size(num_sge: u32, inline_len: u32) -> usize {
    let sges = num_sge as usize * Sge::SIZE;
    let inline = (inline_len as usize).div_ceil(16) * 16;
    WQE_HEADER_SIZE + if sges > inline { sges } else { inline }
}

/// Whether a FLUSH asks for something the device does: a placement type and no undefined
/// one, a defined level, and for `FLUSH_RANGE` at most 2^31 bytes.
pub const fn flush_valid(placement: u8, level: u8, length: u64) -> bool {
    placement != 0
        && placement & !(FLUSH_GLOBAL | FLUSH_PERSISTENT) == 0
        && level <= FLUSH_MR
        && (level == FLUSH_MR || length <= 1 << 31)
}

/// Whether `opcode` is a defined send opcode.
pub const fn send_opcode_valid(opcode: u8) -> bool {
    opcode <= WR_FLUSH
}

/// Whether a send opcode is allowed on a QP type.
pub const fn send_opcode_allowed(qp_type: QpType, opcode: u8) -> bool {
    match qp_type {
        QpType::Rc | QpType::XrcIni => send_opcode_valid(opcode),
        // IBA table 38: UC has SEND and RDMA WRITE (with immediate), no invalidate.
        QpType::Uc => matches!(
            opcode,
            WR_SEND
                | WR_SEND_WITH_IMM
                | WR_RDMA_WRITE
                | WR_RDMA_WRITE_WITH_IMM
                | WR_REG_MR
                | WR_LOCAL_INV
                | WR_BIND_MW
        ),
        QpType::Ud | QpType::Gsi => matches!(opcode, WR_SEND | WR_SEND_WITH_IMM),
        // An XRC_TGT QP has no send queue.
        QpType::XrcTgt => false,
    }
}

/// Whether a send opcode is a local operation (executed by the device, nothing on the wire).
pub const fn send_opcode_is_local(opcode: u8) -> bool {
    matches!(opcode, WR_REG_MR | WR_LOCAL_INV | WR_BIND_MW)
}

/// Why a WQE is malformed (`WQE_ERR_*` as an enum).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(
    clippy::enum_variant_names,
    reason = "each says what is bad, as the WQE_ERR_BAD_* codes do"
)]
pub enum WqeError {
    /// Unknown opcode.
    BadOpcode,
    /// Opcode not valid for the QP type.
    BadQpType,
    /// Too many SGEs.
    BadSgeCount,
    /// Inline length too long or does not fit.
    BadInline,
    /// An XRC_INI request names no valid XRC SRQ number (more than 24 bits).
    BadXrcSrqn,
}

impl WqeError {
    /// The `WQE_ERR_*` code.
    #[cfg(userspace)] // The device reports the subtype.
    pub const fn code(&self) -> u8 {
        match self {
            WqeError::BadOpcode => WQE_ERR_BAD_OPCODE,
            WqeError::BadQpType => WQE_ERR_BAD_QP_TYPE,
            WqeError::BadSgeCount => WQE_ERR_BAD_SGE_COUNT,
            WqeError::BadInline => WQE_ERR_BAD_INLINE,
            WqeError::BadXrcSrqn => WQE_ERR_BAD_XRC_SRQN,
        }
    }
}

/// Validates a send WQE's control segment against its QP type and stride.
pub const fn validate_send_wqe(
    ctrl: &WqeCtrl,
    qp_type: QpType,
    stride: usize,
) -> Result<(), WqeError> {
    if !send_opcode_valid(ctrl.opcode) {
        return Err(WqeError::BadOpcode);
    }
    if !send_opcode_allowed(qp_type, ctrl.opcode) {
        return Err(WqeError::BadQpType);
    }
    if ctrl.flags & WQE_FLAG_AV != 0 && !qp_type.is_datagram() {
        return Err(WqeError::BadQpType);
    }
    if matches!(qp_type, QpType::XrcIni)
        && !send_opcode_is_local(ctrl.opcode)
        && ctrl.xrc_srqn > QPN_MASK
    {
        return Err(WqeError::BadXrcSrqn);
    }
    if ctrl.flags & WQE_FLAG_INLINE != 0 {
        if ctrl.num_sge != 0
            || ctrl.inline_len as u32 > MAX_INLINE
            || send_wqe_size(0, ctrl.inline_len as u32) > stride
        {
            return Err(WqeError::BadInline);
        }
    } else if ctrl.num_sge as u32 > MAX_SGE || send_wqe_size(ctrl.num_sge as u32, 0) > stride {
        return Err(WqeError::BadSgeCount);
    }
    Ok(())
}

/// Validates a receive WQE header against its stride.
pub const fn validate_recv_wqe(header: &RecvWqeHeader, stride: usize) -> Result<(), WqeError> {
    if header.num_sge as u32 > MAX_SGE
        || RecvWqeHeader::SIZE + header.num_sge as usize * Sge::SIZE > stride
    {
        return Err(WqeError::BadSgeCount);
    }
    Ok(())
}

/// SGE `i` of a WQE whose SGEs start at `first` in `wqe`.
#[cfg(userspace)] // The device reads SGEs.
pub fn wqe_sge(wqe: &[u8], first: usize, i: usize) -> Option<Sge> {
    Sge::read_from(wqe.get(first.checked_add(i.checked_mul(Sge::SIZE)?)?..)?)
}
