// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The ferroce hardware interface: the one definition of everything the device, the kernel driver
//! and the userspace provider agree on.
//!
//! This file is compiled by the kernel driver crate (as a module), by the emulated NIC and by the
//! rdma-core provider. It therefore uses only `core`, is safe code only, and every layout comes
//! with a safe encoder/decoder to and from little-endian byte arrays: the driver reads and writes
//! DMA memory through byte copies and must never transmute.
//!
//! `Documentation/infiniband/ferroce-hw.rst` is the prose version of this file.
//!
//! Conventions:
//! - All multi-byte fields are little-endian.
//! - Queue indexes are free-running 16-bit counters that wrap; a ring has `1 << log_size` slots
//!   with `log_size <= MAX_LOG_QUEUE` (15), so `pi - ci` (wrapping) is always the fill level.
//! - Every layout is a `#[repr(C)]` struct without implicit padding; its size and the sum of its
//!   field sizes are checked at compile time.

use core::ffi::CStr;
use core::mem::{offset_of, size_of};

// ---------------------------------------------------------------------------------------------
// Little-endian field access.
// ---------------------------------------------------------------------------------------------

/// A field type that can be stored little-endian at a byte offset.
///
/// Out-of-range accesses read as zero and are ignored on write; the layouts below only use
/// offsets checked at compile time, so this never happens for them.
pub trait LeField: Sized {
    /// Reads the field at `off`.
    fn get(buf: &[u8], off: usize) -> Self;
    /// Writes the field at `off`.
    fn put(&self, buf: &mut [u8], off: usize);
}

fn get_bytes<const N: usize>(buf: &[u8], off: usize) -> [u8; N] {
    let mut out = [0u8; N];
    if let Some(src) = off.checked_add(N).and_then(|end| buf.get(off..end)) {
        out.copy_from_slice(src);
    }
    out
}

/// The first `N` bytes of `buf`, zero-padded if it is shorter.
fn get_prefix<const N: usize>(buf: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    let n = if buf.len() < N { buf.len() } else { N };
    if let (Some(dst), Some(src)) = (out.get_mut(..n), buf.get(..n)) {
        dst.copy_from_slice(src);
    }
    out
}

fn put_bytes<const N: usize>(buf: &mut [u8], off: usize, bytes: &[u8; N]) {
    if let Some(dst) = off.checked_add(N).and_then(|end| buf.get_mut(off..end)) {
        dst.copy_from_slice(bytes);
    }
}

impl LeField for u8 {
    fn get(buf: &[u8], off: usize) -> Self {
        u8::from_le_bytes(get_bytes(buf, off))
    }
    fn put(&self, buf: &mut [u8], off: usize) {
        put_bytes(buf, off, &self.to_le_bytes());
    }
}

impl LeField for u16 {
    fn get(buf: &[u8], off: usize) -> Self {
        u16::from_le_bytes(get_bytes(buf, off))
    }
    fn put(&self, buf: &mut [u8], off: usize) {
        put_bytes(buf, off, &self.to_le_bytes());
    }
}

impl LeField for u32 {
    fn get(buf: &[u8], off: usize) -> Self {
        u32::from_le_bytes(get_bytes(buf, off))
    }
    fn put(&self, buf: &mut [u8], off: usize) {
        put_bytes(buf, off, &self.to_le_bytes());
    }
}

impl LeField for u64 {
    fn get(buf: &[u8], off: usize) -> Self {
        u64::from_le_bytes(get_bytes(buf, off))
    }
    fn put(&self, buf: &mut [u8], off: usize) {
        put_bytes(buf, off, &self.to_le_bytes());
    }
}

impl<const N: usize> LeField for [u8; N] {
    fn get(buf: &[u8], off: usize) -> Self {
        get_bytes(buf, off)
    }
    fn put(&self, buf: &mut [u8], off: usize) {
        put_bytes(buf, off, self);
    }
}

/// Reads a little-endian `u32` at `off` of `buf` (zero if out of range).
pub fn read_u32(buf: &[u8], off: usize) -> u32 {
    u32::get(buf, off)
}

/// Reads a little-endian `u64` at `off` of `buf` (zero if out of range).
pub fn read_u64(buf: &[u8], off: usize) -> u64 {
    u64::get(buf, off)
}

