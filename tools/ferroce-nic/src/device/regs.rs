// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The BAR0 register file: the latched control, status, scratch, command queue and EQ setup
//! registers. Decoding of the whole BAR (identification, counters, doorbells) is in
//! [`crate::bar0`]; this is only the state those registers hold.

use ferroce_hw::*;
use serde::Serialize;

fn lo(value: u64) -> u32 {
    value as u32
}

fn hi(value: u64) -> u32 {
    (value >> 32) as u32
}

fn set_lo(target: &mut u64, value: u32) {
    *target = (*target & !0xffff_ffff) | u64::from(value);
}

fn set_hi(target: &mut u64, value: u32) {
    *target = (*target & 0xffff_ffff) | (u64::from(value) << 32);
}

/// Latched register values.
#[derive(Clone, Debug, Serialize)]
pub struct Registers {
    /// `REG_DEV_CTRL` (enable bit).
    ctrl: u32,
    /// `REG_FATAL_CODE`.
    fatal_code: u32,
    /// `STATUS_READY` (cleared while a reset is pending).
    ready: bool,
    /// `REG_SCRATCH`.
    scratch: u32,
    /// `REG_CMDQ_SQ_BASE_*`.
    cmdq_sq_base: u64,
    /// `REG_CMDQ_CQ_BASE_*`.
    cmdq_cq_base: u64,
    /// `REG_CMDQ_LOG_SIZE`.
    cmdq_log_size: u32,
    /// `REG_EQ_SETUP_BASE_*`.
    eq_setup_base: u64,
    /// `REG_EQ_SETUP_LOG_SIZE`.
    eq_setup_log_size: u32,
    /// `REG_EQ_SETUP_VECTOR`.
    eq_setup_vector: u32,
    /// `REG_EQ_SETUP_STATUS`.
    eq_setup_status: u32,
    /// `CTRL_RESET` was written; the device thread performs the reset.
    #[serde(skip)]
    reset_pending: bool,
}

impl Default for Registers {
    /// The post-reset register file.
    fn default() -> Self {
        Self {
            ctrl: 0,
            fatal_code: FATAL_NONE,
            ready: true,
            scratch: 0,
            cmdq_sq_base: 0,
            cmdq_cq_base: 0,
            cmdq_log_size: 0,
            eq_setup_base: 0,
            eq_setup_log_size: 0,
            eq_setup_vector: 0,
            eq_setup_status: 0,
            reset_pending: false,
        }
    }
}

impl Registers {
    /// Value of a latched register; 0 for any other offset.
    pub fn read(&self, offset: usize) -> u32 {
        match offset {
            REG_DEV_CTRL => self.ctrl,
            REG_DEV_STATUS => self.status(),
            REG_FATAL_CODE => self.fatal_code,
            REG_SCRATCH => self.scratch,
            REG_CMDQ_SQ_BASE_LO => lo(self.cmdq_sq_base),
            REG_CMDQ_SQ_BASE_HI => hi(self.cmdq_sq_base),
            REG_CMDQ_CQ_BASE_LO => lo(self.cmdq_cq_base),
            REG_CMDQ_CQ_BASE_HI => hi(self.cmdq_cq_base),
            REG_CMDQ_LOG_SIZE => self.cmdq_log_size,
            REG_EQ_SETUP_BASE_LO => lo(self.eq_setup_base),
            REG_EQ_SETUP_BASE_HI => hi(self.eq_setup_base),
            REG_EQ_SETUP_LOG_SIZE => self.eq_setup_log_size,
            REG_EQ_SETUP_VECTOR => self.eq_setup_vector,
            REG_EQ_SETUP_STATUS => self.eq_setup_status,
            _ => 0,
        }
    }

    /// Latches a write of a latched register; other offsets are ignored.
    pub fn write(&mut self, offset: usize, value: u32) {
        match offset {
            REG_DEV_CTRL => {
                if value & CTRL_RESET != 0 {
                    // The device thread performs it; READY reads 0 until then.
                    self.reset_pending = true;
                    self.ctrl = 0;
                } else {
                    self.ctrl = value & CTRL_ENABLE;
                }
            }
            REG_SCRATCH => self.scratch = value,
            REG_CMDQ_SQ_BASE_LO => set_lo(&mut self.cmdq_sq_base, value),
            REG_CMDQ_SQ_BASE_HI => set_hi(&mut self.cmdq_sq_base, value),
            REG_CMDQ_CQ_BASE_LO => set_lo(&mut self.cmdq_cq_base, value),
            REG_CMDQ_CQ_BASE_HI => set_hi(&mut self.cmdq_cq_base, value),
            REG_CMDQ_LOG_SIZE => self.cmdq_log_size = value,
            REG_EQ_SETUP_BASE_LO => set_lo(&mut self.eq_setup_base, value),
            REG_EQ_SETUP_BASE_HI => set_hi(&mut self.eq_setup_base, value),
            REG_EQ_SETUP_LOG_SIZE => self.eq_setup_log_size = value,
            REG_EQ_SETUP_VECTOR => self.eq_setup_vector = value,
            _ => {}
        }
    }

    /// `REG_DEV_STATUS` value.
    pub fn status(&self) -> u32 {
        let mut status = 0;
        if self.ready && !self.reset_pending {
            status |= STATUS_READY;
        }
        if self.is_fatal() {
            status |= STATUS_FATAL;
        }
        if self.enabled() {
            status |= STATUS_ENABLED;
        }
        status
    }

    /// `CTRL_ENABLE` is set.
    pub fn enabled(&self) -> bool {
        self.ctrl & CTRL_ENABLE != 0
    }

    /// A reset was requested and not yet performed.
    pub fn reset_pending(&self) -> bool {
        self.reset_pending
    }

    /// `REG_FATAL_CODE`.
    pub fn fatal_code(&self) -> u32 {
        self.fatal_code
    }

    /// Whether the device is in fatal state.
    pub fn is_fatal(&self) -> bool {
        self.fatal_code != FATAL_NONE
    }

    /// Enters fatal state with `code`; `false` if already fatal (the first code stays).
    pub fn set_fatal(&mut self, code: u32) -> bool {
        if self.is_fatal() {
            return false;
        }
        self.fatal_code = code;
        true
    }

    /// The command queue registers: SQ base, CQ base, log2 size.
    pub fn cmdq_setup(&self) -> (u64, u64, u32) {
        (self.cmdq_sq_base, self.cmdq_cq_base, self.cmdq_log_size)
    }

    /// The EQ setup registers: ring base, log2 size, vector.
    pub fn eq_setup(&self) -> (u64, u32, u32) {
        (
            self.eq_setup_base,
            self.eq_setup_log_size,
            self.eq_setup_vector,
        )
    }

    /// Sets `REG_EQ_SETUP_STATUS`.
    pub fn set_eq_setup_status(&mut self, status: u32) {
        self.eq_setup_status = status;
    }
}
