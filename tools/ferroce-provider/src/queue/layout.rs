// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Where a queue's rings and doorbell record lie in its buffer (`ferroce_create_qp_req`,
//! `ferroce_create_srq_req`), from the interface's queue rules ([`WqGeometry`], [`WqRing`]).

use ferroce_hw::{WqCaps, WqGeometry, WqLimits, WqRing};
use libc::EINVAL;

use crate::dma::{align_up, PAGE_SIZE};

/// Geometry of one ring: `1 << log_size` WQEs of `1 << log_stride` bytes at `offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RingLayout {
    pub(crate) offset: usize,
    pub(crate) log_size: u32,
    pub(crate) log_stride: u32,
}

impl RingLayout {
    /// `ring` at `offset` of the buffer.
    fn at(ring: WqRing, offset: usize) -> Self {
        Self {
            offset,
            log_size: ring.log_size,
            log_stride: ring.log_stride,
        }
    }

    fn bytes(&self) -> usize {
        (1usize << self.log_size) << self.log_stride
    }

    /// The ring's shape.
    pub(crate) fn ring(&self) -> WqRing {
        WqRing {
            log_size: self.log_size,
            log_stride: self.log_stride,
        }
    }
}

/// Where a QP's rings and doorbell record live in its buffer (`ferroce_create_qp_req`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct QpLayout {
    pub(crate) sq: RingLayout,
    /// `None` with an SRQ.
    pub(crate) rq: Option<RingLayout>,
    pub(crate) dbrec_offset: usize,
    pub(crate) buf_size: usize,
}

impl QpLayout {
    /// What a QP with this layout holds within `limits` (the rule the kernel checks it by).
    pub(crate) fn caps(&self, limits: &WqLimits) -> WqCaps {
        WqGeometry {
            sq: self.sq.ring(),
            rq: self.rq.as_ref().map(RingLayout::ring),
        }
        .caps(limits)
    }
}

/// Computes a QP's layout (the rings of [`WqGeometry::new`]): SQ at 0, RQ page-aligned after
/// it, the record after the RQ.
pub(crate) fn qp_layout(caps: &WqCaps, has_srq: bool, dev: &WqLimits) -> Result<QpLayout, i32> {
    let rings = WqGeometry::new(caps, has_srq, dev).map_err(|_| EINVAL)?;
    let sq = RingLayout::at(rings.sq, 0);
    let mut end = align_up(sq.bytes(), PAGE_SIZE).ok_or(EINVAL)?;
    let rq = match rings.rq {
        None => None,
        Some(ring) => {
            let rq = RingLayout::at(ring, end);
            end += rq.bytes();
            Some(rq)
        }
    };
    let dbrec_offset = end;
    let buf_size = align_up(end + 64, PAGE_SIZE).ok_or(EINVAL)?;
    Ok(QpLayout {
        sq,
        rq,
        dbrec_offset,
        buf_size,
    })
}

/// Computes an SRQ's layout ([`WqRing::recv`]): the ring at 0, the record after it.
pub(crate) fn srq_layout(max_wr: u32, max_sge: u32, dev: &WqLimits) -> Result<QpLayout, i32> {
    let ring = RingLayout::at(WqRing::recv(max_wr, max_sge, dev).map_err(|_| EINVAL)?, 0);
    let dbrec_offset = ring.bytes();
    Ok(QpLayout {
        sq: ring,
        rq: None,
        dbrec_offset,
        buf_size: align_up(dbrec_offset + 64, PAGE_SIZE).ok_or(EINVAL)?,
    })
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// The device's limits in the queue tests.
    pub(crate) const DEV: WqLimits = WqLimits::new(1 << 15, 16, 256);

    /// Caps of `send` and `recv` WRs with `sge` SGEs each way and `inline` bytes.
    pub(crate) fn caps(send: u32, recv: u32, sge: u32, inline: u32) -> WqCaps {
        WqCaps {
            max_send_wr: send,
            max_recv_wr: recv,
            max_send_sge: sge,
            max_recv_sge: sge,
            max_inline: inline,
        }
    }

    #[test]
    fn layouts() {
        let l = qp_layout(&caps(100, 10, 2, 0), false, &DEV).expect("layout");
        assert_eq!((l.sq.offset, l.sq.log_size, l.sq.log_stride), (0, 7, 7));
        let rq = l.rq.expect("rq");
        // 128 x 128 B SQ = 16 KiB; RQ 16 x 64 B after it; the record after the RQ.
        assert_eq!((rq.offset, rq.log_size, rq.log_stride), (16384, 4, 6));
        assert_eq!(l.dbrec_offset, 16384 + 1024);
        assert_eq!(l.buf_size, 20480);
        assert_eq!(l.dbrec_offset % 64, 0);
        let l = qp_layout(&caps(1, 1, 1, 220), true, &DEV).expect("layout");
        assert_eq!((l.sq.log_size, l.sq.log_stride), (0, 9));
        assert_eq!(l.rq, None);
        assert_eq!((l.dbrec_offset, l.buf_size), (4096, 8192));
        let s = srq_layout(1000, 4, &DEV).expect("srq");
        assert_eq!((s.sq.log_size, s.sq.log_stride), (10, 7));
        assert_eq!(
            (s.dbrec_offset, s.buf_size),
            (128 * 1024, 128 * 1024 + 4096)
        );
    }

    #[test]
    fn layout_validation() {
        assert_eq!(qp_layout(&caps(1 << 16, 1, 1, 0), false, &DEV), Err(EINVAL));
        assert_eq!(qp_layout(&caps(1, 1, 17, 0), false, &DEV), Err(EINVAL));
        assert_eq!(qp_layout(&caps(1, 1, 1, 257), false, &DEV), Err(EINVAL));
        let small = WqLimits::new(16, 16, 256);
        assert_eq!(qp_layout(&caps(17, 1, 1, 0), false, &small), Err(EINVAL));
        assert!(qp_layout(&caps(16, 16, 16, 256), false, &small).is_ok());
    }
}
