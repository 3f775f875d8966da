// SPDX-License-Identifier: GPL-2.0

//! Rings and doorbell records in DMA-coherent memory, shared by CQs, QPs and SRQs.
//!
//! Kernel queues: a ring is one contiguous buffer of `1 << log_size` slots of `1 << log_stride`
//! bytes, named to the device by a contiguous [`hw::BufDesc`]. Indexes are free-running 16-bit
//! counters ([`hw::Ring`]): they wrap by design. User queues live in the process's memory
//! instead ([`UserQueueMem`]).

use kernel::{
    device::{
        self,
        Bound, //
    },
    dma::Coherent,
    io::{
        io_project,
        io_read,
        Io, //
    },
    prelude::*,
    rdma::{
        self,
        AccessFlag,
        Umem, //
    },
    sync::{
        barrier::{
            dma_mb,
            Read, //
        },
        new_mutex,
        Mutex, //
    },
};

use crate::{
    hw,
    ucontext::{
        Qid,
        UcontextData, //
    },
    verbs::RoceDevice,
};

/// A ring of fixed-size slots the driver and the device share.
pub(crate) struct DmaRing {
    buf: Coherent<[u8]>,
    ring: hw::Ring,
    stride: usize,
}

impl DmaRing {
    /// A zeroed ring of `1 << log_size` slots of `1 << log_stride` bytes.
    pub(crate) fn new(dev: &device::Device<Bound>, log_size: u32, log_stride: u32) -> Result<Self> {
        let ring = hw::Ring::new(log_size, hw::MAX_LOG_QUEUE).ok_or(EINVAL)?;
        let stride = 1usize << log_stride;
        let len = usize::try_from(ring.size())?
            .checked_mul(stride)
            .ok_or(EINVAL)?;
        let buf = Coherent::<u8>::zeroed_slice(dev, len, GFP_KERNEL)?;
        Ok(Self { buf, ring, stride })
    }

    /// The index arithmetic of the ring.
    pub(crate) fn ring(&self) -> hw::Ring {
        self.ring
    }

    /// Bytes per slot.
    pub(crate) fn stride(&self) -> usize {
        self.stride
    }

    /// The ring as the device's commands name it.
    pub(crate) fn desc(&self) -> hw::BufDesc {
        hw::BufDesc {
            addr: self.buf.dma_address(),
            page_count: 0,
            log_page_size: 0,
            rsvd: [0; 3],
        }
    }

    fn offset(&self, index: u16) -> Result<usize> {
        Ok(usize::try_from(self.ring.slot(index))? * self.stride)
    }

    /// Writes `bytes` (at most a slot) at the start of the slot of `index`.
    pub(crate) fn write(&self, index: u16, bytes: &[u8]) -> Result {
        if bytes.len() > self.stride {
            return Err(EINVAL);
        }
        let off = self.offset(index)?;
        io_project!(&self.buf, [try: off..off + bytes.len()]).copy_from_slice(bytes);
        Ok(())
    }

    /// Reads the entry of `index` into `out` if the device has written it: its owner byte, at
    /// `owner_offset`, says so for this pass over the ring.
    pub(crate) fn read_owned(
        &self,
        index: u16,
        owner_offset: usize,
        out: &mut [u8],
    ) -> Result<bool> {
        let off = self.offset(index)?;
        let owner: u8 = io_read!(&self.buf, [try: off + owner_offset]);
        if !self.ring.entry_valid(index, owner) {
            return Ok(false);
        }
        // The device writes the body before the owner byte: read it only after the owner.
        dma_mb(Read);
        io_project!(&self.buf, [try: off..off + out.len()]).copy_to_slice(out);
        Ok(true)
    }
}

/// What was posted in each slot of a kernel work queue, with the index it was posted at: the
/// device's CQEs are checked against it ([`hw::Posted::check`]) and must name a slot that holds
/// a WQE of theirs.
pub(crate) struct WrTable {
    ring: hw::Ring,
    slots: KVVec<Option<(u16, hw::Posted)>>,
}

