// SPDX-License-Identifier: GPL-2.0

//! Queue pairs: send and receive rings with a doorbell record, WQEs built from work requests,
//! one doorbell per chain, and the state machine driven by `CMD_MODIFY_QP`.

use kernel::{
    io::Io,
    prelude::*,
    rdma::{
        self,
        Numbered, //
        PostError,
        QpAttrOut,
        QpCaps,
        QpInit,
        QpState,
        QpType,
        RecvWr,
        SendOp,
        SendWr,
        Udata,
    },
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        new_spinlock_irq,
        SpinLockIrq, //
    },
    uapi,
};

use crate::{
    hw,
    queue::{
        DbRecord,
        DmaRing,
        OutBuf,
        UserQueueMem, //
    },
    regs,
    ucontext::{
        self,
        Qid, //
    },
    verbs::RoceDevice,
};

/// Receive WQEs carry at most this many SGEs (one 256-byte slot).
pub(crate) const MAX_RECV_SGE: u32 = 15;

/// The driver's part of a QP.
pub(crate) struct QpData {
    qpn: u32,
    qp_type: u8,
    /// The SRQ receives come from, if any.
    srqn: Option<u32>,
    caps: QpCaps,
    signal_all: bool,
    /// State as last set by `modify_qp` (`hw::QPS_*`).
    state: Atomic<u32>,
    mem: QpMem,
}

/// Where a QP's rings are and who posts to them.
enum QpMem {
    /// The driver's rings: kernel consumers post through `post_send`/`post_recv`.
    Kernel(KernelQueues),
    /// A process's rings: it posts WQEs and rings its doorbell page itself.
    User { _mem: UserQueueMem, qid: Qid },
}

/// The rings of a kernel QP.
struct KernelQueues {
    sq: DmaRing,
    /// The receive ring; `None` with an SRQ.
    rq: Option<DmaRing>,
    dbrec: DbRecord,
    /// Producer index of the send queue, and the serialisation of posters.
    sq_pi: Pin<KBox<SpinLockIrq<u16>>>,
    /// Producer index of the receive queue.
    rq_pi: Pin<KBox<SpinLockIrq<u16>>>,
    /// How far the device consumed the queues, from completions.
    sq_ci: Atomic<u32>,
    rq_ci: Atomic<u32>,
}

impl Numbered for QpData {
    fn number(&self) -> u32 {
        self.qpn
    }
}

/// Whether a completion that frees the slots up to `next` is plausible for a queue with
/// producer `pi` whose completions had freed up to `ci`: it must move forward, not past `pi`.
fn completion_advances(ring: hw::Ring, pi: u16, ci: u16, next: u16) -> bool {
    ring.used(pi, next) <= ring.used(pi, ci)
}

pub(crate) fn log2_ceil(n: u32) -> u32 {
    n.max(1).next_power_of_two().trailing_zeros()
}

/// The ring geometry for `caps`: (sq log size, sq log stride, rq log size, rq log stride) and
/// the capacities they give.
pub(crate) fn geometry(
    caps: &QpCaps,
    max_wr: u32,
    max_sge: u32,
) -> Result<(u32, u32, u32, u32, QpCaps)> {
    if caps.max_send_wr > max_wr
        || caps.max_recv_wr > max_wr
        || caps.max_send_sge > max_sge
        || caps.max_recv_sge > max_sge.min(MAX_RECV_SGE)
        || caps.max_inline_data > hw::MAX_INLINE
    {
        return Err(EINVAL);
    }
    let send_wqe = hw::send_wqe_size(caps.max_send_sge, caps.max_inline_data);
    let sq_stride = log2_ceil(u32::try_from(send_wqe)?).max(hw::MIN_LOG_WQE_STRIDE);
    let recv_wqe = hw::RecvWqeHeader::SIZE + caps.max_recv_sge.max(1) as usize * hw::Sge::SIZE;
    let rq_stride = log2_ceil(u32::try_from(recv_wqe)?).max(hw::MIN_LOG_WQE_STRIDE);
    if sq_stride > hw::MAX_LOG_WQE_STRIDE || rq_stride > hw::MAX_LOG_WQE_STRIDE {
        return Err(EINVAL);
    }
    let (sq_log, rq_log) = (log2_ceil(caps.max_send_wr), log2_ceil(caps.max_recv_wr));
    let sq_room = (1usize << sq_stride) - hw::WQE_HEADER_SIZE;
    let rq_room = (1usize << rq_stride) - hw::RecvWqeHeader::SIZE;
    let actual = QpCaps {
        max_send_wr: 1 << sq_log,
        max_recv_wr: 1 << rq_log,
        max_send_sge: u32::try_from(sq_room / hw::Sge::SIZE)?.min(max_sge),
        max_recv_sge: u32::try_from(rq_room / hw::Sge::SIZE)?
            .min(max_sge)
            .min(MAX_RECV_SGE),
        max_inline_data: u32::try_from(sq_room)?.min(hw::MAX_INLINE),
    };
    Ok((sq_log, sq_stride, rq_log, rq_stride, actual))
}

