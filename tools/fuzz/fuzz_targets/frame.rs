// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Frames from the wire against a live node: the bytes go through the frame and transport
//! parsers and onto the wire as they are, then decode to frames that reach the responder and
//! the completer of an RC QP (receives posted; a WRITE, a READ and an atomic outstanding) and
//! of a UD QP with receives posted. The device must not panic or go fatal, and nothing may
//! complete twice or that was not posted. The body is the stable tests' (`frames.rs`,
//! `fuzz_corpus.rs`): `common::fuzz::frame_input`.

#![no_main]

#[path = "../../ferroce-nic/tests/common/mod.rs"]
mod common;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| common::fuzz::frame_input(data));
