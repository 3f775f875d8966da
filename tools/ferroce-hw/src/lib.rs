// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The ferroce hardware interface for userspace: the NIC model and the provider use this crate,
//! which compiles the very module the kernel driver includes (`drivers/infiniband/hw/ferroce/hw.rs`
//! and its folder `hw/`).

#![no_std]
#![forbid(unsafe_code)]
#![warn(
    missing_docs,
    clippy::cast_lossless,
    clippy::as_underscore,
    clippy::undocumented_unsafe_blocks
)]

// An inline module at the driver's folder, so that `hw.rs` finds its parts in `hw/` as it does in
// the kernel build.
#[path = "../../../drivers/infiniband/hw/ferroce"]
mod driver {
    pub(crate) mod hw;
}

use driver::hw;
pub use hw::*;
