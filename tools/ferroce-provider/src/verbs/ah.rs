// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Address handles: the kernel resolves and checks the address vector (destination MAC, also
//! across subnets) and creates the AH in the device; UD WQEs name it by the device's number
//! (`UdSeg`), the only form the device takes on a process's QPs.

use core::ffi::c_int;

use ferroce_hw::{UdAddress, UdSeg};
use libc::EPROTO;

use super::{check, fail, Pod, WithDrv};
use crate::sys;

/// An AH: libibverbs' part first.
#[repr(C)]
pub(super) struct Ah {
    ibah: sys::ibv_ah,
    /// The device's number of the AH.
    handle: u32,
}

impl Ah {
    /// Where a UD send to `remote_qpn` (with `remote_qkey`) through this AH goes.
    pub(super) fn dest(&self, remote_qpn: u32, remote_qkey: u32) -> UdAddress {
        UdAddress::Handle(UdSeg {
            ah: self.handle,
            remote_qpn,
            remote_qkey,
            ..UdSeg::default()
        })
    }
}

type CreateAhResp = WithDrv<sys::ib_uverbs_create_ah_resp, sys::ferroce_create_ah_resp>;

pub(super) unsafe extern "C" fn create_ah(
    pd: *mut sys::ibv_pd,
    attr: *mut sys::ibv_ah_attr,
) -> *mut sys::ibv_ah {
    let ah = Box::into_raw(Box::new(Ah {
        ibah: sys::ibv_ah::zeroed(),
        handle: 0,
    }));
    let mut resp = CreateAhResp::new(sys::ferroce_create_ah_resp::zeroed());
    // SAFETY: `ah` is live and `ibah` its first field; the response is sized.
    let ret =
        unsafe { sys::ibv_cmd_create_ah(pd, ah.cast(), attr, &mut resp.core, CreateAhResp::SIZE) };
    let handle = check(ret).and_then(|()| {
        if resp.drv.reserved != 0 {
            return Err(EPROTO);
        }
        Ok(resp.drv.ah)
    });
    match handle {
        Ok(handle) => {
            // SAFETY: `ah` is live and not yet shared.
            unsafe { (*ah).handle = handle };
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
