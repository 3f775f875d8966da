// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The `ibv_wr_*` API of extended QPs. libibverbs calls these through the `ibv_qp_ex` of a QP
//! that `create_qp_ex` made with send operations; the `ibv_qp_ex` is the start of our `Qp`.

use super::*;

/// Sets every operation of the `ibv_qp_ex`: those the hardware has, and for the others (TSO)
/// stubs that fail the batch with `EOPNOTSUPP`, so that no pointer an application may call is
/// NULL.
pub(super) fn set_send_ops(vqp: &mut sys::verbs_qp) {
    // SAFETY: writing function pointers into the union's `ibv_qp_ex` view, which contains
    // the `ibv_qp` view (plain data, no invariant).
    let x = unsafe { &mut vqp.__bindgen_anon_1.qp_ex };
    x.wr_send = Some(wr_send);
    x.wr_send_imm = Some(wr_send_imm);
    x.wr_send_inv = Some(wr_send_inv);
    x.wr_rdma_write = Some(wr_rdma_write);
    x.wr_rdma_write_imm = Some(wr_rdma_write_imm);
    x.wr_rdma_read = Some(wr_rdma_read);
    x.wr_atomic_cmp_swp = Some(wr_atomic_cmp_swp);
    x.wr_atomic_fetch_add = Some(wr_atomic_fetch_add);
    x.wr_set_sge = Some(wr_set_sge);
    x.wr_set_sge_list = Some(wr_set_sge_list);
    x.wr_set_inline_data = Some(wr_set_inline_data);
    x.wr_set_inline_data_list = Some(wr_set_inline_data_list);
    x.wr_set_ud_addr = Some(wr_set_ud_addr);
    x.wr_start = Some(wr_start);
    x.wr_complete = Some(wr_complete);
    x.wr_abort = Some(wr_abort);
    x.wr_bind_mw = Some(wr_bind_mw);
    x.wr_local_inv = Some(wr_local_inv);
    x.wr_send_tso = Some(wr_send_tso);
    x.wr_set_xrc_srqn = Some(wr_set_xrc_srqn);
    x.wr_atomic_write = Some(wr_atomic_write);
    x.wr_flush = Some(wr_flush);
}

/// Our QP and its `ibv_wr_*` state behind an `ibv_qp_ex`.
///
/// # Safety
///
/// `ibqp` is null or the `ibv_qp_ex` of a live QP of `create_qp_ex`.
unsafe fn qp_ex<'a>(ibqp: *mut sys::ibv_qp_ex) -> Option<(&'a Qp, &'a QpEx)> {
    // SAFETY: per the contract; `ibv_qp_ex` starts the `Qp`.
    let qp = unsafe { ibqp.cast::<Qp>().as_ref() }?;
    Some((qp, qp.ex.as_ref()?))
}

/// Runs `f` on the batch of `ibqp` (nothing for a QP without one).
///
/// # Safety
///
/// As [`qp_ex`].
unsafe fn with_batch(ibqp: *mut sys::ibv_qp_ex, f: impl FnOnce(&Qp, &mut WrBatch)) {
    // SAFETY: per the contract.
    if let Some((qp, ex)) = unsafe { qp_ex(ibqp) } {
        f(qp, &mut ex.batch.lock().unwrap_or_else(|e| e.into_inner()));
    }
}

/// A WR builder: opens a request for `op` with the `wr_id` and `wr_flags` the application
/// set in the `ibv_qp_ex`.
///
/// # Safety
///
/// As [`qp_ex`].
unsafe fn begin(ibqp: *mut sys::ibv_qp_ex, op: Result<SendOp, i32>) {
    // SAFETY: per the contract; the application wrote these fields before the call.
    let Some((wr_id, flags)) = (unsafe { ibqp.as_ref() }).map(|x| (x.wr_id, x.wr_flags)) else {
        return;
    };
    // SAFETY: per the contract.
    unsafe {
        with_batch(ibqp, |qp, batch| {
            let flags = WrFlags {
                signaled: qp.sig_all || flags & sys::IBV_SEND_SIGNALED != 0,
                solicited: flags & sys::IBV_SEND_SOLICITED != 0,
                fence: flags & sys::IBV_SEND_FENCE != 0,
            };
            batch.begin(wr_id, flags, op);
        })
    };
}