/// Defines a `#[repr(C)]` little-endian layout with compile-time size checks and safe
/// `encode`/`decode`. Local to this file; uses only `core`.
macro_rules! hw_layout {
    (
        $(#[$meta:meta])*
        pub struct $name:ident ($size:expr) {
            $( $(#[$fmeta:meta])* pub $field:ident : $ty:ty, )*
        }
    ) => {
        $(#[$meta])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        const _: () = assert!(size_of::<$name>() == $size);
        // No implicit padding: the fields fill the struct exactly.
        const _: () = assert!(0 $( + size_of::<$ty>() )* == $size);

        impl $name {
            /// Size of the encoded layout in bytes.
            pub const SIZE: usize = $size;

            /// Encodes into little-endian bytes.
            pub fn encode(&self) -> [u8; $size] {
                let mut buf = [0u8; $size];
                $( LeField::put(&self.$field, &mut buf, offset_of!($name, $field)); )*
                buf
            }

            /// Decodes from little-endian bytes.
            pub fn decode(buf: &[u8; $size]) -> Self {
                Self { $( $field: LeField::get(buf, offset_of!($name, $field)), )* }
            }

            /// Decodes from the start of `buf`; `None` if it is too short.
            pub fn read_from(buf: &[u8]) -> Option<Self> {
                let bytes: &[u8; $size] = buf.get(..$size)?.try_into().ok()?;
                Some(Self::decode(bytes))
            }

            /// Encodes into the start of `buf`; `false` (nothing written) if it is too short.
            pub fn write_to(&self, buf: &mut [u8]) -> bool {
                match buf.get_mut(..$size) {
                    Some(dst) => {
                        dst.copy_from_slice(&self.encode());
                        true
                    }
                    None => false,
                }
            }
        }

        impl LeField for $name {
            fn get(buf: &[u8], off: usize) -> Self {
                Self::decode(&get_bytes(buf, off))
            }
            fn put(&self, buf: &mut [u8], off: usize) {
                put_bytes(buf, off, &self.encode());
            }
        }
    };
}

// ---------------------------------------------------------------------------------------------
// PCI identity.
// ---------------------------------------------------------------------------------------------

/// PCI vendor ID (QEMU's experimental vendor ID range, as used by emulated devices).
pub const PCI_VENDOR_ID: u16 = 0x1234;
/// PCI device ID of the ferroce function.
pub const PCI_DEVICE_ID: u16 = 0xfe01;
/// Subsystem vendor ID.
pub const PCI_SUBSYSTEM_VENDOR_ID: u16 = 0x1234;
/// Subsystem ID.
pub const PCI_SUBSYSTEM_ID: u16 = 0x0001;
/// Revision ID.
pub const PCI_REVISION: u8 = 0x01;
/// Class code: network controller (0x02), InfiniBand controller (0x07), prog-if 0. The Ethernet
/// function is the companion virtio-net device, so this function carries only RDMA.
pub const PCI_CLASS_CODE: u32 = 0x02_07_00;

// ---------------------------------------------------------------------------------------------
// BAR0 map.
// ---------------------------------------------------------------------------------------------

/// BAR0 is a 32-bit non-prefetchable memory BAR of this size.
pub const BAR0_SIZE: usize = 0x8_0000;

/// Value of `REG_ID`: the bytes "FRCE" in memory order.
pub const ID_MAGIC: u32 = 0x4543_5246;
/// Interface version implemented by this file: major in bits 31:16, minor in bits 15:0.
/// A driver must refuse a different major version.
pub const IF_VERSION_MAJOR: u16 = 1;
/// Minor interface version (additions only).
pub const IF_VERSION_MINOR: u16 = 0;
/// `REG_IF_VERSION` value for this interface.
pub const IF_VERSION: u32 = ((IF_VERSION_MAJOR as u32) << 16) | IF_VERSION_MINOR as u32;

/// Returns the major version of an `REG_IF_VERSION` value.
pub const fn if_version_major(reg: u32) -> u16 {
    (reg >> 16) as u16
}

// Identification and limits (read-only, 32 bit).
/// Identification magic, [`ID_MAGIC`].
pub const REG_ID: usize = 0x000;
/// Interface version, [`IF_VERSION`].
pub const REG_IF_VERSION: usize = 0x004;
/// Capability bits (`CAP_*`).
pub const REG_CAPS: usize = 0x008;
/// Number of MSI-X vectors.
pub const REG_NUM_MSIX: usize = 0x00c;
/// Maximum number of QPs (QPNs 0 and 1 are reserved, 1 is the GSI QP).
pub const REG_MAX_QP: usize = 0x010;
/// Maximum number of CQs.
pub const REG_MAX_CQ: usize = 0x014;
/// Maximum number of MRs.
pub const REG_MAX_MR: usize = 0x018;
/// Maximum number of SRQs.
pub const REG_MAX_SRQ: usize = 0x01c;
/// Maximum number of AHs.
pub const REG_MAX_AH: usize = 0x020;
/// Maximum number of EQs (EQ 0 async, EQ 1 command, the rest completion EQs).
pub const REG_MAX_EQ: usize = 0x024;
/// Number of GID table entries.
pub const REG_GID_TABLE_LEN: usize = 0x028;
/// Number of doorbell pages (contexts).
pub const REG_NUM_DB_PAGES: usize = 0x02c;
/// Largest `log_size` of any ring.
pub const REG_MAX_LOG_QUEUE: usize = 0x030;
/// Maximum scatter/gather entries per WQE.
pub const REG_MAX_SGE: usize = 0x034;
/// Maximum inline payload in bytes.
pub const REG_MAX_INLINE: usize = 0x038;
/// Maximum pages in one MR page list.
pub const REG_MAX_MR_PAGES: usize = 0x03c;
/// BAR0 offset of doorbell page 0.
pub const REG_DB_AREA_OFFSET: usize = 0x040;
/// BAR0 offset of the counter block.
pub const REG_COUNTERS_OFFSET: usize = 0x044;
/// Number of counters.
pub const REG_NUM_COUNTERS: usize = 0x048;
/// Local queue IDs per context (QID translation table length).
pub const REG_QID_TABLE_LEN: usize = 0x04c;
/// Upper bound in milliseconds on any command's execution; a driver times out after this.
pub const REG_CMD_TIMEOUT_MS: usize = 0x050;

// Device control and status.
/// Device control (read/write): `CTRL_*`.
pub const REG_DEV_CTRL: usize = 0x080;
/// Device status (read-only): `STATUS_*`.
pub const REG_DEV_STATUS: usize = 0x084;
/// Fatal error code (read-only, `FATAL_*`), valid while `STATUS_FATAL` is set.
pub const REG_FATAL_CODE: usize = 0x088;
/// Scratch register (read/write, no side effect), for bring-up and tests.
pub const REG_SCRATCH: usize = 0x08c;

/// `REG_DEV_CTRL`: process commands and doorbells.
pub const CTRL_ENABLE: u32 = 1 << 0;
/// `REG_DEV_CTRL`: reset the function (self-clearing; reads back 0).
pub const CTRL_RESET: u32 = 1 << 1;

/// `REG_DEV_STATUS`: reset complete, registers usable.
pub const STATUS_READY: u32 = 1 << 0;
/// `REG_DEV_STATUS`: the device hit a fatal error; only a reset recovers.
pub const STATUS_FATAL: u32 = 1 << 1;
/// `REG_DEV_STATUS`: `CTRL_ENABLE` is in effect.
pub const STATUS_ENABLED: u32 = 1 << 2;

/// No fatal error.
pub const FATAL_NONE: u32 = 0;
/// The command queue rings could not be accessed by DMA.
pub const FATAL_CMDQ_DMA: u32 = 1;
/// An event queue could not be written by DMA.
pub const FATAL_EQ_DMA: u32 = 2;
/// Internal device error.
pub const FATAL_INTERNAL: u32 = 3;
/// Injected by the host control interface.
pub const FATAL_INJECTED: u32 = 4;

// Command queue registers.
/// Command ring (128-byte entries) base address, low 32 bits. 128-byte aligned.
pub const REG_CMDQ_SQ_BASE_LO: usize = 0x100;
/// Command ring base address, high 32 bits.
pub const REG_CMDQ_SQ_BASE_HI: usize = 0x104;
/// Command completion ring (32-byte entries) base address, low 32 bits. 32-byte aligned.
pub const REG_CMDQ_CQ_BASE_LO: usize = 0x108;
/// Command completion ring base address, high 32 bits.
pub const REG_CMDQ_CQ_BASE_HI: usize = 0x10c;
/// log2 of the number of entries of both command rings (0..=`MAX_LOG_CMDQ`).
pub const REG_CMDQ_LOG_SIZE: usize = 0x110;
/// Command queue control: `CMDQ_CTRL_ENABLE`. Base and size are latched when enabled.
pub const REG_CMDQ_CTRL: usize = 0x114;
/// Command doorbell: write the new producer index (low 16 bits).
pub const REG_CMDQ_DB: usize = 0x118;
/// Device consumer index of the command ring (read-only).
pub const REG_CMDQ_CI: usize = 0x11c;
/// Command queue status (read-only): `CMDQ_STATUS_*`.
pub const REG_CMDQ_STATUS: usize = 0x120;

/// `REG_CMDQ_CTRL`: command queue enabled.
pub const CMDQ_CTRL_ENABLE: u32 = 1 << 0;
/// `REG_CMDQ_STATUS`: the queue is enabled and accepted its parameters.
pub const CMDQ_STATUS_ENABLED: u32 = 1 << 0;
/// `REG_CMDQ_STATUS`: enabling failed (bad size or alignment) or a doorbell overran the ring.
pub const CMDQ_STATUS_ERROR: u32 = 1 << 1;
/// Largest command ring.
pub const MAX_LOG_CMDQ: u32 = 12;

// Event queue setup (for the async EQ 0 and the command EQ 1, which must exist before commands
// can complete by interrupt; completion EQs are created with `CMD_CREATE_EQ`).
/// EQ ring base, low 32 bits (16-byte EQEs, physically contiguous, 64-byte aligned).
pub const REG_EQ_SETUP_BASE_LO: usize = 0x180;
/// EQ ring base, high 32 bits.
pub const REG_EQ_SETUP_BASE_HI: usize = 0x184;
/// log2 of the number of EQEs.
pub const REG_EQ_SETUP_LOG_SIZE: usize = 0x188;
/// MSI-X vector of the EQ.
pub const REG_EQ_SETUP_VECTOR: usize = 0x18c;
/// Write `eqn | EQ_SETUP_CREATE` to create EQ `eqn` (0 or 1) from the setup registers, or `eqn`
/// alone to destroy it. The outcome is in `REG_EQ_SETUP_STATUS`.
pub const REG_EQ_SETUP_CTRL: usize = 0x190;
/// Status (`STATUS_*` command status code) of the last `REG_EQ_SETUP_CTRL` write.
pub const REG_EQ_SETUP_STATUS: usize = 0x194;
/// EQ doorbell: consumer index update and arm, [`EqDoorbell`].
pub const REG_EQ_DB: usize = 0x1a0;
/// `REG_EQ_SETUP_CTRL`: create (otherwise destroy).
pub const EQ_SETUP_CREATE: u32 = 1 << 31;

/// EQ number of the async event queue.
pub const EQN_ASYNC: u32 = 0;
/// EQ number of the command completion event queue.
pub const EQN_CMD: u32 = 1;
/// First EQ number available to `CMD_CREATE_EQ`.
pub const EQN_FIRST_COMPLETION: u32 = 2;

// Counters, MSI-X, doorbell pages.
/// Counter block: `NUM_COUNTERS` little-endian u64 (`COUNTER_*` index × 8). 32-bit reads of the
/// low and high half are allowed; read high, low, high again to detect a carry.
pub const COUNTERS_OFFSET: usize = 0x1000;
/// MSI-X table (emulated by the VMM).
pub const MSIX_TABLE_OFFSET: usize = 0x2000;
/// MSI-X pending bit array.
pub const MSIX_PBA_OFFSET: usize = 0x3000;
/// Maximum MSI-X vectors.
pub const MAX_MSIX_VECTORS: usize = 64;

/// BAR0 offset of doorbell page 0 (the kernel's context). Page `n` is at
/// `DB_AREA_OFFSET + n * DB_PAGE_SIZE`.
pub const DB_AREA_OFFSET: usize = 0x1_0000;
/// Size of a doorbell page; each page is one context and can be mapped to one process.
pub const DB_PAGE_SIZE: usize = 0x1000;
/// Number of doorbell pages (contexts); context 0 is the kernel's and always exists.
pub const NUM_DB_PAGES: usize = 64;
/// Local queue IDs per context.
pub const QID_TABLE_LEN: usize = 1024;

// Offsets inside a doorbell page (32-bit writes).
/// SQ doorbell: [`Doorbell`] with the new SQ producer index.
pub const DB_SQ: usize = 0x000;
/// RQ doorbell: [`Doorbell`] with the new RQ producer index (optional: the RQ doorbell record is
/// authoritative).
pub const DB_RQ: usize = 0x004;
/// SRQ doorbell: [`Doorbell`] with the new SRQ producer index (optional, as `DB_RQ`).
pub const DB_SRQ: usize = 0x008;
/// CQ arm doorbell: [`CqArmDoorbell`].
pub const DB_CQ_ARM: usize = 0x00c;
/// Push doorbell: [`Doorbell`]; the WQE at `index - 1` is taken from this page's push window.
pub const DB_PUSH: usize = 0x010;
/// WQE push window inside each doorbell page.
pub const PUSH_WINDOW_OFFSET: usize = 0x800;
/// Size of the WQE push window; a pushed WQE must fit.
pub const PUSH_WINDOW_SIZE: usize = 0x400;

const _: () = assert!(DB_AREA_OFFSET + NUM_DB_PAGES * DB_PAGE_SIZE <= BAR0_SIZE);
const _: () = assert!(MSIX_TABLE_OFFSET + MAX_MSIX_VECTORS * 16 <= MSIX_PBA_OFFSET);
const _: () = assert!(PUSH_WINDOW_OFFSET + PUSH_WINDOW_SIZE <= DB_PAGE_SIZE);

/// Returns the BAR0 offset of doorbell page `ctx`.
pub const fn db_page_offset(ctx: usize) -> usize {
    DB_AREA_OFFSET + ctx * DB_PAGE_SIZE
}

// Capabilities.
/// RoCE v1 (GRH over ethertype 0x8915).
pub const CAP_ROCE_V1: u32 = 1 << 0;
/// RoCE v2 (UDP port 4791).
pub const CAP_ROCE_V2: u32 = 1 << 1;
/// RC QPs.
pub const CAP_RC: u32 = 1 << 2;
/// UD QPs and the GSI QP.
pub const CAP_UD: u32 = 1 << 3;
/// Shared receive queues.
pub const CAP_SRQ: u32 = 1 << 4;
/// Atomic operations.
pub const CAP_ATOMIC: u32 = 1 << 5;
/// Inline send data.
pub const CAP_INLINE: u32 = 1 << 6;
/// WQE push windows.
pub const CAP_WQE_PUSH: u32 = 1 << 7;
/// CQ moderation.
pub const CAP_CQ_MODERATION: u32 = 1 << 8;
/// Per-context QID translation.
pub const CAP_QID_TRANSLATION: u32 = 1 << 9;
/// Fast registration (REG_MR / LOCAL_INV work requests).
pub const CAP_FAST_REG: u32 = 1 << 10;

// Limits implemented by this interface version (the device reports its own in the registers).
/// Largest ring `log_size` (indexes are 16 bit).
pub const MAX_LOG_QUEUE: u32 = 15;
/// Maximum SGEs per WQE.
pub const MAX_SGE: u32 = 16;
/// Maximum inline payload.
pub const MAX_INLINE: u32 = 256;
/// Smallest WQE stride, log2 (one header).
pub const MIN_LOG_WQE_STRIDE: u32 = 6;
/// Largest WQE stride, log2.
pub const MAX_LOG_WQE_STRIDE: u32 = 10;
/// Smallest page size of a page list, log2.
pub const MIN_LOG_PAGE_SIZE: u32 = 12;
/// Largest page size of a page list, log2.
pub const MAX_LOG_PAGE_SIZE: u32 = 30;
/// Value meaning "none" for SRQ numbers and similar.
pub const NONE: u32 = 0xffff_ffff;
/// VLAN value meaning "untagged".
pub const VLAN_NONE: u16 = 0xffff;

// ---------------------------------------------------------------------------------------------
// Counters.
// ---------------------------------------------------------------------------------------------

/// BAR0 MMIO reads.
pub const COUNTER_MMIO_READS: usize = 0;
/// BAR0 MMIO writes.
pub const COUNTER_MMIO_WRITES: usize = 1;
/// Doorbell writes (SQ, RQ, SRQ, push, CQ arm, command, EQ).
pub const COUNTER_DOORBELLS: usize = 2;
/// Doorbells rejected (unknown queue, bad index, wrong context).
pub const COUNTER_BAD_DOORBELLS: usize = 3;
/// WQEs read from rings by DMA.
pub const COUNTER_WQE_FETCHES: usize = 4;
/// WQEs taken from a push window.
pub const COUNTER_WQE_PUSHES: usize = 5;
/// Payload DMA reads.
pub const COUNTER_PAYLOAD_DMA_READS: usize = 6;
/// Payload DMA writes.
pub const COUNTER_PAYLOAD_DMA_WRITES: usize = 7;
/// Payload bytes read by DMA.
pub const COUNTER_PAYLOAD_READ_BYTES: usize = 8;
/// Payload bytes written by DMA.
pub const COUNTER_PAYLOAD_WRITE_BYTES: usize = 9;
/// CQEs written.
pub const COUNTER_CQES: usize = 10;
/// EQEs written.
pub const COUNTER_EQES: usize = 11;
/// MSI-X interrupts raised (delivered or left pending).
pub const COUNTER_INTERRUPTS: usize = 12;
/// Commands executed.
pub const COUNTER_COMMANDS: usize = 13;
/// Commands completed with a non-zero status.
pub const COUNTER_COMMAND_ERRORS: usize = 14;
/// DMA accesses that hit unmapped or read-only guest memory.
pub const COUNTER_DMA_ERRORS: usize = 15;
/// Doorbell record reads.
pub const COUNTER_DBREC_READS: usize = 16;
/// Async events generated.
pub const COUNTER_ASYNC_EVENTS: usize = 17;
/// Packets transmitted.
pub const COUNTER_TX_PACKETS: usize = 18;
/// Bytes transmitted.
pub const COUNTER_TX_BYTES: usize = 19;
/// Packets received.
pub const COUNTER_RX_PACKETS: usize = 20;
/// Bytes received.
pub const COUNTER_RX_BYTES: usize = 21;
/// Retransmitted packets.
pub const COUNTER_RETRANSMITS: usize = 22;
/// NAKs sent.
pub const COUNTER_NAKS_SENT: usize = 23;
/// NAKs received.
pub const COUNTER_NAKS_RECEIVED: usize = 24;
/// RNR retries.
pub const COUNTER_RNR_RETRIES: usize = 25;
/// Frames dropped.
pub const COUNTER_DROPS: usize = 26;
/// Frames with a bad ICRC.
pub const COUNTER_ICRC_ERRORS: usize = 27;
/// PSN sequence errors.
pub const COUNTER_SEQ_ERRORS: usize = 28;
/// CQ arm doorbells.
pub const COUNTER_CQ_ARMS: usize = 29;
/// Duplicate request packets received (answered again, never executed twice).
pub const COUNTER_DUPLICATES: usize = 30;
/// Retransmission timer expiries.
pub const COUNTER_TIMEOUTS: usize = 31;
/// Number of counters.
pub const NUM_COUNTERS: usize = 32;

/// Counter names, indexed by `COUNTER_*`: C strings, because the driver hands them to ib_core
/// (`rdma_stat_desc`).
pub const COUNTER_NAMES: [&CStr; NUM_COUNTERS] = [
    c"mmio_reads",
    c"mmio_writes",
    c"doorbells",
    c"bad_doorbells",
    c"wqe_fetches",
    c"wqe_pushes",
    c"payload_dma_reads",
    c"payload_dma_writes",
    c"payload_read_bytes",
    c"payload_write_bytes",
    c"cqes",
    c"eqes",
    c"interrupts",
    c"commands",
    c"command_errors",
    c"dma_errors",
    c"dbrec_reads",
    c"async_events",
    c"tx_packets",
    c"tx_bytes",
    c"rx_packets",
    c"rx_bytes",
    c"retransmits",
    c"naks_sent",
    c"naks_received",
    c"rnr_retries",
    c"drops",
    c"icrc_errors",
    c"seq_errors",
    c"cq_arms",
    c"duplicates",
    c"timeouts",
];

/// BAR0 offset of counter `index`.
pub const fn counter_offset(index: usize) -> usize {
    COUNTERS_OFFSET + index * 8
}

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

    /// Slot of a free-running index.
    pub const fn slot(&self, index: u16) -> u32 {
        index as u32 & (self.size() - 1)
    }

    /// Entries between consumer `ci` and producer `pi`.
    pub const fn used(&self, pi: u16, ci: u16) -> u32 {
        pi.wrapping_sub(ci) as u32
    }

    /// Whether no entry is outstanding.
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
}

// ---------------------------------------------------------------------------------------------
// Doorbells.
// ---------------------------------------------------------------------------------------------

/// A queue doorbell: one 32-bit MMIO write naming the queue (a local QID of the page's context)
/// and its new producer index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Doorbell {
    /// Local queue ID (translated through the context's QID table).
    pub qid: u16,
    /// New producer index.
    pub index: u16,
}

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
pub struct CqArmDoorbell {
    /// Local queue ID of the CQ.
    pub qid: u16,
    /// Arm for solicited (and error) completions only; otherwise the next completion.
    pub solicited: bool,
}

/// `CqArmDoorbell` flag: solicited only.
pub const CQ_ARM_SOLICITED: u32 = 1 << 0;

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
// Command queue.
// ---------------------------------------------------------------------------------------------

/// Size of a command entry.
pub const CMD_ENTRY_SIZE: usize = 128;
/// Size of a command's payload (after the header).
pub const CMD_PAYLOAD_SIZE: usize = CMD_ENTRY_SIZE - CmdHeader::SIZE;

hw_layout! {
    /// Header of a 128-byte command entry; the command payload follows at offset 16.
    pub struct CmdHeader(16) {
        /// `CMD_*` opcode.
        pub opcode: u16,
        /// Reserved, zero.
        pub flags: u16,
        /// Driver cookie, copied into the completion and the command EQE.
        pub token: u32,
        /// Output buffer for commands with large results (`CMD_QUERY_QP`,
        /// `CMD_QUERY_COUNTERS`), 0 otherwise.
        pub out_addr: u64,
    }
}

hw_layout! {
    /// Command completion entry (32 bytes), written to the completion ring in order.
    pub struct CmdCompletion(32) {
        /// Token of the command.
        pub token: u32,
        /// Opcode of the command.
        pub opcode: u16,
        /// Command ring index of the command.
        pub index: u16,
        /// `STATUS_*`.
        pub status: u8,
        /// Reserved.
        pub rsvd0: [u8; 3],
        /// Detail for errors: byte offset in the payload of the offending field + 1, or 0.
        pub syndrome: u32,
        /// First result word (the new object's number, for create commands).
        pub result0: u32,
        /// Second result word.
        pub result1: u32,
        /// Third result word.
        pub result2: u32,
        /// Reserved.
        pub rsvd1: u16,
        /// Reserved.
        pub rsvd2: u8,
        /// Owner bit (bit 0), written last; see [`Ring::owner`].
        pub owner: u8,
    }
}

/// Encodes a whole command entry from a header and a payload (truncated to the payload size).
pub fn encode_command(header: &CmdHeader, payload: &[u8]) -> [u8; CMD_ENTRY_SIZE] {
    let mut entry = [0u8; CMD_ENTRY_SIZE];
    header.write_to(&mut entry);
    let len = if payload.len() < CMD_PAYLOAD_SIZE {
        payload.len()
    } else {
        CMD_PAYLOAD_SIZE
    };
    if let (Some(dst), Some(src)) = (
        entry.get_mut(CmdHeader::SIZE..CmdHeader::SIZE + len),
        payload.get(..len),
    ) {
        dst.copy_from_slice(src);
    }
    entry
}

/// Returns the payload part of a command entry.
pub fn command_payload(entry: &[u8; CMD_ENTRY_SIZE]) -> &[u8] {
    entry.get(CmdHeader::SIZE..).unwrap_or(&[])
}

// Command opcodes.
/// No operation.
pub const CMD_NOP: u16 = 0x0001;
/// Query port 1: state, MTUs, companion MAC. Results: [`PortInfo`].
pub const CMD_QUERY_PORT: u16 = 0x0002;
/// Set port parameters: [`SetPortCmd`].
pub const CMD_SET_PORT: u16 = 0x0003;
/// Create a completion EQ: [`CreateEqCmd`] → result0 = eqn.
pub const CMD_CREATE_EQ: u16 = 0x0010;
/// Destroy an EQ (no CQ may use it): [`DestroyEqCmd`].
pub const CMD_DESTROY_EQ: u16 = 0x0011;
/// Change an EQ's MSI-X vector: [`ModifyEqCmd`].
pub const CMD_MODIFY_EQ: u16 = 0x0012;
/// Create a CQ: [`CreateCqCmd`] → result0 = cqn.
pub const CMD_CREATE_CQ: u16 = 0x0020;
/// Destroy a CQ (no QP may use it): [`DestroyCqCmd`].
pub const CMD_DESTROY_CQ: u16 = 0x0021;
/// Change CQ moderation: [`ModifyCqCmd`].
pub const CMD_MODIFY_CQ: u16 = 0x0022;
/// Create a QP in RESET: [`CreateQpCmd`] → result0 = qpn.
pub const CMD_CREATE_QP: u16 = 0x0030;
/// Destroy a QP: [`DestroyQpCmd`].
pub const CMD_DESTROY_QP: u16 = 0x0031;
/// Modify a QP (state transitions and attributes): [`ModifyQpCmd`].
pub const CMD_MODIFY_QP: u16 = 0x0032;
/// Query a QP: [`DestroyQpCmd`] layout (qpn); writes a [`ModifyQpCmd`] image with all
/// attributes to `out_addr`; result0 = state.
pub const CMD_QUERY_QP: u16 = 0x0033;
/// Register an MR: [`CreateMrCmd`] → result0 = key (lkey = rkey).
pub const CMD_CREATE_MR: u16 = 0x0040;
/// Deregister an MR: [`DestroyMrCmd`].
pub const CMD_DESTROY_MR: u16 = 0x0041;
/// Create an address handle: [`CreateAhCmd`] → result0 = AH number.
pub const CMD_CREATE_AH: u16 = 0x0050;
/// Destroy an address handle: [`DestroyAhCmd`].
pub const CMD_DESTROY_AH: u16 = 0x0051;
/// Create an SRQ: [`CreateSrqCmd`] → result0 = srqn.
pub const CMD_CREATE_SRQ: u16 = 0x0060;
/// Destroy an SRQ (no QP may use it): [`DestroySrqCmd`].
pub const CMD_DESTROY_SRQ: u16 = 0x0061;
/// Arm an SRQ's limit event: [`ModifySrqCmd`].
pub const CMD_MODIFY_SRQ: u16 = 0x0062;
/// Set a GID table entry: [`SetGidCmd`].
pub const CMD_SET_GID: u16 = 0x0070;
/// Clear a GID table entry: [`ClearGidCmd`].
pub const CMD_CLEAR_GID: u16 = 0x0071;
/// Copy counters to `out_addr`: [`QueryCountersCmd`] → result0 = number copied.
pub const CMD_QUERY_COUNTERS: u16 = 0x0080;
/// Allocate a context (doorbell page): no payload → result0 = context number.
pub const CMD_ALLOC_CTX: u16 = 0x0090;
/// Free a context and its QID table: [`FreeCtxCmd`].
pub const CMD_FREE_CTX: u16 = 0x0091;
/// Map a local QID of a context to a queue: [`MapQidCmd`].
pub const CMD_MAP_QID: u16 = 0x0092;
/// Unmap a local QID: [`UnmapQidCmd`].
pub const CMD_UNMAP_QID: u16 = 0x0093;

/// All command opcodes, for tables and tests.
pub const CMD_OPCODES: [u16; 27] = [
    CMD_NOP,
    CMD_QUERY_PORT,
    CMD_SET_PORT,
    CMD_CREATE_EQ,
    CMD_DESTROY_EQ,
    CMD_MODIFY_EQ,
    CMD_CREATE_CQ,
    CMD_DESTROY_CQ,
    CMD_MODIFY_CQ,
    CMD_CREATE_QP,
    CMD_DESTROY_QP,
    CMD_MODIFY_QP,
    CMD_QUERY_QP,
    CMD_CREATE_MR,
    CMD_DESTROY_MR,
    CMD_CREATE_AH,
    CMD_DESTROY_AH,
    CMD_CREATE_SRQ,
    CMD_DESTROY_SRQ,
    CMD_MODIFY_SRQ,
    CMD_SET_GID,
    CMD_CLEAR_GID,
    CMD_QUERY_COUNTERS,
    CMD_ALLOC_CTX,
    CMD_FREE_CTX,
    CMD_MAP_QID,
    CMD_UNMAP_QID,
];

/// Returns a short name for a command opcode.
pub const fn command_name(opcode: u16) -> &'static str {
    match opcode {
        CMD_NOP => "nop",
        CMD_QUERY_PORT => "query_port",
        CMD_SET_PORT => "set_port",
        CMD_CREATE_EQ => "create_eq",
        CMD_DESTROY_EQ => "destroy_eq",
        CMD_MODIFY_EQ => "modify_eq",
        CMD_CREATE_CQ => "create_cq",
        CMD_DESTROY_CQ => "destroy_cq",
        CMD_MODIFY_CQ => "modify_cq",
        CMD_CREATE_QP => "create_qp",
        CMD_DESTROY_QP => "destroy_qp",
        CMD_MODIFY_QP => "modify_qp",
        CMD_QUERY_QP => "query_qp",
        CMD_CREATE_MR => "create_mr",
        CMD_DESTROY_MR => "destroy_mr",
        CMD_CREATE_AH => "create_ah",
        CMD_DESTROY_AH => "destroy_ah",
        CMD_CREATE_SRQ => "create_srq",
        CMD_DESTROY_SRQ => "destroy_srq",
        CMD_MODIFY_SRQ => "modify_srq",
        CMD_SET_GID => "set_gid",
        CMD_CLEAR_GID => "clear_gid",
        CMD_QUERY_COUNTERS => "query_counters",
        CMD_ALLOC_CTX => "alloc_ctx",
        CMD_FREE_CTX => "free_ctx",
        CMD_MAP_QID => "map_qid",
        CMD_UNMAP_QID => "unmap_qid",
        _ => "unknown",
    }
}

// Command status codes.
/// Success.
pub const STATUS_OK: u8 = 0x00;
/// Unknown opcode.
pub const STATUS_BAD_OPCODE: u8 = 0x01;
/// A field is out of range or reserved bits are set (see `syndrome`).
pub const STATUS_BAD_PARAM: u8 = 0x02;
/// The object named does not exist.
pub const STATUS_BAD_RESOURCE: u8 = 0x03;
/// The table is full.
pub const STATUS_NO_RESOURCES: u8 = 0x04;
/// Illegal state transition or object state.
pub const STATUS_BAD_STATE: u8 = 0x05;
/// The object is still referenced.
pub const STATUS_BUSY: u8 = 0x06;
/// A host address given in the command is not accessible.
pub const STATUS_DMA_ERROR: u8 = 0x07;
/// A size or alignment is invalid.
pub const STATUS_BAD_SIZE: u8 = 0x08;
/// Not supported by this device.
pub const STATUS_NOT_SUPPORTED: u8 = 0x09;
/// Internal error.
pub const STATUS_INTERNAL: u8 = 0x0a;

/// Returns a short name for a command status.
pub const fn status_name(status: u8) -> &'static str {
    match status {
        STATUS_OK => "ok",
        STATUS_BAD_OPCODE => "bad_opcode",
        STATUS_BAD_PARAM => "bad_param",
        STATUS_BAD_RESOURCE => "bad_resource",
        STATUS_NO_RESOURCES => "no_resources",
        STATUS_BAD_STATE => "bad_state",
        STATUS_BUSY => "busy",
        STATUS_DMA_ERROR => "dma_error",
        STATUS_BAD_SIZE => "bad_size",
        STATUS_NOT_SUPPORTED => "not_supported",
        STATUS_INTERNAL => "internal",
        _ => "unknown",
    }
}

