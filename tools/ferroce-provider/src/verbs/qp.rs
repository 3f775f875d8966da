// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! QPs (RC, UC and UD): SQ, RQ and doorbell record in one provider buffer; posting builds
//! WQEs in the rings and rings the doorbell page. The `ibv_wr_*` API of extended QPs is in
//! [`ex`].

mod ex;

use core::ffi::c_int;
use core::mem::size_of;
use std::sync::{Arc, Mutex};

use ferroce_hw::{QpType, Sge, WqCaps, MAX_SGE};
use libc::{EINVAL, ENOMEM};

use super::ah::Ah;
use super::context::{context, ContextInner, QpProgress};
use super::mw::bind_segment;
use super::srq::{post_recv_chain, Srq};
use super::{check, fail, Pod, WithDrv};
use crate::cq::is_recv;
use crate::dma::DmaBuf;
use crate::queue::{qp_layout, WorkQueue};
use crate::sys;
use crate::wqe::{build_send_wqe, Payload, SendOp, SendRequest, SqLimits};
use crate::wr::{SpinGate, WrBatch, WrFlags};

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
    /// The `ibv_wr_*` state of a QP created with send operations.
    ex: Option<QpEx>,
}

/// The open `ibv_wr_start` .. `ibv_wr_complete` batch of an extended QP.
struct QpEx {
    /// Held from `wr_start` to `wr_complete` / `wr_abort`.
    gate: SpinGate,
    batch: Mutex<WrBatch>,
}

type CreateQp = WithDrv<sys::ibv_create_qp, sys::ferroce_create_qp_req>;
type CreateQpResp = WithDrv<sys::ib_uverbs_create_qp_resp, sys::ferroce_create_qp_resp>;

/// What both `create_qp` and `create_qp_ex` ask for.
struct QpRequest {
    qp_type: sys::ibv_qp_type,
    srq: *mut sys::ibv_srq,
    cap: sys::ibv_qp_cap,
    sq_sig_all: bool,
    /// `create_qp_ex` with `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`: the `ibv_wr_*` API.
    extended: bool,
}

/// The `ibv_qp_ex` send operations the hardware has and the device opcode each posts (TSO and
/// XRC are not among them).
const QP_EX_OPS: [(u32, u8); 12] = [
    (sys::IBV_QP_EX_WITH_SEND, ferroce_hw::WR_SEND),
    (
        sys::IBV_QP_EX_WITH_SEND_WITH_IMM,
        ferroce_hw::WR_SEND_WITH_IMM,
    ),
    (
        sys::IBV_QP_EX_WITH_SEND_WITH_INV,
        ferroce_hw::WR_SEND_WITH_INV,
    ),
    (sys::IBV_QP_EX_WITH_RDMA_WRITE, ferroce_hw::WR_RDMA_WRITE),
    (
        sys::IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM,
        ferroce_hw::WR_RDMA_WRITE_WITH_IMM,
    ),
    (sys::IBV_QP_EX_WITH_RDMA_READ, ferroce_hw::WR_RDMA_READ),
    (
        sys::IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP,
        ferroce_hw::WR_ATOMIC_CMP_SWAP,
    ),
    (
        sys::IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD,
        ferroce_hw::WR_ATOMIC_FETCH_ADD,
    ),
    (sys::IBV_QP_EX_WITH_LOCAL_INV, ferroce_hw::WR_LOCAL_INV),
    (sys::IBV_QP_EX_WITH_BIND_MW, ferroce_hw::WR_BIND_MW),
    (
        sys::IBV_QP_EX_WITH_ATOMIC_WRITE,
        ferroce_hw::WR_ATOMIC_WRITE,
    ),
    (sys::IBV_QP_EX_WITH_FLUSH, ferroce_hw::WR_FLUSH),
];

/// The `ibv_qp_ex` send operations a QP type has: those whose opcode the device allows on it.
fn qp_ex_ops(qp_type: QpType) -> u64 {
    QP_EX_OPS
        .iter()
        .filter(|&&(_, opcode)| ferroce_hw::send_opcode_allowed(qp_type, opcode))
        .fold(0, |ops, &(flag, _)| ops | u64::from(flag))
}

