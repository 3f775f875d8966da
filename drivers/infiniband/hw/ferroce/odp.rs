// SPDX-License-Identifier: GPL-2.0

//! On-demand paging MRs (`IBV_ACCESS_ON_DEMAND`): a process's memory that is not pinned. The
//! device holds a page table per MR (`hw::MR_FLAG_ON_DEMAND`) whose entries start not present;
//! when an access meets a missing page the device waits and raises a page fault, which the
//! driver answers from process context: it faults the pages in through the MR's
//! [`UmemOdp`], maps them for DMA and gives the device their addresses
//! (`hw::UpdateMrPagesCmd`), all under the umem's mutex. When the process's mapping changes, the
//! MMU notifier calls [`OdpHandler::invalidate`], which clears the entries in the device before
//! ib_core unmaps the pages.

use kernel::{
    prelude::*,
    rdma::{
        self,
        AccessFlag,
        AccessFlags,
        AdviseMr,
        OdpHandler,
        UmemOdp, //
    },
    sync::{
        atomic::{
            Acquire,
            Atomic,
            Relaxed,
            Release, //
        },
        Arc,
    },
    xarray::XArray,
};

use crate::{hw, queue::PageList, verbs::RoceDevice};

/// What an on-demand MR's notifier needs to clear the device's entries: the device's key of
/// the MR (0 until it exists there, and again once it is being destroyed) and where its page
/// table starts.
pub(crate) struct OdpTable {
    key: Atomic<u32>,
    /// User address of the first page.
    start: Atomic<u64>,
    /// log2 of the page size.
    shift: Atomic<u32>,
}

impl OdpHandler<RoceDevice> for OdpTable {
    fn invalidate(dev: &rdma::Device<RoceDevice>, table: &Self, range: core::ops::Range<u64>) {
        // Set with `Release` after `start` and `shift`.
        let key = table.key.load(Acquire);
        if key == 0 {
            return;
        }
        let (start, shift) = (table.start.load(Relaxed), table.shift.load(Relaxed));
        // The range is in CPU pages, within the umem; the table's pages may be huge ones.
        let (first, last) = (
            (range.start - start) >> shift,
            (range.end - 1 - start) >> shift,
        );
        // Both fit: the range is within the umem, whose page count fit in u32 at creation
        // (`OdpMr::new`).
        let (Ok(first), Ok(count)) = (u32::try_from(first), u32::try_from(last - first + 1)) else {
            return;
        };
        let cmd = hw::UpdateMrPagesCmd {
            pages: 0,
            key,
            first,
            count,
            flags: hw::UPDATE_PAGES_INVALIDATE,
        };
        // A command that fails because the device stopped answering has reset it (no DMA after
        // a timeout); any other failure means the device no longer has the MR.
        if let Err(e) = dev.cmdq().exec(&cmd) {
            pr_debug!(
                "{}: invalidating pages {first}+{count} of MR {key:#x} failed: {e:?}\n",
                dev.name()
            );
        }
    }
}

/// An on-demand MR: its umem and the page table entries given to the device, shared by the MR,
/// the device's table of such MRs ([`RoceDevice::odp_mrs`]) and the page faults being served.
pub(crate) struct OdpMr {
    /// The number of its PD.
    pd: u32,
    umem: UmemOdp<RoceDevice, OdpTable>,
    /// The entries of one `UPDATE_MR_PAGES` (at most [`MAX_UPDATE`]), written and read under
    /// the umem's mutex: the MR's memory in the driver does not grow with its length.
    entries: PageList,
}

/// Most pages one `UPDATE_MR_PAGES` carries: a fault is answered in pieces of this many.
const MAX_UPDATE: usize = 1 << 12;

impl OdpMr {
    /// Registers `length` bytes of the calling process at `start` for on-demand paging and
    /// creates the MR in the device (with `create`, given the page table's descriptor).
    pub(crate) fn new(
        dev: &rdma::Device<RoceDevice>,
        pd: u32,
        start: u64,
        length: u64,
        access: AccessFlags,
        create: impl FnOnce(hw::BufDesc) -> Result<u32>,
    ) -> Result<Arc<Self>> {
        let table = Arc::new(
            OdpTable {
                key: Atomic::new(0),
                start: Atomic::new(0),
                shift: Atomic::new(0),
            },
            GFP_KERNEL,
        )?;
        let umem = UmemOdp::get(dev, start, usize::try_from(length)?, access, table)?;
        let count = u32::try_from(umem.num_pages())?;
        if count > dev.max_mr_pages() {
            return Err(EINVAL);
        }
        let shift = umem.page_shift();
        umem.handler().start.store(umem.start(), Relaxed);
        umem.handler().shift.store(shift, Relaxed);
        let entries = PageList::new(dev.parent(), count.min(MAX_UPDATE as u32))?;
        let key = create(hw::BufDesc {
            addr: 0,
            page_count: count,
            log_page_size: u8::try_from(shift)?,
            rsvd: [0; 3],
        })?;
        umem.handler().key.store(key, Release);
        let stored = Arc::new(Self { pd, umem, entries }, GFP_KERNEL)
            .map_err(Error::from)
            .and_then(|mr| {
                let index = hw::mr_key_index(key) as usize;
                dev.odp_mrs()
                    .lock()
                    .store(index, mr.clone(), GFP_KERNEL)
                    .map_err(|e| e.error)?;
                Ok(mr)
            });
        if stored.is_err() {
            // Not an MR after all: the device forgets it, then its memory goes.
            let _ = dev.cmdq().exec_destroy(&hw::DestroyMrCmd { key, rsvd: 0 });
        }
        stored
    }

