// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The interface between the device shell and the transport engine.
//!
//! The shell decodes doorbells, fetches and validates WQEs (or takes them from push windows) and
//! hands them to the [`Engine`]. The engine does the transport work and calls back through
//! [`EngineHost`] to reach guest memory under MR protection, to take receive WQEs, to complete
//! work (CQEs, events) and to count. [`StubEngine`] only records what it is handed (the shell's
//! tests use it); [`roce::RoceEngine`] is the RoCE v2/v1 transport.
//!
//! The RoCE engine is built from tables and state machines in the manner of Linux rxe:
//! [`opcode`] (the opcode table), [`headers`] (BTH and extension headers), [`icrc`], [`frame`]
//! (Ethernet/IP/UDP or GRH framing and steering), [`psn`] (24-bit sequence arithmetic),
//! [`requester`], [`responder`] and [`completer`] (the three state machines), [`wire`] (the
//! engine's side of the port) and [`faults`] (seeded fault injection).

pub mod completer;
pub mod faults;
pub mod frame;
pub mod headers;
pub mod icrc;
pub mod io;
pub mod opcode;
pub mod psn;
pub mod requester;
pub mod responder;
pub mod roce;
pub mod wire;

use std::sync::{Arc, Mutex};
use std::time::Instant;

use ferroce_hw::{
    BindMwSeg, CreateAhCmd, EventType, QpState, QpType, RegMrSeg, SendOp, Sge, UdAddress, WcStatus,
    WqeCtrl,
};
use serde::Serialize;

use crate::memory::DmaError;
use crate::objects::errors::MrError;
use crate::objects::gid::GidEntry;
use roce::{QpCtx, QpTransport};

/// A send WQE handed to the engine.
#[derive(Clone, Debug)]
pub struct SendWork {
    /// Global QPN.
    pub qpn: u32,
    /// Type of the QP.
    pub qp_type: QpType,
    /// Ring index of the WQE.
    pub index: u16,
    /// Control segment.
    pub ctrl: WqeCtrl,
    /// The operation and its operands (from the control and operation segments).
    pub op: SendOp,
    /// UD and GSI: the destination (an AH handle, or the address vector itself).
    pub ud: Option<UdAddress>,
    /// Gather list (empty when inline).
    pub sges: Vec<Sge>,
    /// Inline payload (empty unless `WQE_FLAG_INLINE`).
    pub inline_data: Vec<u8>,
    /// Taken from a push window rather than fetched by DMA.
    pub pushed: bool,
}

/// A receive WQE taken from an RQ or SRQ.
#[derive(Clone, Debug)]
pub struct RecvWork {
    /// Ring index.
    pub index: u16,
    /// `wr_id`.
    pub wr_id: u64,
    /// Scatter list.
    pub sges: Vec<Sge>,
    /// SRQ it came from, if any.
    pub srqn: Option<u32>,
}

/// What a receive completion reports (the fields of a receive CQE the engine knows).
#[derive(Clone, Copy, Debug)]
pub struct RecvCompletion {
    /// Status.
    pub status: WcStatus,
    /// `CQE_OP_RECV` or `CQE_OP_RECV_RDMA_WITH_IMM`.
    pub opcode: u8,
    /// `CQE_FLAG_*`.
    pub flags: u8,
    /// Bytes received.
    pub byte_len: u32,
    /// Immediate data or invalidated key.
    pub imm_or_inv: u32,
    /// Source QPN (UD).
    pub src_qpn: u32,
    /// Source MAC (UD).
    pub smac: [u8; 6],
    /// VLAN (UD).
    pub vlan: u16,
    /// `NET_HDR_*` (UD).
    pub network_hdr_type: u8,
}

impl Default for RecvCompletion {
    /// A successful completion with every other field zero.
    fn default() -> Self {
        Self {
            status: WcStatus::Success,
            opcode: 0,
            flags: 0,
            byte_len: 0,
            imm_or_inv: 0,
            src_qpn: 0,
            smac: [0; 6],
            vlan: 0,
            network_hdr_type: 0,
        }
    }
}

