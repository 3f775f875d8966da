// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The transport opcodes as a table (IBA 9.2, table 38): for each opcode, which extension
//! headers follow the BTH, whether it carries payload, and its place in a message. The
//! requester, responder and completer consult this table instead of matching opcodes.

/// Header and role flags of an opcode.
pub mod flag {
    /// RDMA extended transport header (16 bytes).
    pub const RETH: u32 = 1 << 0;
    /// ACK extended transport header (4 bytes).
    pub const AETH: u32 = 1 << 1;
    /// Immediate data (4 bytes).
    pub const IMMDT: u32 = 1 << 2;
    /// Atomic extended transport header (28 bytes).
    pub const ATMETH: u32 = 1 << 3;
    /// Atomic ACK extended transport header (8 bytes).
    pub const ATMACK: u32 = 1 << 4;
    /// Datagram extended transport header (8 bytes).
    pub const DETH: u32 = 1 << 5;
    /// Invalidate extended transport header (4 bytes).
    pub const IETH: u32 = 1 << 6;
    /// Carries payload.
    pub const PAYLOAD: u32 = 1 << 7;
    /// A request (requester → responder).
    pub const REQ: u32 = 1 << 8;
    /// A response (responder → requester).
    pub const RESP: u32 = 1 << 9;
    /// Part of a SEND.
    pub const SEND: u32 = 1 << 10;
    /// Part of an RDMA WRITE.
    pub const WRITE: u32 = 1 << 11;
    /// RDMA READ request.
    pub const READ: u32 = 1 << 12;
    /// Atomic request.
    pub const ATOMIC: u32 = 1 << 13;
    /// First packet of a multi-packet message.
    pub const FIRST: u32 = 1 << 14;
    /// Middle packet.
    pub const MIDDLE: u32 = 1 << 15;
    /// Last packet.
    pub const LAST: u32 = 1 << 16;
    /// Only packet.
    pub const ONLY: u32 = 1 << 17;
    /// Consumes a receive WQE at the responder.
    pub const RWR: u32 = 1 << 18;
    /// Completes a message at the responder.
    pub const COMP: u32 = 1 << 19;
    /// Unreliable datagram.
    pub const UD: u32 = 1 << 20;
    /// Unreliable connected.
    pub const UC: u32 = 1 << 21;
    /// Flush extended transport header (4 bytes, before the RETH).
    pub const FETH: u32 = 1 << 22;
    /// FLUSH request (IBTA 1.5).
    pub const FLUSH: u32 = 1 << 23;
    /// ATOMIC WRITE request (IBTA 1.5): an RETH and exactly 8 bytes of payload.
    pub const ATOMIC_WRITE: u32 = 1 << 24;
    /// XRC extended transport header (4 bytes, right after the BTH): the SRQ a request names
    /// at its target.
    pub const XRCETH: u32 = 1 << 25;
    /// Extended reliable connected.
    pub const XRC: u32 = 1 << 26;
}

/// Sizes of the headers, in wire order after the BTH.
pub const BTH_LEN: usize = 12;
/// RETH length.
pub const RETH_LEN: usize = 16;
/// AETH length.
pub const AETH_LEN: usize = 4;
/// ImmDt length.
pub const IMMDT_LEN: usize = 4;
/// AtomicETH length.
pub const ATMETH_LEN: usize = 28;
/// AtomicAckETH length.
pub const ATMACK_LEN: usize = 8;
/// DETH length.
pub const DETH_LEN: usize = 8;
/// IETH length.
pub const IETH_LEN: usize = 4;
/// FETH length.
pub const FETH_LEN: usize = 4;
/// XRCETH length.
pub const XRCETH_LEN: usize = 4;
/// ICRC length.
pub const ICRC_LEN: usize = 4;

