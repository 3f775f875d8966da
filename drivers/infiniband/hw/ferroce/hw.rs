// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The ferroce hardware interface: the one definition of everything the device, the kernel driver
//! and the userspace provider agree on.
//!
//! This module (this file and `hw/`) is compiled by the kernel driver crate, by the emulated NIC
//! and by the rdma-core provider (through `tools/ferroce-hw`). It therefore uses only `core`, is
//! safe code only, and every layout comes with a safe encoder/decoder to and from little-endian
//! byte arrays: the driver reads and writes DMA memory through byte copies and must never
//! transmute.
//!
//! `Documentation/infiniband/ferroce-hw.rst` is the prose version of this file.
//!
//! Conventions:
//! - All multi-byte fields are little-endian.
//! - Queue indexes are free-running 16-bit counters that wrap; a ring has `1 << log_size` slots
//!   with `log_size <= MAX_LOG_QUEUE` (15), so `pi - ci` (wrapping) is always the fill level.
//! - Every layout is a `#[repr(C)]` struct without implicit padding; its size and the sum of its
//!   field sizes are checked at compile time.

#[macro_use]
mod layout;

mod build;
mod cmd;
mod counters;
mod cqe;
mod eqe;
mod mcast;
mod mr;
mod port;
mod qp;
mod queue;
mod regs;
mod wqe;

pub use self::{
    build::*, cmd::*, counters::*, cqe::*, eqe::*, mcast::*, mr::*, port::*, qp::*, queue::*,
    regs::*, wqe::*,
};
pub use layout::LeField;
#[cfg(userspace)]
pub use layout::{read_u32, read_u64};

/// Value meaning "none" for SRQ numbers and similar.
pub const NONE: u32 = 0xffff_ffff;
/// VLAN value meaning "untagged".
pub const VLAN_NONE: u16 = 0xffff;
