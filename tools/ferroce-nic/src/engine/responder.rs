// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The responder (rxe_resp.c's role). An RC request packet goes through an explicit state
//! machine ([`receive_request`]; the states are named after the responder's flow in IBA vol 1
//! ch. 9.7): it checks the PSN (sequence-error NAK once per expected PSN, duplicates
//! re-acknowledged and READ / atomic replayed from saved resources), the opcode sequence, QP
//! access, lengths, R_Keys and bounds before touching memory, executes SEND, WRITE, READ and
//! atomics, sends RNR NAKs when no receive WQE is posted, and coalesces ACKs: one per batch of
//! received packets. UC requests take the same states without acknowledgements: a PSN gap, or
//! any check a packet fails that would NAK on RC, drops the message (IBA 9.7.5.1.1 class D:
//! nothing is written after the failed packet, the receive WQE it took is kept for the next
//! message, the QP stays up) and the responder waits for the next FIRST or ONLY. Everything
//! it answers goes out from one queue in PSN order, a budget per poll ([`send_replies`]): READ
//! responses, the ACKs and NAKs behind them, atomic acknowledgements. However much a peer asks
//! at once, no QP holds the device thread for more than its budget. UD and GSI datagrams are
//! received by [`receive_ud`] (both in `replies`).

mod acks;
mod atomics;
mod checks;
mod duplicates;
mod replies;

pub use acks::flush_ack;
use acks::{fatal_nak, queue_aeth, rnr_nak, send_aeth};
use atomics::{send_atomic_ack, send_empty_read_response};
pub use replies::{receive_ud, send_replies};
use replies::{scatter, ScatterError};

use std::collections::VecDeque;
use std::time::Instant;

use ferroce_hw::*;
use serde_json::json;

use super::frame::{RoceFrame, Route};
use super::headers::{syndrome, Aeth, Feth, Headers, Packet, Reth};
use super::icrc::NetKind;
use super::io::{Io, Resend};
use super::opcode::{self, flag, op, OpInfo, Position};
use super::psn;
use super::roce::{sge_pieces, QpCtx, GSI_QKEY};
use super::{EngineHost, RecvCompletion, RecvWork};

/// Packets a QP's responder sends per poll ([`send_replies`]): READ responses, ACKs, NAKs.
pub const REPLY_BUDGET: u32 = 64;
/// Out-of-sequence packets after which a sequence NAK for the same PSN is sent again.
const NAK_REPEAT_AFTER: u32 = 16;
/// Largest message (IBA: 2^31 bytes): a longer READ is an invalid request.
const MAX_MESSAGE: u64 = 1 << 31;

/// A SEND (or WRITE with immediate) being received into a receive WQE.
struct Receiving {
    work: RecvWork,
    offset: u64,
}

/// An RDMA WRITE being received.
struct Writing {
    va: u64,
    rkey: u32,
    remaining: u64,
    total: u64,
}

/// What a READ or atomic left behind, to answer its duplicates.
#[derive(Clone, Copy, Debug)]
enum Resource {
    /// A READ: its PSNs and what its RETH asked for. A duplicate is answered only inside
    /// that range, through that key (IBA 9.9, as rxe).
    Read {
        first: u32,
        last: u32,
        va: u64,
        rkey: u32,
        len: u64,
    },
    Atomic {
        psn: u32,
        original: u64,
    },
    /// An ATOMIC WRITE or FLUSH, answered by an empty READ response.
    Answered {
        psn: u32,
    },
}

/// What the responder has to send, in PSN order.
#[derive(Clone, Copy, Debug)]
enum Reply {
    /// The response packets of a READ, one MTU each.
    Read(ReadJob),
    /// An ACK or NAK (`syndrome`) for `psn`, with the MSN when it was decided and the state
    /// that decided it (which the trace names).
    Aeth {
        psn: u32,
        syndrome: u8,
        msn: u32,
        state: RespState,
    },
    /// The Atomic Acknowledge of the atomic at `psn`, with its original value.
    AtomicAck { psn: u32, original: u64, msn: u32 },
    /// The empty RDMA READ response that answers an ATOMIC WRITE or FLUSH at `psn`.
    EmptyRead { psn: u32, msn: u32 },
}

