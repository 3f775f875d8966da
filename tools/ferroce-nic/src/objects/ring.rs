// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Where a ring or an MR lives in guest memory: its page list, resolved once.

use ferroce_hw::*;

use super::{CmdError, MAX_RING_PAGES};
use crate::memory::{DmaError, GuestMemory};

/// Where a buffer (ring or MR) lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BufferMap {
    /// Physically contiguous.
    Contiguous {
        /// Guest address of byte 0.
        base: u64,
    },
    /// A page list.
    Pages {
        /// Page addresses.
        pages: Vec<u64>,
        /// log2 of the page size.
        log_page_size: u32,
    },
}

impl BufferMap {
    /// Resolves `desc` for a buffer of `len` bytes, reading a page list of at most `max_pages`
    /// entries from guest memory. `align` is the alignment contiguous buffers need.
    pub fn resolve(
        mem: &dyn GuestMemory,
        desc: &BufDesc,
        len: u64,
        align: u64,
        max_pages: u32,
    ) -> Result<Self, CmdError> {
        if desc.rsvd != [0; 3] {
            return Err(CmdError::new(STATUS_BAD_PARAM));
        }
        if desc.page_count == 0 {
            if desc.addr % align != 0 || desc.addr.checked_add(len).is_none() {
                return Err(CmdError::new(STATUS_BAD_PARAM));
            }
            return Ok(BufferMap::Contiguous { base: desc.addr });
        }
        let log = desc.log_page_size as u32;
        if !(MIN_LOG_PAGE_SIZE..=MAX_LOG_PAGE_SIZE).contains(&log) || desc.page_count > max_pages {
            return Err(CmdError::new(STATUS_BAD_PARAM));
        }
        let page_size = 1u64 << log;
        let needed = len.div_ceil(page_size);
        if (desc.page_count as u64) < needed {
            return Err(CmdError::new(STATUS_BAD_SIZE));
        }
        // Bounded by `max_pages`: at most 2 MiB for the largest MR page list.
        let mut raw = vec![0u8; desc.page_count as usize * 8];
        mem.read(desc.addr, &mut raw)
            .map_err(|_| CmdError::new(STATUS_DMA_ERROR))?;
        let pages: Vec<u64> = raw.chunks_exact(8).map(|c| read_u64(c, 0)).collect();
        if pages
            .iter()
            .any(|&p| p % page_size != 0 || p.checked_add(page_size).is_none())
        {
            return Err(CmdError::new(STATUS_BAD_PARAM));
        }
        Ok(BufferMap::Pages {
            pages,
            log_page_size: log,
        })
    }

    /// Page-list entries held (0 for contiguous buffers).
    pub fn page_entries(&self) -> u64 {
        match self {
            BufferMap::Contiguous { .. } => 0,
            BufferMap::Pages { pages, .. } => pages.len() as u64,
        }
    }

    /// Guest address of byte `offset`, and how many bytes are contiguous from there.
    pub fn translate(&self, offset: u64) -> Option<(u64, u64)> {
        match self {
            BufferMap::Contiguous { base } => Some((base.checked_add(offset)?, u64::MAX - offset)),
            BufferMap::Pages {
                pages,
                log_page_size,
            } => {
                let page = pages.get(usize::try_from(offset >> log_page_size).ok()?)?;
                let within = offset & ((1u64 << log_page_size) - 1);
                Some((page + within, (1u64 << log_page_size) - within))
            }
        }
    }

    /// Reads `buf.len()` bytes at buffer offset `offset`, across pages.
    pub fn read(&self, mem: &dyn GuestMemory, offset: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        let mut done = 0usize;
        while done < buf.len() {
            let at = offset + done as u64;
            let (addr, run) = self
                .translate(at)
                .ok_or(DmaError::Unmapped { addr: at, len: 0 })?;
            let chunk = ((buf.len() - done) as u64).min(run) as usize;
            mem.read(addr, &mut buf[done..done + chunk])?;
            done += chunk;
        }
        Ok(())
    }

    /// Writes `data` at buffer offset `offset`, across pages.
    pub fn write(&self, mem: &dyn GuestMemory, offset: u64, data: &[u8]) -> Result<(), DmaError> {
        let mut done = 0usize;
        while done < data.len() {
            let at = offset + done as u64;
            let (addr, run) = self
                .translate(at)
                .ok_or(DmaError::Unmapped { addr: at, len: 0 })?;
            let chunk = ((data.len() - done) as u64).min(run) as usize;
            mem.write(addr, &data[done..done + chunk])?;
            done += chunk;
        }
        Ok(())
    }
}

/// A ring in guest memory: geometry, entry size and location.
#[derive(Clone, Debug)]
pub struct RingBuffer {
    /// Geometry.
    pub ring: Ring,
    /// Entry size (stride).
    pub stride: u32,
    /// Location.
    pub map: BufferMap,
}

impl RingBuffer {
    /// Resolves a ring of `1 << log_size` entries of `stride` bytes.
    pub fn resolve(
        mem: &dyn GuestMemory,
        desc: &BufDesc,
        log_size: u32,
        stride: u32,
    ) -> Result<Self, CmdError> {
        let ring = Ring::new(log_size, MAX_LOG_QUEUE).ok_or(CmdError::new(STATUS_BAD_SIZE))?;
        let len = u64::from(ring.size()) * u64::from(stride);
        let map = BufferMap::resolve(mem, desc, len, u64::from(stride).min(64), MAX_RING_PAGES)?;
        if let BufferMap::Pages { log_page_size, .. } = &map {
            // Entries never straddle pages: strides are powers of two no larger than a page.
            if u64::from(stride) > 1u64 << log_page_size {
                return Err(CmdError::new(STATUS_BAD_PARAM));
            }
        }
        Ok(Self { ring, stride, map })
    }

    /// Byte offset of the entry at free-running index `index`.
    pub fn offset(&self, index: u16) -> u64 {
        u64::from(self.ring.slot(index)) * u64::from(self.stride)
    }

    /// Writes `entry` (EQE, CQE) at free-running index `index` for a consumer that polls its
    /// owner byte: the bytes before `owner_offset` first, then, after a release fence, the
    /// rest, so that the consumer never sees a half-written entry as its own.
    pub fn publish(
        &self,
        mem: &dyn GuestMemory,
        index: u16,
        entry: &[u8],
        owner_offset: usize,
    ) -> Result<(), DmaError> {
        let offset = self.offset(index);
        self.map.write(mem, offset, &entry[..owner_offset])?;
        std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
        self.map
            .write(mem, offset + owner_offset as u64, &entry[owner_offset..])
    }
}
