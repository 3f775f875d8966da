// SPDX-License-Identifier: GPL-2.0

//! The RDMA device ferroce registers with ib_core: device and port queries, and the GID table,
//! which ib_core's roce_gid_mgmt fills from the netdev's MAC and IP addresses and which
//! `add_gid`/`del_gid` program into the NIC.

use kernel::{
    bindings,
    net::device::NetDevice,
    prelude::*,
    rdma::{
        self,
        DeviceAttr,
        GidAttr,
        GidType,
        LinkLayer,
        Mtu,
        PortAttr,
        PortImmutable,
        PortState, //
    },
    sync::{
        aref::ARef,
        atomic::{
            Atomic,
            Relaxed, //
        },
        new_mutex,
        Arc,
        Mutex, //
    },
};

use crate::{
    cmdq::Cmdq,
    commands::PORT,
    device::Caps,
    hw, //
};

/// What query_device reports, fixed at probe from the device's capability registers.
#[derive(Clone, Copy)]
struct Limits {
    max_qp: u32,
    max_cq: u32,
    max_mr: u32,
    max_srq: u32,
    max_ah: u32,
    max_sge: u32,
    max_wr: u32,
    max_mr_pages: u32,
    gid_table_len: u32,
    vendor_part_id: u32,
    hw_ver: u32,
}

/// The driver's data of its RDMA device (`ferroce%d`).
#[pin_data]
pub(crate) struct RoceDevice {
    cmdq: Arc<Cmdq>,
    limits: Limits,
    /// MAC of the companion Ethernet function, as the NIC reports it.
    mac: [u8; 6],
    /// The companion netdev, once found.
    #[pin]
    netdev: Mutex<Option<ARef<NetDevice>>>,
    /// Whether the port was last reported active (events go out on changes only).
    port_active: Atomic<bool>,
    /// Whether the NIC's own port is up (its port events; the netdev's link is the other half).
    nic_port_active: Atomic<bool>,
}

impl RoceDevice {
    /// The device's data, from the capabilities read at probe.
    pub(crate) fn new(
        cmdq: Arc<Cmdq>,
        caps: &Caps,
        mac: [u8; 6],
        nic_port_active: bool,
        vendor_part_id: u16,
        hw_ver: u8,
    ) -> impl PinInit<Self, Error> {
        let limits = Limits {
            max_qp: caps.max_qp,
            max_cq: caps.max_cq,
            max_mr: caps.max_mr,
            max_srq: caps.max_srq,
            max_ah: caps.max_ah,
            max_sge: caps.max_sge,
            max_wr: 1 << caps.max_log_queue.min(15),
            max_mr_pages: caps.max_mr_pages,
            gid_table_len: caps.gid_table_len,
            vendor_part_id: vendor_part_id.into(),
            hw_ver: hw_ver.into(),
        };
        try_pin_init!(Self {
            cmdq,
            limits,
            mac,
            netdev <- new_mutex!(None, "ferroce::netdev"),
            port_active: Atomic::new(false),
            nic_port_active: Atomic::new(nic_port_active),
        })
    }

    /// The command queue.
    pub(crate) fn cmdq(&self) -> &Cmdq {
        &self.cmdq
    }

    /// Whether the NIC's own port is up.
    pub(crate) fn nic_port_active(&self) -> bool {
        self.nic_port_active.load(Relaxed)
    }

    /// Records the NIC's own port state.
    pub(crate) fn set_nic_port_active(&self, active: bool) {
        self.nic_port_active.store(active, Relaxed);
    }

    /// Records whether the port is active; returns what was recorded before.
    pub(crate) fn swap_port_active(&self, active: bool) -> bool {
        self.port_active.xchg(active, Relaxed)
    }

    /// The MAC of the companion Ethernet function.
    pub(crate) fn mac(&self) -> [u8; 6] {
        self.mac
    }

    /// Remembers (or forgets) the companion netdev.
    pub(crate) fn set_companion(&self, netdev: Option<ARef<NetDevice>>) {
        *self.netdev.lock() = netdev;
    }

    /// The companion netdev, if known.
    pub(crate) fn companion(&self) -> Option<ARef<NetDevice>> {
        self.netdev.lock().clone()
    }
}

/// The IB MTU an Ethernet MTU allows, capped at what the NIC segments (4096).
pub(crate) fn ib_mtu(eth_mtu: u32) -> Mtu {
    Mtu::for_ethernet_mtu(eth_mtu).unwrap_or(Mtu::Mtu256)
}

#[vtable]
impl rdma::Operations for RoceDevice {
    const DRIVER_ID: bindings::rdma_driver_id = bindings::rdma_driver_id_RDMA_DRIVER_FERROCE;

