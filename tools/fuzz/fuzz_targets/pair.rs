// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Two NICs through a relay the input controls: node A's requester driven by WQEs of every RC
//! opcode, node B's responder by A's frames (delivered, lost, duplicated, swapped, corrupted)
//! and by frames the input forges either way, while device time jumps; then the relay turns
//! faithful and the pair settles. Nothing may panic or complete twice, every WR of A must
//! complete, no device may write outside its MR and rings, and one device turn sends at most a
//! budget of frames. The body is the stable tests' (`pair.rs`, `fuzz_corpus.rs`):
//! `common::pair::pair`.

#![no_main]

#[path = "../../ferroce-nic/tests/common/mod.rs"]
mod common;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| common::pair::pair(data));
