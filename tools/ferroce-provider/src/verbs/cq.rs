// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! CQs: ring and record in provider memory, polled here; arming through the doorbell page
//! (the completion event itself comes through the kernel's completion channel).

use core::ffi::c_int;
use std::sync::Mutex;

use ferroce_hw::{Cqe, CQE_FLAG_XRC};
use libc::{EINVAL, ENOMEM};

use super::context::{context, ContextInner};
use super::{check, fail, Pod, WithDrv};
use crate::cq::{fill_wc, settle, wc_flags, wc_opcode, wc_status, CqRing};
use crate::dma::DmaBuf;
use crate::doorbell;
use crate::sys;
use crate::wr::SpinGate;

/// A CQ: libibverbs' part first.
#[repr(C)]
struct Cq {
    vcq: sys::verbs_cq,
    ring: Mutex<CqRing>,
    qid: u16,
    ctx: *const ContextInner,
    /// The polling state of a CQ of `create_cq_ex`.
    ex: Option<CqEx>,
}

/// `start_poll` .. `end_poll` of an extended CQ.
struct CqEx {
    /// Held from a successful `start_poll` to `end_poll`.
    gate: SpinGate,
    /// The completion the `read_*` callbacks report.
    current: Mutex<Cqe>,
}

type CreateCq = WithDrv<sys::ibv_create_cq, sys::ferroce_create_cq_req>;
type CreateCqResp = WithDrv<sys::ib_uverbs_create_cq_resp, sys::ferroce_create_cq_resp>;
type CreateCqEx = WithDrv<sys::ibv_create_cq_ex, sys::ferroce_create_cq_req>;
type CreateCqExResp = WithDrv<sys::ib_uverbs_ex_create_cq_resp, sys::ferroce_create_cq_resp>;
type ResizeCq = WithDrv<sys::ibv_resize_cq, sys::ferroce_resize_cq_req>;

/// Creates the provider's part of a CQ of at least `cqe` entries and, through `issue`
/// (which runs the uverbs command for the `Cq` it gets, with our driver data and the ring
/// size), the kernel's.
///
/// # Safety
///
/// `issue` returns an rdma-core status and, on success, leaves a kernel CQ behind the
/// `Cq`'s `verbs_cq`.
unsafe fn create(
    ctx: &ContextInner,
    cqe: c_int,
    ex: Option<CqEx>,
    issue: impl FnOnce(*mut Cq, sys::ferroce_create_cq_req, c_int) -> (c_int, u32),
) -> Result<*mut Cq, i32> {
    let cqe = u32::try_from(cqe).map_err(|_| EINVAL)?;
    let ring = CqRing::new(cqe.max(1), ctx.max_log_cq)?;
    let buf = ring.buf();
    // SAFETY: the buffer is our page-aligned mapping.
    if unsafe { sys::ibv_dontfork_range(buf.as_ptr().cast(), buf.len()) } != 0 {
        return Err(ENOMEM);
    }
    let (addr, len) = (buf.as_ptr(), buf.len());
    let undo_fork = || {
        // SAFETY: the range was marked above.
        unsafe { sys::ibv_dofork_range(addr.cast(), len) };
    };
    let (Ok(buf_size), Ok(dbrec_offset)) =
        (u32::try_from(buf.len()), u32::try_from(ring.dbrec_offset()))
    else {
        undo_fork();
        return Err(EINVAL);
    };
    let req = sys::ferroce_create_cq_req {
        buf_addr: buf.addr(),
        buf_size,
        log_size: ring.ring().log_size(),
        dbrec_offset,
        reserved: 0,
    };
    let size = c_int::try_from(ring.ring().size()).unwrap_or(c_int::MAX);
    let cq = Box::into_raw(Box::new(Cq {
        vcq: sys::verbs_cq::zeroed(),
        ring: Mutex::new(ring),
        qid: 0,
        ctx,
        ex,
    }));
    let (ret, db_qid) = issue(cq, req, size);
    match check(ret).and_then(|()| u16::try_from(db_qid).map_err(|_| libc::EPROTO)) {
        Ok(qid) => {
            // SAFETY: live and not yet shared.
            unsafe { (*cq).qid = qid };
            Ok(cq)
        }
        Err(e) => {
            if ret == 0 {
                // SAFETY: created above.
                unsafe { sys::ibv_cmd_destroy_cq(cq.cast()) };
            }
            undo_fork();
            // SAFETY: the box was leaked above, never handed out.
            drop(unsafe { Box::from_raw(cq) });
            Err(e)
        }
    }
}

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
    // SAFETY: the command runs for our `Cq`, whose `verbs_cq` starts with the `ibv_cq`.
    let created = unsafe {
        create(ctx, cqe, None, |cq, req, size| {
            let mut cmd = CreateCq::new(req);
            let mut resp = CreateCqResp::new(sys::ferroce_create_cq_resp::zeroed());
            let ret = sys::ibv_cmd_create_cq(
                ibctx,
                size,
                channel,
                comp_vector,
                cq.cast(),
                &mut cmd.core,
                CreateCq::SIZE,
                &mut resp.core,
                CreateCqResp::SIZE,
            );
            (ret, resp.drv.db_qid)
        })
    };
    match created {
        Ok(cq) => cq.cast(),
        Err(e) => fail(e),
    }
}

