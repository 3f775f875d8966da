// SPDX-License-Identifier: GPL-2.0

//! What the driver knows of the device's state, with one owner: the NIC's port, the port state
//! ib_core was last told, and the function's health. The async EQ learns it, the command queue
//! consults it (a device that reported a fatal error gets no more commands), the verbs report it.
//!
//! A device that died (a fatal error, or a command that timed out) may still be running: its
//! bus mastering goes off at once, before any memory it knew is freed (destroys of its objects
//! then succeed without it). Only a new bind, which resets the function, turns it on again.

use kernel::{
    pci,
    prelude::*,
    sync::{
        aref::ARef,
        atomic::{
            Atomic,
            Relaxed, //
        },
        Arc,
    },
};

use crate::{checks::DeviceChecks, hw};

/// The device's state, made at probe and shared (`Arc`) by the command queue, the async event
/// queue and the RDMA device; each field has one writer.
pub(crate) struct DeviceState {
    /// Whether the NIC's own port is up (`CMD_QUERY_PORT` at probe, port events after).
    nic_port: Atomic<bool>,
    /// Whether the RDMA port was last reported active to ib_core; events go out on changes.
    reported_active: Atomic<bool>,
    /// `hw::FATAL_*` once the device reported a fatal error, `FATAL_NONE` before.
    fatal: Atomic<u32>,
    /// A command timed out or the device stopped answering.
    unresponsive: Atomic<bool>,
    /// Bus mastering was turned off.
    dma_stopped: Atomic<bool>,
    /// The function, whose bus mastering goes off when it dies.
    pdev: ARef<pci::Device>,
    /// What the device got wrong, counted.
    checks: DeviceChecks,
}

impl DeviceState {
    /// The state of function `pdev` just reset: port down, healthy.
    pub(crate) fn new(pdev: &pci::Device) -> Result<Arc<Self>> {
        Ok(Arc::new(
            Self {
                nic_port: Atomic::new(false),
                reported_active: Atomic::new(false),
                fatal: Atomic::new(hw::FATAL_NONE),
                unresponsive: Atomic::new(false),
                dma_stopped: Atomic::new(false),
                pdev: pdev.into(),
                checks: DeviceChecks::new()?,
            },
            GFP_KERNEL,
        )?)
    }

    /// Turns the dead device's bus mastering off (once), so that nothing it still does reaches
    /// memory. Callable from interrupt context.
    fn stop_dma(&self) {
        if !self.dma_stopped.xchg(true, Relaxed) {
            self.pdev.clear_master();
            dev_err!(
                self.pdev.as_ref(),
                "bus mastering off: the device is dead; its memory is freed without it\n"
            );
        }
    }

    /// What the device got wrong, counted (the `driver_*` hardware counters).
    pub(crate) fn checks(&self) -> &DeviceChecks {
        &self.checks
    }

    /// Whether the NIC's own port is up (the netdev's link is the other half of "active").
    pub(crate) fn nic_port_active(&self) -> bool {
        self.nic_port.load(Relaxed)
    }

    /// Records the NIC's port state (a query or a port event).
    pub(crate) fn set_nic_port_active(&self, active: bool) {
        self.nic_port.store(active, Relaxed);
    }

    /// Records whether the port is now reported active; returns what was reported before.
    pub(crate) fn swap_reported_active(&self, active: bool) -> bool {
        self.reported_active.xchg(active, Relaxed)
    }

    /// Records a fatal error the device reported (`hw::FATAL_*`). Callable from interrupt
    /// context.
    pub(crate) fn set_fatal(&self, code: u32) {
        // A device reporting "no error" as its fatal code still stopped.
        let code = if code == hw::FATAL_NONE {
            hw::FATAL_INTERNAL
        } else {
            code
        };
        self.fatal.store(code, Relaxed);
        self.stop_dma();
    }

    /// The fatal error the device reported, if any.
    pub(crate) fn fatal(&self) -> Option<u32> {
        match self.fatal.load(Relaxed) {
            hw::FATAL_NONE => None,
            code => Some(code),
        }
    }

    /// Records that the device stopped answering commands.
    pub(crate) fn set_unresponsive(&self) {
        self.unresponsive.store(true, Relaxed);
        self.stop_dma();
    }

    /// Whether the device no longer executes commands: it reported a fatal error or stopped
    /// answering. Only a reset (a new bind) recovers.
    pub(crate) fn is_dead(&self) -> bool {
        self.fatal().is_some() || self.unresponsive.load(Relaxed)
    }
}
