// SPDX-License-Identifier: GPL-2.0

//! Posting to a kernel QP: send WQEs built by the interface's builder into the ring, with what
//! each CQE must agree with noted per slot, and one doorbell (or the push window) per chain;
//! receive WQEs likewise, announced through the doorbell record.

use kernel::{
    io::Io,
    prelude::*,
    rdma::{
        self,
        PostError,
        RecvWr,
        SendOp,
        SendWr, //
    },
    sync::atomic::Relaxed,
};

use super::{
    write_recv_wqe,
    QpData,
    QpMem, //
};
use crate::{
    hw,
    regs,
    verbs::RoceDevice, //
};

impl QpData {
    /// Builds the WQE of `wr` into `wqe` (one stride slot) with the interface's builder;
    /// returns its length and what its CQE must agree with.
    fn build_send_wqe(
        &self,
        wr: &SendWr<'_, RoceDevice>,
        wqe: &mut [u8],
    ) -> Result<(usize, hw::Posted)> {
        // Immediate data travels as the consumer stored it (big-endian in memory).
        let wire_imm = |imm: u32| u32::from_le_bytes(imm.to_ne_bytes());
        let mut ud = None;
        let op = match wr.op()? {
            SendOp::Send { imm: None } => hw::SendOp::Send,
            SendOp::Send { imm: Some(imm) } => hw::SendOp::SendWithImm(wire_imm(imm)),
            SendOp::SendWithInv { rkey } => hw::SendOp::SendWithInv(rkey),
            SendOp::UdSend { dest, imm } => {
                ud = Some(hw::UdAddress::Av(
                    dest.ah.segment(dest.remote_qpn, dest.remote_qkey),
                ));
                imm.map_or(hw::SendOp::Send, |imm| {
                    hw::SendOp::SendWithImm(wire_imm(imm))
                })
            }
            SendOp::RdmaWrite { remote, imm: None } => hw::SendOp::Write {
                remote_addr: remote.addr,
                rkey: remote.rkey,
            },
            SendOp::RdmaWrite {
                remote,
                imm: Some(imm),
            } => hw::SendOp::WriteWithImm {
                remote_addr: remote.addr,
                rkey: remote.rkey,
                imm: wire_imm(imm),
            },
            SendOp::RdmaRead { remote } => hw::SendOp::Read {
                remote_addr: remote.addr,
                rkey: remote.rkey,
            },
            SendOp::CompareSwap {
                remote,
                compare,
                swap,
            } => hw::SendOp::CmpSwap {
                remote_addr: remote.addr,
                rkey: remote.rkey,
                compare,
                swap,
            },
            SendOp::FetchAdd { remote, add } => hw::SendOp::FetchAdd {
                remote_addr: remote.addr,
                rkey: remote.rkey,
                add,
            },
            SendOp::RegMr { mr, key, access } => {
                hw::SendOp::RegMr(crate::mr::MrData::reg_segment(mr, key, access)?)
            }
            SendOp::LocalInv { rkey } => hw::SendOp::LocalInv(rkey),
        };
        let sges = wr.sges()?;
        if sges.len() > hw::MAX_SGE as usize {
            return Err(EINVAL);
        }
        let mut hw_sges = [hw::Sge::default(); hw::MAX_SGE as usize];
        let mut inline: [&[u8]; hw::MAX_SGE as usize] = [&[]; hw::MAX_SGE as usize];
        let payload = if wr.inline() && !sges.is_empty() {
            // Inline: the payload goes into the WQE now; the device reads no payload by DMA.
            for (i, piece) in inline.iter_mut().enumerate().take(sges.len()) {
                *piece = wr.inline_data(i).ok_or(EINVAL)?;
            }
            hw::Payload::Inline(&inline[..sges.len()])
        } else {
            for (sge, out) in sges.iter().zip(hw_sges.iter_mut()) {
                *out = hw::Sge {
                    addr: sge.addr(),
                    length: sge.length(),
                    lkey: sge.lkey(),
                };
            }
            hw::Payload::Sges(&hw_sges[..sges.len()])
        };
        let request = hw::SendRequest {
            wr_id: wr.wr_id(),
            op,
            // The device signals every WQE of a QP created with IB_SIGNAL_ALL_WR.
            signaled: wr.signaled() || self.signal_all,
            solicited: wr.solicited(),
            fence: wr.fence(),
            payload,
            ud,
            xrc_srqn: None,
        };
        let len = hw::build_send_wqe(&request, &self.sq_limits, wqe).map_err(|_| EINVAL)?;
        Ok((len, hw::Posted::send(&request)))
    }

