// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The responder's checks of a request, in the order of its state machine ([`RespState`]):
//! the request's PSN, XRC SRQ, opcode sequence and validity, length, R_Key and resources.
//! Each returns the next state.

use super::*;

impl Request<'_, '_> {
    pub(super) fn get_req(&mut self) -> RespState {
        if self.qp.qp_type == QpType::XrcTgt {
            let Some(srqn) = self.pkt.xrceth else {
                return RespState::Done; // Not an XRC request: the engine steers none here.
            };
            let pd = self.host.xrc_target(self.qp.qpn, srqn);
            self.pd = pd.unwrap_or_default();
            self.xrc = Some((srqn, pd.is_some()));
            return RespState::ChkPsn;
        }
        self.pd = self.qp.pd;
        RespState::ChkPsn
    }

    pub(super) fn chk_psn(&mut self) -> RespState {
        if self.qp.qp_type == QpType::Uc {
            return RespState::ChkPsnUc;
        }
        let d = psn::diff(self.pkt.bth.psn, self.qp.resp.epsn);
        if d > 0 {
            self.host.count(COUNTER_SEQ_ERRORS, 1);
            let resp = &mut self.qp.resp;
            resp.out_of_sequence += 1;
            if resp.nak_sent_for != Some(resp.epsn) || resp.out_of_sequence >= NAK_REPEAT_AFTER {
                return RespState::ErrPsnOutOfSeq;
            }
            return RespState::Done;
        }
        if d < 0 {
            self.host.count(COUNTER_DUPLICATES, 1);
            if self.xrc.is_some_and(|(_, usable)| !usable) {
                return RespState::Done; // Nothing is answered through an SRQ it may not name.
            }
            return RespState::DuplicateRequest;
        }
        if self.xrc.is_some() {
            return RespState::ChkXrceth;
        }
        RespState::ChkOpSeq
    }

    pub(super) fn chk_xrceth(&mut self) -> RespState {
        let Some((srqn, usable)) = self.xrc else {
            return RespState::ChkOpSeq;
        };
        let continues = self.pkt.info.flags & (flag::MIDDLE | flag::LAST) != 0;
        let resp = &mut self.qp.resp;
        if !usable || (continues && resp.message_srqn != Some(srqn)) {
            let (qpn, psn) = (self.qp.qpn, self.pkt.bth.psn);
            self.io.trace.event(
                "xrc_refused",
                || json!({"qpn": qpn, "psn": psn, "srqn": srqn, "usable": usable}),
            );
            return RespState::ErrRemoteAccess;
        }
        if !continues {
            resp.message_srqn = Some(srqn);
        }
        RespState::ChkOpSeq
    }

    pub(super) fn chk_psn_uc(&mut self) -> RespState {
        let at = self.pkt.bth.psn;
        let resp = &mut self.qp.resp;
        if at == resp.epsn && !resp.dropping {
            return RespState::ChkOpSeq;
        }
        if at != resp.epsn {
            self.host.count(COUNTER_SEQ_ERRORS, 1);
        }
        if self.pkt.info.flags & (flag::FIRST | flag::ONLY) == 0 {
            return RespState::DropMessage("out of sequence");
        }
        // A new message: the one in progress (if any) lost its end.
        let dropped_one = resp.dropping
            || resp.last_opcode.is_some_and(|o| {
                opcode::lookup(o).is_some_and(|i| i.flags & (flag::FIRST | flag::MIDDLE) != 0)
            });
        if dropped_one || at != resp.epsn {
            resp.drop_message(None);
        }
        resp.dropping = false;
        resp.epsn = at;
        RespState::ChkOpSeq
    }

    pub(super) fn drop_message(&mut self, why: &'static str) -> RespState {
        let taken = self.write_recv.take();
        self.qp.resp.drop_message(taken);
        self.host.count(COUNTER_DROPS, 1);
        let (qpn, psn, opcode) = (self.qp.qpn, self.pkt.bth.psn, self.pkt.bth.opcode);
        self.io.trace.event(
            "uc_drop",
            || json!({"qpn": qpn, "psn": psn, "opcode": opcode, "why": why}),
        );
        RespState::Done
    }

