// SPDX-License-Identifier: GPL-2.0

//! Completion queues: a ring of 64-byte CQEs the device writes, a doorbell record holding the
//! consumer index, the arm doorbell, and completion events from a completion EQ.

use kernel::{
    io::Io,
    prelude::*,
    rdma::{
        self,
        Completions,
        CqInit,
        NetworkHeader,
        Numbered,
        Udata,
        WcOpcode,
        WcStatus,
        WorkCompletion, //
    },
    sync::{
        new_spinlock_irq,
        SpinLockIrq, //
    },
    uapi,
};

use crate::{
    checks::BadCqe,
    hw,
    qp::Claim,
    queue::{
        DbRecord,
        DmaRing,
        OneRing,
        UserQueue, //
    },
    regs,
    verbs::RoceDevice,
};

/// The driver's part of a CQ.
pub(crate) struct CqData {
    cqn: u32,
    mem: CqMem,
}

/// Where a CQ's ring is and who polls it.
enum CqMem {
    /// The driver's ring, polled by `poll_cq`.
    Kernel {
        ring: DmaRing,
        dbrec: DbRecord,
        /// The consumer index; the lock serialises pollers.
        ci: Pin<KBox<SpinLockIrq<u16>>>,
    },
    /// A process's ring, polled by the process; it arms the CQ through its doorbell page.
    User {
        /// Its pinned memory and local QID, which go with the queue.
        queue: UserQueue,
    },
}

impl Numbered for CqData {
    fn number(&self) -> u32 {
        self.cqn
    }
}

/// The CQ's doorbell-queue id: kernel doorbells name queues by their global number.
fn qid(number: u32) -> Result<u16> {
    u16::try_from(number).map_err(|_| ERANGE)
}

impl CqData {
    /// Creates a CQ of at least `init.entries` entries on the completion EQ of
    /// `init.comp_vector`.
    pub(crate) fn create(dev: &rdma::Device<RoceDevice>, init: &CqInit) -> Result<(Self, u32)> {
        let eqn = dev.completion_eqn(init.comp_vector).ok_or_else(|| {
            pr_warn!("ferroce: no completion EQ: the device has too few MSI-X vectors for CQs\n");
            EOPNOTSUPP
        })?;
        if init.flags != 0 || init.entries == 0 || init.entries > dev.max_cqe() {
            return Err(EINVAL);
        }
        let log_size = init.entries.next_power_of_two().trailing_zeros();
        let ring = DmaRing::new(dev.parent(), log_size, hw::CQE_SIZE.trailing_zeros())?;
        let dbrec = DbRecord::new(dev.parent())?;
        let completion = dev.cmdq().exec(&hw::CreateCqCmd {
            ring: ring.desc(),
            dbrec_addr: dbrec.dma_address(),
            eqn,
            log_size: log_size as u8,
            flags: 0,
            moder_count: 0,
            moder_period_us: 0,
            rsvd0: 0,
            rsvd1: 0,
        })?;
        let cqn = completion.cqn;
        let (ring, dbrec) = dev
            .checks()
            .new_number(dev.cqs(), "CQ", cqn, (ring, dbrec))?;
        let entries = ring.ring().size();
        let cq = Self {
            cqn,
            mem: CqMem::Kernel {
                ring,
                dbrec,
                ci: KBox::pin_init(new_spinlock_irq!(0, "ferroce::cq"), GFP_KERNEL)?,
            },
        };
        if qid(cqn).is_err() {
            let _ = cq.destroy_in_device(dev);
            return Err(EIO);
        }
        Ok((cq, entries))
    }

    /// Creates a CQ whose ring and record are in the calling process's memory
    /// (`ferroce_create_cq_req`), and answers with its numbers (`ferroce_create_cq_resp`).
    pub(crate) fn create_user(
        dev: &rdma::Device<RoceDevice>,
        init: &CqInit,
        udata: &mut Udata<'_>,
    ) -> Result<(Self, u32)> {
        let ctx = udata.ucontext(dev).ok_or(EINVAL)?;
        let eqn = dev.completion_eqn(init.comp_vector).ok_or(EOPNOTSUPP)?;
        let req: uapi::ferroce_create_cq_req = udata.read()?;
        let entries = 1u32.checked_shl(req.log_size).ok_or(EINVAL)?;
        if init.flags != 0
            || req.reserved != 0
            || init.entries == 0
            || init.entries > entries
            || entries > dev.max_cqe()
        {
            return Err(EINVAL);
        }
        let OneRing {
            mem,
            ring,
            dbrec_addr,
        } = OneRing::pin(
            dev,
            req.buf_addr,
            req.buf_size,
            req.log_size,
            hw::CQE_SIZE.trailing_zeros(),
            req.dbrec_offset,
        )?;
        let completion = dev.cmdq().exec(&hw::CreateCqCmd {
            ring,
            dbrec_addr,
            eqn,
            log_size: req.log_size as u8,
            ..Default::default()
        })?;
        let cqn = completion.cqn;
        let mem = dev.checks().new_number(dev.cqs(), "CQ", cqn, mem)?;
        let queue = UserQueue::map(dev, ctx, hw::QID_KIND_CQ, cqn, mem, || {
            let _ = dev.cmdq().exec(&hw::DestroyCqCmd { cqn, rsvd: 0 });
        })?;
        let db_qid = queue.qid().into();
        let cq = Self {
            cqn,
            mem: CqMem::User { queue },
        };
        let written = udata.write(&uapi::ferroce_create_cq_resp { cqn, db_qid });
        if let Err(e) = written {
            let _ = cq.destroy(dev);
            return Err(e);
        }
        Ok((cq, entries))
    }

