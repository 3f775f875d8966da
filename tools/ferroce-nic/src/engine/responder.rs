// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The responder: checks request PSNs (sequence-error NAK once per expected PSN, duplicates
//! re-acknowledged and READ / atomic replayed from saved resources), checks opcode sequence,
//! QP access, lengths, R_Keys and bounds before touching memory, executes SEND, WRITE, READ
//! and atomics, sends RNR NAKs when no receive WQE is posted, and coalesces ACKs: one per
//! batch of received packets (rxe_resp.c's role). UD and GSI receives are here too.

use std::collections::VecDeque;
use std::time::Instant;

use ferroce_hw::*;
use serde_json::json;

use super::frame::RoceFrame;
use super::headers::{syndrome, Aeth, Packet, PacketBuilder};
use super::icrc::NetKind;
use super::opcode::{self, flag, op, Position};
use super::psn;
use super::roce::{sge_pieces, Io, QpCtx, GSI_QKEY};
use super::{EngineHost, RecvCompletion, RecvWork};

/// READ response packets sent per QP per poll.
const READ_BUDGET: u32 = 64;
/// Out-of-sequence packets after which a sequence NAK for the same PSN is sent again.
const NAK_REPEAT_AFTER: u32 = 16;

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
    Read { first: u32, last: u32 },
    Atomic { psn: u32, original: u64 },
}

/// READ responses to send.
#[derive(Clone, Copy, Debug)]
struct ReadJob {
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
    jobs: VecDeque<ReadJob>,
    pending_ack: Option<u32>,
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
        self.pending_ack.is_some() || !self.jobs.is_empty()
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

    fn remember(&mut self, resource: Resource) {
        if self.resources.len() >= usize::from(MAX_RD_ATOMIC) {
            self.resources.pop_front();
        }
        self.resources.push_back(resource);
    }

    fn queue_job(&mut self, job: ReadJob) {
        if self.jobs.len() >= usize::from(MAX_RD_ATOMIC) {
            self.jobs.pop_front();
        }
        self.jobs.push_back(job);
    }
}

fn send_aeth(qp: &QpCtx, io: &mut Io, host: &mut dyn EngineHost, at: u32, syn: u8) {
    let Some(route) = qp.route(host) else { return };
    let mut b = PacketBuilder::new(op::RC_ACKNOWLEDGE, qp.attrs.dest_qpn, at);
    b.aeth = Some(Aeth {
        syndrome: syn,
        msn: qp.resp.msn,
    });
    let kind = if syndrome::kind(syn) == syndrome::KIND_ACK {
        "ack"
    } else {
        host.count(COUNTER_NAKS_SENT, 1);
        "nak"
    };
    io.trace.event(
        kind,
        || json!({"dir": "tx", "qpn": qp.qpn, "psn": at, "syndrome": syn}),
    );
    io.send(host, &route, &b, &[], false);
}

/// Sends the coalesced ACK, if one is due.
pub fn flush_ack(qp: &mut QpCtx, io: &mut Io, host: &mut dyn EngineHost) {
    if let Some(at) = qp.resp.pending_ack.take() {
        drain_read_responses(qp, io, host);
        send_aeth(qp, io, host, at, syndrome::ACK);
    }
}

/// Sends every queued READ response now: responses go out in PSN order, so an ACK or NAK for
/// a later PSN must not overtake them (the requester would take it for a lost response).
fn drain_read_responses(qp: &mut QpCtx, io: &mut Io, host: &mut dyn EngineHost) {
    while !qp.resp.jobs.is_empty() {
        let before = qp.resp.jobs.len();
        let next = qp.resp.jobs.front().map(|j| j.next);
        send_read_responses(qp, io, host);
        if qp.resp.jobs.len() == before && qp.resp.jobs.front().map(|j| j.next) == next {
            break; // No route or QP state: nothing can be sent.
        }
    }
}