/// READ responses to send.
#[derive(Clone, Copy, Debug)]
struct ReadJob {
    /// The protection domain the READ was checked in (the QP's, or its XRC SRQ's).
    pd: u32,
    psn: u32,
    va: u64,
    rkey: u32,
    len: u64,
    npkts: u32,
    next: u32,
    replay: bool,
}

/// The receive side of a QP.
#[derive(Default)]
pub struct Responder {
    /// Expected PSN.
    pub epsn: u32,
    /// Message sequence number (completed requests).
    pub msn: u32,
    nak_sent_for: Option<u32>,
    /// Out-of-sequence packets since the last sequence NAK.
    out_of_sequence: u32,
    last_opcode: Option<u8>,
    receiving: Option<Receiving>,
    writing: Option<Writing>,
    resources: VecDeque<Resource>,
    /// What is to be sent, in PSN order ([`send_replies`]).
    replies: VecDeque<Reply>,
    /// The PSN a coalesced ACK is due for: it joins `replies` once a batch of received packets
    /// is through ([`flush_ack`]), or before a later answer.
    pending_ack: Option<u32>,
    /// UC: the message being received was dropped; packets are dropped until a FIRST or ONLY.
    dropping: bool,
    /// XRC_TGT: the XRC SRQ the message in progress named in its FIRST packet.
    message_srqn: Option<u32>,
}

impl Responder {
    /// Starts afresh with expected PSN `epsn` (INIT → RTR, or reset).
    pub fn reset(&mut self, epsn: u32) {
        *self = Responder {
            epsn: epsn & PSN_MASK,
            ..Responder::default()
        };
    }

    /// Whether ACKs or READ responses are waiting.
    pub fn busy(&self) -> bool {
        self.pending_ack.is_some() || !self.replies.is_empty()
    }

    /// The READ response jobs queued.
    fn reads(&self) -> impl Iterator<Item = &ReadJob> {
        self.replies.iter().filter_map(|r| match r {
            Reply::Read(job) => Some(job),
            _ => None,
        })
    }

    fn accept(&mut self, opcode: u8, npkts: u32, ends_message: bool) {
        self.epsn = psn::add(self.epsn, npkts);
        self.last_opcode = Some(opcode);
        self.nak_sent_for = None;
        self.out_of_sequence = 0;
        if ends_message {
            self.msn = (self.msn + 1) & 0x00ff_ffff;
        }
    }

    /// UC: gives up the message being received. A receive WQE it took (`taken`, or the one a
    /// SEND is being received into) is kept, from its start, for the next message.
    fn drop_message(&mut self, taken: Option<RecvWork>) {
        self.dropping = true;
        self.last_opcode = None;
        self.writing = None;
        if let Some(work) = taken {
            self.receiving = Some(Receiving { work, offset: 0 });
        }
        if let Some(r) = self.receiving.as_mut() {
            r.offset = 0;
        }
    }

    /// XRC_TGT: XRC SRQ `srqn` was destroyed; a message being received into it is given up
    /// (its next packet finds no receive WQE: an Invalid Request NAK).
    pub fn srq_destroyed(&mut self, srqn: u32) {
        if self
            .receiving
            .as_ref()
            .is_some_and(|r| r.work.srqn == Some(srqn))
        {
            self.receiving = None;
        }
    }

    fn remember(&mut self, resource: Resource) {
        if self.resources.len() >= usize::from(MAX_RD_ATOMIC) {
            self.resources.pop_front();
        }
        self.resources.push_back(resource);
    }

