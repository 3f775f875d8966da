// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The two-NIC fuzz body ([`pair`]): node A's requester driven by WQEs, node B's responder by
//! A's frames and by arbitrary ones, through a relay the input controls (it delivers, drops,
//! duplicates, swaps and corrupts frames either way) while device time passes in jumps. The
//! input's first byte sets the pair up ([`Setup`]: RC or UC, a short or a long local ACK
//! timeout). Afterwards the relay turns faithful and the pair settles. Throughout, it checks what must
//! hold whatever the input:
//!
//! - nothing completes twice, and nothing completes that was not posted;
//! - every WR posted on A completes once the pair has settled;
//! - no byte is written outside a registered range: each node registers only the first half
//!   of its buffer, and every DMA write of either device lies in that MR or in a ring the
//!   guest gave it (CQ, EQs, command completions);
//! - one device turn sends at most a budget of frames ([`TURN_FRAMES`]);
//! - no device goes fatal, and both still answer a command.

use std::collections::VecDeque;
use std::ops::Range;
use std::time::Duration;

use ferroce_hw::*;
use ferroce_nic::engine::frame::{self, Route};
use ferroce_nic::engine::headers::{Aeth, AtomicEth, Deth, Headers, Packet, Reth};
use ferroce_nic::engine::psn;
use ferroce_nic::engine::requester::TX_BUDGET;
use ferroce_nic::engine::responder::REPLY_BUDGET;
use ferroce_nic::engine::roce::RX_BUDGET;
use ferroce_nic::engine::wire::{back_to_back, PortEnd};

use super::fuzz::{decode_frame, encode_frame, Dest, Frame, Reader, REMOTE_ACCESS};
use super::roce::{atomic_seg, rdma_seg, Conn, Node, Qp, PD};

/// Actions one input runs at most (fewer than a send or receive ring holds).
pub const MAX_ACTIONS: usize = 96;

/// Bytes of each node's buffer; the first [`REGISTERED`] of them are its MR.
pub const BUF_LEN: usize = 256 << 10;
/// Bytes of each node's buffer its MR covers.
pub const REGISTERED: u64 = 128 << 10;
/// How far past its MR an address the input picks may reach.
const BEYOND: u64 = 8 << 10;

/// Frames one device turn may send with one QP: a transmit budget of requests, a budget of
/// queued READ responses, and an ACK or NAK for each frame received.
pub const TURN_FRAMES: usize = TX_BUDGET as usize + REPLY_BUDGET as usize + RX_BUDGET;

/// Turns the settling after the input may take (each delivers everything in flight, or lets
/// time jump to the next deadline).
const SETTLE_TURNS: usize = 4096;

/// What A's WQEs do, by the input's choice.
const POST_OPCODES: [u8; 10] = [
    WR_SEND,
    WR_SEND_WITH_IMM,
    WR_SEND_WITH_INV,
    WR_RDMA_WRITE,
    WR_RDMA_WRITE_WITH_IMM,
    WR_RDMA_READ,
    WR_ATOMIC_CMP_SWAP,
    WR_ATOMIC_FETCH_ADD,
    WR_ATOMIC_WRITE,
    WR_FLUSH,
];

/// A WQE A posts (always signalled).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Post {
    /// Index into [`POST_OPCODES`] (modulo its length).
    pub op: u8,
    /// Offset of its local SGE in A's buffer (may reach past A's MR).
    pub local: u16,
    /// Its length (modulo 4 KiB + 1).
    pub len: u16,
    /// Offset of the remote address in B's buffer (may reach past B's MR).
    pub remote: u16,
    /// The R_Key: B's MR's (`None`) or any.
    pub rkey: Option<u32>,
    /// Compare or add operand, or the 8 bytes an ATOMIC_WRITE writes.
    pub operand: u64,
    /// Fence flag.
    pub fence: bool,
}

/// What the relay does with the frames in flight one way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Relay {
    /// Delivers the first.
    One,
    /// Delivers them all.
    All,
    /// Loses the first.
    Drop,
    /// Delivers the first twice.
    Duplicate,
    /// Delivers the second before the first.
    Swap,
    /// Overwrites a byte of the first (offset modulo its length), then delivers it.
    Corrupt { at: u16, value: u8 },
}

/// How the pair is connected: the input's first byte.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Setup {
    /// UC QPs (else RC).
    pub uc: bool,
    /// A local ACK timeout of about 67 ms (else about 1 ms): long enough that the adaptive
    /// timeout expires before it.
    pub long_timeout: bool,
}

