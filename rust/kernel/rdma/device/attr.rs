// SPDX-License-Identifier: GPL-2.0

//! Device and port attributes the driver reports, and the events it raises.

use super::*;

/// The link layer of a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkLayer {
    /// InfiniBand.
    InfiniBand,
    /// Ethernet (RoCE).
    Ethernet,
}

/// The logical state of a port (`enum ib_port_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortState {
    /// The link is down.
    Down,
    /// The link is up and the port can carry traffic.
    Active,
}

/// An InfiniBand MTU (`enum ib_mtu`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mtu {
    /// 256 bytes.
    Mtu256 = 1,
    /// 512 bytes.
    Mtu512 = 2,
    /// 1024 bytes.
    Mtu1024 = 3,
    /// 2048 bytes.
    Mtu2048 = 4,
    /// 4096 bytes.
    Mtu4096 = 5,
}

impl Mtu {
    /// The largest IB MTU whose packets (payload plus RoCE v2 headers) fit in an Ethernet
    /// frame of `eth_mtu` bytes, as `iboe_get_mtu()` computes it; `None` below 256.
    pub fn for_ethernet_mtu(eth_mtu: u32) -> Option<Self> {
        // GRH/IPv6 (40) + UDP (8) + BTH (12) + XRC ETH (4) + AtomicETH (28) + ICRC (4), the
        // headers `iboe_get_mtu()` reserves room for.
        const ROCE_OVERHEAD: u32 = 40 + 8 + 12 + 4 + 28 + 4;
        let room = eth_mtu.checked_sub(ROCE_OVERHEAD)?;
        [
            Self::Mtu4096,
            Self::Mtu2048,
            Self::Mtu1024,
            Self::Mtu512,
            Self::Mtu256,
        ]
        .into_iter()
        .find(|mtu| mtu.bytes() <= room)
    }

    /// The MTU in bytes.
    pub fn bytes(self) -> u32 {
        128 << (self as u32)
    }
}

/// An asynchronous event a driver reports to ib_core's consumers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The port became active (`IB_EVENT_PORT_ACTIVE`).
    PortActive(u32),
    /// The port went down (`IB_EVENT_PORT_ERR`).
    PortError(u32),
    /// The GID table of the port changed (`IB_EVENT_GID_CHANGE`).
    GidChange(u32),
    /// The device hit a fatal error (`IB_EVENT_DEVICE_FATAL`).
    DeviceFatal,
}

/// Device attributes a driver reports from [`Operations::query_device`].
///
/// # Invariants
///
/// `self.0` points to a valid, writable `struct ib_device_attr`.
pub struct DeviceAttr<'a>(
    pub(super) NonNull<bindings::ib_device_attr>,
    pub(super) PhantomData<&'a mut ()>,
);

