// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Send and receive WQEs: the hardware interface builds and checks them (`hw/build.rs`, shared
//! with the kernel driver); the FFI layer turns `ibv_send_wr` / `ibv_recv_wr` into its request
//! types, and a refusal becomes `EINVAL`.

use ferroce_hw::{BindMwSeg, Sge, ACCESS_REMOTE_ATOMIC, ACCESS_REMOTE_READ, ACCESS_REMOTE_WRITE};
pub(crate) use ferroce_hw::{Payload, SendOp, SendRequest, SqLimits};
use libc::EINVAL;

use crate::sys;

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

/// The rights a window can grant, as `ibv_access_flags` and as the device's `ACCESS_*`.
const MW_RIGHTS: [(u32, u32); 3] = [
    (sys::IBV_ACCESS_REMOTE_WRITE, ACCESS_REMOTE_WRITE),
    (sys::IBV_ACCESS_REMOTE_READ, ACCESS_REMOTE_READ),
    (sys::IBV_ACCESS_REMOTE_ATOMIC, ACCESS_REMOTE_ATOMIC),
];

/// The BIND_MW segment that gives a window the key `rkey` and `info`'s range and rights in
/// the MR `mr_key` (0 for none: an unbind, of length 0, may name no MR). A window grants
/// remote rights only: local write, which applications pass along with them (pyverbs does),
/// means nothing for it and is dropped; zero-based windows and other flags are refused. The
/// device checks the rest (range, rights within the MR's, PD, type).
pub(crate) fn bind_segment(
    rkey: u32,
    mr_key: u32,
    info: &sys::ibv_mw_bind_info,
) -> Result<BindMwSeg, i32> {
    let flags = info.mw_access_flags;
    let known = MW_RIGHTS
        .iter()
        .fold(sys::IBV_ACCESS_LOCAL_WRITE, |m, &(ibv, _)| m | ibv);
    if flags & !known != 0 {
        return Err(EINVAL);
    }
    let access = MW_RIGHTS
        .iter()
        .filter(|&&(ibv, _)| flags & ibv != 0)
        .fold(0, |a, &(_, hw)| a | hw);
    Ok(BindMwSeg {
        addr: info.addr,
        length: info.length,
        mw_key: rkey,
        mr_key,
        access,
        ..BindMwSeg::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(length: u64, flags: u32) -> sys::ibv_mw_bind_info {
        sys::ibv_mw_bind_info {
            mr: core::ptr::null_mut(),
            addr: 0x7000,
            length,
            mw_access_flags: flags,
        }
    }

    #[test]
    fn a_bind_grants_remote_rights_only() {
        let rights = sys::IBV_ACCESS_REMOTE_WRITE | sys::IBV_ACCESS_REMOTE_READ;
        assert_eq!(
            bind_segment(0x5601, 0x1234, &info(64, rights)),
            Ok(BindMwSeg {
                addr: 0x7000,
                length: 64,
                mw_key: 0x5601,
                mr_key: 0x1234,
                access: ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ,
                ..BindMwSeg::default()
            })
        );
        // Local write means nothing for a window: dropped (pyverbs passes it).
        let flags = sys::IBV_ACCESS_LOCAL_WRITE | sys::IBV_ACCESS_REMOTE_ATOMIC;
        let seg = bind_segment(1, 2, &info(8, flags));
        assert_eq!(seg.map(|s| s.access), Ok(ACCESS_REMOTE_ATOMIC));
        // Zero-based windows and the MR's own flags are refused.
        for bad in [sys::IBV_ACCESS_ZERO_BASED, sys::IBV_ACCESS_MW_BIND] {
            assert_eq!(bind_segment(1, 2, &info(8, bad)), Err(EINVAL));
        }
    }
}