    /// Moves a process's CQ to the ring of `ferroce_resize_cq_req` (`CMD_RESIZE_CQ`: the
    /// device ends the old ring with a marker CQE, which the provider polls up to before it
    /// goes on in the new one). The old buffer is unpinned once the device has switched.
    /// Returns the entries of the new ring.
    pub(crate) fn resize_user(
        &self,
        dev: &rdma::Device<RoceDevice>,
        entries: u32,
        udata: &mut Udata<'_>,
    ) -> Result<u32> {
        let CqMem::User { queue } = &self.mem else {
            return Err(EINVAL);
        };
        if dev.caps_flags() & hw::CAP_CQ_RESIZE == 0 {
            return Err(EOPNOTSUPP);
        }
        let req: uapi::ferroce_resize_cq_req = udata.read()?;
        let size = 1u32.checked_shl(req.log_size).ok_or(EINVAL)?;
        if req.reserved != 0 || entries == 0 || entries > size || size > dev.max_cqe() {
            return Err(EINVAL);
        }
        let OneRing {
            mem,
            ring,
            dbrec_addr,
        } = OneRing::pin(
            dev,
            req.buf_addr,
            req.buf_size,
            req.log_size,
            hw::CQE_SIZE.trailing_zeros(),
            req.dbrec_offset,
        )?;
        let cmd = hw::ResizeCqCmd {
            ring,
            dbrec_addr,
            cqn: self.cqn,
            log_size: req.log_size as u8,
            ..Default::default()
        };
        // The device's answers to the process: fewer entries than the CQ holds (EINVAL, as
        // rxe), or no room for the marker in a full CQ (EBUSY: poll first).
        let answers = [hw::STATUS_BAD_PARAM, hw::STATUS_BUSY];
        queue.move_to(mem, || dev.cmdq().exec_or_refuse(&cmd, &answers))?;
        Ok(size)
    }

    /// Destroys the CQ in the device; its memory (and a user CQ's local QID) goes with the
    /// data.
    pub(crate) fn destroy(&self, dev: &rdma::Device<RoceDevice>) -> Result {
        self.destroy_in_device(dev)
    }

    fn destroy_in_device(&self, dev: &rdma::Device<RoceDevice>) -> Result {
        dev.cmdq().exec_destroy(&hw::DestroyCqCmd {
            cqn: self.cqn,
            rsvd: 0,
        })
    }

    /// Moves the CQEs the driver accepts ([`CqData::accept`]) into `out`, drops the others, then
    /// publishes the new consumer index in the record.
    pub(crate) fn poll(
        &self,
        dev: &rdma::Device<RoceDevice>,
        out: &mut Completions<'_, RoceDevice>,
    ) -> Result {
        // ib_core polls kernel CQs only.
        let CqMem::Kernel { ring, dbrec, ci } = &self.mem else {
            return Err(EINVAL);
        };
        let mut ci = ci.lock();
        let start = *ci;
        let mut bytes = [0u8; hw::CQE_SIZE];
        while !out.is_full() && ring.read_owned(*ci, hw::CQE_OWNER_OFFSET, &mut bytes)? {
            let cqe = hw::Cqe::decode(&bytes);
            match self.accept(dev, &cqe) {
                Ok(Accepted::Wc(wc)) => {
                    let _ = out.push(&wc);
                }
                Ok(Accepted::Lost { index, posted }) => {
                    // Completed first; the CQE is read again.
                    RoceDevice::flush_lost(dev, cqe.qpn, index, &posted, out);
                    continue;
                }
                Err(why) => RoceDevice::refuse_cqe(dev, self.cqn, &cqe, why),
            }
            *ci = ci.wrapping_add(1);
        }
        if *ci != start {
            dbrec.write(0, u32::from(*ci))?;
        }
        Ok(())
    }

