// SPDX-License-Identifier: GPL-2.0

//! Queue pairs: send and receive rings with a doorbell record, WQEs built from work requests,
//! one doorbell per chain, and the state machine driven by `CMD_MODIFY_QP`.

use kernel::{
    prelude::*,
    rdma::{
        self,
        Numbered, //
        QpAttrOut,
        QpCaps,
        QpInit,
        QpState,
        QpType,
        RecvWr,
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

mod post;

use crate::{
    checks::BadCqe,
    hw,
    queue::{
        DbRecord,
        DmaRing,
        OutBuf,
        UserQueue,
        UserQueueMem, //
        WrTable,
    },
    verbs::RoceDevice,
};

/// The driver's part of a QP.
pub(crate) struct QpData {
    qpn: u32,
    /// The SRQ receives come from, if any.
    srqn: Option<u32>,
    caps: QpCaps,
    /// What the send queue accepts, for the WQE builder.
    sq_limits: hw::SqLimits,
    signal_all: bool,
    /// State as last set by `modify_qp` (a [`hw::QpState`] encoding).
    state: Atomic<u32>,
    /// The CQs of its send and receive completions.
    send_cqn: u32,
    recv_cqn: u32,
    /// The device wrote a CQE for this QP that the driver does not believe; the QP is on its
    /// way to ERR.
    broken: Atomic<bool>,
    mem: QpMem,
}

/// Whose WQE a CQE completes, once [`QpData::claim`] accepted it.
pub(crate) enum Claim {
    /// One of the QP's own, which had room for `len` bytes.
    Own {
        /// The most bytes the WQE can have moved.
        len: u32,
    },
    /// The CQE went past a signaled WQE of the QP's whose own CQE never came: that one, posted
    /// at `index`, is to be completed first (flushed); the CQE is to be read again.
    Lost { index: u16, posted: hw::Posted },
    /// A receive WQE of SRQ `srqn`, which checks it.
    Srq(u32),
}

/// Where a QP's rings are and who posts to them.
enum QpMem {
    /// The driver's rings: kernel consumers post through `post_send`/`post_recv`.
    Kernel(KernelQueues),
    /// A process's rings: it posts WQEs and rings its doorbell page itself.
    User {
        /// Held for its pinned memory and local QID, which go with the queue.
        _queue: UserQueue,
    },
    /// An XRC_TGT QP has no rings: the requests it receives go to the XRC SRQs they name. It
    /// belongs to no process (ib_core shares it between those that open it).
    XrcTarget,
}

/// The rings of a kernel QP.
struct KernelQueues {
    sq: DmaRing,
    /// The receive ring; `None` with an SRQ.
    rq: Option<DmaRing>,
    dbrec: DbRecord,
    /// The send queue's producer side; the lock serialises posters.
    sq_prod: Pin<KBox<SpinLockIrq<Producer>>>,
    /// The receive queue's.
    rq_prod: Pin<KBox<SpinLockIrq<Producer>>>,
    /// How far the device consumed the queues, from completions.
    sq_ci: Atomic<u32>,
    rq_ci: Atomic<u32>,
}

/// The producer side of a kernel work queue: its index and what was posted where.
struct Producer {
    pi: u16,
    wrs: WrTable,
}

impl Producer {
    /// The producer side of `ring` (none: a QP whose receives come from an SRQ).
    fn new(ring: Option<&DmaRing>) -> Result<Self> {
        let wrs = match ring {
            Some(ring) => WrTable::new(ring.ring())?,
            None => WrTable::none()?,
        };
        Ok(Self { pi: 0, wrs })
    }
}

impl Numbered for QpData {
    fn number(&self) -> u32 {
        self.qpn
    }
}

/// The hardware interface's view of what a consumer asks for.
fn wq_caps(caps: &QpCaps) -> hw::WqCaps {
    hw::WqCaps {
        max_send_wr: caps.max_send_wr,
        max_recv_wr: caps.max_recv_wr,
        max_send_sge: caps.max_send_sge,
        max_recv_sge: caps.max_recv_sge,
        max_inline: caps.max_inline_data,
    }
}

/// ib_core's view of what the rings hold.
fn qp_caps(caps: &hw::WqCaps) -> QpCaps {
    QpCaps {
        max_send_wr: caps.max_send_wr,
        max_recv_wr: caps.max_recv_wr,
        max_send_sge: caps.max_send_sge,
        max_recv_sge: caps.max_recv_sge,
        max_inline_data: caps.max_inline,
    }
}

/// The rings of a kernel QP for `caps` (no receive ring with an SRQ), and what they hold.
pub(crate) fn geometry(
    caps: &QpCaps,
    srq: bool,
    limits: &hw::WqLimits,
) -> Result<(hw::WqGeometry, QpCaps)> {
    let geometry = hw::WqGeometry::new(&wq_caps(caps), srq, limits).map_err(|_| EINVAL)?;
    Ok((geometry, qp_caps(&geometry.caps(limits))))
}

/// What the send queue of `rings` accepts, for the WQE builder.
fn sq_limits(qp_type: hw::QpType, rings: &hw::WqGeometry, caps: &QpCaps) -> hw::SqLimits {
    hw::SqLimits {
        qp_type,
        stride: rings.sq.stride(),
        max_sge: caps.max_send_sge,
        max_inline: caps.max_inline_data,
    }
}

/// The rings a process laid out (`ferroce_create_qp_req`), checked as a kernel QP's are; with
/// an SRQ it has no receive ring and passes zeros for it.
fn user_geometry(
    req: &uapi::ferroce_create_qp_req,
    srq: bool,
    limits: &hw::WqLimits,
) -> Result<(hw::WqGeometry, QpCaps)> {
    let ring = |log_size: u32, log_stride: u32| {
        hw::WqRing::new(log_size, log_stride, limits).map_err(|_| EINVAL)
    };
    let rq = if srq {
        if req.rq_offset != 0 || req.rq_log_size != 0 || req.rq_log_stride != 0 {
            return Err(EINVAL);
        }
        None
    } else {
        Some(ring(req.rq_log_size, req.rq_log_stride)?)
    };
    let geometry = hw::WqGeometry {
        sq: ring(req.sq_log_size, req.sq_log_stride)?,
        rq,
    };
    Ok((geometry, qp_caps(&geometry.caps(limits))))
}

/// Writes the receive WQE of `wr` into slot `index` of `ring` (an RQ or an SRQ), built by the
/// interface's builder.
pub(crate) fn write_recv_wqe(
    ring: &DmaRing,
    index: u16,
    wr: &RecvWr<'_>,
    max_sge: u32,
) -> Result<hw::Posted> {
    let sges = wr.sges()?;
    let mut hw_sges = [hw::Sge::default(); hw::MAX_SGE as usize];
    for (out, sge) in hw_sges.iter_mut().zip(sges.iter()) {
        *out = hw::Sge {
            addr: sge.addr(),
            length: sge.length(),
            lkey: sge.lkey(),
        };
    }
    let sges = hw_sges.get(..sges.len()).ok_or(EINVAL)?;
    // The largest receive WQE; a smaller stride bounds it further (the builder checks both).
    let mut wqe = [0u8; hw::RecvWqeHeader::SIZE + hw::MAX_SGE as usize * hw::Sge::SIZE];
    let stride = ring.stride().min(wqe.len());
    let slot = wqe.get_mut(..stride).ok_or(EINVAL)?;
    let len = hw::build_recv_wqe(wr.wr_id(), sges, max_sge, slot).map_err(|_| EINVAL)?;
    ring.write(index, &wqe[..len])?;
    Ok(hw::Posted::recv(wr.wr_id(), sges))
}

/// Whether a QPN the device returned can be right: GSI is QP 1, every other QP is numbered
/// from `FIRST_QPN` within 24 bits.
fn qpn_plausible(qp_type: hw::QpType, qpn: u32) -> bool {
    match qp_type {
        hw::QpType::Gsi => qpn == hw::GSI_QPN,
        hw::QpType::Rc
        | hw::QpType::Uc
        | hw::QpType::Ud
        | hw::QpType::XrcIni
        | hw::QpType::XrcTgt => (hw::FIRST_QPN..=hw::QPN_MASK).contains(&qpn),
    }
}

/// Moves kernel QP `qpn`, which the driver found broken (a CQE it refused), to ERR in the
/// device, which flushes its WQEs, and reports `IB_EVENT_QP_FATAL` to its consumer. Runs in
/// process context ([`crate::ib_events::IbEvents`]); QP destruction waits for it, so `qpn`
/// cannot name a newer QP meanwhile.
pub(crate) fn move_broken_to_err(dev: &rdma::Device<RoceDevice>, qpn: u32) {
    let _repair = dev.qp_repair().lock();
    if dev.qps().with(qpn, |qp| qp.is_broken()) != Some(true) {
        return;
    }
    let moved = dev.cmdq().exec(&hw::ModifyQpCmd {
        qpn,
        attr_mask: hw::QP_ATTR_STATE,
        new_state: hw::QpState::Err.into(),
        ..Default::default()
    });
    if let Err(e) = moved {
        pr_warn!("ferroce: QP {}: moving it to ERR failed: {:?}\n", qpn, e);
    }
    dev.qps().with(qpn, |qp| {
        qp.set_error();
        qp.dispatch_event(rdma::QpEvent::Fatal);
    });
}

/// What kind of QP a create call asks for, checked against what the device has.
struct QpKind {
    qp_type: hw::QpType,
    /// A process's QP: its UD sends name AHs by handle only.
    user: bool,
    srqn: Option<u32>,
    send_cqn: u32,
    /// `hw::NONE` for an XRC_INI QP, which receives nothing.
    recv_cqn: u32,
}

impl QpKind {
    /// The kind of `init`: RC, UC (if the device has `CAP_UC`) or UD, an XRC initiator if a
    /// process asks (and the device has `CAP_XRC`: kernel ULPs have no XRC), or GSI if `kernel`
    /// (ib_core's MAD agent; processes cannot create one), no create flags, an SRQ only for an
    /// RC or UC QP (the device's rule), a receive CQ for all but XRC_INI.
    fn of(init: &QpInit<'_, RoceDevice>, kernel: bool, caps: u32) -> Result<Self> {
        let qp_type = match init.qp_type() {
            QpType::Rc => hw::QpType::Rc,
            QpType::Uc if caps & hw::CAP_UC != 0 => hw::QpType::Uc,
            QpType::Ud => hw::QpType::Ud,
            QpType::Gsi if kernel => hw::QpType::Gsi,
            QpType::XrcIni if !kernel && caps & hw::CAP_XRC != 0 => hw::QpType::XrcIni,
            _ => return Err(EOPNOTSUPP),
        };
        if init.create_flags() != 0 {
            return Err(EOPNOTSUPP);
        }
        let srqn = init.srq().map(|srq| srq.number());
        if srqn.is_some() && !qp_type.may_use_srq() {
            return Err(EINVAL);
        }
        Ok(Self {
            qp_type,
            user: !kernel,
            srqn,
            send_cqn: init.send_cq().ok_or(EINVAL)?.number(),
            recv_cqn: if qp_type.has_rq() {
                init.recv_cq().ok_or(EINVAL)?.number()
            } else {
                hw::NONE
            },
        })
    }

    /// Whether the QP has a receive ring of its own (not with an SRQ, nor on XRC_INI).
    fn has_rq_ring(&self) -> bool {
        self.srqn.is_none() && self.qp_type.has_rq()
    }

    /// The `CMD_CREATE_QP` of a QP of this kind in `pd` with `rings`, named to the device by
    /// `descs` (send, receive; the receive one unused with an SRQ) and the record at `dbrec`.
    fn create_cmd(
        &self,
        pd: &rdma::Pd<RoceDevice>,
        rings: &hw::WqGeometry,
        descs: [hw::BufDesc; 2],
        dbrec: u64,
        signal_all: bool,
        db_record: bool,
    ) -> Result<hw::CreateQpCmd> {
        let [sq, rq] = descs;
        Ok(hw::CreateQpCmd {
            sq,
            rq,
            dbrec_addr: dbrec,
            pd: pd.number(),
            sq_cqn: self.send_cqn,
            rq_cqn: self.recv_cqn,
            srqn: self.srqn.unwrap_or(hw::NONE),
            qp_type: self.qp_type.into(),
            sq_log_size: u8::try_from(rings.sq.log_size)?,
            sq_log_stride: u8::try_from(rings.sq.log_stride)?,
            rq_log_size: u8::try_from(rings.rq.map_or(0, |rq| rq.log_size))?,
            rq_log_stride: u8::try_from(rings.rq.map_or(0, |rq| rq.log_stride))?,
            flags: if signal_all {
                hw::QP_FLAG_SIGNAL_ALL
            } else {
                0
            } | if self.user && self.qp_type == hw::QpType::Ud {
                hw::QP_FLAG_AH_HANDLES
            } else {
                0
            } | if db_record { hw::QP_FLAG_DB_RECORD } else { 0 },
            rsvd: 0,
            xrcd: 0,
            rsvd2: 0,
        })
    }
}

impl QpData {
    /// The state as last set by `modify_qp`.
    fn state(&self) -> Option<hw::QpState> {
        u8::try_from(self.state.load(Relaxed))
            .ok()
            .and_then(hw::QpState::from_raw)
    }

    fn set_state(&self, state: hw::QpState) {
        self.state.store(u8::from(state).into(), Relaxed);
    }

    /// Creates a QP in the device.
    pub(crate) fn create(
        dev: &rdma::Device<RoceDevice>,
        pd: &rdma::Pd<RoceDevice>,
        init: &mut QpInit<'_, RoceDevice>,
    ) -> Result<Self> {
        let kind = QpKind::of(init, true, dev.caps_flags())?;
        let (qp_type, srqn) = (kind.qp_type, kind.srqn);
        let (rings, caps) = geometry(&init.caps(), srqn.is_some(), &dev.wq_limits())?;
        let sq = DmaRing::new(dev.parent(), rings.sq.log_size, rings.sq.log_stride)?;
        let rq = match rings.rq {
            Some(rq) => Some(DmaRing::new(dev.parent(), rq.log_size, rq.log_stride)?),
            None => None,
        };
        let dbrec = DbRecord::new(dev.parent())?;
        let sq_prod = Producer::new(Some(&sq))?;
        let sq_prod = KBox::pin_init(new_spinlock_irq!(sq_prod, "ferroce::qp::sq"), GFP_KERNEL)?;
        let rq_prod = Producer::new(rq.as_ref())?;
        let rq_prod = KBox::pin_init(new_spinlock_irq!(rq_prod, "ferroce::qp::rq"), GFP_KERNEL)?;
        let completion = dev.cmdq().exec(&kind.create_cmd(
            pd,
            &rings,
            [
                sq.desc(),
                rq.as_ref().map(DmaRing::desc).unwrap_or_default(),
            ],
            dbrec.dma_address(),
            init.signal_all(),
            // Kernel ULPs ring (`DB_SQ`); a polling device would spend CPU on them for nothing.
            false,
        )?)?;
        let qpn = completion.qpn;
        let (sq, rq, dbrec) = dev
            .checks()
            .new_number(dev.qps(), "QP", qpn, (sq, rq, dbrec))?;
        let qp = Self {
            qpn,
            srqn,
            caps,
            sq_limits: sq_limits(qp_type, &rings, &caps),
            signal_all: init.signal_all(),
            state: Atomic::new(u8::from(hw::QpState::Reset).into()),
            send_cqn: kind.send_cqn,
            recv_cqn: kind.recv_cqn,
            broken: Atomic::new(false),
            mem: QpMem::Kernel(KernelQueues {
                sq,
                rq,
                dbrec,
                sq_prod,
                rq_prod,
                sq_ci: Atomic::new(0),
                rq_ci: Atomic::new(0),
            }),
        };
        // Kernel doorbells name the QP by its number.
        if u16::try_from(qpn).is_err() || !qpn_plausible(qp_type, qpn) {
            pr_err!(
                "ferroce: the device returned QPN {} for a QP of type {}\n",
                qpn,
                u8::from(qp_type)
            );
            let _ = qp.destroy(dev);
            return Err(EIO);
        }
        // With an SRQ the QP has no receive queue of its own: `caps` says so.
        init.set_caps(caps);
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
        let kind = QpKind::of(init, false, dev.caps_flags())?;
        let (qp_type, srqn) = (kind.qp_type, kind.srqn);
        let req: uapi::ferroce_create_qp_req = udata.read()?;
        let (rings, caps) = user_geometry(&req, !kind.has_rq_ring(), &dev.wq_limits())?;
        let asked = init.caps();
        // The device polls the record only if it says it can (`FERROCE_UCONTEXT_DB_RECORD`).
        let db_record = req.flags == uapi::ferroce_create_qp_flags_FERROCE_CREATE_QP_DB_RECORD;
        if (req.flags != 0 && !db_record)
            || (db_record && dev.caps_flags() & hw::CAP_DB_RECORD == 0)
            || asked.max_send_wr > caps.max_send_wr
            || asked.max_send_sge > caps.max_send_sge
            || asked.max_inline_data > caps.max_inline_data
            || (kind.has_rq_ring()
                && (asked.max_recv_wr > caps.max_recv_wr || asked.max_recv_sge > caps.max_recv_sge))
        {
            return Err(EINVAL);
        }
        let mut mem = UserQueueMem::pin(dev, req.buf_addr, req.buf_size)?;
        let sq = mem.ring(dev, 0, req.sq_log_size, req.sq_log_stride)?;
        let rq = if kind.has_rq_ring() {
            mem.ring(dev, req.rq_offset, req.rq_log_size, req.rq_log_stride)?
        } else {
            hw::BufDesc::default()
        };
        let dbrec_addr = mem.record(req.dbrec_offset)?;
        let completion = dev.cmdq().exec(&kind.create_cmd(
            pd,
            &rings,
            [sq, rq],
            dbrec_addr,
            init.signal_all(),
            db_record,
        )?)?;
        let qpn = completion.qpn;
        let mem = dev.checks().new_number(dev.qps(), "QP", qpn, mem)?;
        if !qpn_plausible(qp_type, qpn) {
            pr_err!(
                "ferroce: the device returned QPN {} for a QP of type {}\n",
                qpn,
                u8::from(qp_type)
            );
            let _ = dev.cmdq().exec(&hw::DestroyQpCmd { qpn, rsvd: 0 });
            return Err(EIO);
        }
        let queue = UserQueue::map(dev, ctx, hw::QID_KIND_QP, qpn, mem, || {
            let _ = dev.cmdq().exec(&hw::DestroyQpCmd { qpn, rsvd: 0 });
        })?;
        let db_qid = queue.qid().into();
        let qp = Self {
            qpn,
            srqn,
            caps,
            sq_limits: sq_limits(qp_type, &rings, &caps),
            signal_all: init.signal_all(),
            state: Atomic::new(u8::from(hw::QpState::Reset).into()),
            send_cqn: kind.send_cqn,
            recv_cqn: kind.recv_cqn,
            broken: Atomic::new(false),
            mem: QpMem::User { _queue: queue },
        };
        if let Err(e) = udata.write(&uapi::ferroce_create_qp_resp { qpn, db_qid }) {
            let _ = qp.destroy(dev);
            return Err(e);
        }
        init.set_caps(caps);
        Ok(qp)
    }

    /// Creates an XRC_TGT QP of XRC domain `xrcd` in the device: nothing but its number (it has
    /// no rings, PD or CQs, and no process owns it).
    pub(crate) fn create_xrc_tgt(
        dev: &rdma::Device<RoceDevice>,
        xrcd: &rdma::Xrcd<RoceDevice>,
        init: &mut QpInit<'_, RoceDevice>,
    ) -> Result<Self> {
        if dev.caps_flags() & hw::CAP_XRC == 0 {
            return Err(EOPNOTSUPP);
        }
        let qp_type = hw::QpType::XrcTgt;
        let qpn = dev
            .cmdq()
            .exec(&hw::CreateQpCmd {
                sq_cqn: hw::NONE,
                rq_cqn: hw::NONE,
                srqn: hw::NONE,
                qp_type: qp_type.into(),
                xrcd: xrcd.number(),
                ..Default::default()
            })?
            .qpn;
        dev.checks().new_number(dev.qps(), "QP", qpn, ())?;
        if !qpn_plausible(qp_type, qpn) {
            pr_err!(
                "ferroce: the device returned QPN {} for an XRC_TGT QP\n",
                qpn
            );
            let _ = dev.cmdq().exec(&hw::DestroyQpCmd { qpn, rsvd: 0 });
            return Err(EIO);
        }
        let caps = QpCaps::default();
        init.set_caps(caps);
        Ok(Self {
            qpn,
            srqn: None,
            caps,
            sq_limits: hw::SqLimits {
                qp_type,
                stride: 0,
                max_sge: 0,
                max_inline: 0,
            },
            signal_all: false,
            state: Atomic::new(u8::from(hw::QpState::Reset).into()),
            send_cqn: hw::NONE,
            recv_cqn: hw::NONE,
            broken: Atomic::new(false),
            mem: QpMem::XrcTarget,
        })
    }

    /// Destroys the QP in the device; its memory (and a user QP's local QID) goes with the
    /// data.
    pub(crate) fn destroy(&self, dev: &rdma::Device<RoceDevice>) -> Result {
        dev.cmdq().exec_destroy(&hw::DestroyQpCmd {
            qpn: self.qpn,
            rsvd: 0,
        })
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
            access_flags: crate::mr::hw_access(attr.access_flags()),
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
        let state = dev.cmdq().exec(&cmd)?.state;
        self.set_state(state);
        if state == hw::QpState::Reset {
            // The device emptied the queues: what the QP did before is forgotten.
            self.broken.store(false, Relaxed);
            if let QpMem::Kernel(kq) = &self.mem {
                kq.sq_prod.lock().pi = 0;
                kq.rq_prod.lock().pi = 0;
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
        let state = QpState::from_raw(u8::from(completion.state).into()).ok_or(EIO)?;
        out.state(state)
            .path_mtu(attr.path_mtu.into())
            .qkey(attr.qkey)
            .rq_psn(attr.rq_psn)
            .sq_psn(attr.sq_psn)
            .dest_qp_num(attr.dest_qpn)
            .access_flags(crate::mr::ib_access(attr.access_flags))
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

    /// Attaches the QP (UD: ib_core checked) to multicast group `mgid`, or with `attach` false
    /// detaches it: `-EINVAL` for a group it is not attached to (as rxe), `-ENOMEM` when the
    /// device's group tables are full; neither is logged (the consumer's doing).
    pub(crate) fn mcast(
        &self,
        dev: &rdma::Device<RoceDevice>,
        mgid: &[u8; 16],
        attach: bool,
    ) -> Result {
        if dev.caps_flags() & hw::CAP_MCAST == 0 {
            return Err(EOPNOTSUPP);
        }
        let (qpn, mgid) = (self.qpn, *mgid);
        const ANSWERS: [u8; 3] = [
            hw::STATUS_BAD_PARAM,
            hw::STATUS_BAD_RESOURCE,
            hw::STATUS_NO_RESOURCES,
        ];
        let done = if attach {
            dev.cmdq()
                .exec_or_refuse(&hw::AttachMcastCmd { qpn, rsvd: 0, mgid }, &ANSWERS)
        } else {
            dev.cmdq()
                .exec_or_refuse(&hw::DetachMcastCmd { qpn, rsvd: 0, mgid }, &ANSWERS)
        };
        done.map_err(|e| if e == ENOENT { EINVAL } else { e })
    }

    /// Claims a CQE the device wrote to CQ `cqn` for this QP. It must complete a WQE that was
    /// posted and is not completed yet, in the queue of this QP that completes on `cqn`, and
    /// agree with what was posted there; the device is then done with the WQEs up to its
    /// index. A signaled WQE it went past never got its CQE: that one comes back first, as
    /// lost, and the queue's consumer index moves past it only. Nothing in the queues changes
    /// for a CQE that is refused. A receive of a QP with an SRQ is the SRQ's to check.
    pub(crate) fn claim(&self, cqn: u32, cqe: &hw::Cqe) -> Result<Claim, BadCqe> {
        let QpMem::Kernel(kq) = &self.mem else {
            return Err(BadCqe::ForeignQp);
        };
        let recv = cqe.opcode & hw::CQE_OP_RECV != 0;
        if cqn != if recv { self.recv_cqn } else { self.send_cqn } {
            return Err(BadCqe::ForeignQp);
        }
        let (ring, prod, ci) = if recv {
            match &kq.rq {
                Some(rq) => (rq.ring(), &kq.rq_prod, &kq.rq_ci),
                None => return self.srqn.map(Claim::Srq).ok_or(BadCqe::ForeignQp),
            }
        } else {
            (kq.sq.ring(), &kq.sq_prod, &kq.sq_ci)
        };
        let prod = prod.lock();
        let first = ci.load(Relaxed) as u16;
        if !ring.outstanding(prod.pi, first, cqe.wqe_index) {
            return Err(BadCqe::WqeIndex);
        }
        let posted = prod.wrs.get(cqe.wqe_index).ok_or(BadCqe::WqeIndex)?;
        posted.check(cqe).map_err(BadCqe::Mismatch)?;
        if let Some((index, posted)) = prod.wrs.first_lost(first, cqe.wqe_index) {
            ci.store(u32::from(index.wrapping_add(1)), Relaxed);
            return Ok(Claim::Lost { index, posted });
        }
        ci.store(u32::from(cqe.wqe_index.wrapping_add(1)), Relaxed);
        Ok(Claim::Own { len: posted.len })
    }

    /// Marks the QP broken (the device wrote a CQE for it that the driver refused); returns
    /// whether it was not broken before, and so needs moving to ERR.
    ///
    /// The GSI QP never breaks: ib_mad cannot bring it back from ERR (its flushed receives
    /// are not posted again), and the port's connection manager would be gone with it. Its
    /// WR whose CQE the driver refused completes as flushed when a later CQE goes past it,
    /// which ib_mad handles (a send is retried or failed, a receive is one fewer), and the
    /// QP runs on.
    pub(crate) fn set_broken(&self) -> bool {
        self.qpn != hw::GSI_QPN && !self.broken.xchg(true, Relaxed)
    }

    /// Whether the QP is broken and to be moved to ERR.
    pub(crate) fn is_broken(&self) -> bool {
        self.broken.load(Relaxed)
    }

    /// Notes that the device moved the QP to ERR.
    pub(crate) fn set_error(&self) {
        self.set_state(hw::QpState::Err);
    }

    /// Whether a process owns the QP (its completions never reach the kernel's CQs); an
    /// XRC_TGT QP, which only processes create, counts as one.
    pub(crate) fn is_user(&self) -> bool {
        matches!(self.mem, QpMem::User { .. } | QpMem::XrcTarget)
    }

    /// The SRQ its receives come from, if any.
    pub(crate) fn srqn(&self) -> Option<u32> {
        self.srqn
    }

    /// The CQs the QP completes on (send, receive).
    pub(crate) fn cqns(&self) -> (u32, u32) {
        (self.send_cqn, self.recv_cqn)
    }
}

#[kunit_tests(ferroce_qp)]
mod tests {
    use super::*;

    const LIMITS: hw::WqLimits = hw::WqLimits::new(4096, 16, 256);

    fn caps(wr: u32, send_sge: u32, recv_sge: u32, inline: u32) -> QpCaps {
        QpCaps {
            max_send_wr: wr,
            max_recv_wr: 1,
            max_send_sge: send_sge,
            max_recv_sge: recv_sge,
            max_inline_data: inline,
        }
    }

    #[test]
    fn queues_round_up_to_powers_of_two() -> Result {
        let (rings, got) = geometry(&caps(100, 2, 1, 0), false, &LIMITS)?;
        let rq = rings.rq.ok_or(EINVAL)?;
        assert_eq!((rings.sq.log_size, rq.log_size), (7, 0));
        // 64-byte header + 2 SGEs = 96 bytes: a 128-byte stride, which has room for 4 SGEs.
        assert_eq!(rings.sq.log_stride, 7);
        assert_eq!(got.max_send_sge, 4);
        assert_eq!(got.max_inline_data, 64);
        assert_eq!(rq.log_stride, hw::MIN_LOG_WQE_STRIDE);
        assert_eq!(got.max_send_wr, 128);
        Ok(())
    }

    #[test]
    fn inline_data_sizes_the_send_stride() -> Result {
        let (rings, got) = geometry(&caps(1, 1, 1, 256), false, &LIMITS)?;
        assert_eq!(rings.sq.log_stride, 9);
        assert_eq!(got.max_inline_data, 256);
        Ok(())
    }

    #[test]
    fn too_much_is_refused() {
        assert!(geometry(&caps(4097, 1, 1, 0), false, &LIMITS).is_err());
        assert!(geometry(&caps(1, 17, 1, 0), false, &LIMITS).is_err());
        assert!(geometry(&caps(1, 1, 17, 0), false, &LIMITS).is_err());
        assert!(geometry(&caps(1, 1, 1, 257), false, &LIMITS).is_err());
    }

    #[test]
    fn every_advertised_recv_sge_count_is_accepted() -> Result {
        // query_device advertises `max_recv_sge` = the device's SGE limit: a QP asking for it
        // is created and reports it.
        let (_, got) = geometry(&caps(1, 1, LIMITS.max_sge, 0), false, &LIMITS)?;
        assert_eq!(got.max_recv_sge, LIMITS.max_sge);
        Ok(())
    }

    #[test]
    fn a_user_qp_reports_what_its_rings_hold() -> Result {
        // The rings the provider lays out for some caps give back the same caps as a kernel
        // QP with those caps.
        for sge in 1..=LIMITS.max_sge {
            let asked = caps(8, sge, sge, 0);
            let (rings, kernel) = geometry(&asked, false, &LIMITS)?;
            let rq = rings.rq.ok_or(EINVAL)?;
            let req = uapi::ferroce_create_qp_req {
                buf_addr: 0,
                buf_size: 0,
                sq_log_size: rings.sq.log_size,
                sq_log_stride: rings.sq.log_stride,
                rq_offset: 0,
                rq_log_size: rq.log_size,
                rq_log_stride: rq.log_stride,
                dbrec_offset: 0,
                flags: 0,
            };
            let (_, user) = user_geometry(&req, false, &LIMITS)?;
            assert_eq!(user, kernel);
        }
        Ok(())
    }

    #[test]
    fn completions_name_posted_wqes_only() -> Result {
        let ring = hw::Ring::new(4, hw::MAX_LOG_QUEUE).ok_or(EINVAL)?;
        // Posted 65534..=1 (wrapping), none completed.
        for index in [65534, 65535, 0, 1] {
            assert!(ring.outstanding(2, 65534, index));
        }
        // The producer's next slot, or one completed before: not the device's to report.
        assert!(!ring.outstanding(2, 65534, 2));
        assert!(!ring.outstanding(2, 65534, 65533));
        assert!(!ring.outstanding(2, 2, 1));
        Ok(())
    }

    #[test]
    fn a_cqe_must_agree_with_its_wqe() {
        let sge = hw::Sge {
            addr: 0x1000,
            length: 100,
            lkey: 1,
        };
        let posted = hw::Posted::recv(7, &[sge]);
        let cqe = |wr_id, opcode, byte_len, status: hw::WcStatus| hw::Cqe {
            wr_id,
            opcode,
            byte_len,
            status: status.into(),
            ..Default::default()
        };
        let ok = hw::WcStatus::Success;
        assert_eq!(posted.check(&cqe(7, hw::CQE_OP_RECV, 100, ok)), Ok(()));
        assert_eq!(
            posted.check(&cqe(7, hw::CQE_OP_RECV_RDMA_WITH_IMM, 0, ok)),
            Ok(())
        );
        assert_eq!(
            posted.check(&cqe(8, hw::CQE_OP_RECV, 1, ok)),
            Err(hw::CqeMismatch::WrId)
        );
        assert_eq!(
            posted.check(&cqe(7, hw::CQE_OP_RECV, 101, ok)),
            Err(hw::CqeMismatch::ByteLen)
        );
        assert_eq!(
            posted.check(&cqe(7, hw::CQE_OP_SEND, 1, ok)),
            Err(hw::CqeMismatch::Opcode)
        );
        // A flush says nothing of length or opcode, but names the WR.
        let flush = hw::WcStatus::WrFlushErr;
        assert_eq!(posted.check(&cqe(7, 0, u32::MAX, flush)), Ok(()));
        // A receive without buffers (RTRS's): an RDMA WRITE with immediate of 60 bytes
        // consumes it, a SEND of one byte does not fit.
        let empty = hw::Posted::recv(9, &[]);
        assert_eq!(
            empty.check(&cqe(9, hw::CQE_OP_RECV_RDMA_WITH_IMM, 60, ok)),
            Ok(())
        );
        assert_eq!(
            empty.check(&cqe(9, hw::CQE_OP_RECV, 1, ok)),
            Err(hw::CqeMismatch::ByteLen)
        );
    }

    #[test]
    fn a_cqe_past_a_signaled_wqe_finds_it_lost() -> Result {
        let ring = hw::Ring::new(3, hw::MAX_LOG_QUEUE).ok_or(EINVAL)?;
        let mut wrs = WrTable::new(ring)?;
        let wr = |wr_id, signaled| hw::Posted {
            wr_id,
            signaled,
            ..Default::default()
        };
        // 65534 signaled, 65535 not, 0 signaled: a CQE for 1 went past all three.
        for (index, posted) in [
            (65534, wr(1, true)),
            (65535, wr(2, false)),
            (0, wr(3, true)),
            (1, wr(4, true)),
        ] {
            wrs.set(index, posted);
        }
        let lost = |from, to| wrs.first_lost(from, to).map(|(index, p)| (index, p.wr_id));
        assert_eq!(lost(65534, 1), Some((65534, 1)));
        // After it, the next; the unsignaled one between lost nothing.
        assert_eq!(lost(65535, 1), Some((0, 3)));
        assert_eq!(lost(65535, 0), None);
        // The CQE of the next WQE in order went past nothing.
        assert_eq!(lost(1, 1), None);
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
