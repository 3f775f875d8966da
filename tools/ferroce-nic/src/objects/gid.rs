// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! A GID table entry, as `CMD_SET_GID` programs it and the engine routes by it.

use serde::Serialize;

/// A GID table entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct GidEntry {
    /// The GID.
    pub gid: [u8; 16],
    /// `GID_TYPE_*`.
    pub gid_type: u8,
    /// `GID_FAMILY_*`.
    pub family: u8,
    /// Source MAC.
    pub mac: [u8; 6],
    /// VLAN or `VLAN_NONE`.
    pub vlan: u16,
}
