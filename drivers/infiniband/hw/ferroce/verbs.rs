// SPDX-License-Identifier: GPL-2.0

//! The RDMA device ferroce registers with ib_core: device and port queries, and the GID table,
//! which ib_core's roce_gid_mgmt fills from the netdev's MAC and IP addresses and which
//! `add_gid`/`del_gid` program into the NIC.

use kernel::{
    io::Io,
    net::device::NetDevice,
    prelude::*,
    rdma::{
        self,
        AddressVector,
        Completions,
        CqInit,
        DeviceAttr,
        DeviceCap,
        DeviceCaps,
        GidAttr,
        GidType,
        LinkLayer,
        MmapRequest,
        MrType,
        Mtu,
        MwType,
        NewMr,
        NewMw,
        PortAttr,
        PortCap,
        PortImmutable,
        PortState, //
        PostError,
        QpAttr,
        QpInit,
        QpType,
        RecvWr,
        SendWr,
        SgPages,
        SrqAttr,
        SrqKind,
        StatDesc,
        UcontextInit,
        Udata,
    },
    sync::{
        aref::ARef,
        new_mutex,
        new_spinlock_irq,
        Arc,
        Mutex,
        SetOnce,
        SpinLockIrq, //
    },
    uapi,
    xarray::{
        AllocKind,
        XArray, //
    },
};

use crate::{
    ah::AhData,
    checks::{
        self,
        BadCqe,
        DeviceChecks, //
    },
    cmdq::Cmdq,
    commands::PORT,
    cq::CqData,
    device::Caps,
    hw,
    ib_events::IbEvents,
    ids::{
        MrKeys,
        NumberPool, //
    },
    mr::{
        MrData,
        MwData,
        PdData, //
    },
    odp::{self, OdpMr},
    qp::QpData,
    regs::{
        self,
        SharedBar, //
    },
    srq::{
        SrqData,
        XrcdData, //
    },
    state::DeviceState,
    ucontext::{
        DbPage,
        UcontextData, //
    }, //
};

/// Largest WQE the kernel pushes through the push window: each 8 bytes is an MMIO write, so
/// only small WQEs (a header and one SGE, or 64 bytes inline) are cheaper pushed than fetched.
const PUSH_MAX_WQE: usize = 128;

/// Deepest queue the verbs offer: the NIC allows 2^15, but rings are contiguous DMA memory.
const MAX_QUEUE_ENTRIES: u32 = 4096;

/// Largest CQ the verbs offer (1 MiB of CQEs). A CQ serves several queues, so it is deeper
/// than any one of them: ib_iser asks for its send queue plus 512 receives (4608 entries), and
/// ib_core's CQ pool cannot serve a request past `max_cqe` at all.
const MAX_CQ_ENTRIES: u32 = 16384;

// The user ABI restates what the hardware interface defines: they must agree.
const _: () = assert!(uapi::FERROCE_UD_AV_SIZE as usize == hw::UdAvSeg::SIZE);
const _: () = assert!(uapi::FERROCE_DB_PAGE_SIZE as usize == hw::DB_PAGE_SIZE);
const _: () = assert!(uapi::FERROCE_NONE == hw::NONE);

/// What query_device reports, fixed at probe from the device's capability registers.
#[derive(Clone, Copy)]
struct Limits {
    max_qp: u32,
    max_cq: u32,
    max_mr: u32,
    max_srq: u32,
    max_ah: u32,
    /// What every work queue is bounded by.
    wq: hw::WqLimits,
    /// Entries per CQ (a power of two).
    max_cqe: u32,
    max_mr_pages: u32,
    gid_table_len: u32,
    vendor_part_id: u32,
    hw_ver: u32,
}

/// The NIC's counters as ib_core shows them (`hw_counters/`, `rdma statistic`), in BAR0 order.
/// Then the driver's own ([`checks::COUNTER_NAMES`]).
static HW_COUNTERS: [StatDesc; NUM_HW_COUNTERS] = {
    const UNNAMED: StatDesc = StatDesc::new(c"");
    let mut descs = [UNNAMED; NUM_HW_COUNTERS];
    let mut i = 0;
    while i < NUM_HW_COUNTERS {
        descs[i] = StatDesc::new(if i < hw::NUM_COUNTERS {
            hw::COUNTER_NAMES[i]
        } else {
            checks::COUNTER_NAMES[i - hw::NUM_COUNTERS]
        });
        i += 1;
    }
    descs
};
const NUM_HW_COUNTERS: usize = hw::NUM_COUNTERS + checks::NUM_COUNTERS;

