// SPDX-License-Identifier: GPL-2.0

//! Probe and removal of a ferroce function: identification, reset, capabilities, event queues,
//! command queue, port query; and the orderly shutdown that stops all device DMA before the
//! queues' memory is freed.

use kernel::{
    device::{
        self,
        Bound,
        Core, //
    },
    dma::DmaMask,
    fmt,
    io::{
        poll::read_poll_timeout,
        Io, //
    },
    net::device::{
        NetDevice,
        Notifier, //
    },
    pci,
    prelude::*,
    rdma,
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
    time::Delta,
    ModuleMetadata, //
};

use crate::{
    cmdq::Cmdq,
    commands::{
        Mac,
        PORT, //
    },
    eq::{
        CompletionEqs,
        EqIrq,
        EventQueues,
        VectorHandler,
        ASYNC_VECTOR,
        CMD_VECTOR,
        FIRST_COMPLETION_VECTOR,
        MAX_COMPLETION_EQS, //
    },
    hw,
    ib_events::IbEvents,
    netdev::{
        self,
        CompanionWatch, //
    },
    regs::{
        self,
        SharedBar, //
    },
    state::DeviceState,
    verbs::RoceDevice,
    LocalModule,
};

/// The RDMA side of a bound function: the registered `ferroce%d` and the watch on its netdev.
struct RdmaPort {
    // Unregistered first: the watch then finds no device any more.
    ib: rdma::Registration<RoceDevice>,
    _watch: Pin<KBox<Notifier<CompanionWatch>>>,
}

impl RdmaPort {
    /// Registers the RDMA device, with the companion netdev if it already exists (otherwise the
    /// watch associates it when it appears).
    fn register(
        pdev: &pci::Device<Bound>,
        cmdq: &Arc<Cmdq>,
        bar: &Arc<SharedBar>,
        ceqs: &CompletionEqs,
        caps: &Caps,
        mac: Mac,
        state: &Arc<DeviceState>,
    ) -> Result<Self> {
        let mut completion_eqns = KVec::with_capacity(ceqs.eqs.len(), GFP_KERNEL)?;
        for eq in ceqs.eqs.iter() {
            completion_eqns.push(u32::from(eq.eqn()), GFP_KERNEL)?;
        }
        let comp_vectors = u32::try_from(completion_eqns.len())?;
        let companion = NetDevice::find_by_mac(&mac.0);
        let ib = rdma::Registration::new(
            pdev.as_ref(),
            &<LocalModule as ModuleMetadata>::THIS_MODULE,
            c"ferroce%d",
            rdma::Config {
                ports: 1,
                comp_vectors,
                netdev: companion.as_deref().map(|ndev| (PORT, ndev)),
                cq_numbers: caps.max_cq,
                qp_numbers: caps.max_qp,
                srq_numbers: caps.max_srq,
                node_guid: rdma::Config::guid_from_mac(&mac.0),
            },
            RoceDevice::new(
                cmdq.clone(),
                bar.clone(),
                pdev.resource_start(0)?,
                completion_eqns,
                caps,
                mac.0,
                state.clone(),
                pdev.device_id(),
                pdev.revision_id(),
            ),
        )?;
        match &companion {
            Some(ndev) => netdev::associate(ib.device(), ndev),
            None => dev_info!(pdev, "no netdev with MAC {} yet; waiting for it\n", mac),
        }
        let watch = KBox::pin_init(Notifier::new(CompanionWatch::new(ib.handle())), GFP_KERNEL)?;
        dev_info!(pdev, "registered {}\n", ib.device().name());
        Ok(Self { ib, _watch: watch })
    }
}

/// How long a reset may take.
const RESET_TIMEOUT: Delta = Delta::from_secs(2);
/// Longest command timeout a device may ask for.
const MAX_CMD_TIMEOUT_MS: u32 = 60_000;
/// Queue, MR and AH numbers are 24 bits wide on the wire.
const MAX_OBJECTS: u32 = 1 << 24;

