// SPDX-License-Identifier: GPL-2.0

//! The ferroce hardware interface for userspace: the NIC model and the provider use this crate,
//! which compiles the very file the kernel driver includes (`drivers/infiniband/hw/ferroce/hw.rs`).

#![no_std]

#[path = "../../../drivers/infiniband/hw/ferroce/hw.rs"]
mod hw;

pub use hw::*;
