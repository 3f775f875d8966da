// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The bodies of the fuzz targets, shared by the libFuzzer targets (`tools/fuzz`, which include
//! this module by path) and the stable tests (`frames.rs`, `hostile.rs` and `fuzz_corpus.rs`,
//! which run them over proptest's inputs and the saved corpus).
//!
//! - The frame body ([`frames`], [`frame_input`]): frames from the wire against a live node, an
//!   RC QP connected to a peer the body plays (receives posted; a WRITE, a READ and an atomic
//!   outstanding; an MR the frames' keys may name) and a UD QP with receives posted, so that
//!   the parsers, the responder and the completer all see them.
//! - The command body ([`commands`]): a hostile driver of the same node, enabled with the real
//!   RoCE engine: raw command entries, doorbells, raw send and receive WQEs and device rounds.
//!
//! Both decode fuzzer bytes with a small [`Reader`] (past the end, every read is zero) and
//! panic only when the device breaks an invariant.

use ferroce_hw::*;
use ferroce_nic::engine::frame;
use ferroce_nic::engine::headers::{Aeth, AtomicEth, Deth, Headers, Packet, Reth};

use super::objects::{
    answer, attach, create_mw, next_key, odp_mr, page_faults, Answer, GROUP_IP, GROUP_MAC,
};
use super::roce::{
    atomic_seg, mapped, rdma_seg, stranger_gid, Conn, Node, Qp, Scripted, MIB, RECV_STRIDE,
};
use super::xrc::{XrcSrq, XRCD};
use super::Guest;

/// Frames one input of the frame body injects at most.
pub const MAX_FRAMES: usize = 24;

/// Actions one input of the command body runs at most.
pub const MAX_ACTIONS: usize = 64;

/// CQEs the command body keeps for its caller.
pub const KEPT_CQES: usize = 256;

/// Q_Key of the UD QP.
pub const UD_QKEY: u32 = 0x1111;

/// The MAC of the node (`Node::new(1, ..)`).
pub const NODE_MAC: [u8; 6] = [0x52, 0x54, 0, 0, 0, 1];

/// The wr_ids [`busy`] leaves outstanding: the RC WRITE, READ and atomic, the RC receives,
/// the UD ones and the XRC SRQ's (the window's bind, 4, has completed: its CQE is taken).
pub const POSTED_WR_IDS: [u64; 15] = [
    1, 2, 3, 100, 101, 102, 103, 200, 201, 202, 203, 300, 301, 302, 303,
];

/// Where [`busy`]'s on-demand MR lies in the node's buffer, and how long.
pub const ODP_AT: u64 = 0x8_0000;
pub const ODP_LEN: u64 = 0x4_0000;

/// Where [`busy`]'s type 2 window is bound in the node's MR, and how long.
pub const WINDOW_AT: u64 = 0x4000;
pub const WINDOW_LEN: u64 = 0x2000;

/// The rights the peer has on the RC QP: all, flushes included.
pub const REMOTE_ACCESS: u32 = ACCESS_REMOTE_WRITE
    | ACCESS_REMOTE_READ
    | ACCESS_REMOTE_ATOMIC
    | ACCESS_FLUSH_GLOBAL
    | ACCESS_FLUSH_PERSISTENT;

/// Reads fuzzer bytes front to back; past the end every read gives zeros.
pub struct Reader<'a> {
    data: &'a [u8],
}

impl<'a> Reader<'a> {
    /// A reader of `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Self { data }
    }

    /// Whether all bytes were read.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The next byte, or 0.
    pub fn u8(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&byte, rest)) => {
                self.data = rest;
                byte
            }
            None => 0,
        }
    }

    /// Fills `out` with the next bytes (zeros past the end).
    pub fn fill(&mut self, out: &mut [u8]) {
        let n = out.len().min(self.data.len());
        let (head, rest) = self.data.split_at(n);
        out[..n].copy_from_slice(head);
        out[n..].fill(0);
        self.data = rest;
    }

    /// The next `n` bytes, or fewer at the end.
    pub fn take(&mut self, n: usize) -> Vec<u8> {
        let (head, rest) = self.data.split_at(n.min(self.data.len()));
        self.data = rest;
        head.to_vec()
    }

    /// A little-endian u16.
    pub fn u16(&mut self) -> u16 {
        let mut b = [0u8; 2];
        self.fill(&mut b);
        u16::from_le_bytes(b)
    }

    /// A little-endian u32.
    pub fn u32(&mut self) -> u32 {
        let mut b = [0u8; 4];
        self.fill(&mut b);
        u32::from_le_bytes(b)
    }

    /// A little-endian u64.
    pub fn u64(&mut self) -> u64 {
        let mut b = [0u8; 8];
        self.fill(&mut b);
        u64::from_le_bytes(b)
    }
}

