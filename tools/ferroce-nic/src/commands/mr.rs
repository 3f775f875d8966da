// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The commands of memory regions and windows: registration (pinned, fast-registration or on
//! demand), deregistration, page updates of an on-demand MR, and windows.

use core::mem::offset_of;

use ferroce_hw::*;

use super::reserved_zero;
use crate::device::Device;
use crate::objects::{field_error, mr_access_valid, BufferMap, CmdError, Mr, MrBacking, OdpPages};

/// The page table of an on-demand MR (`MR_FLAG_ON_DEMAND`): `pages` gives its geometry only
/// (no address), enough entries for the region from the iova's offset in its first page.
fn on_demand_pages(cmd: &CreateMrCmd) -> Result<OdpPages, CmdError> {
    let desc = &cmd.pages;
    let log = u32::from(desc.log_page_size);
    if desc.addr != 0 || desc.rsvd != [0; 3] {
        return Err(field_error!(STATUS_BAD_PARAM, CreateMrCmd, pages));
    }
    if !(MIN_LOG_PAGE_SIZE..=MAX_LOG_PAGE_SIZE).contains(&log)
        || desc.page_count == 0
        || desc.page_count > MAX_MR_PAGES
    {
        return Err(field_error!(
            STATUS_BAD_PARAM,
            CreateMrCmd,
            pages.page_count
        ));
    }
    if cmd.length == 0 || cmd.iova.checked_add(cmd.length).is_none() {
        return Err(field_error!(STATUS_BAD_PARAM, CreateMrCmd, length));
    }
    let span = cmd.length + (cmd.iova & ((1u64 << log) - 1));
    if u64::from(desc.page_count) < span.div_ceil(1 << log) {
        return Err(field_error!(STATUS_BAD_SIZE, CreateMrCmd, pages.page_count));
    }
    Ok(OdpPages::new(desc.page_count, log))
}

impl Device {
    pub(super) fn create_mr(&mut self, cmd: &CreateMrCmd) -> Result<CreateMrReply, CmdError> {
        // At most one kind: all memory, fast registration or on demand.
        if cmd.flags & !MR_FLAGS_VALID != 0 || cmd.flags.count_ones() > 1 {
            return Err(field_error!(STATUS_BAD_PARAM, CreateMrCmd, flags));
        }
        if cmd.flags & MR_FLAG_ON_DEMAND != 0 && !self.core.config().odp {
            return Err(field_error!(STATUS_BAD_PARAM, CreateMrCmd, flags));
        }
        if !mr_access_valid(cmd.access) {
            return Err(field_error!(STATUS_BAD_PARAM, CreateMrCmd, access));
        }
        reserved_zero(cmd.rsvd.into(), offset_of!(CreateMrCmd, rsvd))?;
        // An on-demand MR's pages count as they come (UPDATE_MR_PAGES).
        let reserve = if cmd.flags & MR_FLAG_FAST_REG != 0 {
            cmd.max_pages
        } else if cmd.flags & MR_FLAG_ON_DEMAND != 0 {
            0
        } else {
            cmd.pages.page_count
        };
        self.core
            .objects()
            .check_translation_budget(u64::from(reserve))?;
        let (backing, iova, length, fast_reg) = if cmd.flags & MR_FLAG_ALL_MEMORY != 0 {
            (MrBacking::AllMemory, 0, u64::MAX, None)
        } else if cmd.flags & MR_FLAG_FAST_REG != 0 {
            if cmd.max_pages == 0 || cmd.max_pages > MAX_MR_PAGES {
                return Err(field_error!(STATUS_BAD_PARAM, CreateMrCmd, max_pages));
            }
            (MrBacking::Invalid, 0, 0, Some(cmd.max_pages))
        } else if cmd.flags & MR_FLAG_ON_DEMAND != 0 {
            (
                MrBacking::OnDemand(on_demand_pages(cmd)?),
                cmd.iova,
                cmd.length,
                None,
            )
        } else {
            if cmd.iova.checked_add(cmd.length).is_none() {
                return Err(field_error!(STATUS_BAD_PARAM, CreateMrCmd, length));
            }
            let mut span = cmd.length;
            if cmd.pages.page_count > 0 {
                // The region starts inside the first page at the iova's page offset.
                let log = u32::from(cmd.pages.log_page_size).min(MAX_LOG_PAGE_SIZE);
                span = span.saturating_add(cmd.iova & ((1u64 << log) - 1));
            }
            let map = BufferMap::resolve(self.core.bus().mem(), &cmd.pages, span, 1, MAX_MR_PAGES)?;
            (MrBacking::Buffer(map), cmd.iova, cmd.length, None)
        };
        let mr = Mr {
            key: 0,
            pd: cmd.pd,
            access: cmd.access,
            iova,
            length,
            backing,
            fast_reg_max_pages: fast_reg,
            window: None,
            windows: 0,
            fault: None,
        };
        let key = self.core.objects_mut().insert_mr(mr, cmd.key_variant)?;
        Ok(CreateMrReply { key })
    }