impl WrTable {
    /// A table for the slots of `ring`.
    pub(crate) fn new(ring: hw::Ring) -> Result<Self> {
        let slots = KVVec::from_elem(None, usize::try_from(ring.size())?, GFP_KERNEL)?;
        Ok(Self { ring, slots })
    }

    /// An empty table (a QP whose receives come from an SRQ).
    pub(crate) fn none() -> Result<Self> {
        Ok(Self {
            ring: hw::Ring::new(0, 0).ok_or(EINVAL)?,
            slots: KVVec::new(),
        })
    }

    fn slot(&self, index: u16) -> usize {
        self.ring.slot(index) as usize
    }

    /// Notes that `posted` went into the slot of `index`.
    pub(crate) fn set(&mut self, index: u16, posted: hw::Posted) {
        let slot = self.slot(index);
        if let Some(entry) = self.slots.get_mut(slot) {
            *entry = Some((index, posted));
        }
    }

    /// Whether the slot of `index` is free (nothing posted there is waiting for its CQE).
    pub(crate) fn is_free(&self, index: u16) -> bool {
        matches!(self.slots.get(self.slot(index)), Some(None))
    }

    /// What was posted at `index`, if its slot still holds it.
    pub(crate) fn get(&self, index: u16) -> Option<hw::Posted> {
        match self.slots.get(self.slot(index)) {
            Some(Some((at, posted))) if *at == index => Some(*posted),
            _ => None,
        }
    }

    /// The first signaled WR posted at `from..to` (wrapping), with its index: the device
    /// completes a queue in order, so a CQE for the WQE at `to` that went past it means its
    /// own CQE never came (the device lost it, or wrote one the driver refused).
    pub(crate) fn first_lost(&self, from: u16, to: u16) -> Option<(u16, hw::Posted)> {
        let mut index = from;
        while index != to {
            if let Some(posted) = self.get(index).filter(|posted| posted.signaled) {
                return Some((index, posted));
            }
            index = index.wrapping_add(1);
        }
        None
    }

    /// Takes what was posted at `index` out of its slot, freeing it.
    pub(crate) fn take(&mut self, index: u16) -> Option<hw::Posted> {
        let posted = self.get(index)?;
        let slot = self.slot(index);
        if let Some(entry) = self.slots.get_mut(slot) {
            *entry = None;
        }
        Some(posted)
    }
}

/// An 8-byte doorbell record on its own 64-byte line.
pub(crate) struct DbRecord {
    buf: Coherent<[u8]>,
}

impl DbRecord {
    /// A zeroed record.
    pub(crate) fn new(dev: &device::Device<Bound>) -> Result<Self> {
        Ok(Self {
            buf: Coherent::<u8>::zeroed_slice(dev, 64, GFP_KERNEL)?,
        })
    }

    /// The record's DMA address.
    pub(crate) fn dma_address(&self) -> u64 {
        self.buf.dma_address()
    }

    /// Writes the 32-bit word at `offset` (0 or 4).
    pub(crate) fn write(&self, offset: usize, value: u32) -> Result {
        io_project!(&self.buf, [try: offset..offset + 4]).copy_from_slice(&value.to_le_bytes());
        Ok(())
    }
}

/// A page list of u64 page addresses (fast-registration MRs).
pub(crate) struct PageList {
    buf: Coherent<[u8]>,
    capacity: u32,
}

impl PageList {
    /// Room for `capacity` pages.
    pub(crate) fn new(dev: &device::Device<Bound>, capacity: u32) -> Result<Self> {
        let len = usize::try_from(capacity.max(1))? * 8;
        Ok(Self {
            buf: Coherent::<u8>::zeroed_slice(dev, len, GFP_KERNEL)?,
            capacity,
        })
    }

    /// The list's DMA address.
    pub(crate) fn dma_address(&self) -> u64 {
        self.buf.dma_address()
    }

    /// Sets entry `index`.
    pub(crate) fn set(&self, index: u32, addr: u64) -> Result {
        if index >= self.capacity {
            return Err(ENOMEM);
        }
        let off = usize::try_from(index)? * 8;
        io_project!(&self.buf, [try: off..off + 8]).copy_from_slice(&addr.to_le_bytes());
        Ok(())
    }
}

