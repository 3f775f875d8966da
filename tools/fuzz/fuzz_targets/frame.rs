// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Frames from the wire: steering, frame parsing and transport header parsing must never
//! panic, and whatever parses must survive the engine's receive path.

#![no_main]

use std::sync::{Arc, Mutex, OnceLock};

use ferroce_hw::*;
use ferroce_nic::counters::Counters;
use ferroce_nic::device::{Device, DeviceConfig, HostControls};
use ferroce_nic::engine::faults::{FaultConfig, FaultControl};
use ferroce_nic::engine::frame;
use ferroce_nic::engine::headers::Packet;
use ferroce_nic::engine::roce::RoceEngine;
use ferroce_nic::engine::wire::{NullSink, PortEnd, RxQueue};
use ferroce_nic::interrupts::RecordingSink;
use ferroce_nic::memory::VecMemory;
use ferroce_nic::trace::Tracer;
use libfuzzer_sys::fuzz_target;

const MAC: [u8; 6] = [0x52, 0x54, 0, 0, 0, 1];

struct Nic {
    device: Device,
    rx: Arc<RxQueue>,
}

/// A device with the RoCE engine, enabled, with GIDs 0..3 and an RC and a UD QP in RTS.
fn nic() -> &'static Mutex<Nic> {
    static NIC: OnceLock<Mutex<Nic>> = OnceLock::new();
    NIC.get_or_init(|| {
        let rx = RxQueue::new();
        let trace = Arc::new(Tracer::new());
        let engine = RoceEngine::new(
            MAC,
            PortEnd {
                sink: Box::new(NullSink),
                rx: rx.clone(),
            },
            FaultControl::new(FaultConfig::default()),
            trace.clone(),
        );
        let mut device = Device::new(
            DeviceConfig {
                mac: MAC,
                ..DeviceConfig::default()
            },
            Arc::new(VecMemory::new(0x10_0000, 1 << 20)),
            Arc::new(RecordingSink::new(8)),
            Box::new(engine),
            Arc::new(Counters::new()),
            trace,
            Arc::new(HostControls::default()),
        );
        device.bar0_write(REG_DEV_CTRL as u64, &CTRL_ENABLE.to_le_bytes());
        let mut gid = [0u8; 16];
        gid[10] = 0xff;
        gid[11] = 0xff;
        gid[12..].copy_from_slice(&[10, 0, 0, 1]);
        for (index, gid_type) in [(2, GID_TYPE_ROCE_V1), (3, GID_TYPE_ROCE_V2)] {
            let cmd = SetGidCmd {
                index,
                gid_type,
                family: GID_FAMILY_IPV4,
                gid,
                mac: MAC,
                vlan: VLAN_NONE,
                ..SetGidCmd::default()
            };
            let header = CmdHeader {
                opcode: CMD_SET_GID,
                ..CmdHeader::default()
            };
            let _ = device.execute(&header, &cmd.to_payload());
        }
        Mutex::new(Nic { device, rx })
    })
}

fuzz_target!(|data: &[u8]| {
    let _ = frame::classify(data, &MAC);
    if let Ok(f) = frame::parse(data) {
        let _ = Packet::parse(f.transport);
    }
    let _ = Packet::parse(data);
    let mut nic = nic().lock().unwrap_or_else(|e| e.into_inner());
    nic.rx.push(data.to_vec());
    nic.device.process();
});