/// The driver's data of its RDMA device (`ferroce%d`).
#[pin_data]
pub(crate) struct RoceDevice {
    cmdq: Arc<Cmdq>,
    bar: Arc<SharedBar>,
    /// Bus address of BAR0 (user contexts map their doorbell pages from it).
    bar_phys: u64,
    /// Doorbell pages (contexts) the device has.
    num_db_pages: u32,
    /// Where the device's counters are in BAR0 (`REG_COUNTERS_OFFSET`), and how many it has
    /// (`REG_NUM_COUNTERS`; those past `hw::NUM_COUNTERS` are unknown to the driver).
    counters: (usize, usize),
    /// Local QIDs per context (`REG_QID_TABLE_LEN`).
    qid_table_len: usize,
    /// The device's `hw::CAP_*` bits.
    caps_flags: u32,
    /// The completion EQs CQs may use, by completion vector.
    completion_eqns: KVec<u32>,
    /// Whether the device takes WQEs from push windows.
    wqe_push: bool,
    /// The kernel's push window (doorbell page 0), one WQE at a time.
    #[pin]
    push_window: SpinLockIrq<()>,
    /// PD tags (the device only compares them), none in use twice.
    #[pin]
    pd_tags: Mutex<NumberPool>,
    /// XRC domain tags, likewise.
    #[pin]
    xrcd_tags: Mutex<NumberPool>,
    /// The last key variant of each MR slot, so that no slot gets its last key again.
    #[pin]
    mr_keys: Mutex<MrKeys>,
    limits: Limits,
    /// MAC of the companion Ethernet function, as the NIC reports it.
    mac: [u8; 6],
    /// The companion netdev, once found. A spinlock that disables interrupts: the netdev
    /// notifier asks whether an event is the companion's under the lock of
    /// [`kernel::rdma::DeviceHandle::with_atomic`], which interrupt handlers take (see
    /// [`crate::netdev::CompanionWatch`]).
    #[pin]
    netdev: SpinLockIrq<Option<ARef<NetDevice>>>,
    /// The device's port and health, shared with the event and command queues.
    state: Arc<DeviceState>,
    /// Held while a broken QP is moved to ERR, and by QP destruction.
    #[pin]
    qp_repair: Mutex<()>,
    /// Where work for process context goes, once registered.
    ib_events: SetOnce<Arc<IbEvents>>,
    /// On-demand MRs by MR index, for their page faults and `ibv_advise_mr()`.
    #[pin]
    odp_mrs: XArray<Arc<OdpMr>>,
}

