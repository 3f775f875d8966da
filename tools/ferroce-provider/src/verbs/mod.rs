// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The FFI layer: rdma-core calls these functions through the ops tables registered by the
//! library constructor. Every `unsafe` block of the provider that touches rdma-core objects is
//! here; each entry point checks its arguments and returns an errno, never panics.

mod ah;
mod context;
mod cq;
mod mr;
mod mw;
mod qp;
mod srq;
mod xrcd;

use core::ffi::c_int;
use core::mem::size_of;

use crate::sys;

/// Plain C data for which all-zero bytes are a valid value.
///
/// # Safety
///
/// Implementors must be `#[repr(C)]` types of integers, raw pointers, `Option<fn>` and
/// arrays or unions of those.
unsafe trait Pod: Sized {
    fn zeroed() -> Self {
        // SAFETY: by the trait's contract all-zero is a valid value.
        unsafe { core::mem::zeroed() }
    }
}

macro_rules! pod {
    ($($t:ty),* $(,)?) => {
        // SAFETY: bindgen output of C structs of integers, pointers and function pointers.
        $(unsafe impl Pod for $t {})*
    };
}

pod!(
    sys::verbs_context,
    sys::verbs_device,
    sys::verbs_cq,
    sys::verbs_qp,
    sys::verbs_srq,
    sys::verbs_mr,
    sys::ibv_pd,
    sys::ibv_ah,
    sys::ibv_get_context,
    sys::ib_uverbs_get_context_resp,
    sys::ferroce_alloc_ucontext_resp,
    sys::ib_uverbs_ex_query_device_resp,
    sys::ibv_query_port,
    sys::ibv_alloc_pd,
    sys::ib_uverbs_alloc_pd_resp,
    sys::ibv_reg_mr,
    sys::ib_uverbs_reg_mr_resp,
    sys::ibv_mw,
    sys::ibv_alloc_mw,
    sys::ib_uverbs_alloc_mw_resp,
    sys::ibv_send_wr,
    sys::ibv_create_cq,
    sys::ib_uverbs_create_cq_resp,
    sys::ferroce_create_cq_req,
    sys::ferroce_create_cq_resp,
    sys::ibv_create_cq_ex,
    sys::ib_uverbs_ex_create_cq_resp,
    sys::ibv_resize_cq,
    sys::ib_uverbs_resize_cq_resp,
    sys::ferroce_resize_cq_req,
    sys::ibv_create_qp,
    sys::ib_uverbs_create_qp_resp,
    sys::ferroce_create_qp_req,
    sys::ferroce_create_qp_resp,
    sys::ibv_modify_qp,
    sys::ibv_query_qp,
    sys::ibv_create_srq,
    sys::ib_uverbs_create_srq_resp,
    sys::ferroce_create_srq_req,
    sys::ferroce_create_srq_resp,
    sys::ibv_modify_srq,
    sys::ibv_query_srq,
    sys::ferroce_resize_srq_req,
    sys::ib_uverbs_create_ah_resp,
    sys::ferroce_create_ah_resp,
    sys::verbs_xrcd,
    sys::ibv_open_xrcd,
    sys::ib_uverbs_open_xrcd_resp,
    sys::ibv_create_xsrq,
    sys::ibv_open_qp,
);

/// A uverbs command or response followed by the driver's data (rdma-core's
/// `DECLARE_DRV_CMD` layout: the core structure, then the driver structure).
#[repr(C)]
struct WithDrv<K, D> {
    core: K,
    drv: D,
}

impl<K: Pod, D: Pod> WithDrv<K, D> {
    fn new(drv: D) -> Self {
        Self {
            core: K::zeroed(),
            drv,
        }
    }

    const SIZE: usize = size_of::<Self>();
}

/// Sets the calling thread's `errno`.
fn set_errno(e: i32) {
    // SAFETY: `__errno_location` returns the calling thread's errno slot.
    unsafe { *libc::__errno_location() = e };
}

/// `NULL` with `errno = e`, the failure of verbs returning objects.
fn fail<T>(e: i32) -> *mut T {
    set_errno(e);
    core::ptr::null_mut()
}

/// An rdma-core return value (0 or an errno) as a `Result`.
fn check(ret: c_int) -> Result<(), i32> {
    if ret == 0 {
        Ok(())
    } else {
        Err(ret)
    }
}

/// Registers the provider with libibverbs when the library is loaded.
extern "C" fn register() {
    // SAFETY: the ops are a static, valid for the life of the library, as libibverbs needs.
    unsafe { sys::verbs_register_driver_34(&context::DEVICE_OPS.0) };
}

#[used]
#[link_section = ".init_array"]
static REGISTER: extern "C" fn() = register;