    pub(super) fn err_psn_out_of_seq(&mut self) -> RespState {
        let resp = &mut self.qp.resp;
        resp.nak_sent_for = Some(resp.epsn);
        resp.out_of_sequence = 0;
        flush_ack(self.qp);
        let epsn = self.qp.resp.epsn;
        queue_aeth(
            self.qp,
            epsn,
            syndrome::NAK_PSN_SEQ_ERROR,
            RespState::ErrPsnOutOfSeq,
        );
        RespState::Done
    }

    pub(super) fn chk_op_seq(&mut self) -> RespState {
        if opcode::sequence_valid(self.qp.resp.last_opcode, self.pkt.info) {
            RespState::ChkOpValid
        } else {
            RespState::ErrInvalidRequest
        }
    }

    pub(super) fn chk_op_valid(&mut self) -> RespState {
        if self.kind == Kind::Unsupported {
            return RespState::ErrInvalidRequest;
        }
        let needed = self.kind.access(self.pkt.feth);
        if self.kind == Kind::Flush && needed == 0 {
            return RespState::ErrInvalidRequest; // No placement type, or an unknown one.
        }
        if self.qp.attrs.access_flags & needed != needed {
            return RespState::ErrRemoteAccess;
        }
        RespState::ChkLength
    }

    pub(super) fn chk_length(&mut self) -> RespState {
        let mtu = u64::from(self.qp.mtu());
        let len = self.payload_len();
        let full = self.pkt.info.flags & (flag::FIRST | flag::MIDDLE) != 0;
        if (full && len != mtu) || len > mtu {
            return RespState::ErrInvalidRequest;
        }
        RespState::ChkRkey
    }

    pub(super) fn chk_rkey(&mut self) -> RespState {
        // A type 2 memory window serves the QP it is bound to only.
        let rkey = match self.kind {
            Kind::Write | Kind::Read | Kind::AtomicWrite | Kind::Flush => {
                self.pkt.reth.map(|r| r.rkey)
            }
            Kind::Atomic => self.pkt.atomic.map(|a| a.rkey),
            Kind::Send | Kind::Unsupported => None,
        };
        if rkey.is_some_and(|key| !self.host.key_usable_on(key, self.qp.qpn)) {
            return RespState::ErrRemoteAccess;
        }
        match self.kind {
            Kind::Write => {
                if let Some(reth) = self.pkt.reth {
                    let total = u64::from(reth.len);
                    if total > 0 {
                        let checked = self.host.check_access(
                            self.pd,
                            reth.rkey,
                            reth.va,
                            total,
                            ACCESS_REMOTE_WRITE,
                        );
                        match checked {
                            Ok(()) => {}
                            Err(e) if e.is_page_fault() => return RespState::ErrPageFault,
                            Err(_) => return RespState::ErrRemoteAccess,
                        }
                    }
                    self.qp.resp.writing = Some(Writing {
                        va: reth.va,
                        rkey: reth.rkey,
                        remaining: total,
                        total,
                    });
                }
                let len = self.payload_len();
                let Some(w) = self.qp.resp.writing.as_ref() else {
                    return RespState::ErrInvalidRequest;
                };
                if len > w.remaining || (self.ends() && len != w.remaining) {
                    return RespState::ErrInvalidRequest;
                }
            }
            Kind::Read => {
                let Some(reth) = self.pkt.reth else {
                    return RespState::ErrInvalidRequest;
                };
                let total = u64::from(reth.len);
                if total > MAX_MESSAGE {
                    return RespState::ErrInvalidRequest;
                }
                if self.read_refused(reth) {
                    return RespState::ErrRemoteAccess;
                }
            }
            Kind::Atomic => {
                let Some(a) = self.pkt.atomic else {
                    return RespState::ErrInvalidRequest;
                };
                if a.va % 8 != 0 {
                    return RespState::ErrInvalidRequest;
                }
            }
            Kind::AtomicWrite => return self.chk_atomic_write(),
            Kind::Flush => return self.chk_flush(),
            Kind::Send | Kind::Unsupported => {}
        }
        RespState::ChkResource
    }

