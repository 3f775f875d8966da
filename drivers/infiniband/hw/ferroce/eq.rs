// SPDX-License-Identifier: GPL-2.0

//! Event queues: EQ 0 (async events) and EQ 1 (command completions).
//!
//! Both are created through the EQ setup registers, with their rings in DMA-coherent memory.
//! [`EventQueue::handle`] drains a queue (owner bits, `hw::Ring` arithmetic), dispatches each
//! entry by type and returns the consumed entries to the device through `REG_EQ_DB`, re-arming
//! the queue once interrupts are enabled. It runs in hard-IRQ context: the queue state sits in a
//! [`SpinLockIrq`], everything else is atomics, so an MSI-X handler has only to call it (see
//! [`EqIrq`] and [`EventQueues`], which implement [`irq::Handler`]).
//!
//! Every value read from an EQE is validated before use; an entry that makes no sense is counted
//! and reported, never used as an index.

use kernel::{
    device::{
        self,
        Bound, //
    },
    dma::Coherent,
    io::{
        io_project,
        io_read,
        Io, //
    },
    irq::{
        self,
        IrqReturn, //
    },
    prelude::*,
    rdma::{
        self,
        DeviceHandle, //
    },
    sync::{
        aref::ARef,
        atomic::{
            Atomic,
            Relaxed, //
        },
        barrier::{
            dma_mb,
            Read, //
        },
        new_condvar,
        new_spinlock_irq,
        Arc,
        CondVar,
        CondVarTimeoutResult,
        SetOnce,
        SpinLockIrq, //
    },
    time::{
        delay::fsleep,
        msecs_to_jiffies,
        Delta, //
    },
};

use crate::{
    cmdq, hw,
    ib_events::IbEvents,
    regs::{
        self,
        SharedBar, //
    },
    state::DeviceState,
    verbs::RoceDevice,
};

/// log2 of the async EQ's entries.
const ASYNC_EQ_LOG_SIZE: u32 = 8;
/// log2 of the command EQ's entries: at least the command ring's, so that command events never
/// overrun it while commands are serialized.
const CMD_EQ_LOG_SIZE: u32 = 7;
const _: () = assert!(CMD_EQ_LOG_SIZE >= cmdq::CMDQ_LOG_SIZE);

/// MSI-X vector of the async EQ.
pub(crate) const ASYNC_VECTOR: u32 = 0;
/// MSI-X vector of the command EQ (vector 0 too if the device has a single vector).
pub(crate) const CMD_VECTOR: u32 = 1;

/// How many bogus entries per queue are reported in the log (all are counted).
const BOGUS_REPORTS: u32 = 8;

/// What an event queue does with its entries.
pub(crate) trait EqDispatch: Send + Sync {
    /// Name of the queue, for messages.
    const NAME: &'static str;

    /// Handles one entry, in any context (hard IRQ included).
    ///
    /// Returns `false` if the entry is not valid for this queue (unknown type, fields out of
    /// range); the caller counts and reports it.
    fn dispatch(&self, dev: &device::Device, eqe: &hw::Eqe) -> bool;
}

/// Whether EQ `eqn` exists in the device; destroys it on drop.
///
/// A field of [`EventQueue`] declared before the ring, so that the device stops writing the ring
/// before its memory is freed, also when probe fails half-way.
struct EqSetup {
    dev: ARef<device::Device>,
    bar: Arc<SharedBar>,
    /// The EQ number: fixed for EQ 0/1, assigned by `CMD_CREATE_EQ` for completion EQs.
    eqn: Atomic<u32>,
    /// `None` for EQ 0/1 (setup registers), the command queue for completion EQs.
    cmdq: Option<Arc<cmdq::Cmdq>>,
    live: Atomic<bool>,
}

impl EqSetup {
    fn eqn(&self) -> u8 {
        // Only ever stored from a `u8`.
        u8::try_from(self.eqn.load(Relaxed)).unwrap_or(u8::MAX)
    }