// --- the frame body -----------------------------------------------------------------------

/// Where a frame is addressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dest {
    /// The connected RC QP (an XRC opcode: the XRC_TGT QP, naming its XRC SRQ).
    Rc,
    /// The UD QP.
    Ud,
    /// Any QPN.
    Qpn(u32),
    /// The multicast group the UD QP is attached to (QPN 0xffffff).
    Group,
}

/// One frame the body puts on the wire: a packet the builder makes from these fields (headers
/// the opcode has but that are `None` are zeros, except the DETH), then bytes overwritten.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// BTH opcode.
    pub opcode: u8,
    /// Destination QP.
    pub dest: Dest,
    /// PSN relative to what the RC QP expects (requests) or sent (responses: opcodes
    /// 0x0d..=0x12), -128..=127 in fuzzer bytes; or any.
    pub psn: Result<i32, u32>,
    /// RETH: VA (below 1 MiB: an offset in the MR), R_Key (`None`: the MR's; 1: the
    /// window's; 2: the on-demand MR's) and length.
    pub reth: Option<(u64, Option<u32>, u32)>,
    /// AETH: syndrome and MSN.
    pub aeth: Option<(u8, u32)>,
    /// AtomicETH in the MR: offset (made 8-byte aligned), swap or add, compare.
    pub atomic: Option<(u64, u64, u64)>,
    /// AtomicAckETH: the original value.
    pub atomic_ack: Option<u64>,
    /// DETH: Q_Key and source QPN; `None`: the UD QP's Q_Key from the peer's QPN.
    pub deth: Option<(u32, u32)>,
    /// Immediate data.
    pub imm: Option<[u8; 4]>,
    /// IETH: the R_Key to invalidate.
    pub ieth: Option<u32>,
    /// Payload after the headers.
    pub payload: Vec<u8>,
    /// From another host's GID instead of the peer's.
    pub stranger: bool,
    /// Bytes of the frame to overwrite (offset below 64 KiB, value).
    pub flips: Vec<(usize, u8)>,
}

impl Frame {
    /// A frame of `opcode` to `dest` at PSN offset 0 with no headers, payload or flips.
    pub fn new(opcode: u8, dest: Dest) -> Self {
        Self {
            opcode,
            dest,
            psn: Ok(0),
            reth: None,
            aeth: None,
            atomic: None,
            atomic_ack: None,
            deth: None,
            imm: None,
            ieth: None,
            payload: Vec::new(),
            stranger: false,
            flips: Vec::new(),
        }
    }
}

// Bits of a frame's first byte (the low two: the destination, 2 = a QPN follows, 3 = RC).
const F_PSN_ANY: u8 = 1 << 2;
const F_RETH: u8 = 1 << 3;
const F_AETH: u8 = 1 << 4;
const F_ATOMIC: u8 = 1 << 5;
const F_ATOMIC_ACK: u8 = 1 << 6;
const F_DETH: u8 = 1 << 7;
// Bits of its second byte (bits 3 and 4: the number of flips).
const G_IMM: u8 = 1 << 0;
const G_IETH: u8 = 1 << 1;
const G_STRANGER: u8 = 1 << 2;
const G_RKEY: u8 = 1 << 5;

/// The frames in fuzzer bytes (at most [`MAX_FRAMES`]), the inverse of [`encode_frames`].
pub fn decode_frames(data: &[u8]) -> Vec<Frame> {
    let mut r = Reader::new(data);
    let mut out = Vec::new();
    while !r.is_empty() && out.len() < MAX_FRAMES {
        out.push(decode_frame(&mut r));
    }
    out
}