/// The opcodes: RC (transport type 000), UC (001) and UD (011).
pub mod op {
    /// SEND first.
    pub const RC_SEND_FIRST: u8 = 0x00;
    /// SEND middle.
    pub const RC_SEND_MIDDLE: u8 = 0x01;
    /// SEND last.
    pub const RC_SEND_LAST: u8 = 0x02;
    /// SEND last with immediate.
    pub const RC_SEND_LAST_IMM: u8 = 0x03;
    /// SEND only.
    pub const RC_SEND_ONLY: u8 = 0x04;
    /// SEND only with immediate.
    pub const RC_SEND_ONLY_IMM: u8 = 0x05;
    /// RDMA WRITE first.
    pub const RC_WRITE_FIRST: u8 = 0x06;
    /// RDMA WRITE middle.
    pub const RC_WRITE_MIDDLE: u8 = 0x07;
    /// RDMA WRITE last.
    pub const RC_WRITE_LAST: u8 = 0x08;
    /// RDMA WRITE last with immediate.
    pub const RC_WRITE_LAST_IMM: u8 = 0x09;
    /// RDMA WRITE only.
    pub const RC_WRITE_ONLY: u8 = 0x0a;
    /// RDMA WRITE only with immediate.
    pub const RC_WRITE_ONLY_IMM: u8 = 0x0b;
    /// RDMA READ request.
    pub const RC_READ_REQUEST: u8 = 0x0c;
    /// RDMA READ response first.
    pub const RC_READ_RESPONSE_FIRST: u8 = 0x0d;
    /// RDMA READ response middle.
    pub const RC_READ_RESPONSE_MIDDLE: u8 = 0x0e;
    /// RDMA READ response last.
    pub const RC_READ_RESPONSE_LAST: u8 = 0x0f;
    /// RDMA READ response only.
    pub const RC_READ_RESPONSE_ONLY: u8 = 0x10;
    /// Acknowledge.
    pub const RC_ACKNOWLEDGE: u8 = 0x11;
    /// Atomic acknowledge.
    pub const RC_ATOMIC_ACKNOWLEDGE: u8 = 0x12;
    /// Compare and swap.
    pub const RC_COMPARE_SWAP: u8 = 0x13;
    /// Fetch and add.
    pub const RC_FETCH_ADD: u8 = 0x14;
    /// SEND last with invalidate.
    pub const RC_SEND_LAST_INV: u8 = 0x16;
    /// SEND only with invalidate.
    pub const RC_SEND_ONLY_INV: u8 = 0x17;
    /// FLUSH (IBTA 1.5).
    pub const RC_FLUSH: u8 = 0x1c;
    /// ATOMIC WRITE (IBTA 1.5).
    pub const RC_ATOMIC_WRITE: u8 = 0x1d;
    /// UC SEND first.
    pub const UC_SEND_FIRST: u8 = 0x20;
    /// UC SEND middle.
    pub const UC_SEND_MIDDLE: u8 = 0x21;
    /// UC SEND last.
    pub const UC_SEND_LAST: u8 = 0x22;
    /// UC SEND last with immediate.
    pub const UC_SEND_LAST_IMM: u8 = 0x23;
    /// UC SEND only.
    pub const UC_SEND_ONLY: u8 = 0x24;
    /// UC SEND only with immediate.
    pub const UC_SEND_ONLY_IMM: u8 = 0x25;
    /// UC RDMA WRITE first.
    pub const UC_WRITE_FIRST: u8 = 0x26;
    /// UC RDMA WRITE middle.
    pub const UC_WRITE_MIDDLE: u8 = 0x27;
    /// UC RDMA WRITE last.
    pub const UC_WRITE_LAST: u8 = 0x28;
    /// UC RDMA WRITE last with immediate.
    pub const UC_WRITE_LAST_IMM: u8 = 0x29;
    /// UC RDMA WRITE only.
    pub const UC_WRITE_ONLY: u8 = 0x2a;
    /// UC RDMA WRITE only with immediate.
    pub const UC_WRITE_ONLY_IMM: u8 = 0x2b;
    /// UD SEND only.
    pub const UD_SEND_ONLY: u8 = 0x64;
    /// UD SEND only with immediate.
    pub const UD_SEND_ONLY_IMM: u8 = 0x65;
    /// XRC's opcodes are RC's in transport type 101 (IBA table 38): `rc | XRC`.
    pub const XRC: u8 = 0xa0;
    /// XRC SEND only.
    pub const XRC_SEND_ONLY: u8 = XRC | RC_SEND_ONLY;
    /// XRC RDMA WRITE only.
    pub const XRC_WRITE_ONLY: u8 = XRC | RC_WRITE_ONLY;
    /// XRC RDMA READ request.
    pub const XRC_READ_REQUEST: u8 = XRC | RC_READ_REQUEST;
    /// XRC acknowledge.
    pub const XRC_ACKNOWLEDGE: u8 = XRC | RC_ACKNOWLEDGE;
}