impl Setup {
    fn decode(byte: u8) -> Self {
        Self {
            uc: byte & 1 != 0,
            long_timeout: byte & 2 != 0,
        }
    }

    fn encode(self) -> u8 {
        u8::from(self.uc) | u8::from(self.long_timeout) << 1
    }
}

/// One step of the input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// A posts a WQE.
    Post(Post),
    /// B posts a receive WQE of `len` (modulo 4 KiB + 1) bytes at `offset` in its buffer.
    Recv { offset: u16, len: u16 },
    /// The relay acts on the frames towards B (`to_b`) or towards A.
    Relay { to_b: bool, how: Relay },
    /// A frame the input makes, towards B as if from A (PSN relative to the next one A will
    /// send) or towards A as if from B (relative to the last one A sent).
    Forge { to_b: bool, frame: Frame },
    /// Device turns of both NICs, the relay holding what they send.
    Turns(u8),
    /// Device time jumps to the earliest deadline (`None`) or passes `Some(ms)`.
    Wait(Option<u8>),
}

// An action is a byte whose low three bits say what, then its operands.
const A_POST: u8 = 0;
const A_RECV: u8 = 1;
const A_RELAY_B: u8 = 2;
const A_RELAY_A: u8 = 3;
const A_FORGE_B: u8 = 4;
const A_FORGE_A: u8 = 5;
const A_TURNS: u8 = 6;
const A_WAIT: u8 = 7;
// Post flags (bits 3..): a key of the input's, a fence.
const P_RKEY: u8 = 1 << 3;
const P_FENCE: u8 = 1 << 4;
// Wait flag: a number of milliseconds follows.
const W_MS: u8 = 1 << 3;

/// The setup and actions in fuzzer bytes (at most [`MAX_ACTIONS`]), the inverse of
/// [`encode`].
pub fn decode(data: &[u8]) -> (Setup, Vec<Action>) {
    let mut r = Reader::new(data);
    let setup = Setup::decode(r.u8());
    let mut out = Vec::new();
    while !r.is_empty() && out.len() < MAX_ACTIONS {
        let op = r.u8();
        out.push(match op & 7 {
            A_POST => Action::Post(Post {
                op: r.u8(),
                local: r.u16(),
                len: r.u16(),
                remote: r.u16(),
                rkey: (op & P_RKEY != 0).then(|| r.u32()),
                operand: r.u64(),
                fence: op & P_FENCE != 0,
            }),
            A_RECV => Action::Recv {
                offset: r.u16(),
                len: r.u16(),
            },
            A_RELAY_B | A_RELAY_A => Action::Relay {
                to_b: op & 7 == A_RELAY_B,
                how: match (op >> 3) & 7 {
                    0 | 6 => Relay::One,
                    1 | 7 => Relay::All,
                    2 => Relay::Drop,
                    3 => Relay::Duplicate,
                    4 => Relay::Swap,
                    _ => Relay::Corrupt {
                        at: r.u16(),
                        value: r.u8(),
                    },
                },
            },
            A_FORGE_B | A_FORGE_A => Action::Forge {
                to_b: op & 7 == A_FORGE_B,
                frame: decode_frame(&mut r),
            },
            A_TURNS => Action::Turns(1 + (op >> 3)),
            _ => Action::Wait((op & W_MS != 0).then(|| r.u8())),
        });
    }
    (setup, out)
}

/// Fuzzer bytes that [`decode`] makes `setup` and `actions` of (for turns up to 32 and frames
/// [`encode_frame`] can encode).
pub fn encode(setup: Setup, actions: &[Action]) -> Vec<u8> {
    let mut out = vec![setup.encode()];
    for action in actions {
        match action {
            Action::Post(p) => {
                let flags =
                    if p.rkey.is_some() { P_RKEY } else { 0 } | if p.fence { P_FENCE } else { 0 };
                out.extend([A_POST | flags, p.op]);
                for half in [p.local, p.len, p.remote] {
                    out.extend(half.to_le_bytes());
                }
                if let Some(rkey) = p.rkey {
                    out.extend(rkey.to_le_bytes());
                }
                out.extend(p.operand.to_le_bytes());
            }
            Action::Recv { offset, len } => {
                out.push(A_RECV);
                out.extend(offset.to_le_bytes());
                out.extend(len.to_le_bytes());
            }
            Action::Relay { to_b, how } => {
                let op = if *to_b { A_RELAY_B } else { A_RELAY_A };
                let how_bits = match how {
                    Relay::One => 0,
                    Relay::All => 1,
                    Relay::Drop => 2,
                    Relay::Duplicate => 3,
                    Relay::Swap => 4,
                    Relay::Corrupt { .. } => 5,
                };
                out.push(op | how_bits << 3);
                if let Relay::Corrupt { at, value } = how {
                    out.extend(at.to_le_bytes());
                    out.push(*value);
                }
            }
            Action::Forge { to_b, frame } => {
                out.push(if *to_b { A_FORGE_B } else { A_FORGE_A });
                encode_frame(frame, &mut out);
            }
            Action::Turns(n) => out.push(A_TURNS | ((*n).clamp(1, 32) - 1) << 3),
            Action::Wait(None) => out.push(A_WAIT),
            Action::Wait(Some(ms)) => out.extend([A_WAIT | W_MS, *ms]),
        }
    }
    out
}

