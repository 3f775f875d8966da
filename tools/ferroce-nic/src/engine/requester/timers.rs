// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The requester's retransmission timer: what happens when it expires.

use super::*;

/// The retransmission timer. It expires after the adaptive timeout without progress and
/// retransmits (go-back-N from the first unacknowledged PSN), doubling the adaptive timeout. An
/// expiry counts against `retry_cnt` (reason "timeout") only once the configured local ACK
/// timeout has passed without progress since the last counted one; earlier ones are adaptive
/// retransmissions (reason "rto"). With no retries left, a counted expiry fails the WQE.
pub fn timers(qp: &mut QpCtx, io: &mut Io, host: &mut dyn EngineHost, now: Instant) {
    let Some(deadline) = qp.req.timer else { return };
    if now < deadline || qp.state != QpState::Rts {
        return;
    }
    let Some(i) = qp.req.wqes.iter().position(ReqWqe::outstanding) else {
        qp.req.timer = None;
        return;
    };
    host.count(COUNTER_TIMEOUTS, 1);
    let timeout = qp.ack_timeout();
    let stall = qp.req.stall_since.unwrap_or(deadline);
    // A timeout changed to 0 (infinite) while the timer ran: this last expiry counts.
    let counted = timeout.is_none_or(|t| now.saturating_duration_since(stall) >= t);
    if counted {
        if qp.req.retry_left == 0 {
            fail(qp, i, WcStatus::RetryExcErr);
            qp.req.timer = None;
            return;
        }
        qp.req.retry_left -= 1;
        qp.req.stall_since = Some(now);
    }
    // The timeout may be spurious (the answers are late, not lost: the peer's host was busy):
    // the go-back resends one packet and waits for its answer (as F-RTO, RFC 5682). A late ACK
    // of the first transmission then moves the resend past what it acknowledged, and only
    // what was really lost goes out again; the window grows back from there.
    qp.req.restart_window();
    let from = qp
        .req
        .wqes
        .get(i)
        .map_or(qp.req.una, |w| w.first_unacked(qp.req.una));
    let why = if counted {
        GoBack::Timeout
    } else {
        GoBack::Rto
    };
    let qpn = qp.qpn;
    qp.req.rewind(from, true, io, qpn, why);
    qp.req.backoff = (qp.req.backoff + 1).min(MAX_BACKOFF);
    qp.req.restart_timer(now, timeout);
}
