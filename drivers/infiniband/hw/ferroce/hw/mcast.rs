// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Multicast: UD QPs attach to groups named by multicast GIDs, and the device delivers a
//! datagram sent to a group (destination QPN [`MCAST_QPN`]) to every QP attached to it.

use super::*;

/// The destination QPN of datagrams sent to a multicast group (IBA 10.5.1.1: 0xFFFFFF).
#[cfg(userspace)] // The device delivers them; consumers take it from ib_core's join.
pub const MCAST_QPN: u32 = 0x00ff_ffff;
/// Groups the device holds at once.
pub const MAX_MCAST_GROUPS: u32 = 1024;
/// QPs attached to one group.
pub const MAX_MCAST_QP_ATTACH: u32 = 32;
/// Attachments over all groups.
pub const MAX_TOTAL_MCAST_QP_ATTACH: u32 = 4096;

/// Whether `gid` names a multicast group: an IPv6 multicast address (`ff00::/8`, RoCE v1 and
/// IPv6 groups) or an IPv4-mapped one in `224.0.0.0/4` (RoCE v2 over IPv4: rdma_cm's MGID
/// `::ffff:a.b.c.d`).
#[cfg(userspace)] // The device checks attachments (ib_core checks its consumers').
pub const fn is_multicast_gid(gid: &[u8; 16]) -> bool {
    let v4_mapped = matches!(gid, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, _, _, _, _]);
    gid[0] == 0xff || (v4_mapped && gid[12] & 0xf0 == 0xe0)
}

hw_layout! {
    /// `CMD_ATTACH_MCAST` payload: UD QP `qpn` joins group `mgid`. A QP attached already
    /// stays attached once.
    pub struct AttachMcastCmd(24) {
        /// The QP (UD).
        pub qpn: u32,
        /// Reserved, zero.
        pub rsvd: u32,
        /// The group's GID ([`is_multicast_gid`]), in network order.
        pub mgid: [u8; 16],
    }
}
hw_command!(AttachMcastCmd, CMD_ATTACH_MCAST);

hw_layout! {
    /// `CMD_DETACH_MCAST` payload: QP `qpn` leaves group `mgid`, which it must be attached to;
    /// a group without QPs is gone.
    pub struct DetachMcastCmd(24) {
        /// The QP.
        pub qpn: u32,
        /// Reserved, zero.
        pub rsvd: u32,
        /// The group's GID, in network order.
        pub mgid: [u8; 16],
    }
}
hw_command!(DetachMcastCmd, CMD_DETACH_MCAST);
