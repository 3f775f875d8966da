// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! XRC domains: the kernel's (uverbs `OPEN_XRCD`, shared between the processes that open one
//! file); the provider keeps nothing of its own but libibverbs' `verbs_xrcd`.

use core::ffi::c_int;
use core::mem::size_of;

use libc::EINVAL;

use super::context::context;
use super::{check, fail, Pod};
use crate::sys;

pub(super) unsafe extern "C" fn open_xrcd(
    ibctx: *mut sys::ibv_context,
    attr: *mut sys::ibv_xrcd_init_attr,
) -> *mut sys::ibv_xrcd {
    // SAFETY: libibverbs passes a context of ours.
    if attr.is_null() || unsafe { context(ibctx) }.is_none() {
        return fail(EINVAL);
    }
    let xrcd = Box::into_raw(Box::new(sys::verbs_xrcd::zeroed()));
    let mut cmd = sys::ibv_open_xrcd::zeroed();
    let mut resp = sys::ib_uverbs_open_xrcd_resp::zeroed();
    // SAFETY: `xrcd` is ours and live; the application's attributes (fd, oflags) are passed
    // as given; command and response are sized buffers.
    let ret = unsafe {
        sys::ibv_cmd_open_xrcd(
            ibctx,
            xrcd,
            size_of::<sys::verbs_xrcd>() as c_int,
            attr,
            &mut cmd,
            size_of::<sys::ibv_open_xrcd>(),
            &mut resp,
            size_of::<sys::ib_uverbs_open_xrcd_resp>(),
        )
    };
    if let Err(e) = check(ret) {
        // SAFETY: leaked above, never handed out.
        drop(unsafe { Box::from_raw(xrcd) });
        return fail(e);
    }
    xrcd.cast()
}

pub(super) unsafe extern "C" fn close_xrcd(ibxrcd: *mut sys::ibv_xrcd) -> c_int {
    if ibxrcd.is_null() {
        return EINVAL;
    }
    let xrcd = ibxrcd.cast::<sys::verbs_xrcd>();
    // SAFETY: an XRC domain of `open_xrcd`, whose `verbs_xrcd` starts with the `ibv_xrcd`.
    let ret = unsafe { sys::ibv_cmd_close_xrcd(xrcd) };
    if ret == 0 {
        // SAFETY: as above; the kernel let go of it, and libibverbs does not use it again.
        drop(unsafe { Box::from_raw(xrcd) });
    }
    ret
}
