// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! BAR0 decoding: identification and limit registers, control/status, command queue and EQ
//! setup registers, counters, the MSI-X PBA, and the doorbell pages with their push windows.
//! Accesses are 32-bit registers; 64-bit accesses are split in two, narrower ones are allowed
//! only in push windows (other narrow writes are ignored, narrow reads see the register bytes).

use std::time::Instant;

use ferroce_hw::*;

use crate::device::{Device, DeviceCore, HostControls, BOGUS_IF_VERSION};

/// Where in the doorbell area a BAR0 offset lands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DoorbellTarget {
    /// The context (doorbell page).
    pub ctx: usize,
    /// The offset in the page.
    pub in_page: usize,
    /// In the page's push window (a WQE's bytes, not a doorbell register).
    pub push_window: bool,
}

impl DoorbellTarget {
    /// The doorbell page and offset of BAR0 offset `offset`; `None` outside the doorbell area.
    pub fn of(offset: u64) -> Option<Self> {
        let offset = usize::try_from(offset).ok()?;
        let db_end = DB_AREA_OFFSET + NUM_DB_PAGES * DB_PAGE_SIZE;
        if !(DB_AREA_OFFSET..db_end).contains(&offset) {
            return None;
        }
        let in_page = (offset - DB_AREA_OFFSET) % DB_PAGE_SIZE;
        Some(Self {
            ctx: (offset - DB_AREA_OFFSET) / DB_PAGE_SIZE,
            in_page,
            push_window: (PUSH_WINDOW_OFFSET..PUSH_WINDOW_OFFSET + PUSH_WINDOW_SIZE)
                .contains(&in_page),
        })
    }
}

fn lo(value: u64) -> u32 {
    value as u32
}

fn hi(value: u64) -> u32 {
    (value >> 32) as u32
}

impl DeviceCore {
    /// Value of the 32-bit register at `offset` (4-byte aligned).
    pub fn read_reg(&self, offset: usize) -> u32 {
        let config = &self.config();
        match offset {
            REG_ID => ID_MAGIC,
            REG_IF_VERSION => {
                if HostControls::get(&self.host().bogus_version) {
                    BOGUS_IF_VERSION
                } else {
                    IF_VERSION
                }
            }
            REG_CAPS => {
                CAP_ROCE_V1
                    | CAP_ROCE_V2
                    | CAP_RC
                    | CAP_UD
                    | CAP_SRQ
                    | CAP_ATOMIC
                    | CAP_INLINE
                    | CAP_WQE_PUSH
                    | CAP_CQ_MODERATION
                    | CAP_QID_TRANSLATION
                    | CAP_FAST_REG
                    | CAP_UC
                    | CAP_CQ_RESIZE
                    | CAP_SRQ_RESIZE
                    | CAP_MW
                    | CAP_MCAST
                    | CAP_ATOMIC_WRITE
                    | CAP_FLUSH
                    | if config.db_record { CAP_DB_RECORD } else { 0 }
                    | if config.xrc { CAP_XRC } else { 0 }
                    | if config.odp { CAP_ODP } else { 0 }
            }
            REG_NUM_MSIX => u32::from(self.bus().irq().vectors()),
            REG_MAX_QP => config.max_qp,
            REG_MAX_CQ => config.max_cq,
            REG_MAX_MR => config.max_mr,
            REG_MAX_SRQ => config.max_srq,
            REG_MAX_AH => config.max_ah,
            REG_MAX_EQ => self.objects().eqs().capacity(),
            REG_GID_TABLE_LEN => GID_TABLE_LEN,
            REG_NUM_DB_PAGES => NUM_DB_PAGES as u32,
            REG_MAX_LOG_QUEUE => MAX_LOG_QUEUE,
            REG_MAX_SGE => MAX_SGE,
            REG_MAX_INLINE => MAX_INLINE,
            REG_MAX_MR_PAGES => MAX_MR_PAGES,
            REG_DB_AREA_OFFSET => DB_AREA_OFFSET as u32,
            REG_COUNTERS_OFFSET => COUNTERS_OFFSET as u32,
            REG_NUM_COUNTERS => NUM_COUNTERS as u32,
            REG_QID_TABLE_LEN => config.qid_table_len.min(QID_TABLE_LEN as u32),
            REG_CMD_TIMEOUT_MS => config.cmd_timeout_ms,
            REG_DEV_CTRL
            | REG_DEV_STATUS
            | REG_FATAL_CODE
            | REG_SCRATCH
            | REG_CMDQ_SQ_BASE_LO
            | REG_CMDQ_SQ_BASE_HI
            | REG_CMDQ_CQ_BASE_LO
            | REG_CMDQ_CQ_BASE_HI
            | REG_CMDQ_LOG_SIZE
            | REG_EQ_SETUP_BASE_LO
            | REG_EQ_SETUP_BASE_HI
            | REG_EQ_SETUP_LOG_SIZE
            | REG_EQ_SETUP_VECTOR
            | REG_EQ_SETUP_STATUS => self.regs().read(offset),
            REG_CMDQ_CTRL => u32::from(self.cmdq().is_enabled()),
            REG_CMDQ_CI => self.cmdq().ci(),
            REG_CMDQ_STATUS => self.cmdq().status(),
            o if (COUNTERS_OFFSET..COUNTERS_OFFSET + NUM_COUNTERS * 8).contains(&o) => {
                let value = self.bus().counters().get((o - COUNTERS_OFFSET) / 8);
                if o % 8 == 0 {
                    lo(value)
                } else {
                    hi(value)
                }
            }
            o if o == MSIX_PBA_OFFSET => lo(self.bus().irq().pending_bits()),
            o if o == MSIX_PBA_OFFSET + 4 => hi(self.bus().irq().pending_bits()),
            _ => 0,
        }
    }

