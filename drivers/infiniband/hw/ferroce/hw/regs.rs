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
