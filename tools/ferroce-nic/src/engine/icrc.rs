// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The invariant CRC (IBA 7.8.1, RoCEv2 annex A17.3.3): a CRC-32 (the Ethernet polynomial, as
//! zlib computes it) over 8 bytes of 0xff standing for the LRH, then the network header, the UDP
//! header (v2) and the transport headers with the variant fields masked to ones, then the
//! payload and pad. It is sent least significant byte first. Masked: IPv4 TOS, TTL and header
//! checksum; IPv6/GRH traffic class, flow label and hop limit; the UDP checksum; BTH resv8a.
//! This is what Linux rxe computes (rxe_icrc.c: its seed 0xdebb20e3 is the CRC state after the
//! eight 0xff bytes).

use super::opcode::BTH_LEN;

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

/// The ICRC of `packet`, which runs from the network header to the end of the padded payload
/// (the ICRC itself excluded). `None` if it is shorter than its headers.
pub fn compute(kind: NetKind, packet: &[u8]) -> Option<u32> {
    let (masked, len) = masked_headers(kind, packet)?;
    let mut crc = crc32fast::Hasher::new();
    crc.update(&[0xff; 8]);
    crc.update(&masked[..len]);
    crc.update(packet.get(len..)?);
    Some(crc.finalize())
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
}