    /// Creates a completion EQ with `CMD_CREATE_EQ`; the device picks its number.
    fn create_by_command(&self, buf: &Coherent<[u8]>, ring: hw::Ring, vector: u32) -> Result {
        let cmdq = self.cmdq.as_ref().ok_or(EINVAL)?;
        let done = cmdq.exec(&hw::CreateEqCmd {
            ring: hw::BufDesc {
                addr: buf.dma_address(),
                page_count: 0,
                log_page_size: 0,
                rsvd: [0; 3],
            },
            log_size: u8::try_from(ring.log_size())?,
            rsvd0: 0,
            vector: u16::try_from(vector)?,
            rsvd1: 0,
        })?;
        // The device's answer is only trusted within the range of completion EQ numbers.
        let eqn = u8::try_from(done.eqn)
            .ok()
            .filter(|&n| u32::from(n) >= hw::EQN_FIRST_COMPLETION)
            .ok_or_else(|| {
                dev_err!(
                    self.dev,
                    "the device created a completion EQ with number {}\n",
                    done.eqn
                );
                EIO
            })?;
        self.eqn.store(eqn.into(), Relaxed);
        self.live.store(true, Relaxed);
        Ok(())
    }

    /// Creates the EQ in the device from the setup registers.
    fn create(&self, buf: &Coherent<[u8]>, ring: hw::Ring, vector: u32) -> Result {
        let addr = buf.dma_address();
        let status = self.bar.with(|bar| {
            bar.write_reg(regs::EQ_SETUP_BASE_LO::from_raw(addr as u32));
            bar.write_reg(regs::EQ_SETUP_BASE_HI::from_raw((addr >> 32) as u32));
            bar.write_reg(regs::EQ_SETUP_LOG_SIZE::from_raw(ring.log_size()));
            bar.write_reg(regs::EQ_SETUP_VECTOR::from_raw(vector));
            bar.write_reg(
                regs::EQ_SETUP_CTRL::zeroed()
                    .with_create(true)
                    .with_eqn(self.eqn()),
            );
            bar.read(regs::EQ_SETUP_STATUS).into_raw()
        })?;
        if status != u32::from(hw::STATUS_OK) {
            let (name, err) = cmdq::status_error(status);
            dev_err!(
                self.dev,
                "creating EQ {} failed: status {} ({})\n",
                self.eqn(),
                name,
                status
            );
            return Err(err);
        }
        self.live.store(true, Relaxed);
        Ok(())
    }

    fn is_live(&self) -> bool {
        self.live.load(Relaxed)
    }

    /// Destroys the EQ in the device, once. May sleep (completion EQs are destroyed by command).
    fn destroy(&self) {
        if self.live.xchg(false, Relaxed) {
            self.tell_device_destroyed();
        }
    }

    /// Tells the device that the EQ is gone (after `live` was cleared).
    fn tell_device_destroyed(&self) {
        if let Some(cmdq) = &self.cmdq {
            // A disabled queue (unbind) or a dead device: the reset that follows removes the EQ.
            let _ = cmdq.exec(&hw::DestroyEqCmd {
                eqn: self.eqn().into(),
                rsvd: 0,
            });
            return;
        }
        let status = self.bar.with(|bar| {
            bar.write_reg(regs::EQ_SETUP_CTRL::zeroed().with_eqn(self.eqn()));
            bar.read(regs::EQ_SETUP_STATUS).into_raw()
        });
        match status {
            Ok(status) if status == u32::from(hw::STATUS_OK) => (),
            Ok(status) => {
                dev_warn!(
                    self.dev,
                    "destroying EQ {} failed: status {} ({})\n",
                    self.eqn(),
                    cmdq::status_error(status).0,
                    status
                );
            }
            Err(_) => (),
        }
    }
}

impl Drop for EqSetup {
    fn drop(&mut self) {
        self.destroy();
    }
}