    fn queue_job(&mut self, job: ReadJob) {
        if self.reads().count() >= usize::from(MAX_RD_ATOMIC) {
            if let Some(i) = self
                .replies
                .iter()
                .position(|r| matches!(r, Reply::Read(_)))
            {
                self.replies.remove(i);
            }
        }
        self.replies.push_back(Reply::Read(job));
    }
}

/// The operation a request packet belongs to, from the opcode table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Send,
    Write,
    Read,
    Atomic,
    AtomicWrite,
    Flush,
    /// Not a request this responder executes.
    Unsupported,
}

impl Kind {
    fn of(info: &OpInfo) -> Self {
        if info.has(flag::SEND) {
            Kind::Send
        } else if info.has(flag::WRITE) {
            Kind::Write
        } else if info.has(flag::READ) {
            Kind::Read
        } else if info.has(flag::ATOMIC) {
            Kind::Atomic
        } else if info.has(flag::ATOMIC_WRITE) {
            Kind::AtomicWrite
        } else if info.has(flag::FLUSH) {
            Kind::Flush
        } else {
            Kind::Unsupported
        }
    }

    /// The QP access flags (`ACCESS_*`) the operation needs; 0 for SEND (a FLUSH's come from
    /// its FETH: [`atomics::flush_access`]).
    fn access(self, feth: Option<Feth>) -> u32 {
        match self {
            Kind::Write | Kind::AtomicWrite => ACCESS_REMOTE_WRITE,
            Kind::Read => ACCESS_REMOTE_READ,
            Kind::Atomic => ACCESS_REMOTE_ATOMIC,
            Kind::Flush => atomics::flush_access(feth),
            Kind::Send | Kind::Unsupported => 0,
        }
    }
}

