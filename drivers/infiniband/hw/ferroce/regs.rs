// SPDX-License-Identifier: GPL-2.0

//! BAR0 registers of the ferroce function, and the shared BAR mapping.
//!
//! The offsets and bits are those of `hw.rs` (`REG_*`, `CTRL_*`, `STATUS_*`, ...):
//! `register!` takes literal offsets only, so every definition below is tied to its `hw.rs`
//! constant by a compile-time assertion.

use kernel::{
    io::{
        register,
        register::Register, //
    },
    pci,
    prelude::*,
    sync::Arc, //
};

use crate::hw;

register! {
    /// Identification magic, [`hw::ID_MAGIC`].
    pub(crate) ID(u32) @ 0x000 {
        31:0 value;
    }
    /// Hardware interface version.
    pub(crate) IF_VERSION(u32) @ 0x004 {
        31:16 major;
        15:0 minor;
    }
    /// Capability bits, `hw::CAP_*`.
    pub(crate) CAPS(u32) @ 0x008 {
        31:0 value;
    }
    /// Number of MSI-X vectors.
    pub(crate) NUM_MSIX(u32) @ 0x00c {
        31:0 value;
    }
    /// QP table size.
    pub(crate) MAX_QP(u32) @ 0x010 {
        31:0 value;
    }
    /// CQ table size.
    pub(crate) MAX_CQ(u32) @ 0x014 {
        31:0 value;
    }
    /// MR table size.
    pub(crate) MAX_MR(u32) @ 0x018 {
        31:0 value;
    }
    /// SRQ table size.
    pub(crate) MAX_SRQ(u32) @ 0x01c {
        31:0 value;
    }
    /// AH table size.
    pub(crate) MAX_AH(u32) @ 0x020 {
        31:0 value;
    }
    /// EQ table size (0 async, 1 command, 2.. completion).
    pub(crate) MAX_EQ(u32) @ 0x024 {
        31:0 value;
    }
    /// GID table entries.
    pub(crate) GID_TABLE_LEN(u32) @ 0x028 {
        31:0 value;
    }
    /// Doorbell pages (contexts).
    pub(crate) NUM_DB_PAGES(u32) @ 0x02c {
        31:0 value;
    }
    /// Largest ring `log_size`.
    pub(crate) MAX_LOG_QUEUE(u32) @ 0x030 {
        31:0 value;
    }
    /// SGEs per WQE.
    pub(crate) MAX_SGE(u32) @ 0x034 {
        31:0 value;
    }
    /// Inline bytes per WQE.
    pub(crate) MAX_INLINE(u32) @ 0x038 {
        31:0 value;
    }
    /// Pages per MR page list.
    pub(crate) MAX_MR_PAGES(u32) @ 0x03c {
        31:0 value;
    }
    /// BAR0 offset of doorbell page 0.
    pub(crate) DB_AREA_OFFSET(u32) @ 0x040 {
        31:0 value;
    }
    /// BAR0 offset of the counters.
    pub(crate) COUNTERS_OFFSET(u32) @ 0x044 {
        31:0 value;
    }
    /// Number of counters.
    pub(crate) NUM_COUNTERS(u32) @ 0x048 {
        31:0 value;
    }
    /// Local QIDs per context.
    pub(crate) QID_TABLE_LEN(u32) @ 0x04c {
        31:0 value;
    }
    /// Upper bound of a command's execution time, in milliseconds.
    pub(crate) CMD_TIMEOUT_MS(u32) @ 0x050 {
        31:0 value;
    }
    /// Device control.
    pub(crate) DEV_CTRL(u32) @ 0x080 {
        1:1 reset;
        0:0 enable;
    }
    /// Device status.
    pub(crate) DEV_STATUS(u32) @ 0x084 {
        2:2 enabled;
        1:1 fatal;
        0:0 ready;
    }
    /// Fatal error code (`hw::FATAL_*`) while `DEV_STATUS.fatal` is set.
    pub(crate) FATAL_CODE(u32) @ 0x088 {
        31:0 value;
    }
    /// Command ring base, low half.
    pub(crate) CMDQ_SQ_BASE_LO(u32) @ 0x100 {
        31:0 value;
    }
    /// Command ring base, high half.
    pub(crate) CMDQ_SQ_BASE_HI(u32) @ 0x104 {
        31:0 value;
    }
    /// Command completion ring base, low half.
    pub(crate) CMDQ_CQ_BASE_LO(u32) @ 0x108 {
        31:0 value;
    }
    /// Command completion ring base, high half.
    pub(crate) CMDQ_CQ_BASE_HI(u32) @ 0x10c {
        31:0 value;
    }
    /// log2 of the entries of both command rings.
    pub(crate) CMDQ_LOG_SIZE(u32) @ 0x110 {
        31:0 value;
    }
    /// Command queue control.
    pub(crate) CMDQ_CTRL(u32) @ 0x114 {
        0:0 enable;
    }
    /// Command doorbell: the new producer index.
    pub(crate) CMDQ_DB(u32) @ 0x118 {
        15:0 pi;
    }
    /// Device consumer index of the command ring (the whole register, to validate it).
    pub(crate) CMDQ_CI(u32) @ 0x11c {
        31:0 value;
    }
    /// Command queue status.
    pub(crate) CMDQ_STATUS(u32) @ 0x120 {
        1:1 error;
        0:0 enabled;
    }
    /// EQ ring base (EQ 0 and 1), low half.
    pub(crate) EQ_SETUP_BASE_LO(u32) @ 0x180 {
        31:0 value;
    }
    /// EQ ring base, high half.
    pub(crate) EQ_SETUP_BASE_HI(u32) @ 0x184 {
        31:0 value;
    }
    /// log2 of the EQEs of the EQ being set up.
    pub(crate) EQ_SETUP_LOG_SIZE(u32) @ 0x188 {
        31:0 value;
    }
    /// MSI-X vector of the EQ being set up.
    pub(crate) EQ_SETUP_VECTOR(u32) @ 0x18c {
        31:0 value;
    }
    /// Creates (with `create`) or destroys EQ `eqn`.
    pub(crate) EQ_SETUP_CTRL(u32) @ 0x190 {
        31:31 create;
        7:0 eqn;
    }
    /// Command status code (`hw::STATUS_*`) of the last `EQ_SETUP_CTRL` write.
    pub(crate) EQ_SETUP_STATUS(u32) @ 0x194 {
        31:0 value;
    }
    /// EQ doorbell, [`hw::EqDoorbell`].
    pub(crate) EQ_DB(u32) @ 0x1a0 {
        31:31 arm;
        23:16 eqn;
        15:0 ci;
    }
    /// Doorbell page 0 (the kernel's context): send queue producer index.
    pub(crate) DB_SQ(u32) @ 0x10000 {
        31:16 qid;
        15:0 pi;
    }
    /// Doorbell page 0: receive queue producer index (wakes the engine; the record rules).
    pub(crate) DB_RQ(u32) @ 0x10004 {
        31:16 qid;
        15:0 pi;
    }
    /// Doorbell page 0: SRQ producer index (as `DB_RQ`).
    pub(crate) DB_SRQ(u32) @ 0x10008 {
        31:16 qid;
        15:0 pi;
    }
    /// Doorbell page 0: arms a CQ for its next (solicited) completion.
    pub(crate) DB_CQ_ARM(u32) @ 0x1000c {
        31:16 qid;
        0:0 solicited;
    }
    /// Doorbell page 0: WQE `pi - 1` of the send queue is in the page's push window.
    pub(crate) DB_PUSH(u32) @ 0x10010 {
        31:16 qid;
        15:0 pi;
    }
}