/// Mutable state of an event queue.
struct EqState {
    /// Consumer index: the next entry to look at.
    ci: u16,
}

/// An event queue: a ring of [`hw::Eqe`] written by the device, and its dispatcher.
#[pin_data]
pub(crate) struct EventQueue<D: EqDispatch> {
    dev: ARef<device::Device>,
    bar: Arc<SharedBar>,
    ring: hw::Ring,
    /// Destroys the EQ in the device when dropped; declared before `buf`, so dropped first.
    setup: EqSetup,
    buf: Coherent<[u8]>,
    #[pin]
    state: SpinLockIrq<EqState>,
    /// Re-arm after each drain: set once an interrupt handler is registered.
    irq_mode: Atomic<bool>,
    /// Entries handled.
    events: Atomic<u64>,
    /// Entries that made no sense.
    bogus: Atomic<u32>,
    #[pin]
    dispatch: D,
}

impl<D: EqDispatch> EventQueue<D> {
    /// Allocates the ring of EQ `eqn` and creates the queue in the device.
    ///
    /// # Errors
    ///
    /// Allocation failures, [`ENODEV`] if the BAR is gone, or the device's status for the setup
    /// write mapped to an errno (logged).
    fn new(
        dev: &device::Device<Bound>,
        bar: &Arc<SharedBar>,
        cmdq: Option<&Arc<cmdq::Cmdq>>,
        eqn: u8,
        log_size: u32,
        vector: u32,
        dispatch: impl PinInit<D, Error>,
    ) -> Result<Arc<Self>> {
        let ring = hw::Ring::new(log_size, hw::MAX_LOG_QUEUE).ok_or(EINVAL)?;
        let entries = usize::try_from(ring.size())?;
        let buf = Coherent::<u8>::zeroed_slice(dev, entries * hw::EQE_SIZE, GFP_KERNEL)?;
        let dev: &device::Device = dev;
        let dev: ARef<device::Device> = dev.into();
        // Built outside the initializer, whose initialized fields shadow locals.
        let setup = EqSetup {
            dev: dev.clone(),
            bar: bar.clone(),
            eqn: Atomic::new(eqn.into()),
            cmdq: cmdq.cloned(),
            live: Atomic::new(false),
        };
        let eq = Arc::pin_init(
            try_pin_init!(Self {
                dev,
                bar: bar.clone(),
                ring,
                setup,
                buf,
                state <- new_spinlock_irq!(EqState { ci: 0 }, "ferroce::eq"),
                irq_mode: Atomic::new(false),
                events: Atomic::new(0),
                bogus: Atomic::new(0),
                dispatch <- dispatch,
            }),
            GFP_KERNEL,
        )?;
        // The memory exists before the device learns its address; if creation fails, dropping
        // `eq` frees it (the EQ was never live).
        match cmdq {
            None => eq.setup.create(&eq.buf, ring, vector)?,
            Some(_) => eq.setup.create_by_command(&eq.buf, ring, vector)?,
        }
        Ok(eq)
    }

    /// The EQ number.
    pub(crate) fn eqn(&self) -> u8 {
        self.setup.eqn()
    }

    /// The dispatcher.
    pub(crate) fn dispatcher(&self) -> &D {
        &self.dispatch
    }

    /// Entries handled so far.
    pub(crate) fn events(&self) -> u64 {
        self.events.load(Relaxed)
    }

    /// Drains the queue: dispatches every new entry, returns them to the device and, once
    /// interrupts are enabled, re-arms it. Safe in any context, including the queue's MSI-X
    /// handler; concurrent callers are serialized.
    ///
    /// Returns [`IrqReturn::Handled`] if any entry was consumed.
    pub(crate) fn handle(&self) -> IrqReturn {
        match self.poll() {
            Ok(0) | Err(_) => IrqReturn::None,
            Ok(_) => IrqReturn::Handled,
        }
    }