/// The states of the responder's receive path for one RC request packet, named after the
/// responder's flow in IBA vol 1 ch. 9.7 (and, for shape, rxe's `enum resp_states`). Each state
/// is a method of [`Request`] that does its part and names the next; [`receive_request`]
/// drives them until [`RespState::Done`]. The flow only goes forward:
///
/// ```text
/// GET_REQ → CHK_PSN ─┬─ ahead ─→ ERR_PSN_OUT_OF_SEQ (or dropped: NAK already sent)
///                    ├─ behind → DUPLICATE_REQUEST
///                    └─ ePSN ──→ (XRC: CHK_XRCETH →) CHK_OP_SEQ → CHK_OP_VALID → CHK_LENGTH → CHK_RKEY
///   → CHK_RESOURCE → EXECUTE ─┬─ READ ───→ READ_REPLY
///                             ├─ atomic ─→ ATOMIC_REPLY
///                             ├─ ATOMIC WRITE → ATOMIC_WRITE_REPLY
///                             ├─ FLUSH ──→ FLUSH_REPLY
///                             ├─ message ends with a receive WQE → COMPLETE → ACKNOWLEDGE
///                             └─ otherwise ───────────────────────────────→ ACKNOWLEDGE
/// a failed check → ERR_*: ERR_RNR and ERR_PSN_OUT_OF_SEQ only NAK, the others also move the
/// QP to ERR. Every path ends in DONE.
/// ```
///
/// A UC packet checks its PSN in CHK_PSN_UC instead, and the ERR_* states of a UC QP but
/// ERR_REMOTE_OPERATIONAL (the QP's own receive buffer failed: class A, as on RC, without the
/// NAK) are DROP_MESSAGE.
///
/// Unlike rxe's order, CHK_RESOURCE comes after CHK_LENGTH and CHK_RKEY: a WRITE with immediate
/// refused for its length or R_Key consumes no receive WQE (and, with the WQE taken before
/// EXECUTE, one that is RNR NAKed has written nothing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RespState {
    /// A request packet the engine matched to this RC QP (type and state checked). The QP's
    /// protection domain, which every memory access is checked against, is looked up; a QP the
    /// host no longer knows drops the packet. On an XRC_TGT QP the protection domain is that
    /// of the XRC SRQ the packet's XRCETH names, if it may name it ([`EngineHost::xrc_target`]).
    GetReq,
    /// IBA 9.7.1: the PSN against the expected PSN (ePSN). The ePSN itself is a new request;
    /// a PSN behind it (the duplicate region) is a duplicate; one ahead of it is a sequence
    /// error. Both are counted.
    ChkPsn,
    /// UC (IBA 9.7.5.1.1 class D): the ePSN continues the message; a FIRST or ONLY with
    /// any other PSN starts a new one there (a lost message is dropped, counted as a sequence
    /// error); any other packet out of sequence, or after a dropped one, is DROP_MESSAGE.
    ChkPsnUc,
    /// UC: the message being received is dropped with this packet (counted, traced), nothing
    /// more of it is written, a receive WQE it took waits for the next message; no NAK, no
    /// completion, the QP stays up.
    DropMessage(&'static str),
    /// IBA 9.7.5.1.1: a PSN sequence error NAK carrying the ePSN, once per ePSN (a class B
    /// error: nothing else changes), repeated after `NAK_REPEAT_AFTER` more out-of-sequence
    /// packets in case the NAK or the retransmission was lost too. Coalesced ACKs and queued
    /// READ responses go out first.
    ErrPsnOutOfSeq,
    /// IBA 9.7: a duplicate request is not executed again. A SEND or WRITE is acknowledged up
    /// to the last request received; a READ is answered again from its saved responder
    /// resource, starting at the PSN asked for, if it lies within that READ and its range is
    /// still accessible; an atomic's saved original value is sent again (an atomic never runs
    /// twice). A duplicate with no saved resource is dropped.
    DuplicateRequest,
    /// XRC_TGT: the XRCETH must name an XRC SRQ of the QP's XRC domain, and a MIDDLE or LAST
    /// packet the SRQ its message's FIRST named; otherwise a Remote Access Error NAK (and the
    /// QP goes to ERR), as for an R_Key the QP may not use.
    ChkXrceth,
    /// IBA 9.7, opcode sequence check (`opcode::sequence_valid`): a MIDDLE or LAST packet must
    /// continue a message of the same kind, and a FIRST or ONLY must not interrupt one;
    /// otherwise an Invalid Request NAK.
    ChkOpSeq,
    /// The opcode is a request this responder executes (SEND, RDMA WRITE, RDMA READ, atomic:
    /// otherwise an Invalid Request NAK), and the QP's remote access flags allow it (otherwise
    /// a Remote Access Error NAK).
    ChkOpValid,
    /// The payload against the path MTU: FIRST and MIDDLE packets carry exactly one PMTU, LAST
    /// and ONLY at most one; otherwise an Invalid Request NAK.
    ChkLength,
    /// Before any memory is touched: a type 2 memory window's R_Key is usable only on the QP it
    /// is bound to, and a WRITE's or READ's whole RETH range is checked against its R_Key
    /// (Remote Access Error NAK), and a WRITE's packets must fit, and at its end fill,
    /// the RETH length (Invalid Request NAK). An atomic's AtomicETH must be 8-byte aligned
    /// (Invalid Request NAK); its R_Key is checked by the access itself in ATOMIC_REPLY.
    ChkRkey,
    /// The first packet of a SEND, or the last of a WRITE with immediate, consumes a receive
    /// WQE (from the RQ or the SRQ): none posted is ERR_RNR. A SEND's later packets need the
    /// WQE its first packet took (Invalid Request NAK otherwise).
    ChkResource,
    /// IBA 9.7 (receiver not ready): an RNR NAK carrying the QP's
    /// minimum RNR timer for the ePSN, which does not advance: the requester retries. Packets
    /// behind it arrive out of sequence and are covered by it (no sequence NAK for them).
    ErrRnr,
    /// On-demand paging: the packet needs a page of an on-demand MR that is not present (its
    /// page fault is raised). Nothing is written and the ePSN does not advance; a receive WQE
    /// the message holds is kept for the packet's return. A SEND or WRITE is RNR NAKed, as
    /// RNICs do for page faults (UC: DROP_MESSAGE); an atomic or ATOMIC WRITE, which IBA does
    /// not RNR NAK, is dropped and comes back when the requester retries. (A READ does not come
    /// here: it is accepted, and its responses wait for their pages.)
    ErrPageFault,
    /// The request's effect: a SEND's payload is scattered into the receive WQE at the
    /// message offset (too long: ERR_RECV_LENGTH; a protection fault: ERR_REMOTE_OPERATIONAL);
    /// a WRITE's payload is written at its place in the RETH range (Remote Access Error NAK on
    /// a fault). READ and atomics go to their reply states.
    Execute,
    /// The READ is accepted: coalesced ACKs go out first, the request is saved as a responder
    /// resource (for its duplicates) and its response packets are queued, to be sent in PSN
    /// order by [`send_replies`]; the ePSN advances by their number, the MSN by one.
    ReadReply,
    /// The atomic is executed (compare and swap, or fetch and add, on 8 bytes; a fault is a
    /// Remote Access Error NAK), its original value saved as a responder resource, the ePSN
    /// and MSN advanced, and an Atomic Acknowledge carrying the original value sent, behind any
    /// coalesced ACK and queued READ responses.
    AtomicReply,
    /// IBTA 1.5: the ATOMIC WRITE's 8 bytes are stored in one piece (a fault is a Remote Access
    /// Error NAK), the request saved as a responder resource, the ePSN and MSN advanced, and an
    /// RDMA READ response with no payload sent, behind coalesced ACKs and READ responses.
    AtomicWriteReply,
    /// IBTA 1.5: the writes before the FLUSH are globally visible (and persistent, as far as
    /// the VM's memory is) once the device has done them, which it has: the FLUSH is saved as
    /// a responder resource, the ePSN and MSN advance, and an empty RDMA READ response answers.
    FlushReply,
    /// The last packet of a SEND or WRITE with immediate completes its receive WQE: byte count,
    /// immediate data, the invalidated R_Key of a SEND with invalidate (a failed invalidation
    /// does not fail the SEND), the solicited event flag.
    Complete,
    /// The packet is accepted: the ePSN advances by one and, at the end of a message, the MSN by
    /// one. An ACK is due when the requester asked for one (BTH AckReq); ACKs are coalesced,
    /// one per batch of received packets ([`flush_ack`]).
    Acknowledge,
    /// IBA 9.9.3.1 (see `fatal_nak`): an Invalid Request NAK for the ePSN; a receive in progress
    /// completes with `WcStatus::RemInvReqErr`, the QP goes to ERR with `EventType::QpReqErr`.
    ErrInvalidRequest,
    /// IBA 9.9.3.1 (see `fatal_nak`): a Remote Access Error NAK for the ePSN; a receive in progress
    /// completes with `WcStatus::RemAccessErr`, the QP goes to ERR with `EventType::QpAccessErr`.
    ErrRemoteAccess,
    /// A SEND longer than its receive WQE: an Invalid Request NAK; the receive completes with
    /// `WcStatus::LocLenErr`, the QP goes to ERR with `EventType::QpReqErr`.
    ErrRecvLength,
    /// The receive WQE's buffers cannot be written (a local protection error status):
    /// a Remote Operational Error NAK; the receive completes with that status, the QP goes to
    /// ERR with `EventType::QpReqErr`.
    ErrRemoteOperational(WcStatus),
    /// The packet is finished with: executed, answered or dropped.
    Done,
}

