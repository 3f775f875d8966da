// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! A test-only "guest": it owns a memory region and drives the device model through BAR0 and
//! DMA exactly as a driver would.

#![allow(dead_code)]

pub mod fuzz;
pub mod objects;
pub mod pair;
pub mod roce;
pub mod seeds;
pub mod xrc;

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use ferroce_hw::*;
use ferroce_nic::clock::{Clock, VirtualTime};
use ferroce_nic::counters::Counters;
use ferroce_nic::device::{Device, DeviceConfig, HostControls};
use ferroce_nic::engine::{Engine, StubEngine, StubLog};
use ferroce_nic::interrupts::RecordingSink;
use ferroce_nic::memory::{DmaError, GuestMemory, VecMemory};
use ferroce_nic::trace::Tracer;

/// Guest RAM base and size.
pub const RAM_BASE: u64 = 0x10_0000;
pub const RAM_SIZE: usize = 32 << 20;
pub const VECTORS: u16 = 8;
pub const AEQ_VECTOR: u32 = 0;
pub const CMD_EQ_VECTOR: u32 = 1;

/// The typed status of a CQE the device wrote.
pub trait CqeStatus {
    /// The status; panics if the device wrote an undefined one.
    fn wc_status(&self) -> WcStatus;
}

impl CqeStatus for Cqe {
    fn wc_status(&self) -> WcStatus {
        WcStatus::try_from(self.status)
            .unwrap_or_else(|raw| panic!("undefined CQE status {raw:#x}: {self:?}"))
    }
}

pub struct Eqs {
    pub base: u64,
    pub log: u32,
    pub ci: u16,
}

/// The device's writes to guest memory, recorded while switched on (the two-NIC fuzz body
/// checks each against the ranges the guest lets the device write).
#[derive(Default)]
pub struct DmaWrites {
    on: AtomicBool,
    ranges: Mutex<Vec<Range<u64>>>,
}

impl DmaWrites {
    /// Starts (or stops) recording.
    pub fn record(&self, on: bool) {
        self.on.store(on, Ordering::Relaxed);
    }

