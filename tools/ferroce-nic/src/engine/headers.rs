// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Base and extended transport headers (IBA 9.2–9.3): big-endian on the wire, decoded into plain
//! structs. [`Packet::parse`] splits the transport part of a frame (BTH to the end of the padded
//! payload) according to the opcode table; [`Headers`] writes one.

use std::convert::Infallible;

use super::frame::FrameWriter;
use super::opcode::{self, flag, OpInfo};
use ferroce_hw::PSN_MASK;

/// The P_Key every packet carries (the default, full-membership partition).
pub const DEFAULT_PKEY: u16 = 0xffff;

/// Base transport header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bth {
    /// Opcode.
    pub opcode: u8,
    /// Solicited event.
    pub solicited: bool,
    /// Migration state.
    pub migreq: bool,
    /// Pad count (0..=3).
    pub pad: u8,
    /// Transport header version (0).
    pub tver: u8,
    /// Partition key.
    pub pkey: u16,
    /// Destination QP (24 bits).
    pub dest_qpn: u32,
    /// Acknowledge request.
    pub ack_req: bool,
    /// Packet sequence number (24 bits).
    pub psn: u32,
}

impl Bth {
    /// Encodes the 12 bytes.
    pub fn encode(&self) -> [u8; 12] {
        let mut b = [0u8; 12];
        b[0] = self.opcode;
        b[1] = (u8::from(self.solicited) << 7)
            | (u8::from(self.migreq) << 6)
            | ((self.pad & 3) << 4)
            | (self.tver & 0xf);
        b[2..4].copy_from_slice(&self.pkey.to_be_bytes());
        // Byte 4 is reserved (resv8a), zero on transmit.
        b[4..8].copy_from_slice(&(self.dest_qpn & 0x00ff_ffff).to_be_bytes());
        let word = (u32::from(self.ack_req) << 31) | (self.psn & PSN_MASK);
        b[8..12].copy_from_slice(&word.to_be_bytes());
        b
    }

    /// Decodes the first 12 bytes of `b`.
    pub fn decode(b: &[u8; 12]) -> Self {
        let qp = u32::from_be_bytes([b[4], b[5], b[6], b[7]]);
        let word = u32::from_be_bytes([b[8], b[9], b[10], b[11]]);
        Self {
            opcode: b[0],
            solicited: b[1] & 0x80 != 0,
            migreq: b[1] & 0x40 != 0,
            pad: (b[1] >> 4) & 3,
            tver: b[1] & 0xf,
            pkey: u16::from_be_bytes([b[2], b[3]]),
            dest_qpn: qp & 0x00ff_ffff,
            ack_req: word & (1 << 31) != 0,
            psn: word & PSN_MASK,
        }
    }
}

/// RDMA extended transport header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reth {
    /// Remote virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// DMA length of the whole operation.
    pub len: u32,
}

/// ACK extended transport header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Aeth {
    /// Syndrome (IBA table 44).
    pub syndrome: u8,
    /// Message sequence number (24 bits).
    pub msn: u32,
}

/// AETH syndromes.
pub mod syndrome {
    /// ACK with unlimited credits (the credit field 0b11111, as rxe sends).
    pub const ACK: u8 = 0x1f;
    /// RNR NAK; the low five bits are the RNR timer code.
    pub const RNR_NAK: u8 = 0x20;
    /// NAK: PSN sequence error.
    pub const NAK_PSN_SEQ_ERROR: u8 = 0x60;
    /// NAK: invalid request.
    pub const NAK_INVALID_REQUEST: u8 = 0x61;
    /// NAK: remote access error.
    pub const NAK_REMOTE_ACCESS: u8 = 0x62;
    /// NAK: remote operational error.
    pub const NAK_REMOTE_OP: u8 = 0x63;