/// A command payload type: its opcode and its encoding.
pub trait Command: Sized {
    /// The command's opcode.
    const OPCODE: u16;
    /// Encodes the payload (zero-padded to `CMD_PAYLOAD_SIZE`).
    fn to_payload(&self) -> [u8; CMD_PAYLOAD_SIZE];
    /// Decodes the payload; a short payload is zero-padded.
    fn from_payload(payload: &[u8]) -> Self;
}

macro_rules! hw_command {
    ($name:ident, $opcode:expr) => {
        const _: () = assert!($name::SIZE <= CMD_PAYLOAD_SIZE);

        impl Command for $name {
            const OPCODE: u16 = $opcode;

            fn to_payload(&self) -> [u8; CMD_PAYLOAD_SIZE] {
                let mut buf = [0u8; CMD_PAYLOAD_SIZE];
                self.write_to(&mut buf);
                buf
            }

            fn from_payload(payload: &[u8]) -> Self {
                Self::decode(&get_prefix(payload))
            }
        }
    };
}

// Port.
/// Port state: down (IB `IB_PORT_DOWN`).
pub const PORT_STATE_DOWN: u8 = 1;
/// Port state: active (IB `IB_PORT_ACTIVE`).
pub const PORT_STATE_ACTIVE: u8 = 4;
/// IB MTU enum: 256 bytes.
pub const MTU_256: u8 = 1;
/// 512 bytes.
pub const MTU_512: u8 = 2;
/// 1024 bytes.
pub const MTU_1024: u8 = 3;
/// 2048 bytes.
pub const MTU_2048: u8 = 4;
/// 4096 bytes.
pub const MTU_4096: u8 = 5;

