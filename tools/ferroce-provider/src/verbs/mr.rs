// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Protection domains and memory regions: kernel objects only, nothing on the data path.

use core::ffi::{c_int, c_void};
use core::mem::size_of;

use super::{check, fail, Pod};
use crate::sys;

pub(super) unsafe extern "C" fn alloc_pd(ibctx: *mut sys::ibv_context) -> *mut sys::ibv_pd {
    let pd = Box::into_raw(Box::new(sys::ibv_pd::zeroed()));
    let mut cmd = sys::ibv_alloc_pd::zeroed();
    let mut resp = sys::ib_uverbs_alloc_pd_resp::zeroed();
    // SAFETY: `pd` is a live allocation; command and response are sized buffers.
    let ret = unsafe {
        sys::ibv_cmd_alloc_pd(
            ibctx,
            pd,
            &mut cmd,
            size_of::<sys::ibv_alloc_pd>(),
            &mut resp,
            size_of::<sys::ib_uverbs_alloc_pd_resp>(),
        )
    };
    if let Err(e) = check(ret) {
        // SAFETY: `pd` was leaked above and never handed out.
        drop(unsafe { Box::from_raw(pd) });
        return fail(e);
    }
    pd
}

pub(super) unsafe extern "C" fn dealloc_pd(pd: *mut sys::ibv_pd) -> c_int {
    // SAFETY: a PD of `alloc_pd`, passed back by libibverbs.
    let ret = unsafe { sys::ibv_cmd_dealloc_pd(pd) };
    if ret == 0 {
        // SAFETY: the kernel object is gone; the allocation is ours and unused now.
        drop(unsafe { Box::from_raw(pd) });
    }
    ret
}

pub(super) unsafe extern "C" fn reg_mr(
    pd: *mut sys::ibv_pd,
    addr: *mut c_void,
    length: usize,
    hca_va: u64,
    access: c_int,
) -> *mut sys::ibv_mr {
    let vmr = Box::into_raw(Box::new(sys::verbs_mr::zeroed()));
    let mut cmd = sys::ibv_reg_mr::zeroed();
    let mut resp = sys::ib_uverbs_reg_mr_resp::zeroed();
    // SAFETY: `vmr` is a live allocation; the kernel checks the address range.
    let ret = unsafe {
        sys::ibv_cmd_reg_mr(
            pd,
            addr,
            length,
            hca_va,
            access,
            vmr,
            &mut cmd,
            size_of::<sys::ibv_reg_mr>(),
            &mut resp,
            size_of::<sys::ib_uverbs_reg_mr_resp>(),
        )
    };
    if let Err(e) = check(ret) {
        // SAFETY: leaked above, never handed out.
        drop(unsafe { Box::from_raw(vmr) });
        return fail(e);
    }
    // SAFETY: `ibv_mr` is the first field of the live `verbs_mr`.
    unsafe { core::ptr::addr_of_mut!((*vmr).ibv_mr) }
}

pub(super) unsafe extern "C" fn dereg_mr(vmr: *mut sys::verbs_mr) -> c_int {
    // SAFETY: an MR of `reg_mr`, passed back by libibverbs.
    let ret = unsafe { sys::ibv_cmd_dereg_mr(vmr) };
    if ret == 0 {
        // SAFETY: the kernel object is gone; the allocation is ours.
        drop(unsafe { Box::from_raw(vmr) });
    }
    ret
}