/// The device's type of an `ibv_qp_type` a process may create with rings (an XRC_RECV QP has
/// none: [`create_xrc_target`]).
fn qp_type_of(qp_type: sys::ibv_qp_type) -> Option<QpType> {
    match qp_type {
        sys::IBV_QPT_RC => Some(QpType::Rc),
        sys::IBV_QPT_UC => Some(QpType::Uc),
        sys::IBV_QPT_UD => Some(QpType::Ud),
        sys::IBV_QPT_XRC_SEND => Some(QpType::XrcIni),
        _ => None,
    }
}

/// Creates the provider's part of a QP and, through `issue` (which runs the uverbs command
/// for the `Qp` it gets, with our driver data), the kernel's. Returns the QP and the
/// capabilities it really has.
///
/// # Safety
///
/// `req.srq` is null or an SRQ of ours; `issue` returns an rdma-core status and, on
/// success, leaves a kernel QP behind the `Qp`'s `verbs_qp`.
unsafe fn create(
    ctx: &ContextInner,
    req: &QpRequest,
    issue: impl FnOnce(*mut Qp, &mut CreateQp, &mut CreateQpResp) -> c_int,
) -> Result<(*mut Qp, sys::ibv_qp_cap), i32> {
    let qp_type = qp_type_of(req.qp_type).ok_or(libc::EOPNOTSUPP)?;
    let srq = req.srq.cast::<Srq>();
    // An XRC_INI QP receives nothing (what it was asked to receive, perftest asks, is ignored).
    let own_rq = srq.is_null() && qp_type.has_rq();
    let caps = WqCaps {
        max_send_wr: req.cap.max_send_wr,
        max_recv_wr: if own_rq { req.cap.max_recv_wr } else { 0 },
        max_send_sge: req.cap.max_send_sge,
        max_recv_sge: if own_rq { req.cap.max_recv_sge } else { 0 },
        max_inline: req.cap.max_inline_data,
    };
    let layout = qp_layout(&caps, !own_rq, &ctx.limits)?;
    let (buf, sq, rq) = DmaBuf::new(layout.buf_size).and_then(|buf| {
        let mut sq = WorkQueue::sq(&layout)?;
        if ctx.db_record {
            sq.set_watched(&layout);
        }
        let rq = match &layout.rq {
            Some(rq) => Some(WorkQueue::rq(rq, layout.dbrec_offset, false)?),
            None => None,
        };
        Ok((buf, sq, rq))
    })?;
    // SAFETY: our page-aligned mapping.
    if unsafe { sys::ibv_dontfork_range(buf.as_ptr().cast(), buf.len()) } != 0 {
        return Err(ENOMEM);
    }
    let rq_layout = layout.rq.unwrap_or(crate::queue::RingLayout {
        offset: 0,
        log_size: 0,
        log_stride: 0,
    });
    let (addr, len) = (buf.as_ptr(), buf.len());
    let undo_fork = || {
        // SAFETY: marked above.
        unsafe { sys::ibv_dofork_range(addr.cast(), len) };
    };
    let (Ok(buf_size), Ok(rq_offset), Ok(dbrec_offset)) = (
        u32::try_from(buf.len()),
        u32::try_from(rq_layout.offset),
        u32::try_from(layout.dbrec_offset),
    ) else {
        undo_fork();
        return Err(EINVAL);
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
        flags: if ctx.db_record {
            sys::FERROCE_CREATE_QP_DB_RECORD
        } else {
            0
        },
    });
    let mut resp = CreateQpResp::new(sys::ferroce_create_qp_resp::zeroed());
    let got = layout.caps(&ctx.limits);
    let limits = SqLimits {
        qp_type,
        stride: sq.stride(),
        max_sge: got.max_send_sge,
        max_inline: got.max_inline,
    };
    let sq_size = got.max_send_wr;
    let rq_caps = rq.as_ref().map(|_| (got.max_recv_wr, got.max_recv_sge));
    // SAFETY: a non-null SRQ of ours (libibverbs passes the application's).
    let rq_progress = match (unsafe { srq.as_ref() }, &rq) {
        (Some(s), _) => Some(s.progress.clone()),
        (None, Some(rq)) => Some(rq.progress().clone()),
        // The layout has an RQ unless there is an SRQ or the QP receives nothing.
        (None, None) if !qp_type.has_rq() => None,
        (None, None) => {
            undo_fork();
            return Err(EINVAL);
        }
    };
    let progress = Arc::new(QpProgress {
        sq: sq.progress().clone(),
        rq: rq_progress,
    });
    let ex = req.extended.then(|| QpEx {
        gate: SpinGate::default(),
        batch: Mutex::new(WrBatch::new(limits, sq_size as usize)),
    });
    let qp = Box::into_raw(Box::new(Qp {
        vqp: sys::verbs_qp::zeroed(),
        buf,
        sq: Mutex::new(sq),
        rq: rq.map(Mutex::new),
        progress,
        limits,
        rq_max_sge: rq_caps.map_or(0, |c| c.1),
        sig_all: req.sq_sig_all,
        qid: 0,
        ctx,
        ex,
    }));
    let ret = issue(qp, &mut cmd, &mut resp);
    let qid = check(ret).and_then(|()| u16::try_from(resp.drv.db_qid).map_err(|_| libc::EPROTO));
    let qid = match qid {
        Ok(qid) => qid,
        Err(e) => {
            if ret == 0 {
                // SAFETY: created above.
                unsafe { sys::ibv_cmd_destroy_qp(qp.cast()) };
            }
            undo_fork();
            // SAFETY: leaked above, never handed out.
            drop(unsafe { Box::from_raw(qp) });
            return Err(e);
        }
    };
    // SAFETY: live and not yet shared.
    let q = unsafe { &mut *qp };
    q.qid = qid;
    // SAFETY: `ibv_qp` is the first member of `verbs_qp`'s union.
    let qpn = unsafe { q.vqp.__bindgen_anon_1.qp.qp_num };
    ctx.qps.insert(qpn, q.progress.clone());
    let mut cap = req.cap;
    cap.max_send_wr = sq_size;
    cap.max_send_sge = limits.max_sge;
    cap.max_inline_data = limits.max_inline;
    if let Some((size, sge)) = rq_caps {
        cap.max_recv_wr = size;
        cap.max_recv_sge = sge;
    } else if !qp_type.has_rq() {
        (cap.max_recv_wr, cap.max_recv_sge) = (0, 0);
    }
    Ok((qp, cap))
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
    let req = QpRequest {
        qp_type: init.qp_type,
        srq: init.srq,
        cap: init.cap,
        sq_sig_all: init.sq_sig_all != 0,
        extended: false,
    };
    // SAFETY: `srq` is the application's (one of ours); the command runs for our `Qp`, whose
    // `verbs_qp` starts with the `ibv_qp`.
    let created = unsafe {
        create(ctx, &req, |qp, cmd, resp| {
            sys::ibv_cmd_create_qp(
                pd,
                qp.cast(),
                attr,
                &mut cmd.core,
                CreateQp::SIZE,
                &mut resp.core,
                CreateQpResp::SIZE,
            )
        })
    };
    match created {
        Ok((qp, cap)) => {
            init.cap = cap;
            qp.cast()
        }
        Err(e) => fail(e),
    }
}