    /// The kind encoded in bits 6:5.
    pub const fn kind(syndrome: u8) -> u8 {
        syndrome & 0x60
    }
    /// Kind: ACK.
    pub const KIND_ACK: u8 = 0x00;
    /// Kind: RNR NAK.
    pub const KIND_RNR: u8 = 0x20;
    /// Kind: NAK.
    pub const KIND_NAK: u8 = 0x60;
}

/// Atomic extended transport header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AtomicEth {
    /// Remote virtual address (8-byte aligned).
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Swap (CMP_SWAP) or add (FETCH_ADD) value.
    pub swap_add: u64,
    /// Compare value.
    pub compare: u64,
}

/// Flush extended transport header (IBTA 1.5): what a FLUSH makes of the writes before it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Feth {
    /// Placement type, `FLUSH_GLOBAL` and/or `FLUSH_PERSISTENT` (bits 3-0).
    pub placement: u8,
    /// Selectivity level, `FLUSH_RANGE` or `FLUSH_MR` (bits 5-4).
    pub level: u8,
}

impl Feth {
    fn encode(self) -> u32 {
        u32::from(self.placement & 0xf) | u32::from(self.level & 0x3) << 4
    }

    fn decode(w: u32) -> Self {
        Self {
            placement: (w & 0xf) as u8,
            level: ((w >> 4) & 0x3) as u8,
        }
    }
}

/// Datagram extended transport header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Deth {
    /// Q_Key.
    pub qkey: u32,
    /// Source QP (24 bits).
    pub src_qpn: u32,
}

/// A packet's transport headers, as parsed from a frame or to be written into one: the BTH and
/// the extended headers its opcode has ([`OpInfo`]'s flags), in one type for both directions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Headers {
    /// Base transport header (when writing, `pad` is computed from the payload).
    pub bth: Bth,
    /// XRCETH: the SRQ an XRC request names at its target (24 bits; the reserved byte is
    /// ignored).
    pub xrceth: Option<u32>,
    /// FETH.
    pub feth: Option<Feth>,
    /// RETH.
    pub reth: Option<Reth>,
    /// AETH.
    pub aeth: Option<Aeth>,
    /// AtomicETH.
    pub atomic: Option<AtomicEth>,
    /// AtomicAckETH: the original remote value.
    pub atomic_ack: Option<u64>,
    /// DETH.
    pub deth: Option<Deth>,
    /// Immediate data, as the four wire bytes.
    pub imm: Option<[u8; 4]>,
    /// IETH: the R_Key to invalidate.
    pub ieth: Option<u32>,
}

/// A decoded transport packet: its headers (reached through it: `pkt.reth`), its opcode's
/// table entry and its payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<'a> {
    /// The headers.
    pub headers: Headers,
    /// The opcode's table entry.
    pub info: &'static OpInfo,
    /// Payload without pad.
    pub payload: &'a [u8],
}

impl std::ops::Deref for Packet<'_> {
    type Target = Headers;

    fn deref(&self) -> &Headers {
        &self.headers
    }
}

/// Why a transport packet is malformed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// Shorter than its headers.
    #[error("truncated transport headers")]
    Truncated,
    /// Opcode not implemented.
    #[error("unsupported opcode {0:#04x}")]
    Opcode(u8),
    /// Non-zero transport version.
    #[error("transport version {0}")]
    Version(u8),
    /// Payload on an opcode without payload, or a pad larger than the payload.
    #[error("bad payload length")]
    Length,
}

fn be32(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    if let Some(s) = b.get(at..at + 4) {
        w.copy_from_slice(s);
    }
    u32::from_be_bytes(w)
}

fn be64(b: &[u8], at: usize) -> u64 {
    (u64::from(be32(b, at)) << 32) | u64::from(be32(b, at + 4))
}