/// NAKs the expected PSN with `syn`, completes a receive in progress with `wc_status`, and
/// moves the QP to ERR with async event `event` (IBA 9.9.3.1: responder class C/D errors).
fn fatal_nak(
    qp: &mut QpCtx,
    io: &mut Io,
    host: &mut dyn EngineHost,
    syn: u8,
    wc_status: u8,
    event: u8,
) {
    flush_ack(qp, io, host);
    drain_read_responses(qp, io, host);
    let epsn = qp.resp.epsn;
    send_aeth(qp, io, host, epsn, syn);
    if let Some(r) = qp.resp.receiving.take() {
        let completion = RecvCompletion {
            status: wc_status,
            opcode: CQE_OP_RECV,
            ..RecvCompletion::default()
        };
        let _ = host.complete_recv(qp.qpn, &r.work, completion);
    }
    host.qp_error(qp.qpn, event);
    qp.state = QPS_ERR;
    qp.req.clear();
    qp.resp.reset(epsn);
}

fn rnr_nak(qp: &mut QpCtx, io: &mut Io, host: &mut dyn EngineHost) {
    flush_ack(qp, io, host);
    drain_read_responses(qp, io, host);
    let epsn = qp.resp.epsn;
    // Packets behind this one arrive out of sequence; the RNR NAK stands for them too.
    qp.resp.nak_sent_for = Some(epsn);
    let code = qp.attrs.min_rnr_timer & 0x1f;
    send_aeth(qp, io, host, epsn, syndrome::RNR_NAK | code);
}

/// Takes the receive WQE a SEND or WRITE with immediate needs; `None` after an RNR NAK.
fn take_receive(qp: &mut QpCtx, io: &mut Io, host: &mut dyn EngineHost) -> Option<RecvWork> {
    match host.take_recv(qp.qpn) {
        Ok(Some(work)) => Some(work),
        Ok(None) => {
            rnr_nak(qp, io, host);
            None
        }
        Err(_) => None,
    }
}

/// Scatters `data` at `offset` of a receive WQE; a `WC_*` error status on failure.
fn scatter(
    host: &mut dyn EngineHost,
    pd: u32,
    work: &RecvWork,
    offset: u64,
    data: &[u8],
) -> Result<(), u8> {
    let pieces = sge_pieces(&work.sges, offset, data.len()).ok_or(WC_LOC_LEN_ERR)?;
    let mut at = 0;
    for (lkey, addr, n) in pieces {
        host.write_payload(pd, lkey, addr, &data[at..at + n], ACCESS_LOCAL_WRITE)
            .map_err(|_| WC_LOC_PROT_ERR)?;
        at += n;
    }
    Ok(())
}

fn duplicate(qp: &mut QpCtx, io: &mut Io, host: &mut dyn EngineHost, pkt: &Packet<'_>, pd: u32) {
    let at = pkt.bth.psn;
    if pkt.info.has(flag::READ) {
        let Some(reth) = pkt.reth else { return };
        let Some(Resource::Read { first, last }) = qp.resp.resources.iter().copied().find(
            |r| matches!(r, Resource::Read { first, last } if psn::within(at, *first, *last)),
        ) else {
            return;
        };
        let len = u64::from(reth.len);
        let npkts = len.div_ceil(u64::from(qp.mtu())).max(1) as u32;
        if psn::after(psn::add(at, npkts - 1), last) {
            return;
        }
        if len > 0
            && host
                .check_access(pd, reth.rkey, reth.va, len, ACCESS_REMOTE_READ)
                .is_err()
        {
            return;
        }
        // The requester lost responses: restart from the PSN it asks for.
        qp.resp.jobs.retain(|j| !psn::within(j.psn, first, last));
        qp.resp.queue_job(ReadJob {
            psn: at,
            va: reth.va,
            rkey: reth.rkey,
            len,
            npkts,
            next: 0,
            replay: true,
        });
    } else if pkt.info.has(flag::ATOMIC) {
        let saved = qp.resp.resources.iter().find_map(|r| match r {
            Resource::Atomic { psn, original } if *psn == at => Some(*original),
            _ => None,
        });
        // An atomic is never executed twice: its saved result is sent again.
        if let Some(original) = saved {
            drain_read_responses(qp, io, host);
            send_atomic_ack(qp, io, host, at, original);
        }
    } else {
        // SEND / WRITE seen before: acknowledge everything received so far.
        qp.resp.pending_ack = Some(psn::sub(qp.resp.epsn, 1));
    }
}