/// One frame from fuzzer bytes, the inverse of [`encode_frame`].
pub fn decode_frame(r: &mut Reader) -> Frame {
    let (f, g) = (r.u8(), r.u8());
    let dest = match f & 3 {
        1 => Dest::Ud,
        2 => Dest::Qpn(r.u32()),
        3 => Dest::Group,
        _ => Dest::Rc,
    };
    let psn = if f & F_PSN_ANY != 0 {
        Err(r.u32())
    } else {
        Ok(i32::from(r.u8() as i8))
    };
    let opcode = r.u8();
    let reth = (f & F_RETH != 0).then(|| {
        let va = r.u64();
        let rkey = (g & G_RKEY != 0).then(|| r.u32());
        (va, rkey, r.u32())
    });
    let aeth = (f & F_AETH != 0).then(|| (r.u8(), r.u32()));
    let atomic = (f & F_ATOMIC != 0).then(|| (r.u64(), r.u64(), r.u64()));
    let atomic_ack = (f & F_ATOMIC_ACK != 0).then(|| r.u64());
    let deth = (f & F_DETH != 0).then(|| (r.u32(), r.u32()));
    let imm = (g & G_IMM != 0).then(|| r.u32().to_le_bytes());
    let ieth = (g & G_IETH != 0).then(|| r.u32());
    let len = usize::from(r.u16());
    let payload = r.take(len);
    let flips = (0..(g >> 3) & 3)
        .map(|_| (usize::from(r.u16()), r.u8()))
        .collect();
    Frame {
        opcode,
        dest,
        psn,
        reth,
        aeth,
        atomic,
        atomic_ack,
        deth,
        imm,
        ieth,
        payload,
        stranger: g & G_STRANGER != 0,
        flips,
    }
}

/// Fuzzer bytes that [`decode_frames`] makes `frames` of (for PSN offsets in -128..=127,
/// payloads below 64 KiB, up to three flips below 64 KiB and up to [`MAX_FRAMES`] frames).
pub fn encode_frames(frames: &[Frame]) -> Vec<u8> {
    let mut out = Vec::new();
    for fr in frames {
        encode_frame(fr, &mut out);
    }
    out
}

/// Appends the fuzzer bytes [`decode_frame`] makes `fr` of.
pub fn encode_frame(fr: &Frame, out: &mut Vec<u8>) {
    let mut f = match fr.dest {
        Dest::Rc => 0,
        Dest::Ud => 1,
        Dest::Qpn(_) => 2,
        Dest::Group => 3,
    };
    let mut g = (fr.flips.len().min(3) as u8) << 3;
    for (present, bit) in [
        (fr.psn.is_err(), F_PSN_ANY),
        (fr.reth.is_some(), F_RETH),
        (fr.aeth.is_some(), F_AETH),
        (fr.atomic.is_some(), F_ATOMIC),
        (fr.atomic_ack.is_some(), F_ATOMIC_ACK),
        (fr.deth.is_some(), F_DETH),
    ] {
        f |= if present { bit } else { 0 };
    }
    for (present, bit) in [
        (fr.imm.is_some(), G_IMM),
        (fr.ieth.is_some(), G_IETH),
        (fr.stranger, G_STRANGER),
        (matches!(fr.reth, Some((_, Some(_), _))), G_RKEY),
    ] {
        g |= if present { bit } else { 0 };
    }
    out.extend([f, g]);
    if let Dest::Qpn(qpn) = fr.dest {
        out.extend(qpn.to_le_bytes());
    }
    match fr.psn {
        Ok(off) => out.push(off as i8 as u8),
        Err(any) => out.extend(any.to_le_bytes()),
    }
    out.push(fr.opcode);
    if let Some((va, rkey, len)) = fr.reth {
        out.extend(va.to_le_bytes());
        if let Some(rkey) = rkey {
            out.extend(rkey.to_le_bytes());
        }
        out.extend(len.to_le_bytes());
    }
    if let Some((syndrome, msn)) = fr.aeth {
        out.push(syndrome);
        out.extend(msn.to_le_bytes());
    }
    if let Some((va, swap_add, compare)) = fr.atomic {
        for word in [va, swap_add, compare] {
            out.extend(word.to_le_bytes());
        }
    }
    if let Some(ack) = fr.atomic_ack {
        out.extend(ack.to_le_bytes());
    }
    if let Some((qkey, src_qpn)) = fr.deth {
        out.extend(qkey.to_le_bytes());
        out.extend(src_qpn.to_le_bytes());
    }
    if let Some(imm) = fr.imm {
        out.extend(imm);
    }
    if let Some(ieth) = fr.ieth {
        out.extend(ieth.to_le_bytes());
    }
    out.extend((fr.payload.len() as u16).to_le_bytes());
    out.extend(&fr.payload);
    for &(at, value) in fr.flips.iter().take(3) {
        out.extend((at as u16).to_le_bytes());
        out.push(value);
    }
}

/// The node both bodies run against: [`Scripted`]'s RC QP connected to a peer the body
/// plays, and a UD QP on the same node.
pub struct Live {
    /// The node, its RC QP and the peer's side of the wire.
    pub s: Scripted,
    /// The UD QP (Q_Key [`UD_QKEY`]), attached to the multicast group [`GROUP_IP`].
    pub ud: Qp,
    /// An XRC_TGT QP connected to the same peer, with the same PSNs as the RC QP.
    pub tgt: Qp,
    /// The XRC SRQ of its domain.
    pub srqn: u32,
    /// The key of the on-demand MR over [`ODP_AT`], no page present at first.
    pub odp_key: u32,
    /// The key of the type 2 window bound to the RC QP over [`WINDOW_AT`].
    pub window_key: u32,
}

