// SPDX-License-Identifier: GPL-2.0

//! Typed wrappers of device commands whose results need decoding and validation.

use kernel::{
    fmt,
    prelude::*, //
};

use crate::{
    cmdq::Cmdq,
    hw, //
};

/// The one port of the device.
pub(crate) const PORT: u32 = PORT_U8 as u32;
/// [`PORT`] as ib_core's `u8` port numbers (work completions) have it.
pub(crate) const PORT_U8: u8 = 1;

/// A MAC address, printed as `aa:bb:cc:dd:ee:ff`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Mac(pub(crate) [u8; 6]);

impl fmt::Display for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d, e, g] = self.0;
        write!(f, "{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{g:02x}")
    }
}

/// The port as `CMD_QUERY_PORT` reports it, validated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PortInfo {
    /// `hw::PORT_STATE_ACTIVE` or `hw::PORT_STATE_DOWN`.
    pub(crate) state: u8,
    /// Active MTU, an IB MTU enum value (`hw::MTU_*`).
    pub(crate) active_mtu: u8,
    /// Maximum MTU (`hw::MTU_*`).
    pub(crate) max_mtu: u8,
    /// MAC of the companion Ethernet function (the netdev of this port).
    pub(crate) mac: Mac,
}

impl PortInfo {
    /// Validates what the device reported.
    fn new(info: hw::PortInfo) -> Option<Self> {
        let state_ok = matches!(info.state, hw::PORT_STATE_ACTIVE | hw::PORT_STATE_DOWN);
        let active = hw::mtu_bytes(info.active_mtu)?;
        let max = hw::mtu_bytes(info.max_mtu)?;
        // A unicast, non-zero MAC.
        let mac_ok = info.mac[0] & 1 == 0 && info.mac != [0; 6];
        (state_ok && active <= max && mac_ok).then_some(Self {
            state: info.state,
            active_mtu: info.active_mtu,
            max_mtu: info.max_mtu,
            mac: Mac(info.mac),
        })
    }

    /// Whether the port is up.
    pub(crate) fn is_active(&self) -> bool {
        self.state == hw::PORT_STATE_ACTIVE
    }

    /// Name of the port state.
    pub(crate) fn state_name(&self) -> &'static str {
        if self.is_active() {
            "ACTIVE"
        } else {
            "DOWN"
        }
    }

    /// Active MTU in bytes.
    pub(crate) fn active_mtu_bytes(&self) -> u32 {
        hw::mtu_bytes(self.active_mtu).unwrap_or(0)
    }

    /// Maximum MTU in bytes.
    pub(crate) fn max_mtu_bytes(&self) -> u32 {
        hw::mtu_bytes(self.max_mtu).unwrap_or(0)
    }
}

impl Cmdq {
    /// `CMD_NOP`.
    ///
    /// # Errors
    ///
    /// As [`Cmdq::exec`].
    pub(crate) fn nop(&self) -> Result {
        self.exec(&hw::NopCmd { rsvd: 0 })
    }

    /// `CMD_QUERY_PORT`: port state, MTUs and the companion MAC.
    ///
    /// # Errors
    ///
    /// As [`Cmdq::exec`], and [`EIO`] if the device reports nonsense (logged).
    pub(crate) fn query_port(&self) -> Result<PortInfo> {
        let raw = self.exec(&hw::QueryPortCmd {
            port: PORT,
            rsvd: 0,
        })?;
        PortInfo::new(raw).ok_or_else(|| {
            dev_err!(
                self.device(),
                "query_port: bogus port information (state {}, MTU {}/{}, MAC {})\n",
                raw.state,
                raw.active_mtu,
                raw.max_mtu,
                Mac(raw.mac)
            );
            EIO
        })
    }
}