impl<'a> Packet<'a> {
    /// Splits `bytes` (BTH through the padded payload, without ICRC).
    pub fn parse(bytes: &'a [u8]) -> Result<Self, HeaderError> {
        let bth_bytes: &[u8; 12] = bytes
            .get(..opcode::BTH_LEN)
            .and_then(|b| b.try_into().ok())
            .ok_or(HeaderError::Truncated)?;
        let bth = Bth::decode(bth_bytes);
        if bth.tver != 0 {
            return Err(HeaderError::Version(bth.tver));
        }
        let info = opcode::lookup(bth.opcode).ok_or(HeaderError::Opcode(bth.opcode))?;
        let header_len = info.header_len();
        if bytes.len() < header_len {
            return Err(HeaderError::Truncated);
        }
        let mut at = opcode::BTH_LEN;
        let mut take = |present: bool, len: usize| {
            let start = at;
            if present {
                at += len;
            }
            present.then_some(start)
        };
        let xrceth =
            take(info.has(flag::XRCETH), opcode::XRCETH_LEN).map(|o| be32(bytes, o) & 0x00ff_ffff);
        let deth = take(info.has(flag::DETH), opcode::DETH_LEN).map(|o| Deth {
            qkey: be32(bytes, o),
            src_qpn: be32(bytes, o + 4) & 0x00ff_ffff,
        });
        let feth =
            take(info.has(flag::FETH), opcode::FETH_LEN).map(|o| Feth::decode(be32(bytes, o)));
        let reth = take(info.has(flag::RETH), opcode::RETH_LEN).map(|o| Reth {
            va: be64(bytes, o),
            rkey: be32(bytes, o + 8),
            len: be32(bytes, o + 12),
        });
        let atomic = take(info.has(flag::ATMETH), opcode::ATMETH_LEN).map(|o| AtomicEth {
            va: be64(bytes, o),
            rkey: be32(bytes, o + 8),
            swap_add: be64(bytes, o + 12),
            compare: be64(bytes, o + 20),
        });
        let aeth = take(info.has(flag::AETH), opcode::AETH_LEN).map(|o| {
            let w = be32(bytes, o);
            Aeth {
                syndrome: (w >> 24) as u8,
                msn: w & 0x00ff_ffff,
            }
        });
        let atomic_ack = take(info.has(flag::ATMACK), opcode::ATMACK_LEN).map(|o| be64(bytes, o));
        let imm =
            take(info.has(flag::IMMDT), opcode::IMMDT_LEN).map(|o| be32(bytes, o).to_be_bytes());
        let ieth = take(info.has(flag::IETH), opcode::IETH_LEN).map(|o| be32(bytes, o));
        let body = bytes.get(header_len..).ok_or(HeaderError::Truncated)?;
        let pad = usize::from(bth.pad);
        if body.len() < pad || (!info.has(flag::PAYLOAD) && body.len() != pad) {
            return Err(HeaderError::Length);
        }
        Ok(Self {
            headers: Headers {
                bth,
                xrceth,
                feth,
                reth,
                aeth,
                atomic,
                atomic_ack,
                deth,
                imm,
                ieth,
            },
            info,
            payload: &body[..body.len() - pad],
        })
    }
}

impl Headers {
    /// The headers of a packet with `opcode`, destination QP and PSN, to be filled in.
    pub fn new(opcode: u8, dest_qpn: u32, psn: u32) -> Self {
        Self {
            bth: Bth {
                opcode,
                pkey: DEFAULT_PKEY,
                dest_qpn,
                psn: psn & PSN_MASK,
                ..Bth::default()
            },
            ..Self::default()
        }
    }

    /// Bytes [`write`](Self::write) appends for a payload of `payload_len`: the headers of the
    /// opcode, the payload and its pad.
    pub fn transport_len(&self, payload_len: usize) -> usize {
        let headers = opcode::lookup(self.bth.opcode).map_or(opcode::BTH_LEN, OpInfo::header_len);
        headers + payload_len.next_multiple_of(4)
    }

    /// Appends headers, `payload` and pad to `out`. Headers the opcode does not have are
    /// skipped; headers it has but that were not given are written as zeros.
    pub fn write(&self, payload: &[u8], out: &mut Vec<u8>) {
        let mut w = FrameWriter::after(out);
        let copied = self.write_with(payload.len(), &mut w, |room| {
            room.copy_from_slice(payload);
            Ok::<(), Infallible>(())
        });
        let Ok(()) = copied;
        w.finish();
    }

