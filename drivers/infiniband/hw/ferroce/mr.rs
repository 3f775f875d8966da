// SPDX-License-Identifier: GPL-2.0

//! Protection domains, memory regions and memory windows: the DMA MR (all memory by DMA
//! address, ib_core's local DMA key), fast-registration MRs whose page lists the consumer maps
//! with `ib_map_mr_sg()` and registers with an `IB_WR_REG_MR` work request, user MRs: a
//! process's memory, pinned, with a page list the device translates through, and a process's
//! memory windows, which the device binds and invalidates (the driver creates and destroys
//! them; their keys share the MRs' key space).

use kernel::{
    prelude::*,
    rdma::{
        self,
        AccessFlag,
        AccessFlags,
        MrType,
        MwType,
        NewMr,
        NewMw,
        SgPages,
        Umem, //
    },
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        Arc,
    },
};

use crate::{
    hw,
    ids::MrKeys,
    odp::{self, OdpMr},
    queue::PageList,
    verbs::RoceDevice, //
};

/// ib_core's access rights and the device's bits for them (`hw::ACCESS_*`).
const ACCESS_BITS: [(AccessFlag, u32); 7] = [
    (AccessFlag::LocalWrite, hw::ACCESS_LOCAL_WRITE),
    (AccessFlag::RemoteWrite, hw::ACCESS_REMOTE_WRITE),
    (AccessFlag::RemoteRead, hw::ACCESS_REMOTE_READ),
    (AccessFlag::RemoteAtomic, hw::ACCESS_REMOTE_ATOMIC),
    (AccessFlag::MwBind, hw::ACCESS_MW_BIND),
    (AccessFlag::FlushGlobal, hw::ACCESS_FLUSH_GLOBAL),
    (AccessFlag::FlushPersistent, hw::ACCESS_FLUSH_PERSISTENT),
];
const _: () = {
    let mut bits = 0;
    let mut i = 0;
    while i < ACCESS_BITS.len() {
        bits |= ACCESS_BITS[i].1;
        i += 1;
    }
    assert!(bits == hw::ACCESS_VALID_MASK);
};

/// The device's bits (`hw::ACCESS_*`) for ib_core's rights. ib_core refused rights the device
/// does not offer; hints (relaxed ordering) have no bit and mean nothing here.
pub(crate) fn hw_access(access: AccessFlags) -> u32 {
    ACCESS_BITS
        .iter()
        .filter(|(flag, _)| access.contains(*flag))
        .fold(0, |bits, (_, bit)| bits | bit)
}

/// ib_core's rights for the device's bits (`hw::ACCESS_*`); unknown bits are dropped.
pub(crate) fn ib_access(bits: u32) -> AccessFlags {
    ACCESS_BITS
        .iter()
        .filter(|(_, bit)| bits & bit != 0)
        .fold(AccessFlags::empty(), |access, (flag, _)| access | *flag)
}

/// Pages of user MRs are described to the device in 4 KiB units.
const USER_LOG_PAGE_SIZE: u32 = 12;

/// Tries at making an MR whose key is fresh before giving up.
const KEY_TRIES: usize = 4;

/// The device's refusal of a variant whose key every free slot had last (nearly full tables
/// only): an answer to [`fresh_key`]'s request, which asks again, not a failure to log.
const STALE: &[u8] = &[hw::STATUS_STALE_KEY];

/// Makes an object of the MR key space (an MR or a window) with a random key variant, so that
/// its key is not the last one of its slot (a stale rkey must not reach the new object);
/// returns its key. `make` creates the object with a variant and returns its key; `destroy`
/// takes back one whose key is not fresh.
fn fresh_key(
    dev: &rdma::Device<RoceDevice>,
    mut make: impl FnMut(u8) -> Result<u32>,
    destroy: impl Fn(u32) -> Result,
) -> Result<u32> {
    for _ in 0..KEY_TRIES {
        let variant = MrKeys::variant();
        // The device never gives a slot its last key, which only it knows (a window bound or
        // an MR registered since creation changed it): it passes over such a slot, and refuses
        // the variant if every free one is such. Another variant, then.
        let key = match make(variant) {
            Err(e) if e == EAGAIN => continue,
            made => made?,
        };
        let fresh = dev.mr_keys().lock().accept(key, variant);
        if let Ok(true) = fresh {
            return Ok(key);
        }
        // The slot's last key again (or one the device made up): not this one.
        destroy(key)?;
        fresh?;
    }
    Err(EAGAIN)
}

/// Creates the MR of `cmd` with a fresh key ([`fresh_key`]); returns its key.
fn create(dev: &rdma::Device<RoceDevice>, mut cmd: hw::CreateMrCmd) -> Result<u32> {
    fresh_key(
        dev,
        |variant| {
            cmd.key_variant = variant;
            Ok(dev.cmdq().exec_or_refuse(&cmd, STALE)?.key)
        },
        |key| dev.cmdq().exec_destroy(&hw::DestroyMrCmd { key, rsvd: 0 }),
    )
}