    pub(super) fn destroy_mr(&mut self, cmd: &DestroyMrCmd) -> Result<(), CmdError> {
        reserved_zero(cmd.rsvd.into(), offset_of!(DestroyMrCmd, rsvd))?;
        // By index: fast registration changes the key's variant byte, and a REG_MR that was
        // flushed leaves the device with an older variant than the driver's MR shows.
        let index = mr_key_index(cmd.key);
        match self.core.objects().mrs().get(index) {
            // A window's key, or an MR windows are bound to (as rxe: unbind them first).
            Some(mr) if mr.window.is_some() => {
                Err(field_error!(STATUS_BAD_RESOURCE, DestroyMrCmd, key))
            }
            Some(mr) if mr.windows > 0 => Err(CmdError::new(STATUS_BUSY)),
            Some(_) => {
                self.core.objects_mut().remove_mr(index);
                Ok(())
            }
            None => Err(CmdError::new(STATUS_BAD_RESOURCE)),
        }
    }

    /// Fills or clears entries of an on-demand MR's page table (`CMD_UPDATE_MR_PAGES`). The
    /// engine runs on this thread between commands, so once this returns no access reaches an
    /// invalidated page; accesses that waited for filled pages go on at their next turn.
    pub(super) fn update_mr_pages(&mut self, cmd: &UpdateMrPagesCmd) -> Result<(), CmdError> {
        if cmd.flags & !UPDATE_PAGES_FLAGS_VALID != 0 {
            return Err(field_error!(STATUS_BAD_PARAM, UpdateMrPagesCmd, flags));
        }
        let invalidate = cmd.flags & UPDATE_PAGES_INVALIDATE != 0;
        if invalidate != (cmd.pages == 0) {
            return Err(field_error!(STATUS_BAD_PARAM, UpdateMrPagesCmd, pages));
        }
        let index = mr_key_index(cmd.key);
        let Some(MrBacking::OnDemand(table)) =
            self.core.objects().mrs().get(index).map(|mr| &mr.backing)
        else {
            return Err(field_error!(STATUS_BAD_RESOURCE, UpdateMrPagesCmd, key));
        };
        let end = cmd.first.checked_add(cmd.count);
        if cmd.count == 0 || end.is_none_or(|end| end > table.len()) {
            return Err(field_error!(STATUS_BAD_PARAM, UpdateMrPagesCmd, count));
        }
        let page_mask = (1u64 << table.log_page_size) - 1;
        let entries = if invalidate {
            vec![0u64; cmd.count as usize]
        } else {
            // Bounded by the table's length, itself bounded by MAX_MR_PAGES.
            let mut raw = vec![0u8; cmd.count as usize * 8];
            self.core
                .bus()
                .mem()
                .read(cmd.pages, &mut raw)
                .map_err(|_| CmdError::new(STATUS_DMA_ERROR))?;
            let entries: Vec<u64> = raw.chunks_exact(8).map(|c| read_u64(c, 0)).collect();
            // A present page is readable; its address is page-aligned and ends in memory.
            let bad = |&e: &u64| {
                let addr = e & !ODP_PAGE_FLAGS;
                e != 0
                    && (addr & page_mask != 0
                        || addr.checked_add(page_mask + 1).is_none()
                        || (e & ODP_PAGE_FAILED == 0 && e & ODP_PAGE_READ == 0))
            };
            if entries.iter().any(bad) {
                return Err(field_error!(STATUS_BAD_PARAM, UpdateMrPagesCmd, pages));
            }
            entries
        };
        // New pages take room in the function's page-list budget; without it they are not
        // given, and the access keeps waiting (as for memory the process has not got).
        self.core
            .objects()
            .check_translation_budget(table.growth(cmd.first, &entries))?;
        let Some(mr) = self.core.objects_mut().mrs_mut().get_mut(index) else {
            return Err(field_error!(STATUS_BAD_RESOURCE, UpdateMrPagesCmd, key));
        };
        if let MrBacking::OnDemand(table) = &mut mr.backing {
            table.set(cmd.first, &entries);
        }
        mr.fault = None;
        let counter = if invalidate {
            COUNTER_ODP_PAGES_INVALIDATED
        } else {
            COUNTER_ODP_PAGES_MAPPED
        };
        self.core
            .bus()
            .counters()
            .add(counter, u64::from(cmd.count));
        Ok(())
    }

    /// Allocates an unbound memory window; its key is in the MR table's key space.
    pub(super) fn create_mw(&mut self, cmd: &CreateMwCmd) -> Result<CreateMwReply, CmdError> {
        reserved_zero(cmd.rsvd.into(), offset_of!(CreateMwCmd, rsvd))?;
        if !matches!(cmd.mw_type, MW_TYPE_1 | MW_TYPE_2) {
            return Err(field_error!(STATUS_BAD_PARAM, CreateMwCmd, mw_type));
        }
        let window = Mr::window(cmd.pd, cmd.mw_type);
        let key = self.core.objects_mut().insert_mr(window, cmd.key_variant)?;
        Ok(CreateMwReply { key })
    }

    /// Frees a memory window, unbinding it first.
    pub(super) fn destroy_mw(&mut self, cmd: &DestroyMwCmd) -> Result<(), CmdError> {
        reserved_zero(cmd.rsvd.into(), offset_of!(DestroyMwCmd, rsvd))?;
        let index = mr_key_index(cmd.key);
        let mw = self.core.objects().mrs().get(index);
        if mw.is_none_or(|mw| mw.window.is_none()) {
            return Err(CmdError::new(STATUS_BAD_RESOURCE));
        }
        self.core.unbind_window(index);
        self.core.objects_mut().remove_mr(index);
        Ok(())
    }
}
