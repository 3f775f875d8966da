// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Rings and what names them: index arithmetic, doorbells, doorbell records, buffer
//! descriptors, the queue limits of this interface version and the work queue geometry.

use super::*;

// Limits implemented by this interface version (the device reports its own in the registers).
/// Largest ring `log_size` (indexes are 16 bit).
pub const MAX_LOG_QUEUE: u32 = 15;
// Indexes are free-running 16-bit counters: a ring's size is a distance between two of them.
const _: () = assert!(MAX_LOG_QUEUE < 16);
/// Maximum SGEs per WQE.
pub const MAX_SGE: u32 = 16;
/// Maximum inline payload.
pub const MAX_INLINE: u32 = 256;
/// Smallest WQE stride, log2 (one header).
pub const MIN_LOG_WQE_STRIDE: u32 = 6;
/// Largest WQE stride, log2.
pub const MAX_LOG_WQE_STRIDE: u32 = 10;
/// Smallest page size of a page list, log2.
#[cfg(userspace)] // The device checks page lists.
pub const MIN_LOG_PAGE_SIZE: u32 = 12;
/// Largest page size of a page list, log2.
#[cfg(userspace)] // The device checks page lists.
pub const MAX_LOG_PAGE_SIZE: u32 = 30;

// ---------------------------------------------------------------------------------------------
// Ring index arithmetic.
// ---------------------------------------------------------------------------------------------

/// Geometry of a ring of `1 << log_size` entries indexed by free-running 16-bit counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ring {
    log_size: u32,
}

impl Ring {
    /// Returns the ring geometry, or `None` if `log_size` exceeds `max_log`
    /// or [`MAX_LOG_QUEUE`].
    pub const fn new(log_size: u32, max_log: u32) -> Option<Self> {
        if log_size > MAX_LOG_QUEUE || log_size > max_log {
            None
        } else {
            Some(Self { log_size })
        }
    }

    /// log2 of the number of entries.
    pub const fn log_size(&self) -> u32 {
        self.log_size
    }

    /// Number of entries.
    pub const fn size(&self) -> u32 {
        1 << self.log_size
    }

    /// Number of entries, as a distance between two indexes (it fits: [`MAX_LOG_QUEUE`] is
    /// less than 16).
    #[cfg(userspace)] // The provider's SRQ.
    pub const fn span(&self) -> u16 {
        self.size() as u16
    }

    /// Slot of a free-running index.
    pub const fn slot(&self, index: u16) -> u32 {
        index as u32 & (self.size() - 1)
    }

    /// Entries between consumer `ci` and producer `pi`.
    pub const fn used(&self, pi: u16, ci: u16) -> u32 {
        pi.wrapping_sub(ci) as u32
    }

    /// Whether `index` names an entry the producer posted and the consumer has not completed:
    /// one of `ci .. pi`. A completion for any other index is not the device's to report.
    pub const fn outstanding(&self, pi: u16, ci: u16, index: u16) -> bool {
        let ahead = pi.wrapping_sub(index) as u32;
        ahead >= 1 && ahead <= self.used(pi, ci)
    }

    /// Whether no entry is outstanding.
    #[cfg(userspace)] // Checks of the device side.
    pub const fn is_empty(&self, pi: u16, ci: u16) -> bool {
        pi == ci
    }

    /// Whether all slots are outstanding.
    pub const fn is_full(&self, pi: u16, ci: u16) -> bool {
        self.used(pi, ci) >= self.size()
    }

    /// Whether a producer index `pi` is consistent with consumer `ci`: at most `size` ahead.
    pub const fn producer_valid(&self, pi: u16, ci: u16) -> bool {
        self.used(pi, ci) <= self.size()
    }

    /// Whether `new_pi` is a legal successor of `old_pi` (moves forward by at most `size`)
    /// given consumer `ci`.
    #[cfg(userspace)] // Checks of the device side.
    pub const fn advance_valid(&self, old_pi: u16, new_pi: u16, ci: u16) -> bool {
        self.used(new_pi, old_pi) <= self.size() && self.producer_valid(new_pi, ci)
    }

    /// Owner (phase) bit the producer writes into the entry at `index`: 1 on the first pass
    /// over the ring, 0 on the second, and so on. A zero-filled ring therefore holds no valid
    /// entry. Indexes wrap at 65536, a multiple of twice the ring size, so phases stay
    /// consistent across the wrap.
    pub const fn owner(&self, index: u16) -> u8 {
        (((index as u32 >> self.log_size) & 1) ^ 1) as u8
    }

    /// Whether an entry with owner bit `owner` at consumer index `ci` is valid (new).
    pub const fn entry_valid(&self, ci: u16, owner: u8) -> bool {
        (owner & 1) == self.owner(ci)
    }