    /// The device's key of the MR.
    pub(crate) fn key(&self) -> u32 {
        self.umem.handler().key.load(Acquire)
    }

    /// Destroys the MR in the device with `destroy`, under the umem's mutex, so that no
    /// invalidation and no page fault being served reaches the device's MR once it is gone.
    /// Then the MR is forgotten: its notifier stops, and page faults no longer find it.
    pub(crate) fn destroy(
        &self,
        dev: &rdma::Device<RoceDevice>,
        destroy: impl FnOnce() -> Result,
    ) -> Result {
        let key = self.umem.locked(|| {
            destroy()?;
            Ok::<_, Error>(self.umem.handler().key.xchg(0, Relaxed))
        })?;
        if key != 0 {
            // Dropped after the table's lock: a last reference releases the umem, which sleeps.
            let removed = forget(dev.odp_mrs(), hw::mr_key_index(key) as usize, self);
            drop(removed);
        }
        Ok(())
    }

    /// Makes `count` pages from page `first` present in the device: faulted in (writable if
    /// `write`), or, without `fault`, those the process has mapped now. Pages the process has
    /// no memory for are given to the device as failed (its access fails, not waits).
    pub(crate) fn serve(
        &self,
        dev: &rdma::Device<RoceDevice>,
        first: usize,
        count: usize,
        write: bool,
        fault: bool,
    ) -> Result {
        let end = first.checked_add(count).ok_or(EINVAL)?;
        if count == 0 || end > self.umem.num_pages() {
            return Err(EINVAL);
        }
        let (shift, start) = (self.umem.page_shift(), self.umem.start());
        // A write to memory registered read-only is no fault to serve.
        let write = write && self.umem.writable();
        let mut at = first;
        while at < end {
            let n = (end - at).min(MAX_UPDATE);
            let va = start + ((at as u64) << shift);
            let len = (n as u64) << shift;
            match self.umem.map(va, len, write, fault) {
                Ok(mut pages) => {
                    let key = self.live_key()?;
                    // Pages the mapping did not cover are given as not present (the buffer
                    // holds the previous update's entries).
                    for i in 0..n {
                        let page = if i < pages.count() {
                            pages.page(i)?
                        } else {
                            None
                        };
                        let entry = match page {
                            Some((addr, writable)) => {
                                addr | hw::ODP_PAGE_READ
                                    | if writable { hw::ODP_PAGE_WRITE } else { 0 }
                            }
                            None => 0,
                        };
                        self.entries.set(u32::try_from(i)?, entry)?;
                    }
                    // While the umem's mutex is held: no invalidation of these pages runs
                    // before the device has them.
                    self.update(dev, key, at, n)?;
                }
                // The process has no memory there, or not writable: the access fails. Other
                // errors (a busy or dying process) leave the pages missing; the device asks
                // again.
                Err(e) if fault && (e == EFAULT || e == EPERM) => {
                    self.umem.locked(|| {
                        let key = self.live_key()?;
                        for i in 0..n {
                            self.entries.set(u32::try_from(i)?, hw::ODP_PAGE_FAILED)?;
                        }
                        self.update(dev, key, at, n)
                    })?;
                    return Err(e);
                }
                Err(e) => return Err(e),
            }
            at += n;
        }
        Ok(())
    }

    /// The device's key of the MR, or `ENOENT` once it is destroyed (read under the umem's
    /// mutex, that stays so until it is released).
    fn live_key(&self) -> Result<u32> {
        match self.key() {
            0 => Err(ENOENT),
            key => Ok(key),
        }
    }

    /// Gives the device pages `first .. first + count` from the entries (the first `count`).
    fn update(
        &self,
        dev: &rdma::Device<RoceDevice>,
        key: u32,
        first: usize,
        count: usize,
    ) -> Result {
        dev.cmdq().exec(&hw::UpdateMrPagesCmd {
            pages: self.entries.dma_address(),
            key,
            first: u32::try_from(first)?,
            count: u32::try_from(count)?,
            flags: 0,
        })
    }

    /// Serves the pages `[addr, addr + len)` (user addresses) for `ibv_advise_mr()`.
    fn advise(
        &self,
        dev: &rdma::Device<RoceDevice>,
        addr: u64,
        len: u64,
        advice: AdviseMr,
    ) -> Result {
        let (start, end) = (self.umem.start(), self.umem.end());
        let stop = addr.checked_add(len).ok_or(EINVAL)?;
        if len == 0 || addr < start || stop > end {
            return Err(EINVAL);
        }
        let shift = self.umem.page_shift();
        let first = ((addr - start) >> shift) as usize;
        let count = ((stop - start).div_ceil(1 << shift) as usize) - first;
        match advice {
            AdviseMr::Prefetch => self.serve(dev, first, count, false, true),
            AdviseMr::PrefetchWrite => {
                if !self.umem.writable() {
                    return Err(EPERM);
                }
                self.serve(dev, first, count, true, true)
            }
            AdviseMr::PrefetchNoFault => self.serve(dev, first, count, false, false),
        }
    }
}

