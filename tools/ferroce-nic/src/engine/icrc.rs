// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The invariant CRC (IBA 7.8.1, RoCEv2 annex A17.3.3): a CRC-32 (the Ethernet polynomial, as
//! zlib computes it) over 8 bytes of 0xff standing for the LRH, then the network header, the UDP
//! header (v2) and the transport headers with the variant fields masked to ones, then the
//! payload and pad. It is sent least significant byte first. Masked: IPv4 TOS, TTL and header
//! checksum; IPv6/GRH traffic class, flow label and hop limit; the UDP checksum; BTH resv8a.
//! This is what Linux rxe computes (rxe_icrc.c: its seed 0xdebb20e3 is the CRC state after the
//! eight 0xff bytes).
//!
//! But for FLUSH (IBTA 1.5, opcode 0x1c): rxe's opcode table gives FLUSH no payload offset,
//! so rxe takes the packet from its BTH on for the payload and its ICRC covers the transport
//! headers twice (Linux 7.3, rxe_icrc.c with rxe_opcode.c). rxe drops a FLUSH whose ICRC is
//! the standard one. ferroce sends FLUSH with rxe's ICRC, the one other implementation there
//! is, and takes either on receive ([`matches()`]).

use super::opcode::{op, BTH_LEN, FETH_LEN, RETH_LEN};

/// The network header in front of the BTH.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetKind {
    /// RoCE v1: a 40-byte GRH.
    V1,
    /// RoCE v2 over IPv4 (20-byte header, no options) and UDP.
    V4,
    /// RoCE v2 over IPv6 (40-byte header, no extensions) and UDP.
    V6,
}

impl NetKind {
    /// Bytes from the start of the network header to the BTH.
    pub const fn header_len(self) -> usize {
        match self {
            NetKind::V1 => 40,
            NetKind::V4 => 20 + 8,
            NetKind::V6 => 40 + 8,
        }
    }
}

const MAX_MASKED: usize = 40 + 8 + BTH_LEN;

/// Copies the headers up to and including the BTH with the variant fields set to ones.
fn masked_headers(kind: NetKind, packet: &[u8]) -> Option<([u8; MAX_MASKED], usize)> {
    let len = kind.header_len() + BTH_LEN;
    let mut buf = [0u8; MAX_MASKED];
    buf.get_mut(..len)?.copy_from_slice(packet.get(..len)?);
    match kind {
        NetKind::V4 => {
            buf[1] = 0xff; // TOS (DSCP and ECN)
            buf[8] = 0xff; // TTL
            buf[10] = 0xff; // header checksum
            buf[11] = 0xff;
            buf[26] = 0xff; // UDP checksum
            buf[27] = 0xff;
        }
        NetKind::V6 | NetKind::V1 => {
            // Version stays; traffic class and flow label become ones.
            buf[0] |= 0x0f;
            buf[1] = 0xff;
            buf[2] = 0xff;
            buf[3] = 0xff;
            buf[7] = 0xff; // hop limit
            if kind == NetKind::V6 {
                buf[46] = 0xff; // UDP checksum
                buf[47] = 0xff;
            }
        }
    }
    // BTH resv8a.
    buf[kind.header_len() + 4] = 0xff;
    Some((buf, len))
}

/// The FLUSH's transport headers (BTH, FETH, RETH), which rxe's ICRC covers twice.
const FLUSH_HEADERS: usize = BTH_LEN + FETH_LEN + RETH_LEN;

fn crc(kind: NetKind, packet: &[u8], rxe_flush: bool) -> Option<u32> {
    let (masked, len) = masked_headers(kind, packet)?;
    let mut crc = crc32fast::Hasher::new();
    crc.update(&[0xff; 8]);
    crc.update(&masked[..len]);
    crc.update(packet.get(len..)?);
    if rxe_flush {
        let transport = kind.header_len();
        crc.update(packet.get(transport..transport + FLUSH_HEADERS)?);
    }
    Some(crc.finalize())
}

/// Whether `packet` is a FLUSH request (its BTH opcode).
fn is_flush(kind: NetKind, packet: &[u8]) -> bool {
    packet.get(kind.header_len()) == Some(&op::RC_FLUSH)
}

/// The ICRC to send with `packet`, which runs from the network header to the end of the
/// padded payload (the ICRC itself excluded): the standard one, or for a FLUSH rxe's. `None`
/// if it is shorter than its headers.
pub fn compute(kind: NetKind, packet: &[u8]) -> Option<u32> {
    crc(kind, packet, is_flush(kind, packet))
}

