// SPDX-License-Identifier: GPL-2.0

//! The companion netdev: like erdma, the NIC reports the MAC of the Ethernet function it shares
//! its port with (the VM's virtio-net NIC); the netdev with that MAC becomes the RDMA port's
//! netdev, whose addresses become its GIDs and whose link state and MTU are the port's.

use kernel::{
    net::device::{
        NetDevice,
        NetdevEvent,
        NotifierHandler, //
    },
    prelude::*,
    rdma::{
        self,
        DeviceHandle,
        Event, //
    },
    sync::{
        aref::ARef,
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
    commands::PORT,
    hw,
    verbs::{
        ib_mtu,
        RoceDevice, //
    },
};

/// Follows the companion netdev's life: appearance, link up/down, MTU, departure.
pub(crate) struct CompanionWatch {
    device: DeviceHandle<RoceDevice>,
}

impl CompanionWatch {
    pub(crate) fn new(device: DeviceHandle<RoceDevice>) -> Self {
        Self { device }
    }
}

/// Makes `ndev` the port's netdev.
pub(crate) fn associate(dev: &rdma::Device<RoceDevice>, ndev: &NetDevice) {
    if let Err(e) = dev.set_netdev(Some(ndev), PORT) {
        pr_err!(
            "{}: cannot associate with {}: {:?}\n",
            dev.name(),
            ndev.name(),
            e
        );
        return;
    }
    dev.set_companion(Some(ARef::from(ndev)));
    pr_info!("{}: port {} uses {}\n", dev.name(), PORT, ndev.name());
    update_mtu(dev, ndev);
    report_state(dev, ndev);
}

/// Tells the NIC the active MTU that follows from the netdev's.
fn update_mtu(dev: &rdma::Device<RoceDevice>, ndev: &NetDevice) {
    let mtu = ib_mtu(ndev.mtu());
    let cmd = hw::SetPortCmd {
        port: PORT,
        active_mtu: mtu as u8,
        rsvd: [0; 3],
    };
    if let Err(e) = dev.cmdq().exec(&cmd) {
        pr_err!(
            "{}: setting the active MTU to {} failed: {:?}\n",
            dev.name(),
            mtu.bytes(),
            e
        );
    }
}

/// Reports the port's state to ib_core's consumers when it changed.
fn report_state(dev: &rdma::Device<RoceDevice>, ndev: &NetDevice) {
    // Active takes both: the Ethernet function's link and the NIC's own port.
    let active = ndev.is_running() && ndev.has_carrier() && dev.nic_port_active();
    if dev.swap_port_active(active) != active {
        let event = if active {
            Event::PortActive(PORT)
        } else {
            Event::PortError(PORT)
        };
        pr_info!(
            "{}: port {} {}\n",
            dev.name(),
            PORT,
            if active { "active" } else { "down" }
        );
        dev.dispatch_event(event);
    }
}

impl NotifierHandler for CompanionWatch {
    fn event(&self, event: NetdevEvent, ndev: &NetDevice) {
        self.device.with(|dev| {
            let ours = dev.companion().is_some_and(|c| c.as_raw() == ndev.as_raw());
            match event {
                NetdevEvent::Register | NetdevEvent::ChangeAddr
                    if !ours && ndev.mac() == Some(dev.mac()) && dev.companion().is_none() =>
                {
                    associate(dev, ndev)
                }
                NetdevEvent::Unregister if ours => {
                    if dev.swap_port_active(false) {
                        dev.dispatch_event(Event::PortError(PORT));
                    }
                    // ib_core must let go of the netdev before it is unregistered.
                    let _ = dev.set_netdev(None, PORT);
                    dev.set_companion(None);
                    pr_info!("{}: port {} lost {}\n", dev.name(), PORT, ndev.name());
                }
                NetdevEvent::Up | NetdevEvent::Down | NetdevEvent::Change if ours => {
                    report_state(dev, ndev)
                }
                NetdevEvent::ChangeMtu if ours => update_mtu(dev, ndev),
                _ => {}
            }
        });
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
    fatal: Atomic<bool>,
    /// The NIC's port state from its last port event: `PORT_NO_NEWS`, `PORT_UP` or `PORT_DOWN`.
    port: Atomic<u32>,
}

const PORT_NO_NEWS: u32 = 0;
const PORT_UP: u32 = 1;
const PORT_DOWN: u32 = 2;

impl_has_work! {
    impl HasWork<Self> for IbEvents { self.work }
}

impl IbEvents {
    pub(crate) fn new(device: DeviceHandle<RoceDevice>) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                work <- new_work!("ferroce::IbEvents::work"),
                device,
                fatal: Atomic::new(false),
                port: Atomic::new(PORT_NO_NEWS),
            }),
            GFP_KERNEL,
        )
    }

    /// The NIC's port went up or down (callable from interrupt context).
    pub(crate) fn nic_port(self: &Arc<Self>, active: bool) {
        self.port
            .store(if active { PORT_UP } else { PORT_DOWN }, Relaxed);
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
        self.fatal.store(true, Relaxed);
        // Already queued: the pending run reports it.
        let _ = workqueue::system().enqueue(self.clone());
    }
}

impl WorkItem for IbEvents {
    type Pointer = Arc<IbEvents>;

    fn run(this: Arc<IbEvents>) {
        let port = this.port.xchg(PORT_NO_NEWS, Relaxed);
        if port != PORT_NO_NEWS {
            this.device.with(|dev| {
                dev.set_nic_port_active(port == PORT_UP);
                if let Some(ndev) = dev.companion() {
                    report_state(dev, &ndev);
                }
            });
        }
        if this.fatal.xchg(false, Relaxed) {
            this.device.with(|dev| {
                pr_err!("{}: device fatal error reported to ib_core\n", dev.name());
                dev.dispatch_event(Event::DeviceFatal);
            });
        }
    }
}