    /// The work completion of `cqe`, if the driver believes it: its values are defined, it
    /// names a kernel QP completing on this CQ, and it completes a WQE posted there and not
    /// completed yet, agreeing with it (`wr_id`, opcode, length). The QP (or SRQ) then
    /// learns how far the device got in its queue. A signaled WR of the QP's queue that it
    /// went past, whose own CQE never came, comes first.
    fn accept(&self, dev: &rdma::Device<RoceDevice>, cqe: &hw::Cqe) -> Result<Accepted, BadCqe> {
        let mut wc = work_completion(cqe).ok_or(BadCqe::Undefined)?;
        let claim = dev
            .qps()
            .with(cqe.qpn, |qp| qp.claim(self.cqn, cqe))
            .ok_or(BadCqe::UnknownQp)??;
        let len = match claim {
            Claim::Own { len } => len,
            Claim::Lost { index, posted } => return Ok(Accepted::Lost { index, posted }),
            Claim::Srq(srqn) => dev
                .srqs()
                .with(srqn, |srq| srq.claim(cqe))
                .ok_or(BadCqe::ForeignQp)??,
        };
        // An error completion's length means nothing; it never exceeds the WQE's either. An
        // RDMA WRITE with immediate's is the WRITE's, which the receive it consumed does not bound.
        if cqe.opcode != hw::CQE_OP_RECV_RDMA_WITH_IMM {
            wc.byte_len = wc.byte_len.min(len);
        }
        Ok(Accepted::Wc(wc))
    }

    /// Removes the CQEs of QP `qpn`, just destroyed in the device, from the ring (as mlx5's
    /// `cq_clean`): the CQEs after them move up over the gap and the consumer index moves past
    /// it, so that the next QP with that number never gets them. Receive WQEs they took from
    /// SRQ `srqn` are freed in it. User CQs are the process's to clean.
    pub(crate) fn clean(
        &self,
        dev: &rdma::Device<RoceDevice>,
        qpn: u32,
        srqn: Option<u32>,
    ) -> Result {
        let CqMem::Kernel { ring, dbrec, ci } = &self.mem else {
            return Ok(());
        };
        let mut ci = ci.lock();
        let mut written = Ok(());
        let freed = hw::clean_cqes(
            ring.ring(),
            *ci,
            |index| {
                let mut bytes = [0u8; hw::CQE_SIZE];
                match ring.read_owned(index, hw::CQE_OWNER_OFFSET, &mut bytes) {
                    Ok(true) => Some(bytes),
                    _ => None,
                }
            },
            |cqe| {
                let ours = cqe.qpn == qpn;
                if let Some(srqn) = srqn.filter(|_| ours && cqe.opcode & hw::CQE_OP_RECV != 0) {
                    dev.srqs().with(srqn, |srq| srq.discard(cqe.wqe_index));
                }
                ours
            },
            |index, body| {
                if written.is_ok() {
                    written = ring.write(index, body);
                }
            },
        );
        written?;
        if freed > 0 {
            *ci = ci.wrapping_add(freed);
            dbrec.write(0, u32::from(*ci))?;
            dev.checks().cleaned_cqes(freed);
        }
        Ok(())
    }

    /// Arms the CQ; returns whether CQEs are already waiting (they may not raise an event).
    pub(crate) fn arm(&self, dev: &rdma::Device<RoceDevice>, solicited_only: bool) -> Result<bool> {
        let CqMem::Kernel { ring, ci, .. } = &self.mem else {
            return Err(EINVAL);
        };
        let ci = ci.lock();
        let qid = qid(self.cqn)?;
        dev.bar().with(|bar| {
            bar.write_reg(
                regs::DB_CQ_ARM::zeroed()
                    .with_qid(qid)
                    .with_solicited(solicited_only),
            );
            // The device raises an event only for CQEs it writes after it took the arm. The
            // doorbell write is posted: a read behind it returns once the device has taken
            // it, so the look below finds every CQE written before (which raises no event).
            let _ = bar.read(regs::DEV_STATUS);
        })?;
        let mut bytes = [0u8; hw::CQE_SIZE];
        ring.read_owned(*ci, hw::CQE_OWNER_OFFSET, &mut bytes)
    }

    /// Sets the event moderation.
    pub(crate) fn moderate(
        &self,
        dev: &rdma::Device<RoceDevice>,
        count: u16,
        period_us: u16,
    ) -> Result {
        dev.cmdq().exec(&hw::ModifyCqCmd {
            cqn: self.cqn,
            rsvd0: 0,
            moder_count: count,
            moder_period_us: period_us,
            rsvd1: 0,
        })?;
        Ok(())
    }
}

/// What a CQE the driver believes gives: its completion, or first that of a WR it went past
/// whose own CQE never came (posted at `index`).
enum Accepted {
    Wc(WorkCompletion),
    Lost { index: u16, posted: hw::Posted },
}