/// Why a host call failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    /// No such QP, or it is not in a state that allows this.
    #[error("no such QP or bad QP state")]
    BadQp,
    /// The CQ is full or in error.
    #[error("CQ overrun or error")]
    CqError,
    /// MR protection check failed.
    #[error("memory protection: {0:?}")]
    Protection(MrError),
    /// Guest memory not accessible.
    #[error("{0}")]
    Dma(DmaError),
}

impl HostError {
    /// The access met pages of an on-demand MR that are not present: it must wait (the page
    /// fault is raised), not fail.
    pub fn is_page_fault(&self) -> bool {
        *self == HostError::Protection(MrError::NotPresent)
    }
}

/// What the device offers the engine.
pub trait EngineHost {
    /// Reads payload bytes at local `iova` under MR `lkey` (checked for `pd` and `access`),
    /// counting payload DMA.
    fn read_payload(
        &mut self,
        pd: u32,
        lkey: u32,
        iova: u64,
        buf: &mut [u8],
        access: u32,
    ) -> Result<(), HostError>;
    /// Writes payload bytes at `iova` under MR `key`.
    fn write_payload(
        &mut self,
        pd: u32,
        key: u32,
        iova: u64,
        data: &[u8],
        access: u32,
    ) -> Result<(), HostError>;
    /// Completes the oldest send WQEs of `qpn` up to and including ring index `index`: a CQE for
    /// signalled ones (and for any error); an error moves the QP to ERR and flushes the rest.
    fn complete_send(
        &mut self,
        qpn: u32,
        index: u16,
        status: WcStatus,
        byte_len: u32,
    ) -> Result<(), HostError>;
    /// Takes the next receive WQE of `qpn` (its RQ or SRQ); `None` if there is none (RNR).
    fn take_recv(&mut self, qpn: u32) -> Result<Option<RecvWork>, HostError>;
    /// The protection domain of XRC SRQ `srqn`, if a request that XRC_TGT QP `qpn` received
    /// may name it: it exists, is an XRC SRQ, and belongs to the QP's XRC domain.
    fn xrc_target(&self, qpn: u32, srqn: u32) -> Option<u32>;
    /// Takes the next receive WQE of XRC SRQ `srqn` for a request XRC_TGT QP `qpn` received
    /// (checked as [`xrc_target`](Self::xrc_target) does); `None` if there is none (RNR).
    fn take_xrc_recv(&mut self, qpn: u32, srqn: u32) -> Result<Option<RecvWork>, HostError>;
    /// Writes a receive CQE for `work` on `qpn`'s receive CQ (an XRC SRQ's WQE: on the SRQ's
    /// CQ, with `CQE_FLAG_XRC` and its number).
    fn complete_recv(
        &mut self,
        qpn: u32,
        work: &RecvWork,
        completion: RecvCompletion,
    ) -> Result<(), HostError>;
    /// Executes a REG_MR work request: maps the fast-registration MR named by `seg.key`'s index
    /// (same `pd`) to `seg`'s page list; `seg.key` becomes its key.
    fn fast_register(&mut self, pd: u32, seg: &RegMrSeg) -> Result<(), HostError>;
    /// Invalidates fast-registration MR `key`, or type 2 memory window `key` bound to `qpn`
    /// (LOCAL_INV posted on `qpn`, or SEND_WITH_INV received on it).
    fn invalidate(&mut self, pd: u32, qpn: u32, key: u32) -> Result<(), HostError>;
    /// Executes a BIND_MW work request posted on `qpn` (see `BindMwSeg`).
    fn bind_mw(&mut self, pd: u32, qpn: u32, seg: &BindMwSeg) -> Result<(), HostError>;
    /// Whether remote key `key` may be used by requests arriving on `qpn`: an MR's or a type 1
    /// window's key, or a type 2 window's bound to `qpn`.
    fn key_usable_on(&self, key: u32, qpn: u32) -> bool;
    /// GID table entry.
    fn gid(&self, index: u32) -> Option<GidEntry>;
    /// Whether the GID table holds `gid` with type `gid_type` (`GID_TYPE_*`): a received
    /// frame's destination is one of the port's.
    fn has_gid(&self, gid: &[u8; 16], gid_type: u8) -> bool;
    /// The QPs attached to multicast group `mgid`.
    fn mcast_members(&self, mgid: &[u8; 16]) -> Vec<u32>;
    /// Address handle.
    fn ah(&self, ah: u32) -> Option<CreateAhCmd>;
    /// A QP's state (the device's: a turn that ends finds whether the device moved the QP to
    /// ERR meanwhile); `None` if there is no such QP.
    fn qp_state(&self, qpn: u32) -> Option<QpState>;
    /// Adds to a `COUNTER_*`.
    fn count(&self, counter: usize, n: u64);
    /// The first frame of send WQE `index` of QP `qpn` went to the wire (its doorbell's
    /// latency is sampled).
    fn wqe_on_wire(&mut self, qpn: u32, index: u16);
    /// Lends QP `qpn` to the engine for a turn: the device's facts about it and its transport
    /// state, which stays the device's between turns; `None` if there is no such QP. Every
    /// check-out is followed by a [`check_in`](Self::check_in) before the next one.
    fn check_out(&mut self, qpn: u32) -> Option<QpCtx>;
    /// Gives QP `qpn`'s transport state back at the end of its turn.
    fn check_in(&mut self, qpn: u32, transport: Box<QpTransport>);
    /// Checks that `len` bytes at `iova` are accessible through MR `key` for `access` in `pd`,
    /// without touching memory (a responder checks a whole WRITE or READ before the first byte).
    /// Pages of an on-demand MR that are not present are `MrError::NotPresent`, and their
    /// page fault is raised (as by any access that meets them).
    fn check_access(
        &mut self,
        pd: u32,
        key: u32,
        iova: u64,
        len: u64,
        access: u32,
    ) -> Result<(), HostError>;
    /// Whether the pages `len` bytes at `iova` through `key` reach are present: `false` only
    /// for an on-demand MR's pages that are not (their page fault is raised). Checks nothing
    /// else and builds nothing: a requester asks it of every WQE before sending it.
    fn pages_present(&mut self, key: u32, iova: u64, len: u64, access: u32) -> bool;
    /// The range `(iova, length)` of the MR or window `key` names, if it may be used for
    /// `access` in `pd` (a FLUSH of a whole MR checks the key, not a range).
    fn key_range(&self, pd: u32, key: u32, access: u32) -> Result<(u64, u64), HostError>;
    /// Moves a QP to ERR after a transport error it detected as responder, with async event
    /// `event_type` (`EventType::QpReqErr`, `EventType::QpAccessErr`); outstanding WQEs are flushed.
    fn qp_error(&mut self, qpn: u32, event_type: EventType);
    /// The port's active MTU (`MTU_*`), which bounds UD messages.
    fn port_mtu(&self) -> u8;
    /// Whether the port is up (`PORT_STATE_ACTIVE`): a port that is down carries no frame
    /// either way (`COUNTER_PORT_DOWN_DROPS`).
    fn port_active(&self) -> bool;
    /// The time on the device's clock ([`crate::clock::Clock`]): the engine's only source of
    /// "now", so that its timers run on virtual time in the tests.
    fn now(&self) -> Instant;
}