impl RoceDevice {
    /// The device's data, from the capabilities read at probe.
    #[expect(clippy::too_many_arguments)]
    pub(crate) fn new(
        cmdq: Arc<Cmdq>,
        bar: Arc<SharedBar>,
        bar_phys: u64,
        completion_eqns: KVec<u32>,
        caps: &Caps,
        mac: [u8; 6],
        state: Arc<DeviceState>,
        vendor_part_id: u16,
        hw_ver: u8,
    ) -> impl PinInit<Self, Error> {
        let limits = Limits {
            max_qp: caps.max_qp,
            max_cq: caps.max_cq,
            max_mr: caps.max_mr,
            max_srq: if caps.has(hw::CAP_SRQ) {
                caps.max_srq
            } else {
                0
            },
            max_ah: caps.max_ah,
            wq: hw::WqLimits::new(
                (1 << caps.max_log_queue.min(hw::MAX_LOG_QUEUE)).min(MAX_QUEUE_ENTRIES),
                caps.max_sge,
                caps.max_inline,
            ),
            max_cqe: (1 << caps.max_log_queue.min(hw::MAX_LOG_QUEUE)).min(MAX_CQ_ENTRIES),
            max_mr_pages: caps.max_mr_pages,
            gid_table_len: caps.gid_table_len,
            vendor_part_id: vendor_part_id.into(),
            hw_ver: hw_ver.into(),
        };
        let wqe_push = caps.has(hw::CAP_WQE_PUSH);
        let (num_db_pages, caps_flags) = (caps.num_db_pages, caps.flags);
        // Probe checked that these fit in BAR0 and the QID table.
        let counters = (caps.counters_offset as usize, caps.num_counters as usize);
        let qid_table_len = caps.qid_table_len as usize;
        try_pin_init!(Self {
            cmdq,
            bar,
            bar_phys,
            num_db_pages,
            counters,
            qid_table_len,
            caps_flags,
            completion_eqns,
            wqe_push,
            push_window <- new_spinlock_irq!((), "ferroce::push_window"),
            // Tag 0 is no PD's.
            pd_tags <- new_mutex!(NumberPool::new(1, limits.max_mr)?, "ferroce::pd_tags"),
            xrcd_tags <- new_mutex!(
                NumberPool::new(1, limits.max_srq.max(1) + 1)?,
                "ferroce::xrcd_tags"
            ),
            mr_keys <- new_mutex!(MrKeys::new(limits.max_mr)?, "ferroce::mr_keys"),
            limits,
            mac,
            netdev <- new_spinlock_irq!(None, "ferroce::netdev"),
            state,
            qp_repair <- new_mutex!((), "ferroce::qp_repair"),
            ib_events: SetOnce::new(),
            odp_mrs <- XArray::new(AllocKind::Alloc),
        })
    }

    /// On-demand MRs by MR index.
    pub(crate) fn odp_mrs(&self) -> &XArray<Arc<OdpMr>> {
        &self.odp_mrs
    }

    /// Sends work for process context (broken QPs) to `events` from now on.
    pub(crate) fn set_ib_events(&self, events: Arc<IbEvents>) {
        self.ib_events.populate(events);
    }

    /// Held while a broken QP is moved to ERR ([`crate::qp::move_broken_to_err`]).
    pub(crate) fn qp_repair(&self) -> &Mutex<()> {
        &self.qp_repair
    }

    /// Drops a CQE of CQ `cqn` the driver does not believe, counting and reporting it. The QP
    /// it names, if it is a kernel QP completing on that CQ, can no longer be trusted to
    /// complete its work: it goes to ERR.
    pub(crate) fn refuse_cqe(dev: &rdma::Device<Self>, cqn: u32, cqe: &hw::Cqe, why: BadCqe) {
        dev.checks().bad_cqe(cqn, cqe, why);
        let newly_broken = dev
            .qps()
            .with(cqe.qpn, |qp| {
                let (send, recv) = qp.cqns();
                !qp.is_user() && (send == cqn || recv == cqn) && qp.set_broken()
            })
            .unwrap_or(false);
        if newly_broken {
            Self::to_err(dev, cqe.qpn);
        }
    }

    /// Completes WR `posted` of kernel QP `qpn`, posted at `index`, whose CQE never came (a
    /// later CQE of its queue went past it), as flushed into `out`; counts and reports it, and
    /// moves the QP to ERR, as for a refused CQE: the device skipped a completion.
    pub(crate) fn flush_lost(
        dev: &rdma::Device<Self>,
        qpn: u32,
        index: u16,
        posted: &hw::Posted,
        out: &mut Completions<'_, Self>,
    ) {
        if out.push(&crate::cq::flushed(qpn, posted)).is_ok() {
            dev.checks().flushed_wr(qpn, index);
        }
        if dev.qps().with(qpn, |qp| qp.set_broken()) == Some(true) {
            Self::to_err(dev, qpn);
        }
    }

    /// Queues broken kernel QP `qpn` for its move to ERR.
    fn to_err(dev: &rdma::Device<Self>, qpn: u32) {
        match dev.ib_events.as_ref() {
            Some(events) => events.qp_broken(qpn),
            None => pr_warn!("ferroce: QP {} is broken; it cannot be moved to ERR\n", qpn),
        }
    }

    /// What the device got wrong.
    pub(crate) fn checks(&self) -> &DeviceChecks {
        self.state.checks()
    }

    /// The command queue.
    pub(crate) fn cmdq(&self) -> &Cmdq {
        &self.cmdq
    }

    /// The BAR (doorbells).
    pub(crate) fn bar(&self) -> &SharedBar {
        &self.bar
    }

