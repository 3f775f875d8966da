// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Memory regions and memory windows: access flags, keys, and the MR and MW commands.

use super::*;

// MR access flags (IB `ib_access_flags` values for the lower bits).
/// Local write.
pub const ACCESS_LOCAL_WRITE: u32 = 1 << 0;
/// Remote write.
pub const ACCESS_REMOTE_WRITE: u32 = 1 << 1;
/// Remote read.
pub const ACCESS_REMOTE_READ: u32 = 1 << 2;
/// Remote atomic.
pub const ACCESS_REMOTE_ATOMIC: u32 = 1 << 3;
/// Memory windows may be bound to the MR.
pub const ACCESS_MW_BIND: u32 = 1 << 4;
/// Remote FLUSH with global visibility placement (`IB_ACCESS_FLUSH_GLOBAL`).
pub const ACCESS_FLUSH_GLOBAL: u32 = 1 << 8;
/// Remote FLUSH with persistence placement (`IB_ACCESS_FLUSH_PERSISTENT`).
pub const ACCESS_FLUSH_PERSISTENT: u32 = 1 << 9;
/// All access bits the device understands.
pub const ACCESS_VALID_MASK: u32 = ACCESS_LOCAL_WRITE
    | ACCESS_REMOTE_WRITE
    | ACCESS_REMOTE_READ
    | ACCESS_REMOTE_ATOMIC
    | ACCESS_MW_BIND
    | ACCESS_FLUSH_GLOBAL
    | ACCESS_FLUSH_PERSISTENT;
/// The rights a memory window can grant (a bind's `access`).
#[cfg(userspace)] // The device checks binds; the provider builds them.
pub const MW_ACCESS_MASK: u32 = ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ | ACCESS_REMOTE_ATOMIC;

/// `CreateMwCmd::mw_type`: a type 1 window, bound by `ibv_bind_mw` and usable from every QP of
/// its PD.
pub const MW_TYPE_1: u8 = 1;
/// `CreateMwCmd::mw_type`: a type 2 window, bound by a BIND_MW work request to the QP that
/// posts it, which alone may use it; invalidated locally or by a SEND with invalidate.
pub const MW_TYPE_2: u8 = 2;

/// `CreateMrCmd::flags`: covers all host memory with iova = host address (`get_dma_mr`).
pub const MR_FLAG_ALL_MEMORY: u8 = 1 << 0;
/// `CreateMrCmd::flags`: fast-registration MR, invalid until a REG_MR work request.
pub const MR_FLAG_FAST_REG: u8 = 1 << 1;
/// `CreateMrCmd::flags`: an on-demand paging MR (capability `ODP`): `pages` gives only the
/// geometry of its page table (`page_count` entries of `1 << log_page_size` bytes, `addr`
/// zero), whose entries start not present. An access that meets a page not present (or not
/// writable) waits and raises `EventType::PageFault`; `CMD_UPDATE_MR_PAGES` fills and
/// invalidates entries.
pub const MR_FLAG_ON_DEMAND: u8 = 1 << 2;
/// `CreateMrCmd::flags`: defined bits.
#[cfg(userspace)] // The device checks commands.
pub const MR_FLAGS_VALID: u8 = MR_FLAG_ALL_MEMORY | MR_FLAG_FAST_REG | MR_FLAG_ON_DEMAND;
/// An on-demand MR's page table entry: the page may be read (it is present).
pub const ODP_PAGE_READ: u64 = 1 << 0;
/// An on-demand MR's page table entry: the page may be written.
pub const ODP_PAGE_WRITE: u64 = 1 << 1;
/// An on-demand MR's page table entry: the driver could not map the page (the process has no
/// memory there): an access fails with a protection error, and does not fault.
pub const ODP_PAGE_FAILED: u64 = 1 << 2;
/// The flag bits of an on-demand page table entry; the rest is the page's address.
#[cfg(userspace)] // The device checks entries.
pub const ODP_PAGE_FLAGS: u64 = ODP_PAGE_READ | ODP_PAGE_WRITE | ODP_PAGE_FAILED;
/// Maximum pages in an MR page list.
pub const MAX_MR_PAGES: u32 = 1 << 18;

