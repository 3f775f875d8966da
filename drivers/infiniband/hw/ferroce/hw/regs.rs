// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! PCI identity, the BAR0 map, its registers and the capability bits.

/// PCI vendor ID (QEMU's experimental vendor ID range, as used by emulated devices).
pub const PCI_VENDOR_ID: u16 = 0x1234;
/// PCI device ID of the ferroce function (the physical function of a NIC).
pub const PCI_DEVICE_ID: u16 = 0xfe01;
/// PCI device ID of a virtual function: the same interface, within limits the host set.
pub const PCI_VF_DEVICE_ID: u16 = 0xfe02;
/// Subsystem vendor ID.
#[cfg(userspace)] // The device presents them.
pub const PCI_SUBSYSTEM_VENDOR_ID: u16 = 0x1234;
/// Subsystem ID.
#[cfg(userspace)] // The device presents them.
pub const PCI_SUBSYSTEM_ID: u16 = 0x0001;
/// Revision ID.
#[cfg(userspace)] // The device presents them.
pub const PCI_REVISION: u8 = 0x01;
/// Class code: network controller (0x02), InfiniBand controller (0x07), prog-if 0. The Ethernet
/// function is the companion virtio-net device, so this function carries only RDMA.
#[cfg(userspace)] // The device presents them.
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
pub const IF_VERSION_MINOR: u16 = 4;
/// `REG_IF_VERSION` value for this interface.
pub const IF_VERSION: u32 = ((IF_VERSION_MAJOR as u32) << 16) | IF_VERSION_MINOR as u32;

/// Returns the major version of an `REG_IF_VERSION` value.
pub const fn if_version_major(reg: u32) -> u16 {
    (reg >> 16) as u16
}

