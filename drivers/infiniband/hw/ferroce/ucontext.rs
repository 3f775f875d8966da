// SPDX-License-Identifier: GPL-2.0

//! User contexts: every process that opens the device gets a NIC context of its own, that is a
//! doorbell page mapped into that process alone and a QID table (ferroce-hw.rst, "Doorbells")
//! that translates the queue numbers its doorbells carry to the device's. A process can ring
//! only the queues mapped for it.

use kernel::{
    page::PAGE_SHIFT,
    prelude::*,
    rdma::{
        self,
        MmapHandle,
        MmapRequest,
        UcontextInit,
        Udata, //
    },
    sync::{
        new_spinlock,
        Arc,
        SpinLock, //
    },
    uapi,
};

use crate::{
    hw,
    verbs::RoceDevice, //
};

/// What an mmap offset of a context maps: its doorbell page.
pub(crate) struct DbPage {
    /// Bus address of the page in BAR0.
    phys: u64,
}

/// The driver's part of a user context.
pub(crate) struct UcontextData {
    /// The NIC context (doorbell page number); never 0, the kernel's.
    ctx: u32,
    /// The doorbell page's mmap entry; dropping it removes the offset.
    db_page: MmapHandle<RoceDevice>,
    /// Local QIDs in use; each queue's [`Qid`] holds the table too.
    qids: Arc<QidTable>,
}

/// The most local QIDs a context can have: the interface's QID table length.
const QIDS: usize = hw::QID_TABLE_LEN;

/// The local QIDs of a context in use, one bit each.
#[pin_data]
struct QidTable {
    /// The device's table length (`REG_QID_TABLE_LEN`, at most [`QIDS`]).
    len: usize,
    #[pin]
    used: SpinLock<[u64; QIDS / 64]>,
}

impl QidTable {
    fn new(len: usize) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                len: len.min(QIDS),
                used <- new_spinlock!([0; QIDS / 64], "ferroce::qids"),
            }),
            GFP_KERNEL,
        )
    }

    /// Takes the lowest free local QID.
    fn take(&self) -> Result<u16> {
        let mut used = self.used.lock();
        let (word, bit) = used
            .iter()
            .enumerate()
            .find(|(_, w)| **w != u64::MAX)
            .map(|(i, w)| (i, w.trailing_ones() as usize))
            .filter(|(word, bit)| word * 64 + bit < self.len)
            .ok_or(ENOSPC)?;
        used[word] |= 1 << bit;
        Ok(u16::try_from(word * 64 + bit)?)
    }

    fn give_back(&self, local: u16) {
        let (word, bit) = (usize::from(local) / 64, local % 64);
        if let Some(w) = self.used.lock().get_mut(word) {
            *w &= !(1u64 << bit);
        }
    }
}

/// A local QID of a context, mapped to one of its queues. The device drops the mapping when the
/// queue is destroyed; the number goes back to the context when the queue's data (which holds
/// this) is dropped, after the destroy.
pub(crate) struct Qid {
    local: u16,
    table: Arc<QidTable>,
}

impl Qid {
    /// The number the process's doorbells carry for the queue.
    pub(crate) fn local(&self) -> u16 {
        self.local
    }
}

impl Drop for Qid {
    fn drop(&mut self) {
        self.table.give_back(self.local);
    }
}

impl UcontextData {
    /// Allocates a NIC context and tells the process (response `ferroce_alloc_ucontext_resp`)
    /// where its doorbell page is and what the device offers.
    pub(crate) fn new(
        init: &UcontextInit<'_, RoceDevice>,
        udata: Option<&mut Udata<'_>>,
    ) -> Result<Self> {
        let udata = udata.ok_or(EINVAL)?;
        let dev = init.device();
        let ctx = dev.cmdq().exec(&hw::AllocCtxCmd { rsvd: 0 })?.ctx;
        let data = Self::with_context(init, dev, ctx).and_then(|data| {
            udata.write(&data.response(dev)?)?;
            Ok(data)
        });
        if data.is_err() {
            let _ = dev.cmdq().exec(&hw::FreeCtxCmd { ctx, rsvd: 0 });
        }
        data
    }

    fn with_context(
        init: &UcontextInit<'_, RoceDevice>,
        dev: &rdma::Device<RoceDevice>,
        ctx: u32,
    ) -> Result<Self> {
        // A buggy device could hand out the kernel's page or one past the area.
        if ctx == 0 || ctx >= dev.num_db_pages() {
            pr_err!("ferroce: the device returned context {}\n", ctx);
            return Err(EIO);
        }
        let phys = dev.bar_phys() + hw::db_page_offset(ctx as usize) as u64;
        let db_page = init.insert_mmap(DbPage { phys }, hw::DB_PAGE_SIZE)?;
        Ok(Self {
            ctx,
            db_page,
            qids: QidTable::new(dev.qid_table_len())?,
        })
    }

    fn response(
        &self,
        dev: &rdma::Device<RoceDevice>,
    ) -> Result<uapi::ferroce_alloc_ucontext_resp> {
        let caps = dev.caps_flags();
        let limits = dev.wq_limits();
        Ok(uapi::ferroce_alloc_ucontext_resp {
            db_mmap_offset: self.db_page.offset(),
            if_version: hw::IF_VERSION,
            caps,
            flags: [
                (
                    hw::CAP_WQE_PUSH,
                    uapi::ferroce_ucontext_flags_FERROCE_UCONTEXT_WQE_PUSH,
                ),
                (
                    hw::CAP_DB_RECORD,
                    uapi::ferroce_ucontext_flags_FERROCE_UCONTEXT_DB_RECORD,
                ),
            ]
            .into_iter()
            .filter(|&(cap, _)| caps & cap != 0)
            .fold(0, |flags, (_, flag)| flags | flag),
            max_inline: limits.max_inline,
            max_sge: limits.max_sge,
            max_log_queue: limits.max_log_wr(),
            push_window_offset: hw::PUSH_WINDOW_OFFSET as u32,
            push_window_size: hw::PUSH_WINDOW_SIZE as u32,
            max_log_cq: dev.max_cqe().trailing_zeros(),
            reserved: 0,
        })
    }

    /// Maps a free local QID of this context to queue `global` of `kind` (`hw::QID_KIND_*`).
    pub(crate) fn map_qid(
        &self,
        dev: &rdma::Device<RoceDevice>,
        kind: u8,
        global: u32,
    ) -> Result<Qid> {
        // Given back if the mapping fails.
        let qid = Qid {
            local: self.qids.take()?,
            table: self.qids.clone(),
        };
        dev.cmdq().exec(&hw::MapQidCmd {
            ctx: self.ctx,
            local_qid: qid.local.into(),
            global,
            kind,
            rsvd: [0; 3],
        })?;
        Ok(qid)
    }

    /// Frees the NIC context; ib_core destroyed the context's objects first.
    pub(crate) fn free(&self, dev: &rdma::Device<RoceDevice>) {
        if let Err(e) = dev.cmdq().exec_destroy(&hw::FreeCtxCmd {
            ctx: self.ctx,
            rsvd: 0,
        }) {
            pr_warn!("ferroce: freeing context {} failed: {:?}\n", self.ctx, e);
        }
    }
}

/// Maps a context's doorbell page into its process, uncached.
pub(crate) fn mmap(entry: &DbPage, request: &mut MmapRequest<'_>) -> Result {
    if request.len() != hw::DB_PAGE_SIZE {
        return Err(EINVAL);
    }
    request.map_io(entry.phys >> PAGE_SHIFT, hw::DB_PAGE_SIZE)
}
