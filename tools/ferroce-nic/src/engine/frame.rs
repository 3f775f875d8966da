// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! RoCE frames: Ethernet (optionally one 802.1Q tag) / IPv4 or IPv6 / UDP 4791 / transport /
//! ICRC for RoCE v2, Ethernet (ethertype 0x8915) / GRH / transport / ICRC for RoCE v1 (seed 2
//! §7). [`build`] writes one from a [`Route`]; [`parse`] checks and splits one; [`classify`]
//! is the converged port's steering decision.

use std::convert::Infallible;

use etherparse::{
    EtherType, Ethernet2Header, IpNumber, Ipv4Dscp, Ipv4Ecn, Ipv4Header, Ipv4HeaderSlice,
    Ipv6FlowLabel, Ipv6Header, Ipv6HeaderSlice, SingleVlanHeader, UdpHeader, UdpHeaderSlice,
    VlanId,
};
use ferroce_hw::{gid_is_ipv4_mapped, FLOW_LABEL_MASK};

use super::icrc::{self, NetKind};
use super::opcode::ICRC_LEN;

/// UDP destination port of RoCE v2.
pub const ROCE_V2_UDP_PORT: u16 = 4791;
/// Ethertype of RoCE v1.
pub const ROCE_V1_ETHERTYPE: u16 = 0x8915;
/// GRH next-header value for a BTH (IBA 8.3.1).
pub const GRH_NEXT_HEADER_BTH: u8 = 0x1b;
/// First UDP source port RoCE v2 uses (IANA dynamic range, as `rdma_flow_label_to_udp_sport`).
pub const UDP_SPORT_BASE: u16 = 0xc000;
/// Largest frame the port accepts (a 4096-byte MTU plus every header, with room to spare).
pub const MAX_FRAME: usize = 9216;

/// Where a packet goes and how its network header looks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    /// Source MAC (the GID entry's).
    pub smac: [u8; 6],
    /// Destination MAC (next hop).
    pub dmac: [u8; 6],
    /// VLAN ID, if tagged.
    pub vlan: Option<u16>,
    /// RoCE v1 (GRH) or v2 (UDP/IP).
    pub v1: bool,
    /// Source GID.
    pub sgid: [u8; 16],
    /// Destination GID.
    pub dgid: [u8; 16],
    /// Traffic class (IPv4: DSCP << 2 | ECN).
    pub traffic_class: u8,
    /// Hop limit / TTL.
    pub hop_limit: u8,
    /// Flow label (20 bits).
    pub flow_label: u32,
}

impl Route {
    /// The network header kind this route produces.
    pub fn kind(&self) -> NetKind {
        if self.v1 {
            NetKind::V1
        } else if gid_is_ipv4_mapped(&self.sgid) {
            NetKind::V4
        } else {
            NetKind::V6
        }
    }

    /// The UDP source port: the flow label folded into 14 bits above 0xc000, as Linux's
    /// `rdma_flow_label_to_udp_sport`, so ECMP spreads flows and keeps each in order.
    pub fn udp_sport(&self) -> u16 {
        let fl = self.flow_label & FLOW_LABEL_MASK;
        let low = (fl & 0x3fff) ^ ((fl & 0xf_c000) >> 14);
        UDP_SPORT_BASE | low as u16
    }
}

/// The flow label of a connection without one: Linux's `rdma_calc_flow_label`.
pub fn flow_label_for(lqpn: u32, rqpn: u32) -> u32 {
    let mut v = u64::from(lqpn) * u64::from(rqpn);
    v ^= v >> 20;
    v ^= v >> 40;
    (v as u32) & FLOW_LABEL_MASK
}

fn ipv4_of(gid: &[u8; 16]) -> [u8; 4] {
    [gid[12], gid[13], gid[14], gid[15]]
}

/// Appends the frame carrying `transport` (BTH through the padded payload) to `out`.
pub fn build(route: &Route, transport: &[u8], out: &mut Vec<u8>) {
    let mut w = FrameWriter::after(out);
    let built = build_with(route, transport.len(), &mut w, |w| {
        w.put(transport);
        Ok::<(), Infallible>(())
    });
    let Ok(()) = built;
    w.finish();
}

/// Writes a frame into a buffer over what the buffer held there (the last frame built in it):
/// bytes are put in place, not appended to an emptied buffer, so that a payload written where
/// it goes needs no clearing first. Every byte is written before [`FrameWriter::finish`] cuts
/// the buffer to the frame: headers by [`put`](Self::put), a payload into
/// [`room`](Self::room), whose every byte its writer writes.
pub struct FrameWriter<'a> {
    buf: &'a mut Vec<u8>,
    len: usize,
}

