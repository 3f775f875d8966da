// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Shared receive queues: a ring of receive WQEs and a record (`pi`) in provider memory;
//! `ibv_modify_srq` with `IBV_SRQ_MAX_WR` moves them to a larger buffer (`CMD_RESIZE_SRQ`).

use core::ffi::c_int;
use std::sync::{Arc, Mutex};

use ferroce_hw::{Sge, MAX_SGE};
use libc::{EINVAL, ENOMEM};

use super::context::{context, ContextInner};
use super::{check, fail, Pod, WithDrv};
use crate::dma::DmaBuf;
use crate::queue::layout::srq_layout;
use crate::queue::{QueueProgress, WorkQueue};
use crate::sys;
use crate::wqe::build_recv_wqe;

/// An SRQ: libibverbs' part first.
#[repr(C)]
pub(super) struct Srq {
    vsrq: sys::verbs_srq,
    /// The ring and its buffer; posters and a resize hold the lock.
    wq: Mutex<SrqRing>,
    ctx: *const ContextInner,
    /// How far the device consumed the ring, for the QPs that receive from it.
    pub(super) progress: Arc<QueueProgress>,
    max_sge: u32,
    /// An XRC SRQ's CQ (null for a basic SRQ): its CQEs go when it does.
    xrc_cq: *mut sys::ibv_cq,
}

/// An SRQ's ring and the buffer it lives in.
struct SrqRing {
    wq: WorkQueue,
    buf: DmaBuf,
}

type CreateSrq = WithDrv<sys::ibv_create_srq, sys::ferroce_create_srq_req>;
type CreateXsrq = WithDrv<sys::ibv_create_xsrq, sys::ferroce_create_srq_req>;
type ResizeSrq = WithDrv<sys::ibv_modify_srq, sys::ferroce_resize_srq_req>;
type CreateSrqResp = WithDrv<sys::ib_uverbs_create_srq_resp, sys::ferroce_create_srq_resp>;

/// Creates the provider's part of an SRQ for `want` and, through `issue` (which runs the
/// uverbs command for the `Srq` it gets, with our driver data), the kernel's. Returns the SRQ
/// and what it holds (entries, SGEs).
///
/// # Safety
///
/// `issue` returns an rdma-core status and, on success, leaves a kernel SRQ behind the
/// `Srq`'s `verbs_srq`.
unsafe fn create(
    ctx: &ContextInner,
    want: sys::ibv_srq_attr,
    xrc_cq: *mut sys::ibv_cq,
    issue: impl FnOnce(*mut Srq, sys::ferroce_create_srq_req, &mut CreateSrqResp) -> c_int,
) -> Result<(*mut Srq, u32, u32), i32> {
    let layout = srq_layout(want.max_wr, want.max_sge, &ctx.limits)?;
    let buf = DmaBuf::new(layout.buf_size)?;
    let wq = WorkQueue::rq(&layout.sq, layout.dbrec_offset, true)?;
    // SAFETY: our page-aligned mapping.
    if unsafe { sys::ibv_dontfork_range(buf.as_ptr().cast(), buf.len()) } != 0 {
        return Err(ENOMEM);
    }
    let (addr, len) = (buf.as_ptr(), buf.len());
    let (Ok(buf_size), Ok(dbrec_offset)) =
        (u32::try_from(buf.len()), u32::try_from(layout.dbrec_offset))
    else {
        // SAFETY: marked above.
        unsafe { sys::ibv_dofork_range(addr.cast(), len) };
        return Err(EINVAL);
    };
    let req = sys::ferroce_create_srq_req {
        buf_addr: buf.addr(),
        buf_size,
        log_size: layout.sq.log_size,
        log_stride: layout.sq.log_stride,
        dbrec_offset,
        reserved: 0,
    };
    let mut resp = CreateSrqResp::new(sys::ferroce_create_srq_resp::zeroed());
    let size = wq.size();
    let max_sge = layout.sq.ring().recv_sges(&ctx.limits);
    let srq = Box::into_raw(Box::new(Srq {
        vsrq: sys::verbs_srq::zeroed(),
        progress: wq.progress().clone(),
        wq: Mutex::new(SrqRing { wq, buf }),
        ctx,
        max_sge,
        xrc_cq,
    }));
    if let Err(e) = check(issue(srq, req, &mut resp)) {
        // SAFETY: marked above; leaked above, never handed out.
        unsafe {
            sys::ibv_dofork_range(addr.cast(), len);
            drop(Box::from_raw(srq));
        }
        return Err(e);
    }
    Ok((srq, size, max_sge))
}