/// The capacities of the rings a process laid out (`ferroce_create_qp_req`); with an SRQ it
/// has no receive ring and passes zeros for it.
fn user_caps(
    req: &uapi::ferroce_create_qp_req,
    srq: bool,
    max_wr: u32,
    max_sge: u32,
) -> Result<QpCaps> {
    let stride_ok = |log: u32| (hw::MIN_LOG_WQE_STRIDE..=hw::MAX_LOG_WQE_STRIDE).contains(&log);
    let size_ok = |log: u32| log < 16 && 1u32 << log <= max_wr;
    if !stride_ok(req.sq_log_stride) || !size_ok(req.sq_log_size) {
        return Err(EINVAL);
    }
    let sq_room = (1usize << req.sq_log_stride) - hw::WQE_HEADER_SIZE;
    let (max_recv_wr, max_recv_sge) = if srq {
        if req.rq_offset != 0 || req.rq_log_size != 0 || req.rq_log_stride != 0 {
            return Err(EINVAL);
        }
        (0, 0)
    } else {
        if !stride_ok(req.rq_log_stride) || !size_ok(req.rq_log_size) {
            return Err(EINVAL);
        }
        let rq_room = (1usize << req.rq_log_stride) - hw::RecvWqeHeader::SIZE;
        (
            1 << req.rq_log_size,
            u32::try_from(rq_room / hw::Sge::SIZE)?
                .min(max_sge)
                .min(MAX_RECV_SGE),
        )
    };
    Ok(QpCaps {
        max_send_wr: 1 << req.sq_log_size,
        max_recv_wr,
        max_send_sge: u32::try_from(sq_room / hw::Sge::SIZE)?.min(max_sge),
        max_recv_sge,
        max_inline_data: u32::try_from(sq_room)?.min(hw::MAX_INLINE),
    })
}

/// Writes the receive WQE of `wr` into slot `index` of `ring` (an RQ or an SRQ).
pub(crate) fn write_recv_wqe(ring: &DmaRing, index: u16, wr: &RecvWr<'_>, max_sge: u32) -> Result {
    let sges = wr.sges()?;
    if sges.len() > max_sge as usize {
        return Err(EINVAL);
    }
    let mut wqe = [0u8; hw::RecvWqeHeader::SIZE + MAX_RECV_SGE as usize * hw::Sge::SIZE];
    hw::RecvWqeHeader {
        wr_id: wr.wr_id(),
        num_sge: u8::try_from(sges.len())?,
        rsvd: [0; 7],
    }
    .write_to(&mut wqe);
    for (i, sge) in sges.iter().enumerate() {
        hw::Sge {
            addr: sge.addr(),
            length: sge.length(),
            lkey: sge.lkey(),
        }
        .write_to(&mut wqe[hw::RecvWqeHeader::SIZE + i * hw::Sge::SIZE..]);
    }
    ring.write(
        index,
        &wqe[..hw::RecvWqeHeader::SIZE + sges.len() * hw::Sge::SIZE],
    )
}

/// What kind of QP a create call asks for, checked against what the device has.
struct QpKind {
    qp_type: u8,
    srqn: Option<u32>,
    send_cqn: u32,
    recv_cqn: u32,
}