/// Names of the `hw::CAP_*` bits.
const CAP_NAMES: [(u32, &str); 21] = [
    (hw::CAP_ROCE_V1, "roce_v1"),
    (hw::CAP_ROCE_V2, "roce_v2"),
    (hw::CAP_RC, "rc"),
    (hw::CAP_UD, "ud"),
    (hw::CAP_SRQ, "srq"),
    (hw::CAP_ATOMIC, "atomic"),
    (hw::CAP_INLINE, "inline"),
    (hw::CAP_WQE_PUSH, "wqe_push"),
    (hw::CAP_CQ_MODERATION, "cq_moderation"),
    (hw::CAP_QID_TRANSLATION, "qid_translation"),
    (hw::CAP_FAST_REG, "fast_reg"),
    (hw::CAP_UC, "uc"),
    (hw::CAP_CQ_RESIZE, "cq_resize"),
    (hw::CAP_SRQ_RESIZE, "srq_resize"),
    (hw::CAP_MW, "mw"),
    (hw::CAP_MCAST, "mcast"),
    (hw::CAP_DB_RECORD, "db_record"),
    (hw::CAP_ATOMIC_WRITE, "atomic_write"),
    (hw::CAP_FLUSH, "flush"),
    (hw::CAP_XRC, "xrc"),
    (hw::CAP_ODP, "odp"),
];

/// Capability bits, printed by name.
struct CapNames(u32);

impl fmt::Display for CapNames {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut known = 0;
        let mut sep = "";
        for (bit, name) in CAP_NAMES {
            if self.0 & bit != 0 {
                write!(f, "{sep}{name}")?;
                sep = " ";
            }
            known |= bit;
        }
        if self.0 & !known != 0 {
            write!(f, "{sep}unknown:{:#x}", self.0 & !known)?;
        }
        Ok(())
    }
}

/// Identification, capabilities and limits, read once at probe and validated.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Caps {
    /// Interface major version (always [`hw::IF_VERSION_MAJOR`]).
    pub(crate) if_major: u16,
    /// Interface minor version.
    pub(crate) if_minor: u16,
    /// `hw::CAP_*` bits.
    pub(crate) flags: u32,
    /// MSI-X vectors.
    pub(crate) num_msix: u32,
    /// QP table size.
    pub(crate) max_qp: u32,
    /// CQ table size.
    pub(crate) max_cq: u32,
    /// MR table size.
    pub(crate) max_mr: u32,
    /// SRQ table size.
    pub(crate) max_srq: u32,
    /// AH table size.
    pub(crate) max_ah: u32,
    /// EQ table size.
    pub(crate) max_eq: u32,
    /// GID table entries.
    pub(crate) gid_table_len: u32,
    /// Doorbell pages (contexts).
    pub(crate) num_db_pages: u32,
    /// Largest ring `log_size`.
    pub(crate) max_log_queue: u32,
    /// SGEs per WQE.
    pub(crate) max_sge: u32,
    /// Inline bytes per WQE.
    pub(crate) max_inline: u32,
    /// Pages per MR page list.
    pub(crate) max_mr_pages: u32,
    /// BAR0 offset of doorbell page 0.
    pub(crate) db_area_offset: u32,
    /// BAR0 offset of the counters.
    pub(crate) counters_offset: u32,
    /// Number of counters.
    pub(crate) num_counters: u32,
    /// Local QIDs per context.
    pub(crate) qid_table_len: u32,
    /// Command timeout in milliseconds.
    pub(crate) cmd_timeout_ms: u32,
}

/// Checks that `value` of register `name` is within `min..=max`.
fn limit(dev: &device::Device, name: &str, value: u32, min: u32, max: u32) -> Result<u32> {
    if (min..=max).contains(&value) {
        Ok(value)
    } else {
        dev_err!(
            dev,
            "{} reports {}, outside the supported range {}..={}\n",
            name,
            value,
            min,
            max
        );
        Err(EIO)
    }
}

/// Checks that a BAR0 area of `count` items of `size` bytes at `offset` (aligned to `align`)
/// lies inside BAR0.
fn bar_area(
    dev: &device::Device,
    name: &str,
    offset: u32,
    count: u32,
    size: usize,
    align: usize,
) -> Result {
    let start = usize::try_from(offset)?;
    let end = usize::try_from(count)
        .ok()
        .and_then(|count| count.checked_mul(size))
        .and_then(|len| len.checked_add(start));
    match end {
        Some(end) if end <= hw::BAR0_SIZE && start % align == 0 => Ok(()),
        _ => {
            dev_err!(
                dev,
                "{} reports offset {:#x} with {} entries, outside BAR0\n",
                name,
                offset,
                count
            );
            Err(EIO)
        }
    }
}