/// Returns the size in bytes of an IB MTU enum value, or `None` if invalid.
pub const fn mtu_bytes(mtu: u8) -> Option<u32> {
    match mtu {
        MTU_256..=MTU_4096 => Some(128 << mtu),
        _ => None,
    }
}

/// Results of `CMD_QUERY_PORT`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortInfo {
    /// `PORT_STATE_*`.
    pub state: u8,
    /// Active MTU (`MTU_*`).
    pub active_mtu: u8,
    /// Maximum MTU (`MTU_*`).
    pub max_mtu: u8,
    /// MAC address of the companion Ethernet function (the virtio-net NIC).
    pub mac: [u8; 6],
}

impl PortInfo {
    /// Encodes as completion results: result0 = state | active_mtu << 8 | max_mtu << 16,
    /// result1 = mac[0..4] (little-endian), result2 = mac[4..6].
    pub const fn to_results(&self) -> [u32; 3] {
        let m = self.mac;
        [
            self.state as u32 | (self.active_mtu as u32) << 8 | (self.max_mtu as u32) << 16,
            u32::from_le_bytes([m[0], m[1], m[2], m[3]]),
            u32::from_le_bytes([m[4], m[5], 0, 0]),
        ]
    }

    /// Decodes from completion results.
    pub const fn from_results(r: [u32; 3]) -> Self {
        let a = r[1].to_le_bytes();
        let b = r[2].to_le_bytes();
        Self {
            state: r[0] as u8,
            active_mtu: (r[0] >> 8) as u8,
            max_mtu: (r[0] >> 16) as u8,
            mac: [a[0], a[1], a[2], a[3], b[0], b[1]],
        }
    }
}

