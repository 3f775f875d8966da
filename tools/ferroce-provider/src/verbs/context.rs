// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Device matching, the user context (doorbell page, limits) and the device queries.

use core::ffi::{c_int, c_void};
use core::mem::{offset_of, size_of};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;

use ferroce_hw::{
    MAX_INLINE, MAX_LOG_QUEUE, MAX_SGE, MAX_WQE_SIZE, PCI_DEVICE_ID, PCI_VENDOR_ID,
    PCI_VF_DEVICE_ID,
};
use libc::{EINVAL, EPROTO};

use super::{ah, check, cq, fail, mr, mw, qp, srq, xrcd, Pod, WithDrv};
use crate::doorbell::{self, DbPage};
use crate::queue::{PushWindow, QueueProgress};
use crate::sys;
use ferroce_hw::WqLimits;

/// `Sync` wrapper for the C tables rdma-core reads (they hold raw pointers to statics).
#[repr(transparent)]
pub(super) struct Shared<T>(pub(super) T);
// SAFETY: the wrapped tables are immutable statics that only point to other statics.
unsafe impl<T> Sync for Shared<T> {}

/// The PCI functions the provider serves: a NIC's physical function and its virtual ones.
const fn pci_match(device: u16) -> sys::verbs_match_ent {
    sys::verbs_match_ent {
        driver_data: core::ptr::null_mut(),
        u: sys::verbs_match_ent__bindgen_ty_1 { driver_id: 0 },
        vendor: PCI_VENDOR_ID,
        device,
        kind: sys::VERBS_MATCH_PCI as u8,
    }
}

static MATCH_TABLE: Shared<[sys::verbs_match_ent; 3]> = Shared([
    pci_match(PCI_DEVICE_ID),
    pci_match(PCI_VF_DEVICE_ID),
    sys::verbs_match_ent {
        driver_data: core::ptr::null_mut(),
        u: sys::verbs_match_ent__bindgen_ty_1 { driver_id: 0 },
        vendor: 0,
        device: 0,
        kind: sys::VERBS_MATCH_SENTINEL as u8,
    },
]);

pub(super) static DEVICE_OPS: Shared<sys::verbs_device_ops> = Shared(sys::verbs_device_ops {
    name: c"ferroce".as_ptr(),
    match_min_abi_version: sys::FERROCE_UVERBS_ABI_VERSION,
    match_max_abi_version: sys::FERROCE_UVERBS_ABI_VERSION,
    match_table: MATCH_TABLE.0.as_ptr(),
    static_providers: core::ptr::null_mut(),
    match_device: None,
    alloc_context: Some(alloc_context),
    import_context: None,
    alloc_device: Some(alloc_device),
    uninit_device: Some(uninit_device),
});

const NO_OPS: sys::verbs_context_ops = {
    // SAFETY: the ops table is all `Option<fn>`; all-zero is every op `None`.
    unsafe { core::mem::zeroed() }
};

static CONTEXT_OPS: sys::verbs_context_ops = sys::verbs_context_ops {
    free_context: Some(free_context),
    query_device_ex: Some(query_device_ex),
    query_port: Some(query_port),
    alloc_pd: Some(mr::alloc_pd),
    dealloc_pd: Some(mr::dealloc_pd),
    // The kernel serves the pages of on-demand MRs (`IBV_ACCESS_ON_DEMAND`), as for rxe.
    advise_mr: Some(sys::ibv_cmd_advise_mr),
    reg_mr: Some(mr::reg_mr),
    dereg_mr: Some(mr::dereg_mr),
    alloc_mw: Some(mw::alloc_mw),
    dealloc_mw: Some(mw::dealloc_mw),
    bind_mw: Some(mw::bind_mw),
    create_cq: Some(cq::create_cq),
    create_cq_ex: Some(cq::create_cq_ex),
    destroy_cq: Some(cq::destroy_cq),
    resize_cq: Some(cq::resize_cq),
    poll_cq: Some(cq::poll_cq),
    req_notify_cq: Some(cq::req_notify_cq),
    create_qp: Some(qp::create_qp),
    create_qp_ex: Some(qp::create_qp_ex),
    modify_qp: Some(qp::modify_qp),
    query_qp: Some(qp::query_qp),
    destroy_qp: Some(qp::destroy_qp),
    // Multicast is the kernel's: the device delivers a group's datagrams to the QP's RQ.
    attach_mcast: Some(sys::ibv_cmd_attach_mcast),
    detach_mcast: Some(sys::ibv_cmd_detach_mcast),
    post_send: Some(qp::post_send),
    post_recv: Some(qp::post_recv),
    create_srq: Some(srq::create_srq),
    create_srq_ex: Some(srq::create_srq_ex),
    get_srq_num: Some(srq::get_srq_num),
    open_xrcd: Some(xrcd::open_xrcd),
    close_xrcd: Some(xrcd::close_xrcd),
    open_qp: Some(qp::open_qp),
    modify_srq: Some(srq::modify_srq),
    query_srq: Some(srq::query_srq),
    destroy_srq: Some(srq::destroy_srq),
    post_srq_recv: Some(srq::post_srq_recv),
    create_ah: Some(ah::create_ah),
    destroy_ah: Some(ah::destroy_ah),
    ..NO_OPS
};

