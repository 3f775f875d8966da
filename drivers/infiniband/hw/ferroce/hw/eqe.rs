// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Event queue entries: layout, event types and WQE error details.

hw_layout! {
    /// Event queue entry (16 bytes).
    pub struct Eqe(16) {
        /// `EVENT_*`.
        pub event_type: u8,
        /// Event-specific detail (`WQE_ERR_*` for QP errors).
        pub subtype: u8,
        /// Third datum: the pages of a page fault.
        pub data2: u16,
        /// First datum: CQN, QPN, SRQN, token, fatal code, context, MR key.
        pub data0: u32,
        /// Second datum: command index, raw doorbell value, first page of a page fault.
        pub data1: u32,
        /// Reserved.
        pub rsvd1: u16,
        /// Reserved.
        pub rsvd2: u8,
        /// Owner bit (bit 0), written last.
        pub owner: u8,
    }
}

hw_enum! {
    /// Event types of an [`Eqe`].
    pub enum EventType {
        /// CQ `data0` has a completion event (completion EQs).
        Completion = 0x01,
        /// Command `data0` (token) at index `data1` completed (command EQ).
        CmdDone = 0x02,
        /// QP `data0` hit a fatal error (malformed WQE, DMA error) and moved to ERR.
        QpFatal = 0x10,
        /// QP `data0`: invalid request received (responder).
        QpReqErr = 0x11,
        /// QP `data0`: access violation (responder).
        QpAccessErr = 0x12,
        /// QP `data0`: last WQE reached (QP with SRQ in ERR).
        QpLastWqeReached = 0x13,
        /// QP `data0`: send queue drained (SQD).
        SqDrained = 0x14,
        /// QP `data0`: communication established.
        CommEst = 0x15,
        /// On-demand MR `data0` (its key) was accessed where pages `data1 ..
        /// data1 + data2` of its page table are not present (or not writable, for an access
        /// that writes: `subtype` [`PAGE_FAULT_WRITE`]). The access waits; the driver answers
        /// with `CMD_UPDATE_MR_PAGES`. Raised once per MR until that command (or again after
        /// [`PAGE_FAULT_REPEAT_MS`] without one).
        PageFault = 0x16,
        /// CQ `data0` overran or hit a DMA error; it is in error.
        CqError = 0x20,
        /// SRQ `data0` fell below its limit (disarms the limit).
        SrqLimit = 0x30,
        /// SRQ `data0` hit an error.
        SrqErr = 0x31,
        /// Port became active.
        PortActive = 0x40,
        /// Port went down.
        PortDown = 0x41,
        /// The device is in fatal state, `data0` = `FATAL_*`.
        DeviceFatal = 0x50,
        /// A doorbell on context `data0` was rejected; `data1` = raw value.
        DoorbellError = 0x51,
    }
}

/// `Eqe::subtype` of `EventType::PageFault`: the access writes (the pages must be mapped
/// writable).
pub const PAGE_FAULT_WRITE: u8 = 1 << 0;
#[cfg(userspace)] // The device bounds its faults.
/// Most pages one page fault names (`Eqe::data2`); a longer access faults again for the rest.
pub const PAGE_FAULT_MAX_PAGES: u32 = 1 << 15;
#[cfg(userspace)]
/// A page fault not answered by `CMD_UPDATE_MR_PAGES` within this many milliseconds is raised
/// again by the next access that meets it.
pub const PAGE_FAULT_REPEAT_MS: u64 = 100;

#[cfg(userspace)] // The device reports them; the driver logs the number.
pub use wqe_error::*;

/// `Eqe::subtype` of `EventType::QpFatal`.
#[cfg(userspace)]
mod wqe_error {
    /// WQE error detail: unknown opcode.
    pub const WQE_ERR_BAD_OPCODE: u8 = 1;
    /// WQE error detail: too many SGEs for the stride or the device.
    pub const WQE_ERR_BAD_SGE_COUNT: u8 = 2;
    /// WQE error detail: inline data too long.
    pub const WQE_ERR_BAD_INLINE: u8 = 3;
    /// WQE error detail: the WQE could not be read by DMA.
    pub const WQE_ERR_DMA: u8 = 4;
    /// WQE error detail: doorbell index beyond the ring.
    pub const WQE_ERR_BAD_INDEX: u8 = 5;
    /// WQE error detail: opcode not valid for the QP type.
    pub const WQE_ERR_BAD_QP_TYPE: u8 = 6;
    /// WQE error detail: an XRC_INI request's `xrc_srqn` is not a 24-bit number.
    pub const WQE_ERR_BAD_XRC_SRQN: u8 = 7;
}