/// One side of the pair: a node, its QP, the relay's end of its cable, what the relay
/// holds towards it, and what it posted and completed.
pub struct Side {
    pub n: Node,
    pub qp: Qp,
    /// The relay's end of the node's cable.
    wire: PortEnd,
    /// Frames in flight towards this node.
    inbound: VecDeque<Vec<u8>>,
    /// wr_ids posted, and the CQEs collected.
    pub posted: Vec<u64>,
    pub cqes: Vec<Cqe>,
}

impl Side {
    /// The ranges this node lets its device write: its MR, its CQ ring, its command
    /// completion ring and its EQ rings.
    fn writable(&self) -> Vec<Range<u64>> {
        let g = &self.n.g;
        let cq = &self.n.cq;
        let mut out = vec![
            self.n.buf..self.n.buf + REGISTERED,
            cq.base..cq.base + ((CQE_SIZE as u64) << cq.log),
            g.cmd_cq..g.cmd_cq + ((CmdCompletion::SIZE as u64) << g.cmd_log),
        ];
        out.extend(
            g.eqs
                .iter()
                .flatten()
                .map(|eq| eq.base..eq.base + ((EQE_SIZE as u64) << eq.log)),
        );
        out
    }

    /// Checks the device's writes since the last check against [`Side::writable`].
    fn check_writes(&self, name: &str) {
        let writable = self.writable();
        for w in self.n.g.dma_writes.take() {
            assert!(
                writable
                    .iter()
                    .any(|r| r.start <= w.start && w.end <= r.end),
                "{name}'s device wrote {:#x}..{:#x}, outside its MR ({:#x}..{:#x}) and rings",
                w.start,
                w.end,
                self.n.buf,
                self.n.buf + REGISTERED
            );
        }
    }
}

/// Two nodes whose RC (or UC) QPs are connected through a relay the body controls.
pub struct Duo {
    pub a: Side,
    pub b: Side,
    conn: Conn,
    /// PSN of the last request A sent (what B's ePSN follows).
    a_psn: u32,
    next_wr_id: u64,
}

/// A node of [`BUF_LEN`] whose MR covers only its first [`REGISTERED`] bytes.
fn half_registered(n: &mut Node) {
    let whole = n.key;
    n.key = n.mr(n.buf, REGISTERED, ACCESS_LOCAL_WRITE | REMOTE_ACCESS, PD);
    n.g.ok(&DestroyMrCmd {
        key: whole,
        rsvd: 0,
    });
}

impl Duo {
    /// The pair, connected as `setup` says (MTU 1024, 3 retries of each kind), its DMA writes
    /// recorded from now on.
    pub fn new(setup: Setup) -> Self {
        let conn = Conn {
            timeout: if setup.long_timeout { 14 } else { 8 },
            retry_cnt: 3,
            rnr_retry: 3,
            // UC has no READ or atomics.
            access: if setup.uc {
                ACCESS_REMOTE_WRITE
            } else {
                REMOTE_ACCESS
            },
            ..Conn::default()
        };
        let qp_type = if setup.uc { QpType::Uc } else { QpType::Rc };
        let (pa, wa) = back_to_back();
        let (pb, wb) = back_to_back();
        let mut a = Node::new(1, BUF_LEN, pa);
        let mut b = Node::with_time(a.g.time.clone(), 2, BUF_LEN, pb);
        half_registered(&mut a);
        half_registered(&mut b);
        let qa = Qp::create(&mut a, qp_type);
        let qb = Qp::create(&mut b, qp_type);
        let (psn_a, psn_b) = (PSN_MASK - 20, 5);
        qa.connect(&mut a, &b, qb.qpn, psn_a, psn_b, conn);
        qb.connect(&mut b, &a, qa.qpn, psn_b, psn_a, conn);
        for n in [&a, &b] {
            n.g.dma_writes.record(true);
        }
        let side = |n, qp, wire| Side {
            n,
            qp,
            wire,
            inbound: VecDeque::new(),
            posted: Vec::new(),
            cqes: Vec::new(),
        };
        Self {
            a: side(a, qa, wa),
            b: side(b, qb, wb),
            conn,
            a_psn: psn::sub(psn_a, 1),
            next_wr_id: 1,
        }
    }