/// Checks `create_qp_ex`'s attributes: a PD (an XRC domain for an XRC_RECV QP), optionally
/// no create flags, and send operations the QP type has.
fn check_init_attr_ex(attr: &sys::ibv_qp_init_attr_ex) -> Result<(), i32> {
    let supported = sys::IBV_QP_INIT_ATTR_PD
        | sys::IBV_QP_INIT_ATTR_XRCD
        | sys::IBV_QP_INIT_ATTR_CREATE_FLAGS
        | sys::IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    if attr.comp_mask & !supported != 0 {
        return Err(libc::EOPNOTSUPP);
    }
    if attr.qp_type == sys::IBV_QPT_XRC_RECV {
        if attr.comp_mask & sys::IBV_QP_INIT_ATTR_XRCD == 0 || attr.xrcd.is_null() {
            return Err(EINVAL);
        }
        if attr.comp_mask & sys::IBV_QP_INIT_ATTR_SEND_OPS_FLAGS != 0 && attr.send_ops_flags != 0 {
            return Err(libc::EOPNOTSUPP);
        }
    } else if attr.comp_mask & sys::IBV_QP_INIT_ATTR_PD == 0 || attr.pd.is_null() {
        return Err(EINVAL);
    }
    if attr.comp_mask & sys::IBV_QP_INIT_ATTR_CREATE_FLAGS != 0 && attr.create_flags != 0 {
        return Err(libc::EOPNOTSUPP);
    }
    if attr.comp_mask & sys::IBV_QP_INIT_ATTR_SEND_OPS_FLAGS != 0 {
        let ops = qp_type_of(attr.qp_type).map_or(0, qp_ex_ops);
        if attr.send_ops_flags & !ops != 0 {
            return Err(libc::EOPNOTSUPP);
        }
    }
    Ok(())
}