/// Work completion fields an extended CQ can report (`IBV_WC_STANDARD_FLAGS`; SLID, SL and
/// DLID path bits read as 0 on RoCE, as rxe reports them). No timestamps, VLAN, flow tag or
/// tag matching.
const CQ_EX_WC_FLAGS: u64 = sys::IBV_WC_STANDARD_FLAGS as u64;

/// Checks `create_cq_ex`'s attributes.
fn check_cq_init_attr_ex(attr: &sys::ibv_cq_init_attr_ex) -> Result<(), i32> {
    if attr.wc_flags & !CQ_EX_WC_FLAGS != 0 {
        return Err(libc::EOPNOTSUPP);
    }
    // A parent domain (IBV_CQ_INIT_ATTR_MASK_PD) is not supported.
    if attr.comp_mask & !sys::IBV_CQ_INIT_ATTR_MASK_FLAGS != 0 {
        return Err(libc::EOPNOTSUPP);
    }
    // Single-threaded use is only a hint; ignoring overruns is not supported.
    if attr.comp_mask & sys::IBV_CQ_INIT_ATTR_MASK_FLAGS != 0
        && attr.flags & !sys::IBV_CREATE_CQ_ATTR_SINGLE_THREADED != 0
    {
        return Err(libc::EOPNOTSUPP);
    }
    Ok(())
}

