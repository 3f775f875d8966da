// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The device model: state, the work loop and reset.
//!
//! [`Device::bar0_read`] / [`Device::bar0_write`] are called from the vfio-user thread and only
//! decode: registers are latched, doorbells are translated and recorded on their queue, and the
//! object is queued for the device thread. [`Device::process`] runs on the device thread and does
//! everything that touches guest memory or raises interrupts.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferroce_hw::*;
use serde::Serialize;

use crate::bus::Bus;
use crate::clock::Clock;
use crate::cmdq::Cmdq;
use crate::counters::Counters;
use crate::doorbell::Doorbells;
use crate::engine::Engine;
use crate::interrupts::InterruptSink;
use crate::latency::DoorbellLatency;
use crate::memory::GuestMemory;
use crate::objects::Objects;
use crate::records::RecordWatch;
use crate::trace::Tracer;

mod regs;

pub use regs::Registers;

/// Device limits and identity.
#[derive(Clone, Debug, Serialize)]
pub struct DeviceConfig {
    /// MSI-X vectors.
    pub msix_vectors: u16,
    /// MAC of the companion Ethernet function.
    pub mac: [u8; 6],
    /// Maximum QPs.
    pub max_qp: u32,
    /// Maximum CQs.
    pub max_cq: u32,
    /// Maximum MRs.
    pub max_mr: u32,
    /// Maximum SRQs.
    pub max_srq: u32,
    /// Maximum AHs.
    pub max_ah: u32,
    /// Maximum EQs.
    pub max_eq: u32,
    /// `REG_CMD_TIMEOUT_MS`: how long the driver waits for a command.
    pub cmd_timeout_ms: u32,
    /// `REG_QID_TABLE_LEN`: local QIDs per context (at most `QID_TABLE_LEN`).
    pub qid_table_len: u32,
    /// Offer `CAP_DB_RECORD`: QPs whose doorbell records the device polls.
    pub db_record: bool,
    /// Offer `CAP_XRC`: XRC QPs and SRQs.
    pub xrc: bool,
    /// Offer `CAP_ODP`: on-demand paging MRs.
    pub odp: bool,
    /// Polling records: µs of polling without sleep after activity
    /// ([`PollWindow`](crate::records::PollWindow)).
    pub poll_spin_us: u32,
    /// QP numbers: the lowest free one, so that a destroyed QP's number comes back at once
    /// (tests of what a reused number must not receive), instead of in turn.
    pub qpn_lowest_free: bool,
    /// Page-list entries all objects together may hold (MRs' pages and rings' pages).
    pub max_translation_entries: u64,
    /// Doorbells per second the function may ring before the device thread makes it wait
    /// ([`Schedule`](crate::schedule::Schedule)); 0: no limit.
    pub db_rate: u32,
    /// Which function of its NIC this is, and where its numbers sit in the NIC's.
    pub function: FunctionSlot,
}

/// A function's place in its NIC: its index (0 the physical function, `k` virtual function
/// `k`) and the bases of its slices of the NIC's QP, CQ, SRQ and MR numbers. A function names
/// its objects by local numbers (`0..max`); the NIC's number of local `n` is `base + n`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FunctionSlot {
    /// 0: the physical function; `k`: virtual function `k`.
    pub index: u16,
    /// NIC QPN of the function's QPN 0.
    pub qpn_base: u32,
    /// NIC CQN of the function's CQN 0.
    pub cqn_base: u32,
    /// NIC SRQN of the function's SRQN 0.
    pub srqn_base: u32,
    /// NIC MR index of the function's MR index 0.
    pub mr_base: u32,
}

impl FunctionSlot {
    /// Whether this is a virtual function.
    pub fn is_vf(&self) -> bool {
        self.index != 0
    }

    /// The NIC's number of the function's queue `n` of `kind` (`QID_KIND_*`).
    pub fn nic_number(&self, kind: u8, n: u32) -> u32 {
        let base = match kind {
            QID_KIND_QP => self.qpn_base,
            QID_KIND_SRQ => self.srqn_base,
            _ => self.cqn_base,
        };
        base.wrapping_add(n)
    }

    /// The PCI device ID the function reports.
    pub fn device_id(&self) -> u16 {
        if self.is_vf() {
            PCI_VF_DEVICE_ID
        } else {
            PCI_DEVICE_ID
        }
    }
}