impl<'a> FrameWriter<'a> {
    /// Writes from the start of `buf`, over its old bytes.
    pub fn over(buf: &'a mut Vec<u8>) -> Self {
        Self { buf, len: 0 }
    }

    /// Writes after the bytes `buf` holds.
    pub fn after(buf: &'a mut Vec<u8>) -> Self {
        let len = buf.len();
        Self { buf, len }
    }

    /// Puts `bytes` next.
    pub fn put(&mut self, bytes: &[u8]) {
        self.room(bytes.len()).copy_from_slice(bytes);
    }

    /// The next `n` bytes, for the caller to write every one of: until it does, they hold
    /// what the buffer held there (zeros past its old end).
    pub fn room(&mut self, n: usize) -> &mut [u8] {
        let (at, end) = (self.len, self.len + n);
        if self.buf.len() < end {
            self.buf.resize(end, 0);
        }
        self.len = end;
        &mut self.buf[at..end]
    }

    /// Bytes written so far, from the buffer's start.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing was written (nor held before [`after`](Self::after)).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// What was written from `start` on.
    pub fn written_from(&mut self, start: usize) -> &mut [u8] {
        &mut self.buf[start..self.len]
    }

    /// Ends the frame: the buffer holds what was written and nothing after it.
    pub fn finish(self) {
        self.buf.truncate(self.len);
    }
}

/// Writes the frame whose transport part (BTH through the padded payload) is `transport_len`
/// bytes, which `write_transport` puts where they go: the transport is written once, in place,
/// between the network headers and the ICRC. If `write_transport` fails, so does the frame,
/// and `out` holds only part of it.
pub fn build_with<E>(
    route: &Route,
    transport_len: usize,
    out: &mut FrameWriter<'_>,
    write_transport: impl FnOnce(&mut FrameWriter<'_>) -> Result<(), E>,
) -> Result<(), E> {
    let kind = route.kind();
    let ether_type = match kind {
        NetKind::V1 => EtherType(ROCE_V1_ETHERTYPE),
        NetKind::V4 => EtherType::IPV4,
        NetKind::V6 => EtherType::IPV6,
    };
    let vlan = route.vlan.and_then(|id| VlanId::try_new(id).ok());
    let eth = Ethernet2Header {
        source: route.smac,
        destination: route.dmac,
        ether_type: if vlan.is_some() {
            EtherType::VLAN_TAGGED_FRAME
        } else {
            ether_type
        },
    };
    out.put(&eth.to_bytes());
    if let Some(vlan_id) = vlan {
        let tag = SingleVlanHeader {
            pcp: Default::default(),
            drop_eligible_indicator: false,
            vlan_id,
            ether_type,
        };
        out.put(&tag.to_bytes());
    }
    let l3_start = out.len();
    let l4_len = transport_len + ICRC_LEN;
    match kind {
        NetKind::V4 => {
            let udp_len = 8 + l4_len;
            // Lengths are bounded by MAX_FRAME, far below the IPv4 limit.
            let mut ip = Ipv4Header::new(
                udp_len as u16,
                route.hop_limit,
                IpNumber::UDP,
                ipv4_of(&route.sgid),
                ipv4_of(&route.dgid),
            )
            .unwrap_or_default();
            ip.dscp = Ipv4Dscp::try_new(route.traffic_class >> 2).unwrap_or_default();
            ip.ecn = Ipv4Ecn::try_new(route.traffic_class & 3).unwrap_or_default();
            ip.header_checksum = ip.calc_header_checksum();
            out.put(&ip.to_bytes());
            // IPv4 UDP checksum 0 (not computed), as rxe and RoCE NICs send it: the ICRC covers
            // the packet.
            let udp = UdpHeader {
                source_port: route.udp_sport(),
                destination_port: ROCE_V2_UDP_PORT,
                length: udp_len as u16,
                checksum: 0,
            };
            out.put(&udp.to_bytes());
        }
        NetKind::V6 | NetKind::V1 => {
            let payload_length = if kind == NetKind::V6 {
                8 + l4_len
            } else {
                l4_len
            };
            let ip = Ipv6Header {
                traffic_class: route.traffic_class,
                flow_label: Ipv6FlowLabel::try_new(route.flow_label & FLOW_LABEL_MASK)
                    .unwrap_or_default(),
                payload_length: payload_length as u16,
                next_header: if kind == NetKind::V6 {
                    IpNumber::UDP
                } else {
                    IpNumber(GRH_NEXT_HEADER_BTH)
                },
                hop_limit: route.hop_limit,
                source: route.sgid,
                destination: route.dgid,
            };
            out.put(&ip.to_bytes());
            if kind == NetKind::V6 {
                // Checksum filled in below, once the ICRC is known.
                let udp = UdpHeader {
                    source_port: route.udp_sport(),
                    destination_port: ROCE_V2_UDP_PORT,
                    length: (8 + l4_len) as u16,
                    checksum: 0,
                };
                out.put(&udp.to_bytes());
            }
        }
    }
    let transport_start = out.len();
    write_transport(out)?;
    debug_assert_eq!(out.len() - transport_start, transport_len);
    let crc = icrc::compute(kind, out.written_from(l3_start)).unwrap_or_default();
    out.put(&crc.to_le_bytes());
    if kind == NetKind::V6 {
        // IPv6 requires a UDP checksum (RFC 8200 §8.1).
        let udp_start = l3_start + 40;
        let udp = UdpHeader {
            source_port: route.udp_sport(),
            destination_port: ROCE_V2_UDP_PORT,
            length: (8 + l4_len) as u16,
            checksum: 0,
        };
        let sum = udp
            .calc_checksum_ipv6_raw(route.sgid, route.dgid, out.written_from(udp_start + 8))
            .unwrap_or_default();
        out.written_from(udp_start + 6)[..2].copy_from_slice(&sum.to_be_bytes());
    }
    Ok(())
}

/// A received RoCE frame, split and checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoceFrame<'a> {
    /// Destination MAC.
    pub dmac: [u8; 6],
    /// Source MAC.
    pub smac: [u8; 6],
    /// VLAN ID, if tagged.
    pub vlan: Option<u16>,
    /// Network header kind.
    pub kind: NetKind,
    /// Source GID (IPv4-mapped for IPv4).
    pub sgid: [u8; 16],
    /// Destination GID.
    pub dgid: [u8; 16],
    /// Traffic class.
    pub traffic_class: u8,
    /// Hop limit / TTL.
    pub hop_limit: u8,
    /// Flow label.
    pub flow_label: u32,
    /// UDP source port (0 for v1).
    pub udp_sport: u16,
    /// The 40 bytes a UD receive gets in front of its payload: the GRH, the IPv6 header, or 20
    /// zero bytes and the IPv4 header.
    pub grh: [u8; 40],
    /// BTH through the padded payload.
    pub transport: &'a [u8],
    /// Whether the ICRC matched.
    pub icrc_ok: bool,
}