impl Caps {
    /// Reads and validates the capability and limit registers.
    ///
    /// # Errors
    ///
    /// [`EIO`] if a value is out of what this interface allows (logged), [`ENODEV`] if the BAR
    /// is gone.
    fn read(dev: &device::Device, bar: &SharedBar, if_major: u16, if_minor: u16) -> Result<Self> {
        let c = bar.with(|bar| Self {
            if_major,
            if_minor,
            flags: bar.read(regs::CAPS).into_raw(),
            num_msix: bar.read(regs::NUM_MSIX).into_raw(),
            max_qp: bar.read(regs::MAX_QP).into_raw(),
            max_cq: bar.read(regs::MAX_CQ).into_raw(),
            max_mr: bar.read(regs::MAX_MR).into_raw(),
            max_srq: bar.read(regs::MAX_SRQ).into_raw(),
            max_ah: bar.read(regs::MAX_AH).into_raw(),
            max_eq: bar.read(regs::MAX_EQ).into_raw(),
            gid_table_len: bar.read(regs::GID_TABLE_LEN).into_raw(),
            num_db_pages: bar.read(regs::NUM_DB_PAGES).into_raw(),
            max_log_queue: bar.read(regs::MAX_LOG_QUEUE).into_raw(),
            max_sge: bar.read(regs::MAX_SGE).into_raw(),
            max_inline: bar.read(regs::MAX_INLINE).into_raw(),
            max_mr_pages: bar.read(regs::MAX_MR_PAGES).into_raw(),
            db_area_offset: bar.read(regs::DB_AREA_OFFSET).into_raw(),
            counters_offset: bar.read(regs::COUNTERS_OFFSET).into_raw(),
            num_counters: bar.read(regs::NUM_COUNTERS).into_raw(),
            qid_table_len: bar.read(regs::QID_TABLE_LEN).into_raw(),
            cmd_timeout_ms: bar.read(regs::CMD_TIMEOUT_MS).into_raw(),
        })?;
        let msix = u32::try_from(hw::MAX_MSIX_VECTORS)?;
        limit(dev, "REG_NUM_MSIX", c.num_msix, 1, msix)?;
        limit(dev, "REG_MAX_QP", c.max_qp, hw::FIRST_QPN, MAX_OBJECTS)?;
        limit(dev, "REG_MAX_CQ", c.max_cq, 1, MAX_OBJECTS)?;
        limit(dev, "REG_MAX_MR", c.max_mr, 1, MAX_OBJECTS)?;
        limit(dev, "REG_MAX_SRQ", c.max_srq, 0, MAX_OBJECTS)?;
        limit(dev, "REG_MAX_AH", c.max_ah, 0, MAX_OBJECTS)?;
        // EQ numbers are 8 bits in the EQ doorbell.
        limit(dev, "REG_MAX_EQ", c.max_eq, hw::EQN_FIRST_COMPLETION, 256)?;
        limit(
            dev,
            "REG_GID_TABLE_LEN",
            c.gid_table_len,
            1,
            hw::GID_TABLE_LEN,
        )?;
        let pages = u32::try_from(hw::NUM_DB_PAGES)?;
        limit(dev, "REG_NUM_DB_PAGES", c.num_db_pages, 1, pages)?;
        limit(
            dev,
            "REG_MAX_LOG_QUEUE",
            c.max_log_queue,
            0,
            hw::MAX_LOG_QUEUE,
        )?;
        limit(dev, "REG_MAX_SGE", c.max_sge, 1, hw::MAX_SGE)?;
        limit(dev, "REG_MAX_INLINE", c.max_inline, 0, hw::MAX_INLINE)?;
        limit(dev, "REG_MAX_MR_PAGES", c.max_mr_pages, 1, hw::MAX_MR_PAGES)?;
        let qids = u32::try_from(hw::QID_TABLE_LEN)?;
        limit(dev, "REG_QID_TABLE_LEN", c.qid_table_len, 0, qids)?;
        limit(
            dev,
            "REG_CMD_TIMEOUT_MS",
            c.cmd_timeout_ms,
            1,
            MAX_CMD_TIMEOUT_MS,
        )?;
        bar_area(
            dev,
            "REG_DB_AREA_OFFSET",
            c.db_area_offset,
            c.num_db_pages,
            hw::DB_PAGE_SIZE,
            hw::DB_PAGE_SIZE,
        )?;
        // The kernel's doorbells are typed registers at the interface's offsets
        // (`regs::DB_SQ`, ...): a device with its doorbell pages elsewhere is not one this
        // driver can ring.
        if usize::try_from(c.db_area_offset)? != hw::DB_AREA_OFFSET {
            dev_err!(
                dev,
                "REG_DB_AREA_OFFSET reports {:#x}; this driver's doorbell registers are at {:#x}\n",
                c.db_area_offset,
                hw::DB_AREA_OFFSET
            );
            return Err(EIO);
        }
        bar_area(
            dev,
            "REG_COUNTERS_OFFSET",
            c.counters_offset,
            c.num_counters,
            8,
            8,
        )?;
        Ok(c)
    }

