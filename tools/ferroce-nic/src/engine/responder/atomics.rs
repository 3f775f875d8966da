// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The responder's atomics: CMP_SWAP and FETCH_ADD (answered by an Atomic Acknowledge with the
//! original value), and the IBTA 1.5 requests for persistent memory, ATOMIC WRITE (an 8-byte
//! store in one piece) and FLUSH (the writes before it made globally visible or persistent),
//! answered by an RDMA READ response with no payload, as rxe answers them. Each is saved as a
//! responder resource: a duplicate is answered again, never executed again.

use super::*;

/// Sends the Atomic Acknowledge of the atomic at `at`, with its original value.
pub(super) fn send_atomic_ack(
    qp: &QpCtx,
    io: &mut Io,
    host: &mut dyn EngineHost,
    at: u32,
    original: u64,
    msn: u32,
) {
    let Some(route) = qp.route(host) else { return };
    let opcode = qp.opcode(op::RC_ATOMIC_ACKNOWLEDGE);
    let mut b = Headers::new(opcode, qp.attrs.dest_qpn, at);
    b.aeth = Some(Aeth {
        syndrome: syndrome::ACK,
        msn,
    });
    b.atomic_ack = Some(original);
    io.send(host, &route, &b, &[], Resend::No);
}

/// Sends the empty RDMA READ response (an ACK in its AETH) that answers an ATOMIC WRITE or a
/// FLUSH at `at`.
pub(super) fn send_empty_read_response(
    qp: &QpCtx,
    io: &mut Io,
    host: &mut dyn EngineHost,
    at: u32,
    msn: u32,
) {
    let Some(route) = qp.route(host) else { return };
    let opcode = qp.opcode(op::RC_READ_RESPONSE_ONLY);
    let mut b = Headers::new(opcode, qp.attrs.dest_qpn, at);
    b.aeth = Some(Aeth {
        syndrome: syndrome::ACK,
        msn,
    });
    io.send(host, &route, &b, &[], Resend::No);
}

/// The MR and QP access flags a FLUSH with FETH `feth` needs; 0 for a FETH that names no
/// placement type, or an undefined one or level.
pub(super) fn flush_access(feth: Option<Feth>) -> u32 {
    let Some(feth) = feth else { return 0 };
    if !flush_valid(feth.placement, feth.level, 0) {
        return 0;
    }
    let mut access = 0;
    if feth.placement & FLUSH_GLOBAL != 0 {
        access |= ACCESS_FLUSH_GLOBAL;
    }
    if feth.placement & FLUSH_PERSISTENT != 0 {
        access |= ACCESS_FLUSH_PERSISTENT;
    }
    access
}

impl Request<'_, '_> {
    /// DUPLICATE_REQUEST of an atomic: sends its saved result again.
    pub(super) fn replay_atomic(&mut self) {
        let at = self.pkt.bth.psn;
        let saved = self.qp.resp.resources.iter().find_map(|r| match r {
            Resource::Atomic { psn, original } if *psn == at => Some(*original),
            _ => None,
        });
        if let Some(original) = saved {
            let msn = self.qp.resp.msn;
            self.qp.resp.replies.push_back(Reply::AtomicAck {
                psn: at,
                original,
                msn,
            });
        }
    }

    /// DUPLICATE_REQUEST of an ATOMIC WRITE or FLUSH: answers it again (it is not executed
    /// again: a later write to the same address stays).
    pub(super) fn replay_answer(&mut self) {
        let at = self.pkt.bth.psn;
        let saved = self
            .qp
            .resp
            .resources
            .iter()
            .any(|r| matches!(r, Resource::Answered { psn } if *psn == at));
        if saved {
            let msn = self.qp.resp.msn;
            self.qp
                .resp
                .replies
                .push_back(Reply::EmptyRead { psn: at, msn });
        }
    }