/// What the table knows about one opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpInfo {
    /// Name as in the IBA and rxe.
    pub name: &'static str,
    /// `flag::*` bits.
    pub flags: u32,
}

impl OpInfo {
    /// Whether all of `bits` are set.
    pub const fn has(&self, bits: u32) -> bool {
        self.flags & bits == bits
    }

    /// Length of BTH plus extension headers.
    pub const fn header_len(&self) -> usize {
        let f = self.flags;
        let mut len = BTH_LEN;
        if f & flag::XRCETH != 0 {
            len += XRCETH_LEN;
        }
        if f & flag::DETH != 0 {
            len += DETH_LEN;
        }
        if f & flag::FETH != 0 {
            len += FETH_LEN;
        }
        if f & flag::RETH != 0 {
            len += RETH_LEN;
        }
        if f & flag::ATMETH != 0 {
            len += ATMETH_LEN;
        }
        if f & flag::AETH != 0 {
            len += AETH_LEN;
        }
        if f & flag::ATMACK != 0 {
            len += ATMACK_LEN;
        }
        if f & flag::IMMDT != 0 {
            len += IMMDT_LEN;
        }
        if f & flag::IETH != 0 {
            len += IETH_LEN;
        }
        len
    }
}

const fn info(name: &'static str, flags: u32) -> Option<OpInfo> {
    Some(OpInfo { name, flags })
}

use flag::*;