    /// Logs the capabilities and limits.
    fn log(&self, dev: &device::Device) {
        dev_info!(
            dev,
            "hardware interface {}.{}, capabilities {:#x} [{}]\n",
            self.if_major,
            self.if_minor,
            self.flags,
            CapNames(self.flags)
        );
        dev_info!(
            dev,
            "limits: {} QPs, {} CQs, {} MRs, {} SRQs, {} AHs, {} EQs, {} MSI-X vectors, {} GIDs, {} contexts, queues of 2^{}, {} SGEs, {} inline bytes, {} MR pages, {} counters; command timeout {} ms\n",
            self.max_qp,
            self.max_cq,
            self.max_mr,
            self.max_srq,
            self.max_ah,
            self.max_eq,
            self.num_msix,
            self.gid_table_len,
            self.num_db_pages,
            self.max_log_queue,
            self.max_sge,
            self.max_inline,
            self.max_mr_pages,
            self.num_counters,
            self.cmd_timeout_ms
        );
    }

    /// Whether the device has all the `hw::CAP_*` bits in `caps`.
    pub(crate) fn has(&self, caps: u32) -> bool {
        self.flags & caps == caps
    }
}

/// Checks the identification register and the interface version (bring-up step 1).
///
/// Returns the interface's major and minor version.
fn identify(dev: &device::Device, bar: &SharedBar) -> Result<(u16, u16)> {
    let (id, version) =
        bar.with(|bar| (bar.read(regs::ID).into_raw(), bar.read(regs::IF_VERSION)))?;
    if id != hw::ID_MAGIC {
        let why = if id == u32::MAX {
            ": the device does not respond"
        } else {
            ""
        };
        dev_err!(
            dev,
            "unexpected identification register {:#010x} (expected {:#010x}){}\n",
            id,
            hw::ID_MAGIC,
            why
        );
        return Err(ENODEV);
    }
    let major = u16::try_from(version.major().get())?;
    let minor = u16::try_from(version.minor().get())?;
    if major != hw::IF_VERSION_MAJOR {
        dev_err!(
            dev,
            "unsupported hardware interface version {}.{} (REG_IF_VERSION {:#010x}); this driver supports version {}.x\n",
            major,
            minor,
            version.into_raw(),
            hw::IF_VERSION_MAJOR
        );
        return Err(ENODEV);
    }
    if minor > hw::IF_VERSION_MINOR {
        dev_info!(
            dev,
            "hardware interface {}.{} is newer than this driver's {}.{}; using {}.{}\n",
            major,
            minor,
            hw::IF_VERSION_MAJOR,
            hw::IF_VERSION_MINOR,
            hw::IF_VERSION_MAJOR,
            hw::IF_VERSION_MINOR
        );
    }
    Ok((major, minor))
}

/// Resets the device and waits until it is ready (bring-up step 2).
fn reset(dev: &device::Device, bar: &SharedBar) -> Result {
    bar.with(|bar| bar.write_reg(regs::DEV_CTRL::zeroed().with_reset(true)))?;
    // Writes are posted; the first status read orders the reset before it.
    let status = read_poll_timeout(
        || bar.with(|bar| bar.read(regs::DEV_STATUS)),
        |status: &regs::DEV_STATUS| status.ready().into_bool(),
        Delta::from_micros(100),
        RESET_TIMEOUT,
    )
    .inspect_err(|e| {
        dev_err!(
            dev,
            "the device did not become ready within {} ms of a reset (error {})\n",
            RESET_TIMEOUT.as_millis(),
            e.to_errno()
        );
    })?;
    if status.fatal().into_bool() || status.enabled().into_bool() {
        dev_err!(
            dev,
            "the device is not idle after a reset (status {:#x})\n",
            status.into_raw()
        );
        return Err(EIO);
    }
    Ok(())
}