    fn wr_id(&mut self) -> u64 {
        self.next_wr_id += 1;
        self.next_wr_id
    }

    /// An address the input picks in `side`'s buffer: `offset` (in units of 4 bytes) modulo
    /// the MR and a little past it.
    fn addr(side: &Side, offset: u16) -> u64 {
        side.n.buf + (u64::from(offset) * 4) % (REGISTERED + BEYOND)
    }

    /// A posts `p`.
    fn post(&mut self, p: &Post) {
        let opcode = POST_OPCODES[usize::from(p.op) % POST_OPCODES.len()];
        let len = u32::from(p.len) % 4097;
        let local = Self::addr(&self.a, p.local);
        let remote = Self::addr(&self.b, p.remote);
        let rkey = p.rkey.unwrap_or(self.b.n.key);
        let mut seg = [0u8; 40];
        let (len, imm_or_inv) = match opcode {
            WR_ATOMIC_CMP_SWAP | WR_ATOMIC_FETCH_ADD => {
                seg = atomic_seg(remote & !7, rkey, p.operand, !p.operand);
                (8, 0)
            }
            WR_ATOMIC_WRITE => {
                let w = AtomicWriteSeg {
                    remote_addr: remote & !7,
                    rkey,
                    value: p.operand.to_le_bytes(),
                    ..AtomicWriteSeg::default()
                };
                seg[..AtomicWriteSeg::SIZE].copy_from_slice(&w.encode());
                (0, 0)
            }
            WR_FLUSH => {
                let f = FlushSeg {
                    remote_addr: remote,
                    rkey,
                    length: u64::from(len),
                    placement: FLUSH_GLOBAL | (p.operand as u8 & FLUSH_PERSISTENT),
                    level: if p.operand & 4 != 0 {
                        FLUSH_MR
                    } else {
                        FLUSH_RANGE
                    },
                    ..FlushSeg::default()
                };
                seg[..FlushSeg::SIZE].copy_from_slice(&f.encode());
                (0, 0)
            }
            WR_SEND_WITH_INV => (len, rkey),
            WR_SEND | WR_SEND_WITH_IMM => (len, p.operand as u32),
            _ => {
                seg = rdma_seg(remote, rkey);
                (len, p.operand as u32)
            }
        };
        let wr_id = self.wr_id();
        let ctrl = WqeCtrl {
            wr_id,
            opcode,
            flags: WQE_FLAG_SIGNALED | if p.fence { WQE_FLAG_FENCE } else { 0 },
            num_sge: u8::from(len > 0),
            imm_or_inv,
            ..WqeCtrl::default()
        };
        let sge = Sge {
            addr: local,
            length: len,
            lkey: self.a.n.key,
        };
        let tail = if len > 0 {
            sge.encode().to_vec()
        } else {
            Vec::new()
        };
        self.a.posted.push(wr_id);
        self.a.qp.put(&self.a.n, ctrl, &seg, &tail);
        self.a.qp.ring(&mut self.a.n);
    }

    /// B posts a receive.
    fn recv(&mut self, offset: u16, len: u16) {
        let wr_id = self.wr_id();
        let addr = Self::addr(&self.b, offset);
        self.b.posted.push(wr_id);
        let b = &mut self.b;
        b.qp.post_recv(&mut b.n, wr_id, addr, u32::from(len) % 4097);
    }

