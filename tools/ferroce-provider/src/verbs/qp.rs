// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! QPs (RC and UD): SQ, RQ and doorbell record in one provider buffer; posting builds WQEs
//! in the rings and rings the doorbell page.

use core::ffi::c_int;
use core::mem::size_of;
use core::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use ferroce_hw::{Sge, MAX_SGE, QPT_RC, QPT_UD, WQE_HEADER_SIZE};
use libc::{EINVAL, ENOMEM};

use super::ah::Ah;
use super::context::{context, ContextInner, QpProgress};
use super::srq::{post_recv_chain, Srq};
use super::{check, fail, Pod, WithDrv};
use crate::dma::DmaBuf;
use crate::queue::{qp_layout, QpCaps, WorkQueue};
use crate::sys;
use crate::wqe::{build_send_wqe, Payload, SendOp, SendRequest, SqLimits};

/// A QP: libibverbs' part first.
#[repr(C)]
struct Qp {
    vqp: sys::verbs_qp,
    buf: DmaBuf,
    sq: Mutex<WorkQueue>,
    rq: Option<Mutex<WorkQueue>>,
    progress: Arc<QpProgress>,
    limits: SqLimits,
    rq_max_sge: u32,
    sig_all: bool,
    qid: u16,
    ctx: *const ContextInner,
}

type CreateQp = WithDrv<sys::ibv_create_qp, sys::ferroce_create_qp_req>;
type CreateQpResp = WithDrv<sys::ib_uverbs_create_qp_resp, sys::ferroce_create_qp_resp>;

fn sges_for(stride: usize, header: usize, dev_max: u32) -> u32 {
    u32::try_from(stride.saturating_sub(header) / Sge::SIZE)
        .unwrap_or(0)
        .min(dev_max)
        .min(MAX_SGE)
}