fn send_atomic_ack(qp: &QpCtx, io: &mut Io, host: &mut dyn EngineHost, at: u32, original: u64) {
    let Some(route) = qp.route(host) else { return };
    let mut b = PacketBuilder::new(op::RC_ATOMIC_ACKNOWLEDGE, qp.attrs.dest_qpn, at);
    b.aeth = Some(Aeth {
        syndrome: syndrome::ACK,
        msn: qp.resp.msn,
    });
    b.atomic_ack = Some(original);
    io.send(host, &route, &b, &[], false);
}

/// Handles an RC request packet addressed to `qp`.
pub fn receive_request(
    qp: &mut QpCtx,
    io: &mut Io,
    host: &mut dyn EngineHost,
    pkt: &Packet<'_>,
    _now: Instant,
) {
    let Some(pd) = host.qp_pd(qp.qpn) else { return };
    let at = pkt.bth.psn;
    let d = psn::diff(at, qp.resp.epsn);
    if d > 0 {
        host.count(COUNTER_SEQ_ERRORS, 1);
        qp.resp.out_of_sequence += 1;
        // One NAK per expected PSN (IBA 9.7.5.1.1), repeated after a window's worth of
        // out-of-sequence packets in case the NAK or the retransmission was lost too.
        if qp.resp.nak_sent_for != Some(qp.resp.epsn) || qp.resp.out_of_sequence >= NAK_REPEAT_AFTER
        {
            qp.resp.nak_sent_for = Some(qp.resp.epsn);
            qp.resp.out_of_sequence = 0;
            flush_ack(qp, io, host);
            drain_read_responses(qp, io, host);
            let epsn = qp.resp.epsn;
            send_aeth(qp, io, host, epsn, syndrome::NAK_PSN_SEQ_ERROR);
        }
        return;
    }
    if d < 0 {
        host.count(COUNTER_DUPLICATES, 1);
        duplicate(qp, io, host, pkt, pd);
        return;
    }
    let info = pkt.info;
    let invalid = |qp: &mut QpCtx, io: &mut Io, host: &mut dyn EngineHost| {
        fatal_nak(
            qp,
            io,
            host,
            syndrome::NAK_INVALID_REQUEST,
            WC_REM_INV_REQ_ERR,
            EVENT_QP_REQ_ERR,
        )
    };
    let access_error = |qp: &mut QpCtx, io: &mut Io, host: &mut dyn EngineHost| {
        fatal_nak(
            qp,
            io,
            host,
            syndrome::NAK_REMOTE_ACCESS,
            WC_REM_ACCESS_ERR,
            EVENT_QP_ACCESS_ERR,
        )
    };
    if !opcode::sequence_valid(qp.resp.last_opcode, info) {
        return invalid(qp, io, host);
    }
    let qp_access = qp.attrs.access_flags;
    let needed = if info.has(flag::WRITE) {
        ACCESS_REMOTE_WRITE
    } else if info.has(flag::READ) {
        ACCESS_REMOTE_READ
    } else if info.has(flag::ATOMIC) {
        ACCESS_REMOTE_ATOMIC
    } else {
        0
    };
    if qp_access & needed != needed {
        return access_error(qp, io, host);
    }
    let mtu = qp.mtu() as usize;
    let len = pkt.payload.len();
    let full = info.flags & (flag::FIRST | flag::MIDDLE) != 0;
    if (full && len != mtu) || len > mtu {
        return invalid(qp, io, host);
    }
    let ends = info.flags & (flag::LAST | flag::ONLY) != 0;
    if info.has(flag::SEND) {
        if info.has(flag::RWR) {
            let Some(work) = take_receive(qp, io, host) else {
                return;
            };
            qp.resp.receiving = Some(Receiving { work, offset: 0 });
        }
        let Some(r) = qp.resp.receiving.as_mut() else {
            return invalid(qp, io, host);
        };
        if let Err(status) = scatter(host, pd, &r.work, r.offset, pkt.payload) {
            let syn = if status == WC_LOC_LEN_ERR {
                syndrome::NAK_INVALID_REQUEST
            } else {
                syndrome::NAK_REMOTE_OP
            };
            return fatal_nak(qp, io, host, syn, status, EVENT_QP_REQ_ERR);
        }
        r.offset += len as u64;
        if ends {
            if let Some(r) = qp.resp.receiving.take() {
                let mut c = RecvCompletion {
                    status: WC_SUCCESS,
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
                    let _ = host.invalidate(pd, rkey);
                    c.flags |= CQE_FLAG_WITH_INV;
                    c.imm_or_inv = rkey;
                }
                if pkt.bth.solicited {
                    c.flags |= CQE_FLAG_SOLICITED;
                }
                let _ = host.complete_recv(qp.qpn, &r.work, c);
            }
        }
    } else if info.has(flag::WRITE) {
        if let Some(reth) = pkt.reth {
            let total = u64::from(reth.len);
            if total > 0
                && host
                    .check_access(pd, reth.rkey, reth.va, total, ACCESS_REMOTE_WRITE)
                    .is_err()
            {
                return access_error(qp, io, host);
            }
            qp.resp.writing = Some(Writing {
                va: reth.va,
                rkey: reth.rkey,
                remaining: total,
                total,
            });
        }
        let Some(w) = qp.resp.writing.as_ref() else {
            return invalid(qp, io, host);
        };
        let (va, rkey, remaining, total) = (w.va, w.rkey, w.remaining, w.total);
        if len as u64 > remaining || (ends && len as u64 != remaining) {
            return invalid(qp, io, host);
        }
        // The receive WQE of a WRITE with immediate is taken before any byte is written, so an
        // RNR NAK leaves memory as it was.
        let receive = if info.has(flag::RWR) {
            match take_receive(qp, io, host) {
                Some(work) => Some(work),
                None => return,
            }
        } else {
            None
        };
        if len > 0 {
            let at_va = va.wrapping_add(total - remaining);
            if host
                .write_payload(pd, rkey, at_va, pkt.payload, ACCESS_REMOTE_WRITE)
                .is_err()
            {
                return access_error(qp, io, host);
            }
        }
        if let Some(w) = qp.resp.writing.as_mut() {
            w.remaining -= len as u64;
        }
        if ends {
            qp.resp.writing = None;
            if let Some(work) = receive {
                let c = RecvCompletion {
                    status: WC_SUCCESS,
                    opcode: CQE_OP_RECV_RDMA_WITH_IMM,
                    flags: CQE_FLAG_WITH_IMM
                        | if pkt.bth.solicited {
                            CQE_FLAG_SOLICITED
                        } else {
                            0
                        },
                    byte_len: total as u32,
                    imm_or_inv: pkt.imm.map_or(0, u32::from_le_bytes),
                    ..RecvCompletion::default()
                };
                let _ = host.complete_recv(qp.qpn, &work, c);
            }
        }
    } else if info.has(flag::READ) {
        let Some(reth) = pkt.reth else {
            return invalid(qp, io, host);
        };
        let total = u64::from(reth.len);
        if total > 0
            && host
                .check_access(pd, reth.rkey, reth.va, total, ACCESS_REMOTE_READ)
                .is_err()
        {
            return access_error(qp, io, host);
        }
        let npkts = total.div_ceil(mtu as u64).max(1) as u32;
        flush_ack(qp, io, host);
        qp.resp.remember(Resource::Read {
            first: at,
            last: psn::add(at, npkts - 1),
        });
        qp.resp.queue_job(ReadJob {
            psn: at,
            va: reth.va,
            rkey: reth.rkey,
            len: total,
            npkts,
            next: 0,
            replay: false,
        });
        qp.resp.accept(pkt.bth.opcode, npkts, true);
        return;
    } else if info.has(flag::ATOMIC) {
        let Some(a) = pkt.atomic else {
            return invalid(qp, io, host);
        };
        if a.va % 8 != 0 {
            return invalid(qp, io, host);
        }
        let mut bytes = [0u8; 8];
        if host
            .read_payload(pd, a.rkey, a.va, &mut bytes, ACCESS_REMOTE_ATOMIC)
            .is_err()
        {
            return access_error(qp, io, host);
        }
        let original = u64::from_le_bytes(bytes);
        let new = if pkt.bth.opcode == op::RC_COMPARE_SWAP {
            if original == a.compare {
                a.swap_add
            } else {
                original
            }
        } else {
            original.wrapping_add(a.swap_add)
        };
        if host
            .write_payload(pd, a.rkey, a.va, &new.to_le_bytes(), ACCESS_REMOTE_ATOMIC)
            .is_err()
        {
            return access_error(qp, io, host);
        }
        qp.resp.remember(Resource::Atomic { psn: at, original });
        qp.resp.accept(pkt.bth.opcode, 1, true);
        flush_ack(qp, io, host);
        drain_read_responses(qp, io, host);
        send_atomic_ack(qp, io, host, at, original);
        return;
    } else {
        return invalid(qp, io, host);
    }
    qp.resp.accept(pkt.bth.opcode, 1, ends);
    if pkt.bth.ack_req {
        qp.resp.pending_ack = Some(at);
    }
}