/// A live node with work in every direction: RC receives posted (wr_ids 100..=103), a WRITE
/// (1), a READ (2) and an atomic (3) sent and not answered after a window bound (4: done), UD
/// receives posted (200..=203) on a QP attached to a multicast group, an XRC_TGT QP whose XRC
/// SRQ has receives posted (300..=303), and an on-demand MR whose pages fault in when
/// touched.
pub fn busy() -> Live {
    let conn = Conn {
        access: REMOTE_ACCESS,
        ..Conn::default()
    };
    let mut s = Scripted::new(MIB, conn);
    let buf = s.n.buf;
    for i in 0..4 {
        s.qp.post_recv(&mut s.n, 100 + i, buf + 0x1_0000 + i * 0x1000, 0x1000);
    }
    let mut ud = Qp::create(&mut s.n, QpType::Ud);
    ud.activate_ud(&mut s.n, UD_QKEY);
    for i in 0..4 {
        ud.post_recv(&mut s.n, 200 + i, buf + 0x2_0000 + i * 0x1000, 0x1000);
    }
    assert_eq!(attach(&mut s.n.g, ud.qpn, mapped(GROUP_IP)), STATUS_OK);
    let tgt = Qp::create_xrc_tgt(&mut s.n, XRCD);
    let (peer_gid, peer_mac) = (s.peer_gid, s.peer_mac);
    let (qpn, sq_psn, rq_psn) = (s.peer_qpn + 1, s.sq_psn, s.rq_psn);
    tgt.connect_to(&mut s.n, peer_gid, peer_mac, qpn, sq_psn, rq_psn, conn);
    let (cqn, key) = (s.n.cq.cqn, s.n.key);
    let mut srq = XrcSrq::create(&mut s.n, XRCD, super::roce::PD, cqn);
    for i in 0..4 {
        srq.post(&mut s.n, 300 + i, buf + 0x3_0000 + i * 0x1000, 0x1000, key);
    }
    let odp_access = ACCESS_LOCAL_WRITE | REMOTE_ACCESS;
    let odp_key = odp_mr(&mut s.n, buf + ODP_AT, ODP_LEN, odp_access);
    let window_key = next_key(create_mw(&mut s.n.g, MW_TYPE_2));
    let bind = BindMwSeg {
        addr: buf + WINDOW_AT,
        length: WINDOW_LEN,
        mw_key: window_key,
        mr_key: key,
        access: REMOTE_ACCESS & MW_ACCESS_MASK,
        ..BindMwSeg::default()
    };
    s.qp.post(&mut s.n, 4, WR_BIND_MW, 0, 0, &bind.encode(), 0);
    let seg = rdma_seg(0x10_0000, 0x1234);
    s.qp.post(&mut s.n, 1, WR_RDMA_WRITE, buf, 2000, &seg, 0);
    s.qp.post(&mut s.n, 2, WR_RDMA_READ, buf + 0x4000, 3000, &seg, 0);
    let atomic = atomic_seg(0x10_0000, 0x1234, 5, 6);
    s.qp.post(&mut s.n, 3, WR_ATOMIC_CMP_SWAP, buf + 0x8000, 8, &atomic, 0);
    let _ = s.sent();
    assert_eq!(
        super::roce::statuses(&s.cqes),
        [(4, WcStatus::Success)],
        "the window's bind"
    );
    s.cqes.clear();
    Live {
        s,
        ud,
        tgt,
        srqn: srq.srqn,
        odp_key,
        window_key,
    }
}

/// Answers the on-demand MR's page faults the node raised (the pages, writable), as the driver
/// does, and drops its other events.
pub fn serve_faults(live: &mut Live) {
    let base = live.s.n.buf + ODP_AT;
    for f in page_faults(live.s.n.g.poll_eq(EQN_ASYNC)) {
        answer(&mut live.s.n.g, base, &f, Answer::Writable);
    }
}

/// The R_Key a frame names: any, or (0, 1, 2) the MR's, the window's or the on-demand MR's.
fn rkey_of(live: &Live, rkey: Option<u32>) -> u32 {
    match rkey {
        None | Some(0) => live.s.n.key,
        Some(1) => live.window_key,
        Some(2) => live.odp_key,
        Some(any) => any,
    }
}