pub(super) unsafe extern "C" fn create_qp(
    pd: *mut sys::ibv_pd,
    attr: *mut sys::ibv_qp_init_attr,
) -> *mut sys::ibv_qp {
    if pd.is_null() || attr.is_null() {
        return fail(EINVAL);
    }
    // SAFETY: libibverbs passes a PD of one of our contexts.
    let Some(ctx) = (unsafe { context((*pd).context) }) else {
        return fail(EINVAL);
    };
    // SAFETY: the application's attributes, non-null.
    let init = unsafe { &mut *attr };
    let qp_type = match init.qp_type {
        sys::IBV_QPT_RC => QPT_RC,
        sys::IBV_QPT_UD => QPT_UD,
        _ => return fail(libc::EOPNOTSUPP),
    };
    let srq = init.srq.cast::<Srq>();
    let caps = QpCaps {
        max_send_wr: init.cap.max_send_wr,
        max_recv_wr: init.cap.max_recv_wr,
        max_send_sge: init.cap.max_send_sge,
        max_recv_sge: init.cap.max_recv_sge,
        max_inline: init.cap.max_inline_data,
    };
    let layout = match qp_layout(&caps, !srq.is_null(), &ctx.limits) {
        Ok(layout) => layout,
        Err(e) => return fail(e),
    };
    let queues = DmaBuf::new(layout.buf_size).and_then(|buf| {
        let sq = WorkQueue::sq(&layout)?;
        let rq = match &layout.rq {
            Some(rq) => Some(WorkQueue::rq(rq, layout.dbrec_offset, false)?),
            None => None,
        };
        Ok((buf, sq, rq))
    });
    let (buf, sq, rq) = match queues {
        Ok(q) => q,
        Err(e) => return fail(e),
    };
    // SAFETY: our page-aligned mapping.
    if unsafe { sys::ibv_dontfork_range(buf.as_ptr().cast(), buf.len()) } != 0 {
        return fail(ENOMEM);
    }
    let rq_layout = layout.rq.unwrap_or(crate::queue::RingLayout {
        offset: 0,
        log_size: 0,
        log_stride: 0,
    });
    let (Ok(buf_size), Ok(rq_offset), Ok(dbrec_offset)) = (
        u32::try_from(buf.len()),
        u32::try_from(rq_layout.offset),
        u32::try_from(layout.dbrec_offset),
    ) else {
        return fail(EINVAL);
    };
    let mut cmd = CreateQp::new(sys::ferroce_create_qp_req {
        buf_addr: buf.addr(),
        buf_size,
        sq_log_size: layout.sq.log_size,
        sq_log_stride: layout.sq.log_stride,
        rq_offset,
        rq_log_size: rq_layout.log_size,
        rq_log_stride: rq_layout.log_stride,
        dbrec_offset,
        reserved: 0,
    });
    let mut resp = CreateQpResp::new(sys::ferroce_create_qp_resp::zeroed());
    let stride = sq.stride();
    let limits = SqLimits {
        qp_type,
        stride,
        max_sge: sges_for(stride, WQE_HEADER_SIZE, ctx.limits.max_sge),
        max_inline: u32::try_from(stride - WQE_HEADER_SIZE)
            .unwrap_or(0)
            .min(ctx.limits.max_inline),
    };
    let sq_size = sq.size();
    let rq_caps = rq
        .as_ref()
        .map(|rq| (rq.size(), sges_for(rq.stride(), 16, ctx.limits.max_sge)));
    // SAFETY: a non-null SRQ of ours (libibverbs passes the application's).
    let srq_progress = unsafe { srq.as_ref() }.map(|s| s.progress.clone());
    let (addr, len) = (buf.as_ptr(), buf.len());
    let qp = Box::into_raw(Box::new(Qp {
        vqp: sys::verbs_qp::zeroed(),
        buf,
        sq: Mutex::new(sq),
        rq: rq.map(Mutex::new),
        progress: Arc::new(QpProgress {
            srq: srq_progress,
            ..QpProgress::default()
        }),
        limits,
        rq_max_sge: rq_caps.map_or(0, |c| c.1),
        sig_all: init.sq_sig_all != 0,
        qid: 0,
        ctx,
    }));
    // SAFETY: `qp` is live; its `verbs_qp` starts with the `ibv_qp`.
    let ret = unsafe {
        sys::ibv_cmd_create_qp(
            pd,
            qp.cast(),
            attr,
            &mut cmd.core,
            CreateQp::SIZE,
            &mut resp.core,
            CreateQpResp::SIZE,
        )
    };
    let qid = check(ret).and_then(|()| u16::try_from(resp.drv.db_qid).map_err(|_| libc::EPROTO));
    let qid = match qid {
        Ok(qid) => qid,
        Err(e) => {
            if ret == 0 {
                // SAFETY: created above.
                unsafe { sys::ibv_cmd_destroy_qp(qp.cast()) };
            }
            // SAFETY: marked above; leaked above.
            unsafe {
                sys::ibv_dofork_range(addr.cast(), len);
                drop(Box::from_raw(qp));
            }
            return fail(e);
        }
    };
    // SAFETY: live and not yet shared.
    let q = unsafe { &mut *qp };
    q.qid = qid;
    // SAFETY: `ibv_qp` is the first member of `verbs_qp`'s union.
    let qpn = unsafe { q.vqp.__bindgen_anon_1.qp.qp_num };
    ctx.qps().insert(qpn, q.progress.clone());
    init.cap.max_send_wr = sq_size;
    init.cap.max_send_sge = limits.max_sge;
    init.cap.max_inline_data = limits.max_inline;
    if let Some((size, sge)) = rq_caps {
        init.cap.max_recv_wr = size;
        init.cap.max_recv_sge = sge;
    }
    qp.cast()
}

pub(super) unsafe extern "C" fn modify_qp(
    ibqp: *mut sys::ibv_qp,
    attr: *mut sys::ibv_qp_attr,
    mask: c_int,
) -> c_int {
    if ibqp.is_null() || attr.is_null() {
        return EINVAL;
    }
    let mut cmd = sys::ibv_modify_qp::zeroed();
    // SAFETY: a QP of ours and the application's attributes.
    let ret = unsafe {
        sys::ibv_cmd_modify_qp(ibqp, attr, mask, &mut cmd, size_of::<sys::ibv_modify_qp>())
    };
    // SAFETY: as above.
    let to_reset = unsafe { (*attr).qp_state } == sys::IBV_QPS_RESET;
    if ret == 0 && mask & sys::IBV_QP_STATE as c_int != 0 && to_reset {
        // The device restarts the QP's queues at index 0: so do we.
        // SAFETY: a QP of `create_qp`.
        let qp = unsafe { &*ibqp.cast::<Qp>() };
        qp.sq
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .reset(&qp.buf);
        qp.progress.sq_ci.store(0, Ordering::Release);
        if let Some(rq) = &qp.rq {
            rq.lock().unwrap_or_else(|e| e.into_inner()).reset(&qp.buf);
            qp.progress.rq_ci.store(0, Ordering::Release);
        }
    }
    ret
}