/// The table, indexed by opcode. `None` marks opcodes this device does not implement (RD,
/// CNP, reserved).
pub static OPCODES: [Option<OpInfo>; 256] = {
    let mut t: [Option<OpInfo>; 256] = [None; 256];
    let send = REQ | SEND | PAYLOAD;
    let write = REQ | WRITE | PAYLOAD;
    let read_resp = RESP | PAYLOAD;
    t[op::RC_SEND_FIRST as usize] = info("RC_SEND_FIRST", send | FIRST | RWR);
    t[op::RC_SEND_MIDDLE as usize] = info("RC_SEND_MIDDLE", send | MIDDLE);
    t[op::RC_SEND_LAST as usize] = info("RC_SEND_LAST", send | LAST | COMP);
    t[op::RC_SEND_LAST_IMM as usize] =
        info("RC_SEND_LAST_WITH_IMMEDIATE", send | LAST | COMP | IMMDT);
    t[op::RC_SEND_ONLY as usize] = info("RC_SEND_ONLY", send | ONLY | RWR | COMP);
    t[op::RC_SEND_ONLY_IMM as usize] = info(
        "RC_SEND_ONLY_WITH_IMMEDIATE",
        send | ONLY | RWR | COMP | IMMDT,
    );
    t[op::RC_WRITE_FIRST as usize] = info("RC_RDMA_WRITE_FIRST", write | FIRST | RETH);
    t[op::RC_WRITE_MIDDLE as usize] = info("RC_RDMA_WRITE_MIDDLE", write | MIDDLE);
    t[op::RC_WRITE_LAST as usize] = info("RC_RDMA_WRITE_LAST", write | LAST);
    t[op::RC_WRITE_LAST_IMM as usize] = info(
        "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE",
        write | LAST | IMMDT | RWR | COMP,
    );
    t[op::RC_WRITE_ONLY as usize] = info("RC_RDMA_WRITE_ONLY", write | ONLY | RETH);
    t[op::RC_WRITE_ONLY_IMM as usize] = info(
        "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE",
        write | ONLY | RETH | IMMDT | RWR | COMP,
    );
    t[op::RC_READ_REQUEST as usize] = info("RC_RDMA_READ_REQUEST", REQ | READ | RETH | ONLY);
    t[op::RC_READ_RESPONSE_FIRST as usize] =
        info("RC_RDMA_READ_RESPONSE_FIRST", read_resp | FIRST | AETH);
    t[op::RC_READ_RESPONSE_MIDDLE as usize] =
        info("RC_RDMA_READ_RESPONSE_MIDDLE", read_resp | MIDDLE);
    t[op::RC_READ_RESPONSE_LAST as usize] =
        info("RC_RDMA_READ_RESPONSE_LAST", read_resp | LAST | AETH);
    t[op::RC_READ_RESPONSE_ONLY as usize] =
        info("RC_RDMA_READ_RESPONSE_ONLY", read_resp | ONLY | AETH);
    t[op::RC_ACKNOWLEDGE as usize] = info("RC_ACKNOWLEDGE", RESP | AETH | ONLY);
    t[op::RC_ATOMIC_ACKNOWLEDGE as usize] =
        info("RC_ATOMIC_ACKNOWLEDGE", RESP | AETH | ATMACK | ONLY);
    t[op::RC_COMPARE_SWAP as usize] = info("RC_COMPARE_SWAP", REQ | ATOMIC | ATMETH | ONLY);
    t[op::RC_FETCH_ADD as usize] = info("RC_FETCH_ADD", REQ | ATOMIC | ATMETH | ONLY);
    t[op::RC_FLUSH as usize] = info("RC_FLUSH", REQ | FLUSH | FETH | RETH | ONLY);
    t[op::RC_ATOMIC_WRITE as usize] = info(
        "RC_ATOMIC_WRITE",
        REQ | ATOMIC_WRITE | RETH | PAYLOAD | ONLY,
    );
    t[op::RC_SEND_LAST_INV as usize] =
        info("RC_SEND_LAST_WITH_INVALIDATE", send | LAST | COMP | IETH);
    t[op::RC_SEND_ONLY_INV as usize] = info(
        "RC_SEND_ONLY_WITH_INVALIDATE",
        send | ONLY | RWR | COMP | IETH,
    );
    // UC: RC's SEND and RDMA WRITE opcodes, transport type 001 (IBA table 38).
    let uc_send = send | UC;
    let uc_write = write | UC;
    t[op::UC_SEND_FIRST as usize] = info("UC_SEND_FIRST", uc_send | FIRST | RWR);
    t[op::UC_SEND_MIDDLE as usize] = info("UC_SEND_MIDDLE", uc_send | MIDDLE);
    t[op::UC_SEND_LAST as usize] = info("UC_SEND_LAST", uc_send | LAST | COMP);
    t[op::UC_SEND_LAST_IMM as usize] =
        info("UC_SEND_LAST_WITH_IMMEDIATE", uc_send | LAST | COMP | IMMDT);
    t[op::UC_SEND_ONLY as usize] = info("UC_SEND_ONLY", uc_send | ONLY | RWR | COMP);
    t[op::UC_SEND_ONLY_IMM as usize] = info(
        "UC_SEND_ONLY_WITH_IMMEDIATE",
        uc_send | ONLY | RWR | COMP | IMMDT,
    );
    t[op::UC_WRITE_FIRST as usize] = info("UC_RDMA_WRITE_FIRST", uc_write | FIRST | RETH);
    t[op::UC_WRITE_MIDDLE as usize] = info("UC_RDMA_WRITE_MIDDLE", uc_write | MIDDLE);
    t[op::UC_WRITE_LAST as usize] = info("UC_RDMA_WRITE_LAST", uc_write | LAST);
    t[op::UC_WRITE_LAST_IMM as usize] = info(
        "UC_RDMA_WRITE_LAST_WITH_IMMEDIATE",
        uc_write | LAST | IMMDT | RWR | COMP,
    );
    t[op::UC_WRITE_ONLY as usize] = info("UC_RDMA_WRITE_ONLY", uc_write | ONLY | RETH);
    t[op::UC_WRITE_ONLY_IMM as usize] = info(
        "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE",
        uc_write | ONLY | RETH | IMMDT | RWR | COMP,
    );
    t[op::UD_SEND_ONLY as usize] = info("UD_SEND_ONLY", send | ONLY | RWR | COMP | DETH | UD);
    t[op::UD_SEND_ONLY_IMM as usize] = info(
        "UD_SEND_ONLY_WITH_IMMEDIATE",
        send | ONLY | RWR | COMP | DETH | IMMDT | UD,
    );
    // XRC: every RC opcode in transport type 101, with RC's headers; a request also carries
    // the XRCETH, first after the BTH (IBA 9.2, table 38; IBTA 1.5 for FLUSH and ATOMIC WRITE).
    let mut rc = 0;
    while rc < 0x20 {
        if let Some(i) = t[rc] {
            let xrceth = if i.flags & REQ != 0 { XRCETH } else { 0 };
            t[rc | op::XRC as usize] = info(XRC_NAMES[rc], i.flags | XRC | xrceth);
        }
        rc += 1;
    }
    t
};