impl RespState {
    /// Its name in the trace (the diagram's).
    fn name(self) -> &'static str {
        match self {
            RespState::GetReq => "GET_REQ",
            RespState::ChkPsn => "CHK_PSN",
            RespState::ChkPsnUc => "CHK_PSN_UC",
            RespState::DropMessage(_) => "DROP_MESSAGE",
            RespState::ErrPsnOutOfSeq => "ERR_PSN_OUT_OF_SEQ",
            RespState::DuplicateRequest => "DUPLICATE_REQUEST",
            RespState::ChkXrceth => "CHK_XRCETH",
            RespState::ChkOpSeq => "CHK_OP_SEQ",
            RespState::ChkOpValid => "CHK_OP_VALID",
            RespState::ChkLength => "CHK_LENGTH",
            RespState::ChkRkey => "CHK_RKEY",
            RespState::ChkResource => "CHK_RESOURCE",
            RespState::ErrRnr => "ERR_RNR",
            RespState::ErrPageFault => "ERR_PAGE_FAULT",
            RespState::Execute => "EXECUTE",
            RespState::ReadReply => "READ_REPLY",
            RespState::AtomicReply => "ATOMIC_REPLY",
            RespState::AtomicWriteReply => "ATOMIC_WRITE_REPLY",
            RespState::FlushReply => "FLUSH_REPLY",
            RespState::Complete => "COMPLETE",
            RespState::Acknowledge => "ACKNOWLEDGE",
            RespState::ErrInvalidRequest => "ERR_INVALID_REQUEST",
            RespState::ErrRemoteAccess => "ERR_REMOTE_ACCESS",
            RespState::ErrRecvLength => "ERR_RECV_LENGTH",
            RespState::ErrRemoteOperational(_) => "ERR_REMOTE_OPERATIONAL",
            RespState::Done => "DONE",
        }
    }
}

