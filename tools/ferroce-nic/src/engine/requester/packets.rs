// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The requester's packets: a WQE's request packets (SEND, RDMA WRITE, READ request, atomics,
//! ATOMIC WRITE, FLUSH) gathered from its buffers, datagrams, and the local operations
//! (REG_MR, LOCAL_INV, BIND_MW) executed in their turn.

use ferroce_hw::*;

use super::super::headers::{AtomicEth, Deth, Feth, Headers, Reth};
use super::super::io::{Io, Resend};
use super::super::opcode::{self, op, Position};
use super::super::psn;
use super::super::roce::{route_for, sge_pieces, QpCtx, GSI_QKEY};
use super::super::{EngineHost, SendWork};
use super::{Kind, ReqWqe, ACK_REQ_EVERY};
use crate::objects::ah::ah_from_av;

/// On-demand paging: whether the pages WQE `w` reaches in its own buffers (what it sends, or
/// where a READ or atomic puts its answer) are present. Those that are not have their page
/// fault raised, and the WQE waits before it takes a PSN (RNICs fault the requester's pages in
/// before they send). Any refusal is left to the WQE's own packets.
pub(super) fn local_pages_ready(host: &mut dyn EngineHost, w: &ReqWqe) -> bool {
    let access = match w.kind {
        Kind::Send | Kind::Write | Kind::Datagram => 0,
        Kind::Read | Kind::Atomic => ACCESS_LOCAL_WRITE,
        _ => return true,
    };
    if w.work.ctrl.flags & WQE_FLAG_INLINE != 0 {
        return true;
    }
    // Every SGE is checked, so that one WQE raises the faults of all its MRs at once.
    let mut ready = true;
    for sge in w.work.sges.iter().filter(|s| s.length > 0) {
        ready &= host.pages_present(sge.lkey, sge.addr, u64::from(sge.length), access);
    }
    ready
}

/// What a request packet carries after its headers, written into its frame when the frame is
/// built ([`Body::fill`]): the payload is copied once, from guest memory into the frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Body {
    /// No payload.
    Empty,
    /// Message bytes `[offset, offset + len)` of the WQE: its inline data or its buffers.
    Message { offset: u64, len: usize },
    /// An ATOMIC WRITE's value.
    Value([u8; 8]),
}

impl Body {
    /// Its length in bytes.
    pub(super) fn len(self) -> usize {
        match self {
            Body::Empty => 0,
            Body::Message { len, .. } => len,
            Body::Value(v) => v.len(),
        }
    }

    /// Writes it into `room` (its length), from WQE `work` of a QP of PD `pd`: a local
    /// protection error if the WQE's buffers do not hold it.
    pub(super) fn fill(
        self,
        host: &mut dyn EngineHost,
        pd: u32,
        work: &SendWork,
        room: &mut [u8],
    ) -> Result<(), WcStatus> {
        match self {
            Body::Empty => Ok(()),
            Body::Value(v) => {
                room.copy_from_slice(&v);
                Ok(())
            }
            Body::Message { offset, .. } => {
                gather(host, pd, work, offset, room).ok_or(WcStatus::LocProtErr)
            }
        }
    }
}

/// Gathers message bytes `[offset, offset + buf.len())` of WQE `work` into `buf`.
fn gather(
    host: &mut dyn EngineHost,
    pd: u32,
    work: &SendWork,
    offset: u64,
    buf: &mut [u8],
) -> Option<()> {
    let len = buf.len();
    if work.ctrl.flags & WQE_FLAG_INLINE != 0 {
        let start = usize::try_from(offset).ok()?;
        buf.copy_from_slice(work.inline_data.get(start..start + len)?);
        return Some(());
    }
    let mut at = 0;
    for (lkey, addr, n) in sge_pieces(&work.sges, offset, len)? {
        host.read_payload(pd, lkey, addr, &mut buf[at..at + n], 0)
            .ok()?;
        at += n;
    }
    Some(())
}