/// Lets the device process commands and doorbells (bring-up step 5).
fn enable(dev: &device::Device, bar: &SharedBar) -> Result {
    let status = bar.with(|bar| {
        bar.write_reg(regs::DEV_CTRL::zeroed().with_enable(true));
        bar.read(regs::DEV_STATUS)
    })?;
    if !status.enabled().into_bool() || status.fatal().into_bool() {
        dev_err!(
            dev,
            "enabling the device failed (status {:#x})\n",
            status.into_raw()
        );
        return Err(EIO);
    }
    Ok(())
}

/// Resets the device when dropped: the last word to the device, after everything that uses it
/// and before the memory it could write is freed.
struct DeviceReset {
    dev: ARef<device::Device>,
    bar: Arc<SharedBar>,
    armed: Atomic<bool>,
}

impl DeviceReset {
    fn new(dev: &device::Device, bar: &Arc<SharedBar>) -> Self {
        Self {
            dev: dev.into(),
            bar: bar.clone(),
            armed: Atomic::new(true),
        }
    }

    /// Resets the device now; stays armed.
    fn reset(&self) -> Result {
        reset(&self.dev, &self.bar)
    }

    /// Resets the device, once.
    fn finish(&self) {
        if self.armed.xchg(false, Relaxed) {
            // A device that cannot be reset has been reported; there is nothing more to do.
            let _ = self.reset();
        }
    }
}

impl Drop for DeviceReset {
    fn drop(&mut self) {
        self.finish();
    }
}

/// A bound ferroce function: the driver's per-device state.
///
/// Fields drop in declaration order. Whatever uses the queues (the ib_device registration,
/// MSI-X handlers) goes before `reset`; `reset` stops the device before the queues' memory
/// (`cmdq`, `eqs`) is freed. BAR0 stays mapped while any of them holds it.
pub(crate) struct FerroceDevice<'bound> {
    /// The PCI function.
    pub(crate) pdev: &'bound pci::Device<Bound>,
    /// The registered RDMA device; taken down first, at unbind, while the queues still work.
    rdma: Pin<KBox<Mutex<Option<RdmaPort>>>>,
    /// MSI-X: vector 0 for EQ 0, 1 for EQ 1 (0 for both on a single-vector device), one per
    /// completion EQ after them.
    _irqs: pci::IrqHandlers<'bound, VectorHandler>,
    /// Resets the device when dropped.
    reset: DeviceReset,
    /// The command queue.
    pub(crate) cmdq: Arc<Cmdq>,
    /// The completion EQs (EQ 2 on), one per MSI-X vector from 2 on.
    pub(crate) ceqs: CompletionEqs,
    /// EQ 0 (async) and EQ 1 (command).
    pub(crate) eqs: EventQueues,
}