/// The work completion opcode of a `CQE_OP_*`; `None` for values the interface does not define.
fn wc_opcode(opcode: u8) -> Option<WcOpcode> {
    Some(match opcode {
        hw::CQE_OP_SEND => WcOpcode::Send,
        hw::CQE_OP_RDMA_WRITE => WcOpcode::RdmaWrite,
        hw::CQE_OP_RDMA_READ => WcOpcode::RdmaRead,
        hw::CQE_OP_CMP_SWAP => WcOpcode::CompSwap,
        hw::CQE_OP_FETCH_ADD => WcOpcode::FetchAdd,
        hw::CQE_OP_REG_MR => WcOpcode::RegMr,
        hw::CQE_OP_LOCAL_INV => WcOpcode::LocalInv,
        hw::CQE_OP_RECV => WcOpcode::Recv,
        hw::CQE_OP_RECV_RDMA_WITH_IMM => WcOpcode::RecvRdmaWithImm,
        _ => return None,
    })
}

/// The completion the driver gives WR `posted` of QP `qpn`, whose CQE never came: flushed, as
/// the WRs of a QP in error are.
pub(crate) fn flushed(qpn: u32, posted: &hw::Posted) -> WorkCompletion {
    WorkCompletion {
        wr_id: posted.wr_id,
        qp_num: qpn,
        status: WcStatus::WrFlushErr,
        // What it was: a flush's opcode means nothing to ib_core, but a consumer may look.
        opcode: wc_opcode(posted.opcode).unwrap_or(WcOpcode::Send),
        vendor_err: 0,
        byte_len: 0,
        imm: None,
        invalidated_rkey: None,
        src_qp: 0,
        smac: None,
        vlan: None,
        network_header: None,
        pkey_index: 0,
        port: crate::commands::PORT_U8,
    }
}

/// Decodes a CQE; `None` for values the interface does not define (a buggy device).
fn work_completion(cqe: &hw::Cqe) -> Option<WorkCompletion> {
    let opcode = wc_opcode(cqe.opcode)?;
    let status = match hw::WcStatus::from_raw(cqe.status) {
        Some(hw::WcStatus::Success) => WcStatus::Success,
        Some(hw::WcStatus::LocLenErr) => WcStatus::LocLenErr,
        Some(hw::WcStatus::LocQpOpErr) => WcStatus::LocQpOpErr,
        Some(hw::WcStatus::LocProtErr) => WcStatus::LocProtErr,
        Some(hw::WcStatus::WrFlushErr) => WcStatus::WrFlushErr,
        Some(hw::WcStatus::MwBindErr) => WcStatus::MwBindErr,
        Some(hw::WcStatus::BadRespErr) => WcStatus::BadRespErr,
        Some(hw::WcStatus::LocAccessErr) => WcStatus::LocAccessErr,
        Some(hw::WcStatus::RemInvReqErr) => WcStatus::RemInvReqErr,
        Some(hw::WcStatus::RemAccessErr) => WcStatus::RemAccessErr,
        Some(hw::WcStatus::RemOpErr) => WcStatus::RemOpErr,
        Some(hw::WcStatus::RetryExcErr) => WcStatus::RetryExcErr,
        Some(hw::WcStatus::RnrRetryExcErr) => WcStatus::RnrRetryExcErr,
        Some(hw::WcStatus::FatalErr) => WcStatus::FatalErr,
        Some(hw::WcStatus::GeneralErr) | None => WcStatus::GeneralErr,
    };
    let is_recv = cqe.opcode & hw::CQE_OP_RECV != 0;
    let imm_bytes = cqe.imm_or_inv.to_le_bytes();
    let grh = is_recv && cqe.flags & hw::CQE_FLAG_GRH != 0;
    Some(WorkCompletion {
        wr_id: cqe.wr_id,
        qp_num: cqe.qpn,
        status,
        opcode,
        vendor_err: cqe.vendor_err.into(),
        byte_len: cqe.byte_len,
        // The CQE holds the immediate data's wire bytes; ib_wc keeps them as `__be32`.
        imm: (cqe.flags & hw::CQE_FLAG_WITH_IMM != 0).then(|| u32::from_ne_bytes(imm_bytes)),
        invalidated_rkey: (cqe.flags & hw::CQE_FLAG_WITH_INV != 0).then_some(cqe.imm_or_inv),
        src_qp: cqe.src_qpn,
        smac: grh.then_some(cqe.smac),
        vlan: (grh && cqe.vlan < 4096).then_some(cqe.vlan),
        network_header: if grh {
            match cqe.network_hdr_type {
                hw::NET_HDR_GRH => Some(NetworkHeader::Ib),
                hw::NET_HDR_IPV4 => Some(NetworkHeader::Ipv4),
                hw::NET_HDR_IPV6 => Some(NetworkHeader::Ipv6),
                _ => return None,
            }
        } else {
            None
        },
        pkey_index: 0,
        port: crate::commands::PORT_U8,
    })
}
