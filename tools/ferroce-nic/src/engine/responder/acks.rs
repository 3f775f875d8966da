// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! What the responder acknowledges: coalesced ACKs, RNR NAKs, sequence NAKs and the NAKs of
//! errors that end the QP, each queued behind the answers before it ([`Reply`]).

use super::*;

/// Sends the ACK or NAK `syn` for `at`, with MSN `msn`.
pub(super) fn send_aeth(
    qp: &QpCtx,
    io: &mut Io,
    host: &mut dyn EngineHost,
    at: u32,
    syn: u8,
    msn: u32,
    state: RespState,
) {
    let Some(route) = qp.route(host) else { return };
    let mut b = Headers::new(qp.opcode(op::RC_ACKNOWLEDGE), qp.attrs.dest_qpn, at);
    b.aeth = Some(Aeth { syndrome: syn, msn });
    let kind = if syndrome::kind(syn) == syndrome::KIND_ACK {
        "ack"
    } else {
        host.count(COUNTER_NAKS_SENT, 1);
        "nak"
    };
    io.trace.event(
        kind,
        || json!({"dir": "tx", "qpn": qp.qpn, "psn": at, "syndrome": syn, "state": state.name()}),
    );
    io.send(host, &route, &b, &[], Resend::No);
}

/// Queues the ACK or NAK `syn` for `at` behind what is queued (READ responses go out in PSN
/// order: an ACK or NAK for a later PSN must not overtake them, or the requester would take it
/// for a lost response). A later ACK replaces one still queued at the end: it acknowledges
/// what that one did.
pub(super) fn queue_aeth(qp: &mut QpCtx, at: u32, syn: u8, state: RespState) {
    let msn = qp.resp.msn;
    let resp = &mut qp.resp;
    if syn == syndrome::ACK {
        if let Some(Reply::Aeth {
            psn,
            syndrome: s,
            msn: m,
            ..
        }) = resp.replies.back_mut()
        {
            if *s == syndrome::ACK {
                (*psn, *m) = (at, msn);
                return;
            }
        }
    }
    resp.replies.push_back(Reply::Aeth {
        psn: at,
        syndrome: syn,
        msn,
        state,
    });
}

/// Queues the coalesced ACK, if one is due.
pub fn flush_ack(qp: &mut QpCtx) {
    if let Some(at) = qp.resp.pending_ack.take() {
        queue_aeth(qp, at, syndrome::ACK, RespState::Acknowledge);
    }
}

/// NAKs the expected PSN with `syn`, completes a receive in progress with `wc_status`, and
/// moves the QP to ERR with async event `event` (IBA 9.9.3.1: responder class C/D errors).
pub(super) fn fatal_nak(
    qp: &mut QpCtx,
    host: &mut dyn EngineHost,
    state: RespState,
    syn: u8,
    wc_status: WcStatus,
    event: EventType,
) {
    flush_ack(qp);
    let epsn = qp.resp.epsn;
    if qp.qp_type.is_reliable() {
        queue_aeth(qp, epsn, syn, state);
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
    // What was answered before the error still goes out, in order and a budget at a time,
    // and the NAK last: the QP sends nothing else in ERR.
    let replies = std::mem::take(&mut qp.resp.replies);
    qp.enter_error();
    qp.resp.replies = replies;
}

/// An RNR NAK for the ePSN, decided by state `state` (ERR_RNR, or ERR_PAGE_FAULT).
pub(super) fn rnr_nak(qp: &mut QpCtx, state: RespState) {
    flush_ack(qp);
    let epsn = qp.resp.epsn;
    // Packets behind this one arrive out of sequence; the RNR NAK stands for them too.
    qp.resp.nak_sent_for = Some(epsn);
    let code = qp.attrs.min_rnr_timer & 0x1f;
    queue_aeth(qp, epsn, syndrome::RNR_NAK | code, state);
}