impl QpKind {
    /// The kind of `init`: RC or UD, or GSI if `kernel` (ib_core's MAD agent; processes cannot
    /// create one), no create flags, an SRQ only for RC (the device's rule).
    fn of(init: &QpInit<'_, RoceDevice>, kernel: bool) -> Result<Self> {
        let qp_type = match init.qp_type() {
            QpType::Rc => hw::QPT_RC,
            QpType::Ud => hw::QPT_UD,
            QpType::Gsi if kernel => hw::QPT_GSI,
            _ => return Err(EOPNOTSUPP),
        };
        if init.create_flags() != 0 {
            return Err(EOPNOTSUPP);
        }
        let srqn = init.srq().map(|srq| srq.number());
        if srqn.is_some() && qp_type != hw::QPT_RC {
            return Err(EINVAL);
        }
        Ok(Self {
            qp_type,
            srqn,
            send_cqn: init.send_cq().ok_or(EINVAL)?.number(),
            recv_cqn: init.recv_cq().ok_or(EINVAL)?.number(),
        })
    }
}

impl QpData {
    /// Creates a QP in the device.
    pub(crate) fn create(
        dev: &rdma::Device<RoceDevice>,
        pd: &rdma::Pd<RoceDevice>,
        init: &mut QpInit<'_, RoceDevice>,
    ) -> Result<Self> {
        let QpKind {
            qp_type,
            srqn,
            send_cqn,
            recv_cqn,
        } = QpKind::of(init, true)?;
        let (sq_log, sq_stride, rq_log, rq_stride, caps) =
            geometry(&init.caps(), dev.max_wr(), dev.max_sge())?;
        let sq = DmaRing::new(dev.parent(), sq_log, sq_stride)?;
        let rq = match srqn {
            Some(_) => None,
            None => Some(DmaRing::new(dev.parent(), rq_log, rq_stride)?),
        };
        let dbrec = DbRecord::new(dev.parent())?;
        let completion = dev.cmdq().exec(&hw::CreateQpCmd {
            sq: sq.desc(),
            rq: rq.as_ref().map(DmaRing::desc).unwrap_or_default(),
            dbrec_addr: dbrec.dma_address(),
            pd: pd.number(),
            sq_cqn: send_cqn,
            rq_cqn: recv_cqn,
            srqn: srqn.unwrap_or(hw::NONE),
            qp_type,
            sq_log_size: sq_log as u8,
            sq_log_stride: sq_stride as u8,
            rq_log_size: if rq.is_some() { rq_log as u8 } else { 0 },
            rq_log_stride: if rq.is_some() { rq_stride as u8 } else { 0 },
            flags: if init.signal_all() {
                hw::QP_FLAG_SIGNAL_ALL
            } else {
                0
            },
            rsvd: 0,
        })?;
        let qpn = completion.result0;
        let qp = Self {
            qpn,
            qp_type,
            srqn,
            caps,
            signal_all: init.signal_all(),
            state: Atomic::new(u32::from(hw::QPS_RESET)),
            mem: QpMem::Kernel(KernelQueues {
                sq,
                rq,
                dbrec,
                sq_pi: KBox::pin_init(new_spinlock_irq!(0, "ferroce::qp::sq"), GFP_KERNEL)?,
                rq_pi: KBox::pin_init(new_spinlock_irq!(0, "ferroce::qp::rq"), GFP_KERNEL)?,
                sq_ci: Atomic::new(0),
                rq_ci: Atomic::new(0),
            }),
        };
        // Kernel doorbells name the QP by its number; GSI must be QP 1.
        if u16::try_from(qpn).is_err() || (qp_type == hw::QPT_GSI) != (qpn == hw::GSI_QPN) {
            pr_err!(
                "ferroce: the device returned QPN {} for a QP of type {}\n",
                qpn,
                qp_type
            );
            let _ = qp.destroy(dev, None);
            return Err(EIO);
        }
        init.set_caps(if srqn.is_some() {
            // Receives go to the SRQ; the QP has no receive queue of its own.
            QpCaps {
                max_recv_wr: 0,
                max_recv_sge: 0,
                ..caps
            }
        } else {
            caps
        });
        Ok(qp)
    }