/// Why a frame is not an acceptable RoCE frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Too short or lengths inconsistent.
    #[error("truncated or inconsistent lengths")]
    Length,
    /// Not RoCE (other ethertype, protocol or port).
    #[error("not a RoCE frame")]
    NotRoce,
    /// IPv4 options, fragments, IPv6 extension headers or a bad IPv4 header checksum.
    #[error("unsupported or corrupt network header")]
    Network,
}

fn mapped(v4: [u8; 4]) -> [u8; 16] {
    let mut gid = [0u8; 16];
    gid[10] = 0xff;
    gid[11] = 0xff;
    gid[12..].copy_from_slice(&v4);
    gid
}

/// The Ethernet header, VLAN ID, inner ethertype and what follows (at most one VLAN tag).
type Link<'a> = (Ethernet2Header, Option<u16>, u16, &'a [u8]);

/// Splits off the Ethernet header and at most one VLAN tag.
fn link(frame: &[u8]) -> Result<Link<'_>, FrameError> {
    let (eth, rest) = Ethernet2Header::from_slice(frame).map_err(|_| FrameError::Length)?;
    if eth.ether_type == EtherType::VLAN_TAGGED_FRAME {
        let (tag, rest) = SingleVlanHeader::from_slice(rest).map_err(|_| FrameError::Length)?;
        Ok((eth, Some(tag.vlan_id.value()), tag.ether_type.0, rest))
    } else {
        let ether_type = eth.ether_type.0;
        Ok((eth, None, ether_type, rest))
    }
}