    /// CHK_RKEY of an ATOMIC WRITE: exactly 8 bytes (RETH and payload, IBA oA19-28) at an
    /// 8-byte aligned address (Invalid Request NAK otherwise) that the R_Key may write (Remote
    /// Access Error NAK otherwise).
    pub(super) fn chk_atomic_write(&mut self) -> RespState {
        let Some(reth) = self.pkt.reth else {
            return RespState::ErrInvalidRequest;
        };
        if reth.len != 8 || self.pkt.payload.len() != 8 || reth.va % 8 != 0 {
            return RespState::ErrInvalidRequest;
        }
        match self
            .host
            .check_access(self.pd, reth.rkey, reth.va, 8, ACCESS_REMOTE_WRITE)
        {
            Ok(()) => RespState::ChkResource,
            Err(e) if e.is_page_fault() => RespState::ErrPageFault,
            Err(_) => RespState::ErrRemoteAccess,
        }
    }

    /// CHK_RKEY of a FLUSH: the R_Key must allow the placement types, over the RETH range
    /// (`FLUSH_RANGE`, at most 2^31 bytes) or the whole MR (`FLUSH_MR`); Remote Access Error
    /// NAK otherwise.
    pub(super) fn chk_flush(&mut self) -> RespState {
        let (Some(reth), Some(feth)) = (self.pkt.reth, self.pkt.feth) else {
            return RespState::ErrInvalidRequest;
        };
        let access = flush_access(Some(feth));
        let checked = if feth.level == FLUSH_MR {
            self.host.key_range(self.pd, reth.rkey, access).map(|_| ())
        } else {
            self.host
                .check_access(self.pd, reth.rkey, reth.va, u64::from(reth.len), access)
        };
        // On-demand pages not present hold nothing the device wrote: nothing to flush there.
        if checked.is_err_and(|e| !e.is_page_fault()) {
            return RespState::ErrRemoteAccess;
        }
        RespState::ChkResource
    }

    pub(super) fn atomic_reply(&mut self) -> RespState {
        let Some(a) = self.pkt.atomic else {
            return RespState::ErrInvalidRequest;
        };
        let mut bytes = [0u8; 8];
        // An atomic reads and writes: its pages must be present and writable before it runs.
        match self
            .host
            .read_payload(self.pd, a.rkey, a.va, &mut bytes, ACCESS_REMOTE_ATOMIC)
        {
            Ok(()) => {}
            Err(e) if e.is_page_fault() => return RespState::ErrPageFault,
            Err(_) => return RespState::ErrRemoteAccess,
        }
        let original = u64::from_le_bytes(bytes);
        let new = if opcode::rc_equivalent(self.pkt.bth.opcode) == op::RC_COMPARE_SWAP {
            if original == a.compare {
                a.swap_add
            } else {
                original
            }
        } else {
            original.wrapping_add(a.swap_add)
        };
        if self
            .host
            .write_payload(
                self.pd,
                a.rkey,
                a.va,
                &new.to_le_bytes(),
                ACCESS_REMOTE_ATOMIC,
            )
            .is_err()
        {
            return RespState::ErrRemoteAccess;
        }
        let at = self.pkt.bth.psn;
        self.qp
            .resp
            .remember(Resource::Atomic { psn: at, original });
        self.qp.resp.accept(self.pkt.bth.opcode, 1, true);
        flush_ack(self.qp);
        let msn = self.qp.resp.msn;
        self.qp.resp.replies.push_back(Reply::AtomicAck {
            psn: at,
            original,
            msn,
        });
        RespState::Done
    }

    pub(super) fn atomic_write_reply(&mut self) -> RespState {
        let Some(reth) = self.pkt.reth else {
            return RespState::ErrInvalidRequest;
        };
        // One write of the 8 bytes: no reader sees half of them.
        if self
            .host
            .write_payload(
                self.pd,
                reth.rkey,
                reth.va,
                self.pkt.payload,
                ACCESS_REMOTE_WRITE,
            )
            .is_err()
        {
            return RespState::ErrRemoteAccess;
        }
        self.answer()
    }

    /// The end of ATOMIC_WRITE_REPLY and FLUSH_REPLY: saved, accepted, answered.
    pub(super) fn answer(&mut self) -> RespState {
        let at = self.pkt.bth.psn;
        self.qp.resp.remember(Resource::Answered { psn: at });
        self.qp.resp.accept(self.pkt.bth.opcode, 1, true);
        flush_ack(self.qp);
        let msn = self.qp.resp.msn;
        self.qp
            .resp
            .replies
            .push_back(Reply::EmptyRead { psn: at, msn });
        RespState::Done
    }
}