    /// Hands the device send WQE `pi - 1` of QP `qpn` through the push window (ferroce-hw.rst,
    /// "Doorbells"): the whole WQE by MMIO, then `DB_PUSH`, so that the device need not fetch
    /// it. The WQE must be in the ring too, with the doorbell record updated. Returns `false`,
    /// having done nothing, if the device has no push window, the WQE is too big, or another CPU
    /// is using the window: the caller then rings the ordinary doorbell.
    pub(crate) fn push_wqe(&self, qpn: u16, pi: u16, wqe: &[u8]) -> Result<bool> {
        if !self.wqe_push || wqe.len() > PUSH_MAX_WQE {
            return Ok(false);
        }
        let Some(_window) = self.push_window.try_lock() else {
            return Ok(false);
        };
        self.bar.with(|bar| {
            // 64-bit stores, as the window wants them.
            for (i, chunk) in wqe.chunks(8).enumerate() {
                let mut word = [0u8; 8];
                word[..chunk.len()].copy_from_slice(chunk);
                bar.try_write64(u64::from_le_bytes(word), regs::PUSH_WINDOW + i * 8)?;
            }
            bar.write_reg(regs::DB_PUSH::zeroed().with_qid(qpn).with_pi(pi));
            Ok(true)
        })?
    }

    /// Bus address of BAR0.
    pub(crate) fn bar_phys(&self) -> u64 {
        self.bar_phys
    }

    /// Doorbell pages the device has (page 0 is the kernel's).
    pub(crate) fn num_db_pages(&self) -> u32 {
        self.num_db_pages
    }

    /// Local QIDs per context.
    pub(crate) fn qid_table_len(&self) -> usize {
        self.qid_table_len
    }

    /// The device's `hw::CAP_*` bits.
    pub(crate) fn caps_flags(&self) -> u32 {
        self.caps_flags
    }

    /// The completion EQ of completion vector `vector`.
    pub(crate) fn completion_eqn(&self, vector: u32) -> Option<u32> {
        let n = self.completion_eqns.len();
        (n > 0).then(|| self.completion_eqns[vector as usize % n])
    }

    /// What every work queue is bounded by (depth, SGEs, inline data).
    pub(crate) fn wq_limits(&self) -> hw::WqLimits {
        self.limits.wq
    }

    /// Entries per CQ.
    pub(crate) fn max_cqe(&self) -> u32 {
        self.limits.max_cqe
    }

    /// The last key variant of each MR slot.
    pub(crate) fn mr_keys(&self) -> &Mutex<MrKeys> {
        &self.mr_keys
    }

    /// Pages per fast-registration MR.
    pub(crate) fn max_mr_pages(&self) -> u32 {
        self.limits.max_mr_pages
    }

    /// The device's port and health.
    pub(crate) fn state(&self) -> &DeviceState {
        &self.state
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

    /// Whether netdev events of `ndev` concern the device: it is the companion, or, while
    /// there is none, it has the device's MAC and may become it. Callable in atomic context.
    pub(crate) fn watches(&self, ndev: &NetDevice) -> bool {
        match &*self.netdev.lock() {
            Some(companion) => companion.as_raw() == ndev.as_raw(),
            None => ndev.mac() == Some(self.mac),
        }
    }
}

/// The IB MTU an Ethernet MTU allows, capped at what the NIC segments (4096).
pub(crate) fn ib_mtu(eth_mtu: u32) -> Mtu {
    Mtu::for_ethernet_mtu(eth_mtu).unwrap_or(Mtu::Mtu256)
}

/// What ib_core is told the device can do, for the NIC's capabilities `caps` (`hw::CAP_*`).
fn device_caps(caps: u32) -> DeviceCaps {
    let mut flags = DeviceCap::MemMgtExtensions
        | DeviceCap::RcRnrNakGen
        | DeviceCap::PortActiveEvent
        | DeviceCap::SysImageGuid;
    if caps & hw::CAP_SRQ_RESIZE != 0 {
        flags |= DeviceCap::SrqResize;
    }
    if caps & hw::CAP_MW != 0 {
        flags |= DeviceCap::MemWindow | DeviceCap::MemWindowType2B;
    }
    if caps & hw::CAP_ATOMIC_WRITE != 0 {
        flags |= DeviceCap::AtomicWrite;
    }
    if caps & hw::CAP_XRC != 0 {
        flags |= DeviceCap::Xrc;
    }
    // Global visibility only: the device's writes are in the VM's memory when it has done
    // them, but that memory is not persistent memory, so no MR may promise persistence
    // (ib_core then refuses `IB_ACCESS_FLUSH_PERSISTENT`, as rxe does for memory that is not
    // pmem).
    if caps & hw::CAP_FLUSH != 0 {
        flags |= DeviceCap::FlushGlobal;
    }
    flags
}

#[vtable]
impl rdma::Operations for RoceDevice {
    // No driver ID is allocated to ferroce upstream, and uverbs ioctls must carry the one the
    // device registered: the provider (built against rdma-core 56.1) sends UNKNOWN.
    const DRIVER_ID: rdma::DriverId = rdma::DriverId::Unknown;