/// Sends queued READ responses, a budget per poll.
pub fn send_read_responses(qp: &mut QpCtx, io: &mut Io, host: &mut dyn EngineHost) {
    if qp.resp.jobs.is_empty() || !matches!(qp.state, QPS_RTR | QPS_RTS | QPS_SQD) {
        return;
    }
    let Some(route) = qp.route(host) else { return };
    let Some(pd) = host.qp_pd(qp.qpn) else { return };
    let mtu = u64::from(qp.mtu());
    for _ in 0..READ_BUDGET {
        let Some(job) = qp.resp.jobs.front().copied() else {
            break;
        };
        let pos = Position::of(job.next, job.npkts);
        let offset = u64::from(job.next) * mtu;
        let len = (job.len - offset.min(job.len)).min(mtu) as usize;
        let mut payload = vec![0u8; len];
        if len > 0
            && host
                .read_payload(
                    pd,
                    job.rkey,
                    job.va.wrapping_add(offset),
                    &mut payload,
                    ACCESS_REMOTE_READ,
                )
                .is_err()
        {
            // The region went away after the request was checked: stop answering.
            qp.resp.jobs.pop_front();
            continue;
        }
        let mut b = PacketBuilder::new(
            opcode::read_response(pos),
            qp.attrs.dest_qpn,
            psn::add(job.psn, job.next),
        );
        if pos != Position::Middle {
            b.aeth = Some(Aeth {
                syndrome: syndrome::ACK,
                msn: qp.resp.msn,
            });
        }
        io.send(host, &route, &b, &payload, job.replay);
        if let Some(j) = qp.resp.jobs.front_mut() {
            j.next += 1;
            if j.next >= j.npkts {
                qp.resp.jobs.pop_front();
            }
        }
    }
}

