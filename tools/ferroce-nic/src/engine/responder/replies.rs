// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! What the responder sends and receives outside the request states: its queued replies
//! (READ responses, ACKs and NAKs, atomic acknowledgements), and UD / GSI datagrams.

use super::*;

/// Sends what the responder queued (`Reply`), in order, at most [`REPLY_BUDGET`] packets:
/// the device thread serves every other QP and function between two calls. In ERR only what
/// was queued before the error goes (it ends with the error's NAK).
pub fn send_replies(qp: &mut QpCtx, io: &mut Io, host: &mut dyn EngineHost) {
    if qp.resp.replies.is_empty()
        || !matches!(
            qp.state,
            QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Err
        )
    {
        return;
    }
    let Some(route) = qp.route(host) else { return };
    for _ in 0..REPLY_BUDGET {
        let Some(reply) = qp.resp.replies.front().copied() else {
            break;
        };
        match reply {
            Reply::Read(job) => match send_read_response(qp, io, host, &route, job) {
                Sent::One => {
                    if let Some(Reply::Read(j)) = qp.resp.replies.front_mut() {
                        j.next += 1;
                        if j.next >= j.npkts {
                            qp.resp.replies.pop_front();
                        }
                    }
                }
                Sent::Waits => break,
                Sent::Gone => {
                    qp.resp.replies.pop_front();
                }
            },
            Reply::Aeth {
                psn,
                syndrome,
                msn,
                state,
            } => {
                qp.resp.replies.pop_front();
                send_aeth(qp, io, host, psn, syndrome, msn, state);
            }
            Reply::AtomicAck { psn, original, msn } => {
                qp.resp.replies.pop_front();
                send_atomic_ack(qp, io, host, psn, original, msn);
            }
            Reply::EmptyRead { psn, msn } => {
                qp.resp.replies.pop_front();
                send_empty_read_response(qp, io, host, psn, msn);
            }
        }
    }
}

/// What became of a READ response packet.
enum Sent {
    /// It went out.
    One,
    /// An on-demand page is not present: the responses wait for the driver to map it (the
    /// fault is raised), as a NIC's do; the ePSN has moved on.
    Waits,
    /// The region went away after the request was checked: the READ is no longer answered.
    Gone,
}

/// Sends the next response packet of READ `job`.
fn send_read_response(
    qp: &QpCtx,
    io: &mut Io,
    host: &mut dyn EngineHost,
    route: &Route,
    job: ReadJob,
) -> Sent {
    let mtu = u64::from(qp.mtu());
    let pos = Position::of(job.next, job.npkts);
    let offset = u64::from(job.next) * mtu;
    let len = (job.len - offset.min(job.len)).min(mtu) as usize;
    let mut b = Headers::new(
        qp.opcode(opcode::read_response(pos)),
        qp.attrs.dest_qpn,
        psn::add(job.psn, job.next),
    );
    if pos != Position::Middle {
        b.aeth = Some(Aeth {
            syndrome: syndrome::ACK,
            msn: qp.resp.msn,
        });
    }
    // A replay answers a duplicate request: the requester lost the first answer.
    let resend = if job.replay {
        Resend::Replay
    } else {
        Resend::No
    };
    // The response is read from the MR into its frame.
    let sent = io.send_with(host, route, &b, len, resend, |host, room| {
        if room.is_empty() {
            return Ok(());
        }
        let va = job.va.wrapping_add(offset);
        host.read_payload(job.pd, job.rkey, va, room, ACCESS_REMOTE_READ)
    });
    match sent {
        Ok(()) => Sent::One,
        Err(e) if e.is_page_fault() => Sent::Waits,
        Err(_) => Sent::Gone,
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
    let pd = qp.pd;
    let Ok(Some(work)) = host.take_recv(qp.qpn) else {
        host.count(COUNTER_DROPS, 1);
        return;
    };
    let mut data = Vec::with_capacity(40 + pkt.payload.len());
    data.extend_from_slice(&f.grh);
    data.extend_from_slice(pkt.payload);
    let mut c = RecvCompletion {
        status: WcStatus::Success,
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
    // A datagram cannot wait: a receive buffer whose on-demand page is not present fails
    // (the device offers no on-demand receives on UD).
    if let Err(e) = scatter(host, pd, &work, 0, &data) {
        c.status = match e {
            ScatterError::Fails(status) => status,
            ScatterError::PageFault => WcStatus::LocProtErr,
        };
        c.byte_len = 0;
    }
    let _ = host.complete_recv(qp.qpn, &work, c);
}

/// Why a SEND's payload could not be scattered.
pub(super) enum ScatterError {
    /// The receive WQE fails with this status.
    Fails(WcStatus),
    /// An on-demand page of the receive buffer is not present: the packet waits for it.
    PageFault,
}

/// Scatters `data` at `offset` of a receive WQE.
pub(super) fn scatter(
    host: &mut dyn EngineHost,
    pd: u32,
    work: &RecvWork,
    offset: u64,
    data: &[u8],
) -> Result<(), ScatterError> {
    let pieces = sge_pieces(&work.sges, offset, data.len())
        .ok_or(ScatterError::Fails(WcStatus::LocLenErr))?;
    let mut at = 0;
    for (lkey, addr, n) in pieces {
        host.write_payload(pd, lkey, addr, &data[at..at + n], ACCESS_LOCAL_WRITE)
            .map_err(|e| {
                if e.is_page_fault() {
                    ScatterError::PageFault
                } else {
                    ScatterError::Fails(WcStatus::LocProtErr)
                }
            })?;
        at += n;
    }
    Ok(())
}