pub(super) unsafe extern "C" fn create_cq_ex(
    ibctx: *mut sys::ibv_context,
    attr: *mut sys::ibv_cq_init_attr_ex,
) -> *mut sys::ibv_cq_ex {
    // SAFETY: libibverbs passes a context of ours.
    let Some(ctx) = (unsafe { context(ibctx) }) else {
        return fail(EINVAL);
    };
    // SAFETY: the application's attributes, if non-null.
    let Some(attr) = (unsafe { attr.as_ref() }) else {
        return fail(EINVAL);
    };
    if let Err(e) = check_cq_init_attr_ex(attr) {
        return fail(e);
    }
    let Ok(cqe) = c_int::try_from(attr.cqe) else {
        return fail(EINVAL);
    };
    let ex = CqEx {
        gate: SpinGate::default(),
        current: Mutex::new(Cqe::default()),
    };
    // SAFETY: as in `create_cq`.
    let created = unsafe {
        create(ctx, cqe, Some(ex), |cq, req, size| {
            let mut kattr = *attr;
            kattr.cqe = u32::try_from(size).unwrap_or(u32::MAX);
            // The kernel needs no flags for a hint.
            kattr.comp_mask = 0;
            kattr.flags = 0;
            let vcq = cq.cast::<sys::verbs_cq>();
            set_poll_ops(&mut (*vcq).__bindgen_anon_1.cq_ex);
            let mut cmd = CreateCqEx::new(req);
            let mut resp = CreateCqExResp::new(sys::ferroce_create_cq_resp::zeroed());
            let ret = sys::ibv_cmd_create_cq_ex(
                ibctx,
                &kattr,
                vcq,
                &mut cmd.core,
                CreateCqEx::SIZE,
                &mut resp.core,
                CreateCqExResp::SIZE,
                0,
            );
            (ret, resp.drv.db_qid)
        })
    };
    match created {
        Ok(cq) => cq.cast(),
        Err(e) => fail(e),
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
    let mut ring = cq.ring.lock().unwrap_or_else(|e| e.into_inner());
    release_retired(&mut ring);
    for next in ring.abandon_resizes() {
        release(next.buf());
    }
    release(ring.buf());
    0
}

/// Unmarks a ring buffer the device no longer writes (marked `dontfork` at creation); the
/// buffer is freed with its owner.
fn release(buf: &DmaBuf) {
    // SAFETY: the range was marked by `create` or `resize_cq`.
    unsafe { sys::ibv_dofork_range(buf.as_ptr().cast(), buf.len()) };
}

/// Frees the rings a poll left behind at resizes' markers.
fn release_retired(ring: &mut CqRing) {
    for old in ring.take_retired() {
        release(&old);
    }
}

/// `ibv_resize_cq`: a new ring of at least `cqe` entries in the kernel and the device
/// (`CMD_RESIZE_CQ`); polling moves to it at the old ring's marker (after the rings of
/// earlier resizes not polled through yet). `EINVAL` below the CQEs not polled yet.
pub(super) unsafe extern "C" fn resize_cq(ibcq: *mut sys::ibv_cq, cqe: c_int) -> c_int {
    if ibcq.is_null() {
        return EINVAL;
    }
    // SAFETY: a CQ of ours, alive during the call.
    let cq = unsafe { &*ibcq.cast::<Cq>() };
    // SAFETY: the context outlives its CQs.
    let ctx = unsafe { &*cq.ctx };
    let Ok(entries) = u32::try_from(cqe) else {
        return EINVAL;
    };
    if entries == 0 {
        return EINVAL;
    }
    // Held across the command: no poll runs while the device switches rings.
    let mut ring = cq.ring.lock().unwrap_or_else(|e| e.into_inner());
    let next = match ring.resized(entries, ctx.max_log_cq) {
        Ok(next) => next,
        Err(e) => return e,
    };
    let buf = next.buf();
    // SAFETY: the buffer is our page-aligned mapping.
    if unsafe { sys::ibv_dontfork_range(buf.as_ptr().cast(), buf.len()) } != 0 {
        return ENOMEM;
    }
    let (Ok(buf_size), Ok(dbrec_offset)) =
        (u32::try_from(buf.len()), u32::try_from(next.dbrec_offset()))
    else {
        release(buf);
        return EINVAL;
    };
    let mut cmd = ResizeCq::new(sys::ferroce_resize_cq_req {
        buf_addr: buf.addr(),
        buf_size,
        log_size: next.ring().log_size(),
        dbrec_offset,
        reserved: 0,
    });
    let mut resp = sys::ib_uverbs_resize_cq_resp::zeroed();
    let size = c_int::try_from(next.ring().size()).unwrap_or(c_int::MAX);
    // SAFETY: `ibcq` is ours; the command and response are ours for the call.
    let ret = unsafe {
        sys::ibv_cmd_resize_cq(
            ibcq,
            size,
            &mut cmd.core,
            ResizeCq::SIZE,
            &mut resp,
            core::mem::size_of::<sys::ib_uverbs_resize_cq_resp>(),
        )
    };
    if ret != 0 {
        release(buf);
        return ret;
    }
    ring.resize_to(next);
    0
}

/// Removes the CQEs of destroyed QP `qpn` from CQ `ibcq` ([`CqRing::clean`]).
///
/// # Safety
///
/// `ibcq` is null or a live CQ of ours.
pub(super) unsafe fn clean(ibcq: *mut sys::ibv_cq, qpn: u32, removed: impl FnMut(&Cqe)) {
    if ibcq.is_null() {
        return;
    }
    // SAFETY: per the contract; `ibcq` starts our `Cq`.
    let cq = unsafe { &*ibcq.cast::<Cq>() };
    cq.ring
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clean(qpn, removed);
}

/// Settles a CQE against its queue (see [`settle`]): its QP's, or for an XRC receive its XRC
/// SRQ's (the target QP it names belongs to no process).
fn account(ctx: &ContextInner, cqe: &mut Cqe) {
    let (qpn, srqn, xrc) = (cqe.qpn, cqe.srqn, cqe.flags & CQE_FLAG_XRC != 0);
    settle(cqe, |recv| {
        if xrc {
            return recv.then(|| ctx.xrc_srqs.get(srqn)).flatten();
        }
        let qp = ctx.qps.get(qpn)?;
        if recv {
            qp.rq.clone()
        } else {
            Some(qp.sq.clone())
        }
    });
}

/// Removes the CQEs of destroyed XRC SRQ `srqn` from CQ `ibcq` ([`CqRing::clean_xrc_srq`]).
///
/// # Safety
///
/// `ibcq` is null or a live CQ of ours.
pub(super) unsafe fn clean_xrc_srq(ibcq: *mut sys::ibv_cq, srqn: u32) {
    if ibcq.is_null() {
        return;
    }
    // SAFETY: per the contract; `ibcq` starts our `Cq`.
    let cq = unsafe { &*ibcq.cast::<Cq>() };
    cq.ring
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clean_xrc_srq(srqn);
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
        let Some(mut cqe) = ring.poll() else {
            break;
        };
        account(ctx, &mut cqe);
        fill_wc(&cqe, slot);
        polled += 1;
    }
    if polled > 0 {
        ring.publish_ci();
    }
    release_retired(&mut ring);
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

// The polling API of extended CQs (`ibv_start_poll` .. `ibv_end_poll`, `ibv_wc_read_*`).
// libibverbs calls these through the `ibv_cq_ex` of a CQ of `create_cq_ex`, the start of our
// `Cq`.

/// Sets the polling callbacks, and a reader for every field: those the CQ cannot report
/// (refused at creation) read as zero rather than leaving a NULL pointer to call.
fn set_poll_ops(x: &mut sys::ibv_cq_ex) {
    x.start_poll = Some(start_poll);
    x.next_poll = Some(next_poll);
    x.end_poll = Some(end_poll);
    x.read_opcode = Some(read_opcode);
    x.read_vendor_err = Some(read_vendor_err);
    x.read_byte_len = Some(read_byte_len);
    x.read_imm_data = Some(read_imm_data);
    x.read_qp_num = Some(read_qp_num);
    x.read_src_qp = Some(read_src_qp);
    x.read_wc_flags = Some(read_wc_flags);
    x.read_slid = Some(read_slid);
    x.read_sl = Some(read_sl);
    x.read_dlid_path_bits = Some(read_dlid_path_bits);
    x.read_completion_ts = Some(read_zero_u64);
    x.read_completion_wallclock_ns = Some(read_zero_u64);
    x.read_cvlan = Some(read_cvlan);
    x.read_flow_tag = Some(read_flow_tag);
    x.read_tm_info = Some(read_tm_info);
}

/// Our CQ and its polling state behind an `ibv_cq_ex`.
///
/// # Safety
///
/// `ibcq` is null or the `ibv_cq_ex` of a live CQ of `create_cq_ex`.
unsafe fn cq_ex<'a>(ibcq: *mut sys::ibv_cq_ex) -> Option<(&'a Cq, &'a CqEx)> {
    // SAFETY: per the contract; the `ibv_cq_ex` starts the `Cq`.
    let cq = unsafe { ibcq.cast::<Cq>().as_ref() }?;
    Some((cq, cq.ex.as_ref()?))
}

