// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! What the responder acknowledges: coalesced ACKs (behind the READ responses queued before
//! them), RNR NAKs, and the NAKs of errors that end the QP.

use super::*;

pub(super) fn send_aeth(qp: &QpCtx, io: &mut Io, host: &mut dyn EngineHost, at: u32, syn: u8) {
    let Some(route) = qp.route(host) else { return };
    let mut b = PacketBuilder::new(qp.opcode(op::RC_ACKNOWLEDGE), qp.attrs.dest_qpn, at);
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
    io.send(host, &route, &b, &[], Resend::No);
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
pub(super) fn drain_read_responses(qp: &mut QpCtx, io: &mut Io, host: &mut dyn EngineHost) {
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
pub(super) fn fatal_nak(
    qp: &mut QpCtx,
    io: &mut Io,
    host: &mut dyn EngineHost,
    syn: u8,
    wc_status: WcStatus,
    event: EventType,
) {
    flush_ack(qp, io, host);
    drain_read_responses(qp, io, host);
    let epsn = qp.resp.epsn;
    if qp.qp_type.is_reliable() {
        send_aeth(qp, io, host, epsn, syn);
    }
    if let Some(r) = qp.resp.receiving.take() {
        let completion = RecvCompletion {
            status: wc_status,
            opcode: CQE_OP_RECV,
            ..RecvCompletion::default()
        };
        let _ = host.complete_recv(qp.qpn, &r.work, completion);
    }
    host.qp_error(qp.qpn, event);
    qp.enter_error();
}

pub(super) fn rnr_nak(qp: &mut QpCtx, io: &mut Io, host: &mut dyn EngineHost) {
    flush_ack(qp, io, host);
    drain_read_responses(qp, io, host);
    let epsn = qp.resp.epsn;
    // Packets behind this one arrive out of sequence; the RNR NAK stands for them too.
    qp.resp.nak_sent_for = Some(epsn);
    let code = qp.attrs.min_rnr_timer & 0x1f;
    send_aeth(qp, io, host, epsn, syndrome::RNR_NAK | code);
}