/// The bytes of frame `f` to the node of `live`.
pub fn frame_bytes(live: &Live, f: &Frame) -> Vec<u8> {
    let s = &live.s;
    let psn = match f.psn {
        Ok(off) if (0x0d..=0x12).contains(&f.opcode) => s.sq_psn.wrapping_add_signed(off),
        Ok(off) => s.rq_psn.wrapping_add_signed(off),
        Err(any) => any,
    };
    let xrc = f.opcode & 0xe0 == 0xa0;
    let qpn = match f.dest {
        Dest::Rc if xrc => live.tgt.qpn,
        Dest::Rc => s.qp.qpn,
        Dest::Ud => live.ud.qpn,
        Dest::Qpn(qpn) => qpn,
        Dest::Group => 0xff_ffff,
    };
    let mut b = Headers::new(f.opcode, qpn, psn);
    b.reth = f.reth.map(|(va, rkey, len)| Reth {
        va: if va < 1 << 20 { s.n.buf + va } else { va },
        rkey: rkey_of(live, rkey),
        len,
    });
    b.aeth = f.aeth.map(|(syndrome, msn)| Aeth { syndrome, msn });
    b.atomic = f.atomic.map(|(va, swap_add, compare)| AtomicEth {
        va: s.n.buf + (va % (1 << 20)) / 8 * 8,
        rkey: s.n.key,
        swap_add,
        compare,
    });
    b.atomic_ack = f.atomic_ack;
    let (qkey, src_qpn) = f.deth.unwrap_or((UD_QKEY, s.peer_qpn));
    b.deth = Some(Deth { qkey, src_qpn });
    b.imm = f.imm;
    b.ieth = f.ieth;
    b.xrceth = xrc.then_some(live.srqn);
    let sgid = if f.stranger {
        stranger_gid()
    } else {
        s.peer_gid
    };
    let mut bytes = match f.dest {
        Dest::Group => s.frame_to(sgid, GROUP_MAC, mapped(GROUP_IP), &b, &f.payload),
        _ => s.frame_from(sgid, &b, &f.payload),
    };
    for &(at, value) in &f.flips {
        if let Some(byte) = bytes.get_mut(at) {
            *byte = value;
        }
    }
    bytes
}

/// Puts `f` on the wire towards the node and runs the device twice, serving page faults.
pub fn inject(live: &mut Live, f: &Frame) {
    let bytes = frame_bytes(live, f);
    live.s.wire.sink.send(&bytes);
    live.s.run(2);
    serve_faults(live);
}

/// The frame body: `frames` (and first `raw`, as it is) against a [`busy`] node. The device
/// must not go fatal, nothing may complete twice or that was not posted, and the node must
/// still answer a command.
pub fn frames_after(raw: Option<&[u8]>, frames: &[Frame]) -> Live {
    let mut live = busy();
    if let Some(raw) = raw {
        live.s.wire.sink.send(raw);
        live.s.run(2);
    }
    for f in frames.iter().take(MAX_FRAMES) {
        inject(&mut live, f);
    }
    live.s.run(8);
    let s = &mut live.s;
    assert_eq!(s.n.g.dev.core.regs().fatal_code(), FATAL_NONE, "fatal");
    let mut ids: Vec<u64> = s.cqes.iter().map(|c| c.wr_id).collect();
    let all = ids.len();
    ids.sort_unstable();
    ids.dedup();
    let statuses = || super::roce::statuses(&s.cqes);
    assert_eq!(ids.len(), all, "a WR completed twice: {:?}", statuses());
    assert!(
        ids.iter().all(|id| POSTED_WR_IDS.contains(id)),
        "a completion of nothing posted: {:?}",
        statuses()
    );
    assert_eq!(s.n.g.cmd(&NopCmd::default()).status, STATUS_OK);
    live
}

/// The frame body over decoded frames (the stable proptest's entry).
pub fn frames(frames: &[Frame]) {
    frames_after(None, frames);
}

/// The frame body over fuzzer bytes (the libFuzzer target's and the corpus's entry): the
/// frame and transport parsers on the bytes themselves, the bytes as a frame off the wire,
/// then the frames they decode to ([`decode_frames`]).
pub fn frame_input(data: &[u8]) {
    let _ = frame::classify(data, &NODE_MAC);
    if let Ok(f) = frame::parse(data) {
        let _ = Packet::parse(f.transport);
    }
    let _ = Packet::parse(data);
    frames_after(Some(data), &decode_frames(data));
}

// --- the command body ---------------------------------------------------------------------