/// Splits and checks a RoCE frame. Never panics, whatever the bytes.
pub fn parse(frame: &[u8]) -> Result<RoceFrame<'_>, FrameError> {
    if frame.len() > MAX_FRAME {
        return Err(FrameError::Length);
    }
    let (eth, vlan, ether_type, l3) = link(frame)?;
    let mut grh = [0u8; 40];
    let (kind, sgid, dgid, tc, hop, fl, l3_len) = match ether_type {
        0x0800 => {
            let ip = Ipv4HeaderSlice::from_slice(l3).map_err(|_| FrameError::Length)?;
            if ip.ihl() != 5 || ip.is_fragmenting_payload() {
                return Err(FrameError::Network);
            }
            if ip.protocol() != IpNumber::UDP {
                return Err(FrameError::NotRoce);
            }
            if ip.to_header().calc_header_checksum() != ip.header_checksum() {
                return Err(FrameError::Network);
            }
            grh[20..].copy_from_slice(ip.slice());
            let tc = (ip.dcp().value() << 2) | ip.ecn().value();
            let total = usize::from(ip.total_len());
            (
                NetKind::V4,
                mapped(ip.source()),
                mapped(ip.destination()),
                tc,
                ip.ttl(),
                0,
                total,
            )
        }
        0x86dd | ROCE_V1_ETHERTYPE => {
            let ip = Ipv6HeaderSlice::from_slice(l3).map_err(|_| FrameError::Length)?;
            let v1 = ether_type == ROCE_V1_ETHERTYPE;
            let expected = if v1 {
                IpNumber(GRH_NEXT_HEADER_BTH)
            } else {
                IpNumber::UDP
            };
            if ip.next_header() != expected {
                return Err(if v1 {
                    FrameError::Network
                } else {
                    FrameError::NotRoce
                });
            }
            grh.copy_from_slice(ip.slice());
            (
                if v1 { NetKind::V1 } else { NetKind::V6 },
                ip.source(),
                ip.destination(),
                ip.traffic_class(),
                ip.hop_limit(),
                ip.flow_label().value(),
                40 + usize::from(ip.payload_length()),
            )
        }
        _ => return Err(FrameError::NotRoce),
    };
    // The frame may carry Ethernet padding after the packet; the IP length tells where it ends.
    let packet = l3.get(..l3_len).ok_or(FrameError::Length)?;
    let mut udp_sport = 0;
    if kind != NetKind::V1 {
        let at = kind.header_len() - 8;
        let udp = UdpHeaderSlice::from_slice(packet.get(at..).ok_or(FrameError::Length)?)
            .map_err(|_| FrameError::Length)?;
        if udp.destination_port() != ROCE_V2_UDP_PORT {
            return Err(FrameError::NotRoce);
        }
        if usize::from(udp.length()) != packet.len() - at {
            return Err(FrameError::Length);
        }
        udp_sport = udp.source_port();
    }
    let body_len = packet
        .len()
        .checked_sub(kind.header_len() + ICRC_LEN)
        .ok_or(FrameError::Length)?;
    let (covered, icrc_bytes) = packet.split_at(kind.header_len() + body_len);
    let mut received = [0u8; 4];
    received.copy_from_slice(icrc_bytes);
    let icrc_ok = icrc::matches(kind, covered, u32::from_le_bytes(received));
    Ok(RoceFrame {
        dmac: eth.destination,
        smac: eth.source,
        vlan,
        kind,
        sgid,
        dgid,
        traffic_class: tc,
        hop_limit: hop,
        flow_label: fl,
        udp_sport,
        grh,
        transport: &covered[kind.header_len()..],
        icrc_ok,
    })
}

/// Where the converged port sends a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Steer {
    /// A RoCE frame for this port: the engine.
    Engine,
    /// Anything else: the host's Ethernet function (or the wire, in the other direction).
    Host,
}