impl Default for DeviceConfig {
    fn default() -> Self {
        Self {
            msix_vectors: 8,
            mac: [0x52, 0x54, 0x00, 0x12, 0x34, 0x56],
            max_qp: 1024,
            max_cq: 1024,
            max_mr: 4096,
            max_srq: 256,
            max_ah: 4096,
            max_eq: 32,
            cmd_timeout_ms: 2000,
            qid_table_len: QID_TABLE_LEN as u32,
            db_record: true,
            xrc: true,
            odp: true,
            poll_spin_us: crate::records::PollWindow::SPIN.as_micros() as u32,
            qpn_lowest_free: false,
            max_translation_entries: crate::objects::MAX_TRANSLATION_ENTRIES,
            db_rate: 0,
            function: FunctionSlot::default(),
        }
    }
}

/// Fault injection and host-side switches, shared with the control socket.
#[derive(Default)]
pub struct HostControls {
    /// Stop processing commands and doorbells (MMIO still answers).
    pub stall: AtomicBool,
    /// Stop everything; MMIO reads return all ones.
    pub hang: AtomicBool,
    /// Report a bogus interface version.
    pub bogus_version: AtomicBool,
    /// Well-formed lies in CQEs and EQEs.
    pub lies: crate::lies::Lies,
}

impl HostControls {
    /// Reads a switch.
    pub fn get(flag: &AtomicBool) -> bool {
        flag.load(Ordering::Relaxed)
    }
}

/// The interface version reported while `bogus_version` is set.
pub const BOGUS_IF_VERSION: u32 = 0x7eef_0000;

/// Port state.
#[derive(Clone, Debug, Serialize)]
pub struct Port {
    /// `PORT_STATE_*`.
    state: u8,
    /// Active MTU (`MTU_*`).
    active_mtu: u8,
    /// Maximum MTU.
    max_mtu: u8,
}

impl Port {
    /// `PORT_STATE_*`.
    pub fn state(&self) -> u8 {
        self.state
    }

    /// Active MTU (`MTU_*`).
    pub fn active_mtu(&self) -> u8 {
        self.active_mtu
    }

    /// Maximum MTU (`MTU_*`).
    pub fn max_mtu(&self) -> u8 {
        self.max_mtu
    }
}

/// An object queued for the device thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Work {
    /// SQ doorbell, push or RQ announcement on a QP.
    Qp(u32),
    /// EQ doorbell.
    Eq(u32),
    /// SRQ announcement.
    Srq(u32),
}

/// Most objects serviced per `process` round before the command queue gets another turn.
const WORK_BUDGET: usize = 256;
/// Most commands executed per `process` round.
const COMMAND_BUDGET: usize = 64;

/// Everything but the engine (which gets `&mut DeviceCore` as its [`EngineHost`]).
///
/// [`EngineHost`]: crate::engine::EngineHost
pub struct DeviceCore {
    /// Limits and identity.
    config: DeviceConfig,
    /// Guest memory, MSI-X, counters, trace and clock.
    bus: Bus,
    /// Host switches.
    host: Arc<HostControls>,
    /// Registers.
    regs: Registers,
    /// Command queue.
    cmdq: Cmdq,
    /// Object tables.
    objects: Objects,
    /// Port.
    port: Port,
    /// Objects queued for the device thread (each at most once: bounded by the tables).
    work: VecDeque<Work>,
    /// Doorbell decoder state (push windows, rejected doorbells to report).
    doorbells: Doorbells,
    /// Port state change requested by the host.
    pending_port: Option<bool>,
    /// Fatal error requested by the host.
    pending_fatal: bool,
    /// Object limits set by the host, taken at the next function reset.
    pending_limits: Option<DeviceConfig>,
    /// Doorbell-to-wire intervals.
    latency: DoorbellLatency,
    /// Doorbell records the device polls.
    pub(crate) records: RecordWatch,
}

/// The device: core state plus the engine.
pub struct Device {
    /// State.
    pub core: DeviceCore,
    /// Transport engine.
    pub engine: Box<dyn Engine>,
}

impl Device {
    /// A device in its post-reset state.
    pub fn new(
        config: DeviceConfig,
        mem: Arc<dyn GuestMemory>,
        irq: Arc<dyn InterruptSink>,
        engine: Box<dyn Engine>,
        counters: Arc<Counters>,
        trace: Arc<Tracer>,
        host: Arc<HostControls>,
    ) -> Self {
        let core = DeviceCore {
            objects: Objects::new(&config),
            port: Port {
                state: PORT_STATE_ACTIVE,
                active_mtu: MTU_1024,
                max_mtu: MTU_4096,
            },
            config,
            bus: Bus::new(mem, irq, counters, trace),
            host,
            regs: Registers::default(),
            cmdq: Cmdq::default(),
            work: VecDeque::new(),
            doorbells: Doorbells::default(),
            pending_port: None,
            pending_fatal: false,
            pending_limits: None,
            latency: DoorbellLatency::default(),
            records: RecordWatch::default(),
        };
        Self { core, engine }
    }

