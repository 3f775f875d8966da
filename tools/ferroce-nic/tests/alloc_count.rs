// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! What moving data costs the device in heap allocations: a steady stream of 64 KiB RC WRITEs
//! at path MTU 1024 (Ethernet MTU 1500) between two in-process NICs, counted by dhat's heap
//! profiler in its testing mode.
//!
//! Only the devices' work is counted: the doorbell write and the devices' rounds. What the
//! test guest does (writing WQEs, polling CQEs) happens between the counted stretches. The
//! budget is what the device allocates today; each step of the zero-copy frame path lowers it,
//! and the frame path is done when a frame costs no allocation at all.
//!
//! Its own test binary: a global allocator counts every thread of its process.

mod common;

use common::roce::{rdma_seg, Conn, Pair};
use common::CqeStatus;
use ferroce_hw::*;

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

/// Each node's data buffer: the source at 0, the destination at `DST`.
const BUF: usize = 4 << 20;
const DST: u64 = 2 << 20;
const LEN: u32 = 64 << 10;
/// Messages before counting: the congestion window opens fully and every buffer that grows
/// has grown.
const WARM_UP: usize = 64;
/// Messages counted.
const COUNTED: usize = 32;
/// Most allocations per message the devices may make today (measured: see the test's output).
const BUDGET_PER_MESSAGE: u64 = 3;

/// Allocations since the profiler started.
fn allocations() -> u64 {
    dhat::HeapStats::get().total_blocks
}

/// Posts one WRITE of `LEN` and runs both devices until its CQE; returns the allocations the
/// devices made meanwhile and the frames A sent.
fn message(p: &mut Pair) -> (u64, u64) {
    let seg = rdma_seg(p.b.buf + DST, p.b.key);
    let sge = Sge {
        addr: p.a.buf,
        length: LEN,
        lkey: p.a.key,
    };
    let ctrl = WqeCtrl {
        wr_id: 7,
        opcode: WR_RDMA_WRITE,
        flags: WQE_FLAG_SIGNALED,
        num_sge: 1,
        ..WqeCtrl::default()
    };
    p.qa.put(&p.a, ctrl, &seg, &sge.encode());
    let frames = p.a.g.counters.get(COUNTER_TX_PACKETS);
    let mut counted = 0;
    let start = allocations();
    p.qa.ring(&mut p.a);
    counted += allocations() - start;
    for _ in 0..100_000 {
        let start = allocations();
        p.a.g.dev.process();
        p.b.g.dev.process();
        counted += allocations() - start;
        let cqes = p.a.cq.poll(&p.a.g);
        if let Some(cqe) = cqes.first() {
            assert_eq!(cqe.wc_status(), WcStatus::Success, "{cqe:?}");
            assert_eq!(cqes.len(), 1);
            return (counted, p.a.g.counters.get(COUNTER_TX_PACKETS) - frames);
        }
    }
    panic!("no CQE for the WRITE: the devices stopped moving");
}

#[test]
fn a_steady_stream_of_writes_stays_within_its_allocation_budget() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let mut p = Pair::new(
        BUF,
        Conn {
            mtu: MTU_1024,
            ..Conn::default()
        },
    );
    p.a.fill(p.a.buf, LEN as usize, 1);
    for _ in 0..WARM_UP {
        message(&mut p);
    }
    let (mut allocs, mut frames) = (0, 0);
    for _ in 0..COUNTED {
        let (a, f) = message(&mut p);
        allocs += a;
        frames += f;
    }
    let per_message = allocs / COUNTED as u64;
    println!(
        "{COUNTED} WRITEs of {LEN} bytes: {allocs} allocations, {per_message} a message, \
         {:.2} a frame ({frames} frames)",
        allocs as f64 / frames as f64
    );
    assert!(
        per_message <= BUDGET_PER_MESSAGE,
        "{per_message} allocations a message, more than the budget of {BUDGET_PER_MESSAGE}"
    );
}
