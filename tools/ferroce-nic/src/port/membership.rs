// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Group membership messages in the host's traffic: IGMP (IPv4) and MLD (IPv6) reports and
//! leaves, which the guest's IP stack sends for the groups rdma_cm joins. The port traces them
//! (`membership` events), so that a join is seen on the wire where Linux sends it.

use std::net::{Ipv4Addr, Ipv6Addr};

use etherparse::{IpNumber, NetSlice, SlicedPacket};
use serde::Serialize;

/// One membership message: its protocol and type, and the groups it names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Membership {
    /// `"igmp"` or `"mld"`.
    pub proto: &'static str,
    /// `"report"` (joined or still joined) or `"leave"`.
    pub kind: &'static str,
    /// The protocol's message type (IGMP 0x12/0x16/0x17/0x22, MLD 131/132/143).
    pub msg_type: u8,
    /// The groups, as addresses.
    pub groups: Vec<String>,
}

/// The membership message `frame` carries, if it is one. Never panics, whatever the bytes.
pub fn membership(frame: &[u8]) -> Option<Membership> {
    let packet = SlicedPacket::from_ethernet(frame).ok()?;
    match packet.net? {
        NetSlice::Ipv4(ip) if ip.payload().ip_number == IpNumber::IGMP => {
            igmp(ip.payload().payload)
        }
        NetSlice::Ipv6(ip) if ip.payload().ip_number == IpNumber::IPV6_ICMP => {
            mld(ip.payload().payload)
        }
        _ => None,
    }
}

/// The address records of an IGMPv3 or MLDv2 report: `count` records from `records`, each a
/// type byte, an aux-data length (32-bit words), a source count, the group (`N` bytes), the
/// sources and the aux data.
fn records<const N: usize>(mut records: &[u8], count: usize) -> Option<Vec<[u8; N]>> {
    let mut groups = Vec::new();
    for _ in 0..count {
        let aux = usize::from(*records.get(1)?) * 4;
        let sources = usize::from(u16::from_be_bytes([*records.get(2)?, *records.get(3)?]));
        let group: [u8; N] = records.get(4..4 + N)?.try_into().ok()?;
        groups.push(group);
        records = records.get(4 + N + sources * N + aux..)?;
    }
    Some(groups)
}

fn igmp(msg: &[u8]) -> Option<Membership> {
    let msg_type = *msg.first()?;
    let (kind, groups) = match msg_type {
        // v1/v2 report, v2 leave: the group follows type, time and checksum.
        0x12 | 0x16 | 0x17 => {
            let group: [u8; 4] = msg.get(4..8)?.try_into().ok()?;
            (
                if msg_type == 0x17 { "leave" } else { "report" },
                vec![group],
            )
        }
        // v3 report: records after 8 bytes (type, reserved, checksum, reserved, count).
        0x22 => {
            let count = usize::from(u16::from_be_bytes([*msg.get(6)?, *msg.get(7)?]));
            ("report", records::<4>(msg.get(8..)?, count)?)
        }
        _ => return None,
    };
    Some(Membership {
        proto: "igmp",
        kind,
        msg_type,
        groups: groups
            .into_iter()
            .map(|g| Ipv4Addr::from(g).to_string())
            .collect(),
    })
}

fn mld(msg: &[u8]) -> Option<Membership> {
    let msg_type = *msg.first()?;
    let (kind, groups) = match msg_type {
        // MLDv1 report and done: the group after type, code, checksum, delay, reserved.
        131 | 132 => {
            let group: [u8; 16] = msg.get(8..24)?.try_into().ok()?;
            (
                if msg_type == 132 { "leave" } else { "report" },
                vec![group],
            )
        }
        // MLDv2 report: records after 8 bytes (type, code, checksum, reserved, count).
        143 => {
            let count = usize::from(u16::from_be_bytes([*msg.get(6)?, *msg.get(7)?]));
            ("report", records::<16>(msg.get(8..)?, count)?)
        }
        _ => return None,
    };
    Some(Membership {
        proto: "mld",
        kind,
        msg_type,
        groups: groups
            .into_iter()
            .map(|g| Ipv6Addr::from(g).to_string())
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::PacketBuilder;

    fn ipv4(protocol: IpNumber, payload: &[u8]) -> Vec<u8> {
        let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [1, 0, 0x5e, 0, 0, 0x16]).ipv4(
            [10, 0, 0, 1],
            [224, 0, 0, 22],
            1,
        );
        let mut out = Vec::new();
        b.write(&mut out, protocol, payload).expect("frame");
        out
    }

    #[test]
    fn igmp_reports_and_leaves_name_their_groups() {
        // IGMPv3 report of two records: 239.1.1.1 (one source) and 239.2.2.2.
        let mut v3 = vec![0x22, 0, 0, 0, 0, 0, 0, 2];
        v3.extend([4, 0, 0, 1, 239, 1, 1, 1, 10, 0, 0, 9]);
        v3.extend([4, 0, 0, 0, 239, 2, 2, 2]);
        let m = membership(&ipv4(IpNumber::IGMP, &v3)).expect("a report");
        assert_eq!((m.proto, m.kind, m.msg_type), ("igmp", "report", 0x22));
        assert_eq!(m.groups, ["239.1.1.1", "239.2.2.2"]);
        let leave = [0x17, 0, 0, 0, 239, 1, 1, 1];
        let m = membership(&ipv4(IpNumber::IGMP, &leave)).expect("a leave");
        assert_eq!(
            (m.kind, m.groups.as_slice()),
            ("leave", &["239.1.1.1".to_string()][..])
        );
        // A record list that runs past the end, a query, and UDP are none.
        assert_eq!(membership(&ipv4(IpNumber::IGMP, &v3[..14])), None);
        assert_eq!(
            membership(&ipv4(IpNumber::IGMP, &[0x11, 0, 0, 0, 0, 0, 0, 0])),
            None
        );
        assert_eq!(membership(&ipv4(IpNumber::UDP, &[0; 16])), None);
        assert_eq!(membership(&[0xff; 20]), None);
    }

    #[test]
    fn mld_reports_name_their_groups() {
        let mut v2 = vec![143, 0, 0, 0, 0, 0, 0, 1, 4, 0, 0, 0];
        v2.extend(Ipv6Addr::new(0xff02, 0, 0, 0, 0, 1, 0xff00, 1).octets());
        let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [0x33, 0x33, 0, 0, 0, 0x16]).ipv6(
            [0xfe; 16],
            Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 0x16).octets(),
            1,
        );
        let mut frame = Vec::new();
        b.write(&mut frame, IpNumber::IPV6_ICMP, &v2)
            .expect("frame");
        let m = membership(&frame).expect("a report");
        assert_eq!((m.proto, m.kind, m.msg_type), ("mld", "report", 143));
        assert_eq!(m.groups, ["ff02::1:ff00:1"]);
    }
}
