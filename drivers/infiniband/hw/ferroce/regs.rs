// SPDX-License-Identifier: GPL-2.0

//! BAR0 registers of the ferroce function, and the shared BAR mapping.
//!
//! The registers and their fields are `hw`'s table (`hw::bar0_registers`), made into typed
//! registers here. The doorbell page's registers sit at offsets `hw` gives relative to the page,
//! and the bits `hw` names (`CTRL_*`, `STATUS_*`, ...) are tied to the fields below by
//! compile-time assertions.

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

/// The typed registers of `hw`'s table (`hw::bar0_registers`), with its offsets and fields.
macro_rules! typed_registers {
    ($(
        $(#[$doc:meta])*
        $offset_name:ident: $name:ident($storage:ty) @ $offset:literal { $($fields:tt)* }
    )*) => {
        register! {
            $($(#[$doc])* pub(crate) $name($storage) @ $offset { $($fields)* })*
        }
    };
}
hw::bar0_registers!(typed_registers);

register! {
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