    /// Drains the queue like [`Self::handle`] and returns the number of entries consumed.
    ///
    /// # Errors
    ///
    /// [`ENODEV`] if the BAR is gone (the entries are consumed all the same).
    pub(crate) fn poll(&self) -> Result<u32> {
        let mut state = self.state.lock();
        if !self.setup.is_live() {
            return Ok(0);
        }
        let mut consumed = 0;
        // At most one ring's worth per call: a device that keeps writing cannot keep us here.
        while consumed < self.ring.size() {
            let ci = state.ci;
            let Some(eqe) = self.entry(ci)? else {
                break;
            };
            state.ci = ci.wrapping_add(1);
            consumed += 1;
            self.events.fetch_add(1, Relaxed);
            if !self.dispatch.dispatch(&self.dev, &eqe) {
                self.report_bogus(ci, &eqe);
            }
        }
        let arm = self.irq_mode.load(Relaxed);
        if consumed > 0 || arm {
            let doorbell = hw::EqDoorbell {
                eqn: self.eqn(),
                ci: state.ci,
                arm,
            };
            self.bar
                .with(|bar| bar.write_reg(regs::EQ_DB::from_raw(doorbell.encode())))?;
        }
        Ok(consumed)
    }

    /// The entry at index `ci` if the device has written it (owner bit of the current pass).
    fn entry(&self, ci: u16) -> Result<Option<hw::Eqe>> {
        let slot = usize::try_from(self.ring.slot(ci))?;
        let off = slot * hw::EQE_SIZE;
        let owner: u8 = io_read!(&self.buf, [try: off + hw::EQE_OWNER_OFFSET]);
        if !self.ring.entry_valid(ci, owner) {
            return Ok(None);
        }
        // The device writes the body before the owner byte; read it only after seeing the owner.
        dma_mb(Read);
        let mut bytes = [0u8; hw::EQE_SIZE];
        io_project!(&self.buf, [try: off..off + hw::EQE_SIZE]).copy_to_slice(&mut bytes);
        Ok(Some(hw::Eqe::decode(&bytes)))
    }

    fn report_bogus(&self, ci: u16, eqe: &hw::Eqe) {
        let n = self.bogus.fetch_add(1, Relaxed);
        if n < BOGUS_REPORTS {
            let more = if n + 1 == BOGUS_REPORTS {
                " (further bogus entries are not reported)"
            } else {
                ""
            };
            dev_warn!(
                self.dev,
                "{} EQ {}: ignoring bogus entry {}: type {:#04x} subtype {:#04x} data {:#x} {:#x}{}\n",
                D::NAME,
                self.eqn(),
                ci,
                eqe.event_type,
                eqe.subtype,
                eqe.data0,
                eqe.data1,
                more
            );
        }
    }

    /// Makes every drain re-arm the queue, and arms it now: call once its interrupt handler is
    /// registered.
    ///
    /// # Errors
    ///
    /// [`ENODEV`] if the BAR is gone.
    pub(crate) fn enable_interrupts(&self) -> Result {
        self.irq_mode.store(true, Relaxed);
        self.poll().map(|_| ())
    }

    /// Destroys the queue in the device (once); later drains do nothing. May sleep.
    pub(crate) fn destroy(&self) {
        // Retired under the lock, so that no drain is half-way through when the device forgets
        // the EQ; the device is told outside it, since a command sleeps.
        let was_live = {
            let _state = self.state.lock();
            self.setup.live.xchg(false, Relaxed)
        };
        if was_live {
            self.setup.tell_device_destroyed();
        }
    }
}

/// An MSI-X handler for one event queue.
pub(crate) struct EqIrq<D: EqDispatch>(pub(crate) Arc<EventQueue<D>>);

impl<D: EqDispatch> irq::Handler for EqIrq<D> {
    fn handle(&self) -> IrqReturn {
        self.0.handle()
    }
}

