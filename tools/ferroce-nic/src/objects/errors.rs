// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Why the device refuses: a command's error (its status and the field it names), and an
//! access refused by an MR. A leaf of the crate: the engine names these without depending on
//! the device.

use ferroce_hw::STATUS_BAD_PARAM;

/// A command failure: status code and the payload offset of the offending field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CmdError {
    /// `STATUS_*`.
    pub status: u8,
    /// Payload offset of the field + 1, or 0.
    pub syndrome: u32,
}

impl CmdError {
    /// An error with no field detail.
    pub const fn new(status: u8) -> Self {
        Self {
            status,
            syndrome: 0,
        }
    }

    /// An error about the field at payload offset `offset`.
    pub const fn field(status: u8, offset: usize) -> Self {
        Self {
            status,
            syndrome: offset as u32 + 1,
        }
    }
}

/// A [`CmdError`] with `status` about field `field` of command payload `Cmd` (a `ferroce_hw`
/// layout), named rather than counted: `field_error!(STATUS_BAD_PARAM, ModifyQpCmd, dgid)` is
/// `CmdError::field(STATUS_BAD_PARAM, offset_of!(ModifyQpCmd, dgid))`. A field of a nested
/// layout is a path: `field_error!(STATUS_BAD_PARAM, CreateMrCmd, pages.page_count)`.
macro_rules! field_error {
    ($status:expr, $cmd:ty, $($field:tt)+) => {
        $crate::objects::CmdError::field($status, ::core::mem::offset_of!($cmd, $($field)+))
    };
}
pub(crate) use field_error;

/// Refuses a reserved field at payload `offset` that is not zero, naming it in the syndrome.
pub fn reserved_zero(value: u64, offset: usize) -> Result<(), CmdError> {
    if value == 0 {
        Ok(())
    } else {
        Err(CmdError::field(STATUS_BAD_PARAM, offset))
    }
}

/// Like [`reserved_zero`] for a reserved byte array at `offset`.
pub fn reserved_bytes_zero(bytes: &[u8], offset: usize) -> Result<(), CmdError> {
    if bytes.iter().all(|&b| b == 0) {
        Ok(())
    } else {
        Err(CmdError::field(STATUS_BAD_PARAM, offset))
    }
}

/// Why an MR access was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MrError {
    /// No MR with this key.
    BadKey,
    /// PD mismatch.
    BadPd,
    /// Access flags do not allow it.
    Access,
    /// Outside the region.
    Bounds,
    /// An on-demand MR's page is not present (or not writable for a write): the access waits
    /// for the driver (a page fault).
    NotPresent,
}