/// The BAR0 registers, each declared once, here: `$make! { ... }` receives the table, one entry
/// per register, `REG_OFFSET_NAME: NAME(storage) @ offset { bit fields }`. This module makes the
/// offset constants (`REG_*`) from it; the kernel driver makes its typed registers from it
/// (`register!`, in `regs.rs`), with the same fields.
macro_rules! bar0_registers {
    ($make:ident) => {
        $make! {
            // Identification and limits (read-only).
            /// Identification magic, `ID_MAGIC`.
            REG_ID: ID(u32) @ 0x000 {
                31:0 value;
            }
            /// Interface version, `IF_VERSION`.
            REG_IF_VERSION: IF_VERSION(u32) @ 0x004 {
                31:16 major;
                15:0 minor;
            }
            /// Capability bits (`CAP_*`).
            REG_CAPS: CAPS(u32) @ 0x008 {
                31:0 value;
            }
            /// Number of MSI-X vectors.
            REG_NUM_MSIX: NUM_MSIX(u32) @ 0x00c {
                31:0 value;
            }
            /// Maximum number of QPs (QPNs 0 and 1 are reserved, 1 is the GSI QP).
            REG_MAX_QP: MAX_QP(u32) @ 0x010 {
                31:0 value;
            }
            /// Maximum number of CQs.
            REG_MAX_CQ: MAX_CQ(u32) @ 0x014 {
                31:0 value;
            }
            /// Maximum number of MRs.
            REG_MAX_MR: MAX_MR(u32) @ 0x018 {
                31:0 value;
            }
            /// Maximum number of SRQs.
            REG_MAX_SRQ: MAX_SRQ(u32) @ 0x01c {
                31:0 value;
            }
            /// Maximum number of AHs.
            REG_MAX_AH: MAX_AH(u32) @ 0x020 {
                31:0 value;
            }
            /// Maximum number of EQs (EQ 0 async, EQ 1 command, the rest completion EQs).
            REG_MAX_EQ: MAX_EQ(u32) @ 0x024 {
                31:0 value;
            }
            /// Number of GID table entries.
            REG_GID_TABLE_LEN: GID_TABLE_LEN(u32) @ 0x028 {
                31:0 value;
            }
            /// Number of doorbell pages (contexts).
            REG_NUM_DB_PAGES: NUM_DB_PAGES(u32) @ 0x02c {
                31:0 value;
            }
            /// Largest `log_size` of any ring.
            REG_MAX_LOG_QUEUE: MAX_LOG_QUEUE(u32) @ 0x030 {
                31:0 value;
            }
            /// Maximum scatter/gather entries per WQE.
            REG_MAX_SGE: MAX_SGE(u32) @ 0x034 {
                31:0 value;
            }
            /// Maximum inline payload in bytes.
            REG_MAX_INLINE: MAX_INLINE(u32) @ 0x038 {
                31:0 value;
            }
            /// Maximum pages in one MR page list.
            REG_MAX_MR_PAGES: MAX_MR_PAGES(u32) @ 0x03c {
                31:0 value;
            }
            /// BAR0 offset of doorbell page 0.
            REG_DB_AREA_OFFSET: DB_AREA_OFFSET(u32) @ 0x040 {
                31:0 value;
            }
            /// BAR0 offset of the counter block.
            REG_COUNTERS_OFFSET: COUNTERS_OFFSET(u32) @ 0x044 {
                31:0 value;
            }
            /// Number of counters.
            REG_NUM_COUNTERS: NUM_COUNTERS(u32) @ 0x048 {
                31:0 value;
            }
            /// Local queue IDs per context (QID translation table length).
            REG_QID_TABLE_LEN: QID_TABLE_LEN(u32) @ 0x04c {
                31:0 value;
            }
            /// Upper bound in milliseconds on any command's execution; a driver times out after
            /// this.
            REG_CMD_TIMEOUT_MS: CMD_TIMEOUT_MS(u32) @ 0x050 {
                31:0 value;
            }
                        /// Device control (read/write): `CTRL_*`.
            REG_DEV_CTRL: DEV_CTRL(u32) @ 0x080 {
                1:1 reset;
                0:0 enable;
            }
            /// Device status (read-only): `STATUS_*`.
            REG_DEV_STATUS: DEV_STATUS(u32) @ 0x084 {
                2:2 enabled;
                1:1 fatal;
                0:0 ready;
            }
            /// Fatal error code (read-only, `FATAL_*`), valid while `STATUS_FATAL` is set.
            REG_FATAL_CODE: FATAL_CODE(u32) @ 0x088 {
                31:0 value;
            }
            // The command queue.
            /// Command ring (128-byte entries) base address, low 32 bits. 128-byte aligned.
            REG_CMDQ_SQ_BASE_LO: CMDQ_SQ_BASE_LO(u32) @ 0x100 {
                31:0 value;
            }
            /// Command ring base address, high 32 bits.
            REG_CMDQ_SQ_BASE_HI: CMDQ_SQ_BASE_HI(u32) @ 0x104 {
                31:0 value;
            }
            /// Command completion ring (32-byte entries) base address, low 32 bits. 32-byte
            /// aligned.
            REG_CMDQ_CQ_BASE_LO: CMDQ_CQ_BASE_LO(u32) @ 0x108 {
                31:0 value;
            }
            /// Command completion ring base address, high 32 bits.
            REG_CMDQ_CQ_BASE_HI: CMDQ_CQ_BASE_HI(u32) @ 0x10c {
                31:0 value;
            }
            /// log2 of the number of entries of both command rings (0..=`MAX_LOG_CMDQ`).
            REG_CMDQ_LOG_SIZE: CMDQ_LOG_SIZE(u32) @ 0x110 {
                31:0 value;
            }
            /// Command queue control: `CMDQ_CTRL_ENABLE`. Base and size are latched when enabled.
            REG_CMDQ_CTRL: CMDQ_CTRL(u32) @ 0x114 {
                0:0 enable;
            }
            /// Command doorbell: write the new producer index (low 16 bits).
            REG_CMDQ_DB: CMDQ_DB(u32) @ 0x118 {
                15:0 pi;
            }
            /// Device consumer index of the command ring (read-only).
            REG_CMDQ_CI: CMDQ_CI(u32) @ 0x11c {
                31:0 value;
            }
            /// Command queue status (read-only): `CMDQ_STATUS_*`.
            REG_CMDQ_STATUS: CMDQ_STATUS(u32) @ 0x120 {
                1:1 error;
                0:0 enabled;
            }
            // Event queue setup (EQ 0 async and EQ 1 command, which must exist before
            // commands can complete by interrupt; completion EQs are made with
            // `CMD_CREATE_EQ`).
            /// EQ ring base, low 32 bits (16-byte EQEs, physically contiguous, 64-byte aligned).
            REG_EQ_SETUP_BASE_LO: EQ_SETUP_BASE_LO(u32) @ 0x180 {
                31:0 value;
            }
            /// EQ ring base, high 32 bits.
            REG_EQ_SETUP_BASE_HI: EQ_SETUP_BASE_HI(u32) @ 0x184 {
                31:0 value;
            }
            /// log2 of the number of EQEs.
            REG_EQ_SETUP_LOG_SIZE: EQ_SETUP_LOG_SIZE(u32) @ 0x188 {
                31:0 value;
            }
            /// MSI-X vector of the EQ.
            REG_EQ_SETUP_VECTOR: EQ_SETUP_VECTOR(u32) @ 0x18c {
                31:0 value;
            }
            /// Write `eqn | EQ_SETUP_CREATE` to create EQ `eqn` (0 or 1) from the setup
            /// registers, or `eqn` alone to destroy it. The outcome is in
            /// `REG_EQ_SETUP_STATUS`.
            REG_EQ_SETUP_CTRL: EQ_SETUP_CTRL(u32) @ 0x190 {
                31:31 create;
                7:0 eqn;
            }
            /// Status (`STATUS_*` command status code) of the last `REG_EQ_SETUP_CTRL` write.
            REG_EQ_SETUP_STATUS: EQ_SETUP_STATUS(u32) @ 0x194 {
                31:0 value;
            }
            /// EQ doorbell: consumer index update and arm, `EqDoorbell`.
            REG_EQ_DB: EQ_DB(u32) @ 0x1a0 {
                31:31 arm;
                23:16 eqn;
                15:0 ci;
            }
        }
    };
}
#[cfg(not(userspace))] // The kernel driver's `regs.rs`.
pub(crate) use bar0_registers;