    type Pd = PdData;
    type Cq = CqData;
    type Qp = QpData;
    type Srq = SrqData;
    type Xrcd = XrcdData;
    type Ah = AhData;
    type Mr = MrData;
    type Mw = MwData;
    type Ucontext = UcontextData;
    type MmapEntry = DbPage;

    fn query_device(dev: &rdma::Device<Self>, attr: &mut DeviceAttr<'_>) -> Result {
        let l = &dev.limits;
        let mcast = dev.caps_flags & hw::CAP_MCAST != 0;
        attr.vendor_id(u32::from(hw::PCI_VENDOR_ID))
            .vendor_part_id(l.vendor_part_id)
            .hw_ver(l.hw_ver)
            // As rdma-core formats it: major.minor.sub-minor in 16-bit fields from bit 32 down.
            .fw_ver(u64::from(hw::IF_VERSION_MAJOR) << 32 | u64::from(hw::IF_VERSION_MINOR) << 16)
            .max_mr_size(u64::MAX)
            .page_size_cap(0x1000)
            .max_qp(l.max_qp)
            .max_qp_wr(l.wq.max_wr)
            .max_send_sge(l.wq.max_sge)
            .max_recv_sge(l.wq.max_sge)
            .max_sge_rd(l.wq.max_sge)
            .max_cq(l.max_cq)
            .max_cqe(l.max_cqe)
            .max_mr(l.max_mr)
            .max_pd(l.max_mr)
            // Windows are entries of the MR table.
            .max_mcast_grp(if mcast { hw::MAX_MCAST_GROUPS } else { 0 })
            .max_mcast_qp_attach(if mcast { hw::MAX_MCAST_QP_ATTACH } else { 0 })
            .max_total_mcast_qp_attach(if mcast {
                hw::MAX_TOTAL_MCAST_QP_ATTACH
            } else {
                0
            })
            .max_mw(if dev.caps_flags & hw::CAP_MW != 0 {
                l.max_mr
            } else {
                0
            })
            .device_cap_flags(device_caps(dev.caps_flags))
            .max_qp_rd_atom(hw::MAX_RD_ATOMIC.into())
            .max_qp_init_rd_atom(hw::MAX_RD_ATOMIC.into())
            .max_res_rd_atom(l.max_qp.saturating_mul(hw::MAX_RD_ATOMIC.into()))
            .max_srq(l.max_srq)
            .max_srq_wr(l.wq.max_wr)
            .max_srq_sge(l.wq.max_sge)
            .max_ah(l.max_ah)
            .max_pkeys(1)
            .local_ca_ack_delay(15)
            .max_fast_reg_page_list_len(l.max_mr_pages)
            .sys_image_guid(dev.node_guid());
        if dev.caps_flags & hw::CAP_ATOMIC != 0 {
            // The NIC executes a QP's atomics one at a time against guest memory: atomic with
            // respect to other atomics of this device, not to the CPU.
            attr.atomic_cap(rdma::AtomicCap::Hca);
        }
        if dev.caps_flags & hw::CAP_ODP != 0 {
            // Every operation waits for a missing page in the NIC (its requester, responder and
            // SRQ receives alike), but a UD receive, which cannot wait; no implicit MRs.
            use rdma::OdpOp as Op;
            let rc = Op::Send
                | Op::Recv
                | Op::Write
                | Op::Read
                | Op::Atomic
                | Op::SrqRecv
                | Op::Flush
                | Op::AtomicWrite;
            attr.on_demand_paging(rdma::OdpCaps {
                implicit: false,
                rc,
                uc: rdma::OdpOps::empty(),
                ud: Op::Send.into(),
                xrc: rc,
            });
        }
        Ok(())
    }

