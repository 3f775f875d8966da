// SPDX-License-Identifier: GPL-2.0

//! Device-level events for ib_core's consumers, deferred from the async EQ's interrupt handler
//! to process context (ib_core's event dispatch sleeps); object events (QP, CQ, SRQ) go to
//! their consumers at once. Broken QPs (a CQE the driver refused) are moved to ERR from here
//! too, as that takes a command. On-demand MRs' page faults are served each on a work item of
//! its own ([`FaultWork`]), as serving one may wait for the process's memory. The work runs on
//! `system_long_wq` (`system_wq` is deprecated, and its users are expected to finish quickly).

use kernel::{
    prelude::*,
    rdma::{
        self,
        DeviceHandle,
        DeviceRef,
        Event, //
    },
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        new_spinlock_irq,
        Arc,
        SpinLockIrq, //
    },
    workqueue::{
        self,
        impl_has_work,
        new_work,
        Work,
        WorkItem, //
    },
};

use crate::{
    netdev::report_state,
    odp::{self, PageFault},
    qp,
    verbs::RoceDevice, //
};

/// Broken QPs waiting for their move to ERR; more at once than this are unlikely and only
/// logged (those QPs stay broken: the driver delivers none of their refused CQEs).
const MAX_BROKEN: usize = 32;

/// The QPNs of broken QPs not yet moved to ERR.
#[derive(Clone, Copy)]
struct BrokenQps {
    qpns: [u32; MAX_BROKEN],
    len: usize,
    lost: u32,
}

impl BrokenQps {
    const EMPTY: Self = Self {
        qpns: [0; MAX_BROKEN],
        len: 0,
        lost: 0,
    };
}

/// Page faults served at once: one waiting for memory that never comes (a FUSE file whose
/// daemon does not answer) takes a worker and an entry, not the device. More than this wait: the
/// device raises them again (after `hw::PAGE_FAULT_REPEAT_MS`).
const MAX_FAULTS: usize = 32;

/// The page faults being served, an entry each.
type Serving = [Option<PageFault>; MAX_FAULTS];

/// One page fault being served, on a work item of its own. It holds a counted reference to the
/// device, not [`DeviceHandle::with`]'s lock: waiting for memory blocks nothing else (other
/// faults, netdev events under rtnl, port and fatal events), and the device stays registered
/// until it is done.
#[pin_data]
struct FaultWork {
    #[pin]
    work: Work<FaultWork>,
    events: Arc<IbEvents>,
    device: DeviceRef<RoceDevice>,
    fault: PageFault,
    /// Its entry in [`IbEvents::serving`].
    entry: usize,
}

impl_has_work! {
    impl HasWork<Self> for FaultWork { self.work }
}

impl WorkItem for FaultWork {
    type Pointer = Arc<FaultWork>;

    fn run(this: Arc<FaultWork>) {
        odp::serve_fault(&this.device, this.fault);
        this.events.serving.lock()[this.entry] = None;
    }
}

/// Device-level events from the NIC's async EQ for ib_core's consumers. The EQ handler runs in
/// interrupt context and ib_core's dispatch sleeps, so the handler only records the event and
/// queues this work item.
#[pin_data]
pub(crate) struct IbEvents {
    #[pin]
    work: Work<IbEvents>,
    device: DeviceHandle<RoceDevice>,
    /// A fatal error is to be reported.
    fatal_news: Atomic<bool>,
    /// The NIC's port changed (its state is in [`crate::state::DeviceState`]).
    port_news: Atomic<bool>,
    /// QPs to move to ERR.
    #[pin]
    broken: SpinLockIrq<BrokenQps>,
    /// On-demand MRs' page faults being served ([`FaultWork`]).
    #[pin]
    serving: SpinLockIrq<Serving>,
}

impl_has_work! {
    impl HasWork<Self> for IbEvents { self.work }
}