    /// The owner bit that makes the entry at `index` read as not written yet: what a fresh
    /// ring taken over at a later index (`CMD_RESIZE_CQ`) holds in each slot.
    #[cfg(userspace)] // The device prepares the ring.
    pub const fn stale_owner(&self, index: u16) -> u8 {
        self.owner(index) ^ 1
    }

    /// The first index from `from` on that lands in `slot`.
    #[cfg(userspace)] // The device prepares the ring.
    pub const fn next_index_in_slot(&self, from: u16, slot: u32) -> u16 {
        let ahead = slot.wrapping_sub(self.slot(from)) & (self.size() - 1);
        from.wrapping_add(ahead as u16)
    }
}

// ---------------------------------------------------------------------------------------------
// Doorbells.
// ---------------------------------------------------------------------------------------------

/// A queue doorbell: one 32-bit MMIO write naming the queue (a local QID of the page's context)
/// and its new producer index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg(userspace)] // The provider rings them; the kernel rings regs::DB_* registers.
pub struct Doorbell {
    /// Local queue ID (translated through the context's QID table).
    pub qid: u16,
    /// New producer index.
    pub index: u16,
}

#[cfg(userspace)] // The provider rings them; the kernel rings regs::DB_* registers.
impl Doorbell {
    /// Encodes as the 32-bit register value: `qid << 16 | index`.
    pub const fn encode(&self) -> u32 {
        ((self.qid as u32) << 16) | self.index as u32
    }

    /// Decodes a register value.
    pub const fn decode(value: u32) -> Self {
        Self {
            qid: (value >> 16) as u16,
            index: value as u16,
        }
    }
}

/// CQ arm doorbell: `qid << 16 | flags`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg(userspace)] // The provider rings them; the kernel rings regs::DB_* registers.
pub struct CqArmDoorbell {
    /// Local queue ID of the CQ.
    pub qid: u16,
    /// Arm for solicited (and error) completions only; otherwise the next completion.
    pub solicited: bool,
}

/// `CqArmDoorbell` flag: solicited only.
#[cfg(userspace)] // The provider rings them; the kernel rings regs::DB_* registers.
pub const CQ_ARM_SOLICITED: u32 = 1 << 0;

#[cfg(userspace)] // The provider rings them; the kernel rings regs::DB_* registers.
impl CqArmDoorbell {
    /// Encodes as the 32-bit register value.
    pub const fn encode(&self) -> u32 {
        ((self.qid as u32) << 16) | if self.solicited { CQ_ARM_SOLICITED } else { 0 }
    }

    /// Decodes a register value.
    pub const fn decode(value: u32) -> Self {
        Self {
            qid: (value >> 16) as u16,
            solicited: value & CQ_ARM_SOLICITED != 0,
        }
    }
}

/// EQ doorbell: `arm << 31 | eqn << 16 | ci`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EqDoorbell {
    /// EQ number (< 256).
    pub eqn: u8,
    /// New consumer index.
    pub ci: u16,
    /// Arm: raise the EQ's interrupt for the next EQE (or now, if EQEs are pending).
    pub arm: bool,
}

impl EqDoorbell {
    /// Encodes as the 32-bit register value.
    pub const fn encode(&self) -> u32 {
        ((self.arm as u32) << 31) | ((self.eqn as u32) << 16) | self.ci as u32
    }

    /// Decodes a register value (bits 30:24 are reserved and ignored).
    #[cfg(userspace)] // The device decodes it.
    pub const fn decode(value: u32) -> Self {
        Self {
            eqn: (value >> 16) as u8,
            ci: value as u16,
            arm: value & (1 << 31) != 0,
        }
    }
}

hw_layout! {
    /// QP doorbell record (8-byte aligned; give it its own 64-byte line). The driver writes the
    /// producer indexes here before ringing; the device reads it by DMA (the RQ's only doorbell).
    pub struct QpDbRecord(8) {
        /// SQ producer index (low 16 bits).
        pub sq_pi: u32,
        /// RQ producer index (low 16 bits).
        pub rq_pi: u32,
    }
}

/// Offset, in the record of a QP the device polls (`QP_FLAG_DB_RECORD`), of the u32 the device
/// sets (1) while it sleeps and clears (0) when it polls again: a producer that reads non-zero
/// after writing `sq_pi` writes `DB_SQ` to wake it.
#[cfg(userspace)] // The driver's own QPs are not polled.
pub const DB_RECORD_SLEEPING_OFFSET: usize = 8;
/// Bytes of the record of a QP the device polls: [`QpDbRecord`] and the sleeping word.
#[cfg(userspace)] // As above.
pub const POLLED_DB_RECORD_SIZE: usize = 16;