    /// The device on `clock` instead of the host's (the tests' virtual time), from its start.
    /// (A builder rather than another parameter of [`Device::new`]: `serve` has no choice.)
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.core.bus.set_clock(clock);
        self
    }

    /// Function reset: every object, queue and register goes; counters, host switches and the
    /// port stay. Object limits the host set meanwhile take effect.
    pub fn reset(&mut self) {
        let core = &mut self.core;
        for (qpn, _) in core.objects.qps().iter() {
            self.engine.qp_destroyed(qpn);
        }
        self.engine.reset();
        if let Some(limits) = core.pending_limits.take() {
            core.config = limits;
        }
        core.objects = core.objects.renewed(&core.config);
        core.cmdq.disable();
        core.work.clear();
        core.doorbells = Doorbells::default();
        core.records.clear();
        core.regs = Registers::default();
        core.bus.trace().event("reset", || serde_json::json!({}));
    }

    /// Does all pending device work: reset, commands, doorbells, timers, engine polling.
    /// Returns `true` if work remains (call again).
    pub fn process(&mut self) -> bool {
        if self.core.regs.reset_pending() {
            self.reset();
        }
        if HostControls::get(&self.core.host.hang) || HostControls::get(&self.core.host.stall) {
            return false;
        }
        self.core.apply_host_requests();
        if !self.core.regs.enabled() || self.core.regs.is_fatal() {
            return false;
        }
        let mut more = self.core.poll_records();
        self.core.report_bad_doorbells();
        more |= self.process_cmdq(COMMAND_BUDGET);
        for _ in 0..WORK_BUDGET {
            let Some(work) = self.core.work.pop_front() else {
                break;
            };
            self.service(work);
        }
        more |= !self.core.work.is_empty();
        self.core.moderation_tick();
        self.engine.poll(&mut self.core);
        self.engine.flush();
        more
    }

    /// Processes until idle (tests and the device thread's drain).
    pub fn process_all(&mut self) {
        // Bounded: each round consumes queued work; a hostile guest can only re-queue by
        // writing more doorbells, which happens on another thread.
        for _ in 0..1_000_000 {
            if !self.process() {
                break;
            }
        }
    }

    /// The earliest instant something timed is due: an engine timer or held frame
    /// ([`Engine::next_deadline`]), a CQ's moderation period, the repeat of an unanswered page
    /// fault. It may be past: a QP that cannot act on its timer (not in RTS) keeps it, and a
    /// page fault is repeated only if something touches its pages again; a caller waiting for
    /// the device to act looks at the deadlines after now.
    pub fn next_deadline(&self) -> Option<Instant> {
        let objects = &self.core.objects;
        let moderation = objects
            .unreported_cqs()
            .filter_map(|(_, cq)| cq.moderation_due_us());
        let faults = objects
            .mrs()
            .iter()
            .filter_map(|(_, mr)| mr.fault.map(|f| f.repeat_us()));
        moderation
            .chain(faults)
            .map(|us| self.core.bus.start() + Duration::from_micros(us))
            .chain(self.engine.next_deadline())
            .min()
    }

    /// Whether received or looped-back frames wait for the engine ([`Engine::frames_waiting`]).
    pub fn frames_waiting(&self) -> bool {
        self.engine.frames_waiting()
    }

    /// Whether the device thread polls doorbell records (then it waits by
    /// [`PollWindow`](crate::records::PollWindow) and tells their producers when it sleeps).
    pub fn polls_records(&self) -> bool {
        self.core.records.any()
    }

    /// Sets the port state before the device is in use, without the async event a change
    /// reports (`serve --port-down`).
    pub fn set_initial_port_state(&mut self, up: bool) {
        self.core.port.state = if up {
            PORT_STATE_ACTIVE
        } else {
            PORT_STATE_DOWN
        };
    }

    fn service(&mut self, work: Work) {
        match work {
            Work::Qp(qpn) => self.service_qp(qpn),
            Work::Eq(eqn) => self.core.service_eq_doorbell(eqn),
            Work::Srq(srqn) => self.service_srq(srqn),
        }
    }
}

impl DeviceCore {
    /// Puts the device into fatal state and tells the driver (async EQ, if it can).
    pub fn fatal(&mut self, code: u32) {
        if !self.regs.set_fatal(code) {
            return;
        }
        tracing::warn!(code, "device fatal error");
        self.bus
            .trace()
            .event("fatal", || serde_json::json!({"code": code}));
        self.post_async_event(EventType::DeviceFatal, 0, code, 0);
    }