    /// Creates an RC or UD QP whose rings and record are in the calling process's memory
    /// (`ferroce_create_qp_req`), and answers with its numbers (`ferroce_create_qp_resp`).
    pub(crate) fn create_user(
        dev: &rdma::Device<RoceDevice>,
        pd: &rdma::Pd<RoceDevice>,
        init: &mut QpInit<'_, RoceDevice>,
        udata: &mut Udata<'_>,
    ) -> Result<Self> {
        let ctx = udata.ucontext(dev).ok_or(EINVAL)?;
        let QpKind {
            qp_type,
            srqn,
            send_cqn,
            recv_cqn,
        } = QpKind::of(init, false)?;
        let req: uapi::ferroce_create_qp_req = udata.read()?;
        let caps = user_caps(&req, srqn.is_some(), dev.max_wr(), dev.max_sge())?;
        let asked = init.caps();
        if req.reserved != 0
            || asked.max_send_wr > caps.max_send_wr
            || asked.max_send_sge > caps.max_send_sge
            || asked.max_inline_data > caps.max_inline_data
            || (srqn.is_none()
                && (asked.max_recv_wr > caps.max_recv_wr || asked.max_recv_sge > caps.max_recv_sge))
        {
            return Err(EINVAL);
        }
        let mut mem = UserQueueMem::pin(dev, req.buf_addr, req.buf_size)?;
        let sq = mem.ring(dev, 0, req.sq_log_size, req.sq_log_stride)?;
        let rq = match srqn {
            Some(_) => hw::BufDesc::default(),
            None => mem.ring(dev, req.rq_offset, req.rq_log_size, req.rq_log_stride)?,
        };
        let dbrec_addr = mem.record(req.dbrec_offset)?;
        let completion = dev.cmdq().exec(&hw::CreateQpCmd {
            sq,
            rq,
            dbrec_addr,
            pd: pd.number(),
            sq_cqn: send_cqn,
            rq_cqn: recv_cqn,
            srqn: srqn.unwrap_or(hw::NONE),
            qp_type,
            sq_log_size: req.sq_log_size as u8,
            sq_log_stride: req.sq_log_stride as u8,
            rq_log_size: req.rq_log_size as u8,
            rq_log_stride: req.rq_log_stride as u8,
            flags: if init.signal_all() {
                hw::QP_FLAG_SIGNAL_ALL
            } else {
                0
            },
            rsvd: 0,
        })?;
        let qpn = completion.result0;
        let qid = match ctx.map_qid(dev, hw::QID_KIND_QP, qpn) {
            Ok(qid) => qid,
            Err(e) => {
                let _ = dev.cmdq().exec(&hw::DestroyQpCmd { qpn, rsvd: 0 });
                return Err(e);
            }
        };
        let db_qid = qid.local().into();
        let qp = Self {
            qpn,
            qp_type,
            srqn,
            caps,
            signal_all: init.signal_all(),
            state: Atomic::new(u32::from(hw::QPS_RESET)),
            mem: QpMem::User { _mem: mem, qid },
        };
        if let Err(e) = udata.write(&uapi::ferroce_create_qp_resp { qpn, db_qid }) {
            let _ = qp.destroy(dev, Some(udata));
            return Err(e);
        }
        init.set_caps(caps);
        Ok(qp)
    }

    /// Destroys the QP in the device; a user QP's local QID goes back to its context.
    pub(crate) fn destroy(
        &self,
        dev: &rdma::Device<RoceDevice>,
        udata: Option<&mut Udata<'_>>,
    ) -> Result {
        dev.cmdq().exec_destroy(&hw::DestroyQpCmd {
            qpn: self.qpn,
            rsvd: 0,
        })?;
        if let QpMem::User { qid, .. } = &self.mem {
            ucontext::release_qid_of(dev, udata, qid);
        }
        Ok(())
    }

