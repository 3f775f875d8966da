// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues: one receive ring that RC QPs take WQEs from in ring order, with a
//! limit event when fewer than `limit` WQEs are left (`CMD_MODIFY_SRQ` arms it). A process's
//! SRQ may be an XRC SRQ of an XRC domain, which the domain's XRC_TGT QPs deliver into.

use kernel::{
    io::Io,
    prelude::*,
    rdma::{
        self,
        Numbered, //
        PostError,
        RecvWr,
        SrqAttr,
        SrqKind,
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
    checks::BadCqe,
    hw,
    qp, //
    queue::{
        DbRecord,
        DmaRing,
        OneRing,
        UserQueue, //
        WrTable,
    },
    regs,
    verbs::RoceDevice,
};

/// The driver's part of an SRQ.
pub(crate) struct SrqData {
    srqn: u32,
    /// WQEs in the ring (a process's SRQ may be resized).
    size: Atomic<u32>,
    max_sge: u32,
    /// The armed limit (0: disarmed, as after the event).
    limit: Atomic<u32>,
    mem: SrqMem,
}

/// Where an SRQ's ring is and who posts to it.
enum SrqMem {
    /// The driver's ring, for `post_srq_recv`.
    Kernel(KernelSrq),
    /// A process's ring: it posts and updates the record itself.
    User {
        /// Its pinned memory and local QID, which go with the queue.
        queue: UserQueue,
    },
}

/// The ring of a kernel SRQ.
struct KernelSrq {
    ring: DmaRing,
    dbrec: DbRecord,
    /// The producer side; the lock serialises posters.
    prod: Pin<KBox<SpinLockIrq<SrqProducer>>>,
    /// Receive completions seen (wrapping at 2^16). The device copies WQEs out of the ring in
    /// ring order when it takes them, so every completed WQE's slot (and possibly more) is
    /// free: counting completions is a safe consumer index.
    completed: Atomic<u32>,
}

/// The producer index of an SRQ and what was posted where. QPs complete the SRQ's WQEs in any
/// order: a slot is posted to again only once its WQE completed.
struct SrqProducer {
    pi: u16,
    wrs: WrTable,
}

/// The driver's part of an XRC domain: a tag the device compares (XRC_TGT QPs deliver only
/// into XRC SRQs of their domain), none in use twice.
pub(crate) struct XrcdData {
    tag: u32,
}

impl XrcdData {
    /// A domain tagged `tag`.
    pub(crate) fn new(tag: u32) -> Self {
        Self { tag }
    }

    /// The domain's tag.
    pub(crate) fn number(&self) -> u32 {
        self.tag
    }
}

impl Numbered for SrqData {
    fn number(&self) -> u32 {
        self.srqn
    }
}

impl SrqData {
    /// Creates an SRQ of at least `attr.max_wr` WQEs with `attr.max_sge` SGEs; reports the
    /// capacities it got in `attr`.
    pub(crate) fn create(
        dev: &rdma::Device<RoceDevice>,
        pd: &rdma::Pd<RoceDevice>,
        attr: &mut SrqAttr,
    ) -> Result<Self> {
        let limits = dev.wq_limits();
        if attr.max_wr == 0 {
            return Err(EINVAL);
        }
        let shape = hw::WqRing::recv(attr.max_wr, attr.max_sge, &limits).map_err(|_| EINVAL)?;
        // A limit at or above the ring size could never be crossed downwards.
        if attr.limit >= shape.entries() {
            return Err(EINVAL);
        }
        let ring = DmaRing::new(dev.parent(), shape.log_size, shape.log_stride)?;
        let dbrec = DbRecord::new(dev.parent())?;
        let prod = KBox::pin_init(
            new_spinlock_irq!(
                SrqProducer {
                    pi: 0,
                    wrs: WrTable::new(ring.ring())?,
                },
                "ferroce::srq"
            ),
            GFP_KERNEL,
        )?;
        let completion = dev.cmdq().exec(&hw::CreateSrqCmd {
            ring: ring.desc(),
            dbrec_addr: dbrec.dma_address(),
            pd: pd.number(),
            limit: attr.limit,
            log_size: u8::try_from(shape.log_size)?,
            log_stride: u8::try_from(shape.log_stride)?,
            ..Default::default()
        })?;
        let (ring, dbrec) =
            dev.checks()
                .new_number(dev.srqs(), "SRQ", completion.srqn, (ring, dbrec))?;
        let srq = Self {
            srqn: completion.srqn,
            size: Atomic::new(shape.entries()),
            max_sge: shape.recv_sges(&limits),
            limit: Atomic::new(attr.limit),
            mem: SrqMem::Kernel(KernelSrq {
                ring,
                dbrec,
                prod,
                completed: Atomic::new(0),
            }),
        };
        // Kernel doorbells name the SRQ by its number.
        if u16::try_from(srq.srqn).is_err() {
            pr_err!("ferroce: the device returned SRQN {}\n", srq.srqn);
            let _ = srq.destroy(dev);
            return Err(EIO);
        }
        attr.max_wr = srq.size.load(Relaxed);
        attr.max_sge = srq.max_sge;
        Ok(srq)
    }

    /// Creates an SRQ whose ring and record are in the calling process's memory
    /// (`ferroce_create_srq_req`), and answers with its numbers (`ferroce_create_srq_resp`).
    pub(crate) fn create_user(
        dev: &rdma::Device<RoceDevice>,
        pd: &rdma::Pd<RoceDevice>,
        kind: SrqKind<'_, RoceDevice>,
        attr: &mut SrqAttr,
        udata: &mut Udata<'_>,
    ) -> Result<Self> {
        let ctx = udata.ucontext(dev).ok_or(EINVAL)?;
        // An XRC SRQ names its domain and CQ to the device; its ring is laid out as any.
        let (srq_type, xrcd, cqn) = match kind {
            SrqKind::Basic => (hw::SrqType::Basic, 0, 0),
            SrqKind::Xrc { .. } if dev.caps_flags() & hw::CAP_XRC == 0 => return Err(EOPNOTSUPP),
            SrqKind::Xrc { xrcd, cq } => (hw::SrqType::Xrc, xrcd.number(), cq.number()),
        };
        let req: uapi::ferroce_create_srq_req = udata.read()?;
        let limits = dev.wq_limits();
        if req.reserved != 0 {
            return Err(EINVAL);
        }
        let shape = hw::WqRing::new(req.log_size, req.log_stride, &limits).map_err(|_| EINVAL)?;
        let (size, max_sge) = (shape.entries(), shape.recv_sges(&limits));
        if attr.max_wr == 0 || attr.max_wr > size || attr.max_sge > max_sge || attr.limit >= size {
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
            req.log_stride,
            req.dbrec_offset,
        )?;
        let srqn = dev
            .cmdq()
            .exec(&hw::CreateSrqCmd {
                ring,
                dbrec_addr,
                pd: pd.number(),
                limit: attr.limit,
                log_size: req.log_size as u8,
                log_stride: req.log_stride as u8,
                srq_type: srq_type.into(),
                xrcd,
                cqn,
                ..Default::default()
            })?
            .srqn;
        let mem = dev.checks().new_number(dev.srqs(), "SRQ", srqn, mem)?;
        let queue = UserQueue::map(dev, ctx, hw::QID_KIND_SRQ, srqn, mem, || {
            let _ = dev.cmdq().exec(&hw::DestroySrqCmd { srqn, rsvd: 0 });
        })?;
        let db_qid = queue.qid().into();
        let srq = Self {
            srqn,
            size: Atomic::new(size),
            max_sge,
            limit: Atomic::new(attr.limit),
            mem: SrqMem::User { queue },
        };
        if let Err(e) = udata.write(&uapi::ferroce_create_srq_resp { srqn, db_qid }) {
            let _ = srq.destroy(dev);
            return Err(e);
        }
        attr.max_wr = size;
        attr.max_sge = max_sge;
        Ok(srq)
    }

    /// Destroys the SRQ in the device (ib_core destroys its QPs first); its memory (and a user
    /// SRQ's local QID) goes with the data.
    pub(crate) fn destroy(&self, dev: &rdma::Device<RoceDevice>) -> Result {
        dev.cmdq().exec_destroy(&hw::DestroySrqCmd {
            srqn: self.srqn,
            rsvd: 0,
        })
    }

    /// Moves a process's SRQ to the ring of `ferroce_resize_srq_req` (`CMD_RESIZE_SRQ`: the
    /// device copies the WQEs it has not taken there), for at least `max_wr` WQEs. The old
    /// buffer is unpinned once the device has switched. Kernel SRQs are not resized.
    pub(crate) fn resize_user(
        &self,
        dev: &rdma::Device<RoceDevice>,
        max_wr: u32,
        udata: &mut Udata<'_>,
    ) -> Result {
        let SrqMem::User { queue } = &self.mem else {
            return Err(EOPNOTSUPP);
        };
        if dev.caps_flags() & hw::CAP_SRQ_RESIZE == 0 {
            return Err(EOPNOTSUPP);
        }
        let req: uapi::ferroce_resize_srq_req = udata.read()?;
        let limits = dev.wq_limits();
        let shape = hw::WqRing::new(req.log_size, req.log_stride, &limits).map_err(|_| EINVAL)?;
        let size = shape.entries();
        if req.reserved != 0
            || req.reserved2 != 0
            || max_wr == 0
            || max_wr > size
            || shape.recv_sges(&limits) < self.max_sge
            || self.limit.load(Relaxed) >= size
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
            req.log_stride,
            req.dbrec_offset,
        )?;
        let cmd = hw::ResizeSrqCmd {
            ring,
            dbrec_addr,
            srqn: self.srqn,
            log_size: req.log_size as u8,
            log_stride: req.log_stride as u8,
            rsvd: 0,
        };
        // The device's answer to the process: fewer entries than the WQEs it has not taken
        // (EINVAL, as rxe).
        let answers = [hw::STATUS_BAD_PARAM];
        queue.move_to(mem, || dev.cmdq().exec_or_refuse(&cmd, &answers))?;
        self.size.store(size, Relaxed);
        Ok(())
    }

    /// Arms the limit event at `limit` WQEs (0 disarms).
    pub(crate) fn arm_limit(&self, dev: &rdma::Device<RoceDevice>, limit: u32) -> Result {
        if limit >= self.size.load(Relaxed) {
            return Err(EINVAL);
        }
        dev.cmdq().exec(&hw::ModifySrqCmd {
            srqn: self.srqn,
            limit,
        })?;
        self.limit.store(limit, Relaxed);
        Ok(())
    }

    /// The SRQ's attributes.
    pub(crate) fn attr(&self) -> SrqAttr {
        SrqAttr {
            max_wr: self.size.load(Relaxed),
            max_sge: self.max_sge,
            limit: self.limit.load(Relaxed),
        }
    }

    /// Notes the limit event: the device disarmed the limit.
    pub(crate) fn limit_reached(&self) {
        self.limit.store(0, Relaxed);
    }

    /// Claims a receive CQE of one of the SRQ's QPs: it must complete a WQE posted at its index
    /// and not completed yet, and agree with it. Returns the most bytes the WQE had room for.
    pub(crate) fn claim(&self, cqe: &hw::Cqe) -> Result<u32, BadCqe> {
        let SrqMem::Kernel(k) = &self.mem else {
            return Err(BadCqe::ForeignQp);
        };
        let mut prod = k.prod.lock();
        let posted = prod.wrs.get(cqe.wqe_index).ok_or(BadCqe::WqeIndex)?;
        posted.check(cqe).map_err(BadCqe::Mismatch)?;
        Self::release(k, &mut prod, cqe.wqe_index);
        Ok(posted.len)
    }

    /// Frees the WQE at `index` without a completion (its QP was destroyed with the CQE
    /// still in a CQ).
    pub(crate) fn discard(&self, index: u16) {
        if let SrqMem::Kernel(k) = &self.mem {
            Self::release(k, &mut k.prod.lock(), index);
        }
    }

    fn release(k: &KernelSrq, prod: &mut SrqProducer, index: u16) {
        if prod.wrs.take(index).is_none() {
            return;
        }
        let ci = k.completed.load(Relaxed) as u16;
        if k.ring.ring().used(prod.pi, ci) > 0 {
            k.completed.store(u32::from(ci.wrapping_add(1)), Relaxed);
        }
    }

    /// Posts a chain of receive requests; the record carries the producer index.
    pub(crate) fn post_recv<'a>(
        &self,
        dev: &rdma::Device<RoceDevice>,
        first: RecvWr<'a>,
    ) -> Result<(), PostError<RecvWr<'a>>> {
        let SrqMem::Kernel(k) = &self.mem else {
            return Err(PostError {
                error: EINVAL,
                bad: first,
            });
        };
        let mut prod = k.prod.lock();
        let start = prod.pi;
        let mut next = Some(first);
        let mut result = Ok(());
        while let Some(wr) = next {
            let pi = prod.pi;
            // Full by count, or the slot's WQE (taken out of order) has not completed.
            let full = k.ring.ring().is_full(pi, k.completed.load(Relaxed) as u16)
                || !prod.wrs.is_free(pi);
            let posted = if full {
                Err(ENOMEM)
            } else {
                qp::write_recv_wqe(&k.ring, pi, &wr, self.max_sge)
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
            let rung = k.dbrec.write(0, u32::from(pi)).and_then(|()| {
                dev.bar().with(|bar| {
                    bar.write_reg(
                        regs::DB_SRQ::zeroed()
                            .with_qid(self.srqn as u16)
                            .with_pi(pi),
                    )
                })
            });
            if let Err(error) = rung {
                return Err(PostError { error, bad: first });
            }
        }
        result
    }
}