hw_layout! {
    /// `CMD_NOP` payload (none).
    pub struct NopCmd(8) {
        /// Reserved, zero.
        pub rsvd: u64,
    }
}
hw_command!(NopCmd, CMD_NOP);

hw_layout! {
    /// `CMD_QUERY_PORT` payload.
    pub struct QueryPortCmd(8) {
        /// Port number, must be 1.
        pub port: u32,
        /// Reserved, zero.
        pub rsvd: u32,
    }
}
hw_command!(QueryPortCmd, CMD_QUERY_PORT);

hw_layout! {
    /// `CMD_SET_PORT` payload.
    pub struct SetPortCmd(8) {
        /// Port number, must be 1.
        pub port: u32,
        /// Active MTU (`MTU_*`), following the netdev's MTU.
        pub active_mtu: u8,
        /// Reserved, zero.
        pub rsvd: [u8; 3],
    }
}
hw_command!(SetPortCmd, CMD_SET_PORT);

hw_layout! {
    /// `CMD_CREATE_EQ` payload (completion EQs; numbers from `EQN_FIRST_COMPLETION`).
    pub struct CreateEqCmd(24) {
        /// EQE ring (16-byte EQEs).
        pub ring: BufDesc,
        /// log2 of the number of EQEs.
        pub log_size: u8,
        /// Reserved, zero.
        pub rsvd0: u8,
        /// MSI-X vector.
        pub vector: u16,
        /// Reserved, zero.
        pub rsvd1: u32,
    }
}
hw_command!(CreateEqCmd, CMD_CREATE_EQ);

hw_layout! {
    /// `CMD_DESTROY_EQ` payload.
    pub struct DestroyEqCmd(8) {
        /// EQ number.
        pub eqn: u32,
        /// Reserved, zero.
        pub rsvd: u32,
    }
}
hw_command!(DestroyEqCmd, CMD_DESTROY_EQ);

hw_layout! {
    /// `CMD_MODIFY_EQ` payload.
    pub struct ModifyEqCmd(8) {
        /// EQ number.
        pub eqn: u32,
        /// New MSI-X vector.
        pub vector: u16,
        /// Reserved, zero.
        pub rsvd: u16,
    }
}
hw_command!(ModifyEqCmd, CMD_MODIFY_EQ);

/// `CreateCqCmd::flags`: CQE timestamps (reserved for later versions; rejected now).
pub const CQ_FLAG_RESERVED_MASK: u8 = 0xff;

hw_layout! {
    /// `CMD_CREATE_CQ` payload.
    pub struct CreateCqCmd(40) {
        /// CQE ring (64-byte CQEs).
        pub ring: BufDesc,
        /// Doorbell record ([`CqDbRecord`]), 8-byte aligned.
        pub dbrec_addr: u64,
        /// Completion EQ receiving this CQ's completion events.
        pub eqn: u32,
        /// log2 of the number of CQEs.
        pub log_size: u8,
        /// Reserved, zero.
        pub flags: u8,
        /// Moderation: event after this many CQEs (0 or 1 = every CQE).
        pub moder_count: u16,
        /// Moderation: or after this many microseconds since the first unreported CQE (0 = off).
        pub moder_period_us: u16,
        /// Reserved, zero.
        pub rsvd0: u16,
        /// Reserved, zero.
        pub rsvd1: u32,
    }
}
hw_command!(CreateCqCmd, CMD_CREATE_CQ);

hw_layout! {
    /// `CMD_DESTROY_CQ` payload.
    pub struct DestroyCqCmd(8) {
        /// CQ number.
        pub cqn: u32,
        /// Reserved, zero.
        pub rsvd: u32,
    }
}
hw_command!(DestroyCqCmd, CMD_DESTROY_CQ);

hw_layout! {
    /// `CMD_MODIFY_CQ` payload.
    pub struct ModifyCqCmd(16) {
        /// CQ number.
        pub cqn: u32,
        /// Reserved, zero.
        pub rsvd0: u32,
        /// New moderation count.
        pub moder_count: u16,
        /// New moderation period in microseconds.
        pub moder_period_us: u16,
        /// Reserved, zero.
        pub rsvd1: u32,
    }
}
hw_command!(ModifyCqCmd, CMD_MODIFY_CQ);

// QP types (IB `ib_qp_type` values).
/// The GSI QP (QP1).
pub const QPT_GSI: u8 = 1;
/// Reliable connected.
pub const QPT_RC: u8 = 2;
/// Unreliable datagram.
pub const QPT_UD: u8 = 4;
/// QPN of the GSI QP.
pub const GSI_QPN: u32 = 1;
/// First QPN for RC and UD QPs.
pub const FIRST_QPN: u32 = 2;

/// `CreateQpCmd::flags`: every send WQE generates a CQE (`IB_SIGNAL_ALL_WR`).
pub const QP_FLAG_SIGNAL_ALL: u8 = 1 << 0;
/// `CreateQpCmd::flags`: defined bits.
pub const QP_FLAGS_VALID: u8 = QP_FLAG_SIGNAL_ALL;

hw_layout! {
    /// `CMD_CREATE_QP` payload. The QP starts in RESET.
    pub struct CreateQpCmd(64) {
        /// Send ring.
        pub sq: BufDesc,
        /// Receive ring (ignored with an SRQ).
        pub rq: BufDesc,
        /// Doorbell record ([`QpDbRecord`]), 8-byte aligned.
        pub dbrec_addr: u64,
        /// Protection domain tag chosen by the driver; MRs must match.
        pub pd: u32,
        /// CQ for send completions.
        pub sq_cqn: u32,
        /// CQ for receive completions.
        pub rq_cqn: u32,
        /// SRQ, or [`NONE`].
        pub srqn: u32,
        /// `QPT_*`.
        pub qp_type: u8,
        /// log2 of SQ entries.
        pub sq_log_size: u8,
        /// log2 of the SQ WQE stride.
        pub sq_log_stride: u8,
        /// log2 of RQ entries.
        pub rq_log_size: u8,
        /// log2 of the RQ WQE stride.
        pub rq_log_stride: u8,
        /// `QP_FLAG_*`.
        pub flags: u8,
        /// Reserved, zero.
        pub rsvd: u16,
    }
}
hw_command!(CreateQpCmd, CMD_CREATE_QP);

hw_layout! {
    /// `CMD_DESTROY_QP` (and `CMD_QUERY_QP`) payload.
    pub struct DestroyQpCmd(8) {
        /// QP number.
        pub qpn: u32,
        /// Reserved, zero.
        pub rsvd: u32,
    }
}
hw_command!(DestroyQpCmd, CMD_DESTROY_QP);

/// `CMD_QUERY_QP` payload (same layout as [`DestroyQpCmd`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueryQpCmd {
    /// QP number.
    pub qpn: u32,
}

impl Command for QueryQpCmd {
    const OPCODE: u16 = CMD_QUERY_QP;

    fn to_payload(&self) -> [u8; CMD_PAYLOAD_SIZE] {
        DestroyQpCmd {
            qpn: self.qpn,
            rsvd: 0,
        }
        .to_payload()
    }

    fn from_payload(payload: &[u8]) -> Self {
        Self {
            qpn: DestroyQpCmd::from_payload(payload).qpn,
        }
    }
}

