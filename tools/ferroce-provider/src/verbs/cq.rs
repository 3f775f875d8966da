// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! CQs: ring and record in provider memory, polled here; arming through the doorbell page
//! (the completion event itself comes through the kernel's completion channel).

use core::ffi::c_int;
use core::sync::atomic::Ordering;
use std::sync::Mutex;

use ferroce_hw::Cqe;
use libc::{EINVAL, ENOMEM};

use super::context::{context, ContextInner};
use super::{check, fail, Pod, WithDrv};
use crate::cq::{fill_wc, is_recv, CqRing};
use crate::doorbell;
use crate::sys;

/// A CQ: libibverbs' part first.
#[repr(C)]
struct Cq {
    vcq: sys::verbs_cq,
    ring: Mutex<CqRing>,
    qid: u16,
    ctx: *const ContextInner,
}

type CreateCq = WithDrv<sys::ibv_create_cq, sys::ferroce_create_cq_req>;
type CreateCqResp = WithDrv<sys::ib_uverbs_create_cq_resp, sys::ferroce_create_cq_resp>;

pub(super) unsafe extern "C" fn create_cq(
    ibctx: *mut sys::ibv_context,
    cqe: c_int,
    channel: *mut sys::ibv_comp_channel,
    comp_vector: c_int,
) -> *mut sys::ibv_cq {
    // SAFETY: libibverbs passes a context of ours.
    let Some(ctx) = (unsafe { context(ibctx) }) else {
        return fail(EINVAL);
    };
    let Ok(cqe) = u32::try_from(cqe) else {
        return fail(EINVAL);
    };
    let ring = match CqRing::new(cqe.max(1), ctx.limits.max_log_queue) {
        Ok(ring) => ring,
        Err(e) => return fail(e),
    };
    let buf = ring.buf();
    // SAFETY: the buffer is our page-aligned mapping.
    if unsafe { sys::ibv_dontfork_range(buf.as_ptr().cast(), buf.len()) } != 0 {
        return fail(ENOMEM);
    }
    let (Ok(buf_size), Ok(dbrec_offset)) =
        (u32::try_from(buf.len()), u32::try_from(ring.dbrec_offset()))
    else {
        return fail(EINVAL);
    };
    let mut cmd = CreateCq::new(sys::ferroce_create_cq_req {
        buf_addr: buf.addr(),
        buf_size,
        log_size: ring.ring().log_size(),
        dbrec_offset,
        reserved: 0,
    });
    let mut resp = CreateCqResp::new(sys::ferroce_create_cq_resp::zeroed());
    let size = ring.ring().size();
    let (addr, len) = (buf.as_ptr(), buf.len());
    let cq = Box::into_raw(Box::new(Cq {
        vcq: sys::verbs_cq::zeroed(),
        ring: Mutex::new(ring),
        qid: 0,
        ctx,
    }));
    // SAFETY: `cq` is live; its `verbs_cq` (first field) starts with the `ibv_cq`.
    let ret = unsafe {
        sys::ibv_cmd_create_cq(
            ibctx,
            c_int::try_from(size).unwrap_or(c_int::MAX),
            channel,
            comp_vector,
            cq.cast(),
            &mut cmd.core,
            CreateCq::SIZE,
            &mut resp.core,
            CreateCqResp::SIZE,
        )
    };
    let qid = check(ret).and_then(|()| u16::try_from(resp.drv.db_qid).map_err(|_| libc::EPROTO));
    match qid {
        Ok(qid) => {
            // SAFETY: live and not yet shared.
            unsafe { (*cq).qid = qid };
            cq.cast()
        }
        Err(e) => {
            if ret == 0 {
                // SAFETY: created above.
                unsafe { sys::ibv_cmd_destroy_cq(cq.cast()) };
            }
            // SAFETY: the range was marked above; the box was leaked above.
            unsafe {
                sys::ibv_dofork_range(addr.cast(), len);
                drop(Box::from_raw(cq));
            }
            fail(e)
        }
    }
}

pub(super) unsafe extern "C" fn destroy_cq(ibcq: *mut sys::ibv_cq) -> c_int {
    // SAFETY: a CQ of `create_cq`.
    let ret = unsafe { sys::ibv_cmd_destroy_cq(ibcq) };
    if ret != 0 {
        return ret;
    }
    // SAFETY: the kernel object is gone; `ibcq` is the start of our boxed `Cq`.
    let cq = unsafe { Box::from_raw(ibcq.cast::<Cq>()) };
    let ring = cq.ring.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: the range was marked by `create_cq`.
    unsafe { sys::ibv_dofork_range(ring.buf().as_ptr().cast(), ring.buf().len()) };
    0
}

/// Frees the ring slots a CQE completes in its queue.
fn account(ctx: &ContextInner, cqe: &Cqe) {
    let qps = ctx.qps();
    let Some(qp) = qps.get(&cqe.qpn) else {
        return;
    };
    let next = cqe.wqe_index.wrapping_add(1);
    if !is_recv(cqe) {
        qp.sq_ci.store(next, Ordering::Release);
    } else if let Some(srq) = &qp.srq {
        srq.completed(next);
    } else {
        qp.rq_ci.store(next, Ordering::Release);
    }
}

pub(super) unsafe extern "C" fn poll_cq(
    ibcq: *mut sys::ibv_cq,
    ne: c_int,
    wc: *mut sys::ibv_wc,
) -> c_int {
    let Ok(n) = usize::try_from(ne) else {
        return -EINVAL;
    };
    if n == 0 {
        return 0;
    }
    if ibcq.is_null() || wc.is_null() {
        return -EINVAL;
    }
    // SAFETY: a CQ of `create_cq`, alive while the application polls it.
    let cq = unsafe { &*ibcq.cast::<Cq>() };
    // SAFETY: the context outlives its CQs.
    let ctx = unsafe { &*cq.ctx };
    // SAFETY: the application passes `ne` writable work completions.
    let wcs = unsafe { core::slice::from_raw_parts_mut(wc, n) };
    let mut ring = cq.ring.lock().unwrap_or_else(|e| e.into_inner());
    let mut polled = 0;
    for slot in wcs.iter_mut() {
        let Some(cqe) = ring.poll() else {
            break;
        };
        account(ctx, &cqe);
        fill_wc(&cqe, slot);
        polled += 1;
    }
    if polled > 0 {
        ring.publish_ci();
    }
    c_int::try_from(polled).unwrap_or(c_int::MAX)
}

pub(super) unsafe extern "C" fn req_notify_cq(ibcq: *mut sys::ibv_cq, solicited: c_int) -> c_int {
    if ibcq.is_null() {
        return EINVAL;
    }
    // SAFETY: a CQ of `create_cq`.
    let cq = unsafe { &*ibcq.cast::<Cq>() };
    // SAFETY: the context outlives its CQs.
    let ctx = unsafe { &*cq.ctx };
    doorbell::arm_cq(&ctx.db, cq.qid, solicited != 0);
    0
}