    /// Changes state and attributes (`CMD_MODIFY_QP`).
    pub(crate) fn modify(
        &self,
        dev: &rdma::Device<RoceDevice>,
        qp_type: QpType,
        attr: &rdma::QpAttr<'_>,
    ) -> Result {
        let mask = attr.mask();
        if mask & !hw::QP_ATTR_VALID_MASK != 0 {
            return Err(EOPNOTSUPP);
        }
        let cur = QpState::from_raw(self.state.load(Relaxed)).ok_or(EINVAL)?;
        let cur = attr.cur_state().unwrap_or(cur);
        let new = if mask & hw::QP_ATTR_STATE != 0 {
            attr.state().ok_or(EINVAL)?
        } else {
            cur
        };
        if !cur.transition_ok(new, qp_type, mask) {
            return Err(EINVAL);
        }
        let mut cmd = hw::ModifyQpCmd {
            qpn: self.qpn,
            attr_mask: mask,
            new_state: new as u8,
            cur_state: cur as u8,
            path_mtu: attr.path_mtu() as u8,
            dest_qpn: attr.dest_qp_num(),
            rq_psn: attr.rq_psn() & hw::PSN_MASK,
            sq_psn: attr.sq_psn() & hw::PSN_MASK,
            qkey: attr.qkey(),
            access_flags: attr.access_flags() & hw::ACCESS_VALID_MASK,
            timeout: attr.timeout(),
            retry_cnt: attr.retry_cnt(),
            rnr_retry: attr.rnr_retry(),
            min_rnr_timer: attr.min_rnr_timer(),
            max_rd_atomic: attr.max_rd_atomic().min(hw::MAX_RD_ATOMIC),
            max_dest_rd_atomic: attr.max_dest_rd_atomic().min(hw::MAX_RD_ATOMIC),
            pkey_index: attr.pkey_index(),
            vlan: hw::VLAN_NONE,
            ..Default::default()
        };
        if mask & hw::QP_ATTR_AV != 0 {
            let av = attr.av();
            if !av.is_roce() || !av.has_grh() {
                return Err(EINVAL);
            }
            cmd.sgid_index = av.sgid_index();
            cmd.dgid = av.dgid();
            cmd.dmac = av.dmac();
            cmd.hop_limit = av.hop_limit();
            cmd.traffic_class = av.traffic_class();
            cmd.flow_label = av.flow_label() & hw::FLOW_LABEL_MASK;
            if let Some((vlan, _)) = av.sgid_attr().and_then(|a| a.l2_fields().ok()) {
                if vlan < 4096 {
                    cmd.vlan = vlan;
                }
            }
        }
        let completion = dev.cmdq().exec(&cmd)?;
        let state = u8::try_from(completion.result0).map_err(|_| EIO)?;
        if state > hw::QPS_ERR {
            return Err(EIO);
        }
        self.state.store(u32::from(state), Relaxed);
        if state == hw::QPS_RESET {
            // The device emptied the queues.
            if let QpMem::Kernel(kq) = &self.mem {
                *kq.sq_pi.lock() = 0;
                *kq.rq_pi.lock() = 0;
                kq.sq_ci.store(0, Relaxed);
                kq.rq_ci.store(0, Relaxed);
                kq.dbrec.write(0, 0)?;
                kq.dbrec.write(4, 0)?;
            }
        }
        Ok(())
    }

    /// Reports the QP as the device has it (`CMD_QUERY_QP` writes its attribute image).
    pub(crate) fn query(&self, dev: &rdma::Device<RoceDevice>, out: &mut QpAttrOut<'_>) -> Result {
        let buf = OutBuf::new(dev.parent(), hw::ModifyQpCmd::SIZE)?;
        let completion = dev
            .cmdq()
            .exec_with_output(&hw::QueryQpCmd { qpn: self.qpn }, buf.dma_address())?;
        let mut image = [0u8; hw::ModifyQpCmd::SIZE];
        buf.read(&mut image)?;
        let attr = hw::ModifyQpCmd::decode(&image);
        let state = QpState::from_raw(completion.result0).ok_or(EIO)?;
        out.state(state)
            .path_mtu(attr.path_mtu.into())
            .qkey(attr.qkey)
            .rq_psn(attr.rq_psn)
            .sq_psn(attr.sq_psn)
            .dest_qp_num(attr.dest_qpn)
            .access_flags(attr.access_flags)
            .pkey_index(attr.pkey_index)
            .timeout(attr.timeout)
            .retry_cnt(attr.retry_cnt)
            .rnr_retry(attr.rnr_retry)
            .min_rnr_timer(attr.min_rnr_timer)
            .max_rd_atomic(attr.max_rd_atomic)
            .max_dest_rd_atomic(attr.max_dest_rd_atomic)
            .port(crate::commands::PORT)
            .caps(self.caps)
            .signal_all(self.signal_all);
        Ok(())
    }