/// A buffer the device writes a command's output into (`CMD_QUERY_QP`).
pub(crate) struct OutBuf {
    buf: Coherent<[u8]>,
}

impl OutBuf {
    /// A zeroed buffer of `len` bytes.
    pub(crate) fn new(dev: &device::Device<Bound>, len: usize) -> Result<Self> {
        Ok(Self {
            buf: Coherent::<u8>::zeroed_slice(dev, len, GFP_KERNEL)?,
        })
    }

    /// The buffer's DMA address.
    pub(crate) fn dma_address(&self) -> u64 {
        self.buf.dma_address()
    }

    /// Copies the first `out.len()` bytes out.
    pub(crate) fn read(&self, out: &mut [u8]) -> Result {
        io_project!(&self.buf, [try: 0..out.len()]).copy_to_slice(out);
        Ok(())
    }
}

/// Pages of user queue memory, as the device is told about them.
const USER_PAGE_SIZE: usize = 1 << USER_LOG_PAGE_SIZE;
const USER_LOG_PAGE_SIZE: u32 = 12;

/// Queue memory of a process (the ABI's `buf_addr`/`buf_size`): a page-aligned buffer pinned
/// for the device, holding rings the process writes or reads and a doorbell record. The device
/// reaches each ring through a page list and the record by its bus address.
pub(crate) struct UserQueueMem {
    umem: Umem,
    /// Bus addresses of the buffer's pages.
    pages: KVec<u64>,
    /// Byte ranges taken by rings so far (a record must not overlap them).
    rings: KVec<(usize, usize)>,
    /// The page lists handed to the device, kept as long as the queue exists.
    lists: KVec<PageList>,
}

/// A process's buffer holding one ring at offset 0 and its doorbell record (a CQ's or an
/// SRQ's), pinned and checked: the memory, the ring as the device names it, the record's bus
/// address.
pub(crate) struct OneRing {
    pub(crate) mem: UserQueueMem,
    pub(crate) ring: hw::BufDesc,
    pub(crate) dbrec_addr: u64,
}

impl OneRing {
    /// Pins `size` bytes at `addr` with a ring of `1 << log_size` entries of `1 << log_stride`
    /// bytes at 0 and the record at `dbrec_offset` (the `ferroce_create_cq_req` layout, which
    /// SRQs and resizes share).
    pub(crate) fn pin(
        dev: &rdma::Device<RoceDevice>,
        addr: u64,
        size: u32,
        log_size: u32,
        log_stride: u32,
        dbrec_offset: u32,
    ) -> Result<Self> {
        let mut mem = UserQueueMem::pin(dev, addr, size)?;
        let ring = mem.ring(dev, 0, log_size, log_stride)?;
        let dbrec_addr = mem.record(dbrec_offset)?;
        Ok(Self {
            mem,
            ring,
            dbrec_addr,
        })
    }
}

impl UserQueueMem {
    /// Pins `size` bytes at `addr` (both page-aligned, as the ABI requires).
    pub(crate) fn pin(dev: &rdma::Device<RoceDevice>, addr: u64, size: u32) -> Result<Self> {
        let size = usize::try_from(size)?;
        if size == 0 || size % USER_PAGE_SIZE != 0 || addr % USER_PAGE_SIZE as u64 != 0 {
            return Err(EINVAL);
        }
        let umem = Umem::get(dev, addr, size, AccessFlag::LocalWrite.into())?;
        let mut pages = KVec::with_capacity(size / USER_PAGE_SIZE, GFP_KERNEL)?;
        for page in umem.dma_blocks(USER_PAGE_SIZE)? {
            pages.push(page, GFP_KERNEL)?;
        }
        if pages.len() != size / USER_PAGE_SIZE {
            return Err(EIO);
        }
        Ok(Self {
            umem,
            pages,
            rings: KVec::new(),
            lists: KVec::new(),
        })
    }

    /// Bytes pinned.
    pub(crate) fn len(&self) -> usize {
        self.umem.len()
    }