macro_rules! attr_setters {
    ($ty:ident { $($(#[$m:meta])* $name:ident: $field:ident: $t:ty),* $(,)? }) => {
        impl $ty<'_> {
            $(
                $(#[$m])*
                pub fn $name(&mut self, value: $t) -> &mut Self {
                    // SAFETY: By the type invariant the pointer is valid and writable.
                    unsafe { (*self.0.as_ptr()).$field = value.into() };
                    self
                }
            )*
        }
    };
}

attr_setters!(DeviceAttr {
    /// Firmware version.
    fw_ver: fw_ver: u64,
    /// Vendor ID (IEEE OUI).
    vendor_id: vendor_id: u32,
    /// Vendor part ID (the PCI device ID).
    vendor_part_id: vendor_part_id: u32,
    /// Hardware version (the PCI revision).
    hw_ver: hw_ver: u32,
    /// Largest memory region, in bytes.
    max_mr_size: max_mr_size: u64,
    /// Supported page sizes (bit mask).
    page_size_cap: page_size_cap: u64,
    /// Maximum number of QPs.
    max_qp: max_qp: u32,
    /// Maximum WRs per QP.
    max_qp_wr: max_qp_wr: u32,
    /// Device capabilities.
    device_cap_flags: device_cap_flags: DeviceCaps,
    /// Maximum scatter/gather entries per send WR.
    max_send_sge: max_send_sge: u32,
    /// Maximum scatter/gather entries per receive WR.
    max_recv_sge: max_recv_sge: u32,
    /// Maximum scatter/gather entries per RDMA READ (ULPs divide by it: never 0 with QPs).
    max_sge_rd: max_sge_rd: u32,
    /// Maximum number of CQs.
    max_cq: max_cq: u32,
    /// Maximum CQEs per CQ.
    max_cqe: max_cqe: u32,
    /// Maximum number of MRs.
    max_mr: max_mr: u32,
    /// Maximum number of PDs.
    max_pd: max_pd: u32,
    /// Maximum number of memory windows.
    max_mw: max_mw: u32,
    /// Maximum number of multicast groups.
    max_mcast_grp: max_mcast_grp: u32,
    /// Maximum number of QPs attached to one multicast group.
    max_mcast_qp_attach: max_mcast_qp_attach: u32,
    /// Maximum number of multicast attachments over all groups.
    max_total_mcast_qp_attach: max_total_mcast_qp_attach: u32,
    /// Maximum outstanding RDMA READ/atomic as responder, per QP.
    max_qp_rd_atom: max_qp_rd_atom: u32,
    /// Maximum outstanding RDMA READ/atomic as initiator, per QP.
    max_qp_init_rd_atom: max_qp_init_rd_atom: u32,
    /// Maximum outstanding RDMA READ/atomic as responder, over all QPs.
    max_res_rd_atom: max_res_rd_atom: u32,
    /// Maximum number of SRQs.
    max_srq: max_srq: u32,
    /// Maximum WRs per SRQ.
    max_srq_wr: max_srq_wr: u32,
    /// Maximum scatter/gather entries per SRQ WR.
    max_srq_sge: max_srq_sge: u32,
    /// Maximum number of AHs.
    max_ah: max_ah: u32,
    /// Maximum number of partition keys.
    max_pkeys: max_pkeys: u16,
    /// Local CA ACK delay.
    local_ca_ack_delay: local_ca_ack_delay: u8,
    /// Maximum fast-registration page-list length.
    max_fast_reg_page_list_len: max_fast_reg_page_list_len: u32,
    /// Atomicity of atomic operations.
    atomic_cap: atomic_cap: AtomicCap,
});

crate::impl_flags!(
    /// What a device can do (`device_cap_flags`, `enum ib_device_cap_flags`).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    pub struct DeviceCaps(u64);

    /// One device capability.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum DeviceCap {
        /// Fast registration and local invalidation work requests
        /// (`IB_DEVICE_MEM_MGT_EXTENSIONS`).
        MemMgtExtensions = bindings::ib_device_cap_flags_IB_DEVICE_MEM_MGT_EXTENSIONS as u64,
        /// Memory windows (`IB_DEVICE_MEM_WINDOW`).
        MemWindow = bindings::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW as u64,
        /// Type 2 windows are tied to a QP and checked against its PD
        /// (`IB_DEVICE_MEM_WINDOW_TYPE_2B`).
        MemWindowType2B = bindings::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW_TYPE_2B as u64,
        /// RC responders send RNR NAKs (`IB_DEVICE_RC_RNR_NAK_GEN`).
        RcRnrNakGen = bindings::ib_device_cap_flags_IB_DEVICE_RC_RNR_NAK_GEN as u64,
        /// The device reports `IB_EVENT_PORT_ACTIVE` (`IB_DEVICE_PORT_ACTIVE_EVENT`).
        PortActiveEvent = bindings::ib_device_cap_flags_IB_DEVICE_PORT_ACTIVE_EVENT as u64,
        /// A process's SRQ can be resized (`IB_DEVICE_SRQ_RESIZE`).
        SrqResize = bindings::ib_device_cap_flags_IB_DEVICE_SRQ_RESIZE as u64,
        /// `sys_image_guid` is set (`IB_DEVICE_SYS_IMAGE_GUID`).
        SysImageGuid = bindings::ib_device_cap_flags_IB_DEVICE_SYS_IMAGE_GUID as u64,
        /// FLUSH requests with global visibility placement, and MRs that allow them
        /// (`IB_DEVICE_FLUSH_GLOBAL`).
        FlushGlobal = bindings::ib_device_cap_flags_IB_DEVICE_FLUSH_GLOBAL as u64,
        /// FLUSH requests with persistence placement (`IB_DEVICE_FLUSH_PERSISTENT`).
        FlushPersistent = bindings::ib_device_cap_flags_IB_DEVICE_FLUSH_PERSISTENT as u64,
        /// ATOMIC WRITE requests (`IB_DEVICE_ATOMIC_WRITE`).
        AtomicWrite = bindings::ib_device_cap_flags_IB_DEVICE_ATOMIC_WRITE as u64,
        /// XRC domains, XRC SRQs and XRC_INI / XRC_TGT QPs (`IB_DEVICE_XRC`).
        Xrc = bindings::ib_device_cap_flags_IB_DEVICE_XRC as u64,
    }
);

crate::impl_flags!(
    /// What on-demand paging MRs may serve on one transport (`enum ib_odp_transport_cap_bits`).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    pub struct OdpOps(u32);

    /// One use of on-demand paging MRs.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum OdpOp {
        /// SEND from them (`IB_ODP_SUPPORT_SEND`).
        Send = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_SEND,
        /// Receive into them (`IB_ODP_SUPPORT_RECV`).
        Recv = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_RECV,
        /// RDMA WRITE, either side (`IB_ODP_SUPPORT_WRITE`).
        Write = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_WRITE,
        /// RDMA READ, either side (`IB_ODP_SUPPORT_READ`).
        Read = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_READ,
        /// Atomics, either side (`IB_ODP_SUPPORT_ATOMIC`).
        Atomic = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_ATOMIC,
        /// Receive into them through an SRQ (`IB_ODP_SUPPORT_SRQ_RECV`).
        SrqRecv = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_SRQ_RECV,
        /// FLUSH (`IB_ODP_SUPPORT_FLUSH`).
        Flush = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_FLUSH,
        /// ATOMIC WRITE (`IB_ODP_SUPPORT_ATOMIC_WRITE`).
        AtomicWrite = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_ATOMIC_WRITE,
    }
);

/// What a device offers for on-demand paging (`struct ib_odp_caps`), by transport.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OdpCaps {
    /// One MR may cover the whole address space (`IB_ODP_SUPPORT_IMPLICIT`).
    pub implicit: bool,
    /// RC.
    pub rc: OdpOps,
    /// UC.
    pub uc: OdpOps,
    /// UD.
    pub ud: OdpOps,
    /// XRC.
    pub xrc: OdpOps,
}

