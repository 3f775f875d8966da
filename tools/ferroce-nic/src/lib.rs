// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The ferroce emulated RDMA NIC.
//!
//! The device model ([`device::Device`]) is independent of vfio-user: it has a BAR0 read/write
//! API, reaches guest memory through [`memory::GuestMemory`] and raises interrupts through
//! [`interrupts::InterruptSink`]. [`server`] wires it to QEMU through the `vfio_user` crate; the
//! tests drive it directly.

#![warn(missing_docs)]

pub mod bar0;
pub mod capture;
pub mod clock;
pub mod cmdq;
pub mod commands;
pub mod config_space;
pub mod control;
pub mod counters;
pub mod cq;
pub mod device;
pub mod dma;
pub mod doorbell;
pub mod engine;
pub mod eq;
pub mod functions;
pub mod interrupts;
pub mod latency;
pub mod lies;
pub mod mailbox;
pub mod mcast;
pub mod memory;
pub mod objects;
pub mod port;
pub mod qp;
pub mod records;
pub mod schedule;
pub mod server;
pub mod trace;