    /// Notes a CQE of this QP: the device is done with the WQEs up to its index. An index
    /// outside the posted, not yet completed WQEs (a buggy device) is ignored rather than
    /// handing the device slots it still owns. A receive completion of a QP with an SRQ
    /// returns the SRQ's number: its WQE came from there.
    pub(crate) fn completed(&self, cqe: &hw::Cqe) -> Option<u32> {
        let next = cqe.wqe_index.wrapping_add(1);
        let QpMem::Kernel(kq) = &self.mem else {
            return None;
        };
        let (ring, pi, ci) = if cqe.opcode & hw::CQE_OP_RECV != 0 {
            match &kq.rq {
                Some(rq) => (rq.ring(), *kq.rq_pi.lock(), &kq.rq_ci),
                None => return self.srqn,
            }
        } else {
            (kq.sq.ring(), *kq.sq_pi.lock(), &kq.sq_ci)
        };
        if completion_advances(ring, pi, ci.load(Relaxed) as u16, next) {
            ci.store(u32::from(next), Relaxed);
        }
        None
    }

    /// Builds the WQE of `wr` into `wqe`; returns its length.
    fn build_send_wqe(
        &self,
        dev: &rdma::Device<RoceDevice>,
        wr: &SendWr<'_, RoceDevice>,
        wqe: &mut [u8],
    ) -> Result<usize> {
        let mut ctrl = hw::WqeCtrl {
            wr_id: wr.wr_id(),
            ..Default::default()
        };
        let mut seg = [0u8; hw::RdmaSeg::SIZE];
        let wire_imm = |imm: u32| u32::from_le_bytes(imm.to_ne_bytes());
        match wr.op()? {
            SendOp::Send { imm } => {
                ctrl.opcode = if imm.is_some() {
                    hw::WR_SEND_WITH_IMM
                } else {
                    hw::WR_SEND
                };
                ctrl.imm_or_inv = imm.map_or(0, wire_imm);
            }
            SendOp::SendWithInv { rkey } => {
                ctrl.opcode = hw::WR_SEND_WITH_INV;
                ctrl.imm_or_inv = rkey;
            }
            SendOp::UdSend { dest, imm } => {
                ctrl.opcode = if imm.is_some() {
                    hw::WR_SEND_WITH_IMM
                } else {
                    hw::WR_SEND
                };
                ctrl.imm_or_inv = imm.map_or(0, wire_imm);
                ctrl.flags |= hw::WQE_FLAG_AV;
                dest.ah
                    .segment(dest.remote_qpn, dest.remote_qkey)
                    .write_to(&mut seg);
            }
            SendOp::RdmaWrite { remote, imm } => {
                ctrl.opcode = if imm.is_some() {
                    hw::WR_RDMA_WRITE_WITH_IMM
                } else {
                    hw::WR_RDMA_WRITE
                };
                ctrl.imm_or_inv = imm.map_or(0, wire_imm);
                hw::RdmaSeg {
                    remote_addr: remote.addr,
                    rkey: remote.rkey,
                    ..Default::default()
                }
                .write_to(&mut seg);
            }
            SendOp::RdmaRead { remote } => {
                ctrl.opcode = hw::WR_RDMA_READ;
                hw::RdmaSeg {
                    remote_addr: remote.addr,
                    rkey: remote.rkey,
                    ..Default::default()
                }
                .write_to(&mut seg);
            }
            SendOp::CompareSwap {
                remote,
                compare,
                swap,
            } => {
                ctrl.opcode = hw::WR_ATOMIC_CMP_SWAP;
                hw::AtomicSeg {
                    remote_addr: remote.addr,
                    rkey: remote.rkey,
                    compare_add: compare,
                    swap,
                    ..Default::default()
                }
                .write_to(&mut seg);
            }
            SendOp::FetchAdd { remote, add } => {
                ctrl.opcode = hw::WR_ATOMIC_FETCH_ADD;
                hw::AtomicSeg {
                    remote_addr: remote.addr,
                    rkey: remote.rkey,
                    compare_add: add,
                    ..Default::default()
                }
                .write_to(&mut seg);
            }
            SendOp::RegMr { mr, key, access } => {
                ctrl.opcode = hw::WR_REG_MR;
                crate::mr::MrData::reg_segment(mr, key, access)?.write_to(&mut seg);
            }
            SendOp::LocalInv { rkey } => {
                ctrl.opcode = hw::WR_LOCAL_INV;
                ctrl.imm_or_inv = rkey;
            }
        }
        if !hw::send_opcode_allowed(self.qp_type, ctrl.opcode) {
            return Err(EINVAL);
        }
        if wr.signaled() {
            ctrl.flags |= hw::WQE_FLAG_SIGNALED;
        }
        if wr.solicited() {
            ctrl.flags |= hw::WQE_FLAG_SOLICITED;
        }
        if wr.fence() {
            ctrl.flags |= hw::WQE_FLAG_FENCE;
        }
        let sges = wr.sges()?;
        let body = &mut wqe[hw::WQE_HEADER_SIZE..];
        let body_len = if wr.inline() && !sges.is_empty() {
            // Inline: the payload goes into the WQE now; the device reads no payload by DMA.
            let mut len = 0usize;
            for i in 0..sges.len() {
                let data = wr.inline_data(i).ok_or(EINVAL)?;
                let end = len.checked_add(data.len()).ok_or(EINVAL)?;
                if end > self.caps.max_inline_data as usize || end > body.len() {
                    return Err(EINVAL);
                }
                body[len..end].copy_from_slice(data);
                len = end;
            }
            ctrl.flags |= hw::WQE_FLAG_INLINE;
            ctrl.inline_len = u16::try_from(len)?;
            len.div_ceil(16) * 16
        } else {
            if sges.len() > self.caps.max_send_sge as usize {
                return Err(EINVAL);
            }
            for (i, sge) in sges.iter().enumerate() {
                let sge = hw::Sge {
                    addr: sge.addr(),
                    length: sge.length(),
                    lkey: sge.lkey(),
                };
                sge.write_to(&mut body[i * hw::Sge::SIZE..]);
            }
            ctrl.num_sge = u8::try_from(sges.len())?;
            sges.len() * hw::Sge::SIZE
        };
        ctrl.write_to(&mut wqe[..hw::WqeCtrl::SIZE]);
        wqe[hw::WQE_SEG_OFFSET..hw::WQE_HEADER_SIZE].copy_from_slice(&seg);
        let len = hw::WQE_HEADER_SIZE + body_len;
        if len > wqe.len() {
            return Err(EINVAL);
        }
        let _ = dev;
        Ok(len)
    }