pub(super) unsafe extern "C" fn create_srq(
    pd: *mut sys::ibv_pd,
    attr: *mut sys::ibv_srq_init_attr,
) -> *mut sys::ibv_srq {
    if pd.is_null() || attr.is_null() {
        return fail(EINVAL);
    }
    // SAFETY: libibverbs passes a PD of this context.
    let Some(ctx) = (unsafe { context((*pd).context) }) else {
        return fail(EINVAL);
    };
    // SAFETY: `attr` is the application's, non-null.
    let want = unsafe { (*attr).attr };
    // SAFETY: the command runs for our `Srq`, whose `verbs_srq` starts with the `ibv_srq`.
    let created = unsafe {
        create(ctx, want, core::ptr::null_mut(), |srq, req, resp| {
            let mut cmd = CreateSrq::new(req);
            sys::ibv_cmd_create_srq(
                pd,
                srq.cast(),
                attr,
                &mut cmd.core,
                CreateSrq::SIZE,
                &mut resp.core,
                CreateSrqResp::SIZE,
            )
        })
    };
    match created {
        Ok((srq, size, max_sge)) => {
            // SAFETY: `attr` is the application's; report what the queue holds.
            unsafe {
                (*attr).attr.max_wr = size;
                (*attr).attr.max_sge = max_sge;
            }
            srq.cast()
        }
        Err(e) => fail(e),
    }
}

/// `ibv_create_srq_ex`: a basic SRQ (as `ibv_create_srq`) or an XRC SRQ of an XRC domain,
/// which completes on its own CQ; the kernel reports its number (`ibv_get_srq_num`).
pub(super) unsafe extern "C" fn create_srq_ex(
    ibctx: *mut sys::ibv_context,
    attr: *mut sys::ibv_srq_init_attr_ex,
) -> *mut sys::ibv_srq {
    // SAFETY: libibverbs passes a context of ours.
    let Some(ctx) = (unsafe { context(ibctx) }) else {
        return fail(EINVAL);
    };
    // SAFETY: the application's attributes, if non-null.
    let Some(init) = (unsafe { attr.as_mut() }) else {
        return fail(EINVAL);
    };
    let known = sys::IBV_SRQ_INIT_ATTR_TYPE
        | sys::IBV_SRQ_INIT_ATTR_PD
        | sys::IBV_SRQ_INIT_ATTR_XRCD
        | sys::IBV_SRQ_INIT_ATTR_CQ;
    if init.comp_mask & !known != 0 {
        return fail(libc::EOPNOTSUPP);
    }
    let srq_type = if init.comp_mask & sys::IBV_SRQ_INIT_ATTR_TYPE != 0 {
        init.srq_type
    } else {
        sys::IBV_SRQT_BASIC
    };
    let xrc = match srq_type {
        sys::IBV_SRQT_BASIC => false,
        sys::IBV_SRQT_XRC => true,
        _ => return fail(libc::EOPNOTSUPP),
    };
    let with_pd = init.comp_mask & sys::IBV_SRQ_INIT_ATTR_PD != 0 && !init.pd.is_null();
    let needs = sys::IBV_SRQ_INIT_ATTR_XRCD | sys::IBV_SRQ_INIT_ATTR_CQ;
    if !with_pd
        || (xrc && (init.comp_mask & needs != needs || init.xrcd.is_null() || init.cq.is_null()))
    {
        return fail(EINVAL);
    }
    if !xrc {
        let mut basic = sys::ibv_srq_init_attr {
            srq_context: init.srq_context,
            attr: init.attr,
        };
        // SAFETY: a PD of the application's (one of ours), and its attributes.
        let srq = unsafe { create_srq(init.pd, &mut basic) };
        init.attr = basic.attr;
        return srq;
    }
    let want = init.attr;
    // SAFETY: the command runs for our `Srq`, whose `verbs_srq` starts with the `ibv_srq`;
    // libibverbs sends the domain's, CQ's and PD's handles and reads back the SRQ number.
    let created = unsafe {
        create(ctx, want, init.cq, |srq, req, resp| {
            let mut cmd = CreateXsrq::new(req);
            sys::ibv_cmd_create_srq_ex(
                ibctx,
                srq.cast(),
                attr,
                &mut cmd.core,
                CreateXsrq::SIZE,
                &mut resp.core,
                CreateSrqResp::SIZE,
            )
        })
    };
    match created {
        Ok((srq, size, max_sge)) => {
            init.attr.max_wr = size;
            init.attr.max_sge = max_sge;
            // SAFETY: live, not yet shared; libibverbs set its number.
            let (srqn, progress) = unsafe { ((*srq).vsrq.srq_num, (*srq).progress.clone()) };
            ctx.xrc_srqs.insert(srqn, progress);
            srq.cast()
        }
        Err(e) => fail(e),
    }
}

