// SPDX-License-Identifier: GPL-2.0

//! What the driver knows of the device's state, with one owner: the NIC's port, the port state
//! ib_core was last told, and the function's health. The async EQ learns it, the command queue
//! consults it (a device that reported a fatal error gets no more commands), the verbs report it.

use kernel::{
    prelude::*,
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        Arc,
    },
};

use crate::hw;

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
}

impl DeviceState {
    /// The state of a function just reset: port down, healthy.
    pub(crate) fn new() -> Result<Arc<Self>> {
        Ok(Arc::new(
            Self {
                nic_port: Atomic::new(false),
                reported_active: Atomic::new(false),
                fatal: Atomic::new(hw::FATAL_NONE),
                unresponsive: Atomic::new(false),
            },
            GFP_KERNEL,
        )?)
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
    }

    /// Whether the device no longer executes commands: it reported a fatal error or stopped
    /// answering. Only a reset (a new bind) recovers.
    pub(crate) fn is_dead(&self) -> bool {
        self.fatal().is_some() || self.unresponsive.load(Relaxed)
    }
}