    /// Writes headers, a payload of `payload_len` bytes and pad into `out`, as
    /// [`write`](Self::write) does, with `fill` writing the payload in its place in `out`
    /// (gathering it from guest memory there, not through a buffer of its own). `fill` must
    /// write the whole of its slice ([`FrameWriter::room`]). If it fails, `out` is left partly
    /// written and the error returned.
    pub fn write_with<E>(
        &self,
        payload_len: usize,
        out: &mut FrameWriter<'_>,
        fill: impl FnOnce(&mut [u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        let info = opcode::lookup(self.bth.opcode);
        let has = |f| info.is_some_and(|i| i.has(f));
        let pad = ((4 - payload_len % 4) % 4) as u8;
        let bth = Bth { pad, ..self.bth };
        out.put(&bth.encode());
        if has(flag::XRCETH) {
            out.put(&(self.xrceth.unwrap_or_default() & 0x00ff_ffff).to_be_bytes());
        }
        if has(flag::DETH) {
            let d = self.deth.unwrap_or_default();
            out.put(&d.qkey.to_be_bytes());
            out.put(&(d.src_qpn & 0x00ff_ffff).to_be_bytes());
        }
        if has(flag::FETH) {
            out.put(&self.feth.unwrap_or_default().encode().to_be_bytes());
        }
        if has(flag::RETH) {
            let r = self.reth.unwrap_or_default();
            out.put(&r.va.to_be_bytes());
            out.put(&r.rkey.to_be_bytes());
            out.put(&r.len.to_be_bytes());
        }
        if has(flag::ATMETH) {
            let a = self.atomic.unwrap_or_default();
            out.put(&a.va.to_be_bytes());
            out.put(&a.rkey.to_be_bytes());
            out.put(&a.swap_add.to_be_bytes());
            out.put(&a.compare.to_be_bytes());
        }
        if has(flag::AETH) {
            let a = self.aeth.unwrap_or_default();
            let w = (u32::from(a.syndrome) << 24) | (a.msn & 0x00ff_ffff);
            out.put(&w.to_be_bytes());
        }
        if has(flag::ATMACK) {
            out.put(&self.atomic_ack.unwrap_or_default().to_be_bytes());
        }
        if has(flag::IMMDT) {
            out.put(&self.imm.unwrap_or_default());
        }
        if has(flag::IETH) {
            out.put(&self.ieth.unwrap_or_default().to_be_bytes());
        }
        fill(out.room(payload_len))?;
        out.put(&[0; 3][..usize::from(pad)]);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::opcode::op;
    use super::*;

    #[test]
    fn bth_bit_layout() {
        let bth = Bth {
            opcode: op::RC_SEND_ONLY,
            solicited: true,
            migreq: false,
            pad: 3,
            tver: 0,
            pkey: 0xffff,
            dest_qpn: 0x12_3456,
            ack_req: true,
            psn: 0xab_cdef,
        };
        let bytes = bth.encode();
        assert_eq!(
            bytes,
            [0x04, 0xb0, 0xff, 0xff, 0x00, 0x12, 0x34, 0x56, 0x80, 0xab, 0xcd, 0xef]
        );
        assert_eq!(Bth::decode(&bytes), bth);
    }

    #[test]
    fn an_xrc_request_carries_its_srq_number_right_after_the_bth() {
        let mut b = Headers::new(op::XRC_WRITE_ONLY, 7, 100);
        b.xrceth = Some(0xab_cdef);
        b.reth = Some(Reth {
            va: 0x1000,
            rkey: 0x55,
            len: 3,
        });
        let mut out = Vec::new();
        b.write(b"abc", &mut out);
        assert_eq!(out.len(), b.transport_len(3));
        assert_eq!(
            out.len(),
            12 + 4 + 16 + 4,
            "BTH, XRCETH, RETH, payload and pad"
        );
        assert_eq!(out[12..16], [0x00, 0xab, 0xcd, 0xef], "the XRCETH");
        assert_eq!(out[16..24], 0x1000u64.to_be_bytes(), "the RETH follows it");
        // The reserved byte is ignored on receive.
        out[12] = 0xff;
        let p = Packet::parse(&out).expect("parse");
        assert_eq!(
            (p.xrceth, p.reth, p.payload),
            (Some(0xab_cdef), b.reth, &b"abc"[..])
        );
        // An XRC response has none, and an RC request neither.
        let mut ack = Vec::new();
        Headers::new(op::XRC_ACKNOWLEDGE, 7, 100).write(&[], &mut ack);
        assert_eq!(
            Packet::parse(&ack).map(|p| (p.xrceth, ack.len())),
            Ok((None, 16))
        );
        let mut rc = Vec::new();
        Headers::new(op::RC_SEND_ONLY, 7, 100).write(b"x", &mut rc);
        assert_eq!(Packet::parse(&rc).map(|p| p.xrceth), Ok(None));
    }

    #[test]
    fn packets_round_trip() {
        let mut b = Headers::new(op::RC_WRITE_ONLY_IMM, 7, 100);
        b.reth = Some(Reth {
            va: 0x1122_3344_5566_7788,
            rkey: 0xaabb_ccdd,
            len: 5,
        });
        b.imm = Some([1, 2, 3, 4]);
        let mut out = Vec::new();
        b.write(b"hello", &mut out);
        assert_eq!(out.len(), 12 + 16 + 4 + 5 + 3);
        let p = Packet::parse(&out).expect("parse");
        assert_eq!(p.bth.pad, 3);
        assert_eq!(p.reth, b.reth);
        assert_eq!(p.imm, Some([1, 2, 3, 4]));
        assert_eq!(p.payload, b"hello");

        let mut a = Headers::new(op::RC_ATOMIC_ACKNOWLEDGE, 9, 1);
        a.aeth = Some(Aeth {
            syndrome: syndrome::ACK,
            msn: 0x00ab_cdef,
        });
        a.atomic_ack = Some(0x0102_0304_0506_0708);
        out.clear();
        a.write(&[], &mut out);
        let p = Packet::parse(&out).expect("parse");
        assert_eq!(p.aeth, a.aeth);
        assert_eq!(p.atomic_ack, a.atomic_ack);

        // FLUSH: the FETH comes before the RETH (rxe's layout); bits 3-0 and 5-4.
        let mut f = Headers::new(op::RC_FLUSH, 9, 2);
        f.feth = Some(Feth {
            placement: 2,
            level: 1,
        });
        f.reth = b.reth;
        out.clear();
        f.write(&[], &mut out);
        assert_eq!(out.len(), 12 + 4 + 16);
        assert_eq!(&out[12..16], &[0, 0, 0, 0x12]);
        let p = Packet::parse(&out).expect("parse");
        assert_eq!((p.feth, p.reth), (f.feth, f.reth));
        assert!(p.payload.is_empty());
    }

    #[test]
    fn malformed_packets_are_errors() {
        assert_eq!(Packet::parse(&[0; 11]), Err(HeaderError::Truncated));
        let mut out = Vec::new();
        Headers::new(op::RC_ACKNOWLEDGE, 1, 1).write(&[], &mut out);
        out.push(0);
        assert_eq!(Packet::parse(&out), Err(HeaderError::Length));
        out.truncate(14);
        assert_eq!(Packet::parse(&out), Err(HeaderError::Truncated));
        let mut bad = [0u8; 12];
        bad[0] = 0x15;
        assert_eq!(Packet::parse(&bad), Err(HeaderError::Opcode(0x15)));
        bad[0] = 0;
        bad[1] = 1;
        assert_eq!(Packet::parse(&bad), Err(HeaderError::Version(1)));
    }
}