/// Ties each register's literal offset to its `hw.rs` constant.
macro_rules! same_offsets {
    ($($reg:ident == $hw:ident),* $(,)?) => {
        $(const _: () = assert!(<$reg as Register>::OFFSET == hw::$hw);)*
    };
}

same_offsets!(
    ID == REG_ID,
    IF_VERSION == REG_IF_VERSION,
    CAPS == REG_CAPS,
    NUM_MSIX == REG_NUM_MSIX,
    MAX_QP == REG_MAX_QP,
    MAX_CQ == REG_MAX_CQ,
    MAX_MR == REG_MAX_MR,
    MAX_SRQ == REG_MAX_SRQ,
    MAX_AH == REG_MAX_AH,
    MAX_EQ == REG_MAX_EQ,
    GID_TABLE_LEN == REG_GID_TABLE_LEN,
    NUM_DB_PAGES == REG_NUM_DB_PAGES,
    MAX_LOG_QUEUE == REG_MAX_LOG_QUEUE,
    MAX_SGE == REG_MAX_SGE,
    MAX_INLINE == REG_MAX_INLINE,
    MAX_MR_PAGES == REG_MAX_MR_PAGES,
    DB_AREA_OFFSET == REG_DB_AREA_OFFSET,
    COUNTERS_OFFSET == REG_COUNTERS_OFFSET,
    NUM_COUNTERS == REG_NUM_COUNTERS,
    QID_TABLE_LEN == REG_QID_TABLE_LEN,
    CMD_TIMEOUT_MS == REG_CMD_TIMEOUT_MS,
    DEV_CTRL == REG_DEV_CTRL,
    DEV_STATUS == REG_DEV_STATUS,
    FATAL_CODE == REG_FATAL_CODE,
    CMDQ_SQ_BASE_LO == REG_CMDQ_SQ_BASE_LO,
    CMDQ_SQ_BASE_HI == REG_CMDQ_SQ_BASE_HI,
    CMDQ_CQ_BASE_LO == REG_CMDQ_CQ_BASE_LO,
    CMDQ_CQ_BASE_HI == REG_CMDQ_CQ_BASE_HI,
    CMDQ_LOG_SIZE == REG_CMDQ_LOG_SIZE,
    CMDQ_CTRL == REG_CMDQ_CTRL,
    CMDQ_DB == REG_CMDQ_DB,
    CMDQ_CI == REG_CMDQ_CI,
    CMDQ_STATUS == REG_CMDQ_STATUS,
    EQ_SETUP_BASE_LO == REG_EQ_SETUP_BASE_LO,
    EQ_SETUP_BASE_HI == REG_EQ_SETUP_BASE_HI,
    EQ_SETUP_LOG_SIZE == REG_EQ_SETUP_LOG_SIZE,
    EQ_SETUP_VECTOR == REG_EQ_SETUP_VECTOR,
    EQ_SETUP_CTRL == REG_EQ_SETUP_CTRL,
    EQ_SETUP_STATUS == REG_EQ_SETUP_STATUS,
    EQ_DB == REG_EQ_DB,
);