/// One RC request packet going through the responder's states, with what the states tell
/// each other.
struct Request<'r, 'p> {
    qp: &'r mut QpCtx,
    io: &'r mut Io,
    host: &'r mut dyn EngineHost,
    pkt: &'r Packet<'p>,
    kind: Kind,
    /// The QP's protection domain (GET_REQ): an XRC_TGT QP's is its XRC SRQ's.
    pd: u32,
    /// XRC_TGT: the XRC SRQ the XRCETH names, and whether the QP may deliver into it (GET_REQ).
    xrc: Option<(u32, bool)>,
    /// The receive WQE a WRITE with immediate consumes (CHK_RESOURCE).
    write_recv: Option<RecvWork>,
    /// The RETH length of a WRITE that ends with this packet (EXECUTE), for its CQE.
    write_len: u64,
}

/// Handles an RC request packet addressed to `qp`: runs the responder's states
/// (`RespState`) from GET_REQ to DONE.
pub fn receive_request(
    qp: &mut QpCtx,
    io: &mut Io,
    host: &mut dyn EngineHost,
    pkt: &Packet<'_>,
    _now: Instant,
) {
    let mut req = Request {
        qp,
        io,
        host,
        pkt,
        kind: Kind::of(pkt.info),
        pd: 0,
        xrc: None,
        write_recv: None,
        write_len: 0,
    };
    let mut state = RespState::GetReq;
    while state != RespState::Done {
        state = req.step(state);
    }
}