/// Takes the next CQE into `current` and the public `status` / `wr_id` of the `ibv_cq_ex`;
/// `ENOENT` if there is none.
///
/// # Safety
///
/// As [`cq_ex`], non-null.
unsafe fn advance(ibcq: *mut sys::ibv_cq_ex, cq: &Cq, ex: &CqEx) -> c_int {
    let mut ring = cq.ring.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut cqe) = ring.poll() else {
        return libc::ENOENT;
    };
    // SAFETY: the context outlives its CQs.
    account(unsafe { &*cq.ctx }, &mut cqe);
    // SAFETY: per the contract; the application reads these fields after the call.
    unsafe {
        (*ibcq).status = wc_status(&cqe);
        (*ibcq).wr_id = cqe.wr_id;
    }
    *ex.current.lock().unwrap_or_else(|e| e.into_inner()) = cqe;
    0
}

unsafe extern "C" fn start_poll(
    ibcq: *mut sys::ibv_cq_ex,
    _attr: *mut sys::ibv_poll_cq_attr,
) -> c_int {
    // SAFETY: libibverbs passes the `ibv_cq_ex` of one of our extended CQs.
    let Some((cq, ex)) = (unsafe { cq_ex(ibcq) }) else {
        return EINVAL;
    };
    ex.gate.acquire();
    // SAFETY: as above.
    let ret = unsafe { advance(ibcq, cq, ex) };
    if ret != 0 {
        // No `end_poll` follows a failed `start_poll`.
        ex.gate.release();
    }
    ret
}