hw_layout! {
    /// CQ doorbell record: the consumer index the driver has polled up to. The device reads it
    /// before writing a CQE to detect overrun.
    pub struct CqDbRecord(8) {
        /// Consumer index (low 16 bits).
        pub ci: u32,
        /// Reserved, zero.
        pub rsvd: u32,
    }
}

hw_layout! {
    /// SRQ doorbell record.
    pub struct SrqDbRecord(8) {
        /// Producer index (low 16 bits).
        pub pi: u32,
        /// Reserved, zero.
        pub rsvd: u32,
    }
}

// ---------------------------------------------------------------------------------------------
// Buffers (rings and MR page lists).
// ---------------------------------------------------------------------------------------------

hw_layout! {
    /// Where a ring or a memory region lives in host memory.
    ///
    /// `page_count == 0`: one physically contiguous buffer at `addr`.
    /// `page_count > 0`: `addr` is the address of an array of `page_count` little-endian u64
    /// page addresses, each aligned to `1 << log_page_size`.
    pub struct BufDesc(16) {
        /// Buffer or page-list address.
        pub addr: u64,
        /// Number of pages, 0 for contiguous.
        pub page_count: u32,
        /// log2 of the page size (`MIN_LOG_PAGE_SIZE..=MAX_LOG_PAGE_SIZE`), for page lists.
        pub log_page_size: u8,
        /// Reserved, zero.
        pub rsvd: [u8; 3],
    }
}

// ---------------------------------------------------------------------------------------------
// Work queue geometry.
// ---------------------------------------------------------------------------------------------

// The one set of rules for sizing SQs, RQs and SRQs, used by the driver
// for kernel queues, by the driver to check the rings a process laid out, and by the provider
// to lay them out.

/// log2 of the smallest power of two `>= n` (0 for `n <= 1`).
pub const fn log2_ceil(n: u32) -> u32 {
    if n <= 1 {
        0
    } else {
        u32::BITS - (n - 1).leading_zeros()
    }
}

/// Why a work queue geometry is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GeometryError {
    /// More WQEs than the device's deepest queue.
    TooManyWrs,
    /// More SGEs than the device or the stride allows.
    TooManySges,
    /// More inline data than the device or the stride allows.
    InlineTooLong,
    /// A stride outside `MIN_LOG_WQE_STRIDE..=MAX_LOG_WQE_STRIDE`.
    BadStride,
}

/// The device limits every work queue is bounded by (the device's registers, clamped to this
/// interface's `MAX_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WqLimits {
    /// WQEs per queue (a power of two).
    pub max_wr: u32,
    /// SGEs per WQE.
    pub max_sge: u32,
    /// Inline bytes per send WQE.
    pub max_inline: u32,
}

impl WqLimits {
    /// The limits of a device whose deepest queue has `max_wr` entries (rounded down to a power
    /// of two), clamped to this interface.
    pub const fn new(max_wr: u32, max_sge: u32, max_inline: u32) -> Self {
        let log = if max_wr == 0 {
            0
        } else {
            u32::BITS - 1 - max_wr.leading_zeros()
        };
        let log = if log > MAX_LOG_QUEUE {
            MAX_LOG_QUEUE
        } else {
            log
        };
        Self {
            max_wr: 1 << log,
            max_sge: if max_sge > MAX_SGE { MAX_SGE } else { max_sge },
            max_inline: if max_inline > MAX_INLINE {
                MAX_INLINE
            } else {
                max_inline
            },
        }
    }

    /// log2 of `max_wr`.
    pub const fn max_log_wr(&self) -> u32 {
        self.max_wr.trailing_zeros()
    }
}

/// The capacities of a queue pair's work queues: what a consumer asks for, and what the rings
/// hold (`ib_qp_cap`, `ibv_qp_cap`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WqCaps {
    /// Send WQEs.
    pub max_send_wr: u32,
    /// Receive WQEs (0 with an SRQ).
    pub max_recv_wr: u32,
    /// SGEs per send WQE.
    pub max_send_sge: u32,
    /// SGEs per receive WQE (0 with an SRQ).
    pub max_recv_sge: u32,
    /// Inline bytes per send WQE.
    pub max_inline: u32,
}

/// The shape of one work queue ring: `1 << log_size` WQEs of `1 << log_stride` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WqRing {
    /// log2 of the number of WQEs.
    pub log_size: u32,
    /// log2 of the WQE stride.
    pub log_stride: u32,
}

impl WqRing {
    /// The smallest ring holding `wr` WQEs of `wqe_bytes` bytes.
    const fn fitting(wr: u32, wqe_bytes: usize, limits: &WqLimits) -> Result<Self, GeometryError> {
        if wr > limits.max_wr {
            return Err(GeometryError::TooManyWrs);
        }
        let log_stride = if wqe_bytes > MAX_WQE_SIZE {
            return Err(GeometryError::BadStride);
        } else {
            log2_ceil(wqe_bytes as u32)
        };
        Self::new(
            log2_ceil(wr),
            if log_stride < MIN_LOG_WQE_STRIDE {
                MIN_LOG_WQE_STRIDE
            } else {
                log_stride
            },
            limits,
        )
    }