    /// One device turn of `side`'s NIC: what it sends joins the frames in flight towards
    /// `peer` (at most [`TURN_FRAMES`]), its CQEs are collected and its writes checked.
    /// Returns whether it did anything.
    fn turn(side: &mut Side, peer: &mut VecDeque<Vec<u8>>, name: &str) -> bool {
        let more = side.n.g.dev.process();
        let mut sent = 0;
        while let Some(f) = side.wire.rx.pop() {
            peer.push_back(f);
            sent += 1;
        }
        assert!(
            sent <= TURN_FRAMES,
            "{name}'s device sent {sent} frames in one turn (budget {TURN_FRAMES})"
        );
        let new = side.n.cq.poll(&side.n.g);
        let collected = !new.is_empty();
        side.cqes.extend(new);
        for eqn in 0..side.n.g.eqs.len() as u32 {
            let _ = side.n.g.poll_eq(eqn);
        }
        side.check_writes(name);
        more || sent > 0 || collected
    }

    /// A turn of each NIC; whether either did anything.
    fn turns(&mut self) -> bool {
        let a = Self::turn(&mut self.a, &mut self.b.inbound, "A");
        self.note_a_psns();
        let b = Self::turn(&mut self.b, &mut self.a.inbound, "B");
        a || b
    }

    /// Follows the PSNs of the requests A sent (for the frames forged towards B).
    fn note_a_psns(&mut self) {
        for bytes in &self.b.inbound {
            let Ok(f) = frame::parse(bytes) else { continue };
            if let Ok(p) = Packet::parse(f.transport) {
                if psn::after(p.bth.psn, self.a_psn) {
                    self.a_psn = p.bth.psn;
                }
            }
        }
    }

    /// Puts the first frame in flight towards `side` on its wire.
    fn deliver_one(side: &mut Side) -> bool {
        match side.inbound.pop_front() {
            Some(f) => {
                side.wire.sink.send(&f);
                true
            }
            None => false,
        }
    }

    /// The relay acts on the frames towards B (`to_b`) or A.
    fn relay(&mut self, to_b: bool, how: Relay) {
        let side = if to_b { &mut self.b } else { &mut self.a };
        match how {
            Relay::One => {
                Self::deliver_one(side);
            }
            Relay::All => while Self::deliver_one(side) {},
            Relay::Drop => {
                side.inbound.pop_front();
            }
            Relay::Duplicate => {
                if let Some(f) = side.inbound.front() {
                    side.wire.sink.send(f);
                }
                Self::deliver_one(side);
            }
            Relay::Swap => {
                if side.inbound.len() >= 2 {
                    side.inbound.swap(0, 1);
                }
                Self::deliver_one(side);
            }
            Relay::Corrupt { at, value } => {
                if let Some(f) = side.inbound.front_mut() {
                    let at = usize::from(at) % f.len().max(1);
                    if let Some(byte) = f.get_mut(at) {
                        *byte = value;
                    }
                }
                Self::deliver_one(side);
            }
        }
    }

    /// The bytes of `f` towards B as if from A (`to_b`), or towards A as if from B.
    fn forged(&self, to_b: bool, f: &Frame) -> Vec<u8> {
        let (from, to) = if to_b {
            (&self.a, &self.b)
        } else {
            (&self.b, &self.a)
        };
        // Requests follow the last PSN A sent; responses answer it.
        let base = if to_b {
            psn::add(self.a_psn, 1)
        } else {
            self.a_psn
        };
        let psn = match f.psn {
            Ok(off) => base.wrapping_add_signed(off) & PSN_MASK,
            Err(any) => any,
        };
        let qpn = match f.dest {
            Dest::Qpn(qpn) => qpn,
            _ => to.qp.qpn,
        };
        let mut b = Headers::new(f.opcode, qpn, psn);
        b.reth = f.reth.map(|(va, rkey, len)| Reth {
            va: to.n.buf + va % (REGISTERED + BEYOND),
            rkey: match rkey {
                None | Some(0) => to.n.key,
                Some(any) => any,
            },
            len,
        });
        b.aeth = f.aeth.map(|(syndrome, msn)| Aeth { syndrome, msn });
        b.atomic = f.atomic.map(|(va, swap_add, compare)| AtomicEth {
            va: to.n.buf + va % (REGISTERED + BEYOND) / 8 * 8,
            rkey: to.n.key,
            swap_add,
            compare,
        });
        b.atomic_ack = f.atomic_ack;
        b.deth = f.deth.map(|(qkey, src_qpn)| Deth { qkey, src_qpn });
        b.imm = f.imm;
        b.ieth = f.ieth;
        let route = Route {
            smac: from.n.mac,
            dmac: to.n.mac,
            vlan: None,
            v1: false,
            sgid: from.n.gid(self.conn.sgid_index),
            dgid: to.n.gid(self.conn.sgid_index),
            traffic_class: 0,
            hop_limit: 64,
            flow_label: 0,
        };
        let mut transport = Vec::new();
        b.write(&f.payload, &mut transport);
        let mut bytes = Vec::new();
        frame::build(&route, &transport, &mut bytes);
        for &(at, value) in &f.flips {
            if let Some(byte) = bytes.get_mut(at) {
                *byte = value;
            }
        }
        bytes
    }