/// Builds request packet `k` of WQE `w` (its PSN already assigned): its headers, and what its
/// payload is.
pub(super) fn request_packet(
    qp: &QpCtx,
    w: &ReqWqe,
    k: u32,
    read_pieces: u32,
) -> Result<(Headers, Body), WcStatus> {
    let ctrl = &w.work.ctrl;
    let mtu = qp.mtu();
    let dest = qp.attrs.dest_qpn;
    let imm = matches!(ctrl.opcode, WR_SEND_WITH_IMM | WR_RDMA_WRITE_WITH_IMM);
    let inv = ctrl.opcode == WR_SEND_WITH_INV;
    let pos = Position::of(k, w.npkts);
    let last = matches!(pos, Position::Last | Position::Only);
    let psn = psn::add(w.first_psn, k);
    let reliable = qp.qp_type.is_reliable();
    let built = match w.kind {
        Kind::Send | Kind::Write => {
            let rc = if w.kind == Kind::Send {
                opcode::rc_send(pos, imm, inv)
            } else {
                opcode::rc_write(pos, imm)
            };
            let mut b = Headers::new(qp.opcode(rc), dest, psn);
            b.bth.ack_req = reliable && (last || (k + 1) % ACK_REQ_EVERY == 0);
            b.bth.solicited = last && ctrl.flags & WQE_FLAG_SOLICITED != 0;
            if imm && last {
                b.imm = Some(ctrl.imm_or_inv.to_le_bytes());
            }
            if inv && last {
                b.ieth = Some(ctrl.imm_or_inv);
            }
            if let (Some((va, rkey)), Position::First | Position::Only) = (remote(&w.work.op), pos)
            {
                b.reth = Some(Reth {
                    va,
                    rkey,
                    len: w.len as u32,
                });
            }
            let offset = u64::from(k) * u64::from(mtu);
            let len = (w.len - offset.min(w.len)).min(u64::from(mtu)) as usize;
            Ok((b, Body::Message { offset, len }))
        }
        Kind::Read => {
            let (va, rkey) = remote(&w.work.op).ok_or(WcStatus::LocQpOpErr)?;
            let offset = (u64::from(w.resp_pkts) * u64::from(mtu)).min(w.len);
            let mut b = Headers::new(
                qp.opcode(op::RC_READ_REQUEST),
                dest,
                psn::add(w.first_psn, w.resp_pkts),
            );
            b.bth.ack_req = true;
            let piece = u64::from(read_pieces) * u64::from(mtu);
            b.reth = Some(Reth {
                va: va.wrapping_add(offset),
                rkey,
                len: (w.len - offset).min(piece) as u32,
            });
            Ok((b, Body::Empty))
        }
        Kind::Atomic => {
            let (opcode, atomic) = match w.work.op {
                SendOp::CmpSwap {
                    remote_addr,
                    rkey,
                    compare,
                    swap,
                } => (
                    op::RC_COMPARE_SWAP,
                    AtomicEth {
                        va: remote_addr,
                        rkey,
                        swap_add: swap,
                        compare,
                    },
                ),
                SendOp::FetchAdd {
                    remote_addr,
                    rkey,
                    add,
                } => (
                    op::RC_FETCH_ADD,
                    AtomicEth {
                        va: remote_addr,
                        rkey,
                        swap_add: add,
                        compare: add,
                    },
                ),
                _ => return Err(WcStatus::LocQpOpErr),
            };
            let mut b = Headers::new(qp.opcode(opcode), dest, w.first_psn);
            b.bth.ack_req = true;
            b.atomic = Some(atomic);
            Ok((b, Body::Empty))
        }
        Kind::AtomicWrite => {
            let SendOp::AtomicWrite {
                remote_addr,
                rkey,
                value,
            } = w.work.op
            else {
                return Err(WcStatus::LocQpOpErr);
            };
            let mut b = Headers::new(qp.opcode(op::RC_ATOMIC_WRITE), dest, w.first_psn);
            b.bth.ack_req = true;
            b.reth = Some(Reth {
                va: remote_addr,
                rkey,
                len: 8,
            });
            Ok((b, Body::Value(value)))
        }
        Kind::Flush => {
            let SendOp::Flush {
                remote_addr,
                rkey,
                length,
                placement,
                level,
            } = w.work.op
            else {
                return Err(WcStatus::LocQpOpErr);
            };
            let mut b = Headers::new(qp.opcode(op::RC_FLUSH), dest, w.first_psn);
            b.bth.ack_req = true;
            b.feth = Some(Feth { placement, level });
            b.reth = Some(Reth {
                va: remote_addr,
                rkey,
                len: if level == FLUSH_MR { 0 } else { length as u32 },
            });
            Ok((b, Body::Empty))
        }
        Kind::Local | Kind::Datagram => Err(WcStatus::LocQpOpErr),
    };
    // Every request of an XRC_INI QP names the XRC SRQ at the target that receives it.
    let xrc_srqn = (qp.qp_type == QpType::XrcIni).then_some(ctrl.xrc_srqn);
    built.map(|(mut b, len)| {
        b.xrceth = xrc_srqn;
        (b, len)
    })
}