    /// A ring of the given shape, checked against the interface and `limits`.
    pub const fn new(
        log_size: u32,
        log_stride: u32,
        limits: &WqLimits,
    ) -> Result<Self, GeometryError> {
        if log_stride < MIN_LOG_WQE_STRIDE || log_stride > MAX_LOG_WQE_STRIDE {
            return Err(GeometryError::BadStride);
        }
        if log_size > limits.max_log_wr() {
            return Err(GeometryError::TooManyWrs);
        }
        Ok(Self {
            log_size,
            log_stride,
        })
    }

    /// The receive ring (RQ or SRQ) for `wr` WQEs of `sge` SGEs.
    pub const fn recv(wr: u32, sge: u32, limits: &WqLimits) -> Result<Self, GeometryError> {
        if sge > limits.max_sge {
            return Err(GeometryError::TooManySges);
        }
        Self::fitting(wr, RecvWqeHeader::SIZE + sge as usize * Sge::SIZE, limits)
    }

    /// The send ring for `wr` WQEs of `sge` SGEs or `inline` bytes.
    pub const fn send(
        wr: u32,
        sge: u32,
        inline: u32,
        limits: &WqLimits,
    ) -> Result<Self, GeometryError> {
        if sge > limits.max_sge {
            return Err(GeometryError::TooManySges);
        }
        if inline > limits.max_inline {
            return Err(GeometryError::InlineTooLong);
        }
        Self::fitting(wr, send_wqe_size(sge, inline), limits)
    }

    /// Number of WQEs.
    pub const fn entries(&self) -> u32 {
        1 << self.log_size
    }

    /// WQE stride in bytes.
    pub const fn stride(&self) -> usize {
        1 << self.log_stride
    }

    /// Bytes of the whole ring.
    #[cfg(userspace)] // The provider lays rings out in one buffer.
    pub const fn bytes(&self) -> usize {
        self.stride() << self.log_size
    }

    /// SGEs a receive WQE of this stride carries within `limits`.
    pub const fn recv_sges(&self, limits: &WqLimits) -> u32 {
        let n = ((self.stride() - RecvWqeHeader::SIZE) / Sge::SIZE) as u32;
        if n > limits.max_sge {
            limits.max_sge
        } else {
            n
        }
    }

    /// SGEs a send WQE of this stride carries within `limits`.
    pub const fn send_sges(&self, limits: &WqLimits) -> u32 {
        let n = ((self.stride() - WQE_HEADER_SIZE) / Sge::SIZE) as u32;
        if n > limits.max_sge {
            limits.max_sge
        } else {
            n
        }
    }

    /// Inline bytes a send WQE of this stride carries within `limits`.
    pub const fn send_inline(&self, limits: &WqLimits) -> u32 {
        let n = (self.stride() - WQE_HEADER_SIZE) as u32;
        if n > limits.max_inline {
            limits.max_inline
        } else {
            n
        }
    }
}

/// The rings of a queue pair: a send ring, and a receive ring unless it receives from an SRQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WqGeometry {
    /// The send ring.
    pub sq: WqRing,
    /// The receive ring; `None` with an SRQ.
    pub rq: Option<WqRing>,
}

impl WqGeometry {
    /// The smallest rings that hold `caps` (the receive side is ignored with an SRQ).
    pub const fn new(caps: &WqCaps, srq: bool, limits: &WqLimits) -> Result<Self, GeometryError> {
        let sq = match WqRing::send(caps.max_send_wr, caps.max_send_sge, caps.max_inline, limits) {
            Ok(sq) => sq,
            Err(e) => return Err(e),
        };
        let rq = if srq {
            None
        } else {
            match WqRing::recv(caps.max_recv_wr, caps.max_recv_sge, limits) {
                Ok(rq) => Some(rq),
                Err(e) => return Err(e),
            }
        };
        Ok(Self { sq, rq })
    }

    /// What the rings hold within `limits`: at least what [`Self::new`] was asked for.
    pub const fn caps(&self, limits: &WqLimits) -> WqCaps {
        let (max_recv_wr, max_recv_sge) = match &self.rq {
            Some(rq) => (rq.entries(), rq.recv_sges(limits)),
            None => (0, 0),
        };
        WqCaps {
            max_send_wr: self.sq.entries(),
            max_recv_wr,
            max_send_sge: self.sq.send_sges(limits),
            max_recv_sge,
            max_inline: self.sq.send_inline(limits),
        }
    }
}