// QP states (IB `ib_qp_state` values).
/// Reset.
pub const QPS_RESET: u8 = 0;
/// Initialized.
pub const QPS_INIT: u8 = 1;
/// Ready to receive.
pub const QPS_RTR: u8 = 2;
/// Ready to send.
pub const QPS_RTS: u8 = 3;
/// Send queue drained.
pub const QPS_SQD: u8 = 4;
/// Send queue error.
pub const QPS_SQE: u8 = 5;
/// Error.
pub const QPS_ERR: u8 = 6;
/// `ModifyQpCmd::cur_state` value meaning "don't check".
pub const QPS_ANY: u8 = 0xff;

/// Whether the IB state machine allows `from → to` through a modify command.
pub const fn qp_transition_allowed(from: u8, to: u8) -> bool {
    match (from, to) {
        (_, QPS_RESET) | (_, QPS_ERR) => from <= QPS_ERR,
        (QPS_RESET, QPS_INIT) => true,
        (QPS_INIT, QPS_INIT) | (QPS_INIT, QPS_RTR) => true,
        (QPS_RTR, QPS_RTS) => true,
        (QPS_RTS, QPS_RTS) | (QPS_RTS, QPS_SQD) => true,
        (QPS_SQD, QPS_SQD) | (QPS_SQD, QPS_RTS) => true,
        (QPS_SQE, QPS_RTS) => true,
        _ => false,
    }
}

// Attribute mask bits (IB `ib_qp_attr_mask` values).
/// `new_state` is valid.
pub const QP_ATTR_STATE: u32 = 1 << 0;
/// `cur_state` is valid.
pub const QP_ATTR_CUR_STATE: u32 = 1 << 1;
/// `access_flags`.
pub const QP_ATTR_ACCESS_FLAGS: u32 = 1 << 3;
/// `pkey_index`.
pub const QP_ATTR_PKEY_INDEX: u32 = 1 << 4;
/// Port (must be 1; no field).
pub const QP_ATTR_PORT: u32 = 1 << 5;
/// `qkey`.
pub const QP_ATTR_QKEY: u32 = 1 << 6;
/// Address vector: `sgid_index`, `dgid`, `dmac`, `vlan`, `hop_limit`, `traffic_class`,
/// `flow_label`.
pub const QP_ATTR_AV: u32 = 1 << 7;
/// `path_mtu`.
pub const QP_ATTR_PATH_MTU: u32 = 1 << 8;
/// `timeout`.
pub const QP_ATTR_TIMEOUT: u32 = 1 << 9;
/// `retry_cnt`.
pub const QP_ATTR_RETRY_CNT: u32 = 1 << 10;
/// `rnr_retry`.
pub const QP_ATTR_RNR_RETRY: u32 = 1 << 11;
/// `rq_psn`.
pub const QP_ATTR_RQ_PSN: u32 = 1 << 12;
/// `max_rd_atomic`.
pub const QP_ATTR_MAX_QP_RD_ATOMIC: u32 = 1 << 13;
/// `min_rnr_timer`.
pub const QP_ATTR_MIN_RNR_TIMER: u32 = 1 << 15;
/// `sq_psn`.
pub const QP_ATTR_SQ_PSN: u32 = 1 << 16;
/// `max_dest_rd_atomic`.
pub const QP_ATTR_MAX_DEST_RD_ATOMIC: u32 = 1 << 17;
/// `dest_qpn`.
pub const QP_ATTR_DEST_QPN: u32 = 1 << 20;
/// All mask bits the device understands.
pub const QP_ATTR_VALID_MASK: u32 = QP_ATTR_STATE
    | QP_ATTR_CUR_STATE
    | QP_ATTR_ACCESS_FLAGS
    | QP_ATTR_PKEY_INDEX
    | QP_ATTR_PORT
    | QP_ATTR_QKEY
    | QP_ATTR_AV
    | QP_ATTR_PATH_MTU
    | QP_ATTR_TIMEOUT
    | QP_ATTR_RETRY_CNT
    | QP_ATTR_RNR_RETRY
    | QP_ATTR_RQ_PSN
    | QP_ATTR_MAX_QP_RD_ATOMIC
    | QP_ATTR_MIN_RNR_TIMER
    | QP_ATTR_SQ_PSN
    | QP_ATTR_MAX_DEST_RD_ATOMIC
    | QP_ATTR_DEST_QPN;

/// Largest PSN (24 bits).
pub const PSN_MASK: u32 = 0x00ff_ffff;
/// Largest flow label (20 bits).
pub const FLOW_LABEL_MASK: u32 = 0x000f_ffff;
/// Largest outstanding RDMA READ / atomic depth.
pub const MAX_RD_ATOMIC: u8 = 16;

hw_layout! {
    /// `CMD_MODIFY_QP` payload, and the `CMD_QUERY_QP` output image (with `attr_mask` = all
    /// valid bits and `new_state` = the current state).
    pub struct ModifyQpCmd(72) {
        /// QP number.
        pub qpn: u32,
        /// `QP_ATTR_*` bits naming the valid fields.
        pub attr_mask: u32,
        /// Target state (`QPS_*`), with `QP_ATTR_STATE`.
        pub new_state: u8,
        /// Expected current state, with `QP_ATTR_CUR_STATE`.
        pub cur_state: u8,
        /// Path MTU (`MTU_*`).
        pub path_mtu: u8,
        /// Source GID index.
        pub sgid_index: u8,
        /// Destination GID.
        pub dgid: [u8; 16],
        /// Destination MAC (the next hop's: the gateway's across subnets).
        pub dmac: [u8; 6],
        /// VLAN ID, or [`VLAN_NONE`].
        pub vlan: u16,
        /// Flow label (20 bits); also selects the UDP source port.
        pub flow_label: u32,
        /// Destination QP number (24 bits).
        pub dest_qpn: u32,
        /// Expected receive PSN (24 bits).
        pub rq_psn: u32,
        /// Send PSN (24 bits).
        pub sq_psn: u32,
        /// Q_Key (UD, GSI).
        pub qkey: u32,
        /// Remote access flags (`ACCESS_REMOTE_*`).
        pub access_flags: u32,
        /// Hop limit / TTL.
        pub hop_limit: u8,
        /// Traffic class (DSCP << 2 | ECN).
        pub traffic_class: u8,
        /// Local ACK timeout exponent (4.096 µs × 2^timeout).
        pub timeout: u8,
        /// Transport retry count (0..=7).
        pub retry_cnt: u8,
        /// RNR retry count (0..=7, 7 = infinite).
        pub rnr_retry: u8,
        /// Minimum RNR NAK timer (IB encoding, 0..=31).
        pub min_rnr_timer: u8,
        /// Outstanding RDMA READ / atomic as requester.
        pub max_rd_atomic: u8,
        /// Outstanding RDMA READ / atomic as responder.
        pub max_dest_rd_atomic: u8,
        /// P_Key index (must be 0).
        pub pkey_index: u16,
        /// Reserved, zero.
        pub rsvd: u16,
    }
}
hw_command!(ModifyQpCmd, CMD_MODIFY_QP);

// MR access flags (IB `ib_access_flags` values for the lower bits).
/// Local write.
pub const ACCESS_LOCAL_WRITE: u32 = 1 << 0;
/// Remote write.
pub const ACCESS_REMOTE_WRITE: u32 = 1 << 1;
/// Remote read.
pub const ACCESS_REMOTE_READ: u32 = 1 << 2;
/// Remote atomic.
pub const ACCESS_REMOTE_ATOMIC: u32 = 1 << 3;
/// All access bits the device understands.
pub const ACCESS_VALID_MASK: u32 =
    ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ | ACCESS_REMOTE_ATOMIC;

/// `CreateMrCmd::flags`: covers all host memory with iova = host address (`get_dma_mr`).
pub const MR_FLAG_ALL_MEMORY: u8 = 1 << 0;
/// `CreateMrCmd::flags`: fast-registration MR, invalid until a REG_MR work request.
pub const MR_FLAG_FAST_REG: u8 = 1 << 1;
/// `CreateMrCmd::flags`: defined bits.
pub const MR_FLAGS_VALID: u8 = MR_FLAG_ALL_MEMORY | MR_FLAG_FAST_REG;
/// Maximum pages in an MR page list.
pub const MAX_MR_PAGES: u32 = 1 << 18;

/// The key of MR table index `index` with variant byte `variant`.
pub const fn mr_key(index: u32, variant: u8) -> u32 {
    (index << 8) | variant as u32
}

/// The MR table index of a key.
pub const fn mr_key_index(key: u32) -> u32 {
    key >> 8
}

hw_layout! {
    /// `CMD_CREATE_MR` payload. The region's first byte is at `pages[0] + (iova % page_size)`.
    pub struct CreateMrCmd(48) {
        /// I/O virtual address of the first byte.
        pub iova: u64,
        /// Length in bytes.
        pub length: u64,
        /// Page list (`page_count > 0`) or contiguous buffer; ignored for `MR_FLAG_ALL_MEMORY`
        /// and `MR_FLAG_FAST_REG`.
        pub pages: BufDesc,
        /// Protection domain tag.
        pub pd: u32,
        /// `ACCESS_*`.
        pub access: u32,
        /// `MR_FLAG_*`.
        pub flags: u8,
        /// Low 8 bits of the key (consumer-chosen variant).
        pub key_variant: u8,
        /// Reserved, zero.
        pub rsvd: u16,
        /// For `MR_FLAG_FAST_REG`: maximum pages a REG_MR may map.
        pub max_pages: u32,
    }
}
hw_command!(CreateMrCmd, CMD_CREATE_MR);

