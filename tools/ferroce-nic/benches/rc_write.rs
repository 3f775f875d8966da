// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! RC WRITE of 64 KiB between two in-process NICs (test guests, RoCE engines, an in-memory
//! cable) next to a plain memcpy of the same bytes, in the same run. Prints the ratio.

#[path = "../tests/common/mod.rs"]
mod common;

use std::hint::black_box;
use std::time::{Duration, Instant};

use common::roce::{rdma_seg, Conn, Pair};
use common::CqeStatus;
use criterion::{Criterion, Throughput};
use ferroce_hw::*;

const LEN: usize = 64 << 10;

fn pair() -> Pair {
    let p = Pair::new(
        4 << 20,
        Conn {
            mtu: MTU_4096,
            ..Conn::default()
        },
    );
    p.a.fill(p.a.buf, LEN, 1);
    p
}

fn rc_write(p: &mut Pair) {
    let seg = rdma_seg(p.b.buf + (1 << 20), p.b.key);
    let src = p.a.buf;
    p.qa.post(&mut p.a, 1, WR_RDMA_WRITE, src, LEN as u32, &seg, 0);
    let (ca, _) = p.wait_cqes(1, 0);
    assert_eq!(ca[0].wc_status(), WcStatus::Success);
}

fn memcpy(src: &[u8], dst: &mut [u8]) {
    dst.copy_from_slice(black_box(src));
    black_box(dst);
}

fn benches(c: &mut Criterion) {
    let mut group = c.benchmark_group("64KiB");
    group.throughput(Throughput::Bytes(LEN as u64));
    let mut p = pair();
    group.bench_function("rc_write", |b| b.iter(|| rc_write(&mut p)));
    let (src, mut dst) = (vec![7u8; LEN], vec![0u8; LEN]);
    group.bench_function("memcpy", |b| b.iter(|| memcpy(&src, &mut dst)));
    group.finish();
}

/// Mean time per operation over `window`.
fn mean(window: Duration, mut op: impl FnMut()) -> Duration {
    let start = Instant::now();
    let mut n = 0u32;
    while start.elapsed() < window || n < 10 {
        op();
        n += 1;
    }
    start.elapsed() / n
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    benches(&mut c);
    c.final_summary();
    // The ratio, measured here in the same process.
    let mut p = pair();
    let write = mean(Duration::from_secs(2), || rc_write(&mut p));
    let (src, mut dst) = (vec![7u8; LEN], vec![0u8; LEN]);
    let copy = mean(Duration::from_secs(1), || memcpy(&src, &mut dst));
    let mib_s = |t: Duration| LEN as f64 / t.as_secs_f64() / f64::from(1 << 20);
    println!(
        "rc_write 64KiB: {:.1} us ({:.0} MiB/s); memcpy 64KiB: {:.2} us ({:.0} MiB/s); \
         engine/memcpy time ratio {:.0}",
        write.as_secs_f64() * 1e6,
        mib_s(write),
        copy.as_secs_f64() * 1e6,
        mib_s(copy),
        write.as_secs_f64() / copy.as_secs_f64()
    );
}
