// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Admin commands from a hostile guest: any sequence of 128-byte command entries must be
//! answered with a status, never a panic or an unbounded allocation.

#![no_main]

use std::sync::Arc;

use ferroce_hw::*;
use ferroce_nic::counters::Counters;
use ferroce_nic::device::{Device, DeviceConfig, HostControls};
use ferroce_nic::engine::StubEngine;
use ferroce_nic::interrupts::RecordingSink;
use ferroce_nic::memory::VecMemory;
use ferroce_nic::trace::Tracer;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (engine, _log) = StubEngine::new();
    let mut device = Device::new(
        DeviceConfig {
            max_qp: 16,
            max_cq: 16,
            max_mr: 16,
            max_srq: 4,
            max_ah: 4,
            max_eq: 8,
            ..DeviceConfig::default()
        },
        // Guest addresses 0x1000.. are backed, so page lists and rings can point somewhere.
        Arc::new(VecMemory::new(0x1000, 1 << 20)),
        Arc::new(RecordingSink::new(8)),
        Box::new(engine),
        Arc::new(Counters::new()),
        Arc::new(Tracer::new()),
        Arc::new(HostControls::default()),
    );
    for entry in data.chunks(CMD_ENTRY_SIZE).take(64) {
        let mut bytes = [0u8; CMD_ENTRY_SIZE];
        bytes[..entry.len()].copy_from_slice(entry);
        let Some(header) = CmdHeader::read_from(&bytes) else {
            continue;
        };
        let _ = device.execute(&header, command_payload(&bytes));
    }
    device.process();
});