/// The names of the XRC opcodes, indexed by their RC opcode ("" where RC has none).
const XRC_NAMES: [&str; 0x20] = [
    "XRC_SEND_FIRST",
    "XRC_SEND_MIDDLE",
    "XRC_SEND_LAST",
    "XRC_SEND_LAST_WITH_IMMEDIATE",
    "XRC_SEND_ONLY",
    "XRC_SEND_ONLY_WITH_IMMEDIATE",
    "XRC_RDMA_WRITE_FIRST",
    "XRC_RDMA_WRITE_MIDDLE",
    "XRC_RDMA_WRITE_LAST",
    "XRC_RDMA_WRITE_LAST_WITH_IMMEDIATE",
    "XRC_RDMA_WRITE_ONLY",
    "XRC_RDMA_WRITE_ONLY_WITH_IMMEDIATE",
    "XRC_RDMA_READ_REQUEST",
    "XRC_RDMA_READ_RESPONSE_FIRST",
    "XRC_RDMA_READ_RESPONSE_MIDDLE",
    "XRC_RDMA_READ_RESPONSE_LAST",
    "XRC_RDMA_READ_RESPONSE_ONLY",
    "XRC_ACKNOWLEDGE",
    "XRC_ATOMIC_ACKNOWLEDGE",
    "XRC_COMPARE_SWAP",
    "XRC_FETCH_ADD",
    "",
    "XRC_SEND_LAST_WITH_INVALIDATE",
    "XRC_SEND_ONLY_WITH_INVALIDATE",
    "",
    "",
    "",
    "",
    "XRC_FLUSH",
    "XRC_ATOMIC_WRITE",
    "",
    "",
];

/// The transport service an opcode belongs to (its top three bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// Reliable connected.
    Rc,
    /// Unreliable connected.
    Uc,
    /// Unreliable datagram (also the GSI QP's).
    Ud,
    /// Extended reliable connected (XRC_INI sends requests, XRC_TGT answers them).
    Xrc,
}

impl Transport {
    /// The transport of a QP type's packets.
    pub const fn of(qp_type: ferroce_hw::QpType) -> Self {
        use ferroce_hw::QpType;
        match qp_type {
            QpType::Rc => Transport::Rc,
            QpType::Uc => Transport::Uc,
            QpType::Ud | QpType::Gsi => Transport::Ud,
            QpType::XrcIni | QpType::XrcTgt => Transport::Xrc,
        }
    }

    /// The opcode of this transport for RC opcode `rc` (UC numbers its SEND and RDMA WRITE
    /// opcodes as RC does, in transport type 001; XRC all of them, in type 101).
    pub const fn opcode(self, rc: u8) -> u8 {
        match self {
            Transport::Uc => rc | 0x20,
            Transport::Xrc => rc | op::XRC,
            Transport::Rc | Transport::Ud => rc,
        }
    }
}

impl OpInfo {
    /// The transport this opcode belongs to.
    pub const fn transport(&self) -> Transport {
        if self.flags & UD != 0 {
            Transport::Ud
        } else if self.flags & XRC != 0 {
            Transport::Xrc
        } else if self.flags & UC != 0 {
            Transport::Uc
        } else {
            Transport::Rc
        }
    }
}

/// The table entry of `opcode`.
pub fn lookup(opcode: u8) -> Option<&'static OpInfo> {
    OPCODES[usize::from(opcode)].as_ref()
}

/// Position of a packet in a multi-packet message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Position {
    /// First of several.
    First,
    /// Neither first nor last.
    Middle,
    /// Last of several.
    Last,
    /// The message is one packet.
    Only,
}

impl Position {
    /// Position of packet `index` of `count`.
    pub const fn of(index: u32, count: u32) -> Self {
        match (index == 0, index + 1 >= count) {
            (true, true) => Position::Only,
            (true, false) => Position::First,
            (false, true) => Position::Last,
            (false, false) => Position::Middle,
        }
    }
}

/// The RC SEND opcode for a packet position; `imm` and `inv` pick the variants of last/only.
pub const fn rc_send(pos: Position, imm: bool, inv: bool) -> u8 {
    match pos {
        Position::First => op::RC_SEND_FIRST,
        Position::Middle => op::RC_SEND_MIDDLE,
        Position::Last if imm => op::RC_SEND_LAST_IMM,
        Position::Last if inv => op::RC_SEND_LAST_INV,
        Position::Last => op::RC_SEND_LAST,
        Position::Only if imm => op::RC_SEND_ONLY_IMM,
        Position::Only if inv => op::RC_SEND_ONLY_INV,
        Position::Only => op::RC_SEND_ONLY,
    }
}