impl Request<'_, '_> {
    fn step(&mut self, state: RespState) -> RespState {
        use RespState::*;
        match state {
            GetReq => self.get_req(),
            ChkPsn => self.chk_psn(),
            ChkPsnUc => self.chk_psn_uc(),
            DropMessage(why) => self.drop_message(why),
            ErrInvalidRequest | ErrRemoteAccess | ErrRecvLength | ErrRnr
                if self.qp.qp_type == QpType::Uc =>
            {
                DropMessage(match state {
                    ErrInvalidRequest => "invalid request",
                    ErrRemoteAccess => "remote access",
                    ErrRecvLength => "receive WQE too short",
                    _ => "no receive WQE",
                })
            }
            ErrPageFault => self.err_page_fault(),
            ErrPsnOutOfSeq => self.err_psn_out_of_seq(),
            DuplicateRequest => self.duplicate_request(),
            ChkXrceth => self.chk_xrceth(),
            ChkOpSeq => self.chk_op_seq(),
            ChkOpValid => self.chk_op_valid(),
            ChkLength => self.chk_length(),
            ChkRkey => self.chk_rkey(),
            ChkResource => self.chk_resource(),
            ErrRnr => self.err_rnr(),
            Execute => self.execute(),
            ReadReply => self.read_reply(),
            AtomicReply => self.atomic_reply(),
            AtomicWriteReply => self.atomic_write_reply(),
            FlushReply => self.answer(),
            Complete => self.complete(),
            Acknowledge => self.acknowledge(),
            ErrInvalidRequest => self.fatal(
                state,
                syndrome::NAK_INVALID_REQUEST,
                WcStatus::RemInvReqErr,
                EventType::QpReqErr,
            ),
            ErrRemoteAccess => self.fatal(
                state,
                syndrome::NAK_REMOTE_ACCESS,
                WcStatus::RemAccessErr,
                EventType::QpAccessErr,
            ),
            ErrRecvLength => self.fatal(
                state,
                syndrome::NAK_INVALID_REQUEST,
                WcStatus::LocLenErr,
                EventType::QpReqErr,
            ),
            ErrRemoteOperational(status) => {
                self.fatal(state, syndrome::NAK_REMOTE_OP, status, EventType::QpReqErr)
            }
            Done => Done,
        }
    }

    /// Whether this packet ends its message (LAST or ONLY).
    fn ends(&self) -> bool {
        self.pkt.info.flags & (flag::LAST | flag::ONLY) != 0
    }

    fn payload_len(&self) -> u64 {
        self.pkt.payload.len() as u64
    }

    fn execute(&mut self) -> RespState {
        let (len, ends) = (self.payload_len(), self.ends());
        match self.kind {
            Kind::Send => {
                let Some(r) = self.qp.resp.receiving.as_mut() else {
                    return RespState::ErrInvalidRequest;
                };
                match scatter(self.host, self.pd, &r.work, r.offset, self.pkt.payload) {
                    Ok(()) => {}
                    Err(ScatterError::PageFault) => return RespState::ErrPageFault,
                    Err(ScatterError::Fails(WcStatus::LocLenErr)) => {
                        return RespState::ErrRecvLength
                    }
                    Err(ScatterError::Fails(status)) => {
                        return RespState::ErrRemoteOperational(status)
                    }
                }
                r.offset += len;
            }
            Kind::Write => {
                let Some(w) = self.qp.resp.writing.as_mut() else {
                    return RespState::ErrInvalidRequest;
                };
                if len > 0 {
                    let at_va = w.va.wrapping_add(w.total - w.remaining);
                    let written = self.host.write_payload(
                        self.pd,
                        w.rkey,
                        at_va,
                        self.pkt.payload,
                        ACCESS_REMOTE_WRITE,
                    );
                    match written {
                        Ok(()) => {}
                        Err(e) if e.is_page_fault() => {
                            // Pages went away mid-WRITE (an invalidation): the fault asks for
                            // all it still needs, not this packet's page alone, so that one
                            // RNR NAK waits for them.
                            let (rkey, remaining) = (w.rkey, w.remaining);
                            self.host
                                .pages_present(rkey, at_va, remaining, ACCESS_REMOTE_WRITE);
                            return RespState::ErrPageFault;
                        }
                        Err(_) => return RespState::ErrRemoteAccess,
                    }
                }
                w.remaining -= len;
                if ends {
                    self.write_len = w.total;
                    self.qp.resp.writing = None;
                }
            }
            Kind::Read => return RespState::ReadReply,
            Kind::Atomic => return RespState::AtomicReply,
            Kind::AtomicWrite => return RespState::AtomicWriteReply,
            Kind::Flush => return RespState::FlushReply,
            Kind::Unsupported => return RespState::ErrInvalidRequest,
        }
        let completes = match self.kind {
            Kind::Send => ends,
            _ => ends && self.write_recv.is_some(),
        };
        if completes {
            RespState::Complete
        } else {
            RespState::Acknowledge
        }
    }

