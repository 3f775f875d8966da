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
    sync::aref::ARef,
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
pub(crate) fn report_state(dev: &rdma::Device<RoceDevice>, ndev: &NetDevice) {
    // Active takes both: the Ethernet function's link and the NIC's own port.
    let active = ndev.is_running() && ndev.has_carrier() && dev.state().nic_port_active();
    if dev.state().swap_reported_active(active) != active {
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
        // The notifier runs for every netdev of the system, under rtnl: most are none of the
        // device's business, and are told apart without waiting for the device.
        if self.device.with_atomic(|dev| dev.watches(ndev)) != Some(true) {
            return;
        }
        self.device.with(|dev| {
            let ours = dev.companion().is_some_and(|c| c.as_raw() == ndev.as_raw());
            match event {
                NetdevEvent::Register | NetdevEvent::ChangeAddr
                    if !ours && ndev.mac() == Some(dev.mac()) && dev.companion().is_none() =>
                {
                    associate(dev, ndev)
                }
                NetdevEvent::Unregister if ours => {
                    if dev.state().swap_reported_active(false) {
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
