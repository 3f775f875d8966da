// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Work queue geometry (`hw/queue.rs`): the one set of sizing rules of the driver and the
//! provider.

use ferroce_hw::*;

const LIMITS: WqLimits = WqLimits::new(4096, MAX_SGE, MAX_INLINE);

fn caps(wr: u32, sge: u32, inline: u32) -> WqCaps {
    WqCaps {
        max_send_wr: wr,
        max_recv_wr: wr,
        max_send_sge: sge,
        max_recv_sge: sge,
        max_inline: inline,
    }
}

#[test]
fn limits_are_clamped_to_the_interface() {
    let l = WqLimits::new(100_000, 99, 10_000);
    assert_eq!(
        (l.max_wr, l.max_sge, l.max_inline),
        (1 << MAX_LOG_QUEUE, MAX_SGE, MAX_INLINE)
    );
    // A depth that is not a power of two rounds down.
    assert_eq!(WqLimits::new(5000, 1, 0).max_wr, 4096);
    assert_eq!(WqLimits::new(4096, 1, 0).max_log_wr(), 12);
}

#[test]
fn every_sge_count_the_device_allows_is_accepted_and_reported() {
    // query_device advertises max_send_sge = max_recv_sge = the device's limit: each count up
    // to it gives rings that hold at least that many, on both queues.
    for sge in 0..=LIMITS.max_sge {
        let g = WqGeometry::new(&caps(8, sge, 0), false, &LIMITS).expect("geometry");
        let got = g.caps(&LIMITS);
        assert!(
            got.max_send_sge >= sge && got.max_recv_sge >= sge,
            "{sge}: {got:?}"
        );
        assert!(got.max_send_sge <= LIMITS.max_sge && got.max_recv_sge <= LIMITS.max_sge);
        // What the rings hold is again a valid request giving the same rings.
        assert_eq!(WqGeometry::new(&got, false, &LIMITS), Ok(g));
    }
}

#[test]
fn sizes_and_strides_round_up() {
    let g = WqGeometry::new(&caps(100, 2, 0), false, &LIMITS).expect("geometry");
    // 64-byte header + 2 SGEs = 96 bytes: a 128-byte stride, with room for 4 SGEs.
    assert_eq!((g.sq.log_size, g.sq.log_stride), (7, 7));
    let rq = g.rq.expect("rq");
    assert_eq!((rq.log_size, rq.log_stride), (7, MIN_LOG_WQE_STRIDE));
    let got = g.caps(&LIMITS);
    assert_eq!(
        (got.max_send_wr, got.max_send_sge, got.max_inline),
        (128, 4, 64)
    );
    // 16 receive SGEs need 272 bytes: a 512-byte stride.
    let g = WqGeometry::new(&caps(1, 16, 0), false, &LIMITS).expect("geometry");
    assert_eq!(g.rq.expect("rq").log_stride, 9);
    assert_eq!(g.rq.expect("rq").bytes(), 512);
}

#[test]
fn an_srq_leaves_no_receive_ring() {
    let g = WqGeometry::new(&caps(4, 4, 0), true, &LIMITS).expect("geometry");
    assert_eq!(g.rq, None);
    let got = g.caps(&LIMITS);
    assert_eq!((got.max_recv_wr, got.max_recv_sge), (0, 0));
}

#[test]
fn too_much_is_refused() {
    let refused = |c: WqCaps| WqGeometry::new(&c, false, &LIMITS).unwrap_err();
    assert_eq!(refused(caps(4097, 1, 0)), GeometryError::TooManyWrs);
    assert_eq!(refused(caps(1, 17, 0)), GeometryError::TooManySges);
    assert_eq!(refused(caps(1, 1, 257)), GeometryError::InlineTooLong);
    let small = WqLimits::new(16, 4, 32);
    assert_eq!(
        WqGeometry::new(&caps(17, 1, 0), false, &small),
        Err(GeometryError::TooManyWrs)
    );
    assert_eq!(
        WqGeometry::new(&caps(1, 5, 0), false, &small),
        Err(GeometryError::TooManySges)
    );
    assert_eq!(
        WqGeometry::new(&caps(1, 1, 33), false, &small),
        Err(GeometryError::InlineTooLong)
    );
}

#[test]
fn rings_laid_out_by_a_process_are_checked() {
    assert!(WqRing::new(12, 6, &LIMITS).is_ok());
    assert_eq!(WqRing::new(13, 6, &LIMITS), Err(GeometryError::TooManyWrs));
    assert_eq!(WqRing::new(0, 5, &LIMITS), Err(GeometryError::BadStride));
    assert_eq!(WqRing::new(0, 11, &LIMITS), Err(GeometryError::BadStride));
    // Capacities follow from the stride, capped by the device.
    let r = WqRing::new(0, 10, &LIMITS).expect("ring");
    assert_eq!((r.send_sges(&LIMITS), r.recv_sges(&LIMITS)), (16, 16));
    assert_eq!(r.send_inline(&LIMITS), 256);
}

#[test]
fn log2_ceil_rounds_up() {
    assert_eq!(
        [0, 1, 2, 3, 4, 4096, 4097].map(log2_ceil),
        [0, 0, 1, 2, 2, 12, 13]
    );
}