/// `ibv_get_srq_num`: the number initiators name an XRC SRQ by (libibverbs kept it).
pub(super) unsafe extern "C" fn get_srq_num(ibsrq: *mut sys::ibv_srq, srq_num: *mut u32) -> c_int {
    if ibsrq.is_null() || srq_num.is_null() {
        return EINVAL;
    }
    // SAFETY: an SRQ of ours; the application's out pointer.
    unsafe {
        let srq = &*ibsrq.cast::<Srq>();
        if srq.xrc_cq.is_null() {
            return EINVAL;
        }
        *srq_num = srq.vsrq.srq_num;
    }
    0
}

pub(super) unsafe extern "C" fn modify_srq(
    ibsrq: *mut sys::ibv_srq,
    attr: *mut sys::ibv_srq_attr,
    mask: c_int,
) -> c_int {
    if mask & sys::IBV_SRQ_MAX_WR as c_int != 0 {
        // SAFETY: as below.
        return unsafe { resize(ibsrq, attr, mask) };
    }
    let mut cmd = sys::ibv_modify_srq::zeroed();
    // SAFETY: an SRQ of ours and the application's attributes.
    unsafe {
        sys::ibv_cmd_modify_srq(
            ibsrq,
            attr,
            mask,
            &mut cmd,
            core::mem::size_of::<sys::ibv_modify_srq>(),
        )
    }
}

/// `ibv_modify_srq` with `IBV_SRQ_MAX_WR` (and maybe the limit): a larger ring in a new
/// buffer; the kernel moves the SRQ there in the device, which copies the WQEs it has not
/// taken. Nothing is posted meanwhile (the ring's lock is held); the old buffer goes after.
///
/// # Safety
///
/// `ibsrq` is an SRQ of ours, `attr` the application's attributes.
unsafe fn resize(ibsrq: *mut sys::ibv_srq, attr: *mut sys::ibv_srq_attr, mask: c_int) -> c_int {
    if ibsrq.is_null() || attr.is_null() {
        return EINVAL;
    }
    // SAFETY: per the contract.
    let (srq, want) = unsafe { (&*ibsrq.cast::<Srq>(), *attr) };
    // SAFETY: the context outlives its SRQs.
    let ctx = unsafe { &*srq.ctx };
    let mut ring = srq.wq.lock().unwrap_or_else(|e| e.into_inner());
    let layout = match srq_layout(want.max_wr, srq.max_sge, &ctx.limits) {
        Ok(layout) => layout,
        Err(e) => return e,
    };
    let pi_offset = layout.dbrec_offset + core::mem::offset_of!(ferroce_hw::SrqDbRecord, pi);
    let moved = DmaBuf::new(layout.buf_size).and_then(|buf| {
        let wq = ring.wq.moved(&layout.sq, pi_offset)?;
        Ok((buf, wq))
    });
    let (buf, wq) = match moved {
        Ok(x) => x,
        Err(e) => return e,
    };
    // The new record holds the producer index before the device reads it.
    wq.publish(&buf);
    // SAFETY: our page-aligned mapping.
    if unsafe { sys::ibv_dontfork_range(buf.as_ptr().cast(), buf.len()) } != 0 {
        return ENOMEM;
    }
    let release = |buf: &DmaBuf| {
        // SAFETY: marked by `create_srq` or above.
        unsafe { sys::ibv_dofork_range(buf.as_ptr().cast(), buf.len()) };
    };
    let (Ok(buf_size), Ok(dbrec_offset)) =
        (u32::try_from(buf.len()), u32::try_from(layout.dbrec_offset))
    else {
        release(&buf);
        return EINVAL;
    };
    let mut cmd = ResizeSrq::new(sys::ferroce_resize_srq_req {
        buf_addr: buf.addr(),
        buf_size,
        log_size: layout.sq.log_size,
        log_stride: layout.sq.log_stride,
        dbrec_offset,
        reserved: 0,
        reserved2: 0,
    });
    // SAFETY: an SRQ of ours, the application's attributes; the command is ours.
    let ret = unsafe { sys::ibv_cmd_modify_srq(ibsrq, attr, mask, &mut cmd.core, ResizeSrq::SIZE) };
    if ret != 0 {
        release(&buf);
        return ret;
    }
    wq.moved_in_device();
    let old = core::mem::replace(&mut *ring, SrqRing { wq, buf });
    release(&old.buf);
    0
}