// An action is a byte whose low three bits say what, then its operands:
// 0, 1: a command entry (128 bytes) on the command queue, and the command doorbell;
// 2: a doorbell (a selector byte, then what it needs);
// 3, 4: a send WQE (a u16 length, then that many bytes) and the SQ doorbell;
// 5: a receive WQE (64 bytes) and the RQ doorbell;
// 6, 7: device rounds (1 + bits 3..=5), taking CQEs and EQEs as a driver does.

/// Command action flag: the opcode is an index into `CMD_OPCODES`.
pub const ACT_TABLE_OPCODE: u8 = 1 << 3;
/// Command action flag: the output address is a 4 KiB scratch buffer.
pub const ACT_SCRATCH_OUT: u8 = 1 << 4;
/// Command action flag: the first payload word becomes a live object's number, chosen by
/// its low byte: the RC QP, the UD QP, the CQ, the MR's key.
pub const ACT_OBJECT: u8 = 1 << 5;
/// WQE action flag: the UD QP's ring (else the RC QP's).
pub const ACT_UD: u8 = 1 << 3;
/// WQE action flag: opcode, flags, counts and SGEs made plausible (the MR's key, in its
/// range); a UD send gets an address vector to the UD QP itself, which loops back.
pub const ACT_PLAUSIBLE: u8 = 1 << 4;

/// The command body: a hostile driver of a [`busy`] node (enabled, the real RoCE engine, an
/// EQ, a CQ, a connected RC QP with work outstanding and a UD QP) runs the actions `data`
/// decodes to (at most [`MAX_ACTIONS`]); afterwards the device must answer a NOP, at worst
/// after the bring-up that recovers a fatal or disabled device ([`still_works`]).
pub fn commands(data: &[u8]) {
    commands_after(data);
}

/// The command body, returning the node (its first CQEs in `live.s.cqes`).
pub fn commands_after(data: &[u8]) -> Live {
    let mut live = busy();
    live.s.cqes.clear();
    let scratch = live.s.n.g.alloc(4096, 4096);
    let mut r = Reader::new(data);
    for _ in 0..MAX_ACTIONS {
        if r.is_empty() {
            break;
        }
        let op = r.u8();
        match op & 7 {
            0 | 1 => command(&mut live, op, scratch, &mut r),
            2 => doorbell(&mut live, &mut r),
            3 | 4 => send_wqe(&mut live, op, &mut r),
            5 => recv_wqe(&mut live, op, &mut r),
            _ => rounds(&mut live, 1 + usize::from((op >> 3) & 7)),
        }
    }
    still_works(&mut live.s.n.g);
    live
}

/// A command entry at the guest's producer index, and the command doorbell.
fn command(live: &mut Live, op: u8, scratch: u64, r: &mut Reader) {
    let mut entry = [0u8; CMD_ENTRY_SIZE];
    r.fill(&mut entry);
    if op & ACT_TABLE_OPCODE != 0 {
        let index = usize::from(u16::from_le_bytes([entry[0], entry[1]])) % CMD_OPCODES.len();
        entry[..2].copy_from_slice(&CMD_OPCODES[index].to_le_bytes());
    }
    if op & ACT_SCRATCH_OUT != 0 {
        entry[8..16].copy_from_slice(&scratch.to_le_bytes());
    }
    if op & ACT_OBJECT != 0 {
        let objects = [live.s.qp.qpn, live.ud.qpn, live.s.n.cq.cqn, live.s.n.key];
        let number = objects[usize::from(entry[CmdHeader::SIZE]) % objects.len()];
        entry[CmdHeader::SIZE..CmdHeader::SIZE + 4].copy_from_slice(&number.to_le_bytes());
    }
    let g = &mut live.s.n.g;
    let Some(ring) = Ring::new(g.cmd_log, MAX_LOG_CMDQ) else {
        return;
    };
    let slot = u64::from(ring.slot(g.cmd_pi));
    g.write(g.cmd_sq + slot * CMD_ENTRY_SIZE as u64, &entry);
    g.cmd_pi = g.cmd_pi.wrapping_add(1);
    g.w32(REG_CMDQ_DB, u32::from(g.cmd_pi));
}