/// The offset constants of the table: `REG_ID` and the rest. The kernel driver reaches each
/// register through its typed register instead, whose offset is the same entry's.
#[cfg(userspace)]
macro_rules! offsets {
    ($(
        $(#[$doc:meta])*
        $offset_name:ident: $name:ident($storage:ty) @ $offset:literal { $($fields:tt)* }
    )*) => {
        $($(#[$doc])* pub const $offset_name: usize = $offset;)*
    };
}
#[cfg(userspace)]
bar0_registers!(offsets);

/// Scratch register (read/write, no side effect), for bring-up and tests.
#[cfg(userspace)] // Bring-up tools (ferroce-bar) and the device.
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

hw_codes! {
    /// Returns the name of a fatal error code (`REG_FATAL_CODE`), for messages.
    fn fatal_name(u32);
    {
        /// No fatal error.
        FATAL_NONE = 0 => "none",
        /// The command queue rings could not be accessed by DMA.
        FATAL_CMDQ_DMA = 1 => "command queue DMA",
        /// An event queue could not be written by DMA.
        FATAL_EQ_DMA = 2 => "event queue DMA",
        /// Internal device error.
        FATAL_INTERNAL = 3 => "internal",
        /// Injected by the host control interface.
        FATAL_INJECTED = 4 => "injected",
    }
}

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
#[cfg(userspace)] // The driver takes it from `REG_COUNTERS_OFFSET`.
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
/// UC QPs.
pub const CAP_UC: u32 = 1 << 11;
/// CQ resizing (`CMD_RESIZE_CQ`).
pub const CAP_CQ_RESIZE: u32 = 1 << 12;
/// SRQ resizing (`CMD_RESIZE_SRQ`).
pub const CAP_SRQ_RESIZE: u32 = 1 << 13;
/// Memory windows, type 1 and 2 (`CMD_CREATE_MW`, BIND_MW work requests).
pub const CAP_MW: u32 = 1 << 14;
/// Multicast groups for UD QPs (`CMD_ATTACH_MCAST`, `CMD_DETACH_MCAST`).
pub const CAP_MCAST: u32 = 1 << 15;
/// Doorbell records polled by the device: a QP created with `QP_FLAG_DB_RECORD` needs no SQ
/// doorbell write, the device watches its record.
pub const CAP_DB_RECORD: u32 = 1 << 16;
/// ATOMIC_WRITE work requests and their responder (IBTA 1.5).
pub const CAP_ATOMIC_WRITE: u32 = 1 << 17;
/// FLUSH work requests and their responder, both placement types (IBTA 1.5), and the MR and
/// QP access flags `ACCESS_FLUSH_GLOBAL` and `ACCESS_FLUSH_PERSISTENT`.
pub const CAP_FLUSH: u32 = 1 << 18;
/// XRC (interface 1.3): XRC_INI and XRC_TGT QPs, XRC SRQs, the XRC opcodes with their
/// XRCETH on the wire, and the delivery rules of an XRC domain.
pub const CAP_XRC: u32 = 1 << 19;
/// On-demand paging (interface 1.4): MRs created with `MR_FLAG_ON_DEMAND`, whose pages the
/// driver maps when the device faults on them (`EventType::PageFault`,
/// `CMD_UPDATE_MR_PAGES`).
pub const CAP_ODP: u32 = 1 << 20;