    /// Lets device time pass: to the earliest deadline of either NIC after now, or `ms`.
    fn wait(&mut self, ms: Option<u8>) {
        let time = self.a.n.g.time.clone();
        let now = time.now();
        match ms {
            Some(ms) => time.advance(Duration::from_millis(u64::from(ms))),
            None => {
                if let Some(t) = self.next_deadline() {
                    time.advance_to(t.max(now));
                }
            }
        }
    }

    fn next_deadline(&self) -> Option<std::time::Instant> {
        let now = self.a.n.g.time.now();
        [&self.a, &self.b]
            .iter()
            .filter_map(|s| s.n.g.dev.next_deadline())
            .filter(|t| *t > now)
            .min()
    }

    /// Runs one action.
    pub fn act(&mut self, action: &Action) {
        match action {
            Action::Post(p) => self.post(p),
            Action::Recv { offset, len } => self.recv(*offset, *len),
            Action::Relay { to_b, how } => self.relay(*to_b, *how),
            Action::Forge { to_b, frame } => {
                let bytes = self.forged(*to_b, frame);
                let side = if *to_b { &mut self.b } else { &mut self.a };
                side.wire.sink.send(&bytes);
            }
            Action::Turns(n) => {
                for _ in 0..*n {
                    self.turns();
                }
            }
            Action::Wait(ms) => self.wait(*ms),
        }
    }

    /// The relay turns faithful: everything in flight is delivered, the NICs take turns, and
    /// time jumps to the next deadline whenever nothing moves, until nothing is timed.
    /// Returns whether the pair went quiet within [`SETTLE_TURNS`].
    pub fn settle(&mut self) -> bool {
        for _ in 0..SETTLE_TURNS {
            let in_flight = !self.a.inbound.is_empty() || !self.b.inbound.is_empty();
            self.relay(true, Relay::All);
            self.relay(false, Relay::All);
            let moved = self.turns() || in_flight;
            if moved {
                continue;
            }
            match self.next_deadline() {
                Some(t) => self.a.n.g.time.advance_to(t),
                None => return true,
            }
        }
        false
    }

    /// What must hold once the pair has settled.
    pub fn check(&mut self) {
        for (name, side) in [("A", &self.a), ("B", &self.b)] {
            let mut ids: Vec<u64> = side.cqes.iter().map(|c| c.wr_id).collect();
            let all = ids.len();
            ids.sort_unstable();
            ids.dedup();
            let statuses = super::roce::statuses(&side.cqes);
            assert_eq!(ids.len(), all, "{name}: a WR completed twice: {statuses:?}");
            assert!(
                ids.iter().all(|id| side.posted.contains(id)),
                "{name}: a completion of nothing posted: {statuses:?}"
            );
            assert_eq!(
                side.n.g.dev.core.regs().fatal_code(),
                FATAL_NONE,
                "{name} went fatal"
            );
        }
        let done: Vec<u64> = self.a.cqes.iter().map(|c| c.wr_id).collect();
        let lost: Vec<u64> = self
            .a
            .posted
            .iter()
            .copied()
            .filter(|id| !done.contains(id))
            .collect();
        assert!(
            lost.is_empty(),
            "A's WRs {lost:?} never completed: {:?}",
            super::roce::statuses(&self.a.cqes)
        );
        for side in [&mut self.a, &mut self.b] {
            side.n.g.dma_writes.record(false);
            assert_eq!(side.n.g.cmd(&NopCmd::default()).status, STATUS_OK);
        }
    }
}

/// The two-NIC body over decoded actions: runs them on a new [`Duo`] set up as `setup`
/// says, settles it and checks it; returns it.
pub fn pair_actions(setup: Setup, actions: &[Action]) -> Duo {
    let mut duo = Duo::new(setup);
    for action in actions.iter().take(MAX_ACTIONS) {
        duo.act(action);
    }
    assert!(duo.settle(), "the pair never settled");
    duo.check();
    duo
}

/// The two-NIC body over fuzzer bytes (the libFuzzer target's and the corpus's entry).
pub fn pair(data: &[u8]) {
    let (setup, actions) = decode(data);
    pair_actions(setup, &actions);
}