    fn query_port(dev: &rdma::Device<Self>, port: u32, attr: &mut PortAttr<'_>) -> Result {
        if port != PORT {
            return Err(EINVAL);
        }
        let (state, mtu) = match dev.companion() {
            Some(ndev)
                if ndev.is_running() && ndev.has_carrier() && dev.state().nic_port_active() =>
            {
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
            .port_cap_flags(PortCap::Cm | PortCap::DeviceMgmt)
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

    const UVERBS_ABI_VERSION: u32 = uapi::FERROCE_UVERBS_ABI_VERSION;
    const HW_COUNTERS: &'static [StatDesc] = &HW_COUNTERS;

    fn get_hw_stats(dev: &rdma::Device<Self>, _port: u32, values: &mut [u64]) -> Result {
        let (nic, driver) = values.split_at_mut(hw::NUM_COUNTERS.min(values.len()));
        for (value, count) in driver.iter_mut().zip(dev.checks().values()) {
            *value = count;
        }
        // The NIC's are plain BAR0 registers where the device says; one read each, as
        // `rdma statistic` is rare. Counters the device does not have read as zero.
        let (offset, count) = dev.counters;
        dev.bar.with(|bar| {
            for (index, value) in nic.iter_mut().enumerate() {
                *value = if index < count {
                    bar.try_read64(offset + index * 8)?
                } else {
                    0
                };
            }
            Ok(())
        })?
    }

    fn alloc_pd(dev: &rdma::Device<Self>, _udata: Option<&mut Udata<'_>>) -> Result<PdData> {
        Ok(PdData::new(dev.pd_tags.lock().take().ok_or(ENOMEM)?))
    }

    fn dealloc_pd(pd: &rdma::Pd<Self>, _udata: Option<&mut Udata<'_>>) -> Result {
        pd.device().pd_tags.lock().give_back(pd.number());
        Ok(())
    }

    fn alloc_xrcd(dev: &rdma::Device<Self>, _udata: Option<&mut Udata<'_>>) -> Result<XrcdData> {
        if dev.caps_flags & hw::CAP_XRC == 0 || dev.limits.max_srq == 0 {
            return Err(EOPNOTSUPP);
        }
        Ok(XrcdData::new(dev.xrcd_tags.lock().take().ok_or(ENOMEM)?))
    }

    fn dealloc_xrcd(xrcd: &rdma::Xrcd<Self>, _udata: Option<&mut Udata<'_>>) -> Result {
        xrcd.device().xrcd_tags.lock().give_back(xrcd.number());
        Ok(())
    }

    fn create_cq(
        dev: &rdma::Device<Self>,
        init: &CqInit,
        udata: Option<&mut Udata<'_>>,
    ) -> Result<(CqData, u32)> {
        match udata {
            Some(udata) => CqData::create_user(dev, init, udata),
            None => CqData::create(dev, init),
        }
    }

    fn destroy_cq(cq: &rdma::Cq<Self>, _udata: Option<&mut Udata<'_>>) -> Result {
        cq.destroy(cq.device())
    }

    fn poll_cq(cq: &rdma::Cq<Self>, out: &mut Completions<'_, Self>) -> Result {
        cq.poll(cq.device(), out)
    }

    fn req_notify_cq(cq: &rdma::Cq<Self>, solicited_only: bool) -> Result<bool> {
        cq.arm(cq.device(), solicited_only)
    }

    fn modify_cq(cq: &rdma::Cq<Self>, count: u16, period_us: u16) -> Result {
        cq.moderate(cq.device(), count, period_us)
    }

    fn resize_user_cq(cq: &rdma::Cq<Self>, entries: u32, udata: &mut Udata<'_>) -> Result<u32> {
        cq.resize_user(cq.device(), entries, udata)
    }

    fn create_qp(
        dev: &rdma::Device<Self>,
        pd: Option<&rdma::Pd<Self>>,
        init: &mut QpInit<'_, Self>,
        udata: Option<&mut Udata<'_>>,
    ) -> Result<QpData> {
        // ib_core creates an XRC_TGT QP without a PD and without `udata`, even for a process.
        if init.qp_type() == QpType::XrcTgt {
            return QpData::create_xrc_tgt(dev, init.xrcd().ok_or(EINVAL)?, init);
        }
        let pd = pd.ok_or(EINVAL)?;
        match udata {
            Some(udata) => QpData::create_user(dev, pd, init, udata),
            None => QpData::create(dev, pd, init),
        }
    }

    fn modify_qp(qp: &rdma::Qp<Self>, attr: &QpAttr<'_>, _udata: Option<&mut Udata<'_>>) -> Result {
        qp.modify(qp.device(), qp.qp_type(), attr)
    }

    fn query_qp(qp: &rdma::Qp<Self>, out: &mut rdma::QpAttrOut<'_>) -> Result {
        qp.query(qp.device(), out)
    }

    fn attach_mcast(qp: &rdma::Qp<Self>, mgid: &[u8; 16]) -> Result {
        qp.mcast(qp.device(), mgid, true)
    }

    fn detach_mcast(qp: &rdma::Qp<Self>, mgid: &[u8; 16]) -> Result {
        qp.mcast(qp.device(), mgid, false)
    }

    fn destroy_qp(qp: &rdma::Qp<Self>, _udata: Option<&mut Udata<'_>>) -> Result {
        let dev = qp.device();
        // A move of this QP to ERR finishes first: until the device destroyed it, its number
        // names no other QP.
        let _repair = dev.qp_repair.lock();
        qp.destroy(dev)?;
        // Its CQEs go with it.
        let (send, recv) = qp.cqns();
        for cqn in [Some(send), (recv != send).then_some(recv)]
            .into_iter()
            .flatten()
        {
            if let Some(Err(e)) = dev
                .cqs()
                .with(cqn, |cq| cq.clean(dev, qp.qp_num(), qp.srqn()))
            {
                pr_warn!(
                    "ferroce: CQ {}: removing the CQEs of QP {} failed: {:?}\n",
                    cqn,
                    qp.qp_num(),
                    e
                );
            }
        }
        Ok(())
    }

    fn post_send<'a>(
        qp: &rdma::Qp<Self>,
        wr: SendWr<'a, Self>,
    ) -> Result<(), PostError<SendWr<'a, Self>>> {
        qp.post_send(qp.device(), wr)
    }

    fn post_recv<'a>(qp: &rdma::Qp<Self>, wr: RecvWr<'a>) -> Result<(), PostError<RecvWr<'a>>> {
        qp.post_recv(qp.device(), wr)
    }

