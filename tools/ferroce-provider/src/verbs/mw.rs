// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Memory windows: the kernel creates and destroys them (`ibv_alloc_mw`, `ibv_dealloc_mw`);
//! the device binds them with a BIND_MW work request, which `ibv_bind_mw` (type 1),
//! `IBV_WR_BIND_MW` and `ibv_wr_bind_mw` (type 2) post, and invalidates them with
//! `IBV_WR_LOCAL_INV` or a peer's SEND with invalidate. The device enforces every window rule
//! (range, rights, PD, type 2's QP); the provider only builds the segment.

use core::ffi::c_int;
use core::mem::size_of;

use ferroce_hw::BindMwSeg;
use libc::EINVAL;

use super::qp::post_send;
use super::{check, fail, Pod};
use crate::{sys, wqe};

/// The BIND_MW segment of a bind of window key `rkey` with `info` ([`wqe::bind_segment`]).
///
/// # Safety
///
/// `info.mr` is null or an MR of ours.
pub(super) unsafe fn bind_segment(
    rkey: u32,
    info: &sys::ibv_mw_bind_info,
) -> Result<BindMwSeg, i32> {
    // SAFETY: per the contract.
    let mr_key = unsafe { info.mr.as_ref() }.map_or(0, |mr| mr.lkey);
    wqe::bind_segment(rkey, mr_key, info)
}

pub(super) unsafe extern "C" fn alloc_mw(
    pd: *mut sys::ibv_pd,
    mw_type: sys::ibv_mw_type,
) -> *mut sys::ibv_mw {
    let mw = Box::into_raw(Box::new(sys::ibv_mw::zeroed()));
    let mut cmd = sys::ibv_alloc_mw::zeroed();
    let mut resp = sys::ib_uverbs_alloc_mw_resp::zeroed();
    // SAFETY: `mw` is a live allocation; command and response are sized buffers; the kernel
    // checks the PD and the type.
    let ret = unsafe {
        sys::ibv_cmd_alloc_mw(
            pd,
            mw_type,
            mw,
            &mut cmd,
            size_of::<sys::ibv_alloc_mw>(),
            &mut resp,
            size_of::<sys::ib_uverbs_alloc_mw_resp>(),
        )
    };
    if let Err(e) = check(ret) {
        // SAFETY: leaked above, never handed out.
        drop(unsafe { Box::from_raw(mw) });
        return fail(e);
    }
    mw
}

pub(super) unsafe extern "C" fn dealloc_mw(mw: *mut sys::ibv_mw) -> c_int {
    // SAFETY: a window of `alloc_mw`, passed back by libibverbs.
    let ret = unsafe { sys::ibv_cmd_dealloc_mw(mw) };
    if ret == 0 {
        // SAFETY: the kernel object is gone; the allocation is ours and unused now.
        drop(unsafe { Box::from_raw(mw) });
    }
    ret
}

/// `ibv_bind_mw` (type 1 windows; libibverbs checked the type and the MR's context): posts a
/// BIND_MW work request with the window's next key, which the window takes when the post
/// succeeds (the application undoes it if the completion reports an error).
pub(super) unsafe extern "C" fn bind_mw(
    qp: *mut sys::ibv_qp,
    mw: *mut sys::ibv_mw,
    bind: *mut sys::ibv_mw_bind,
) -> c_int {
    // SAFETY: libibverbs passes the application's live window and bind request.
    let (Some(mw), Some(bind)) = (unsafe { mw.as_mut() }, unsafe { bind.as_ref() }) else {
        return EINVAL;
    };
    // `ibv_inc_rkey`: the next variant of the key's low byte.
    let rkey = (mw.rkey & !0xff) | (mw.rkey.wrapping_add(1) & 0xff);
    let mut wr = sys::ibv_send_wr::zeroed();
    wr.wr_id = bind.wr_id;
    wr.opcode = sys::IBV_WR_BIND_MW;
    wr.send_flags = bind.send_flags;
    wr.__bindgen_anon_2.bind_mw = sys::ibv_send_wr__bindgen_ty_4__bindgen_ty_1 {
        mw,
        rkey,
        bind_info: bind.bind_info,
    };
    let mut bad = core::ptr::null_mut();
    // SAFETY: `qp` is the application's QP; `wr` is a valid chain of one.
    let ret = unsafe { post_send(qp, &mut wr, &mut bad) };
    if ret == 0 {
        mw.rkey = rkey;
    }
    ret
}
