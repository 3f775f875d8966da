// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Send and receive WQEs: the hardware interface builds and checks them (`hw/build.rs`, shared
//! with the kernel driver); the FFI layer turns `ibv_send_wr` / `ibv_recv_wr` into its request
//! types, and a refusal becomes `EINVAL`.

use ferroce_hw::Sge;
pub(crate) use ferroce_hw::{Payload, SendOp, SendRequest, SqLimits};
use libc::EINVAL;

/// [`ferroce_hw::build_send_wqe`], refusing with `EINVAL`.
pub(crate) fn build_send_wqe(
    req: &SendRequest<'_>,
    limits: &SqLimits,
    out: &mut [u8],
) -> Result<usize, i32> {
    ferroce_hw::build_send_wqe(req, limits, out).map_err(|_| EINVAL)
}

/// [`ferroce_hw::build_recv_wqe`], refusing with `EINVAL`.
pub(crate) fn build_recv_wqe(
    wr_id: u64,
    sges: &[Sge],
    max_sge: u32,
    out: &mut [u8],
) -> Result<usize, i32> {
    ferroce_hw::build_recv_wqe(wr_id, sges, max_sge, out).map_err(|_| EINVAL)
}