pub(super) unsafe extern "C" fn create_qp_ex(
    ibctx: *mut sys::ibv_context,
    attr: *mut sys::ibv_qp_init_attr_ex,
) -> *mut sys::ibv_qp {
    // SAFETY: libibverbs passes a context of ours.
    let Some(ctx) = (unsafe { context(ibctx) }) else {
        return fail(EINVAL);
    };
    // SAFETY: the application's attributes, if non-null.
    let Some(init) = (unsafe { attr.as_mut() }) else {
        return fail(EINVAL);
    };
    if let Err(e) = check_init_attr_ex(init) {
        return fail(e);
    }
    if init.qp_type == sys::IBV_QPT_XRC_RECV {
        // SAFETY: a context of ours and the application's checked attributes.
        return unsafe { create_xrc_target(ibctx, init) };
    }
    let extended = init.comp_mask & sys::IBV_QP_INIT_ATTR_SEND_OPS_FLAGS != 0;
    let req = QpRequest {
        qp_type: init.qp_type,
        srq: init.srq,
        cap: init.cap,
        sq_sig_all: init.sq_sig_all != 0,
        extended,
    };
    // The kernel command knows no create flags (all zero here, checked above).
    let mut kattr = *init;
    kattr.comp_mask &= sys::IBV_QP_INIT_ATTR_PD | sys::IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    // SAFETY: as in `create_qp`; `kattr` outlives the command.
    let created = unsafe {
        create(ctx, &req, |qp, cmd, resp| {
            let vqp = qp.cast::<sys::verbs_qp>();
            if extended {
                ex::set_send_ops(&mut *vqp);
            }
            sys::ibv_cmd_create_qp_ex(
                ibctx,
                vqp,
                &mut kattr,
                &mut cmd.core,
                CreateQp::SIZE,
                &mut resp.core,
                CreateQpResp::SIZE,
            )
        })
    };
    match created {
        Ok((qp, cap)) => {
            init.cap = cap;
            if extended {
                // SAFETY: live; libibverbs' `set_qp` reset the mask during the command.
                unsafe { (*qp).vqp.comp_mask |= sys::VERBS_QP_EX };
            }
            qp.cast()
        }
        Err(e) => fail(e),
    }
}

/// An XRC_RECV (XRC_TGT) QP, created here or opened by number ([`open_qp`]): the kernel's
/// alone (it has no rings, and outlives the process that created it while others hold it
/// open); the provider keeps libibverbs' part.
#[repr(C)]
struct XrcTarget {
    vqp: sys::verbs_qp,
}

/// Whether `ibqp` is an [`XrcTarget`] rather than a [`Qp`].
///
/// # Safety
///
/// `ibqp` is a live QP of ours.
unsafe fn is_xrc_target(ibqp: *const sys::ibv_qp) -> bool {
    // SAFETY: per the contract; libibverbs set the type at create or open.
    unsafe { (*ibqp).qp_type == sys::IBV_QPT_XRC_RECV }
}