/// An asynchronous event, decoded and validated from an EQ 0 entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AsyncEvent {
    /// The port went up.
    PortActive,
    /// The port went down.
    PortDown,
    /// The device stopped (`hw::FATAL_*`); only a reset recovers.
    DeviceFatal(u32),
    /// A QP event (`QpFatal`, `QpReqErr`, `QpAccessErr`, `QpLastWqeReached`, `SqDrained` or
    /// `CommEst`), with the QPN and the subtype (`hw::WQE_ERR_*` for `QpFatal`).
    Qp {
        /// The event type.
        event: hw::EventType,
        /// The QP number.
        qpn: u32,
        /// The subtype.
        subtype: u8,
    },
    /// A CQ died (overrun or DMA error).
    CqError(u32),
    /// An SRQ event: `SrqLimit` or `SrqErr`.
    Srq {
        /// The event type.
        event: hw::EventType,
        /// The SRQ number.
        srqn: u32,
    },
    /// An on-demand MR's pages are missing.
    PageFault(crate::odp::PageFault),
    /// A doorbell was rejected.
    DoorbellError {
        /// The context (doorbell page).
        ctx: u32,
        /// The raw doorbell value.
        value: u32,
    },
}

impl AsyncEvent {
    /// Decodes an entry of the async EQ; `None` if it is not a valid async event.
    pub(crate) fn decode(eqe: &hw::Eqe) -> Option<Self> {
        let event_type = hw::EventType::from_raw(eqe.event_type)?;
        let event = match event_type {
            hw::EventType::PortActive | hw::EventType::PortDown => {
                // There is one port.
                if eqe.data0 != 1 {
                    return None;
                }
                if event_type == hw::EventType::PortActive {
                    Self::PortActive
                } else {
                    Self::PortDown
                }
            }
            hw::EventType::DeviceFatal => Self::DeviceFatal(eqe.data0),
            hw::EventType::QpFatal
            | hw::EventType::QpReqErr
            | hw::EventType::QpAccessErr
            | hw::EventType::QpLastWqeReached
            | hw::EventType::SqDrained
            | hw::EventType::CommEst => Self::Qp {
                event: event_type,
                qpn: eqe.data0,
                subtype: eqe.subtype,
            },
            hw::EventType::CqError => Self::CqError(eqe.data0),
            hw::EventType::SrqLimit | hw::EventType::SrqErr => Self::Srq {
                event: event_type,
                srqn: eqe.data0,
            },
            hw::EventType::DoorbellError => Self::DoorbellError {
                ctx: eqe.data0,
                value: eqe.data1,
            },
            hw::EventType::Completion | hw::EventType::CmdDone => return None,
            hw::EventType::PageFault => {
                let count = Some(eqe.data2).filter(|&n| n > 0)?;
                Self::PageFault(crate::odp::PageFault {
                    key: eqe.data0,
                    first: eqe.data1,
                    count,
                    write: eqe.subtype & hw::PAGE_FAULT_WRITE != 0,
                })
            }
        };
        Some(event)
    }
}

/// Dispatcher of EQ 0: port state, device fatal, object errors.
pub(crate) struct AsyncEvents {
    /// Where the port and fatal state go.
    device_state: Arc<DeviceState>,
    /// Where device-level events go once the RDMA device is registered.
    ib_events: SetOnce<Arc<IbEvents>>,
}

impl AsyncEvents {
    fn new(device_state: Arc<DeviceState>) -> Self {
        Self {
            device_state,
            ib_events: SetOnce::new(),
        }
    }

    /// Sends device-level events to the registered RDMA device from now on.
    pub(crate) fn set_ib_events(&self, events: Arc<IbEvents>) {
        self.ib_events.populate(events);
    }

