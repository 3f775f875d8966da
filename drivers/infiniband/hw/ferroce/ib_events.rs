// SPDX-License-Identifier: GPL-2.0

//! Device-level events for ib_core's consumers, deferred from the async EQ's interrupt handler
//! to process context (ib_core's event dispatch sleeps); object events (QP, CQ, SRQ) go to
//! their consumers at once.

use kernel::{
    prelude::*,
    rdma::{
        self,
        DeviceHandle,
        Event, //
    },
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        Arc,
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
    verbs::RoceDevice, //
};

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
            }),
            GFP_KERNEL,
        )
    }

    /// The NIC's port went up or down, as recorded in the device state (callable from
    /// interrupt context).
    pub(crate) fn nic_port_changed(self: &Arc<Self>) {
        self.port_news.store(true, Relaxed);
        let _ = workqueue::system().enqueue(self.clone());
    }

    /// Delivers an event of QP `qpn` to its consumer (callable from interrupt context: QP
    /// event handlers may be called there). A QP that is gone gets nothing.
    pub(crate) fn qp_event(&self, qpn: u32, event: rdma::QpEvent) {
        self.device
            .with_atomic(|dev| dev.qps().with(qpn, |qp| qp.dispatch_event(event)));
    }

    /// Reports a dead CQ (`IB_EVENT_CQ_ERR`) to its consumer (callable from interrupt context).
    pub(crate) fn cq_error(&self, cqn: u32) {
        self.device
            .with_atomic(|dev| dev.cqs().with(cqn, |cq| cq.dispatch_error()));
    }

    /// Delivers an event of SRQ `srqn` to its consumer (callable from interrupt context).
    pub(crate) fn srq_event(&self, srqn: u32, event: rdma::SrqEvent) {
        self.device.with_atomic(|dev| {
            dev.srqs().with(srqn, |srq| {
                if event == rdma::SrqEvent::LimitReached {
                    srq.limit_reached();
                }
                srq.dispatch_event(event)
            })
        });
    }

    /// Reports `IB_EVENT_DEVICE_FATAL` (callable from interrupt context).
    pub(crate) fn device_fatal(self: &Arc<Self>) {
        self.fatal_news.store(true, Relaxed);
        // Already queued: the pending run reports it.
        let _ = workqueue::system().enqueue(self.clone());
    }
}

impl WorkItem for IbEvents {
    type Pointer = Arc<IbEvents>;

    fn run(this: Arc<IbEvents>) {
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
