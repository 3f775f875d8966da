// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The ferroce hardware interface for userspace: the NIC model and the provider use this crate,
//! which compiles the very file the kernel driver includes (`drivers/infiniband/hw/ferroce/hw.rs`).

#![no_std]
#![forbid(unsafe_code)]
#![warn(
    missing_docs,
    clippy::cast_lossless,
    clippy::as_underscore,
    clippy::undocumented_unsafe_blocks
)]

#[path = "../../../drivers/infiniband/hw/ferroce/hw.rs"]
mod hw;

pub use hw::*;