    fn create_srq(
        dev: &rdma::Device<Self>,
        pd: &rdma::Pd<Self>,
        kind: SrqKind<'_, Self>,
        attr: &mut SrqAttr,
        udata: Option<&mut Udata<'_>>,
    ) -> Result<SrqData> {
        if dev.limits.max_srq == 0 {
            return Err(EOPNOTSUPP);
        }
        match (udata, kind) {
            (Some(udata), kind) => SrqData::create_user(dev, pd, kind, attr, udata),
            (None, SrqKind::Basic) => SrqData::create(dev, pd, attr),
            // Kernel ULPs have no XRC (`ib_send_wr` cannot name a remote SRQ).
            (None, SrqKind::Xrc { .. }) => Err(EOPNOTSUPP),
        }
    }

    fn modify_srq(
        srq: &rdma::Srq<Self>,
        max_wr: Option<u32>,
        limit: Option<u32>,
        udata: Option<&mut Udata<'_>>,
    ) -> Result {
        if let Some(max_wr) = max_wr {
            // A process's SRQ only: its provider brings the new ring.
            srq.resize_user(srq.device(), max_wr, udata.ok_or(EOPNOTSUPP)?)?;
        }
        match limit {
            Some(limit) => srq.arm_limit(srq.device(), limit),
            None => Ok(()),
        }
    }

    fn query_srq(srq: &rdma::Srq<Self>) -> Result<SrqAttr> {
        Ok(srq.attr())
    }