    fn query_device(dev: &rdma::Device<Self>, attr: &mut DeviceAttr<'_>) -> Result {
        let l = &dev.limits;
        attr.vendor_id(u32::from(hw::PCI_VENDOR_ID))
            .vendor_part_id(l.vendor_part_id)
            .hw_ver(l.hw_ver)
            .fw_ver(u64::from(hw::IF_VERSION))
            .max_mr_size(u64::MAX)
            .page_size_cap(0x1000)
            .max_qp(l.max_qp)
            .max_qp_wr(l.max_wr)
            .max_send_sge(l.max_sge)
            .max_recv_sge(l.max_sge)
            .max_cq(l.max_cq)
            .max_cqe(l.max_wr)
            .max_mr(l.max_mr)
            .max_pd(l.max_mr)
            .max_qp_rd_atom(16)
            .max_qp_init_rd_atom(16)
            .max_srq(l.max_srq)
            .max_srq_wr(l.max_wr)
            .max_srq_sge(l.max_sge)
            .max_ah(l.max_ah)
            .max_pkeys(1)
            .local_ca_ack_delay(15)
            .max_fast_reg_page_list_len(l.max_mr_pages);
        Ok(())
    }

    fn query_port(dev: &rdma::Device<Self>, port: u32, attr: &mut PortAttr<'_>) -> Result {
        if port != PORT {
            return Err(EINVAL);
        }
        let (state, mtu) = match dev.companion() {
            Some(ndev) if ndev.is_running() && ndev.has_carrier() && dev.nic_port_active() => {
                (PortState::Active, ib_mtu(ndev.mtu()))
            }
            Some(ndev) => (PortState::Down, ib_mtu(ndev.mtu())),
            None => (PortState::Down, Mtu::Mtu1024),
        };
        let (speed, width) = dev.eth_speed(port);
        attr.state(state)
            .mtu(Mtu::Mtu4096, mtu)
            .speed(speed, width)
            .gid_tbl_len(dev.limits.gid_table_len.try_into()?)
            .pkey_tbl_len(1)
            .ip_gids(true)
            .port_cap_flags(PortAttr::CAP_CM | PortAttr::CAP_DEVICE_MGMT)
            .max_msg_sz(1 << 31)
            .max_vl_num(1);
        Ok(())
    }

    fn get_port_immutable(dev: &rdma::Device<Self>, port: u32) -> Result<PortImmutable> {
        if port != PORT {
            return Err(EINVAL);
        }
        Ok(PortImmutable {
            pkey_tbl_len: 1,
            gid_tbl_len: dev.limits.gid_table_len,
            core_cap_flags: PortImmutable::ROCE_V1_V2,
            max_mad_size: PortImmutable::MGMT_MAD_SIZE,
        })
    }

    fn get_link_layer(_dev: &rdma::Device<Self>, _port: u32) -> LinkLayer {
        LinkLayer::Ethernet
    }

    fn add_gid(dev: &rdma::Device<Self>, attr: &GidAttr) -> Result {
        let gid = attr.gid();
        let gid_type = match attr.gid_type() {
            GidType::RoceV1 => hw::GID_TYPE_ROCE_V1,
            GidType::RoceV2 => hw::GID_TYPE_ROCE_V2,
            GidType::Ib => return Err(EINVAL),
        };
        let family = if hw::gid_is_ipv4_mapped(&gid) {
            hw::GID_FAMILY_IPV4
        } else {
            hw::GID_FAMILY_IPV6
        };
        // The netdev of the entry gives the source MAC and VLAN of frames sent from it.
        let (vlan, mac) = attr.l2_fields()?;
        let vlan = if vlan < 4096 { vlan } else { hw::VLAN_NONE };
        dev.cmdq.exec(&hw::SetGidCmd {
            index: attr.index().into(),
            gid_type,
            family,
            rsvd: 0,
            gid,
            mac,
            vlan,
        })?;
        Ok(())
    }

    fn del_gid(dev: &rdma::Device<Self>, attr: &GidAttr) -> Result {
        dev.cmdq.exec(&hw::ClearGidCmd {
            index: attr.index().into(),
            rsvd: 0,
        })?;
        Ok(())
    }

    fn query_pkey(_dev: &rdma::Device<Self>, port: u32, index: u16) -> Result<u16> {
        match (port, index) {
            (PORT, 0) => Ok(0xffff),
            _ => Err(EINVAL),
        }
    }
}

#[kunit_tests(ferroce_verbs)]
mod tests {
    use super::*;

    #[test]
    fn active_mtu_follows_the_netdev() {
        assert_eq!(ib_mtu(1500), Mtu::Mtu1024);
        assert_eq!(ib_mtu(9000), Mtu::Mtu4096);
        // Too small for any IB MTU: the smallest, never nothing.
        assert_eq!(ib_mtu(68), Mtu::Mtu256);
    }

    #[test]
    fn the_nic_and_ib_core_agree_on_mtu_numbers() {
        assert_eq!(Mtu::Mtu256 as u8, hw::MTU_256);
        assert_eq!(Mtu::Mtu1024 as u8, hw::MTU_1024);
        assert_eq!(Mtu::Mtu4096 as u8, hw::MTU_4096);
    }
}