hw_layout! {
    /// `CMD_DESTROY_MR` payload.
    pub struct DestroyMrCmd(8) {
        /// MR key.
        pub key: u32,
        /// Reserved, zero.
        pub rsvd: u32,
    }
}
hw_command!(DestroyMrCmd, CMD_DESTROY_MR);

hw_layout! {
    /// `CMD_CREATE_AH` payload (UD address vector).
    pub struct CreateAhCmd(40) {
        /// Protection domain tag.
        pub pd: u32,
        /// Flow label (20 bits).
        pub flow_label: u32,
        /// Destination GID.
        pub dgid: [u8; 16],
        /// Destination (next hop) MAC.
        pub dmac: [u8; 6],
        /// VLAN ID or [`VLAN_NONE`].
        pub vlan: u16,
        /// Source GID index.
        pub sgid_index: u8,
        /// Hop limit / TTL.
        pub hop_limit: u8,
        /// Traffic class.
        pub traffic_class: u8,
        /// Reserved, zero.
        pub rsvd0: u8,
        /// Reserved, zero.
        pub rsvd1: u32,
    }
}
hw_command!(CreateAhCmd, CMD_CREATE_AH);

hw_layout! {
    /// `CMD_DESTROY_AH` payload.
    pub struct DestroyAhCmd(8) {
        /// AH number.
        pub ah: u32,
        /// Reserved, zero.
        pub rsvd: u32,
    }
}
hw_command!(DestroyAhCmd, CMD_DESTROY_AH);

hw_layout! {
    /// `CMD_CREATE_SRQ` payload.
    pub struct CreateSrqCmd(40) {
        /// Receive ring.
        pub ring: BufDesc,
        /// Doorbell record ([`SrqDbRecord`]), 8-byte aligned.
        pub dbrec_addr: u64,
        /// Protection domain tag.
        pub pd: u32,
        /// Limit: `SRQ_LIMIT` event when fewer WQEs remain (0 = disarmed).
        pub limit: u32,
        /// log2 of entries.
        pub log_size: u8,
        /// log2 of the WQE stride.
        pub log_stride: u8,
        /// Reserved, zero.
        pub rsvd0: u16,
        /// Reserved, zero.
        pub rsvd1: u32,
    }
}
hw_command!(CreateSrqCmd, CMD_CREATE_SRQ);

hw_layout! {
    /// `CMD_DESTROY_SRQ` payload.
    pub struct DestroySrqCmd(8) {
        /// SRQ number.
        pub srqn: u32,
        /// Reserved, zero.
        pub rsvd: u32,
    }
}
hw_command!(DestroySrqCmd, CMD_DESTROY_SRQ);

hw_layout! {
    /// `CMD_MODIFY_SRQ` payload: (re-)arm the limit event.
    pub struct ModifySrqCmd(8) {
        /// SRQ number.
        pub srqn: u32,
        /// New limit (0 disarms); must be below the ring size.
        pub limit: u32,
    }
}
hw_command!(ModifySrqCmd, CMD_MODIFY_SRQ);

// GIDs.
/// GID table length.
pub const GID_TABLE_LEN: u32 = 128;
/// GID type RoCE v1 (GRH, ethertype 0x8915).
pub const GID_TYPE_ROCE_V1: u8 = 1;
/// GID type RoCE v2 (UDP/IP).
pub const GID_TYPE_ROCE_V2: u8 = 2;
/// Address family: IPv4-mapped IPv6 (`::ffff:a.b.c.d`).
pub const GID_FAMILY_IPV4: u8 = 1;
/// Address family: IPv6.
pub const GID_FAMILY_IPV6: u8 = 2;

/// Whether a GID is an IPv4-mapped address (`::ffff:a.b.c.d`).
pub fn gid_is_ipv4_mapped(gid: &[u8; 16]) -> bool {
    gid[..10].iter().all(|&b| b == 0) && gid[10] == 0xff && gid[11] == 0xff
}

/// The link-local GID `fe80::` + EUI-64 of `mac` (GID 0/1 of a port, seed 2 §4).
pub const fn gid_from_mac(mac: [u8; 6]) -> [u8; 16] {
    [
        0xfe,
        0x80,
        0,
        0,
        0,
        0,
        0,
        0,
        mac[0] ^ 0x02,
        mac[1],
        mac[2],
        0xff,
        0xfe,
        mac[3],
        mac[4],
        mac[5],
    ]
}

hw_layout! {
    /// `CMD_SET_GID` payload.
    pub struct SetGidCmd(32) {
        /// Table index (< `GID_TABLE_LEN`).
        pub index: u32,
        /// `GID_TYPE_*`.
        pub gid_type: u8,
        /// `GID_FAMILY_*`; must agree with the GID.
        pub family: u8,
        /// Reserved, zero.
        pub rsvd: u16,
        /// The GID.
        pub gid: [u8; 16],
        /// Source MAC for frames from this GID.
        pub mac: [u8; 6],
        /// VLAN ID or [`VLAN_NONE`].
        pub vlan: u16,
    }
}
hw_command!(SetGidCmd, CMD_SET_GID);

hw_layout! {
    /// `CMD_CLEAR_GID` payload.
    pub struct ClearGidCmd(8) {
        /// Table index.
        pub index: u32,
        /// Reserved, zero.
        pub rsvd: u32,
    }
}
hw_command!(ClearGidCmd, CMD_CLEAR_GID);

hw_layout! {
    /// `CMD_QUERY_COUNTERS` payload: copies `count` u64 counters starting at `first` to the
    /// header's `out_addr`.
    pub struct QueryCountersCmd(8) {
        /// First counter index.
        pub first: u32,
        /// Number of counters.
        pub count: u32,
    }
}
hw_command!(QueryCountersCmd, CMD_QUERY_COUNTERS);

hw_layout! {
    /// `CMD_ALLOC_CTX` payload (none).
    pub struct AllocCtxCmd(8) {
        /// Reserved, zero.
        pub rsvd: u64,
    }
}
hw_command!(AllocCtxCmd, CMD_ALLOC_CTX);

hw_layout! {
    /// `CMD_FREE_CTX` payload. Context 0 cannot be freed.
    pub struct FreeCtxCmd(8) {
        /// Context number.
        pub ctx: u32,
        /// Reserved, zero.
        pub rsvd: u32,
    }
}
hw_command!(FreeCtxCmd, CMD_FREE_CTX);

/// QID kind: a QP (SQ, RQ and push doorbells).
pub const QID_KIND_QP: u8 = 1;
/// QID kind: an SRQ (SRQ doorbells).
pub const QID_KIND_SRQ: u8 = 2;
/// QID kind: a CQ (arm doorbells).
pub const QID_KIND_CQ: u8 = 3;

hw_layout! {
    /// `CMD_MAP_QID` payload: doorbells on context `ctx`'s page naming `local_qid` act on
    /// queue `global` of kind `kind`.
    pub struct MapQidCmd(16) {
        /// Context.
        pub ctx: u32,
        /// Local QID (< `QID_TABLE_LEN`).
        pub local_qid: u32,
        /// Global QPN, SRQN or CQN.
        pub global: u32,
        /// `QID_KIND_*`.
        pub kind: u8,
        /// Reserved, zero.
        pub rsvd: [u8; 3],
    }
}
hw_command!(MapQidCmd, CMD_MAP_QID);

hw_layout! {
    /// `CMD_UNMAP_QID` payload.
    pub struct UnmapQidCmd(8) {
        /// Context.
        pub ctx: u32,
        /// Local QID.
        pub local_qid: u32,
    }
}
hw_command!(UnmapQidCmd, CMD_UNMAP_QID);

// ---------------------------------------------------------------------------------------------
// Event queue entries.
// ---------------------------------------------------------------------------------------------

hw_layout! {
    /// Event queue entry (16 bytes).
    pub struct Eqe(16) {
        /// `EVENT_*`.
        pub event_type: u8,
        /// Event-specific detail (`WQE_ERR_*` for QP errors).
        pub subtype: u8,
        /// Reserved.
        pub rsvd0: u16,
        /// First datum: CQN, QPN, SRQN, token, fatal code, context.
        pub data0: u32,
        /// Second datum: command index, raw doorbell value.
        pub data1: u32,
        /// Reserved.
        pub rsvd1: u16,
        /// Reserved.
        pub rsvd2: u8,
        /// Owner bit (bit 0), written last.
        pub owner: u8,
    }
}

/// CQ `data0` has a completion event (completion EQs).
pub const EVENT_COMPLETION: u8 = 0x01;
/// Command `data0` (token) at index `data1` completed (command EQ).
pub const EVENT_CMD_DONE: u8 = 0x02;
/// QP `data0` hit a fatal error (malformed WQE, DMA error) and moved to ERR.
pub const EVENT_QP_FATAL: u8 = 0x10;
/// QP `data0`: invalid request received (responder).
pub const EVENT_QP_REQ_ERR: u8 = 0x11;
/// QP `data0`: access violation (responder).
pub const EVENT_QP_ACCESS_ERR: u8 = 0x12;
/// QP `data0`: last WQE reached (QP with SRQ in ERR).
pub const EVENT_QP_LAST_WQE_REACHED: u8 = 0x13;
/// QP `data0`: send queue drained (SQD).
pub const EVENT_SQ_DRAINED: u8 = 0x14;
/// QP `data0`: communication established.
pub const EVENT_COMM_EST: u8 = 0x15;
/// CQ `data0` overran or hit a DMA error; it is in error.
pub const EVENT_CQ_ERROR: u8 = 0x20;
/// SRQ `data0` fell below its limit (disarms the limit).
pub const EVENT_SRQ_LIMIT: u8 = 0x30;
/// SRQ `data0` hit an error.
pub const EVENT_SRQ_ERR: u8 = 0x31;
/// Port became active.
pub const EVENT_PORT_ACTIVE: u8 = 0x40;
/// Port went down.
pub const EVENT_PORT_DOWN: u8 = 0x41;
/// The device is in fatal state, `data0` = `FATAL_*`.
pub const EVENT_DEVICE_FATAL: u8 = 0x50;
/// A doorbell on context `data0` was rejected; `data1` = raw value.
pub const EVENT_DOORBELL_ERROR: u8 = 0x51;

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