impl IbEvents {
    pub(crate) fn new(device: DeviceHandle<RoceDevice>) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                work <- new_work!("ferroce::IbEvents::work"),
                device,
                fatal_news: Atomic::new(false),
                port_news: Atomic::new(false),
                broken <- new_spinlock_irq!(BrokenQps::EMPTY, "ferroce::IbEvents::broken"),
                serving <- new_spinlock_irq!([None; MAX_FAULTS], "ferroce::IbEvents::serving"),
            }),
            GFP_KERNEL,
        )
    }

    /// The NIC's port went up or down, as recorded in the device state (callable from
    /// interrupt context).
    pub(crate) fn nic_port_changed(self: &Arc<Self>) {
        self.port_news.store(true, Relaxed);
        let _ = workqueue::system_long().enqueue(self.clone());
    }

    /// Delivers an event of QP `qpn` to its consumer (callable from interrupt context: QP
    /// event handlers may be called there). A QP that is gone gets nothing.
    pub(crate) fn qp_event(&self, qpn: u32, event: rdma::QpEvent) {
        self.device.with_atomic(|dev| {
            if dev.qps().with(qpn, |qp| qp.dispatch_event(event)).is_none() {
                dev.checks().bad_event("QP", qpn);
            }
        });
    }

    /// Reports a dead CQ (`IB_EVENT_CQ_ERR`) to its consumer (callable from interrupt context).
    pub(crate) fn cq_error(&self, cqn: u32) {
        self.device.with_atomic(|dev| {
            if dev.cqs().with(cqn, |cq| cq.dispatch_error()).is_none() {
                dev.checks().bad_event("CQ", cqn);
            }
        });
    }

    /// Delivers an event of SRQ `srqn` to its consumer (callable from interrupt context).
    pub(crate) fn srq_event(&self, srqn: u32, event: rdma::SrqEvent) {
        self.device.with_atomic(|dev| {
            let known = dev.srqs().with(srqn, |srq| {
                if event == rdma::SrqEvent::LimitReached {
                    srq.limit_reached();
                }
                srq.dispatch_event(event)
            });
            if known.is_none() {
                dev.checks().bad_event("SRQ", srqn);
            }
        });
    }

    /// Queues kernel QP `qpn`, found broken, for its move to ERR (callable from interrupt
    /// context).
    pub(crate) fn qp_broken(self: &Arc<Self>, qpn: u32) {
        {
            let mut broken = self.broken.lock();
            let len = broken.len;
            match broken.qpns.get_mut(len) {
                Some(slot) => {
                    *slot = qpn;
                    broken.len += 1;
                }
                None => broken.lost += 1,
            }
        }
        let _ = workqueue::system_long().enqueue(self.clone());
    }

    /// Serves an on-demand MR's page fault on a work item of its own (callable from interrupt
    /// context); serving it sleeps. A fault that overlaps one being served is the device asking
    /// again: it is dropped, as are faults beyond [`MAX_FAULTS`] (the device asks again later).
    pub(crate) fn page_fault(self: &Arc<Self>, fault: PageFault) {
        let entry = {
            let mut serving = self.serving.lock();
            if serving.iter().flatten().any(|f| f.overlaps(&fault)) {
                return;
            }
            let Some(entry) = serving.iter().position(Option::is_none) else {
                return;
            };
            serving[entry] = Some(fault);
            entry
        };
        let work = self.device.get().ok_or(ENODEV).and_then(|device| {
            Arc::pin_init(
                pin_init!(FaultWork {
                    work <- new_work!("ferroce::FaultWork::work"),
                    events: self.clone(),
                    device,
                    fault,
                    entry,
                }),
                GFP_ATOMIC,
            )
        });
        match work {
            Ok(work) => {
                let _ = workqueue::system_long().enqueue(work);
            }
            // The device is going, or no memory now: the device asks again if anything waits.
            Err(_) => self.serving.lock()[entry] = None,
        }
    }

    /// Reports `IB_EVENT_DEVICE_FATAL` (callable from interrupt context).
    pub(crate) fn device_fatal(self: &Arc<Self>) {
        self.fatal_news.store(true, Relaxed);
        // Already queued: the pending run reports it.
        let _ = workqueue::system_long().enqueue(self.clone());
    }
}

impl WorkItem for IbEvents {
    type Pointer = Arc<IbEvents>;

    fn run(this: Arc<IbEvents>) {
        let broken = core::mem::replace(&mut *this.broken.lock(), BrokenQps::EMPTY);
        if broken.lost > 0 {
            pr_warn!(
                "ferroce: {} broken QPs could not be queued for ERR\n",
                broken.lost
            );
        }
        if broken.len > 0 {
            this.device.with(|dev| {
                for &qpn in broken.qpns.iter().take(broken.len) {
                    qp::move_broken_to_err(dev, qpn);
                }
            });
        }
        if this.port_news.xchg(false, Relaxed) {
            this.device.with(|dev| {
                if let Some(ndev) = dev.companion() {
                    report_state(dev, &ndev);
                }
            });
        }
        if this.fatal_news.xchg(false, Relaxed) {
            this.device.with(|dev| {
                pr_err!("{}: device fatal error reported to ib_core\n", dev.name());
                dev.dispatch_event(Event::DeviceFatal);
            });
        }
    }
}
