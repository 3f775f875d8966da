// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Address handles: the kernel resolves the address vector (destination MAC, also across
//! subnets) and returns it in the hardware's `UdAvSeg` layout; UD WQEs carry a copy.

use core::ffi::c_int;

use ferroce_hw::UdAvSeg;
use libc::EPROTO;

use super::{check, fail, Pod, WithDrv};
use crate::sys;

/// An AH: libibverbs' part first.
#[repr(C)]
pub(super) struct Ah {
    ibah: sys::ibv_ah,
    /// The address vector with `remote_qpn` and `remote_qkey` zero.
    pub(super) av: UdAvSeg,
}

type CreateAhResp = WithDrv<sys::ib_uverbs_create_ah_resp, sys::ferroce_create_ah_resp>;

pub(super) unsafe extern "C" fn create_ah(
    pd: *mut sys::ibv_pd,
    attr: *mut sys::ibv_ah_attr,
) -> *mut sys::ibv_ah {
    let ah = Box::into_raw(Box::new(Ah {
        ibah: sys::ibv_ah::zeroed(),
        av: UdAvSeg::default(),
    }));
    let mut resp = CreateAhResp::new(sys::ferroce_create_ah_resp::zeroed());
    // SAFETY: `ah` is live and `ibah` its first field; the response is sized.
    let ret =
        unsafe { sys::ibv_cmd_create_ah(pd, ah.cast(), attr, &mut resp.core, CreateAhResp::SIZE) };
    let av = check(ret).and_then(|()| {
        let av = UdAvSeg::decode(&resp.drv.av);
        if av.rsvd != 0 || av.remote_qpn != 0 || av.remote_qkey != 0 {
            return Err(EPROTO);
        }
        Ok(av)
    });
    match av {
        Ok(av) => {
            // SAFETY: `ah` is live and not yet shared.
            unsafe { (*ah).av = av };
            ah.cast()
        }
        Err(e) => {
            if ret == 0 {
                // SAFETY: created above.
                unsafe { sys::ibv_cmd_destroy_ah(ah.cast()) };
            }
            // SAFETY: leaked above, never handed out.
            drop(unsafe { Box::from_raw(ah) });
            fail(e)
        }
    }
}

pub(super) unsafe extern "C" fn destroy_ah(ibah: *mut sys::ibv_ah) -> c_int {
    // SAFETY: an AH of `create_ah`.
    let ret = unsafe { sys::ibv_cmd_destroy_ah(ibah) };
    if ret == 0 {
        // SAFETY: the kernel object is gone; `ibah` is the first field of our box.
        drop(unsafe { Box::from_raw(ibah.cast::<Ah>()) });
    }
    ret
}