    /// Write of the 32-bit register at `offset` (4-byte aligned), outside the doorbell area.
    pub fn write_reg(&mut self, offset: usize, value: u32) {
        match offset {
            REG_DEV_CTRL
            | REG_SCRATCH
            | REG_CMDQ_SQ_BASE_LO
            | REG_CMDQ_SQ_BASE_HI
            | REG_CMDQ_CQ_BASE_LO
            | REG_CMDQ_CQ_BASE_HI
            | REG_CMDQ_LOG_SIZE
            | REG_EQ_SETUP_BASE_LO
            | REG_EQ_SETUP_BASE_HI
            | REG_EQ_SETUP_LOG_SIZE
            | REG_EQ_SETUP_VECTOR => self.regs_mut().write(offset, value),
            REG_CMDQ_CTRL => self.cmdq_ctrl_write(value),
            REG_CMDQ_DB => self.cmdq_doorbell_write(value),
            // EQ 0/1 creation touches guest memory only to validate; it is cheap and the
            // driver needs the status right after the write.
            REG_EQ_SETUP_CTRL => self.eq_setup(value),
            REG_EQ_DB => self.eq_doorbell_write(value),
            _ => {}
        }
    }
}

impl Device {
    /// A BAR0 read of 1, 2, 4 or 8 bytes at `offset`.
    pub fn bar0_read(&mut self, offset: u64, data: &mut [u8]) {
        let core = &mut self.core;
        core.bus().counters().inc(COUNTER_MMIO_READS);
        let len = data.len();
        if HostControls::get(&core.host().hang) {
            // A hung device answers like a surprise-removed one.
            data.fill(0xff);
            return;
        }
        let valid = matches!(len, 1 | 2 | 4 | 8)
            && offset
                .checked_add(len as u64)
                .is_some_and(|end| end <= BAR0_SIZE as u64);
        if !valid {
            data.fill(0);
            return;
        }
        let offset = offset as usize;
        let base = offset & !3;
        let mut window = [0u8; 12];
        for (i, chunk) in window.chunks_exact_mut(4).enumerate() {
            chunk.copy_from_slice(&core.read_reg(base + i * 4).to_le_bytes());
        }
        let start = offset - base;
        data.copy_from_slice(&window[start..start + len]);
        core.bus().trace().event("mmio", || {
            serde_json::json!({"dir": "r", "off": offset, "len": len, "val": u64::from_le_bytes(pad8(data))})
        });
    }

    /// A BAR0 write of 1, 2, 4 or 8 bytes at `offset`.
    pub fn bar0_write(&mut self, offset: u64, data: &[u8]) {
        self.bar0_write_at(offset, data, Instant::now());
    }

    /// A BAR0 write of 1, 2, 4 or 8 bytes at `offset` that the guest made at `at` (a doorbell
    /// queued in the function's mailbox is applied later: its doorbell-to-wire interval counts
    /// from the write).
    pub fn bar0_write_at(&mut self, offset: u64, data: &[u8], at: Instant) {
        let core = &mut self.core;
        core.bus().counters().inc(COUNTER_MMIO_WRITES);
        let len = data.len();
        core.bus().trace().event("mmio", || {
            serde_json::json!({"dir": "w", "off": offset, "len": len, "val": u64::from_le_bytes(pad8(data))})
        });
        if HostControls::get(&core.host().hang) {
            return;
        }
        let valid = matches!(len, 1 | 2 | 4 | 8)
            && offset
                .checked_add(len as u64)
                .is_some_and(|end| end <= BAR0_SIZE as u64);
        if !valid {
            return;
        }
        if let Some(DoorbellTarget {
            ctx,
            in_page,
            push_window,
        }) = DoorbellTarget::of(offset)
        {
            if push_window {
                core.doorbells_mut()
                    .push_write(ctx, in_page - PUSH_WINDOW_OFFSET, data);
            } else if len == 4 && in_page % 4 == 0 {
                let value = u32::from_le_bytes(pad4(data));
                core.doorbell_write(ctx, in_page, value, at);
            } else {
                core.bus().counters().inc(COUNTER_BAD_DOORBELLS);
            }
            return;
        }
        let offset = offset as usize;
        if offset % 4 != 0 || (len != 4 && len != 8) {
            return;
        }
        let value = u64::from_le_bytes(pad8(data));
        core.write_reg(offset, lo(value));
        if len == 8 {
            core.write_reg(offset + 4, hi(value));
        }
    }
}

fn pad8(data: &[u8]) -> [u8; 8] {
    let mut bytes = [0u8; 8];
    let n = data.len().min(8);
    bytes[..n].copy_from_slice(&data[..n]);
    bytes
}

fn pad4(data: &[u8]) -> [u8; 4] {
    let mut bytes = [0u8; 4];
    let n = data.len().min(4);
    bytes[..n].copy_from_slice(&data[..n]);
    bytes
}
