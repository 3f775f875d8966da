// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Memory regions and memory windows: what backs them, their rights and the translation of an
//! access into guest pieces.

use ferroce_hw::*;

use smallvec::{smallvec, SmallVec};

use super::{access_writes, BufferMap, MrError, OdpPages};

/// The guest address pieces of an access through an MR: `(address, length)`, in order. A
/// frame's payload spans at most two pages, so a list this short needs no heap.
pub type Pieces = SmallVec<[(u64, u64); 4]>;

/// Where an MR's bytes are.
#[derive(Clone, Debug)]
pub enum MrBacking {
    /// All guest memory, iova = guest address.
    AllMemory,
    /// A buffer.
    Buffer(BufferMap),
    /// A fast-registration MR not registered (yet, or after invalidation).
    Invalid,
    /// An on-demand paging MR: a page table the driver fills when the device faults.
    OnDemand(OdpPages),
}

/// Memory region.
pub struct Mr {
    /// Current key.
    pub key: u32,
    /// PD tag.
    pub pd: u32,
    /// `ACCESS_*`.
    pub access: u32,
    /// First iova.
    pub iova: u64,
    /// Length.
    pub length: u64,
    /// Bytes.
    pub backing: MrBacking,
    /// Fast-registration MR and its page limit.
    pub fast_reg_max_pages: Option<u32>,
    /// A memory window, which has no memory of its own: `iova`, `length` and `access` are
    /// those of its binding, if it has one.
    pub window: Option<Window>,
    /// Windows bound to this MR, which cannot be destroyed meanwhile.
    pub windows: u32,
    /// An on-demand MR's outstanding page fault, until `CMD_UPDATE_MR_PAGES` answers it.
    pub fault: Option<Fault>,
}

/// A page fault raised and not answered yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    /// When it was raised (µs on the device's clock).
    pub at: u64,
    /// The first page it asked for.
    pub first: u32,
    /// How many pages from there.
    pub count: u32,
}

impl Fault {
    /// When (µs on the device's clock) it stops standing: an access that meets its pages from
    /// then on raises it again, in case the driver missed it.
    pub fn repeat_us(&self) -> u64 {
        self.at.saturating_add(PAGE_FAULT_REPEAT_MS * 1000)
    }

    /// Whether it still stands for pages `first .. first + count`: raised less than
    /// `PAGE_FAULT_REPEAT_MS` before `now` and asking for all of them.
    pub fn covers(&self, now: u64, first: u32, count: u32) -> bool {
        now < self.repeat_us()
            && first >= self.first
            && u64::from(first) + u64::from(count) <= u64::from(self.first) + u64::from(self.count)
    }
}

/// A memory window: its type and binding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// `MW_TYPE_1` or `MW_TYPE_2`.
    pub mw_type: u8,
    /// What it is bound to.
    pub bound: Option<Binding>,
}

/// A memory window's binding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Binding {
    /// The MR's key.
    pub mr_key: u32,
    /// Type 2: the QP it is bound to, which alone may use it.
    pub qpn: Option<u32>,
}

/// Whether `access` is a valid set of `ACCESS_*` bits for an MR, by CREATE_MR or by a REG_MR
/// work request: only defined bits, and (IB rule) remote write or atomic only with local write.
pub fn mr_access_valid(access: u32) -> bool {
    access & !ACCESS_VALID_MASK == 0
        && (access & (ACCESS_REMOTE_WRITE | ACCESS_REMOTE_ATOMIC) == 0
            || access & ACCESS_LOCAL_WRITE != 0)
}

impl Mr {
    /// An unbound memory window of `mw_type` in `pd`.
    pub fn window(pd: u32, mw_type: u8) -> Self {
        Self {
            key: 0,
            pd,
            access: 0,
            iova: 0,
            length: 0,
            backing: MrBacking::Invalid,
            fast_reg_max_pages: None,
            window: Some(Window {
                mw_type,
                bound: None,
            }),
            windows: 0,
            fault: None,
        }
    }

    /// Checks the PD, the rights and the range of an access of `len` bytes at `iova`.
    pub fn check(&self, pd: u32, iova: u64, len: u64, access: u32) -> Result<(), MrError> {
        if self.pd != pd {
            return Err(MrError::BadPd);
        }
        if self.access & access != access {
            return Err(MrError::Access);
        }
        let end = iova.checked_add(len).ok_or(MrError::Bounds)?;
        if iova < self.iova || end > self.iova.saturating_add(self.length) {
            return Err(MrError::Bounds);
        }
        Ok(())
    }

    /// An on-demand MR's pages an access of `len` bytes at `iova` lacks (see
    /// [`OdpPages::absent`]); `None` for any other MR.
    pub fn absent(&self, iova: u64, len: u64, write: bool) -> Option<(u32, u32)> {
        let MrBacking::OnDemand(pages) = &self.backing else {
            return None;
        };
        let first_offset = self.iova & ((1u64 << pages.log_page_size) - 1);
        pages.absent(first_offset + iova.checked_sub(self.iova)?, len, write)
    }

    /// Checks an access of `len` bytes at `iova` and returns the guest address pieces. A
    /// memory window has no pieces of its own (see `DeviceCore::translate`).
    pub fn translate(&self, pd: u32, iova: u64, len: u64, access: u32) -> Result<Pieces, MrError> {
        self.check(pd, iova, len, access)?;
        self.pieces(iova, len, access_writes(access))
    }

    /// The guest pieces of `[iova, iova + len)`, checked only against the MR's memory (an
    /// on-demand MR's pages must be present, and writable if the access writes).
    pub fn pieces(&self, iova: u64, len: u64, write: bool) -> Result<Pieces, MrError> {
        match &self.backing {
            MrBacking::OnDemand(pages) => {
                let first_offset = self.iova & ((1u64 << pages.log_page_size) - 1);
                let offset = first_offset + iova.checked_sub(self.iova).ok_or(MrError::Bounds)?;
                pages.translate(offset, len, write)
            }
            MrBacking::AllMemory => Ok(smallvec![(iova, len)]),
            MrBacking::Invalid => Err(MrError::BadKey),
            MrBacking::Buffer(map) => {
                let first_offset = match map {
                    BufferMap::Contiguous { .. } => 0,
                    BufferMap::Pages { log_page_size, .. } => {
                        self.iova & ((1u64 << log_page_size) - 1)
                    }
                };
                let mut pieces = Pieces::new();
                let mut done = 0u64;
                while done < len {
                    let offset = first_offset + (iova - self.iova) + done;
                    let (addr, run) = map.translate(offset).ok_or(MrError::Bounds)?;
                    let chunk = (len - done).min(run);
                    pieces.push((addr, chunk));
                    done += chunk;
                }
                Ok(pieces)
            }
        }
    }
}