/// The transport engine.
pub trait Engine: Send {
    /// A QP was created.
    fn qp_created(&mut self, _qpn: u32, _qp_type: QpType) {}
    /// A QP was modified: the device changed its attributes, its state (now `state`) and its
    /// `transport` (which says whether the QP now has work, and its deadline).
    fn qp_modified(&mut self, _qpn: u32, _state: QpState, _transport: &QpTransport) {}
    /// A QP was destroyed (or the function reset): forget it.
    fn qp_destroyed(&mut self, _qpn: u32) {}
    /// New send work, in ring order.
    fn post_send(&mut self, host: &mut dyn EngineHost, work: SendWork);
    /// New receive WQEs were posted to `qpn`'s RQ (or its SRQ): retry RNR-waiting receives.
    fn recv_posted(&mut self, _host: &mut dyn EngineHost, _qpn: u32) {}
    /// Periodic work (timers, received frames), at [`EngineHost::now`].
    fn poll(&mut self, _host: &mut dyn EngineHost) {}
    /// The round ends: frames the engine's port holds leave now.
    fn flush(&mut self) {}
    /// Device reset: drop everything.
    fn reset(&mut self) {}
    /// Whether the engine has timed or pending work (outstanding packets, queued frames), so
    /// the device thread should poll it soon.
    fn busy(&self) -> bool {
        false
    }
    /// The earliest instant a timer of the engine expires or a frame it holds is due (it may
    /// be past: see `Device::next_deadline`).
    fn next_deadline(&self) -> Option<Instant> {
        None
    }
    /// Whether frames wait to be received (from the wire, or looped back): the next poll has
    /// work without any time passing.
    fn frames_waiting(&self) -> bool {
        false
    }
    /// How many QPs the next poll visits: those with work to do. An idle QP costs a poll
    /// nothing, however many there are.
    fn active_qps(&self) -> usize {
        0
    }
}