/// The key of MR table index `index` with variant byte `variant`.
#[cfg(userspace)] // The device makes keys; the driver only splits them.
pub const fn mr_key(index: u32, variant: u8) -> u32 {
    (index << 8) | variant as u32
}

/// The MR table index of a key.
pub const fn mr_key_index(key: u32) -> u32 {
    key >> 8
}

hw_layout! {
    /// `CMD_CREATE_MR` payload. The region's first byte is at `pages[0] + (iova % page_size)`.
    pub struct CreateMrCmd(48) {
        /// I/O virtual address of the first byte.
        pub iova: u64,
        /// Length in bytes.
        pub length: u64,
        /// Page list (`page_count > 0`) or contiguous buffer; ignored for `MR_FLAG_ALL_MEMORY`
        /// and `MR_FLAG_FAST_REG`.
        pub pages: BufDesc,
        /// Protection domain tag.
        pub pd: u32,
        /// `ACCESS_*`.
        pub access: u32,
        /// `MR_FLAG_*`.
        pub flags: u8,
        /// Low 8 bits of the key (consumer-chosen variant).
        pub key_variant: u8,
        /// Reserved, zero.
        pub rsvd: u16,
        /// For `MR_FLAG_FAST_REG`: maximum pages a REG_MR may map.
        pub max_pages: u32,
    }
}
hw_number_reply! {
    /// Reply of `CMD_CREATE_MR`.
    CreateMrReply { key }
}
hw_command!(CreateMrCmd, CMD_CREATE_MR, CreateMrReply);

hw_layout! {
    /// `CMD_DESTROY_MR` payload.
    pub struct DestroyMrCmd(8) {
        /// MR key.
        pub key: u32,
        /// Reserved, zero.
        pub rsvd: u32,
    }
}
hw_command!(DestroyMrCmd, CMD_DESTROY_MR);

/// `UpdateMrPagesCmd::flags`: clear entries `first .. first + count` (not present): once the
/// command completed, the device reaches none of those pages. `pages` is zero.
pub const UPDATE_PAGES_INVALIDATE: u32 = 1 << 0;
/// `UpdateMrPagesCmd::flags`: defined bits.
#[cfg(userspace)] // The device checks commands.
pub const UPDATE_PAGES_FLAGS_VALID: u32 = UPDATE_PAGES_INVALIDATE;

hw_layout! {
    /// `CMD_UPDATE_MR_PAGES` payload: sets (or, with [`UPDATE_PAGES_INVALIDATE`], clears)
    /// entries `first .. first + count` of on-demand MR `key`'s page table from the `count`
    /// little-endian u64 entries at `pages` (page address | `ODP_PAGE_*`). Answers the MR's page
    /// fault: accesses that waited for those pages go on.
    pub struct UpdateMrPagesCmd(24) {
        /// Host address of the entries (zero to invalidate).
        pub pages: u64,
        /// MR key (by index: the variant byte is not compared).
        pub key: u32,
        /// First entry.
        pub first: u32,
        /// Entries (at most [`MAX_MR_PAGES`]).
        pub count: u32,
        /// `UPDATE_PAGES_*`.
        pub flags: u32,
    }
}
hw_command!(UpdateMrPagesCmd, CMD_UPDATE_MR_PAGES);

hw_layout! {
    /// `CMD_CREATE_MW` payload: a memory window in `pd`, unbound. Its key is in the MR key
    /// space (an R_Key); a bind gives it a new variant byte.
    pub struct CreateMwCmd(8) {
        /// Protection domain tag.
        pub pd: u32,
        /// [`MW_TYPE_1`] or [`MW_TYPE_2`].
        pub mw_type: u8,
        /// Low 8 bits of the key.
        pub key_variant: u8,
        /// Reserved, zero.
        pub rsvd: u16,
    }
}
hw_number_reply! {
    /// Reply of `CMD_CREATE_MW`.
    CreateMwReply { key }
}
hw_command!(CreateMwCmd, CMD_CREATE_MW, CreateMwReply);

hw_layout! {
    /// `CMD_DESTROY_MW` payload (the window is unbound first).
    pub struct DestroyMwCmd(8) {
        /// MW key (by index: the variant byte is not compared).
        pub key: u32,
        /// Reserved, zero.
        pub rsvd: u32,
    }
}
hw_command!(DestroyMwCmd, CMD_DESTROY_MW);