/// Whether `received` is the ICRC of `packet`: the standard one, or for a FLUSH also rxe's.
pub fn matches(kind: NetKind, packet: &[u8], received: u32) -> bool {
    crc(kind, packet, false) == Some(received)
        || (is_flush(kind, packet) && crc(kind, packet, true) == Some(received))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variant_fields_do_not_change_the_icrc() {
        let mut packet = vec![0u8; 28 + 12 + 8];
        packet[0] = 0x45;
        packet[9] = 17;
        let base = compute(NetKind::V4, &packet).expect("icrc");
        for at in [1, 8, 10, 11, 26, 27, 28 + 4] {
            packet[at] ^= 0x5a;
            assert_eq!(compute(NetKind::V4, &packet), Some(base), "byte {at}");
        }
        packet[28 + 5] ^= 1;
        assert_ne!(compute(NetKind::V4, &packet), Some(base), "QPN is covered");
    }

    #[test]
    fn short_packets_have_no_icrc() {
        assert_eq!(compute(NetKind::V6, &[0u8; 59]), None);
        assert!(compute(NetKind::V6, &[0u8; 60]).is_some());
    }

    /// A FLUSH Linux 7.3 rxe sent (verbs-interop's capture): its ICRC covers the transport
    /// headers twice.
    const RXE_FLUSH: [u8; 78] = [
        0x52, 0x54, 0x00, 0xfe, 0x00, 0x01, 0x52, 0x54, 0x00, 0xfe, 0x00, 0x02, 0x08, 0x00, 0x45,
        0x00, 0x00, 0x40, 0xda, 0x0a, 0x40, 0x00, 0x40, 0x11, 0x4c, 0xa0, 0x0a, 0x00, 0x00, 0x02,
        0x0a, 0x00, 0x00, 0x01, 0xc0, 0x9a, 0x12, 0xb7, 0x00, 0x2c, 0x00, 0x00, 0x1c, 0x00, 0xff,
        0xff, 0x00, 0x00, 0x00, 0x07, 0x80, 0x00, 0x56, 0x7d, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00,
        0x56, 0x54, 0x08, 0xf4, 0xc0, 0x00, 0x00, 0x00, 0x02, 0x55, 0x00, 0x00, 0x10, 0x00, 0x12,
        0x69, 0x1c, 0x1a,
    ];
    /// A FLUSH with the standard ICRC (ferroce sent it before it sent rxe's; rxe dropped it).
    const STANDARD_FLUSH: [u8; 78] = [
        0x52, 0x54, 0x00, 0xfe, 0x00, 0x02, 0x52, 0x54, 0x00, 0xfe, 0x00, 0x01, 0x08, 0x00, 0x45,
        0x00, 0x00, 0x40, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x26, 0xab, 0x0a, 0x00, 0x00, 0x01,
        0x0a, 0x00, 0x00, 0x02, 0xc0, 0x4c, 0x12, 0xb7, 0x00, 0x2c, 0x00, 0x00, 0x1c, 0x00, 0xff,
        0xff, 0x00, 0x00, 0x00, 0x13, 0x80, 0x00, 0x56, 0x7d, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00,
        0x55, 0xbe, 0x04, 0xbf, 0x90, 0x00, 0x00, 0x00, 0x04, 0x92, 0x00, 0x00, 0x10, 0x00, 0xda,
        0xcb, 0x3b, 0xb4,
    ];

    #[test]
    fn flush_takes_rxe_s_icrc_and_the_standard_one_and_sends_rxe_s() {
        let icrc = |f: &[u8]| u32::from_le_bytes([f[74], f[75], f[76], f[77]]);
        for frame in [RXE_FLUSH, STANDARD_FLUSH] {
            assert!(matches(NetKind::V4, &frame[14..74], icrc(&frame)));
        }
        assert_eq!(
            compute(NetKind::V4, &RXE_FLUSH[14..74]),
            Some(icrc(&RXE_FLUSH))
        );
        assert_ne!(
            compute(NetKind::V4, &STANDARD_FLUSH[14..74]),
            Some(icrc(&STANDARD_FLUSH))
        );
        // Any other opcode: the standard ICRC only (this one made an RDMA WRITE ONLY).
        let mut write = STANDARD_FLUSH;
        write[42] = 0x0a;
        assert!(!matches(NetKind::V4, &write[14..74], icrc(&RXE_FLUSH)));
    }
}