// ---------------------------------------------------------------------------------------------
// Work queue entries.
// ---------------------------------------------------------------------------------------------

// Send opcodes.
/// SEND.
pub const WR_SEND: u8 = 0x00;
/// SEND with immediate.
pub const WR_SEND_WITH_IMM: u8 = 0x01;
/// SEND with invalidate (`imm_or_inv` = rkey to invalidate at the responder).
pub const WR_SEND_WITH_INV: u8 = 0x02;
/// RDMA WRITE.
pub const WR_RDMA_WRITE: u8 = 0x03;
/// RDMA WRITE with immediate.
pub const WR_RDMA_WRITE_WITH_IMM: u8 = 0x04;
/// RDMA READ.
pub const WR_RDMA_READ: u8 = 0x05;
/// Atomic compare and swap (8 bytes, one SGE of 8 bytes receives the original value).
pub const WR_ATOMIC_CMP_SWAP: u8 = 0x06;
/// Atomic fetch and add.
pub const WR_ATOMIC_FETCH_ADD: u8 = 0x07;
/// Fast registration of an MR ([`RegMrSeg`]).
pub const WR_REG_MR: u8 = 0x08;
/// Local invalidate (`imm_or_inv` = key).
pub const WR_LOCAL_INV: u8 = 0x09;

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
/// Defined WQE flags.
pub const WQE_FLAGS_VALID: u8 =
    WQE_FLAG_SIGNALED | WQE_FLAG_SOLICITED | WQE_FLAG_FENCE | WQE_FLAG_INLINE | WQE_FLAG_AV;

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
        /// Reserved, zero.
        pub rsvd2: u32,
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
        /// VLAN ID or [`VLAN_NONE`].
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

/// Whether `opcode` is a defined send opcode.
pub const fn send_opcode_valid(opcode: u8) -> bool {
    opcode <= WR_LOCAL_INV
}

/// Whether a send opcode is allowed on a QP type.
pub const fn send_opcode_allowed(qp_type: u8, opcode: u8) -> bool {
    match qp_type {
        QPT_RC => send_opcode_valid(opcode),
        QPT_UD | QPT_GSI => matches!(opcode, WR_SEND | WR_SEND_WITH_IMM),
        _ => false,
    }
}

/// Why a WQE is malformed (`WQE_ERR_*` as an enum).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WqeError {
    /// Unknown opcode.
    BadOpcode,
    /// Opcode not valid for the QP type.
    BadQpType,
    /// Too many SGEs.
    BadSgeCount,
    /// Inline length too long or does not fit.
    BadInline,
}

impl WqeError {
    /// The `WQE_ERR_*` code.
    pub const fn code(&self) -> u8 {
        match self {
            WqeError::BadOpcode => WQE_ERR_BAD_OPCODE,
            WqeError::BadQpType => WQE_ERR_BAD_QP_TYPE,
            WqeError::BadSgeCount => WQE_ERR_BAD_SGE_COUNT,
            WqeError::BadInline => WQE_ERR_BAD_INLINE,
        }
    }
}

/// Validates a send WQE's control segment against its QP type and stride.
pub const fn validate_send_wqe(ctrl: &WqeCtrl, qp_type: u8, stride: usize) -> Result<(), WqeError> {
    if !send_opcode_valid(ctrl.opcode) {
        return Err(WqeError::BadOpcode);
    }
    if !send_opcode_allowed(qp_type, ctrl.opcode) {
        return Err(WqeError::BadQpType);
    }
    if ctrl.flags & WQE_FLAG_AV != 0 && !matches!(qp_type, QPT_UD | QPT_GSI) {
        return Err(WqeError::BadQpType);
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
pub fn wqe_sge(wqe: &[u8], first: usize, i: usize) -> Option<Sge> {
    Sge::read_from(wqe.get(first.checked_add(i.checked_mul(Sge::SIZE)?)?..)?)
}

// ---------------------------------------------------------------------------------------------
// Completion queue entries.
// ---------------------------------------------------------------------------------------------

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
        /// Reserved.
        pub rsvd2: [u8; 16],
        /// Reserved.
        pub rsvd3: u16,
        /// Reserved.
        pub rsvd4: u8,
        /// Owner bit (bit 0), written last; see [`Ring::owner`].
        pub owner: u8,
    }
}

/// Offset of the CQE owner byte.
pub const CQE_OWNER_OFFSET: usize = 63;
/// Offset of the EQE owner byte.
pub const EQE_OWNER_OFFSET: usize = 15;
/// Offset of the command completion owner byte.
pub const CMD_COMPLETION_OWNER_OFFSET: usize = 31;
const _: () = assert!(offset_of!(Cqe, owner) == CQE_OWNER_OFFSET);
const _: () = assert!(offset_of!(Eqe, owner) == EQE_OWNER_OFFSET);
const _: () = assert!(offset_of!(CmdCompletion, owner) == CMD_COMPLETION_OWNER_OFFSET);

// CQE opcodes.
/// SEND completed.
pub const CQE_OP_SEND: u8 = 0x00;
/// RDMA WRITE completed.
pub const CQE_OP_RDMA_WRITE: u8 = 0x01;
/// RDMA READ completed.
pub const CQE_OP_RDMA_READ: u8 = 0x02;
/// Compare and swap completed.
pub const CQE_OP_CMP_SWAP: u8 = 0x03;
/// Fetch and add completed.
pub const CQE_OP_FETCH_ADD: u8 = 0x04;
/// REG_MR completed.
pub const CQE_OP_REG_MR: u8 = 0x05;
/// LOCAL_INV completed.
pub const CQE_OP_LOCAL_INV: u8 = 0x06;
/// Receive completed (SEND, SEND_WITH_IMM, SEND_WITH_INV).
pub const CQE_OP_RECV: u8 = 0x80;
/// Receive of an RDMA WRITE with immediate.
pub const CQE_OP_RECV_RDMA_WITH_IMM: u8 = 0x81;

/// The CQE opcode for a completed send WQE opcode.
pub const fn cqe_opcode_for_send(wr_opcode: u8) -> u8 {
    match wr_opcode {
        WR_RDMA_WRITE | WR_RDMA_WRITE_WITH_IMM => CQE_OP_RDMA_WRITE,
        WR_RDMA_READ => CQE_OP_RDMA_READ,
        WR_ATOMIC_CMP_SWAP => CQE_OP_CMP_SWAP,
        WR_ATOMIC_FETCH_ADD => CQE_OP_FETCH_ADD,
        WR_REG_MR => CQE_OP_REG_MR,
        WR_LOCAL_INV => CQE_OP_LOCAL_INV,
        _ => CQE_OP_SEND,
    }
}

// CQE flags.
/// `imm_or_inv` holds immediate data.
pub const CQE_FLAG_WITH_IMM: u8 = 1 << 0;
/// `imm_or_inv` holds an invalidated key.
pub const CQE_FLAG_WITH_INV: u8 = 1 << 1;
/// A GRH (or IP header image) precedes the payload in the receive buffer (UD / GSI).
pub const CQE_FLAG_GRH: u8 = 1 << 2;
/// The sender requested a solicited event.
pub const CQE_FLAG_SOLICITED: u8 = 1 << 3;

/// Network header type of a UD receive: RoCE v1 (GRH).
pub const NET_HDR_GRH: u8 = 0;
/// RoCE v2 over IPv4.
pub const NET_HDR_IPV4: u8 = 1;
/// RoCE v2 over IPv6.
pub const NET_HDR_IPV6: u8 = 2;

// Work completion status (IB `ib_wc_status` values).
/// Success.
pub const WC_SUCCESS: u8 = 0;
/// Local length error.
pub const WC_LOC_LEN_ERR: u8 = 1;
/// Local QP operation error.
pub const WC_LOC_QP_OP_ERR: u8 = 2;
/// Local protection error.
pub const WC_LOC_PROT_ERR: u8 = 4;
/// Flushed: the QP is in error.
pub const WC_WR_FLUSH_ERR: u8 = 5;
/// Bad response.
pub const WC_BAD_RESP_ERR: u8 = 7;
/// Local access error.
pub const WC_LOC_ACCESS_ERR: u8 = 8;
/// Remote invalid request.
pub const WC_REM_INV_REQ_ERR: u8 = 9;
/// Remote access error.
pub const WC_REM_ACCESS_ERR: u8 = 10;
/// Remote operation error.
pub const WC_REM_OP_ERR: u8 = 11;
/// Transport retries exceeded.
pub const WC_RETRY_EXC_ERR: u8 = 12;
/// RNR retries exceeded.
pub const WC_RNR_RETRY_EXC_ERR: u8 = 13;
/// Fatal error.
pub const WC_FATAL_ERR: u8 = 19;
/// General error.
pub const WC_GENERAL_ERR: u8 = 21;

/// Size of an EQE ring entry.
pub const EQE_SIZE: usize = Eqe::SIZE;
/// Size of a CQE ring entry.
pub const CQE_SIZE: usize = Cqe::SIZE;