    /// The descriptor of a ring of `1 << log_size` slots of `1 << log_stride` bytes at
    /// `offset` (page-aligned): a page list of the pages it spans.
    pub(crate) fn ring(
        &mut self,
        dev: &rdma::Device<RoceDevice>,
        offset: u32,
        log_size: u32,
        log_stride: u32,
    ) -> Result<hw::BufDesc> {
        let offset = usize::try_from(offset)?;
        let ring = hw::Ring::new(log_size, hw::MAX_LOG_QUEUE).ok_or(EINVAL)?;
        let bytes = usize::try_from(ring.size())?
            .checked_shl(log_stride)
            .ok_or(EINVAL)?;
        let end = offset.checked_add(bytes).ok_or(EINVAL)?;
        if offset % USER_PAGE_SIZE != 0 || end > self.len() {
            return Err(EINVAL);
        }
        if self.rings.iter().any(|&(s, e)| offset < e && s < end) {
            return Err(EINVAL);
        }
        let first = offset / USER_PAGE_SIZE;
        let count = end.div_ceil(USER_PAGE_SIZE) - first;
        let list = PageList::new(dev.parent(), u32::try_from(count)?)?;
        for (i, page) in self.pages[first..first + count].iter().enumerate() {
            list.set(u32::try_from(i)?, *page)?;
        }
        let desc = hw::BufDesc {
            addr: list.dma_address(),
            page_count: u32::try_from(count)?,
            log_page_size: USER_LOG_PAGE_SIZE as u8,
            rsvd: [0; 3],
        };
        self.rings.push((offset, end), GFP_KERNEL)?;
        self.lists.push(list, GFP_KERNEL)?;
        Ok(desc)
    }

    /// The bus address of the 8-byte doorbell record at `offset`: 64-byte aligned (its own
    /// cache line), inside the buffer and outside every ring.
    pub(crate) fn record(&self, offset: u32) -> Result<u64> {
        let offset = usize::try_from(offset)?;
        let end = offset.checked_add(64).ok_or(EINVAL)?;
        if offset % 64 != 0 || end > self.len() {
            return Err(EINVAL);
        }
        if self.rings.iter().any(|&(s, e)| offset < e && s < end) {
            return Err(EINVAL);
        }
        let page = self.pages.get(offset / USER_PAGE_SIZE).ok_or(EINVAL)?;
        Ok(page + (offset % USER_PAGE_SIZE) as u64)
    }
}

/// A queue in a process's memory (a CQ, QP or SRQ): the pinned buffer and the local QID the
/// process's doorbells name it by. The QID goes back to the context when this is dropped, which
/// is after the queue's destroy.
pub(crate) struct UserQueue {
    /// The pinned buffer; the lock serialises moving the queue to a new one.
    mem: Pin<KBox<Mutex<UserQueueMem>>>,
    qid: Qid,
}

impl UserQueue {
    /// Maps queue `number` of `kind` (`hw::QID_KIND_*`), just created in the device on `mem`,
    /// into the process's context; if that fails, `undo` destroys the queue in the device.
    pub(crate) fn map(
        dev: &rdma::Device<RoceDevice>,
        ctx: &UcontextData,
        kind: u8,
        number: u32,
        mem: UserQueueMem,
        undo: impl FnOnce(),
    ) -> Result<Self> {
        let mem = match KBox::pin_init(new_mutex!(mem, "ferroce::user_queue"), GFP_KERNEL) {
            Ok(mem) => mem,
            Err(e) => {
                undo();
                return Err(e);
            }
        };
        match ctx.map_qid(dev, kind, number) {
            Ok(qid) => Ok(Self { mem, qid }),
            Err(e) => {
                undo();
                Err(e)
            }
        }
    }

    /// Moves the queue to `mem` (the process's new buffer, pinned): `tell_device` moves it in
    /// the device and, if the device took it, the old buffer is unpinned, as the device no
    /// longer uses it. Moves of one queue are serialised.
    pub(crate) fn move_to(
        &self,
        mem: UserQueueMem,
        tell_device: impl FnOnce() -> Result,
    ) -> Result {
        let mut held = self.mem.lock();
        tell_device()?;
        let _old = core::mem::replace(&mut *held, mem);
        Ok(())
    }

    /// The number the process's doorbells carry for the queue.
    pub(crate) fn qid(&self) -> u16 {
        self.qid.local()
    }
}