unsafe extern "C" fn next_poll(ibcq: *mut sys::ibv_cq_ex) -> c_int {
    // SAFETY: as in `start_poll`.
    match unsafe { cq_ex(ibcq) } {
        // SAFETY: as above.
        Some((cq, ex)) => unsafe { advance(ibcq, cq, ex) },
        None => EINVAL,
    }
}

unsafe extern "C" fn end_poll(ibcq: *mut sys::ibv_cq_ex) {
    // SAFETY: as in `start_poll`.
    if let Some((cq, ex)) = unsafe { cq_ex(ibcq) } {
        let mut ring = cq.ring.lock().unwrap_or_else(|e| e.into_inner());
        ring.publish_ci();
        release_retired(&mut ring);
        drop(ring);
        ex.gate.release();
    }
}

/// The current completion of `ibcq` (a default one for a CQ that is not ours).
///
/// # Safety
///
/// As [`cq_ex`].
unsafe fn current(ibcq: *mut sys::ibv_cq_ex) -> Cqe {
    // SAFETY: per the contract.
    unsafe { cq_ex(ibcq) }
        .map(|(_, ex)| *ex.current.lock().unwrap_or_else(|e| e.into_inner()))
        .unwrap_or_default()
}

unsafe extern "C" fn read_opcode(ibcq: *mut sys::ibv_cq_ex) -> sys::ibv_wc_opcode {
    // SAFETY: as in `start_poll`.
    wc_opcode(&unsafe { current(ibcq) })
}

unsafe extern "C" fn read_vendor_err(ibcq: *mut sys::ibv_cq_ex) -> u32 {
    // SAFETY: as in `start_poll`.
    u32::from(unsafe { current(ibcq) }.vendor_err)
}

unsafe extern "C" fn read_byte_len(ibcq: *mut sys::ibv_cq_ex) -> u32 {
    // SAFETY: as in `start_poll`.
    unsafe { current(ibcq) }.byte_len
}

unsafe extern "C" fn read_imm_data(ibcq: *mut sys::ibv_cq_ex) -> sys::__be32 {
    // SAFETY: as in `start_poll`.
    unsafe { current(ibcq) }.imm_or_inv
}

unsafe extern "C" fn read_qp_num(ibcq: *mut sys::ibv_cq_ex) -> u32 {
    // SAFETY: as in `start_poll`.
    unsafe { current(ibcq) }.qpn
}

unsafe extern "C" fn read_src_qp(ibcq: *mut sys::ibv_cq_ex) -> u32 {
    // SAFETY: as in `start_poll`.
    unsafe { current(ibcq) }.src_qpn
}

unsafe extern "C" fn read_wc_flags(ibcq: *mut sys::ibv_cq_ex) -> core::ffi::c_uint {
    // SAFETY: as in `start_poll`.
    wc_flags(&unsafe { current(ibcq) })
}

unsafe extern "C" fn read_slid(_ibcq: *mut sys::ibv_cq_ex) -> u32 {
    0
}

unsafe extern "C" fn read_sl(_ibcq: *mut sys::ibv_cq_ex) -> u8 {
    0
}

unsafe extern "C" fn read_dlid_path_bits(_ibcq: *mut sys::ibv_cq_ex) -> u8 {
    0
}

unsafe extern "C" fn read_zero_u64(_ibcq: *mut sys::ibv_cq_ex) -> u64 {
    0
}

unsafe extern "C" fn read_cvlan(_ibcq: *mut sys::ibv_cq_ex) -> u16 {
    0
}

unsafe extern "C" fn read_flow_tag(_ibcq: *mut sys::ibv_cq_ex) -> u32 {
    0
}

unsafe extern "C" fn read_tm_info(_ibcq: *mut sys::ibv_cq_ex, info: *mut sys::ibv_wc_tm_info) {
    // SAFETY: the application's out structure, if non-null (plain integers).
    if let Some(info) = unsafe { info.as_mut() } {
        info.tag = 0;
        info.priv_ = 0;
    }
}