/// The verbs device: nothing beyond what libibverbs keeps.
#[repr(C)]
struct Device {
    vdev: sys::verbs_device,
}

unsafe extern "C" fn alloc_device(_sysfs: *mut sys::verbs_sysfs_dev) -> *mut sys::verbs_device {
    let dev = Box::new(Device {
        vdev: sys::verbs_device::zeroed(),
    });
    Box::into_raw(dev).cast()
}

unsafe extern "C" fn uninit_device(vdev: *mut sys::verbs_device) {
    if !vdev.is_null() {
        // SAFETY: `vdev` came from `alloc_device` (a `Device`, whose first field it is) and
        // libibverbs hands it back once.
        drop(unsafe { Box::from_raw(vdev.cast::<Device>()) });
    }
}

/// Completion progress of one QP's queues, updated by the CQ poller.
#[derive(Debug)]
pub(super) struct QpProgress {
    pub(super) sq: Arc<QueueProgress>,
    /// The RQ, or the SRQ the QP receives from; none for an XRC_INI QP.
    pub(super) rq: Option<Arc<QueueProgress>>,
}

/// What the provider keeps per context.
pub(super) struct ContextInner {
    pub(super) db: DbPage,
    /// The push window, one for all QPs of the context (it serialises their pushes).
    pub(super) push: Option<PushWindow>,
    /// The device watches the doorbell records of this context's QPs (`FERROCE_DOORBELL`).
    pub(super) db_record: bool,
    pub(super) limits: WqLimits,
    /// log2 of the deepest CQ (deeper than a work queue: a CQ serves several).
    pub(super) max_log_cq: u32,
    /// The QP table (QPN → completion progress), for the CQ poller.
    pub(super) qps: Table<QpProgress>,
    /// The XRC SRQ table (SRQN → completion progress), for the CQ poller: an XRC receive
    /// names its SRQ, not a QP of this process.
    pub(super) xrc_srqs: Table<QueueProgress>,
}

/// A table of queues by number that the CQ poller reads without a lock, as mlx5's QP table
/// is read: a lookup loads the current map (`arc_swap`), and creating or destroying a queue,
/// which is rare, copies the map under a mutex and swaps the copy in. Pollers of different
/// CQs, and a poller and a create, never wait for each other.
pub(super) struct Table<T> {
    map: ArcSwap<HashMap<u32, Arc<T>>>,
    /// Serialises the writers (each copies the map it replaces).
    writer: Mutex<()>,
}

impl<T> Default for Table<T> {
    fn default() -> Self {
        Self {
            map: ArcSwap::from_pointee(HashMap::new()),
            writer: Mutex::new(()),
        }
    }
}

impl<T> Table<T> {
    /// The entry of number `n`.
    pub(super) fn get(&self, n: u32) -> Option<Arc<T>> {
        self.map.load().get(&n).cloned()
    }

    /// Adds (or replaces) the entry of number `n`.
    pub(super) fn insert(&self, n: u32, value: Arc<T>) {
        self.update(|map| {
            map.insert(n, value);
        });
    }

    /// Removes the entry of number `n`.
    pub(super) fn remove(&self, n: u32) {
        self.update(|map| {
            map.remove(&n);
        });
    }

    fn update(&self, change: impl FnOnce(&mut HashMap<u32, Arc<T>>)) {
        let _writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let mut map = HashMap::clone(&self.map.load());
        change(&mut map);
        self.map.store(Arc::new(map));
    }
}

/// A user context: libibverbs' part first (it frees nothing of ours).
#[repr(C)]
pub(super) struct Context {
    vctx: sys::verbs_context,
    inner: Option<ContextInner>,
}

