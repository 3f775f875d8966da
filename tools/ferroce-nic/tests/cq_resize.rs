// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! `CMD_RESIZE_CQ` with completions in flight: the old ring ends with a marker CQE, the index
//! goes on in the new ring, and no completion is lost or seen twice, growing or shrinking,
//! across the rings' wraps. A resize the new ring cannot take, or the old ring has no room
//! for, changes nothing.

mod common;

use common::roce::*;
use common::CqeStatus;
use ferroce_hw::*;

/// Posts `n` signalled 64-byte WRITEs from A to B with wr_ids from `first`.
fn writes(p: &mut Pair, first: u64, n: u64) {
    let (src, dst, key) = (p.a.buf, p.b.buf + 65536, p.b.key);
    for wr_id in first..first + n {
        p.qa.post(
            &mut p.a,
            wr_id,
            WR_RDMA_WRITE,
            src,
            64,
            &rdma_seg(dst, key),
            0,
        );
    }
}

/// Runs both devices until A's NIC has written `n` more CQEs, without polling them (a clean
/// wire: no timer needs to run, the time stands still).
fn until_written(p: &mut Pair, n: u64) {
    let target = p.a.counter(COUNTER_CQES) + n;
    for _ in 0..10_000 {
        p.a.g.dev.process();
        p.b.g.dev.process();
        if p.a.counter(COUNTER_CQES) >= target {
            return;
        }
    }
    panic!(
        "the device wrote {} CQEs, not {target}",
        p.a.counter(COUNTER_CQES)
    );
}

fn wr_ids(cqes: &[Cqe]) -> Vec<u64> {
    cqes.iter().map(|c| c.wr_id).collect()
}

#[test]
fn completions_in_flight_cross_resizes_once_each_and_in_order() {
    let mut p = Pair::new(MIB, Conn::default());
    writes(&mut p, 1, 8);
    until_written(&mut p, 8);
    let mut seen = wr_ids(&p.a.cq.poll_up_to(&p.a.g, 3));
    // Shrink from 4096 entries to 16 with five CQEs waiting in the old ring.
    let c = p.a.cq.resize(&mut p.a.g, 4);
    assert_eq!(c.status, STATUS_OK, "resize to 16 entries");
    writes(&mut p, 9, 8);
    until_written(&mut p, 8);
    seen.extend(wr_ids(&p.a.cq.poll(&p.a.g)));
    assert_eq!(seen, (1..=16).collect::<Vec<_>>());
    assert!(p.a.cq.next.is_empty(), "the marker was polled");
    // Around the 16-entry ring several times, then grow it with CQEs waiting.
    for round in 0..6 {
        let first = 17 + round * 6;
        writes(&mut p, first, 6);
        until_written(&mut p, 6);
        assert_eq!(
            wr_ids(&p.a.cq.poll(&p.a.g)),
            (first..first + 6).collect::<Vec<_>>()
        );
    }
    writes(&mut p, 53, 10);
    until_written(&mut p, 10);
    let mut seen = wr_ids(&p.a.cq.poll_up_to(&p.a.g, 4));
    assert_eq!(p.a.cq.resize(&mut p.a.g, 8).status, STATUS_OK, "grow");
    writes(&mut p, 63, 40);
    until_written(&mut p, 40);
    seen.extend(wr_ids(&p.a.cq.poll(&p.a.g)));
    assert_eq!(seen, (53..103).collect::<Vec<_>>());
    assert!(p
        .a
        .cq
        .poll(&p.a.g)
        .iter()
        .all(|c| c.wc_status() == WcStatus::Success));
}