    /// The ranges written since the last call.
    pub fn take(&self) -> Vec<Range<u64>> {
        std::mem::take(&mut self.ranges.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// The guest's memory as the device sees it: [`VecMemory`], with its writes recorded.
struct Recorded {
    mem: Arc<VecMemory>,
    writes: Arc<DmaWrites>,
}

impl GuestMemory for Recorded {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        self.mem.read(addr, buf)
    }

    fn write(&self, addr: u64, data: &[u8]) -> Result<(), DmaError> {
        self.mem.write(addr, data)?;
        if self.writes.on.load(Ordering::Relaxed) && !data.is_empty() {
            let mut ranges = self.writes.ranges.lock().unwrap_or_else(|e| e.into_inner());
            ranges.push(addr..addr + data.len() as u64);
        }
        Ok(())
    }
}

pub struct Guest {
    pub dev: Device,
    /// The guest's memory (its own accesses are not recorded).
    pub mem: Arc<VecMemory>,
    /// The device's writes to it.
    pub dma_writes: Arc<DmaWrites>,
    pub irq: Arc<RecordingSink>,
    pub log: Arc<Mutex<StubLog>>,
    pub counters: Arc<Counters>,
    pub host: Arc<HostControls>,
    /// The device's time: it stands still until the test advances it (directly, or through
    /// [`roce::Driven`]'s pump), so that no verdict depends on the host's clock or load.
    pub time: Arc<VirtualTime>,
    next: u64,
    ram_end: u64,
    pub cmd_sq: u64,
    pub cmd_cq: u64,
    pub cmd_log: u32,
    pub cmd_pi: u16,
    pub token: u32,
    pub eqs: Vec<Option<Eqs>>,
}

impl Guest {
    pub fn new() -> Self {
        Self::with_config(|_| {})
    }

    /// A guest with the stub engine whose device configuration `adjust` changed.
    pub fn with_config(adjust: impl FnOnce(&mut DeviceConfig)) -> Self {
        let (engine, log) = StubEngine::new();
        Self::build(
            DeviceConfig::default().mac,
            RAM_SIZE,
            Box::new(engine),
            log,
            Arc::new(Tracer::new()),
            VirtualTime::new(),
            adjust,
        )
    }

    /// A guest whose device runs `engine` (the RoCE engine in the two-NIC tests) on `time`
    /// (NICs that talk to each other share one).
    pub fn with_engine(
        mac: [u8; 6],
        ram_size: usize,
        engine: Box<dyn Engine>,
        log: Arc<Mutex<StubLog>>,
        trace: Arc<Tracer>,
        time: Arc<VirtualTime>,
    ) -> Self {
        Self::build(mac, ram_size, engine, log, trace, time, |_| {})
    }

    /// [`Guest::with_engine`] with the device configuration `adjust` changed.
    pub fn with_engine_config(
        mac: [u8; 6],
        ram_size: usize,
        engine: Box<dyn Engine>,
        trace: Arc<Tracer>,
        time: Arc<VirtualTime>,
        adjust: impl FnOnce(&mut DeviceConfig),
    ) -> Self {
        let log = Arc::new(Mutex::new(StubLog::default()));
        Self::build(mac, ram_size, engine, log, trace, time, adjust)
    }

    fn build(
        mac: [u8; 6],
        ram_size: usize,
        engine: Box<dyn Engine>,
        log: Arc<Mutex<StubLog>>,
        trace: Arc<Tracer>,
        time: Arc<VirtualTime>,
        adjust: impl FnOnce(&mut DeviceConfig),
    ) -> Self {
        let mem = Arc::new(VecMemory::new(RAM_BASE, ram_size));
        let irq = Arc::new(RecordingSink::new(VECTORS));
        let counters = Arc::new(Counters::new());
        let host = Arc::new(HostControls::default());
        let config = DeviceConfig {
            msix_vectors: VECTORS,
            mac,
            max_qp: 64,
            max_cq: 64,
            max_mr: 64,
            max_srq: 16,
            max_ah: 16,
            ..DeviceConfig::default()
        };
        let mut config = config;
        adjust(&mut config);
        let dma_writes = Arc::new(DmaWrites::default());
        let recorded = Arc::new(Recorded {
            mem: mem.clone(),
            writes: dma_writes.clone(),
        });
        let dev = Device::new(
            config,
            recorded,
            irq.clone(),
            engine,
            counters.clone(),
            trace,
            host.clone(),
        )
        .with_clock(Clock::Virtual(time.clone()));
        Self {
            dev,
            mem,
            dma_writes,
            irq,
            log,
            counters,
            host,
            time,
            next: RAM_BASE + 0x1000,
            ram_end: RAM_BASE + ram_size as u64,
            cmd_sq: 0,
            cmd_cq: 0,
            cmd_log: 0,
            cmd_pi: 0,
            token: 0,
            eqs: (0..32).map(|_| None).collect(),
        }
    }

    // --- MMIO -----------------------------------------------------------------------------

    pub fn w32(&mut self, offset: usize, value: u32) {
        self.dev.bar0_write(offset as u64, &value.to_le_bytes());
    }

    pub fn r32(&mut self, offset: usize) -> u32 {
        let mut data = [0u8; 4];
        self.dev.bar0_read(offset as u64, &mut data);
        u32::from_le_bytes(data)
    }

    pub fn r64(&mut self, offset: usize) -> u64 {
        let mut data = [0u8; 8];
        self.dev.bar0_read(offset as u64, &mut data);
        u64::from_le_bytes(data)
    }

    pub fn w64(&mut self, offset: usize, value: u64) {
        self.w32(offset, value as u32);
        self.w32(offset + 4, (value >> 32) as u32);
    }

    /// Lets the device thread run until idle.
    pub fn run(&mut self) {
        self.dev.process_all();
    }

    // --- memory ---------------------------------------------------------------------------

    pub fn alloc(&mut self, size: usize, align: u64) -> u64 {
        let addr = self.next.div_ceil(align) * align;
        self.next = addr + size as u64;
        assert!(self.next <= self.ram_end, "guest RAM exhausted");
        self.mem.write(addr, &vec![0u8; size]).expect("zero");
        addr
    }

    pub fn write(&self, addr: u64, data: &[u8]) {
        self.mem.write(addr, data).expect("guest write");
    }

    pub fn read(&self, addr: u64, len: usize) -> Vec<u8> {
        let mut buf = vec![0u8; len];
        self.mem.read(addr, &mut buf).expect("guest read");
        buf
    }

    pub fn write_u32(&self, addr: u64, value: u32) {
        self.write(addr, &value.to_le_bytes());
    }

    // --- bring-up -------------------------------------------------------------------------

    pub fn reset(&mut self) {
        self.w32(REG_DEV_CTRL, CTRL_RESET);
        assert_eq!(
            self.r32(REG_DEV_STATUS) & STATUS_READY,
            0,
            "READY drops while resetting"
        );
        self.run();
        assert_ne!(self.r32(REG_DEV_STATUS) & STATUS_READY, 0);
        self.eqs.iter_mut().for_each(|e| *e = None);
        self.cmd_pi = 0;
    }

    /// Creates EQ 0/1 through the setup registers.
    pub fn setup_eq(&mut self, eqn: u32, log: u32, vector: u32) -> u32 {
        let base = self.alloc(16 << log, 64);
        self.w64(REG_EQ_SETUP_BASE_LO, base);
        self.w32(REG_EQ_SETUP_LOG_SIZE, log);
        self.w32(REG_EQ_SETUP_VECTOR, vector);
        self.w32(REG_EQ_SETUP_CTRL, eqn | EQ_SETUP_CREATE);
        let status = self.r32(REG_EQ_SETUP_STATUS);
        if status == u32::from(STATUS_OK) {
            self.eqs[eqn as usize] = Some(Eqs { base, log, ci: 0 });
        }
        status
    }

    pub fn setup_cmdq(&mut self, log: u32) {
        self.cmd_log = log;
        self.cmd_sq = self.alloc(CMD_ENTRY_SIZE << log, 4096);
        self.cmd_cq = self.alloc(CmdCompletion::SIZE << log, 4096);
        self.cmd_pi = 0;
        self.w64(REG_CMDQ_SQ_BASE_LO, self.cmd_sq);
        self.w64(REG_CMDQ_CQ_BASE_LO, self.cmd_cq);
        self.w32(REG_CMDQ_LOG_SIZE, log);
        self.w32(REG_CMDQ_CTRL, CMDQ_CTRL_ENABLE);
        assert_eq!(self.r32(REG_CMDQ_STATUS), CMDQ_STATUS_ENABLED);
    }

    /// Reset, identify, EQ 0 and 1, command queue, enable.
    pub fn bring_up(&mut self) {
        assert_eq!(self.r32(REG_ID), ID_MAGIC);
        assert_eq!(if_version_major(self.r32(REG_IF_VERSION)), IF_VERSION_MAJOR);
        self.reset();
        assert_eq!(
            self.setup_eq(EQN_ASYNC, 6, AEQ_VECTOR),
            u32::from(STATUS_OK)
        );
        assert_eq!(
            self.setup_eq(EQN_CMD, 6, CMD_EQ_VECTOR),
            u32::from(STATUS_OK)
        );
        self.setup_cmdq(4);
        self.w32(REG_DEV_CTRL, CTRL_ENABLE);
        assert_ne!(self.r32(REG_DEV_STATUS) & STATUS_ENABLED, 0);
    }

    // --- commands -------------------------------------------------------------------------

    /// Posts a raw command and returns its completion (polled by owner bit).
    pub fn cmd_raw(&mut self, opcode: u16, payload: &[u8], out_addr: u64) -> CmdCompletion {
        self.token = self.token.wrapping_add(1);
        let ring = Ring::new(self.cmd_log, MAX_LOG_CMDQ).expect("ring");
        let index = self.cmd_pi;
        let slot = u64::from(ring.slot(index));
        let header = CmdHeader {
            opcode,
            flags: 0,
            token: self.token,
            out_addr,
        };
        self.write(
            self.cmd_sq + slot * CMD_ENTRY_SIZE as u64,
            &encode_command(&header, payload),
        );
        self.cmd_pi = index.wrapping_add(1);
        self.w32(REG_CMDQ_DB, u32::from(self.cmd_pi));
        self.run();
        let bytes = self.read(
            self.cmd_cq + slot * CmdCompletion::SIZE as u64,
            CmdCompletion::SIZE,
        );
        let completion = CmdCompletion::read_from(&bytes).expect("completion");
        assert!(
            ring.entry_valid(index, completion.owner),
            "command {opcode:#x} did not complete (stalled?)"
        );
        assert_eq!(completion.token, self.token);
        assert_eq!(completion.index, index);
        completion
    }

    pub fn cmd<C: Command>(&mut self, command: &C) -> CmdCompletion {
        self.cmd_raw(C::OPCODE, &command.to_payload(), 0)
    }

    pub fn cmd_out<C: Command>(&mut self, command: &C, out_addr: u64) -> CmdCompletion {
        self.cmd_raw(C::OPCODE, &command.to_payload(), out_addr)
    }

    /// Runs a command that must succeed; returns its reply.
    pub fn ok<C: Command + std::fmt::Debug>(&mut self, command: &C) -> C::Reply {
        let c = self.cmd(command);
        assert_eq!(
            c.status,
            STATUS_OK,
            "{command:?} failed: {} syndrome {}",
            status_name(c.status),
            c.syndrome
        );
        c.reply::<C>().expect("a valid reply")
    }

    // --- event queues ---------------------------------------------------------------------

    /// Consumes all new EQEs of `eqn` and updates its consumer index (without arming).
    pub fn poll_eq(&mut self, eqn: u32) -> Vec<Eqe> {
        let Some(eq) = self.eqs[eqn as usize].as_mut() else {
            return Vec::new();
        };
        let ring = Ring::new(eq.log, MAX_LOG_QUEUE).expect("ring");
        let (base, mut ci) = (eq.base, eq.ci);
        let mut out = Vec::new();
        loop {
            let mut bytes = [0u8; Eqe::SIZE];
            self.mem
                .read(base + u64::from(ring.slot(ci)) * 16, &mut bytes)
                .expect("eqe");
            let eqe = Eqe::decode(&bytes);
            if !ring.entry_valid(ci, eqe.owner) {
                break;
            }
            out.push(eqe);
            ci = ci.wrapping_add(1);
        }
        if let Some(eq) = self.eqs[eqn as usize].as_mut() {
            eq.ci = ci;
        }
        self.w32(
            REG_EQ_DB,
            EqDoorbell {
                eqn: eqn as u8,
                ci,
                arm: false,
            }
            .encode(),
        );
        self.run();
        out
    }

    pub fn arm_eq(&mut self, eqn: u32) {
        let ci = self.eqs[eqn as usize].as_ref().map_or(0, |e| e.ci);
        self.w32(
            REG_EQ_DB,
            EqDoorbell {
                eqn: eqn as u8,
                ci,
                arm: true,
            }
            .encode(),
        );
        self.run();
    }

    /// Creates a completion EQ by command.
    pub fn create_ceq(&mut self, log: u8, vector: u16) -> u32 {
        let base = self.alloc(16 << log, 64);
        let eqn = self
            .ok(&CreateEqCmd {
                ring: BufDesc {
                    addr: base,
                    ..BufDesc::default()
                },
                log_size: log,
                vector,
                ..CreateEqCmd::default()
            })
            .eqn;
        self.eqs[eqn as usize] = Some(Eqs {
            base,
            log: u32::from(log),
            ci: 0,
        });
        eqn
    }
}

/// A CQ as the guest sees it.
pub struct GuestCq {
    pub cqn: u32,
    pub base: u64,
    pub dbrec: u64,
    pub log: u32,
    pub ci: u16,
    /// The rings (base, record, log2 size) resizes move to, until their markers are polled.
    pub next: std::collections::VecDeque<(u64, u64, u32)>,
}

impl GuestCq {
    pub fn create(guest: &mut Guest, eqn: u32, log: u8) -> Self {
        let base = guest.alloc(64 << log, 4096);
        let dbrec = guest.alloc(64, 64);
        let cqn = guest
            .ok(&CreateCqCmd {
                ring: BufDesc {
                    addr: base,
                    ..BufDesc::default()
                },
                dbrec_addr: dbrec,
                eqn,
                log_size: log,
                ..CreateCqCmd::default()
            })
            .cqn;
        Self {
            cqn,
            base,
            dbrec,
            log: u32::from(log),
            ci: 0,
            next: std::collections::VecDeque::new(),
        }
    }

    /// Polls new CQEs and publishes the consumer index in the doorbell record.
    pub fn poll(&mut self, guest: &Guest) -> Vec<Cqe> {
        self.poll_up_to(guest, usize::MAX)
    }

    /// Polls at most `max` new CQEs, as [`GuestCq::poll`]. A resize marker moves to the new
    /// ring and is not returned.
    pub fn poll_up_to(&mut self, guest: &Guest, max: usize) -> Vec<Cqe> {
        let mut out = Vec::new();
        while out.len() < max {
            let ring = Ring::new(self.log, MAX_LOG_QUEUE).expect("ring");
            let bytes = guest.read(self.base + u64::from(ring.slot(self.ci)) * 64, 64);
            let cqe = Cqe::read_from(&bytes).expect("cqe");
            if !ring.entry_valid(self.ci, cqe.owner) {
                break;
            }
            if cqe.opcode == CQE_OP_RESIZE {
                // This index again, in the next ring.
                let (base, dbrec, log) = self.next.pop_front().expect("a marker without a resize");
                (self.base, self.dbrec, self.log) = (base, dbrec, log);
                continue;
            }
            self.ci = self.ci.wrapping_add(1);
            out.push(cqe);
        }
        guest.write_u32(self.dbrec, u32::from(self.ci));
        for &(_, dbrec, _) in &self.next {
            guest.write_u32(dbrec, u32::from(self.ci));
        }
        out
    }

    /// Asks the device to move the CQ to a new ring of `1 << log` entries (`CMD_RESIZE_CQ`);
    /// the old one is polled up to the marker.
    pub fn resize(&mut self, guest: &mut Guest, log: u8) -> CmdCompletion {
        let base = guest.alloc(64 << log, 4096);
        let dbrec = guest.alloc(64, 64);
        guest.write_u32(dbrec, u32::from(self.ci));
        let c = guest.cmd(&ResizeCqCmd {
            ring: BufDesc {
                addr: base,
                ..BufDesc::default()
            },
            dbrec_addr: dbrec,
            cqn: self.cqn,
            log_size: log,
            ..ResizeCqCmd::default()
        });
        if c.status == STATUS_OK {
            self.next.push_back((base, dbrec, u32::from(log)));
        }
        c
    }
}

/// Allocates the rings of a test QP, `1 << sq_log` send WQEs of `1 << sq_stride_log` bytes and
/// `1 << rq_log` receive WQEs of 64, and its doorbell record: (send ring, receive ring, record).
pub fn qp_rings(guest: &mut Guest, sq_log: u8, sq_stride_log: u8, rq_log: u8) -> (u64, u64, u64) {
    let sq = guest.alloc(1 << (sq_log + sq_stride_log), 4096);
    let rq = guest.alloc(64 << rq_log, 4096);
    let dbrec = guest.alloc(64, 64);
    (sq, rq, dbrec)
}

/// `CREATE_QP` of a QP on the rings of [`qp_rings`]; the caller adds PD, CQs, type and flags.
pub fn create_qp_cmd(
    sq: u64,
    rq: u64,
    dbrec: u64,
    sq_log: u8,
    sq_stride_log: u8,
    rq_log: u8,
) -> CreateQpCmd {
    CreateQpCmd {
        sq: BufDesc {
            addr: sq,
            ..BufDesc::default()
        },
        rq: BufDesc {
            addr: rq,
            ..BufDesc::default()
        },
        dbrec_addr: dbrec,
        srqn: NONE,
        sq_log_size: sq_log,
        sq_log_stride: sq_stride_log,
        rq_log_size: rq_log,
        rq_log_stride: 6,
        ..CreateQpCmd::default()
    }
}

/// A QP as the guest sees it.
pub struct GuestQp {
    pub qpn: u32,
    pub sq: u64,
    pub rq: u64,
    pub dbrec: u64,
    pub sq_log: u8,
    pub sq_stride_log: u8,
    pub rq_log: u8,
    pub sq_pi: u16,
    pub rq_pi: u16,
}

impl GuestQp {
    pub fn create(
        guest: &mut Guest,
        qp_type: QpType,
        send_cq: u32,
        recv_cq: u32,
        srqn: u32,
    ) -> Self {
        let (qp, c) = Self::try_create(guest, qp_type, send_cq, recv_cq, srqn, 0);
        assert_eq!(c.status, STATUS_OK, "CREATE_QP: syndrome {}", c.syndrome);
        qp
    }

    /// Creates a QP with `QP_FLAG_*` `flags`; the QP is only valid if the completion is OK.
    pub fn try_create(
        guest: &mut Guest,
        qp_type: QpType,
        send_cq: u32,
        recv_cq: u32,
        srqn: u32,
        flags: u8,
    ) -> (Self, CmdCompletion) {
        let (sq_log, sq_stride_log, rq_log) = (6u8, 9u8, 4u8);
        let (sq, rq, dbrec) = qp_rings(guest, sq_log, sq_stride_log, rq_log);
        let c = guest.cmd(&CreateQpCmd {
            pd: 1,
            sq_cqn: send_cq,
            rq_cqn: recv_cq,
            srqn,
            qp_type: qp_type.into(),
            flags,
            ..create_qp_cmd(sq, rq, dbrec, sq_log, sq_stride_log, rq_log)
        });
        let qp = Self {
            qpn: c.results[0],
            sq,
            rq,
            dbrec,
            sq_log,
            sq_stride_log,
            rq_log,
            sq_pi: 0,
            rq_pi: 0,
        };
        (qp, c)
    }

    pub fn modify(guest: &mut Guest, qpn: u32, state: QpState, extra_mask: u32) -> CmdCompletion {
        guest.cmd(&ModifyQpCmd {
            qpn,
            attr_mask: QP_ATTR_STATE | extra_mask,
            new_state: state.into(),
            path_mtu: MTU_1024,
            sgid_index: 3,
            dest_qpn: 0x12,
            vlan: VLAN_NONE,
            hop_limit: 64,
            ..ModifyQpCmd::default()
        })
    }

    /// RESET → INIT → RTR → RTS with the attributes RC needs.
    pub fn connect(&self, guest: &mut Guest) {
        let rtr = QP_ATTR_AV | QP_ATTR_PATH_MTU | QP_ATTR_DEST_QPN | QP_ATTR_RQ_PSN;
        for (state, mask) in [
            (QpState::Init, QP_ATTR_ACCESS_FLAGS),
            (QpState::Rtr, rtr),
            (QpState::Rts, QP_ATTR_SQ_PSN),
        ] {
            let c = Self::modify(guest, self.qpn, state, mask);
            assert_eq!(
                c.status, STATUS_OK,
                "to state {state:?}: syndrome {}",
                c.syndrome
            );
        }
    }

    /// Writes a send WQE at the producer index and advances it (no doorbell).
    pub fn put_send(&mut self, guest: &Guest, ctrl: WqeCtrl, seg: &[u8], tail: &[u8]) -> Vec<u8> {
        let stride = 1usize << self.sq_stride_log;
        let mut wqe = vec![0u8; stride];
        assert!(ctrl.write_to(&mut wqe));
        wqe[WQE_SEG_OFFSET..WQE_SEG_OFFSET + seg.len()].copy_from_slice(seg);
        wqe[WQE_HEADER_SIZE..WQE_HEADER_SIZE + tail.len()].copy_from_slice(tail);
        let slot = u64::from(self.sq_pi) & ((1 << self.sq_log) - 1);
        guest.write(self.sq + slot * stride as u64, &wqe);
        self.sq_pi = self.sq_pi.wrapping_add(1);
        // Doorbell record first, as a driver does.
        guest.write_u32(self.dbrec, u32::from(self.sq_pi));
        wqe
    }

    pub fn ring_sq(&self, guest: &mut Guest, ctx: usize, qid: u16) {
        guest.w32(
            db_page_offset(ctx) + DB_SQ,
            Doorbell {
                qid,
                index: self.sq_pi,
            }
            .encode(),
        );
        guest.run();
    }

    /// Posts a receive WQE with one SGE and publishes it in the doorbell record.
    pub fn post_recv(&mut self, guest: &Guest, wr_id: u64) {
        let mut wqe = vec![0u8; 64];
        assert!(RecvWqeHeader {
            wr_id,
            num_sge: 1,
            ..RecvWqeHeader::default()
        }
        .write_to(&mut wqe));
        assert!(Sge {
            addr: 0x1000,
            length: 64,
            lkey: 0x100,
        }
        .write_to(&mut wqe[16..]));
        let slot = u64::from(self.rq_pi) & ((1 << self.rq_log) - 1);
        guest.write(self.rq + slot * 64, &wqe);
        self.rq_pi = self.rq_pi.wrapping_add(1);
        guest.write_u32(self.dbrec + 4, u32::from(self.rq_pi));
    }
}