unsafe extern "C" fn wr_start(ibqp: *mut sys::ibv_qp_ex) {
    // SAFETY: libibverbs passes the `ibv_qp_ex` of one of our extended QPs.
    if let Some((_, ex)) = unsafe { qp_ex(ibqp) } {
        ex.gate.acquire();
        ex.batch.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}

unsafe extern "C" fn wr_complete(ibqp: *mut sys::ibv_qp_ex) -> c_int {
    // SAFETY: as in `wr_start`.
    let Some((qp, ex)) = (unsafe { qp_ex(ibqp) }) else {
        return EINVAL;
    };
    // SAFETY: the context outlives its QPs.
    let ctx = unsafe { &*qp.ctx };
    let mut batch = ex.batch.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: the `ibv_qp_ex` starts with the QP's `ibv_qp`.
    if !unsafe { can_send(ibqp.cast()) } {
        batch.fail(EINVAL);
    }
    let result = batch.finish().and_then(|n| {
        let mut sq = qp.sq.lock().unwrap_or_else(|e| e.into_inner());
        let ci = sq.progress().ci();
        sq.post_batch(&qp.buf, ci, &ctx.db, qp.qid, ctx.push.as_ref(), n, |i| {
            batch.wqe(i)
        })
    });
    batch.clear();
    drop(batch);
    ex.gate.release();
    match result {
        Ok(()) => 0,
        Err(e) => e,
    }
}

unsafe extern "C" fn wr_abort(ibqp: *mut sys::ibv_qp_ex) {
    // SAFETY: as in `wr_start`.
    if let Some((_, ex)) = unsafe { qp_ex(ibqp) } {
        ex.batch.lock().unwrap_or_else(|e| e.into_inner()).clear();
        ex.gate.release();
    }
}

unsafe extern "C" fn wr_send(ibqp: *mut sys::ibv_qp_ex) {
    // SAFETY: as in `wr_start`.
    unsafe { begin(ibqp, Ok(SendOp::Send)) };
}

unsafe extern "C" fn wr_send_imm(ibqp: *mut sys::ibv_qp_ex, imm: sys::__be32) {
    // SAFETY: as in `wr_start`.
    unsafe { begin(ibqp, Ok(SendOp::SendWithImm(imm))) };
}

unsafe extern "C" fn wr_send_inv(ibqp: *mut sys::ibv_qp_ex, rkey: u32) {
    // SAFETY: as in `wr_start`.
    unsafe { begin(ibqp, Ok(SendOp::SendWithInv(rkey))) };
}

unsafe extern "C" fn wr_rdma_write(ibqp: *mut sys::ibv_qp_ex, rkey: u32, remote_addr: u64) {
    // SAFETY: as in `wr_start`.
    unsafe { begin(ibqp, Ok(SendOp::Write { remote_addr, rkey })) };
}

unsafe extern "C" fn wr_rdma_write_imm(
    ibqp: *mut sys::ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    imm: sys::__be32,
) {
    let op = SendOp::WriteWithImm {
        remote_addr,
        rkey,
        imm,
    };
    // SAFETY: as in `wr_start`.
    unsafe { begin(ibqp, Ok(op)) };
}

unsafe extern "C" fn wr_rdma_read(ibqp: *mut sys::ibv_qp_ex, rkey: u32, remote_addr: u64) {
    // SAFETY: as in `wr_start`.
    unsafe { begin(ibqp, Ok(SendOp::Read { remote_addr, rkey })) };
}

unsafe extern "C" fn wr_atomic_cmp_swp(
    ibqp: *mut sys::ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    compare: u64,
    swap: u64,
) {
    let op = SendOp::CmpSwap {
        remote_addr,
        rkey,
        compare,
        swap,
    };
    // SAFETY: as in `wr_start`.
    unsafe { begin(ibqp, Ok(op)) };
}

unsafe extern "C" fn wr_atomic_fetch_add(
    ibqp: *mut sys::ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    add: u64,
) {
    let op = SendOp::FetchAdd {
        remote_addr,
        rkey,
        add,
    };
    // SAFETY: as in `wr_start`.
    unsafe { begin(ibqp, Ok(op)) };
}

unsafe extern "C" fn wr_set_sge(ibqp: *mut sys::ibv_qp_ex, lkey: u32, addr: u64, length: u32) {
    // A zero-length buffer is no SGE at all (as rxe and mlx5 do).
    let sge = [Sge { addr, length, lkey }];
    let sges: &[Sge] = if length == 0 { &[] } else { &sge };
    // SAFETY: as in `wr_start`.
    unsafe { with_batch(ibqp, |_, batch| batch.set_sges(sges)) };
}

unsafe extern "C" fn wr_set_sge_list(
    ibqp: *mut sys::ibv_qp_ex,
    num_sge: usize,
    list: *const sys::ibv_sge,
) {
    // SAFETY: as in `wr_start`.
    unsafe {
        with_batch(ibqp, |_, batch| {
            if num_sge > MAX_SGE as usize || (num_sge > 0 && list.is_null()) {
                return batch.fail(EINVAL);
            }
            let list = if num_sge == 0 {
                &[]
            } else {
                // SAFETY: the application passes `num_sge` (bounded above) readable entries.
                core::slice::from_raw_parts(list, num_sge)
            };
            let mut sges = [Sge::default(); MAX_SGE as usize];
            for (dst, s) in sges.iter_mut().zip(list) {
                *dst = Sge {
                    addr: s.addr,
                    length: s.length,
                    lkey: s.lkey,
                };
            }
            batch.set_sges(&sges[..num_sge]);
        })
    };
}

/// The application's inline buffers as slices once their total length fits `max`
/// (`None` otherwise, or for a null buffer with a length).
///
/// # Safety
///
/// Each `(addr, len)` is readable for `len` bytes.
unsafe fn inline_pieces(bufs: &[(*const u8, usize)], max: u32) -> Option<Vec<&[u8]>> {
    let total = bufs
        .iter()
        .try_fold(0usize, |t, &(_, len)| t.checked_add(len))?;
    if total > max as usize {
        return None;
    }
    bufs.iter()
        .filter(|&&(_, len)| len > 0)
        .map(|&(addr, len)| {
            // SAFETY: per the contract; the length is bounded by max_inline (checked above).
            (!addr.is_null()).then(|| unsafe { core::slice::from_raw_parts(addr, len) })
        })
        .collect()
}

unsafe extern "C" fn wr_set_inline_data(
    ibqp: *mut sys::ibv_qp_ex,
    addr: *mut core::ffi::c_void,
    length: usize,
) {
    // SAFETY: as in `wr_start`; the application's buffer is readable for `length` bytes.
    unsafe {
        with_batch(ibqp, |qp, batch| {
            match inline_pieces(&[(addr.cast_const().cast(), length)], qp.limits.max_inline) {
                Some(pieces) => batch.set_inline(&pieces),
                None => batch.fail(EINVAL),
            }
        })
    };
}

unsafe extern "C" fn wr_set_inline_data_list(
    ibqp: *mut sys::ibv_qp_ex,
    num_buf: usize,
    list: *const sys::ibv_data_buf,
) {
    // SAFETY: as in `wr_start`; the application passes `num_buf` readable buffers.
    unsafe {
        with_batch(ibqp, |qp, batch| {
            if num_buf > 0 && list.is_null() {
                return batch.fail(EINVAL);
            }
            let list = if num_buf == 0 {
                &[]
            } else {
                // SAFETY: per the verbs contract.
                core::slice::from_raw_parts(list, num_buf)
            };
            let bufs: Vec<(*const u8, usize)> = list
                .iter()
                .map(|b| (b.addr.cast_const().cast(), b.length))
                .collect();
            match inline_pieces(&bufs, qp.limits.max_inline) {
                Some(pieces) => batch.set_inline(&pieces),
                None => batch.fail(EINVAL),
            }
        })
    };
}

unsafe extern "C" fn wr_set_ud_addr(
    ibqp: *mut sys::ibv_qp_ex,
    ah: *mut sys::ibv_ah,
    remote_qpn: u32,
    remote_qkey: u32,
) {
    // SAFETY: as in `wr_start`; a non-null AH is one of ours.
    let dest = unsafe { ah.cast::<Ah>().as_ref() }.map(|ah| ah.dest(remote_qpn, remote_qkey));
    // SAFETY: as in `wr_start`.
    unsafe { with_batch(ibqp, |_, batch| batch.set_ud(dest)) };
}

/// Binds window `mw` under the key `rkey` (the application's `ibv_inc_rkey` of its key; the
/// `ibv_mw` is left as it is, as for `IBV_WR_BIND_MW`).
unsafe extern "C" fn wr_bind_mw(
    ibqp: *mut sys::ibv_qp_ex,
    _mw: *mut sys::ibv_mw,
    rkey: u32,
    info: *const sys::ibv_mw_bind_info,
) {
    // SAFETY: the application's bind information, null or valid for the call.
    let op = match unsafe { info.as_ref() } {
        // SAFETY: per the verbs contract the bind's MR is null or ours.
        Some(info) => unsafe { bind_segment(rkey, info) }.map(SendOp::BindMw),
        None => Err(EINVAL),
    };
    // SAFETY: as in `wr_start`.
    unsafe { begin(ibqp, op) };
}

unsafe extern "C" fn wr_local_inv(ibqp: *mut sys::ibv_qp_ex, rkey: u32) {
    // SAFETY: as in `wr_start`.
    unsafe { begin(ibqp, Ok(SendOp::LocalInv(rkey))) };
}

/// Operations the hardware does not have: `create_qp_ex` refuses their flags, and these
/// make a batch that calls them anyway fail instead of crashing on a NULL pointer.
unsafe extern "C" fn wr_send_tso(
    ibqp: *mut sys::ibv_qp_ex,
    _hdr: *mut core::ffi::c_void,
    _hdr_sz: u16,
    _mss: u16,
) {
    // SAFETY: as in `wr_start`.
    unsafe { begin(ibqp, Err(libc::EOPNOTSUPP)) };
}

unsafe extern "C" fn wr_set_xrc_srqn(ibqp: *mut sys::ibv_qp_ex, srqn: u32) {
    // SAFETY: as in `wr_start`.
    unsafe { with_batch(ibqp, |_, batch| batch.set_xrc_srqn(srqn)) };
}

unsafe extern "C" fn wr_atomic_write(
    ibqp: *mut sys::ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    data: *const core::ffi::c_void,
) {
    let mut value = [0u8; 8];
    if data.is_null() {
        // SAFETY: as in `wr_start`.
        return unsafe { begin(ibqp, Err(EINVAL)) };
    }
    // SAFETY: `ibv_wr_atomic_write` takes 8 bytes at `data` (libibverbs' contract).
    unsafe { core::ptr::copy_nonoverlapping(data.cast::<u8>(), value.as_mut_ptr(), 8) };
    let op = SendOp::AtomicWrite {
        remote_addr,
        rkey,
        value,
    };
    // SAFETY: as in `wr_start`.
    unsafe { begin(ibqp, Ok(op)) };
}

unsafe extern "C" fn wr_flush(
    ibqp: *mut sys::ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    len: usize,
    placement: u8,
    level: u8,
) {
    let op = SendOp::Flush {
        remote_addr,
        rkey,
        length: len as u64,
        placement,
        level,
    };
    // SAFETY: as in `wr_start`.
    unsafe { begin(ibqp, Ok(op)) };
}