    fn read_reply(&mut self) -> RespState {
        let Some(reth) = self.pkt.reth else {
            return RespState::ErrInvalidRequest;
        };
        let at = self.pkt.bth.psn;
        let total = u64::from(reth.len);
        let npkts = total.div_ceil(u64::from(self.qp.mtu())).max(1) as u32;
        flush_ack(self.qp);
        let pd = self.pd;
        let resp = &mut self.qp.resp;
        resp.remember(Resource::Read {
            first: at,
            last: psn::add(at, npkts - 1),
            va: reth.va,
            rkey: reth.rkey,
            len: total,
        });
        resp.queue_job(ReadJob {
            pd,
            psn: at,
            va: reth.va,
            rkey: reth.rkey,
            len: total,
            npkts,
            next: 0,
            replay: false,
        });
        resp.accept(self.pkt.bth.opcode, npkts, true);
        RespState::Done
    }

    fn complete(&mut self) -> RespState {
        let pkt = self.pkt;
        let solicited = if pkt.bth.solicited {
            CQE_FLAG_SOLICITED
        } else {
            0
        };
        match self.kind {
            Kind::Send => {
                if let Some(r) = self.qp.resp.receiving.take() {
                    let mut c = RecvCompletion {
                        status: WcStatus::Success,
                        opcode: CQE_OP_RECV,
                        byte_len: r.offset as u32,
                        ..RecvCompletion::default()
                    };
                    if let Some(imm) = pkt.imm {
                        c.flags |= CQE_FLAG_WITH_IMM;
                        c.imm_or_inv = u32::from_le_bytes(imm);
                    }
                    if let Some(rkey) = pkt.ieth {
                        // Invalidation failures do not fail the SEND (the key may be stale).
                        if self.host.invalidate(self.pd, self.qp.qpn, rkey).is_ok() {
                            self.host.count(COUNTER_REMOTE_INVALIDATIONS, 1);
                        }
                        c.flags |= CQE_FLAG_WITH_INV;
                        c.imm_or_inv = rkey;
                    }
                    c.flags |= solicited;
                    let _ = self.host.complete_recv(self.qp.qpn, &r.work, c);
                }
            }
            Kind::Write => {
                if let Some(work) = self.write_recv.take() {
                    let c = RecvCompletion {
                        status: WcStatus::Success,
                        opcode: CQE_OP_RECV_RDMA_WITH_IMM,
                        flags: CQE_FLAG_WITH_IMM | solicited,
                        byte_len: self.write_len as u32,
                        imm_or_inv: pkt.imm.map_or(0, u32::from_le_bytes),
                        ..RecvCompletion::default()
                    };
                    let _ = self.host.complete_recv(self.qp.qpn, &work, c);
                }
            }
            Kind::Read | Kind::Atomic | Kind::AtomicWrite | Kind::Flush | Kind::Unsupported => {}
        }
        RespState::Acknowledge
    }

    fn acknowledge(&mut self) -> RespState {
        let ends = self.ends();
        self.qp.resp.accept(self.pkt.bth.opcode, 1, ends);
        if self.pkt.bth.ack_req && self.qp.qp_type.is_reliable() {
            self.qp.resp.pending_ack = Some(self.pkt.bth.psn);
        }
        RespState::Done
    }

    /// The ERR_* states but ERR_RNR and ERR_PSN_OUT_OF_SEQ: see [`fatal_nak`].
    fn fatal(
        &mut self,
        state: RespState,
        syn: u8,
        wc_status: WcStatus,
        event: EventType,
    ) -> RespState {
        fatal_nak(self.qp, self.host, state, syn, wc_status, event);
        RespState::Done
    }
}