/// One thing the stub engine was handed.
#[derive(Clone, Debug, Serialize)]
pub enum StubRecord {
    /// `post_send`.
    Send {
        /// QPN.
        qpn: u32,
        /// Ring index.
        index: u16,
        /// `WR_*`.
        opcode: u8,
        /// `wr_id`.
        wr_id: u64,
        /// Number of SGEs.
        num_sge: usize,
        /// Inline bytes.
        inline_len: usize,
        /// From a push window.
        pushed: bool,
    },
    /// `recv_posted`.
    RecvPosted {
        /// QPN.
        qpn: u32,
    },
    /// `qp_created`.
    QpCreated {
        /// QPN.
        qpn: u32,
    },
    /// `qp_modified`.
    QpModified {
        /// QPN.
        qpn: u32,
        /// New state (its `QpState` encoding).
        state: u8,
    },
    /// `qp_destroyed`.
    QpDestroyed {
        /// QPN.
        qpn: u32,
    },
}

/// Most records the stub keeps; later ones are counted in `dropped`.
pub const STUB_LOG_CAPACITY: usize = 4096;

/// The stub engine's log, shared with tests and the control interface.
#[derive(Default, Serialize)]
pub struct StubLog {
    /// Records, oldest first.
    pub records: Vec<StubRecord>,
    /// Records not kept because the log was full.
    pub dropped: u64,
    /// The send work, complete (for tests).
    #[serde(skip)]
    pub sends: Vec<SendWork>,
}

/// Placeholder engine: records what it is handed and does nothing else (part 2 replaces it).
#[derive(Default)]
pub struct StubEngine {
    log: Arc<Mutex<StubLog>>,
}

impl StubEngine {
    /// A stub engine and a handle to its log.
    pub fn new() -> (Self, Arc<Mutex<StubLog>>) {
        let log = Arc::new(Mutex::new(StubLog::default()));
        (Self { log: log.clone() }, log)
    }

    fn record(&self, record: StubRecord, send: Option<SendWork>) {
        let mut log = self.log.lock().unwrap_or_else(|e| e.into_inner());
        if log.records.len() >= STUB_LOG_CAPACITY {
            log.dropped += 1;
            return;
        }
        log.records.push(record);
        if let Some(send) = send {
            log.sends.push(send);
        }
    }
}

impl Engine for StubEngine {
    fn qp_created(&mut self, qpn: u32, _qp_type: QpType) {
        self.record(StubRecord::QpCreated { qpn }, None);
    }

    fn qp_modified(&mut self, qpn: u32, state: QpState, _transport: &QpTransport) {
        let state = state.into();
        self.record(StubRecord::QpModified { qpn, state }, None);
    }

    fn qp_destroyed(&mut self, qpn: u32) {
        self.record(StubRecord::QpDestroyed { qpn }, None);
    }

    fn post_send(&mut self, _host: &mut dyn EngineHost, work: SendWork) {
        let record = StubRecord::Send {
            qpn: work.qpn,
            index: work.index,
            opcode: work.ctrl.opcode,
            wr_id: work.ctrl.wr_id,
            num_sge: work.sges.len(),
            inline_len: work.inline_data.len(),
            pushed: work.pushed,
        };
        self.record(record, Some(work));
    }

    fn recv_posted(&mut self, _host: &mut dyn EngineHost, qpn: u32) {
        self.record(StubRecord::RecvPosted { qpn }, None);
    }

    fn reset(&mut self) {
        let mut log = self.log.lock().unwrap_or_else(|e| e.into_inner());
        log.records.clear();
        log.sends.clear();
    }
}
