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

    /// DUPLICATE_REQUEST of a READ: queues its responses again from the PSN asked for.
    fn replay_read(&mut self) {
        let at = self.pkt.bth.psn;
        let Some(reth) = self.pkt.reth else { return };
        let Some(Resource::Read { first, last }) = self.qp.resp.resources.iter().copied().find(
            |r| matches!(r, Resource::Read { first, last } if psn::within(at, *first, *last)),
        ) else {
            return;
        };
        let len = u64::from(reth.len);
        let npkts = len.div_ceil(u64::from(self.qp.mtu())).max(1) as u32;
        if psn::after(psn::add(at, npkts - 1), last) {
            return;
        }
        if self.read_refused(reth) {
            return;
        }
        // The requester lost responses: restart from the PSN it asks for.
        let pd = self.pd;
        let resp = &mut self.qp.resp;
        resp.jobs.retain(|j| !psn::within(j.psn, first, last));
        resp.queue_job(ReadJob {
            pd,
            psn: at,
            va: reth.va,
            rkey: reth.rkey,
            len,
            npkts,
            next: 0,
            replay: true,
        });
    }
}
