// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! DUPLICATE_REQUEST (IBA 9.7): a request seen before is answered again, never executed again.

use super::*;

impl Request<'_, '_> {
    pub(super) fn duplicate_request(&mut self) -> RespState {
        match self.kind {
            Kind::Read => self.replay_read(),
            Kind::Atomic => self.replay_atomic(),
            Kind::AtomicWrite | Kind::Flush => self.replay_answer(),
            Kind::Send | Kind::Write | Kind::Unsupported => {
                // SEND / WRITE seen before: acknowledge everything received so far.
                self.qp.resp.pending_ack = Some(psn::sub(self.qp.resp.epsn, 1));
            }
        }
        RespState::Done
    }

    /// DUPLICATE_REQUEST of a READ: queues its responses again from the PSN asked for. Only
    /// what the original READ asked for is answered: the same R_Key, and a range inside the
    /// original one that starts where the PSN does (a requester resends the rest of a READ
    /// from the first response it lacks). Anything else is dropped: a duplicate is no new
    /// request, and a new RETH in it must not reach memory the original could not (another
    /// QP's type 2 window, another MR).
    fn replay_read(&mut self) {
        let at = self.pkt.bth.psn;
        let Some(reth) = self.pkt.reth else { return };
        let Some(Resource::Read {
            first,
            last,
            va,
            rkey,
            len: asked,
        }) = self.qp.resp.resources.iter().copied().find(
            |r| matches!(r, Resource::Read { first, last, .. } if psn::within(at, *first, *last)),
        )
        else {
            return;
        };
        let mtu = u64::from(self.qp.mtu());
        let len = u64::from(reth.len);
        let npkts = len.div_ceil(mtu).max(1) as u32;
        let offset = u64::from(psn::diff(at, first) as u32) * mtu;
        let inside = reth.rkey == rkey
            && reth.va == va.wrapping_add(offset)
            && offset.checked_add(len).is_some_and(|end| end <= asked);
        if !inside || psn::after(psn::add(at, npkts - 1), last) {
            self.host.count(COUNTER_DROPS, 1);
            let qpn = self.qp.qpn;
            self.io.trace.event(
                "drop",
                || json!({"why": "duplicate READ outside the original", "qpn": qpn, "psn": at}),
            );
            return;
        }
        if self.read_refused(reth) || !self.host.key_usable_on(rkey, self.qp.qpn) {
            return;
        }
        // The requester lost responses: restart from the PSN it asks for. Responses of this
        // READ still queued are restarted where they are, ahead of the ACKs queued behind
        // them; if none are, the replay joins the end of the queue.
        let replay = ReadJob {
            pd: self.pd,
            psn: at,
            va: reth.va,
            rkey: reth.rkey,
            len,
            npkts,
            next: 0,
            replay: true,
        };
        let resp = &mut self.qp.resp;
        let queued = |r: &Reply| matches!(r, Reply::Read(j) if psn::within(j.psn, first, last));
        match resp.replies.iter().position(queued) {
            Some(i) => {
                resp.replies[i] = Reply::Read(replay);
                let mut k = 0;
                resp.replies.retain(|r| {
                    k += 1;
                    k - 1 == i || !queued(r)
                });
            }
            None => resp.queue_job(replay),
        }
    }
}
