// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The RoCE engine on the host: RC WRITE, READ and SEND of 4 KiB, 64 KiB and 1 MiB between two
//! in-process NICs (test guests, RoCE engines, an in-memory cable) at path MTU 1024 and 4096,
//! and in the same run, by the same method (criterion, one sample loop for all), what bounds
//! them: memcpy of the same bytes from one buffer to another, and the ICRC of the same bytes in
//! frames of 4096 (the wire format makes the sender compute it and the receiver check it).
//!
//! A QP's messages cost the same however many other QPs the NIC holds: the same 4 KiB WRITE
//! on a pair alone and on a pair whose NICs also hold 4096 connected, idle QPs each.
//!
//! Nothing else runs: a pair's two devices are stepped in the measuring thread, with no device,
//! port or wire thread of their own. benchreport.py reads criterion's `time:` lines.

#[path = "../tests/common/mod.rs"]
mod common;

use std::hint::black_box;
use std::time::Duration;

use common::roce::{rdma_seg, Conn, Pair};
use common::CqeStatus;
use criterion::{BenchmarkId, Criterion, Throughput};
use ferroce_hw::*;

/// The message sizes, with their labels.
const SIZES: [(usize, &str); 3] = [(4 << 10, "4KiB"), (64 << 10, "64KiB"), (1 << 20, "1MiB")];
/// Each node's data buffer: the source at 0, the destination at `DST`.
const BUF: usize = 4 << 20;
const DST: u64 = 2 << 20;

#[derive(Clone, Copy)]
enum Op {
    Write,
    Read,
    Send,
}

impl Op {
    const ALL: [Op; 3] = [Op::Write, Op::Read, Op::Send];

    fn name(self) -> &'static str {
        match self {
            Op::Write => "rc_write",
            Op::Read => "rc_read",
            Op::Send => "rc_send",
        }
    }
}

fn conn(mtu: u8) -> Conn {
    Conn {
        mtu,
        ..Conn::default()
    }
}

fn pair(mtu: u8) -> Pair {
    let p = Pair::new(BUF, conn(mtu));
    p.a.fill(p.a.buf, 1 << 20, 1);
    p.b.fill(p.b.buf, 1 << 20, 2);
    p
}

/// One message of `len` bytes, to its completion (and for SEND the receiver's).
fn message(p: &mut Pair, op: Op, len: usize) {
    let len32 = len as u32;
    match op {
        Op::Write => {
            let seg = rdma_seg(p.b.buf + DST, p.b.key);
            let src = p.a.buf;
            p.qa.post(&mut p.a, 1, WR_RDMA_WRITE, src, len32, &seg, 0);
            let (ca, _) = p.wait_cqes(1, 0);
            assert_eq!(ca[0].wc_status(), WcStatus::Success);
        }
        Op::Read => {
            let seg = rdma_seg(p.b.buf, p.b.key);
            let dst = p.a.buf + DST;
            p.qa.post(&mut p.a, 1, WR_RDMA_READ, dst, len32, &seg, 0);
            let (ca, _) = p.wait_cqes(1, 0);
            assert_eq!(ca[0].wc_status(), WcStatus::Success);
        }
        Op::Send => {
            let dst = p.b.buf + DST;
            p.qb.post_recv(&mut p.b, 2, dst, len32);
            let src = p.a.buf;
            p.qa.post(&mut p.a, 1, WR_SEND, src, len32, &[], 0);
            let (ca, cb) = p.wait_cqes(1, 1);
            assert_eq!(ca[0].wc_status(), WcStatus::Success);
            assert_eq!(cb[0].wc_status(), WcStatus::Success);
        }
    }
}

/// Idle QPs beside the active one, on each NIC.
const IDLE_QPS: u32 = 4096;

fn memcpy(src: &[u8], dst: &mut [u8]) {
    dst.copy_from_slice(black_box(src));
    black_box(dst);
}

/// The ICRC's CRC over `bytes` in frames of 4096 (the variant-field masking left out).
fn icrc(bytes: &[u8]) -> u32 {
    bytes.chunks(4096).fold(0, |acc, frame| {
        let mut crc = crc32fast::Hasher::new();
        crc.update(black_box(frame));
        acc ^ crc.finalize()
    })
}

fn benches(c: &mut Criterion) {
    for (len, label) in SIZES {
        let mut group = c.benchmark_group(label);
        group.throughput(Throughput::Bytes(len as u64));
        for (mtu, mtu_label) in [(MTU_1024, "mtu1024"), (MTU_4096, "mtu4096")] {
            let mut p = pair(mtu);
            for op in Op::ALL {
                group.bench_function(BenchmarkId::new(op.name(), mtu_label), |b| {
                    b.iter(|| message(&mut p, op, len))
                });
            }
        }
        // The same bytes, in and between buffers of the same size, as the engine moves them.
        let (src, mut dst) = (vec![7u8; len], vec![0u8; len]);
        group.bench_function("memcpy", |b| b.iter(|| memcpy(&src, &mut dst)));
        group.bench_function("icrc", |b| b.iter(|| icrc(&src)));
        group.finish();
    }
    // A QP's turn does not grow with the QPs that have nothing to do.
    let (len, label) = SIZES[0];
    let mut group = c.benchmark_group(format!("{label}_idle"));
    group.throughput(Throughput::Bytes(len as u64));
    for (idle, name) in [(0, "alone"), (IDLE_QPS, "among_4096_idle")] {
        let mut p = Pair::among_idle(BUF, conn(MTU_4096), idle);
        p.a.fill(p.a.buf, 1 << 20, 1);
        group.bench_function(BenchmarkId::new("rc_write", name), |b| {
            b.iter(|| message(&mut p, Op::Write, len))
        });
    }
    group.finish();
}

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();
    benches(&mut c);
    c.final_summary();
}