    /// Whether the R_Key refuses a READ's range (rights, bounds). On-demand pages not present
    /// are no refusal: their fault is raised now, and the responses wait for them
    /// ([`send_replies`]).
    pub(super) fn read_refused(&mut self, reth: Reth) -> bool {
        let len = u64::from(reth.len);
        len > 0
            && self
                .host
                .check_access(self.pd, reth.rkey, reth.va, len, ACCESS_REMOTE_READ)
                .is_err_and(|e| !e.is_page_fault())
    }

    pub(super) fn chk_resource(&mut self) -> RespState {
        // A READ or atomic beyond the responder resources the QP offers (`max_dest_rd_atomic`,
        // 0: none; a READ holds one until its last response is sent) is an invalid request.
        let limit = usize::from(self.qp.attrs.max_dest_rd_atomic.min(MAX_RD_ATOMIC));
        let held = self.qp.resp.reads().filter(|j| !j.replay).count();
        let responds = matches!(
            self.kind,
            Kind::Read | Kind::Atomic | Kind::AtomicWrite | Kind::Flush
        );
        if responds && held >= limit {
            return RespState::ErrInvalidRequest;
        }
        let consumes = matches!(self.kind, Kind::Send | Kind::Write);
        if consumes && self.pkt.info.has(flag::RWR) {
            // The WQE a dropped UC message took serves the next message (a message in
            // progress on RC cannot be interrupted: CHK_OP_SEQ).
            let kept = self.qp.resp.receiving.take().map(|r| r.work);
            let (qpn, xrc) = (self.qp.qpn, self.xrc);
            let taken = match (kept, xrc) {
                (Some(work), _) => Ok(Some(work)),
                (None, Some((srqn, _))) => self.host.take_xrc_recv(qpn, srqn),
                (None, None) => self.host.take_recv(qpn),
            };
            let work = match taken {
                Ok(Some(work)) => work,
                Ok(None) => return RespState::ErrRnr,
                // No WQE to be had (QP gone or not ready, a broken receive queue, which the
                // host reports itself): the packet is dropped.
                Err(_) => return RespState::Done,
            };
            if self.kind == Kind::Send {
                self.qp.resp.receiving = Some(Receiving { work, offset: 0 });
            } else {
                self.write_recv = Some(work);
            }
        }
        if self.kind == Kind::Send && self.qp.resp.receiving.is_none() {
            return RespState::ErrInvalidRequest;
        }
        RespState::Execute
    }

    pub(super) fn err_rnr(&mut self) -> RespState {
        rnr_nak(self.qp, RespState::ErrRnr);
        RespState::Done
    }

    pub(super) fn err_page_fault(&mut self) -> RespState {
        // A WRITE with immediate took its receive WQE at its last packet: kept for its return
        // (a SEND's stays in `receiving`, at the offset reached).
        if let Some(work) = self.write_recv.take() {
            self.qp.resp.receiving = Some(Receiving { work, offset: 0 });
        }
        self.io.trace.event(
            "page_fault_wait",
            || json!({"qpn": self.qp.qpn, "psn": self.pkt.bth.psn, "opcode": self.pkt.bth.opcode}),
        );
        match self.kind {
            Kind::Send | Kind::Write if self.qp.qp_type == QpType::Uc => {
                return RespState::DropMessage("page fault");
            }
            Kind::Send | Kind::Write => rnr_nak(self.qp, RespState::ErrPageFault),
            // Dropped: the requester's retry (its timer, or the sequence NAK the next packet
            // draws) brings it back.
            _ => self.host.count(COUNTER_DROPS, 1),
        }
        RespState::Done
    }
}