    fn destroy_srq(srq: &rdma::Srq<Self>, _udata: Option<&mut Udata<'_>>) -> Result {
        srq.destroy(srq.device())
    }

    fn post_srq_recv<'a>(
        srq: &rdma::Srq<Self>,
        wr: RecvWr<'a>,
    ) -> Result<(), PostError<RecvWr<'a>>> {
        srq.post_recv(srq.device(), wr)
    }

    fn create_ah(
        dev: &rdma::Device<Self>,
        pd: &rdma::Pd<Self>,
        av: &AddressVector<'_>,
        _sleepable: bool,
        udata: Option<&mut Udata<'_>>,
    ) -> Result<AhData> {
        let mut ah = AhData::new(av, dev.limits.gid_table_len)?;
        if let Some(udata) = udata {
            // A process names destinations by the device's AH numbers only (its UD QPs have
            // `QP_FLAG_AH_HANDLES`): the device gets the vector checked here.
            let handle = ah.create_in_device(&dev.cmdq, pd.number())?;
            let written = udata.write(&uapi::ferroce_create_ah_resp {
                ah: handle,
                reserved: 0,
            });
            if let Err(e) = written {
                let _ = ah.destroy(&dev.cmdq);
                return Err(e);
            }
        }
        Ok(ah)
    }

    fn destroy_ah(ah: &rdma::Ah<Self>, _sleepable: bool) -> Result {
        // Only a process's AHs are in the device, and their destruction may sleep.
        ah.destroy(&ah.device().cmdq)
    }

    fn alloc_ucontext(
        ctx: &UcontextInit<'_, Self>,
        udata: Option<&mut Udata<'_>>,
    ) -> Result<UcontextData> {
        UcontextData::new(ctx, udata)
    }

    fn dealloc_ucontext(ctx: &rdma::Ucontext<Self>) {
        ctx.free(ctx.device());
    }

    fn disassociate_ucontext(_ctx: &rdma::Ucontext<Self>) {
        // Nothing of ours to do: ib_core zapped the doorbell and push window mappings (made
        // with `rdma_user_mmap_io()`), and it destroys the process's objects and then the
        // context (FREE_CTX clears the device's part) through the usual verbs.
    }

    fn mmap(
        _ctx: &rdma::Ucontext<Self>,
        entry: &rdma::MmapEntry<Self>,
        request: &mut MmapRequest<'_>,
    ) -> Result {
        crate::ucontext::mmap(entry, request)
    }

    fn get_dma_mr(pd: &rdma::Pd<Self>, access: rdma::AccessFlags) -> Result<NewMr<MrData>> {
        MrData::dma(pd.device(), pd, access)
    }

    fn alloc_mr(pd: &rdma::Pd<Self>, kind: MrType, max_num_sg: u32) -> Result<NewMr<MrData>> {
        MrData::fast_reg(pd.device(), pd, kind, max_num_sg)
    }

    fn map_mr_sg(mr: &rdma::Mr<Self>, sg: &mut SgPages<'_, Self>) -> Result<u32> {
        mr.map_sg(sg)
    }

    fn reg_user_mr(
        pd: &rdma::Pd<Self>,
        start: u64,
        length: u64,
        virt_addr: u64,
        access: rdma::AccessFlags,
        _udata: Option<&mut Udata<'_>>,
    ) -> Result<NewMr<MrData>> {
        MrData::user(pd.device(), pd, start, length, virt_addr, access)
    }

    fn dereg_mr(mr: &rdma::Mr<Self>, _udata: Option<&mut Udata<'_>>) -> Result {
        mr.destroy(mr.device())
    }

    fn advise_mr(
        pd: &rdma::Pd<Self>,
        advice: rdma::AdviseMr,
        _flush: bool,
        sges: &[rdma::wr::Sge],
    ) -> Result {
        // Served before returning, flush or not.
        odp::advise(pd, advice, sges)
    }

    fn alloc_mw(
        pd: &rdma::Pd<Self>,
        mw_type: MwType,
        _udata: Option<&mut Udata<'_>>,
    ) -> Result<NewMw<MwData>> {
        MwData::new(pd, mw_type)
    }

    fn dealloc_mw(mw: &rdma::Mw<Self>) -> Result {
        mw.destroy(mw.device())
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