impl DeviceAttr<'_> {
    /// The device takes on-demand paging MRs (`IBK_ON_DEMAND_PAGING`), for `caps`.
    pub fn on_demand_paging(&mut self, caps: OdpCaps) -> &mut Self {
        let general = bindings::ib_odp_general_cap_bits_IB_ODP_SUPPORT
            | if caps.implicit {
                bindings::ib_odp_general_cap_bits_IB_ODP_SUPPORT_IMPLICIT
            } else {
                0
            };
        // SAFETY: By the type invariant the pointer is valid and writable.
        unsafe {
            let attr = self.0.as_ptr();
            (*attr).kernel_cap_flags |=
                u64::from(bindings::ib_kernel_cap_flags_IBK_ON_DEMAND_PAGING);
            (*attr).odp_caps.general_caps = u64::from(general);
            let transports = &mut (*attr).odp_caps.per_transport_caps;
            transports.rc_odp_caps = caps.rc.into();
            transports.uc_odp_caps = caps.uc.into();
            transports.ud_odp_caps = caps.ud.into();
            transports.xrc_odp_caps = caps.xrc.into();
        }
        self
    }
}

/// How atomic operations are atomic (`enum ib_atomic_cap`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum AtomicCap {
    /// No atomic operations (`IB_ATOMIC_NONE`).
    None = bindings::ib_atomic_cap_IB_ATOMIC_NONE,
    /// Atomic among the operations of this device (`IB_ATOMIC_HCA`).
    Hca = bindings::ib_atomic_cap_IB_ATOMIC_HCA,
    /// Atomic also against the CPUs and other devices (`IB_ATOMIC_GLOB`).
    Glob = bindings::ib_atomic_cap_IB_ATOMIC_GLOB,
}

impl From<AtomicCap> for bindings::ib_atomic_cap {
    fn from(cap: AtomicCap) -> Self {
        cap as Self
    }
}

impl DeviceAttr<'_> {
    /// The system image GUID (one per chassis; RoCE devices use their node GUID).
    pub fn sys_image_guid(&mut self, guid: u64) -> &mut Self {
        // SAFETY: By the type invariant the pointer is valid and writable. The field is a
        // `__be64`: the bytes in network order.
        unsafe { (*self.0.as_ptr()).sys_image_guid = u64::from_ne_bytes(guid.to_be_bytes()) };
        self
    }
}