    /// Acts on a validated async event.
    ///
    /// This is the hook for ib_core events: port up/down become `IB_EVENT_PORT_ACTIVE` /
    /// `IB_EVENT_PORT_ERR`, a fatal error `IB_EVENT_DEVICE_FATAL`, object errors the QP/CQ/SRQ
    /// events, once the ib_device is registered.
    fn deliver(&self, dev: &device::Device, event: AsyncEvent) {
        match event {
            AsyncEvent::PortActive | AsyncEvent::PortDown => {
                let active = matches!(event, AsyncEvent::PortActive);
                self.device_state.set_nic_port_active(active);
                dev_info!(
                    dev,
                    "port 1 is {}\n",
                    if active { "ACTIVE" } else { "DOWN" }
                );
                if let Some(events) = self.ib_events.as_ref() {
                    events.nic_port_changed();
                }
            }
            AsyncEvent::DeviceFatal(code) => {
                self.device_state.set_fatal(code);
                dev_err!(
                    dev,
                    "device fatal error {} ({}); the device stopped\n",
                    code,
                    hw::fatal_name(code)
                );
                if let Some(events) = self.ib_events.as_ref() {
                    events.device_fatal();
                }
            }
            AsyncEvent::Qp {
                event,
                qpn,
                subtype,
            } => {
                let ib_event = match event {
                    hw::EventType::QpFatal => rdma::QpEvent::Fatal,
                    hw::EventType::QpReqErr => rdma::QpEvent::RequestError,
                    hw::EventType::QpAccessErr => rdma::QpEvent::AccessError,
                    hw::EventType::QpLastWqeReached => rdma::QpEvent::LastWqeReached,
                    hw::EventType::SqDrained => rdma::QpEvent::SqDrained,
                    _ => rdma::QpEvent::CommEstablished,
                };
                if matches!(
                    ib_event,
                    rdma::QpEvent::Fatal | rdma::QpEvent::RequestError | rdma::QpEvent::AccessError
                ) {
                    dev_warn!(
                        dev,
                        "QP {} event {:#04x} (subtype {})\n",
                        qpn,
                        u8::from(event),
                        subtype
                    );
                }
                if let Some(events) = self.ib_events.as_ref() {
                    events.qp_event(qpn, ib_event);
                }
            }
            AsyncEvent::CqError(cqn) => {
                dev_warn!(dev, "CQ {} error\n", cqn);
                if let Some(events) = self.ib_events.as_ref() {
                    events.cq_error(cqn);
                }
            }
            AsyncEvent::Srq { event, srqn } => {
                let ib_event = if event == hw::EventType::SrqLimit {
                    rdma::SrqEvent::LimitReached
                } else {
                    dev_warn!(dev, "SRQ {} error\n", srqn);
                    rdma::SrqEvent::Error
                };
                if let Some(events) = self.ib_events.as_ref() {
                    events.srq_event(srqn, ib_event);
                }
            }
            AsyncEvent::PageFault(fault) => {
                if let Some(events) = self.ib_events.as_ref() {
                    events.page_fault(fault);
                }
            }
            AsyncEvent::DoorbellError { ctx, value } => {
                // A process's bad doorbell hurts only its own queues: worth a note, not a
                // kernel warning.
                self.device_state.checks().doorbell_error(dev, ctx, value);
            }
        }
    }
}

impl EqDispatch for AsyncEvents {
    const NAME: &'static str = "async";

    fn dispatch(&self, dev: &device::Device, eqe: &hw::Eqe) -> bool {
        match AsyncEvent::decode(eqe) {
            Some(event) => {
                self.deliver(dev, event);
                true
            }
            None => false,
        }
    }
}

/// Dispatcher of EQ 1: each command-done event wakes the commands waiting, which then look at
/// their own slot of the completion ring.
#[pin_data]
pub(crate) struct CmdEvents {
    /// Command-done events seen.
    #[pin]
    done: SpinLockIrq<u64>,
    #[pin]
    waiters: CondVar,
}