// Doorbell page 0 sits at the start of the doorbell area.
const _: () = assert!(<DB_SQ as Register>::OFFSET == hw::DB_AREA_OFFSET + hw::DB_SQ);
const _: () = assert!(<DB_RQ as Register>::OFFSET == hw::DB_AREA_OFFSET + hw::DB_RQ);
const _: () = assert!(<DB_SRQ as Register>::OFFSET == hw::DB_AREA_OFFSET + hw::DB_SRQ);
const _: () = assert!(<DB_CQ_ARM as Register>::OFFSET == hw::DB_AREA_OFFSET + hw::DB_CQ_ARM);
const _: () = assert!(<DB_PUSH as Register>::OFFSET == hw::DB_AREA_OFFSET + hw::DB_PUSH);

/// BAR0 offset of doorbell page 0's push window.
pub(crate) const PUSH_WINDOW: usize = hw::DB_AREA_OFFSET + hw::PUSH_WINDOW_OFFSET;

// The bit fields, tied to hw.rs the same way.
const _: () = assert!(IF_VERSION::MAJOR_SHIFT == 16);
const _: () = assert!(hw::if_version_major(IF_VERSION::MAJOR_MASK) == u16::MAX);
const _: () = assert!(DEV_CTRL::RESET_MASK == hw::CTRL_RESET);
const _: () = assert!(DEV_CTRL::ENABLE_MASK == hw::CTRL_ENABLE);
const _: () = assert!(DEV_STATUS::READY_MASK == hw::STATUS_READY);
const _: () = assert!(DEV_STATUS::FATAL_MASK == hw::STATUS_FATAL);
const _: () = assert!(DEV_STATUS::ENABLED_MASK == hw::STATUS_ENABLED);
const _: () = assert!(CMDQ_CTRL::ENABLE_MASK == hw::CMDQ_CTRL_ENABLE);
const _: () = assert!(CMDQ_STATUS::ENABLED_MASK == hw::CMDQ_STATUS_ENABLED);
const _: () = assert!(CMDQ_STATUS::ERROR_MASK == hw::CMDQ_STATUS_ERROR);
const _: () = assert!(CMDQ_DB::PI_MASK == u16::MAX as u32);
const _: () = assert!(EQ_SETUP_CTRL::CREATE_MASK == hw::EQ_SETUP_CREATE);
const _: () = assert!(EQ_SETUP_CTRL::EQN_MASK >= hw::EQN_CMD);
const _: () = assert!(
    EQ_DB::ARM_MASK
        == hw::EqDoorbell {
            eqn: 0,
            ci: 0,
            arm: true
        }
        .encode()
);
const _: () = assert!(
    EQ_DB::EQN_MASK
        == hw::EqDoorbell {
            eqn: u8::MAX,
            ci: 0,
            arm: false
        }
        .encode()
);
const _: () = assert!(
    EQ_DB::CI_MASK
        == hw::EqDoorbell {
            eqn: 0,
            ci: u16::MAX,
            arm: false
        }
        .encode()
);

/// BAR0, mapped for its whole size.
pub(crate) type Bar0<'a> = pci::Bar<'a, { hw::BAR0_SIZE }>;

/// The BAR0 mapping, shareable with interrupt handlers and work items.
///
/// It is device-managed: access is revoked when the driver is unbound, so holders that outlive
/// the device (an `Arc` clone kept by a work item) get [`ENODEV`] instead of a stale mapping.
/// Every access takes the RCU read lock only for the duration of the closure; the closure must
/// not sleep.
pub(crate) struct SharedBar(pci::DevresBar<{ hw::BAR0_SIZE }>);

impl SharedBar {
    /// Requests and maps BAR0 of `pdev`.
    ///
    /// # Errors
    ///
    /// Fails if BAR0 is smaller than [`hw::BAR0_SIZE`], busy, or cannot be mapped.
    pub(crate) fn map(pdev: &pci::Device<kernel::device::Bound>) -> Result<Arc<Self>> {
        let bar = pdev
            .iomap_region_sized::<{ hw::BAR0_SIZE }>(0, c"ferroce")?
            .into_devres()?;
        Ok(Arc::new(Self(bar), GFP_KERNEL)?)
    }

    /// Runs `f` with the mapped BAR.
    ///
    /// # Errors
    ///
    /// [`ENODEV`] once the device is unbound.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&Bar0<'_>) -> R) -> Result<R> {
        let bar = self.0.try_access().ok_or(ENODEV)?;
        Ok(f(&bar))
    }
}