/// A doorbell: selector bits 0..=1 say which kind. 0: a queue doorbell (bits 2..=6 pick the
/// register modulo 5: SQ, RQ, SRQ, CQ arm, push) of context 0 (or, with bit 7, of the context
/// the next byte names), whose value the next byte builds (bits 0..=1 the QID: RC QP, UD QP,
/// CQ or a u16; bits 2..=3 the index: the QP's send or receive producer, it plus a byte, or a
/// u16); 1: the EQ doorbell, 2: the command doorbell, 3: any offset in the doorbell area, each
/// with a u32 value.
fn doorbell(live: &mut Live, r: &mut Reader) {
    let sel = r.u8();
    let (offset, value) = match sel & 3 {
        0 => {
            let registers = [DB_SQ, DB_RQ, DB_SRQ, DB_CQ_ARM, DB_PUSH];
            let reg = registers[usize::from((sel >> 2) & 0x1f) % registers.len()];
            let ctx = if sel & 0x80 != 0 {
                usize::from(r.u8()) % NUM_DB_PAGES
            } else {
                0
            };
            let how = r.u8();
            let qp = if how & 3 == 1 { &live.ud } else { &live.s.qp };
            let qid = match how & 3 {
                0 | 1 => qp.qpn as u16,
                2 => live.s.n.cq.cqn as u16,
                _ => r.u16(),
            };
            let index = match (how >> 2) & 3 {
                0 => qp.sq_pi,
                1 => qp.rq_pi,
                2 => qp.sq_pi.wrapping_add(u16::from(r.u8())),
                _ => r.u16(),
            };
            (db_page_offset(ctx) + reg, Doorbell { qid, index }.encode())
        }
        1 => (REG_EQ_DB, r.u32()),
        2 => (REG_CMDQ_DB, r.u32()),
        _ => {
            let at = r.u32() as usize % (NUM_DB_PAGES * DB_PAGE_SIZE);
            (DB_AREA_OFFSET + (at & !3), r.u32())
        }
    };
    live.s.n.g.w32(offset, value);
}

/// A send WQE of up to a stride of fuzzer bytes at the QP's producer index, and the SQ
/// doorbell.
fn send_wqe(live: &mut Live, op: u8, r: &mut Reader) {
    let ud = op & ACT_UD != 0;
    let stride = if ud { &live.ud } else { &live.s.qp }.send_stride();
    let mut wqe = vec![0u8; stride];
    let len = usize::from(r.u16()) % (stride + 1);
    r.fill(&mut wqe[..len]);
    if op & ACT_PLAUSIBLE != 0 {
        let keys = [live.s.n.key, live.window_key, live.odp_key];
        plausible_send(&mut wqe, &live.s.n, keys, ud.then_some(live.ud.qpn));
    }
    let Some(ctrl) = WqeCtrl::read_from(&wqe) else {
        return;
    };
    let qp = if ud { &mut live.ud } else { &mut live.s.qp };
    qp.put(
        &live.s.n,
        ctrl,
        &wqe[WQE_SEG_OFFSET..WQE_HEADER_SIZE],
        &wqe[WQE_HEADER_SIZE..],
    );
    qp.ring(&mut live.s.n);
}

/// Makes a send WQE plausible: a defined opcode and flags, at most two SGEs of the MR (or
/// inline data that fits), reserved fields zero; a key to invalidate and a window to bind
/// among `keys` (the MR's, the window's, the on-demand MR's), a bind within the MR; on the UD
/// QP (`ud_qpn`) an address vector to itself.
fn plausible_send(wqe: &mut [u8], n: &Node, keys: [u32; 3], ud_qpn: Option<u32>) {
    let mut ctrl = WqeCtrl::read_from(wqe).unwrap_or_default();
    ctrl.opcode %= WR_FLUSH + 1;
    if matches!(ctrl.opcode, WR_LOCAL_INV | WR_SEND_WITH_INV) {
        ctrl.imm_or_inv = keys[ctrl.imm_or_inv as usize % keys.len()];
    }
    if ctrl.opcode == WR_BIND_MW {
        let seg = BindMwSeg::read_from(&wqe[WQE_SEG_OFFSET..]).unwrap_or_default();
        let bind = BindMwSeg {
            addr: n.buf + seg.addr % (n.buf_len as u64 - 4096),
            length: seg.length % 4096,
            // The window's key with any variant: the next one binds.
            mw_key: (keys[1] & !0xff) | (seg.mw_key & 0xff),
            mr_key: keys[usize::from(seg.mr_key & 1 != 0) * 2],
            access: seg.access & MW_ACCESS_MASK,
            ..BindMwSeg::default()
        };
        let _ = bind.write_to(&mut wqe[WQE_SEG_OFFSET..]);
    }
    ctrl.flags &= WQE_FLAG_SIGNALED | WQE_FLAG_SOLICITED | WQE_FLAG_FENCE | WQE_FLAG_INLINE;
    ctrl.inline_len %= MAX_INLINE as u16 + 1;
    ctrl.num_sge = if ctrl.flags & WQE_FLAG_INLINE != 0 {
        0
    } else {
        ctrl.num_sge % 3
    };
    (ctrl.rsvd0, ctrl.rsvd1, ctrl.xrc_srqn) = (0, 0, 0);
    if let Some(remote_qpn) = ud_qpn {
        ctrl.flags |= WQE_FLAG_AV;
        let av = UdAvSeg {
            dgid: mapped(n.ip),
            dmac: n.mac,
            vlan: VLAN_NONE,
            remote_qpn,
            remote_qkey: UD_QKEY,
            sgid_index: 3,
            hop_limit: 64,
            ..UdAvSeg::default()
        };
        let _ = av.write_to(&mut wqe[WQE_SEG_OFFSET..]);
    }
    let _ = ctrl.write_to(wqe);
    for i in 0..usize::from(ctrl.num_sge) {
        plausible_sge(&mut wqe[WQE_HEADER_SIZE + i * Sge::SIZE..], n);
    }
}