    /// Queues an object for the device thread unless already queued.
    pub fn queue_work(&mut self, work: Work) {
        if self.objects.mark_queued(work) {
            self.work.push_back(work);
        }
    }

    /// Limits and identity.
    pub fn config(&self) -> &DeviceConfig {
        &self.config
    }

    /// Doorbell-to-wire intervals (`ctl latency`).
    pub fn latency(&self) -> &DoorbellLatency {
        &self.latency
    }

    /// Doorbell-to-wire intervals, to record or reset.
    pub fn latency_mut(&mut self) -> &mut DoorbellLatency {
        &mut self.latency
    }

    /// Guest memory, MSI-X, counters, trace and clock.
    pub fn bus(&self) -> &Bus {
        &self.bus
    }

    /// Host switches.
    pub fn host(&self) -> &HostControls {
        &self.host
    }

    /// Port state.
    pub fn port(&self) -> &Port {
        &self.port
    }

    /// Sets the active MTU (`CMD_SET_PORT`, validated by the caller).
    pub(crate) fn set_active_mtu(&mut self, mtu: u8) {
        self.port.active_mtu = mtu;
    }

    /// Drops `work` from the device thread's queue (its object is being destroyed).
    pub(crate) fn cancel_work(&mut self, work: Work) {
        self.work.retain(|w| *w != work);
    }

    /// The register file.
    pub fn regs(&self) -> &Registers {
        &self.regs
    }

    /// The register file, mutably.
    pub(crate) fn regs_mut(&mut self) -> &mut Registers {
        &mut self.regs
    }

    /// The command queue.
    pub fn cmdq(&self) -> &Cmdq {
        &self.cmdq
    }

    /// The command queue, mutably.
    pub(crate) fn cmdq_mut(&mut self) -> &mut Cmdq {
        &mut self.cmdq
    }

    /// The object tables.
    pub fn objects(&self) -> &Objects {
        &self.objects
    }

    /// The object tables, mutably.
    pub(crate) fn objects_mut(&mut self) -> &mut Objects {
        &mut self.objects
    }

    /// The object tables and the bus at once (a unit that borrows an object writes through the
    /// bus).
    pub(crate) fn objects_and_bus(&mut self) -> (&mut Objects, &Bus) {
        (&mut self.objects, &self.bus)
    }

    /// The doorbell decoder state.
    pub fn doorbells(&self) -> &Doorbells {
        &self.doorbells
    }

    /// The doorbell decoder state and the bus at once.
    pub(crate) fn doorbells_and_bus(&mut self) -> (&mut Doorbells, &Bus) {
        (&mut self.doorbells, &self.bus)
    }

    /// The doorbell decoder state, mutably.
    pub(crate) fn doorbells_mut(&mut self) -> &mut Doorbells {
        &mut self.doorbells
    }

    /// `REG_DEV_STATUS` value.
    pub fn status(&self) -> u32 {
        self.regs.status()
    }

    /// Requests a port state change (host control); the device thread applies it.
    pub fn request_port_state(&mut self, up: bool) {
        self.pending_port = Some(up);
    }

    /// Sets the object limits (host control: `max_qp`, `max_cq`, `max_mr`, `max_srq`,
    /// `max_translation_entries` of `config`). They take effect at the function's next reset,
    /// when its driver probes and reads them from the capability registers; at once if the
    /// function is not enabled (no driver holds objects).
    pub fn set_limits(&mut self, config: DeviceConfig) {
        if self.regs.enabled() {
            self.pending_limits = Some(config);
        } else {
            self.config = config;
            self.objects = self.objects.renewed(&self.config);
            self.pending_limits = None;
        }
    }

    /// The limits the function will have after its next reset, if the host changed them.
    pub fn pending_limits(&self) -> Option<&DeviceConfig> {
        self.pending_limits.as_ref()
    }

    /// Requests a fatal error (host control); the device thread applies it.
    pub fn request_fatal(&mut self) {
        self.pending_fatal = true;
    }

    /// Applies host requests (device thread).
    fn apply_host_requests(&mut self) {
        if let Some(up) = self.pending_port.take() {
            self.set_port_state(up);
        }
        if std::mem::take(&mut self.pending_fatal) {
            self.fatal(FATAL_INJECTED);
        }
    }

    /// Sets the port state (host control), with the async event.
    pub fn set_port_state(&mut self, up: bool) {
        let state = if up {
            PORT_STATE_ACTIVE
        } else {
            PORT_STATE_DOWN
        };
        if self.port.state != state {
            self.port.state = state;
            let event = if up {
                EventType::PortActive
            } else {
                EventType::PortDown
            };
            self.post_async_event(event, 0, 1, 0);
        }
    }
}