/// Our context behind an `ibv_context` that this provider created.
///
/// # Safety
///
/// `ibctx` is null or the `context` member of a live [`Context`]'s `verbs_context`.
pub(super) unsafe fn context<'a>(ibctx: *mut sys::ibv_context) -> Option<&'a ContextInner> {
    if ibctx.is_null() {
        return None;
    }
    let offset = offset_of!(Context, vctx) + offset_of!(sys::verbs_context, context);
    // SAFETY: per the contract, `ibctx` is inside a `Context` at `offset`.
    let ctx = unsafe { &*ibctx.cast::<u8>().sub(offset).cast::<Context>() };
    ctx.inner.as_ref()
}

/// Checks what the kernel told us about the device: the work queues' limits, the deepest CQ
/// (log2) and the push window.
fn limits_from(
    resp: &sys::ferroce_alloc_ucontext_resp,
) -> Result<(WqLimits, u32, Option<PushWindow>), i32> {
    if resp.max_log_queue > MAX_LOG_QUEUE
        || resp.max_log_cq > MAX_LOG_QUEUE
        || resp.max_sge > MAX_SGE
        || resp.max_inline > MAX_INLINE
    {
        return Err(EPROTO);
    }
    // A kernel that did not say bounds CQs as work queues.
    let max_log_cq = match resp.max_log_cq {
        0 => resp.max_log_queue,
        log => log,
    };
    let limits = WqLimits::new(1 << resp.max_log_queue, resp.max_sge, resp.max_inline);
    let push = if resp.flags & sys::FERROCE_UCONTEXT_WQE_PUSH != 0 {
        let offset = resp.push_window_offset as usize;
        let size = resp.push_window_size as usize;
        if offset % 8 != 0 || offset + size > sys::FERROCE_DB_PAGE_SIZE as usize {
            return Err(EPROTO);
        }
        Some(PushWindow::new(offset, size.min(MAX_WQE_SIZE)))
    } else {
        None
    };
    Ok((limits, max_log_cq, push))
}

unsafe extern "C" fn alloc_context(
    device: *mut sys::ibv_device,
    cmd_fd: c_int,
    _private_data: *mut c_void,
) -> *mut sys::verbs_context {
    // libibverbs allocates the whole `Context` (zeroed) and initialises its part; the
    // offset argument is the position of `vctx`, as C's `verbs_init_and_alloc_context` passes.
    // SAFETY: size and offset describe `Context`, whose alignment calloc satisfies.
    let raw = unsafe {
        sys::_verbs_init_and_alloc_context(
            device,
            cmd_fd,
            size_of::<Context>(),
            offset_of!(Context, vctx) as *mut sys::verbs_context,
            sys::RDMA_DRIVER_UNKNOWN,
        )
    }
    .cast::<Context>();
    if raw.is_null() {
        return core::ptr::null_mut();
    }
    // SAFETY: `raw` is a fresh, zeroed, suitably aligned `Context` allocation; `inner` is
    // initialised here before any use.
    unsafe { core::ptr::addr_of_mut!((*raw).inner).write(None) };
    // SAFETY: `raw` is valid and exclusively ours until returned.
    let ctx = unsafe { &mut *raw };
    let mut cmd = sys::ibv_get_context::zeroed();
    let mut resp = WithDrv::<sys::ib_uverbs_get_context_resp, _>::new(
        sys::ferroce_alloc_ucontext_resp::zeroed(),
    );
    // SAFETY: the context was initialised above; command and response are sized buffers.
    let ret = unsafe {
        sys::ibv_cmd_get_context(
            &mut ctx.vctx,
            &mut cmd,
            size_of::<sys::ibv_get_context>(),
            &mut resp.core,
            WithDrv::<sys::ib_uverbs_get_context_resp, sys::ferroce_alloc_ucontext_resp>::SIZE,
        )
    };
    let inner =
        check(ret)
            .and_then(|()| limits_from(&resp.drv))
            .and_then(|(limits, max_log_cq, push)| {
                // FERROCE_PUSH=1: single WRs go through the push window. Not by default: under
                // QEMU every 8 bytes of it are an MMIO trap and a vfio-user message, and `make
                // bench` measured ib_send_lat 2.8 times slower with it than with a doorbell.
                let push =
                    push.filter(|_| std::env::var_os("FERROCE_PUSH").is_some_and(|v| v == "1"));
                let db_record = doorbell::record_mode(
                    std::env::var("FERROCE_DOORBELL").ok().as_deref(),
                    resp.drv.flags & sys::FERROCE_UCONTEXT_DB_RECORD != 0,
                );
                let db = DbPage::map(
                    cmd_fd,
                    resp.drv.db_mmap_offset,
                    sys::FERROCE_DB_PAGE_SIZE as usize,
                )?;
                Ok(ContextInner {
                    db,
                    push,
                    db_record,
                    limits,
                    max_log_cq,
                    qps: Table::default(),
                    xrc_srqs: Table::default(),
                })
            });
    match inner {
        Ok(inner) => ctx.inner = Some(inner),
        Err(e) => {
            // SAFETY: initialised by libibverbs above and not yet handed out.
            unsafe { release(raw) };
            return fail(e);
        }
    }
    // SAFETY: a live context; the ops table is a static.
    unsafe { sys::verbs_set_ops(&mut ctx.vctx, &CONTEXT_OPS) };
    &mut ctx.vctx
}