impl<'bound> FerroceDevice<'bound> {
    /// Brings the function up.
    ///
    /// # Errors
    ///
    /// Every failure is logged. [`ENODEV`] for a function that is not a ferroce device or has an
    /// unsupported interface version, [`ETIMEDOUT`] for a device that does not answer commands,
    /// [`EIO`] for one that reports nonsense. On failure the device is left reset, with no DMA
    /// to the freed queues.
    pub(crate) fn probe(pdev: &'bound pci::Device<Core<'_>>) -> Result<Self> {
        pdev.enable_device_mem()?;
        pdev.set_master();
        // The device addresses all of memory (BufDesc and doorbell records are 64-bit).
        pdev.set_dma_mask_and_coherent(DmaMask::new::<64>())?;
        let bar = SharedBar::map(pdev)?;
        let bound: &device::Device<Bound> = pdev.as_ref();
        let dev: &device::Device = bound;

        let (major, minor) = identify(dev, &bar)?;
        // From here on, any failure resets the device after the queues have been torn down
        // (locals drop in reverse order).
        let reset = DeviceReset::new(dev, &bar);
        reset.reset()?;
        let caps = Caps::read(dev, &bar, major, minor)?;
        caps.log(dev);
        let state = DeviceState::new(pdev)?;
        let eqs = EventQueues::new(bound, &bar, caps.num_msix, state.clone())?;
        let cmdq = Cmdq::new(
            bound,
            &bar,
            caps.cmd_timeout_ms,
            eqs.cmd_eq.clone(),
            state.clone(),
        )?;
        enable(dev, &bar)?;

        // The first command proves the queue works.
        cmdq.nop()?;
        // One completion EQ per remaining vector (created by command, still polled).
        let completion_eqs = caps
            .num_msix
            .saturating_sub(FIRST_COMPLETION_VECTOR)
            .min(MAX_COMPLETION_EQS);
        let ceqs = CompletionEqs::new(bound, &bar, &cmdq, completion_eqs)?;

        // Interrupts: each EQ drains on its own vector (EQ 0 and EQ 1 share vector 0 on a
        // device with a single vector), each completion EQ on the vector it was created with.
        let msix = pci::IrqTypes::default().with(pci::IrqType::MsiX);
        let control_vectors = caps.num_msix.min(FIRST_COMPLETION_VECTOR);
        let vectors = control_vectors + completion_eqs;
        let irqs = pci::IrqHandlers::new(pdev, vectors, vectors, msix, c"ferroce", |vector| {
            Ok(match vector {
                ASYNC_VECTOR if control_vectors == 1 => VectorHandler::Control(EventQueues {
                    async_eq: eqs.async_eq.clone(),
                    cmd_eq: eqs.cmd_eq.clone(),
                }),
                ASYNC_VECTOR => VectorHandler::Async(EqIrq(eqs.async_eq.clone())),
                CMD_VECTOR => VectorHandler::Command(EqIrq(eqs.cmd_eq.clone())),
                _ => {
                    let i = usize::try_from(vector - FIRST_COMPLETION_VECTOR)?;
                    VectorHandler::Completion(EqIrq(ceqs.eqs.get(i).ok_or(EINVAL)?.clone()))
                }
            })
        })?;
        eqs.async_eq.enable_interrupts()?;
        eqs.cmd_eq.enable_interrupts()?;
        for eq in ceqs.eqs.iter() {
            eq.enable_interrupts()?;
        }
        cmdq.use_interrupts(true);

        let port = cmdq.query_port()?;
        state.set_nic_port_active(port.is_active());
        dev_info!(
            dev,
            "port {}: {}, active MTU {}, max MTU {}, companion MAC {}\n",
            PORT,
            port.state_name(),
            port.active_mtu_bytes(),
            port.max_mtu_bytes(),
            port.mac
        );
        dev_info!(
            dev,
            "ready: command queue of {} entries (timeout {} ms), EQ {} async, EQ {} command\n",
            cmdq.size(),
            cmdq.timeout_ms(),
            eqs.async_eq.eqn(),
            eqs.cmd_eq.eqn()
        );
        let rdma = RdmaPort::register(pdev, &cmdq, &bar, &ceqs, &caps, port.mac, &state)?;
        let events = IbEvents::new(rdma.ib.handle())?;
        rdma.ib.device().set_ib_events(events.clone());
        eqs.async_eq.dispatcher().set_ib_events(events);
        for eq in ceqs.eqs.iter() {
            eq.dispatcher().set_device(rdma.ib.handle());
        }
        let rdma = KBox::pin_init(new_mutex!(Some(rdma), "ferroce::rdma"), GFP_KERNEL)?;
        Ok(Self {
            pdev,
            rdma,
            _irqs: irqs,
            reset,
            ceqs,
            cmdq,
            eqs,
        })
    }

    /// Stops the device (on unbind): takes the last events, disables the command queue,
    /// destroys the EQs and resets the device, so that nothing is DMA'd after this returns.
    pub(crate) fn shutdown(&self) {
        // The RDMA device goes first: unregistering it removes its GIDs through the queues.
        drop(self.rdma.lock().take());
        let dev: &device::Device = self.pdev.as_ref();
        // Events the device posted since the last drain (port changes, a fatal error).
        let _ = self.eqs.async_eq.poll();
        let _ = self.eqs.cmd_eq.poll();
        self.ceqs.destroy();
        self.cmdq.disable();
        self.eqs.destroy();
        self.reset.finish();
        dev_info!(
            dev,
            "stopped ({} async and {} command events handled)\n",
            self.eqs.async_eq.events(),
            self.eqs.cmd_eq.events()
        );
    }
}