/// The remote address and key of an RDMA WRITE or READ.
fn remote(op: &SendOp) -> Option<(u64, u32)> {
    match *op {
        SendOp::Write { remote_addr, rkey }
        | SendOp::WriteWithImm {
            remote_addr, rkey, ..
        }
        | SendOp::Read { remote_addr, rkey } => Some((remote_addr, rkey)),
        _ => None,
    }
}

/// Executes a REG_MR, LOCAL_INV or BIND_MW work request of QP `qpn`.
pub(super) fn local_operation(
    host: &mut dyn EngineHost,
    pd: u32,
    qpn: u32,
    work: &SendWork,
) -> WcStatus {
    let (result, failed, counter) = match work.op {
        SendOp::RegMr(seg) => (
            host.fast_register(pd, &seg),
            WcStatus::LocProtErr,
            Some(COUNTER_FAST_REGISTRATIONS),
        ),
        SendOp::BindMw(seg) => (host.bind_mw(pd, qpn, &seg), WcStatus::MwBindErr, None),
        SendOp::LocalInv(key) => (
            host.invalidate(pd, qpn, key),
            WcStatus::LocProtErr,
            Some(COUNTER_LOCAL_INVALIDATIONS),
        ),
        _ => return WcStatus::LocQpOpErr,
    };
    if result.is_ok() {
        if let Some(counter) = counter {
            host.count(counter, 1);
        }
        WcStatus::Success
    } else {
        failed
    }
}

/// Sends a UD / GSI datagram; returns the completion status.
pub(super) fn send_datagram(
    qp: &mut QpCtx,
    io: &mut Io,
    host: &mut dyn EngineHost,
    pd: u32,
    i: usize,
) -> WcStatus {
    let Some(w) = qp.req.wqes.get(i) else {
        return WcStatus::LocQpOpErr;
    };
    // The destination: an AH handle, or (WQE_FLAG_AV) the address vector itself, checked as
    // CMD_CREATE_AH checks an AH. Either failing completes the WQE with the same error.
    let (ah, remote_qpn, remote_qkey) = match w.work.ud {
        Some(UdAddress::Av(av)) => {
            let Ok(ah) = ah_from_av(pd, &av) else {
                return WcStatus::LocQpOpErr;
            };
            (ah, av.remote_qpn, av.remote_qkey)
        }
        Some(UdAddress::Handle(seg)) => {
            let Some(ah) = host.ah(seg.ah).filter(|ah| ah.pd == pd) else {
                return WcStatus::LocQpOpErr;
            };
            (ah, seg.remote_qpn, seg.remote_qkey)
        }
        None => return WcStatus::LocQpOpErr,
    };
    let flow_label = if ah.flow_label != 0 {
        ah.flow_label
    } else {
        super::super::frame::flow_label_for(qp.qpn, remote_qpn)
    };
    let Some(route) = route_for(
        host,
        ah.sgid_index,
        ah.dgid,
        ah.dmac,
        ah.traffic_class,
        ah.hop_limit,
        flow_label,
    ) else {
        return WcStatus::LocQpOpErr;
    };
    // A Q_Key with the high bit set means "use the QP's own" (IBA 10.2.5); QP1's own is the
    // well-known 0x80010000. ib_mad sends every MAD with IB_QP_SET_QKEY (0x80000000).
    let qkey = match (remote_qkey & 0x8000_0000 != 0, qp.qp_type) {
        (true, QpType::Gsi) => GSI_QKEY,
        (true, _) => qp.attrs.qkey,
        (false, _) => remote_qkey,
    };
    let imm = w.work.ctrl.opcode == WR_SEND_WITH_IMM;
    let opcode = if imm {
        op::UD_SEND_ONLY_IMM
    } else {
        op::UD_SEND_ONLY
    };
    let mut b = Headers::new(opcode, remote_qpn & 0x00ff_ffff, qp.req.next_psn);
    b.bth.solicited = w.work.ctrl.flags & WQE_FLAG_SOLICITED != 0;
    b.deth = Some(Deth {
        qkey: if qp.qp_type == QpType::Gsi && qkey == 0 {
            GSI_QKEY
        } else {
            qkey
        },
        src_qpn: qp.qpn,
    });
    if imm {
        b.imm = Some(w.work.ctrl.imm_or_inv.to_le_bytes());
    }
    let body = Body::Message {
        offset: 0,
        len: w.len as usize,
    };
    let sent = io.send_with(host, &route, &b, body.len(), Resend::No, |host, room| {
        body.fill(host, pd, &w.work, room)
    });
    if let Err(status) = sent {
        return status;
    }
    let index = w.work.index;
    qp.req.next_psn = psn::add(qp.req.next_psn, 1);
    host.wqe_on_wire(qp.qpn, index);
    WcStatus::Success
}