#[test]
fn resizes_follow_each_other_before_the_first_marker_is_polled() {
    let mut p = Pair::new(MIB, Conn::default());
    // As pyverbs' test_resize_cq: to 2, to 8 with nothing polled, then 6 in the 8 entries.
    for log in [1, 3] {
        assert_eq!(p.a.cq.resize(&mut p.a.g, log).status, STATUS_OK);
    }
    writes(&mut p, 1, 6);
    until_written(&mut p, 6);
    // Below what waits: refused, and the six are all there.
    assert_eq!(p.a.cq.resize(&mut p.a.g, 1).status, STATUS_BAD_PARAM);
    writes(&mut p, 7, 2);
    until_written(&mut p, 2);
    assert_eq!(p.a.counter(COUNTER_CQES), 8);
    assert_eq!(wr_ids(&p.a.cq.poll(&p.a.g)), (1..=8).collect::<Vec<_>>());
    assert!(p.a.cq.next.is_empty(), "both markers polled");
}

#[test]
fn a_ring_too_small_or_a_full_one_is_refused_and_nothing_changes() {
    let mut p = Pair::new(MIB, Conn::default());
    assert_eq!(p.a.cq.resize(&mut p.a.g, 3).status, STATUS_OK);
    assert!(p.a.cq.poll(&p.a.g).is_empty());
    assert!(p.a.cq.next.is_empty());
    // Five waiting do not fit in four entries.
    writes(&mut p, 1, 5);
    until_written(&mut p, 5);
    let c = p.a.cq.resize(&mut p.a.g, 2);
    assert_eq!(c.status, STATUS_BAD_PARAM, "resize below what waits");
    // Eight waiting in eight entries: no slot for the marker.
    writes(&mut p, 6, 3);
    until_written(&mut p, 3);
    let c = p.a.cq.resize(&mut p.a.g, 6);
    assert_eq!(c.status, STATUS_BUSY, "resize of a full ring");
    assert_eq!(wr_ids(&p.a.cq.poll(&p.a.g)), (1..=8).collect::<Vec<_>>());
    writes(&mut p, 9, 2);
    until_written(&mut p, 2);
    assert_eq!(wr_ids(&p.a.cq.poll(&p.a.g)), [9, 10]);
}

#[test]
fn a_resize_moves_the_doorbell_record_too() {
    let mut p = Pair::new(MIB, Conn::default());
    assert_eq!(p.a.cq.resize(&mut p.a.g, 3).status, STATUS_OK);
    p.a.cq.poll(&p.a.g);
    let old_record = p.a.cq.dbrec;
    assert_eq!(p.a.cq.resize(&mut p.a.g, 2).status, STATUS_OK);
    p.a.cq.poll(&p.a.g);
    // The old record now lies: the device must go by the new one, or it would see the new
    // ring overrun after four CQEs.
    p.a.g.write_u32(old_record, 0xdead);
    for first in [1, 4, 7, 10] {
        writes(&mut p, first, 3);
        until_written(&mut p, 3);
        assert_eq!(
            wr_ids(&p.a.cq.poll(&p.a.g)),
            (first..first + 3).collect::<Vec<_>>()
        );
    }
}

/// Found by a loaded make check (pyverbs' test_resize_cq: six UD sends posted, then a resize
/// to one entry, which must fail with EINVAL): the device counted only the CQEs already in
/// the ring, so a resize that came before it had run the sends was taken, and their CQEs then
/// overran the new ring (the test's poll timed out). The completions owed for sends already
/// posted count too.
#[test]
fn a_resize_leaves_room_for_the_completions_of_sends_already_posted() {
    let mut p = Pair::new(MIB, Conn::default());
    // Posted and rung; the device has not run yet.
    writes(&mut p, 1, 6);
    assert_eq!(
        p.a.cq.resize(&mut p.a.g, 2).status,
        STATUS_BAD_PARAM,
        "4 entries for 6 CQEs owed"
    );
    until_written(&mut p, 6);
    assert_eq!(wr_ids(&p.a.cq.poll(&p.a.g)), (1..=6).collect::<Vec<_>>());
    // Once they are polled, the same resize is taken.
    assert_eq!(p.a.cq.resize(&mut p.a.g, 2).status, STATUS_OK);
    writes(&mut p, 7, 3);
    until_written(&mut p, 3);
    assert_eq!(wr_ids(&p.a.cq.poll(&p.a.g)), [7, 8, 9]);
}