/// `create_qp_ex` of an XRC_RECV QP: the kernel creates it without driver data.
///
/// # Safety
///
/// `ibctx` is a context of ours; `init` the application's attributes (checked).
unsafe fn create_xrc_target(
    ibctx: *mut sys::ibv_context,
    init: &mut sys::ibv_qp_init_attr_ex,
) -> *mut sys::ibv_qp {
    let qp = Box::into_raw(Box::new(XrcTarget {
        vqp: sys::verbs_qp::zeroed(),
    }));
    let mut kattr = *init;
    kattr.comp_mask &= sys::IBV_QP_INIT_ATTR_XRCD;
    let mut cmd = sys::ibv_create_qp::zeroed();
    let mut resp = sys::ib_uverbs_create_qp_resp::zeroed();
    // SAFETY: `qp` is ours and live; libibverbs sends the domain's handle for the PD's.
    let ret = unsafe {
        sys::ibv_cmd_create_qp_ex(
            ibctx,
            qp.cast(),
            &mut kattr,
            &mut cmd,
            size_of::<sys::ibv_create_qp>(),
            &mut resp,
            size_of::<sys::ib_uverbs_create_qp_resp>(),
        )
    };
    if let Err(e) = check(ret) {
        // SAFETY: leaked above, never handed out.
        drop(unsafe { Box::from_raw(qp) });
        return fail(e);
    }
    init.cap = sys::ibv_qp_cap {
        max_send_wr: 0,
        max_recv_wr: 0,
        max_send_sge: 0,
        max_recv_sge: 0,
        max_inline_data: 0,
    };
    qp.cast()
}