/// Port attributes a driver reports from [`Operations::query_port`].
///
/// ib_core zeroes the structure and fills what it knows (for RoCE ports: the netdev's MTU,
/// speed and state) before it calls the driver.
///
/// # Invariants
///
/// `self.0` points to a valid, writable `struct ib_port_attr`.
pub struct PortAttr<'a>(
    pub(super) NonNull<bindings::ib_port_attr>,
    pub(super) PhantomData<&'a mut ()>,
);

attr_setters!(PortAttr {
    /// Length of the GID table.
    gid_tbl_len: gid_tbl_len: i32,
    /// Length of the P_Key table.
    pkey_tbl_len: pkey_tbl_len: u16,
    /// Capabilities.
    port_cap_flags: port_cap_flags: PortCaps,
    /// Largest message, in bytes.
    max_msg_sz: max_msg_sz: u32,
    /// Number of virtual lanes.
    max_vl_num: max_vl_num: u8,
});

crate::impl_flags!(
    /// What a port supports (`port_cap_flags`, the PortInfo capability mask,
    /// `enum ib_port_capability_mask_bits`).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    pub struct PortCaps(u32);

    /// One port capability.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum PortCap {
        /// Connection management (`IB_PORT_CM_SUP`).
        Cm = bindings::ib_port_capability_mask_bits_IB_PORT_CM_SUP,
        /// Device management (`IB_PORT_DEVICE_MGMT_SUP`).
        DeviceMgmt = bindings::ib_port_capability_mask_bits_IB_PORT_DEVICE_MGMT_SUP,
    }
);

impl PortAttr<'_> {
    /// The GIDs of the port are derived from IP addresses (RoCE).
    pub fn ip_gids(&mut self, on: bool) -> &mut Self {
        // SAFETY: By the type invariant the pointer is valid and writable.
        unsafe { (*self.0.as_ptr()).set_ip_gids(on.into()) };
        self
    }

    /// Active link speed (`IB_SPEED_*`) and width (`IB_WIDTH_*`), e.g. from
    /// [`Device::eth_speed`].
    pub fn speed(&mut self, speed: u16, width: u8) -> &mut Self {
        // SAFETY: By the type invariant the pointer is valid and writable.
        unsafe {
            (*self.0.as_ptr()).active_speed = speed;
            (*self.0.as_ptr()).active_width = width;
        }
        self
    }

    /// Logical port state and the physical state that goes with it.
    pub fn state(&mut self, state: PortState) -> &mut Self {
        let (logical, physical) = match state {
            PortState::Active => (
                bindings::ib_port_state_IB_PORT_ACTIVE,
                bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_LINK_UP,
            ),
            PortState::Down => (
                bindings::ib_port_state_IB_PORT_DOWN,
                bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_DISABLED,
            ),
        };
        // SAFETY: By the type invariant the pointer is valid and writable.
        unsafe {
            (*self.0.as_ptr()).state = logical;
            (*self.0.as_ptr()).phys_state = physical as u8;
        }
        self
    }

    /// Largest and currently active MTU.
    pub fn mtu(&mut self, max: Mtu, active: Mtu) -> &mut Self {
        // SAFETY: By the type invariant the pointer is valid and writable.
        unsafe {
            (*self.0.as_ptr()).max_mtu = max as bindings::ib_mtu;
            (*self.0.as_ptr()).active_mtu = active as bindings::ib_mtu;
        }
        self
    }
}

/// What never changes about a port, reported once at registration
/// ([`Operations::get_port_immutable`]).
#[derive(Clone, Copy, Debug)]
pub struct PortImmutable {
    /// Length of the P_Key table.
    pub pkey_tbl_len: u32,
    /// Length of the GID table.
    pub gid_tbl_len: u32,
    /// Core capability flags (`RDMA_CORE_PORT_*`).
    pub core_cap_flags: u32,
    /// Largest MAD.
    pub max_mad_size: u32,
}

impl PortImmutable {
    /// Core capabilities of a RoCE port that speaks both RoCE v1 and RoCE v2 (UDP
    /// encapsulation): ib_core then keeps a v1 and a v2 entry for every address.
    pub const ROCE_V1_V2: u32 =
        bindings::RDMA_CORE_PORT_IBA_ROCE | bindings::RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP;
    /// Size of a management datagram.
    pub const MGMT_MAD_SIZE: u32 = bindings::IB_MGMT_MAD_SIZE;
}
