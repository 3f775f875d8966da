// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! rdma-core provider for the ferroce RoCEv2 NIC: `libferroce-rdmav34.so`.
//!
//! libibverbs loads this library (named by `/etc/libibverbs.d/ferroce.driver`), whose
//! constructor registers the device ops; a PCI function 1234:fe01 whose uverbs ABI version is
//! `FERROCE_UVERBS_ABI_VERSION` is then ours. Control verbs go to the kernel through the
//! `ibv_cmd_*` helpers with the driver data of `rdma/ferroce-abi.h`; the data path (posting
//! WQEs, ringing doorbells, polling CQEs) runs here, in user memory and the mmap'ed doorbell
//! page, in the formats of `ferroce_hw` (the driver's `hw.rs`). See
//! `Documentation/infiniband/ferroce-provider.rst`.
//!
//! Layout: [`dma`] (queue memory), [`doorbell`] (the doorbell page), [`wqe`] (WQE building),
//! [`queue`] (rings, records, batching, push), [`wr`] (the `ibv_wr_*` batch), [`cq`] (CQE
//! polling); `verbs` is the FFI layer
//! (context, PD/MR, CQ, QP, SRQ, AH), the only place that calls rdma-core. It is left out
//! of the unit tests, which run without libibverbs.

#![cfg_attr(test, allow(dead_code))]
#![warn(clippy::undocumented_unsafe_blocks, clippy::cast_lossless)]

mod cq;
mod dma;
mod doorbell;
mod queue;
mod sys;
#[cfg(not(test))]
mod verbs;
mod wqe;
mod wr;