/// Steers a frame arriving from the wire: RoCE (ethertype 0x8915, or UDP port 4791 over IPv4
/// or IPv6, the first fragment only) addressed to `mac` or to a multicast MAC (a group's
/// datagrams) goes to the engine, all else to the host. Only looks at headers; never panics.
pub fn classify(frame: &[u8], mac: &[u8; 6]) -> Steer {
    let Ok((eth, _, ether_type, l3)) = link(frame) else {
        return Steer::Host;
    };
    if &eth.destination != mac && eth.destination[0] & 1 == 0 {
        return Steer::Host;
    }
    let udp_dport = |l4: Option<&[u8]>| {
        l4.and_then(|b| UdpHeaderSlice::from_slice(b).ok())
            .is_some_and(|u| u.destination_port() == ROCE_V2_UDP_PORT)
    };
    let roce = match ether_type {
        ROCE_V1_ETHERTYPE => true,
        0x0800 => Ipv4HeaderSlice::from_slice(l3).is_ok_and(|ip| {
            ip.protocol() == IpNumber::UDP
                && ip.fragments_offset().value() == 0
                && udp_dport(l3.get(usize::from(ip.ihl()) * 4..))
        }),
        0x86dd => Ipv6HeaderSlice::from_slice(l3)
            .is_ok_and(|ip| ip.next_header() == IpNumber::UDP && udp_dport(l3.get(40..))),
        _ => false,
    };
    if roce {
        Steer::Engine
    } else {
        Steer::Host
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind of frame: (RoCE v1, IPv4, VLAN): v2 over IPv4 and IPv6, v1, and tagged.
    const FLAVOURS: [(bool, bool, Option<u16>); 4] = [
        (false, true, None),
        (false, false, None),
        (true, false, None),
        (false, true, Some(42)),
    ];

    fn route(v1: bool, v4: bool) -> Route {
        let gid = |last: u8| {
            if v4 {
                mapped([10, 0, 0, last])
            } else {
                let mut g = [0u8; 16];
                g[0] = 0xfe;
                g[1] = 0x80;
                g[15] = last;
                g
            }
        };
        Route {
            smac: [2, 0, 0, 0, 0, 1],
            dmac: [2, 0, 0, 0, 0, 2],
            vlan: None,
            v1,
            sgid: gid(1),
            dgid: gid(2),
            traffic_class: 0x12,
            hop_limit: 64,
            flow_label: 0x12345,
        }
    }

    #[test]
    fn frames_round_trip_in_every_flavour() {
        for (v1, v4, vlan) in FLAVOURS {
            let r = Route {
                vlan,
                ..route(v1, v4)
            };
            let transport = [0x04, 0, 0xff, 0xff, 0, 0, 0, 7, 0x80, 0, 0, 1, 9, 9, 9, 9];
            let mut frame = Vec::new();
            build(&r, &transport, &mut frame);
            let p = parse(&frame).expect("parse");
            assert!(p.icrc_ok, "{v1} {v4}");
            assert_eq!(p.transport, &transport);
            assert_eq!((p.sgid, p.dgid, p.vlan), (r.sgid, r.dgid, vlan));
            assert_eq!((p.traffic_class, p.hop_limit), (0x12, 64));
            assert_eq!(classify(&frame, &r.dmac), Steer::Engine);
            assert_eq!(classify(&frame, &r.smac), Steer::Host);
            // Ethernet padding after the packet is ignored.
            frame.extend_from_slice(&[0; 7]);
            assert!(parse(&frame).expect("padded").icrc_ok);
            frame.truncate(frame.len() - 7);
            let last = frame.len() - 6;
            frame[last] ^= 1;
            assert!(!parse(&frame).expect("corrupt").icrc_ok);
        }
    }

    /// A frame built over the bytes of an older, longer one (a buffer given back) is the frame
    /// built in an empty buffer, byte for byte: nothing of the old frame shows through, not in
    /// the headers, the pad or the payload its writer puts in place.
    #[test]
    fn a_frame_built_over_an_old_one_keeps_nothing_of_it() {
        use super::super::headers::Headers;
        use super::super::opcode::op;
        for (v1, v4, vlan) in FLAVOURS {
            let r = Route {
                vlan,
                ..route(v1, v4)
            };
            // A payload whose length needs pad.
            let payload: Vec<u8> = (0..1021u32).map(|i| i as u8).collect();
            let packet = Headers::new(op::RC_SEND_ONLY, 7, 100);
            let write = |w: &mut FrameWriter<'_>| {
                build_with(&r, packet.transport_len(payload.len()), w, |w| {
                    packet.write_with(payload.len(), w, |room| {
                        room.copy_from_slice(&payload);
                        Ok::<(), Infallible>(())
                    })
                })
            };
            let mut fresh = Vec::new();
            let mut w = FrameWriter::over(&mut fresh);
            let Ok(()) = write(&mut w);
            w.finish();
            let mut reused = vec![0xa5; MAX_FRAME];
            let mut w = FrameWriter::over(&mut reused);
            let Ok(()) = write(&mut w);
            w.finish();
            assert_eq!(reused, fresh, "{v1} {v4} {vlan:?}");
            assert!(parse(&reused).expect("parse").icrc_ok);
        }
    }

    #[test]
    fn udp_source_port_follows_the_flow_label() {
        let r = route(false, true);
        assert_eq!(r.udp_sport(), 0xc000 | (0x2345 ^ 0x4));
        assert_eq!(flow_label_for(0, 5), 0);
        assert!(flow_label_for(0x11, 0x22) <= FLOW_LABEL_MASK);
    }

    #[test]
    fn other_traffic_is_not_roce() {
        let arp = [0xffu8; 42];
        assert_eq!(classify(&arp, &[0xff; 6]), Steer::Host);
        assert_eq!(classify(&[], &[0; 6]), Steer::Host);
        assert_eq!(parse(&[0u8; 10]), Err(FrameError::Length));
    }
}