    /// Posts a chain of send requests with one doorbell.
    pub(crate) fn post_send<'a>(
        &self,
        dev: &rdma::Device<RoceDevice>,
        first: SendWr<'a, RoceDevice>,
    ) -> Result<(), PostError<SendWr<'a, RoceDevice>>> {
        let state = self.state.load(Relaxed);
        if ![hw::QPS_RTS, hw::QPS_SQD, hw::QPS_ERR]
            .map(u32::from)
            .contains(&state)
        {
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
        let mut pi = kq.sq_pi.lock();
        let start = *pi;
        let mut wqe = [0u8; hw::MAX_WQE_SIZE];
        let mut next = Some(first);
        let mut result = Ok(());
        let mut last_len = 0;
        while let Some(wr) = next {
            let ring = kq.sq.ring();
            let posted = (|| {
                if ring.is_full(*pi, kq.sq_ci.load(Relaxed) as u16) {
                    return Err(ENOMEM);
                }
                // One stride is all a WQE may use (`build_send_wqe` checks).
                let slot = wqe.get_mut(..kq.sq.stride()).ok_or(EINVAL)?;
                slot.fill(0);
                let len = self.build_send_wqe(dev, &wr, slot)?;
                kq.sq.write(*pi, &wqe[..len])?;
                Ok(len)
            })();
            match posted {
                Ok(len) => last_len = len,
                Err(error) => {
                    result = Err(PostError { error, bad: wr });
                    break;
                }
            }
            *pi = pi.wrapping_add(1);
            next = wr.next();
        }
        if *pi != start {
            // The record first, then one doorbell for the whole chain; a single small WQE
            // goes through the push window instead.
            let qid = self.qpn as u16;
            let rung = kq.dbrec.write(0, u32::from(*pi)).and_then(|()| {
                if pi.wrapping_sub(start) == 1 && dev.push_wqe(qid, *pi, &wqe[..last_len])? {
                    return Ok(());
                }
                dev.bar()
                    .with(|bar| bar.write_reg(regs::DB_SQ::zeroed().with_qid(qid).with_pi(*pi)))
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
            QpMem::Kernel(kq) if self.state.load(Relaxed) != u32::from(hw::QPS_RESET) => Some(kq),
            _ => None,
        };
        let Some((kq, rq)) = kq.and_then(|kq| Some((kq, kq.rq.as_ref()?))) else {
            // In RESET, or receives go to an SRQ.
            return Err(PostError {
                error: EINVAL,
                bad: first,
            });
        };
        let mut pi = kq.rq_pi.lock();
        let start = *pi;
        let mut next = Some(first);
        let mut result = Ok(());
        while let Some(wr) = next {
            let posted = if rq.ring().is_full(*pi, kq.rq_ci.load(Relaxed) as u16) {
                Err(ENOMEM)
            } else {
                write_recv_wqe(rq, *pi, &wr, self.caps.max_recv_sge)
            };
            if let Err(error) = posted {
                result = Err(PostError { error, bad: wr });
                break;
            }
            *pi = pi.wrapping_add(1);
            next = wr.next();
        }
        if *pi != start {
            let rung = kq.dbrec.write(4, u32::from(*pi)).and_then(|()| {
                dev.bar().with(|bar| {
                    bar.write_reg(regs::DB_RQ::zeroed().with_qid(self.qpn as u16).with_pi(*pi))
                })
            });
            if let Err(error) = rung {
                return Err(PostError { error, bad: first });
            }
        }
        result
    }
}

#[kunit_tests(ferroce_qp)]
mod tests {
    use super::*;

    #[test]
    fn queues_round_up_to_powers_of_two() -> Result {
        let asked = QpCaps {
            max_send_wr: 100,
            max_recv_wr: 1,
            max_send_sge: 2,
            max_recv_sge: 1,
            max_inline_data: 0,
        };
        let (sq_log, sq_stride, rq_log, rq_stride, got) = geometry(&asked, 4096, 16)?;
        assert_eq!((sq_log, rq_log), (7, 0));
        // 64-byte header + 2 SGEs = 96 bytes: a 128-byte stride, which has room for 4 SGEs.
        assert_eq!(sq_stride, 7);
        assert_eq!(got.max_send_sge, 4);
        assert_eq!(got.max_inline_data, 64);
        assert_eq!(rq_stride, hw::MIN_LOG_WQE_STRIDE);
        assert_eq!(got.max_send_wr, 128);
        Ok(())
    }

    #[test]
    fn inline_data_sizes_the_send_stride() -> Result {
        let asked = QpCaps {
            max_send_wr: 1,
            max_recv_wr: 1,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 256,
        };
        let (_, sq_stride, _, _, got) = geometry(&asked, 4096, 16)?;
        assert_eq!(sq_stride, 9);
        assert_eq!(got.max_inline_data, 256);
        Ok(())
    }

    #[test]
    fn too_much_is_refused() {
        let caps = |wr, sge, inline| QpCaps {
            max_send_wr: wr,
            max_recv_wr: 1,
            max_send_sge: sge,
            max_recv_sge: 1,
            max_inline_data: inline,
        };
        assert!(geometry(&caps(4097, 1, 0), 4096, 16).is_err());
        assert!(geometry(&caps(1, 17, 0), 4096, 16).is_err());
        assert!(geometry(&caps(1, 1, 257), 4096, 16).is_err());
    }

    #[test]
    fn completions_only_move_forward_within_the_posted() -> Result {
        let ring = hw::Ring::new(4, hw::MAX_LOG_QUEUE).ok_or(EINVAL)?;
        // Posted 65534..=1 (wrapping), completed up to 65534.
        assert!(completion_advances(ring, 2, 65534, 65535));
        assert!(completion_advances(ring, 2, 65534, 2));
        // Past the producer, or backwards: a buggy device.
        assert!(!completion_advances(ring, 2, 65534, 3));
        assert!(!completion_advances(ring, 2, 65534, 65533));
        Ok(())
    }

    #[test]
    fn send_rings_wrap() -> Result {
        let ring = hw::Ring::new(2, hw::MAX_LOG_QUEUE).ok_or(EINVAL)?;
        // Producer 65535 + 1 wraps to 0; 4 entries posted since consumer 65533 fill the ring.
        assert!(ring.is_full(1, 65533));
        assert!(!ring.is_full(0, 65533));
        assert_eq!(ring.slot(65535), 3);
        assert_eq!(ring.slot(0), 0);
        Ok(())
    }
}