impl CmdEvents {
    fn new() -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            done <- new_spinlock_irq!(0, "ferroce::cmd_done"),
            waiters <- new_condvar!("ferroce::cmd_waiters"),
        })
    }

    /// The command-done events seen so far: take it before looking at the completion ring,
    /// then [`Self::wait`] for the next one.
    pub(crate) fn seen(&self) -> u64 {
        *self.done.lock()
    }

    /// Sleeps until a command-done event arrives after `seen` events, or for at most `max`.
    ///
    /// The caller checks the completion ring itself afterwards: this is only a wake-up, and a
    /// lost or bogus event costs at most `max`.
    pub(crate) fn wait(&self, seen: u64, max: Delta) {
        // Callers pass at most a second; anything else is clamped.
        let ms = u32::try_from(max.as_millis_ceil())
            .unwrap_or(1)
            .clamp(1, 1000);
        let mut done = self.done.lock();
        if *done != seen {
            return;
        }
        if let CondVarTimeoutResult::Signal { .. } = self
            .waiters
            .wait_interruptible_timeout(&mut done, msecs_to_jiffies(ms))
        {
            // With a signal pending the wait returns at once; sleep instead of spinning.
            drop(done);
            fsleep(Delta::from_millis(1));
        }
    }
}

impl EqDispatch for CmdEvents {
    const NAME: &'static str = "command";

    fn dispatch(&self, _dev: &device::Device, eqe: &hw::Eqe) -> bool {
        // data1 is a command ring index: 16 bits.
        if eqe.event_type != u8::from(hw::EventType::CmdDone) || eqe.data1 > u32::from(u16::MAX) {
            return false;
        }
        *self.done.lock() += 1;
        self.waiters.notify_all();
        true
    }
}

/// EQ 0 and EQ 1.
#[derive(Clone)]
pub(crate) struct EventQueues {
    /// EQ 0: async events.
    pub(crate) async_eq: Arc<EventQueue<AsyncEvents>>,
    /// EQ 1: command completions.
    pub(crate) cmd_eq: Arc<EventQueue<CmdEvents>>,
}

impl EventQueues {
    /// Creates EQ 0 and EQ 1 in the device (bring-up step 3).
    ///
    /// # Errors
    ///
    /// As [`EventQueue::new`]; nothing is left in the device on failure.
    pub(crate) fn new(
        dev: &device::Device<Bound>,
        bar: &Arc<SharedBar>,
        num_msix: u32,
        device_state: Arc<DeviceState>,
    ) -> Result<Self> {
        let cmd_vector = if num_msix > CMD_VECTOR {
            CMD_VECTOR
        } else {
            ASYNC_VECTOR
        };
        let async_eq = EventQueue::new(
            dev,
            bar,
            None,
            hw::EQN_ASYNC as u8,
            ASYNC_EQ_LOG_SIZE,
            ASYNC_VECTOR,
            Ok::<_, Error>(AsyncEvents::new(device_state)),
        )?;
        let cmd_eq = EventQueue::new(
            dev,
            bar,
            None,
            hw::EQN_CMD as u8,
            CMD_EQ_LOG_SIZE,
            cmd_vector,
            CmdEvents::new(),
        )?;
        Ok(Self { async_eq, cmd_eq })
    }

    /// Drains both queues (for a vector they share). IRQ-safe.
    pub(crate) fn handle(&self) -> IrqReturn {
        let a = self.async_eq.handle();
        let c = self.cmd_eq.handle();
        if matches!(a, IrqReturn::Handled) || matches!(c, IrqReturn::Handled) {
            IrqReturn::Handled
        } else {
            IrqReturn::None
        }
    }

    /// Destroys both queues in the device.
    pub(crate) fn destroy(&self) {
        self.cmd_eq.destroy();
        self.async_eq.destroy();
    }
}

impl irq::Handler for EventQueues {
    fn handle(&self) -> IrqReturn {
        EventQueues::handle(self)
    }
}

/// log2 of a completion EQ's entries.
const COMPLETION_EQ_LOG_SIZE: u32 = 10;
/// First MSI-X vector of the completion EQs (after EQ 0's and EQ 1's).
pub(crate) const FIRST_COMPLETION_VECTOR: u32 = 2;
/// Completion EQs at most (one per vector).
pub(crate) const MAX_COMPLETION_EQS: u32 = 4;

