// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Port 1: states, MTUs, the `CMD_QUERY_PORT`/`CMD_SET_PORT` commands and the GID table.

use super::*;

// Port.
/// Port state: down (IB `IB_PORT_DOWN`).
pub const PORT_STATE_DOWN: u8 = 1;
/// Port state: active (IB `IB_PORT_ACTIVE`).
pub const PORT_STATE_ACTIVE: u8 = 4;
/// IB MTU enum: 256 bytes.
pub const MTU_256: u8 = 1;
/// 512 bytes.
#[cfg(userspace)] // The device accepts every MTU.
pub const MTU_512: u8 = 2;
/// 1024 bytes.
pub const MTU_1024: u8 = 3;
/// 2048 bytes.
#[cfg(userspace)] // The device accepts every MTU.
pub const MTU_2048: u8 = 4;
/// 4096 bytes.
pub const MTU_4096: u8 = 5;

/// Returns the size in bytes of an IB MTU enum value, or `None` if invalid.
pub const fn mtu_bytes(mtu: u8) -> Option<u32> {
    match mtu {
        MTU_256..=MTU_4096 => Some(128 << mtu),
        _ => None,
    }
}

/// Results of `CMD_QUERY_PORT`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortInfo {
    /// `PORT_STATE_*`.
    pub state: u8,
    /// Active MTU (`MTU_*`).
    pub active_mtu: u8,
    /// Maximum MTU (`MTU_*`).
    pub max_mtu: u8,
    /// MAC address of the companion Ethernet function (the virtio-net NIC).
    pub mac: [u8; 6],
}

/// The reply of `CMD_QUERY_PORT`: word 0 = state | active_mtu << 8 | max_mtu << 16, word 1 =
/// mac[0..4] (little-endian), word 2 = mac[4..6].
impl Reply for PortInfo {
    #[cfg(userspace)]
    fn to_results(&self) -> [u32; 3] {
        let m = self.mac;
        [
            u32::from_le_bytes([self.state, self.active_mtu, self.max_mtu, 0]),
            u32::from_le_bytes([m[0], m[1], m[2], m[3]]),
            u32::from_le_bytes([m[4], m[5], 0, 0]),
        ]
    }

    fn from_results(r: [u32; 3]) -> Option<Self> {
        let a = r[1].to_le_bytes();
        let b = r[2].to_le_bytes();
        let [state, active_mtu, max_mtu, _] = r[0].to_le_bytes();
        Some(Self {
            state,
            active_mtu,
            max_mtu,
            mac: [a[0], a[1], a[2], a[3], b[0], b[1]],
        })
    }
}

hw_layout! {
    /// `CMD_QUERY_PORT` payload.
    pub struct QueryPortCmd(8) {
        /// Port number, must be 1.
        pub port: u32,
        /// Reserved, zero.
        pub rsvd: u32,
    }
}
hw_command!(QueryPortCmd, CMD_QUERY_PORT, PortInfo);

hw_layout! {
    /// `CMD_SET_PORT` payload.
    pub struct SetPortCmd(8) {
        /// Port number, must be 1.
        pub port: u32,
        /// Active MTU (`MTU_*`), following the netdev's MTU.
        pub active_mtu: u8,
        /// Reserved, zero.
        pub rsvd: [u8; 3],
    }
}
hw_command!(SetPortCmd, CMD_SET_PORT);

// GIDs.
/// GID table length.
pub const GID_TABLE_LEN: u32 = 128;
/// GID type RoCE v1 (GRH, ethertype 0x8915).
pub const GID_TYPE_ROCE_V1: u8 = 1;
/// GID type RoCE v2 (UDP/IP).
pub const GID_TYPE_ROCE_V2: u8 = 2;
/// Address family: IPv4-mapped IPv6 (`::ffff:a.b.c.d`).
pub const GID_FAMILY_IPV4: u8 = 1;
/// Address family: IPv6.
pub const GID_FAMILY_IPV6: u8 = 2;

/// Whether a GID is an IPv4-mapped address (`::ffff:a.b.c.d`).
pub fn gid_is_ipv4_mapped(gid: &[u8; 16]) -> bool {
    gid[..10].iter().all(|&b| b == 0) && gid[10] == 0xff && gid[11] == 0xff
}

/// The link-local GID `fe80::` + EUI-64 of `mac` (GID 0/1 of a port, ferroce-hw.rst).
#[cfg(userspace)] // The NIC model fills its default GID table.
pub const fn gid_from_mac(mac: [u8; 6]) -> [u8; 16] {
    [
        0xfe,
        0x80,
        0,
        0,
        0,
        0,
        0,
        0,
        mac[0] ^ 0x02,
        mac[1],
        mac[2],
        0xff,
        0xfe,
        mac[3],
        mac[4],
        mac[5],
    ]
}

hw_layout! {
    /// `CMD_SET_GID` payload.
    pub struct SetGidCmd(32) {
        /// Table index (< `GID_TABLE_LEN`).
        pub index: u32,
        /// `GID_TYPE_*`.
        pub gid_type: u8,
        /// `GID_FAMILY_*`; must agree with the GID.
        pub family: u8,
        /// Reserved, zero.
        pub rsvd: u16,
        /// The GID.
        pub gid: [u8; 16],
        /// Source MAC for frames from this GID.
        pub mac: [u8; 6],
        /// VLAN ID or [`VLAN_NONE`].
        pub vlan: u16,
    }
}
hw_command!(SetGidCmd, CMD_SET_GID);

hw_layout! {
    /// `CMD_CLEAR_GID` payload.
    pub struct ClearGidCmd(8) {
        /// Table index.
        pub index: u32,
        /// Reserved, zero.
        pub rsvd: u32,
    }
}
hw_command!(ClearGidCmd, CMD_CLEAR_GID);