/// The driver's part of a PD: its number, which QPs, MRs and AHs carry.
pub(crate) struct PdData {
    pdn: u32,
}

impl PdData {
    /// A PD numbered `pdn`.
    pub(crate) fn new(pdn: u32) -> Self {
        Self { pdn }
    }

    /// The PD number.
    pub(crate) fn number(&self) -> u32 {
        self.pdn
    }
}

/// The driver's part of an MR.
pub(crate) struct MrData {
    key: u32,
    /// Page list of a fast-registration MR, and how many entries the last mapping set.
    pages: Option<PageList>,
    mapped: Atomic<u32>,
    /// A user MR's pinned memory and the page list the device was given: held until the MR
    /// is destroyed.
    _user: Option<(Umem, PageList)>,
    /// An on-demand MR's memory and page table.
    odp: Option<Arc<OdpMr>>,
}

impl MrData {
    fn new_mr(key: u32, pages: Option<PageList>, user: Option<(Umem, PageList)>) -> NewMr<Self> {
        NewMr {
            lkey: key,
            rkey: key,
            data: Self {
                key,
                pages,
                mapped: Atomic::new(0),
                _user: user,
                odp: None,
            },
        }
    }

    /// An MR over all memory, addressed by DMA address.
    pub(crate) fn dma(
        dev: &rdma::Device<RoceDevice>,
        pd: &rdma::Pd<RoceDevice>,
        access: AccessFlags,
    ) -> Result<NewMr<Self>> {
        let key = create(
            dev,
            hw::CreateMrCmd {
                pd: pd.number(),
                access: hw_access(access),
                flags: hw::MR_FLAG_ALL_MEMORY,
                ..Default::default()
            },
        )?;
        Ok(Self::new_mr(key, None, None))
    }

    /// A fast-registration MR for up to `max_pages` pages.
    pub(crate) fn fast_reg(
        dev: &rdma::Device<RoceDevice>,
        pd: &rdma::Pd<RoceDevice>,
        kind: MrType,
        max_pages: u32,
    ) -> Result<NewMr<Self>> {
        if kind != MrType::MemReg {
            return Err(EOPNOTSUPP);
        }
        if max_pages == 0 || max_pages > dev.max_mr_pages() {
            return Err(EINVAL);
        }
        let pages = PageList::new(dev.parent(), max_pages)?;
        let key = create(
            dev,
            hw::CreateMrCmd {
                pd: pd.number(),
                flags: hw::MR_FLAG_FAST_REG,
                max_pages,
                ..Default::default()
            },
        )?;
        Ok(Self::new_mr(key, Some(pages), None))
    }

    /// An MR over `length` bytes of the calling process at `start`, addressed from `iova`
    /// (`ibv_reg_mr()`): the memory is pinned and the device gets its 4 KiB pages.
    pub(crate) fn user(
        dev: &rdma::Device<RoceDevice>,
        pd: &rdma::Pd<RoceDevice>,
        start: u64,
        length: u64,
        iova: u64,
        access: AccessFlags,
    ) -> Result<NewMr<Self>> {
        const PAGE_SIZE: usize = 1 << USER_LOG_PAGE_SIZE;
        // The device finds an address's page from the iova's offset in the first page.
        if length == 0 || start % PAGE_SIZE as u64 != iova % PAGE_SIZE as u64 {
            return Err(EINVAL);
        }
        iova.checked_add(length).ok_or(EINVAL)?;
        if odp::on_demand(access) {
            return Self::on_demand(dev, pd, start, length, iova, access);
        }
        let umem = Umem::get(dev, start, usize::try_from(length)?, access)?;
        let count = u32::try_from(umem.num_blocks(PAGE_SIZE))?;
        if count > dev.max_mr_pages() {
            return Err(EINVAL);
        }
        let pages = PageList::new(dev.parent(), count)?;
        let mut filled = 0;
        for addr in umem.dma_blocks(PAGE_SIZE)? {
            pages.set(filled, addr)?;
            filled += 1;
        }
        if filled != count {
            return Err(EIO);
        }
        let key = create(
            dev,
            hw::CreateMrCmd {
                iova,
                length,
                pages: hw::BufDesc {
                    addr: pages.dma_address(),
                    page_count: count,
                    log_page_size: USER_LOG_PAGE_SIZE as u8,
                    rsvd: [0; 3],
                },
                pd: pd.number(),
                access: hw_access(access),
                ..Default::default()
            },
        )?;
        Ok(Self::new_mr(key, None, Some((umem, pages))))
    }