/// Handles a UD or GSI SEND addressed to `qp`: Q_Key check, receive WQE, GRH image and
/// payload, CQE. No receive WQE or a wrong Q_Key drops the datagram.
pub fn receive_ud(
    qp: &mut QpCtx,
    _io: &mut Io,
    host: &mut dyn EngineHost,
    pkt: &Packet<'_>,
    f: &RoceFrame<'_>,
) {
    let Some(deth) = pkt.deth else { return };
    let expected = if qp.qpn == GSI_QPN {
        GSI_QKEY
    } else {
        qp.attrs.qkey
    };
    if deth.qkey != expected {
        host.count(COUNTER_DROPS, 1);
        return;
    }
    let Some(pd) = host.qp_pd(qp.qpn) else { return };
    let Ok(Some(work)) = host.take_recv(qp.qpn) else {
        host.count(COUNTER_DROPS, 1);
        return;
    };
    let mut data = Vec::with_capacity(40 + pkt.payload.len());
    data.extend_from_slice(&f.grh);
    data.extend_from_slice(pkt.payload);
    let mut c = RecvCompletion {
        status: WC_SUCCESS,
        opcode: CQE_OP_RECV,
        flags: CQE_FLAG_GRH,
        byte_len: data.len() as u32,
        src_qpn: deth.src_qpn,
        smac: f.smac,
        vlan: f.vlan.unwrap_or(VLAN_NONE),
        network_hdr_type: match f.kind {
            NetKind::V1 => NET_HDR_GRH,
            NetKind::V4 => NET_HDR_IPV4,
            NetKind::V6 => NET_HDR_IPV6,
        },
        ..RecvCompletion::default()
    };
    if let Some(imm) = pkt.imm {
        c.flags |= CQE_FLAG_WITH_IMM;
        c.imm_or_inv = u32::from_le_bytes(imm);
    }
    if pkt.bth.solicited {
        c.flags |= CQE_FLAG_SOLICITED;
    }
    if let Err(status) = scatter(host, pd, &work, 0, &data) {
        c.status = status;
        c.byte_len = 0;
    }
    let _ = host.complete_recv(qp.qpn, &work, c);
}