pub(super) unsafe extern "C" fn query_qp(
    ibqp: *mut sys::ibv_qp,
    attr: *mut sys::ibv_qp_attr,
    mask: c_int,
    init: *mut sys::ibv_qp_init_attr,
) -> c_int {
    let mut cmd = sys::ibv_query_qp::zeroed();
    // SAFETY: a QP of ours and the application's buffers.
    unsafe {
        sys::ibv_cmd_query_qp(
            ibqp,
            attr,
            mask,
            init,
            &mut cmd,
            size_of::<sys::ibv_query_qp>(),
        )
    }
}

pub(super) unsafe extern "C" fn destroy_qp(ibqp: *mut sys::ibv_qp) -> c_int {
    if ibqp.is_null() {
        return EINVAL;
    }
    // SAFETY: a QP of `create_qp`; read before the kernel object goes.
    let qpn = unsafe { (*ibqp).qp_num };
    // SAFETY: as above.
    let ret = unsafe { sys::ibv_cmd_destroy_qp(ibqp) };
    if ret != 0 {
        return ret;
    }
    // SAFETY: the kernel object is gone; `ibqp` starts our boxed `Qp`.
    let qp = unsafe { Box::from_raw(ibqp.cast::<Qp>()) };
    // SAFETY: the context outlives its QPs.
    unsafe { &*qp.ctx }.qps().remove(&qpn);
    // SAFETY: marked by `create_qp`.
    unsafe { sys::ibv_dofork_range(qp.buf.as_ptr().cast(), qp.buf.len()) };
    0
}

/// Builds the WQE of one `ibv_send_wr` into `slot`.
///
/// # Safety
///
/// `w` follows the verbs contract: `sg_list` holds `num_sge` entries whose inline data (with
/// `IBV_SEND_INLINE`) is readable, and a UD `ah` is one of ours.
unsafe fn build_from_wr(qp: &Qp, w: &sys::ibv_send_wr, slot: &mut [u8]) -> Result<usize, i32> {
    let n = usize::try_from(w.num_sge).map_err(|_| EINVAL)?;
    if n > MAX_SGE as usize || (n > 0 && w.sg_list.is_null()) {
        return Err(EINVAL);
    }
    let list: &[sys::ibv_sge] = if n == 0 {
        &[]
    } else {
        // SAFETY: per the contract.
        unsafe { core::slice::from_raw_parts(w.sg_list, n) }
    };
    // SAFETY: reading the union members the opcode selects (all plain integers).
    let op = unsafe {
        match w.opcode {
            sys::IBV_WR_SEND => SendOp::Send,
            sys::IBV_WR_SEND_WITH_IMM => SendOp::SendWithImm(w.__bindgen_anon_1.imm_data),
            sys::IBV_WR_SEND_WITH_INV => SendOp::SendWithInv(w.__bindgen_anon_1.invalidate_rkey),
            sys::IBV_WR_RDMA_WRITE => SendOp::Write {
                remote_addr: w.wr.rdma.remote_addr,
                rkey: w.wr.rdma.rkey,
            },
            sys::IBV_WR_RDMA_WRITE_WITH_IMM => SendOp::WriteWithImm {
                remote_addr: w.wr.rdma.remote_addr,
                rkey: w.wr.rdma.rkey,
                imm: w.__bindgen_anon_1.imm_data,
            },
            sys::IBV_WR_RDMA_READ => SendOp::Read {
                remote_addr: w.wr.rdma.remote_addr,
                rkey: w.wr.rdma.rkey,
            },
            sys::IBV_WR_ATOMIC_CMP_AND_SWP => SendOp::CmpSwap {
                remote_addr: w.wr.atomic.remote_addr,
                rkey: w.wr.atomic.rkey,
                compare: w.wr.atomic.compare_add,
                swap: w.wr.atomic.swap,
            },
            sys::IBV_WR_ATOMIC_FETCH_AND_ADD => SendOp::FetchAdd {
                remote_addr: w.wr.atomic.remote_addr,
                rkey: w.wr.atomic.rkey,
                add: w.wr.atomic.compare_add,
            },
            _ => return Err(EINVAL),
        }
    };
    let ud = if qp.limits.qp_type == QPT_UD {
        // SAFETY: UD WRs use the `ud` member.
        let ud = unsafe { w.wr.ud };
        // SAFETY: per the contract, a non-null AH of ours.
        let ah = unsafe { ud.ah.cast::<Ah>().as_ref() }.ok_or(EINVAL)?;
        let mut av = ah.av;
        av.remote_qpn = ud.remote_qpn;
        av.remote_qkey = ud.remote_qkey;
        Some(av)
    } else {
        None
    };
    let flags = w.send_flags;
    let mut sges = [Sge::default(); MAX_SGE as usize];
    let mut pieces: [&[u8]; MAX_SGE as usize] = [&[]; MAX_SGE as usize];
    let payload = if flags & sys::IBV_SEND_INLINE != 0 {
        let total = list.iter().try_fold(0u32, |t, s| t.checked_add(s.length));
        if total.is_none_or(|t| t > qp.limits.max_inline) {
            return Err(EINVAL);
        }
        for (piece, s) in pieces.iter_mut().zip(list) {
            if s.length > 0 {
                let addr = usize::try_from(s.addr).map_err(|_| EINVAL)? as *const u8;
                // SAFETY: per the contract the application's inline buffer is readable; its
                // length is bounded by max_inline (checked above).
                *piece = unsafe { core::slice::from_raw_parts(addr, s.length as usize) };
            }
        }
        Payload::Inline(&pieces[..n])
    } else {
        for (dst, s) in sges.iter_mut().zip(list) {
            *dst = Sge {
                addr: s.addr,
                length: s.length,
                lkey: s.lkey,
            };
        }
        Payload::Sges(&sges[..n])
    };
    let req = SendRequest {
        wr_id: w.wr_id,
        op,
        signaled: qp.sig_all || flags & sys::IBV_SEND_SIGNALED != 0,
        solicited: flags & sys::IBV_SEND_SOLICITED != 0,
        fence: flags & sys::IBV_SEND_FENCE != 0,
        payload,
        ud,
    };
    build_send_wqe(&req, &qp.limits, slot)
}