    /// Posts a chain of send requests with one doorbell.
    pub(crate) fn post_send<'a>(
        &self,
        dev: &rdma::Device<RoceDevice>,
        first: SendWr<'a, RoceDevice>,
    ) -> Result<(), PostError<SendWr<'a, RoceDevice>>> {
        if !matches!(
            self.state(),
            Some(hw::QpState::Rts | hw::QpState::Sqd | hw::QpState::Err)
        ) {
            return Err(PostError {
                error: EINVAL,
                bad: first,
            });
        }
        let QpMem::Kernel(kq) = &self.mem else {
            return Err(PostError {
                error: EINVAL,
                bad: first,
            });
        };
        let mut prod = kq.sq_prod.lock();
        let start = prod.pi;
        let mut wqe = [0u8; hw::MAX_WQE_SIZE];
        let mut next = Some(first);
        let mut result = Ok(());
        let mut last_len = 0;
        while let Some(wr) = next {
            let ring = kq.sq.ring();
            let pi = prod.pi;
            let posted = (|| {
                if ring.is_full(pi, kq.sq_ci.load(Relaxed) as u16) {
                    return Err(ENOMEM);
                }
                // One stride is all a WQE may use (`build_send_wqe` checks).
                let slot = wqe.get_mut(..kq.sq.stride()).ok_or(EINVAL)?;
                let (len, posted) = self.build_send_wqe(&wr, slot)?;
                kq.sq.write(pi, &wqe[..len])?;
                Ok((len, posted))
            })();
            match posted {
                Ok((len, posted)) => {
                    last_len = len;
                    prod.wrs.set(pi, posted);
                }
                Err(error) => {
                    result = Err(PostError { error, bad: wr });
                    break;
                }
            }
            prod.pi = pi.wrapping_add(1);
            next = wr.next();
        }
        let pi = prod.pi;
        if pi != start {
            // The record first, then one doorbell for the whole chain; a single small WQE
            // goes through the push window instead.
            let qid = self.qpn as u16;
            let rung = kq.dbrec.write(0, u32::from(pi)).and_then(|()| {
                if pi.wrapping_sub(start) == 1 && dev.push_wqe(qid, pi, &wqe[..last_len])? {
                    return Ok(());
                }
                dev.bar()
                    .with(|bar| bar.write_reg(regs::DB_SQ::zeroed().with_qid(qid).with_pi(pi)))
            });
            if let Err(error) = rung {
                return Err(PostError { error, bad: first });
            }
        }
        result
    }

    /// Posts a chain of receive requests; the record carries the producer index.
    pub(crate) fn post_recv<'a>(
        &self,
        dev: &rdma::Device<RoceDevice>,
        first: RecvWr<'a>,
    ) -> Result<(), PostError<RecvWr<'a>>> {
        let kq = match &self.mem {
            QpMem::Kernel(kq) if self.state() != Some(hw::QpState::Reset) => Some(kq),
            _ => None,
        };
        let Some((kq, rq)) = kq.and_then(|kq| Some((kq, kq.rq.as_ref()?))) else {
            // In RESET, or receives go to an SRQ.
            return Err(PostError {
                error: EINVAL,
                bad: first,
            });
        };
        let mut prod = kq.rq_prod.lock();
        let start = prod.pi;
        let mut next = Some(first);
        let mut result = Ok(());
        while let Some(wr) = next {
            let pi = prod.pi;
            let posted = if rq.ring().is_full(pi, kq.rq_ci.load(Relaxed) as u16) {
                Err(ENOMEM)
            } else {
                write_recv_wqe(rq, pi, &wr, self.caps.max_recv_sge)
            };
            match posted {
                Ok(posted) => prod.wrs.set(pi, posted),
                Err(error) => {
                    result = Err(PostError { error, bad: wr });
                    break;
                }
            }
            prod.pi = pi.wrapping_add(1);
            next = wr.next();
        }
        let pi = prod.pi;
        if pi != start {
            let rung = kq.dbrec.write(4, u32::from(pi)).and_then(|()| {
                dev.bar().with(|bar| {
                    bar.write_reg(regs::DB_RQ::zeroed().with_qid(self.qpn as u16).with_pi(pi))
                })
            });
            if let Err(error) = rung {
                return Err(PostError { error, bad: first });
            }
        }
        result
    }
}