/// A page fault the device raised (`hw::EventType::PageFault`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PageFault {
    /// The MR's key.
    pub(crate) key: u32,
    /// First page it lacks.
    pub(crate) first: u32,
    /// Pages from there.
    pub(crate) count: u16,
    /// The access writes.
    pub(crate) write: bool,
}

impl PageFault {
    /// Whether `other` asks for a page of the same MR that this one asks for.
    pub(crate) fn overlaps(&self, other: &PageFault) -> bool {
        let end = |f: &PageFault| u64::from(f.first) + u64::from(f.count);
        self.key == other.key
            && u64::from(self.first) < end(other)
            && u64::from(other.first) < end(self)
    }
}

/// Serves page fault `f` (process context). A fault for an MR the driver does not have (gone,
/// or a lie) or for pages past its end (a lie) is counted and logged; the device raises a true
/// one again if anything still waits.
pub(crate) fn serve_fault(dev: &rdma::Device<RoceDevice>, f: PageFault) {
    let index = hw::mr_key_index(f.key) as usize;
    let mr = dev.odp_mrs().lock().get(index).map(Arc::from);
    let Some(mr) = mr.filter(|mr| mr.key() == f.key) else {
        dev.checks().bad_event("on-demand MR", f.key);
        return;
    };
    let (first, count) = (f.first as usize, usize::from(f.count));
    if count == 0 || first.saturating_add(count) > mr.umem.num_pages() {
        dev.checks()
            .bad_event("pages past the end of on-demand MR", f.key);
        return;
    }
    if let Err(e) = mr.serve(dev, first, count, f.write, true) {
        pr_debug!(
            "{}: page fault of MR {:#x} not served: {e:?}\n",
            dev.name(),
            f.key
        );
    }
}

/// `ibv_advise_mr()`: serves the pages of each SGE, each an on-demand MR's of `pd`.
pub(crate) fn advise(
    pd: &rdma::Pd<RoceDevice>,
    advice: AdviseMr,
    sges: &[rdma::wr::Sge],
) -> Result {
    let dev = pd.device();
    for sge in sges {
        let index = hw::mr_key_index(sge.lkey()) as usize;
        let mr = dev.odp_mrs().lock().get(index).map(Arc::from);
        // Another PD's MR is none of this process's business.
        let mr = mr
            .filter(|mr| mr.key() == sge.lkey() && mr.pd == pd.number())
            .ok_or(EINVAL)?;
        mr.advise(dev, sge.addr(), u64::from(sge.length()), advice)?;
    }
    Ok(())
}

/// Takes `mr` out of `table` at `index` if it is still there. The device frees an MR's key
/// index when it destroys the MR and hands out the lowest free one to the next: an MR created
/// meanwhile may already be stored at `index`, and is left alone (its faults would no longer
/// be served). Returns what was taken out, to be dropped after the lock.
fn forget<T: 'static>(table: &XArray<Arc<T>>, index: usize, mr: &T) -> Option<Arc<T>> {
    let mut table = table.lock();
    let mine = table
        .get(index)
        .is_some_and(|held| core::ptr::eq(&*held, mr));
    if mine {
        table.remove(index)
    } else {
        None
    }
}

/// Whether `access` asks for an on-demand MR.
pub(crate) fn on_demand(access: AccessFlags) -> bool {
    access.contains(AccessFlag::OnDemand)
}

#[kunit_tests(ferroce_odp)]
mod tests {
    use super::*;
    use kernel::xarray::AllocKind;

    /// Issue 36, defect 6: destroying MR A removed the table's entry at A's index even once
    /// MR B, created meanwhile with the index the device had just freed, was stored there.
    #[test]
    fn destroying_an_mr_leaves_the_next_one_at_its_index() -> Result {
        let table = KBox::pin_init(XArray::<Arc<u32>>::new(AllocKind::Alloc), GFP_KERNEL)?;
        let (a, b) = (Arc::new(1, GFP_KERNEL)?, Arc::new(2, GFP_KERNEL)?);
        table
            .lock()
            .store(7, a.clone(), GFP_KERNEL)
            .map_err(|e| e.error)?;
        // A destroyed in the device; B gets index 7 and is stored before A is forgotten.
        table
            .lock()
            .store(7, b.clone(), GFP_KERNEL)
            .map_err(|e| e.error)?;
        assert!(forget(&table, 7, &a).is_none());
        assert!(table.lock().get(7).is_some_and(|held| *held == 2));
        // B's own destroy takes it out.
        assert!(forget(&table, 7, &b).is_some());
        assert!(table.lock().get(7).is_none());
        Ok(())
    }
}