/// Makes the SGE at the start of `bytes` one of at most 4 KiB in the node's MR.
fn plausible_sge(bytes: &mut [u8], n: &Node) {
    let sge = Sge::read_from(bytes).unwrap_or_default();
    let _ = Sge {
        addr: n.buf + sge.addr % (n.buf_len as u64 - 4096),
        length: sge.length % 4096,
        lkey: n.key,
    }
    .write_to(bytes);
}

/// A receive WQE of 64 fuzzer bytes at the QP's producer index, and the RQ doorbell.
fn recv_wqe(live: &mut Live, op: u8, r: &mut Reader) {
    let mut wqe = [0u8; RECV_STRIDE];
    r.fill(&mut wqe);
    if op & ACT_PLAUSIBLE != 0 {
        let mut header = RecvWqeHeader::read_from(&wqe).unwrap_or_default();
        (header.num_sge, header.rsvd) = (1, [0; 7]);
        let _ = header.write_to(&mut wqe);
        plausible_sge(&mut wqe[RecvWqeHeader::SIZE..], &live.s.n);
    }
    let qp = if op & ACT_UD != 0 {
        &mut live.ud
    } else {
        &mut live.s.qp
    };
    qp.put_recv(&live.s.n, &wqe);
    qp.ring_recv(&mut live.s.n);
}

/// Runs the device `n` rounds, dropping what it sends and taking CQEs; then takes EQEs.
fn rounds(live: &mut Live, n: usize) {
    for _ in 0..n {
        live.s.n.g.dev.process();
        while live.s.wire.rx.pop().is_some() {}
        take_cqes(&mut live.s);
    }
    serve_faults(live);
    for eqn in 0..live.s.n.g.eqs.len() as u32 {
        let _ = live.s.n.g.poll_eq(eqn);
    }
}

/// Consumes the CQEs of the node's CQ whatever they say (the fuzzed commands may resize or
/// destroy it), keeps the first [`KEPT_CQES`] and publishes the consumer index.
fn take_cqes(s: &mut Scripted) {
    let (n, kept) = (&mut s.n, &mut s.cqes);
    let cq = &mut n.cq;
    let Some(ring) = Ring::new(cq.log, MAX_LOG_QUEUE) else {
        return;
    };
    for _ in 0..ring.size() {
        let bytes = n.g.read(cq.base + u64::from(ring.slot(cq.ci)) * 64, 64);
        match Cqe::read_from(&bytes) {
            Some(cqe) if ring.entry_valid(cq.ci, cqe.owner) => {
                cq.ci = cq.ci.wrapping_add(1);
                if kept.len() < KEPT_CQES {
                    kept.push(cqe);
                }
            }
            _ => break,
        }
    }
    n.g.write_u32(cq.dbrec, u32::from(cq.ci));
}

/// After anything, the device still answers a NOP (unless the input reset, disabled or
/// killed it, in which case it comes back with a bring-up).
pub fn still_works(g: &mut Guest) {
    g.run();
    if g.r32(REG_DEV_STATUS) & STATUS_FATAL != 0 || g.r32(REG_DEV_STATUS) & STATUS_ENABLED == 0 {
        g.bring_up();
    } else if g.r32(REG_CMDQ_STATUS) != CMDQ_STATUS_ENABLED
        || g.r32(REG_CMDQ_CI) != u32::from(g.cmd_pi)
    {
        // The input rang the command doorbell behind the guest's back: the driver recovers
        // by re-creating its queue.
        g.w32(REG_CMDQ_CTRL, 0);
        g.setup_cmdq(4);
    }
    assert_eq!(g.cmd(&NopCmd::default()).status, STATUS_OK);
}