    /// An on-demand MR over `length` bytes of the calling process at `start`, addressed from
    /// `iova`: nothing is pinned, the device faults pages in as it needs them ([`odp`]). An
    /// implicit one (all of the address space) is not offered, nor one of huge pages
    /// (`IBV_ACCESS_HUGETLB`, `EOPNOTSUPP`): ib_core fills the pfn list of a fault in 4 KiB
    /// entries, and the device's table of such an MR would be indexed in huge pages.
    fn on_demand(
        dev: &rdma::Device<RoceDevice>,
        pd: &rdma::Pd<RoceDevice>,
        start: u64,
        length: u64,
        iova: u64,
        access: AccessFlags,
    ) -> Result<NewMr<Self>> {
        if access.contains(AccessFlag::HugeTlb) {
            return Err(EOPNOTSUPP);
        }
        let mr = OdpMr::new(dev, pd.number(), start, length, access, |pages| {
            // The device finds an address's page from the iova's offset in the first page, of
            // the umem's page size (huge pages for `IBV_ACCESS_HUGETLB`).
            let mask = (1u64 << pages.log_page_size) - 1;
            if (start ^ iova) & mask != 0 {
                return Err(EINVAL);
            }
            create(
                dev,
                hw::CreateMrCmd {
                    iova,
                    length,
                    pages,
                    pd: pd.number(),
                    access: hw_access(access),
                    flags: hw::MR_FLAG_ON_DEMAND,
                    ..Default::default()
                },
            )
        })?;
        let key = mr.key();
        let mut new = Self::new_mr(key, None, None);
        new.data.odp = Some(mr);
        Ok(new)
    }

    /// Destroys the MR in the device. An on-demand MR is forgotten once it is (its notifier
    /// clears the device's entries until then); its memory goes when the last page fault being
    /// served lets go of it.
    pub(crate) fn destroy(&self, dev: &rdma::Device<RoceDevice>) -> Result {
        let destroy = || {
            dev.cmdq().exec_destroy(&hw::DestroyMrCmd {
                key: self.key,
                rsvd: 0,
            })
        };
        match &self.odp {
            Some(odp) => odp.destroy(dev, destroy),
            None => destroy(),
        }
    }

    /// Maps a scatter/gather list into the page list.
    pub(crate) fn map_sg(&self, sg: &mut SgPages<'_, RoceDevice>) -> Result<u32> {
        let pages = self.pages.as_ref().ok_or(EINVAL)?;
        let mut count = 0u32;
        let mapped = sg.to_pages(|addr| {
            pages.set(count, addr)?;
            count += 1;
            Ok(())
        });
        self.mapped.store(count, Relaxed);
        mapped
    }
}

impl MrData {
    /// The REG_MR segment registering the current mapping of `mr` under `key`.
    pub(crate) fn reg_segment(
        mr: &rdma::Mr<RoceDevice>,
        key: u32,
        access: AccessFlags,
    ) -> Result<hw::RegMrSeg> {
        let pages = mr.pages.as_ref().ok_or(EINVAL)?;
        let page_size = mr.page_size();
        if !page_size.is_power_of_two() {
            return Err(EINVAL);
        }
        // The key keeps the MR's index; only its variant byte may change.
        if hw::mr_key_index(key) != hw::mr_key_index(mr.key) {
            return Err(EINVAL);
        }
        Ok(hw::RegMrSeg {
            iova: mr.iova(),
            length: mr.length(),
            pbl_addr: pages.dma_address(),
            key,
            access: hw_access(access),
            page_count: mr.mapped.load(Relaxed),
            log_page_size: page_size.trailing_zeros() as u8,
            rsvd: [0; 3],
        })
    }
}

/// The driver's part of a memory window: its key (by index; binds change the variant byte).
pub(crate) struct MwData {
    key: u32,
}

impl MwData {
    /// An unbound window of `mw_type` in `pd`, with a fresh key ([`fresh_key`]).
    pub(crate) fn new(pd: &rdma::Pd<RoceDevice>, mw_type: MwType) -> Result<NewMw<Self>> {
        let dev = pd.device();
        if dev.caps_flags() & hw::CAP_MW == 0 {
            return Err(EOPNOTSUPP);
        }
        let mut cmd = hw::CreateMwCmd {
            pd: pd.number(),
            mw_type: match mw_type {
                MwType::Type1 => hw::MW_TYPE_1,
                MwType::Type2 => hw::MW_TYPE_2,
            },
            ..Default::default()
        };
        let key = fresh_key(
            dev,
            |variant| {
                cmd.key_variant = variant;
                Ok(dev.cmdq().exec_or_refuse(&cmd, STALE)?.key)
            },
            |key| Self { key }.destroy(dev),
        )?;
        Ok(NewMw {
            rkey: key,
            data: Self { key },
        })
    }

    /// Destroys the window in the device (unbinding it first).
    pub(crate) fn destroy(&self, dev: &rdma::Device<RoceDevice>) -> Result {
        dev.cmdq().exec_destroy(&hw::DestroyMwCmd {
            key: self.key,
            rsvd: 0,
        })
    }
}