/// Dispatcher of a completion EQ: "CQ n has a completion" events, which call the CQ's
/// completion handler.
pub(crate) struct CompletionEvents {
    /// Completion events seen.
    completions: Atomic<u64>,
    /// The RDMA device whose CQs the events name, once registered.
    device: SetOnce<DeviceHandle<RoceDevice>>,
}

impl CompletionEvents {
    /// Sends completion events to the CQs of the registered device from now on.
    pub(crate) fn set_device(&self, handle: DeviceHandle<RoceDevice>) {
        self.device.populate(handle);
    }
}

impl EqDispatch for CompletionEvents {
    const NAME: &'static str = "completion";

    fn dispatch(&self, _dev: &device::Device, eqe: &hw::Eqe) -> bool {
        if eqe.event_type != u8::from(hw::EventType::Completion) {
            return false;
        }
        self.completions.fetch_add(1, Relaxed);
        if let Some(handle) = self.device.as_ref() {
            // A CQ that is gone (or a bogus number) gets nothing.
            handle.with_atomic(|dev| {
                if dev
                    .cqs()
                    .with(eqe.data0, |cq| cq.notify_completion())
                    .is_none()
                {
                    dev.checks().bad_event("CQ", eqe.data0);
                }
            });
        }
        true
    }
}

/// The completion EQs, one per MSI-X vector from [`FIRST_COMPLETION_VECTOR`] on, created with
/// `CMD_CREATE_EQ` once the command queue works.
pub(crate) struct CompletionEqs {
    pub(crate) eqs: KVec<Arc<EventQueue<CompletionEvents>>>,
}

impl CompletionEqs {
    /// Creates `count` completion EQs on vectors `FIRST_COMPLETION_VECTOR..`.
    ///
    /// # Errors
    ///
    /// Allocation failures and the device's answer to `CMD_CREATE_EQ`; the EQs created so far are
    /// destroyed.
    pub(crate) fn new(
        dev: &device::Device<Bound>,
        bar: &Arc<SharedBar>,
        cmdq: &Arc<cmdq::Cmdq>,
        count: u32,
    ) -> Result<Self> {
        let mut eqs = KVec::with_capacity(usize::try_from(count)?, GFP_KERNEL)?;
        for i in 0..count {
            let eq = EventQueue::new(
                dev,
                bar,
                Some(cmdq),
                0,
                COMPLETION_EQ_LOG_SIZE,
                FIRST_COMPLETION_VECTOR + i,
                Ok::<_, Error>(CompletionEvents {
                    completions: Atomic::new(0),
                    device: SetOnce::new(),
                }),
            )?;
            eqs.push(eq, GFP_KERNEL)?;
        }
        Ok(Self { eqs })
    }

    /// Destroys the queues in the device.
    pub(crate) fn destroy(&self) {
        for eq in self.eqs.iter() {
            eq.destroy();
        }
    }
}

/// The handler of one MSI-X vector: each EQ has its own, but for EQ 0 and EQ 1 on a
/// single-vector device.
pub(crate) enum VectorHandler {
    /// The only vector of a single-vector device: drains EQ 0 and EQ 1.
    Control(EventQueues),
    /// EQ 0's vector.
    Async(EqIrq<AsyncEvents>),
    /// EQ 1's vector.
    Command(EqIrq<CmdEvents>),
    /// A completion EQ's vector.
    Completion(EqIrq<CompletionEvents>),
}

impl irq::Handler for VectorHandler {
    fn handle(&self) -> IrqReturn {
        match self {
            Self::Control(eqs) => eqs.handle(),
            Self::Async(eq) => eq.0.handle(),
            Self::Command(eq) => eq.0.handle(),
            Self::Completion(eq) => eq.0.handle(),
        }
    }
}