/// The RC WRITE opcode for a packet position.
pub const fn rc_write(pos: Position, imm: bool) -> u8 {
    match pos {
        Position::First => op::RC_WRITE_FIRST,
        Position::Middle => op::RC_WRITE_MIDDLE,
        Position::Last if imm => op::RC_WRITE_LAST_IMM,
        Position::Last => op::RC_WRITE_LAST,
        Position::Only if imm => op::RC_WRITE_ONLY_IMM,
        Position::Only => op::RC_WRITE_ONLY,
    }
}

/// The RC opcode an opcode of any connected transport stands for (UC's and XRC's number
/// theirs as RC does, in the low five bits).
pub const fn rc_equivalent(opcode: u8) -> u8 {
    opcode & 0x1f
}

/// The READ response opcode for a packet position.
pub const fn read_response(pos: Position) -> u8 {
    match pos {
        Position::First => op::RC_READ_RESPONSE_FIRST,
        Position::Middle => op::RC_READ_RESPONSE_MIDDLE,
        Position::Last => op::RC_READ_RESPONSE_LAST,
        Position::Only => op::RC_READ_RESPONSE_ONLY,
    }
}

/// Whether a packet with opcode `next` may follow one with `prev` on the same RC QP (IBA
/// 9.8.3.1.2: a multi-packet message is FIRST, MIDDLE*, LAST of the same operation).
pub fn sequence_valid(prev: Option<u8>, next: &OpInfo) -> bool {
    let in_message = prev
        .and_then(lookup)
        .is_some_and(|p| p.flags & (FIRST | MIDDLE) != 0);
    let continues = next.flags & (MIDDLE | LAST) != 0;
    if !in_message {
        return !continues;
    }
    let kind = SEND | WRITE;
    let same_kind = prev
        .and_then(lookup)
        .is_some_and(|p| p.flags & kind == next.flags & kind);
    continues && same_kind
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_lengths_match_iba() {
        let len = |opcode| lookup(opcode).map(|i| i.header_len());
        assert_eq!(len(op::RC_SEND_ONLY), Some(12));
        assert_eq!(len(op::RC_SEND_ONLY_IMM), Some(16));
        assert_eq!(len(op::RC_WRITE_FIRST), Some(28));
        assert_eq!(len(op::RC_WRITE_ONLY_IMM), Some(32));
        assert_eq!(len(op::RC_WRITE_LAST_IMM), Some(16));
        assert_eq!(len(op::RC_READ_REQUEST), Some(28));
        assert_eq!(len(op::RC_FLUSH), Some(32));
        assert_eq!(len(op::RC_ATOMIC_WRITE), Some(28));
        assert_eq!(len(op::RC_READ_RESPONSE_MIDDLE), Some(12));
        assert_eq!(len(op::RC_READ_RESPONSE_FIRST), Some(16));
        assert_eq!(len(op::RC_ACKNOWLEDGE), Some(16));
        assert_eq!(len(op::RC_ATOMIC_ACKNOWLEDGE), Some(24));
        assert_eq!(len(op::RC_COMPARE_SWAP), Some(40));
        assert_eq!(len(op::RC_SEND_ONLY_INV), Some(16));
        assert_eq!(len(op::UD_SEND_ONLY), Some(20));
        assert_eq!(len(op::UD_SEND_ONLY_IMM), Some(24));
        assert_eq!(len(0x15), None);
        assert_eq!(len(op::UC_WRITE_FIRST), Some(28));
        assert_eq!(len(op::UC_SEND_ONLY_IMM), Some(16));
        assert_eq!(len(0x2c), None, "UC has no READ");
        assert_eq!(len(0x40), None, "RD is not implemented");
    }

    #[test]
    fn every_opcode_is_a_request_or_a_response() {
        for (opcode, entry) in OPCODES.iter().enumerate() {
            if let Some(i) = entry {
                assert!(i.has(flag::REQ) != i.has(flag::RESP), "{opcode:#x}");
                let positions = [FIRST, MIDDLE, LAST, ONLY]
                    .iter()
                    .filter(|&&p| i.flags & p != 0)
                    .count();
                assert_eq!(positions, 1, "{opcode:#x}");
            }
        }
    }

    #[test]
    fn message_sequencing() {
        let i = |o| lookup(o).copied().expect("opcode");
        assert!(sequence_valid(None, &i(op::RC_SEND_FIRST)));
        assert!(!sequence_valid(None, &i(op::RC_SEND_MIDDLE)));
        assert!(sequence_valid(
            Some(op::RC_SEND_FIRST),
            &i(op::RC_SEND_LAST)
        ));
        assert!(!sequence_valid(
            Some(op::RC_SEND_FIRST),
            &i(op::RC_WRITE_LAST)
        ));
        assert!(!sequence_valid(
            Some(op::RC_WRITE_MIDDLE),
            &i(op::RC_SEND_ONLY)
        ));
        assert!(sequence_valid(
            Some(op::RC_WRITE_LAST),
            &i(op::RC_READ_REQUEST)
        ));
        assert_eq!(Position::of(0, 1), Position::Only);
        assert_eq!(Position::of(0, 3), Position::First);
        assert_eq!(Position::of(1, 3), Position::Middle);
        assert_eq!(Position::of(2, 3), Position::Last);
        assert_eq!(rc_send(Position::Last, false, true), op::RC_SEND_LAST_INV);
        assert_eq!(rc_write(Position::Only, true), op::RC_WRITE_ONLY_IMM);
        assert!(!sequence_valid(
            Some(op::UC_SEND_FIRST),
            &i(op::UC_WRITE_LAST)
        ));
        assert!(sequence_valid(
            Some(op::UC_WRITE_MIDDLE),
            &i(op::UC_WRITE_LAST_IMM)
        ));
    }

    #[test]
    fn uc_opcodes_are_rc_ones_in_transport_one() {
        for rc in op::RC_SEND_FIRST..=op::RC_WRITE_ONLY_IMM {
            let uc = Transport::Uc.opcode(rc);
            let (r, u) = (lookup(rc).expect("RC"), lookup(uc).expect("UC"));
            assert_eq!(u.transport(), Transport::Uc, "{uc:#x}");
            assert_eq!(r.transport(), Transport::Rc, "{rc:#x}");
            assert_eq!(r.flags, u.flags & !flag::UC, "{uc:#x}");
            assert_eq!(r.header_len(), u.header_len(), "{uc:#x}");
        }
        assert_eq!(
            lookup(op::UD_SEND_ONLY).map(OpInfo::transport),
            Some(Transport::Ud)
        );
    }

    #[test]
    fn xrc_opcodes_are_rc_ones_in_transport_five_with_an_xrceth_on_requests() {
        let mut seen = 0;
        for rc in 0..0x20u8 {
            let xrc = Transport::Xrc.opcode(rc);
            let (Some(r), Some(x)) = (lookup(rc), lookup(xrc)) else {
                assert_eq!(lookup(rc), lookup(xrc), "{xrc:#x}: XRC has what RC has");
                continue;
            };
            seen += 1;
            assert_eq!(x.transport(), Transport::Xrc, "{xrc:#x}");
            let xrceth = if r.has(flag::REQ) { flag::XRCETH } else { 0 };
            assert_eq!(x.flags, r.flags | flag::XRC | xrceth, "{xrc:#x}");
            let extra = if r.has(flag::REQ) { XRCETH_LEN } else { 0 };
            assert_eq!(x.header_len(), r.header_len() + extra, "{xrc:#x}");
            assert!(
                x.name.starts_with("XRC_") && x.name[4..] == r.name[3..],
                "{}",
                x.name
            );
        }
        // RC's 21 opcodes, the two with invalidate, FLUSH and ATOMIC WRITE.
        assert_eq!(seen, 25);
        let len = |opcode| lookup(opcode).map(|i| i.header_len());
        assert_eq!(len(op::XRC_SEND_ONLY), Some(16));
        assert_eq!(len(op::XRC_WRITE_ONLY), Some(32));
        assert_eq!(len(op::XRC_READ_REQUEST), Some(32));
        assert_eq!(
            len(op::XRC_ACKNOWLEDGE),
            Some(16),
            "responses carry no XRCETH"
        );
        assert_eq!(len(0xb5), None, "reserved");
    }
}