pub(super) unsafe extern "C" fn post_send(
    ibqp: *mut sys::ibv_qp,
    wr: *mut sys::ibv_send_wr,
    bad: *mut *mut sys::ibv_send_wr,
) -> c_int {
    if ibqp.is_null() {
        return EINVAL;
    }
    // SAFETY: a QP of `create_qp`.
    let qp = unsafe { &*ibqp.cast::<Qp>() };
    // SAFETY: the context outlives its QPs.
    let ctx = unsafe { &*qp.ctx };
    let mut sq = qp.sq.lock().unwrap_or_else(|e| e.into_inner());
    let ci = qp.progress.sq_ci.load(Ordering::Acquire);
    let mut cur = wr;
    let mut attempt = wr;
    let (_, result) = sq.post_send(&qp.buf, ci, &ctx.db, qp.qid, ctx.push, |slot| {
        // SAFETY: the application's chain: null or valid WRs.
        let w = unsafe { cur.as_ref() }?;
        attempt = cur;
        cur = w.next;
        // SAFETY: as above.
        Some(unsafe { build_from_wr(qp, w, slot) })
    });
    match result {
        Ok(()) => 0,
        Err(e) => {
            if !bad.is_null() {
                // SAFETY: the application's out pointer.
                unsafe { *bad = attempt };
            }
            e
        }
    }
}

pub(super) unsafe extern "C" fn post_recv(
    ibqp: *mut sys::ibv_qp,
    wr: *mut sys::ibv_recv_wr,
    bad: *mut *mut sys::ibv_recv_wr,
) -> c_int {
    if ibqp.is_null() {
        return EINVAL;
    }
    // SAFETY: a QP of `create_qp`.
    let qp = unsafe { &*ibqp.cast::<Qp>() };
    // SAFETY: `ibv_qp` starts the QP; libibverbs keeps `state` current.
    let in_reset = unsafe { (*ibqp).state } == sys::IBV_QPS_RESET;
    let result = match (&qp.rq, in_reset) {
        (Some(rq), false) => {
            let mut rq = rq.lock().unwrap_or_else(|e| e.into_inner());
            let ci = qp.progress.rq_ci.load(Ordering::Acquire);
            // SAFETY: the application's chain.
            unsafe { post_recv_chain(&mut rq, &qp.buf, ci, qp.rq_max_sge, wr) }
        }
        // Receives of a QP with an SRQ go to the SRQ; none are accepted in RESET.
        _ => Err((EINVAL, wr)),
    };
    match result {
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
