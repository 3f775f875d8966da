// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! A hostile driver: the bytes decode to up to 64 actions (command entries and the command
//! doorbell, doorbells anywhere in the doorbell area, raw send and receive WQEs and their
//! doorbells, device rounds) on an enabled device with the RoCE engine, an EQ, a CQ, a
//! connected RC QP with work outstanding and a UD QP. Nothing may panic, and afterwards the
//! device answers a NOP (after a bring-up, if the input killed or disabled it). The body is the
//! stable tests' (`hostile.rs`, `fuzz_corpus.rs`): `common::fuzz::commands`.

#![no_main]

#[path = "../../ferroce-nic/tests/common/mod.rs"]
mod common;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| common::fuzz::commands(data));