/// `ibv_open_qp`: another handle of an XRC_RECV QP of an XRC domain the process opened, by its
/// number (the creator may be another process, or gone).
pub(super) unsafe extern "C" fn open_qp(
    ibctx: *mut sys::ibv_context,
    attr: *mut sys::ibv_qp_open_attr,
) -> *mut sys::ibv_qp {
    // SAFETY: libibverbs passes a context of ours.
    if attr.is_null() || unsafe { context(ibctx) }.is_none() {
        return fail(EINVAL);
    }
    let qp = Box::into_raw(Box::new(XrcTarget {
        vqp: sys::verbs_qp::zeroed(),
    }));
    let mut cmd = sys::ibv_open_qp::zeroed();
    let mut resp = sys::ib_uverbs_create_qp_resp::zeroed();
    // SAFETY: `qp` is ours and live; the application's attributes (domain, QPN, type).
    let ret = unsafe {
        sys::ibv_cmd_open_qp(
            ibctx,
            qp.cast(),
            size_of::<sys::verbs_qp>() as c_int,
            attr,
            &mut cmd,
            size_of::<sys::ibv_open_qp>(),
            &mut resp,
            size_of::<sys::ib_uverbs_create_qp_resp>(),
        )
    };
    if let Err(e) = check(ret) {
        // SAFETY: leaked above, never handed out.
        drop(unsafe { Box::from_raw(qp) });
        return fail(e);
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
    // SAFETY: as above.
    let rings = !unsafe { is_xrc_target(ibqp) };
    if ret == 0 && mask & sys::IBV_QP_STATE as c_int != 0 && to_reset && rings {
        // The device restarts the QP's queues at index 0: so do we.
        // SAFETY: a QP of `create_qp`.
        let qp = unsafe { &*ibqp.cast::<Qp>() };
        qp.sq
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .reset(&qp.buf);
        if let Some(rq) = &qp.rq {
            rq.lock().unwrap_or_else(|e| e.into_inner()).reset(&qp.buf);
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
    // SAFETY: as above.
    if unsafe { is_xrc_target(ibqp) } {
        // The kernel destroys the QP itself once no process holds it; its receives' CQEs are
        // its SRQs'.
        // SAFETY: an `XrcTarget` of `create_xrc_target` or `open_qp`, not used again.
        drop(unsafe { Box::from_raw(ibqp.cast::<XrcTarget>()) });
        return 0;
    }
    // SAFETY: as above; libibverbs set the CQs at create.
    let (send_cq, recv_cq) = unsafe { ((*ibqp).send_cq, (*ibqp).recv_cq) };
    // SAFETY: the kernel object is gone; `ibqp` starts our boxed `Qp`.
    let qp = unsafe { Box::from_raw(ibqp.cast::<Qp>()) };
    // SAFETY: the context outlives its QPs.
    unsafe { &*qp.ctx }.qps.remove(qpn);
    // Its CQEs go with it; receive WQEs they took from an SRQ go back to it.
    for ibcq in [send_cq, recv_cq] {
        // SAFETY: the CQs of a QP outlive it (libibverbs refuses to destroy them first).
        unsafe {
            super::cq::clean(ibcq, qpn, |cqe| {
                if let Some(srq) = qp
                    .progress
                    .rq
                    .as_ref()
                    .filter(|_| is_recv(cqe) && qp.rq.is_none())
                {
                    let _ = srq.complete(cqe.wqe_index);
                }
            })
        };
        if recv_cq == send_cq {
            break;
        }
    }
    // SAFETY: marked by `create_qp`.
    unsafe { sys::ibv_dofork_range(qp.buf.as_ptr().cast(), qp.buf.len()) };
    0
}

/// Whether the QP may post sends: not in RESET, INIT or RTR (posting there is an immediate
/// error, `EINVAL`, as on rxe).
///
/// # Safety
///
/// `ibqp` is a live QP of ours.
unsafe fn can_send(ibqp: *const sys::ibv_qp) -> bool {
    // SAFETY: per the contract; libibverbs keeps `state` current on modify.
    let state = unsafe { (*ibqp).state };
    !matches!(
        state,
        sys::IBV_QPS_RESET | sys::IBV_QPS_INIT | sys::IBV_QPS_RTR
    )
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
            sys::IBV_WR_LOCAL_INV => SendOp::LocalInv(w.__bindgen_anon_1.invalidate_rkey),
            sys::IBV_WR_BIND_MW => {
                let bind = &w.__bindgen_anon_2.bind_mw;
                // Per the contract, the bind's MR is null or ours.
                SendOp::BindMw(bind_segment(bind.rkey, &bind.bind_info)?)
            }
            _ => return Err(EINVAL),
        }
    };
    let ud = if qp.limits.qp_type == QpType::Ud {
        // SAFETY: UD WRs use the `ud` member.
        let ud = unsafe { w.wr.ud };
        // SAFETY: per the contract, a non-null AH of ours.
        let ah = unsafe { ud.ah.cast::<Ah>().as_ref() }.ok_or(EINVAL)?;
        Some(ah.dest(ud.remote_qpn, ud.remote_qkey))
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
        // SAFETY: the union holds a plain u32 whatever the QP type; an XRC_INI QP's WRs name
        // the XRC SRQ at the target in it.
        xrc_srqn: (qp.limits.qp_type == QpType::XrcIni)
            .then_some(unsafe { w.qp_type.xrc.remote_srqn }),
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
    // SAFETY: a QP of ours; an XRC_RECV QP has no send queue.
    if unsafe { is_xrc_target(ibqp) } || !unsafe { can_send(ibqp) } {
        if !bad.is_null() {
            // SAFETY: the application's out pointer.
            unsafe { *bad = wr };
        }
        return EINVAL;
    }
    // SAFETY: a QP of `create_qp` (not an XRC target: checked above).
    let qp = unsafe { &*ibqp.cast::<Qp>() };
    // SAFETY: the context outlives its QPs.
    let ctx = unsafe { &*qp.ctx };
    let mut sq = qp.sq.lock().unwrap_or_else(|e| e.into_inner());
    let ci = sq.progress().ci();
    let mut cur = wr;
    let mut attempt = wr;
    let (_, result) = sq.post_send(&qp.buf, ci, &ctx.db, qp.qid, ctx.push.as_ref(), |slot| {
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
    // SAFETY: a QP of ours; an XRC_RECV QP's receives are its SRQs'.
    if unsafe { is_xrc_target(ibqp) } {
        if !bad.is_null() {
            // SAFETY: the application's out pointer.
            unsafe { *bad = wr };
        }
        return EINVAL;
    }
    // SAFETY: a QP of `create_qp`.
    let qp = unsafe { &*ibqp.cast::<Qp>() };
    // SAFETY: `ibv_qp` starts the QP; libibverbs keeps `state` current.
    let in_reset = unsafe { (*ibqp).state } == sys::IBV_QPS_RESET;
    let result = match (&qp.rq, in_reset) {
        (Some(rq), false) => {
            let mut rq = rq.lock().unwrap_or_else(|e| e.into_inner());
            let ci = rq.progress().ci();
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