pub(super) unsafe extern "C" fn query_srq(
    ibsrq: *mut sys::ibv_srq,
    attr: *mut sys::ibv_srq_attr,
) -> c_int {
    let mut cmd = sys::ibv_query_srq::zeroed();
    // SAFETY: an SRQ of ours and the application's attributes.
    unsafe {
        sys::ibv_cmd_query_srq(
            ibsrq,
            attr,
            &mut cmd,
            core::mem::size_of::<sys::ibv_query_srq>(),
        )
    }
}

pub(super) unsafe extern "C" fn destroy_srq(ibsrq: *mut sys::ibv_srq) -> c_int {
    // SAFETY: an SRQ of `create_srq`.
    let ret = unsafe { sys::ibv_cmd_destroy_srq(ibsrq) };
    if ret != 0 {
        return ret;
    }
    // SAFETY: the kernel object is gone; `ibsrq` starts our boxed `Srq`.
    let srq = unsafe { Box::from_raw(ibsrq.cast::<Srq>()) };
    if !srq.xrc_cq.is_null() {
        let srqn = srq.vsrq.srq_num;
        // SAFETY: the context outlives its SRQs.
        unsafe { &*srq.ctx }.xrc_srqs.remove(srqn);
        // Its CQEs go with it: an SRQ created next with its number never polls them.
        // SAFETY: the CQ of an SRQ outlives it (ib_core counts it as a user).
        unsafe { super::cq::clean_xrc_srq(srq.xrc_cq, srqn) };
    }
    let ring = srq.wq.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: marked by `create_srq` or `resize`.
    unsafe { sys::ibv_dofork_range(ring.buf.as_ptr().cast(), ring.buf.len()) };
    0
}

/// Converts an `ibv_recv_wr`'s SGE list.
///
/// # Safety
///
/// `wr` follows the verbs contract: `sg_list` holds `num_sge` entries.
pub(super) unsafe fn recv_sges<'a>(
    wr: &sys::ibv_recv_wr,
    out: &'a mut [Sge; MAX_SGE as usize],
) -> Result<&'a [Sge], i32> {
    let n = usize::try_from(wr.num_sge).map_err(|_| EINVAL)?;
    if n > out.len() || (n > 0 && wr.sg_list.is_null()) {
        return Err(EINVAL);
    }
    if n > 0 {
        // SAFETY: per the contract, `sg_list` holds `n` entries.
        let list = unsafe { core::slice::from_raw_parts(wr.sg_list, n) };
        for (dst, s) in out.iter_mut().zip(list) {
            *dst = Sge {
                addr: s.addr,
                length: s.length,
                lkey: s.lkey,
            };
        }
    }
    Ok(&out[..n])
}

/// Posts a receive chain to `wq`; returns the first failed WR.
///
/// # Safety
///
/// `wr` is null or a valid chain of `ibv_recv_wr`.
pub(super) unsafe fn post_recv_chain(
    wq: &mut WorkQueue,
    buf: &DmaBuf,
    ci: u16,
    max_sge: u32,
    wr: *mut sys::ibv_recv_wr,
) -> Result<(), (i32, *mut sys::ibv_recv_wr)> {
    let mut cur = wr;
    let mut attempt = wr;
    let mut scratch = [0u8; ferroce_hw::MAX_WQE_SIZE];
    let mut sges = [Sge::default(); MAX_SGE as usize];
    let (posted, result, _) = wq.fill(buf, ci, &mut scratch, |slot| {
        // SAFETY: per the contract, `cur` is null or a valid WR.
        let w = unsafe { cur.as_ref() }?;
        attempt = cur;
        cur = w.next;
        // SAFETY: per the contract.
        Some(
            unsafe { recv_sges(w, &mut sges) }
                .and_then(|s| build_recv_wqe(w.wr_id, s, max_sge, slot)),
        )
    });
    if posted > 0 {
        wq.publish(buf);
    }
    result.map_err(|e| (e, attempt))
}

pub(super) unsafe extern "C" fn post_srq_recv(
    ibsrq: *mut sys::ibv_srq,
    wr: *mut sys::ibv_recv_wr,
    bad: *mut *mut sys::ibv_recv_wr,
) -> c_int {
    if ibsrq.is_null() {
        return EINVAL;
    }
    // SAFETY: an SRQ of `create_srq`.
    let srq = unsafe { &*ibsrq.cast::<Srq>() };
    let mut ring = srq.wq.lock().unwrap_or_else(|e| e.into_inner());
    let SrqRing { wq, buf } = &mut *ring;
    let ci = srq.progress.ci();
    // SAFETY: the application's chain.
    match unsafe { post_recv_chain(wq, buf, ci, srq.max_sge, wr) } {
        Ok(()) => 0,
        Err((e, at)) => {
            if !bad.is_null() {
                // SAFETY: the application's out pointer.
                unsafe { *bad = at };
            }
            e
        }
    }
}
