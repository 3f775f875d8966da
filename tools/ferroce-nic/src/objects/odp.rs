// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! On-demand paging MRs' page tables (`MR_FLAG_ON_DEMAND`): which pages an access lacks, and
//! the guest pieces of one whose pages are all there.

use std::collections::BTreeMap;

use ferroce_hw::*;

use super::{MrError, Pieces};

/// Whether an access of kind `access` (`ACCESS_*`; 0 is a local read) writes memory.
pub fn access_writes(access: u32) -> bool {
    access & (ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_ATOMIC) != 0
}

/// An on-demand MR's page table (`MR_FLAG_ON_DEMAND`): entries are a page's address and its
/// `ODP_PAGE_*` bits, zero while not present. Only the entries that are not zero are held, and
/// only they count against the function's page-list budget: an on-demand MR over address space
/// the process has no memory in (a `PROT_NONE` reservation) costs nothing until pages come.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OdpPages {
    /// The entries that are not zero, by page index.
    present: BTreeMap<u32, u64>,
    /// Pages in the table, from the page holding the MR's first byte.
    count: u32,
    /// log2 of the page size.
    pub log_page_size: u32,
}

impl OdpPages {
    /// A table of `count` pages of `1 << log_page_size` bytes, none present.
    pub fn new(count: u32, log_page_size: u32) -> Self {
        Self {
            present: BTreeMap::new(),
            count,
            log_page_size,
        }
    }

    /// Pages in the table.
    pub fn len(&self) -> u32 {
        self.count
    }

    /// Whether the table has no pages (never: an MR has at least one).
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Entries that are not zero: what the table holds of the page-list budget.
    pub fn held(&self) -> u64 {
        self.present.len() as u64
    }

    /// Entry `index` (zero if not present or outside the table).
    pub fn entry(&self, index: u32) -> u64 {
        self.present.get(&index).copied().unwrap_or(0)
    }

    /// How many more entries the table would hold with `entries` from page `first` in place.
    pub fn growth(&self, first: u32, entries: &[u64]) -> u64 {
        (first..)
            .zip(entries)
            .filter(|&(i, &e)| e != 0 && !self.present.contains_key(&i))
            .count() as u64
    }

    /// Puts `entries` in place from page `first` (within the table: the caller checked).
    pub fn set(&mut self, first: u32, entries: &[u64]) {
        for (i, &e) in (first..).zip(entries) {
            if e == 0 {
                self.present.remove(&i);
            } else {
                self.present.insert(i, e);
            }
        }
    }

    fn pages_of(&self, offset: u64, len: u64) -> Option<std::ops::Range<u32>> {
        let first = u32::try_from(offset >> self.log_page_size).ok()?;
        let end = offset
            .checked_add(len.max(1))?
            .div_ceil(1 << self.log_page_size);
        let end = u32::try_from(end).ok()?;
        (end <= self.count).then_some(first..end)
    }

    /// The pages a `len`-byte access at table offset `offset` needs and lacks: the first
    /// page not present (or, for an access that writes, not writable) and how many pages from
    /// there to the access's end (at most `PAGE_FAULT_MAX_PAGES`). `None` if all are there.
    pub fn absent(&self, offset: u64, len: u64, write: bool) -> Option<(u32, u32)> {
        let pages = self.pages_of(offset, len)?;
        let need = if write {
            ODP_PAGE_READ | ODP_PAGE_WRITE
        } else {
            ODP_PAGE_READ
        };
        let first = pages
            .clone()
            .find(|&i| self.entry(i) & need != need && self.entry(i) & ODP_PAGE_FAILED == 0)?;
        let count = (pages.end - first).min(PAGE_FAULT_MAX_PAGES);
        Some((first, count))
    }

    /// The guest pieces of a `len`-byte access at table offset `offset`: `NotPresent` if a
    /// page lacks what the access needs, `Access` if the driver could not map one.
    pub fn translate(&self, offset: u64, len: u64, write: bool) -> Result<Pieces, MrError> {
        let pages = self.pages_of(offset, len).ok_or(MrError::Bounds)?;
        if pages.clone().any(|i| self.entry(i) & ODP_PAGE_FAILED != 0) {
            return Err(MrError::Access);
        }
        if self.absent(offset, len, write).is_some() {
            return Err(MrError::NotPresent);
        }
        let page_size = 1u64 << self.log_page_size;
        let mut pieces = Pieces::new();
        let mut done = 0u64;
        while done < len {
            let at = offset + done;
            let entry = self.entry((at >> self.log_page_size) as u32);
            let within = at & (page_size - 1);
            let addr = (entry & !ODP_PAGE_FLAGS) + within;
            let chunk = (len - done).min(page_size - within);
            match pieces.last_mut() {
                Some(last) if last.0 + last.1 == addr => last.1 += chunk,
                _ => pieces.push((addr, chunk)),
            }
            done += chunk;
        }
        Ok(pieces)
    }
}