/// Uninitialises and frees a context of `alloc_context`.
///
/// # Safety
///
/// `raw` came from `alloc_context` (its `inner` initialised) and is not used afterwards.
unsafe fn release(raw: *mut Context) {
    // SAFETY: per the contract.
    unsafe {
        sys::verbs_uninit_context(core::ptr::addr_of_mut!((*raw).vctx));
        // Unmaps the doorbell page.
        core::ptr::drop_in_place(core::ptr::addr_of_mut!((*raw).inner));
        libc::free(raw.cast());
    }
}

unsafe extern "C" fn free_context(ibctx: *mut sys::ibv_context) {
    if ibctx.is_null() {
        return;
    }
    let offset = offset_of!(Context, vctx) + offset_of!(sys::verbs_context, context);
    // SAFETY: libibverbs passes back the `ibv_context` of a context `alloc_context` made
    // (inside a `Context` at `offset`), once.
    unsafe { release(ibctx.cast::<u8>().sub(offset).cast::<Context>()) };
}

unsafe extern "C" fn query_device_ex(
    ibctx: *mut sys::ibv_context,
    input: *const sys::ibv_query_device_ex_input,
    attr: *mut sys::ibv_device_attr_ex,
    attr_size: usize,
) -> c_int {
    let mut resp = sys::ib_uverbs_ex_query_device_resp::zeroed();
    let mut resp_size = size_of::<sys::ib_uverbs_ex_query_device_resp>();
    // SAFETY: arguments from the application through libibverbs; the response is ours.
    let ret = unsafe {
        sys::ibv_cmd_query_device_any(ibctx, input, attr, attr_size, &mut resp, &mut resp_size)
    };
    if ret == 0 && !attr.is_null() {
        let text = fw_ver_text(resp.base.fw_ver);
        // SAFETY: `attr` is the application's, at least the size of `ibv_device_attr` (the
        // command checked `attr_size`); `fw_ver` is a C string field of it.
        let field = unsafe { &mut (*attr).orig_attr.fw_ver };
        for (out, byte) in field
            .iter_mut()
            .zip(text.bytes().chain(core::iter::once(0)))
        {
            *out = byte as core::ffi::c_char;
        }
    }
    ret
}

/// The firmware version the kernel reports (16-bit major, minor and sub-minor from bit 32
/// down), as rdma-core's providers print it.
fn fw_ver_text(raw: u64) -> String {
    format!(
        "{}.{}.{}",
        (raw >> 32) & 0xffff,
        (raw >> 16) & 0xffff,
        raw & 0xffff
    )
}

unsafe extern "C" fn query_port(
    ibctx: *mut sys::ibv_context,
    port: u8,
    attr: *mut sys::ibv_port_attr,
) -> c_int {
    if attr.is_null() {
        return EINVAL;
    }
    let mut cmd = sys::ibv_query_port::zeroed();
    // SAFETY: arguments from the application through libibverbs; the command is ours.
    unsafe {
        sys::ibv_cmd_query_port(
            ibctx,
            port,
            attr,
            &mut cmd,
            size_of::<sys::ibv_query_port>(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_lookup_waits_for_no_writer() {
        let table = Arc::new(Table::<u32>::default());
        table.insert(7, Arc::new(70));
        table.insert(8, Arc::new(80));
        table.remove(8);
        assert_eq!(table.get(7).as_deref(), Some(&70));
        assert_eq!(table.get(8), None);
        // A create or destroy in progress (its copy under the writer's lock) holds no poller.
        let writing = table.writer.lock().unwrap();
        let (found, got) = std::sync::mpsc::channel();
        let poller = {
            let table = table.clone();
            std::thread::spawn(move || found.send(table.get(7)).unwrap())
        };
        let got = got.recv_timeout(std::time::Duration::from_secs(30));
        assert_eq!(
            got.ok().flatten().as_deref(),
            Some(&70),
            "the lookup waited"
        );
        drop(writing);
        poller.join().unwrap();
    }
}
