// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Queue pairs: lifecycle and state machine, WQE fetch (by DMA or from a push window) into the
//! engine, flush on error, and reading receive WQEs from RQs and SRQs. The
//! [`EngineHost`](crate::engine::EngineHost) services the engine calls back into are
//! implemented in the `host` submodule (`qp/host.rs`).

pub mod attrs;
mod host;

pub use attrs::QpAttrs;

use core::mem::offset_of;
use std::collections::VecDeque;

use ferroce_hw::*;

use crate::device::{Device, DeviceCore, Work};
use crate::engine::{RecvWork, SendWork};
use crate::objects::{
    field_error, reserved_zero, CmdError, InflightSend, Qp, RingBuffer, WorkQueue,
};

/// Most send WQEs fetched for one QP per service round (then it is queued again).
const FETCH_BUDGET: usize = 64;

/// Most send WQEs of one QP the device holds (fetched, not completed): its transport keeps a
/// copy of each until it completes, so this bounds a QP's memory in the device (at most this many
/// strides) however deep its ring. The rest wait in the ring; completions make room.
pub const MAX_HELD_SENDS: usize = 128;

/// Largest PSN, QPN and similar 24-bit fields.
const MASK_24: u32 = 0x00ff_ffff;

impl DeviceCore {
    fn cq_usable(&self, cqn: u32) -> bool {
        self.objects().cqs().get(cqn).is_some_and(|cq| !cq.error)
    }

    /// Creates a QP in RESET.
    pub fn create_qp(&mut self, cmd: &CreateQpCmd) -> Result<u32, CmdError> {
        let qp_type = QpType::try_from(cmd.qp_type)
            .map_err(|_| field_error!(STATUS_BAD_PARAM, CreateQpCmd, qp_type))?;
        let polled = cmd.flags & QP_FLAG_DB_RECORD != 0;
        if cmd.flags & !QP_FLAGS_VALID != 0 || (polled && !self.config().db_record) {
            return Err(field_error!(STATUS_BAD_PARAM, CreateQpCmd, flags));
        }
        if cmd.rsvd != 0 {
            return Err(field_error!(STATUS_BAD_PARAM, CreateQpCmd, rsvd));
        }
        if cmd.rsvd2 != 0 {
            return Err(field_error!(STATUS_BAD_PARAM, CreateQpCmd, rsvd2));
        }
        if qp_type.is_xrc() && !self.config().xrc {
            return Err(field_error!(STATUS_NOT_SUPPORTED, CreateQpCmd, qp_type));
        }
        if qp_type == QpType::XrcTgt {
            return self.create_xrc_tgt(cmd);
        }
        if cmd.xrcd != 0 {
            return Err(field_error!(STATUS_BAD_PARAM, CreateQpCmd, xrcd));
        }
        if !self.cq_usable(cmd.sq_cqn) {
            return Err(field_error!(STATUS_BAD_RESOURCE, CreateQpCmd, sq_cqn));
        }
        if !qp_type.has_rq() {
            // XRC_INI: no receive side at all.
            if cmd.rq != BufDesc::default() || cmd.rq_log_size != 0 || cmd.rq_log_stride != 0 {
                return Err(field_error!(STATUS_BAD_PARAM, CreateQpCmd, rq));
            }
            if cmd.rq_cqn != NONE {
                return Err(field_error!(STATUS_BAD_PARAM, CreateQpCmd, rq_cqn));
            }
            if cmd.srqn != NONE {
                return Err(field_error!(STATUS_BAD_PARAM, CreateQpCmd, srqn));
            }
        } else if !self.cq_usable(cmd.rq_cqn) {
            return Err(field_error!(STATUS_BAD_RESOURCE, CreateQpCmd, rq_cqn));
        }
        let has_srq = cmd.srqn != NONE;
        if has_srq && (!qp_type.may_use_srq() || self.objects().srqs().get(cmd.srqn).is_none()) {
            return Err(field_error!(STATUS_BAD_RESOURCE, CreateQpCmd, srqn));
        }
        if cmd.dbrec_addr == 0 || cmd.dbrec_addr % 8 != 0 {
            return Err(field_error!(STATUS_BAD_PARAM, CreateQpCmd, dbrec_addr));
        }
        let mut record = [0u8; QpDbRecord::SIZE];
        self.bus()
            .dma_read(cmd.dbrec_addr, &mut record, "qp_dbrec")
            .map_err(|_| field_error!(STATUS_DMA_ERROR, CreateQpCmd, dbrec_addr))?;
        let stride_ok =
            |log: u8| (MIN_LOG_WQE_STRIDE..=MAX_LOG_WQE_STRIDE).contains(&u32::from(log));
        if !stride_ok(cmd.sq_log_stride) {
            return Err(field_error!(STATUS_BAD_PARAM, CreateQpCmd, sq_log_stride));
        }
        self.objects().check_translation_budget(
            u64::from(cmd.sq.page_count) + u64::from(cmd.rq.page_count),
        )?;
        let sq_buf = RingBuffer::resolve(
            self.bus().mem(),
            &cmd.sq,
            u32::from(cmd.sq_log_size),
            1 << cmd.sq_log_stride,
        )?;
        let rq = if has_srq || !qp_type.has_rq() {
            None
        } else {
            if !stride_ok(cmd.rq_log_stride) {
                return Err(field_error!(STATUS_BAD_PARAM, CreateQpCmd, rq_log_stride));
            }
            let buf = RingBuffer::resolve(
                self.bus().mem(),
                &cmd.rq,
                u32::from(cmd.rq_log_size),
                1 << cmd.rq_log_stride,
            )?;
            Some(WorkQueue {
                buf,
                pi: 0,
                fetch: 0,
                ci: 0,
            })
        };
        // Last before the QP exists, so that a refused command wrote nothing.
        if polled {
            // The device's word of a polled record starts clear: it is awake.
            let sleeping = cmd
                .dbrec_addr
                .wrapping_add(DB_RECORD_SLEEPING_OFFSET as u64);
            self.bus()
                .dma_write(sleeping, &0u32.to_le_bytes(), "qp_dbrec")
                .map_err(|_| field_error!(STATUS_DMA_ERROR, CreateQpCmd, dbrec_addr))?;
        }
        let qp = Qp {
            qp_type,
            state: QpState::Reset,
            pd: cmd.pd,
            xrcd: 0,
            sq_cqn: cmd.sq_cqn,
            rq_cqn: cmd.rq_cqn,
            srqn: cmd.srqn,
            flags: cmd.flags,
            dbrec_addr: cmd.dbrec_addr,
            sq: Some(WorkQueue {
                buf: sq_buf,
                pi: 0,
                fetch: 0,
                ci: 0,
            }),
            rq,
            attrs: QpAttrs::initial(),
            inflight: VecDeque::new(),
            pushed: VecDeque::new(),
            rang: Default::default(),
            rq_notified: false,
            queued: false,
            transport: Some(Box::default()),
        };
        let qpn = if qp_type == QpType::Gsi {
            if !self.objects_mut().qps_mut().insert_at(GSI_QPN, qp) {
                return Err(CmdError::new(STATUS_BUSY));
            }
            GSI_QPN
        } else {
            self.objects_mut()
                .qps_mut()
                .insert(qp)
                .ok_or(CmdError::new(STATUS_NO_RESOURCES))?
        };
        if polled {
            self.records.watch(qpn, QpDbRecord::decode(&record));
        }
        for cqn in [cmd.sq_cqn, cmd.rq_cqn] {
            if let Some(cq) = self.objects_mut().cqs_mut().get_mut(cqn) {
                cq.users += 1;
            }
        }
        if has_srq {
            if let Some(srq) = self.objects_mut().srqs_mut().get_mut(cmd.srqn) {
                srq.users += 1;
            }
        }
        Ok(qpn)
    }

    /// Creates an XRC_TGT QP in RESET: only its type and XRC domain; no rings, doorbell record,
    /// PD, CQs or SRQ of its own (each request it receives names an SRQ of the domain).
    fn create_xrc_tgt(&mut self, cmd: &CreateQpCmd) -> Result<u32, CmdError> {
        let bad = |offset: usize| Err(CmdError::field(STATUS_BAD_PARAM, offset));
        if cmd.sq != BufDesc::default() || cmd.sq_log_size != 0 || cmd.sq_log_stride != 0 {
            return bad(offset_of!(CreateQpCmd, sq));
        }
        if cmd.rq != BufDesc::default() || cmd.rq_log_size != 0 || cmd.rq_log_stride != 0 {
            return bad(offset_of!(CreateQpCmd, rq));
        }
        if cmd.dbrec_addr != 0 {
            return bad(offset_of!(CreateQpCmd, dbrec_addr));
        }
        if cmd.pd != 0 {
            return bad(offset_of!(CreateQpCmd, pd));
        }
        for (cqn, offset) in [
            (cmd.sq_cqn, offset_of!(CreateQpCmd, sq_cqn)),
            (cmd.rq_cqn, offset_of!(CreateQpCmd, rq_cqn)),
            (cmd.srqn, offset_of!(CreateQpCmd, srqn)),
        ] {
            if cqn != NONE {
                return bad(offset);
            }
        }
        if cmd.flags != 0 {
            return bad(offset_of!(CreateQpCmd, flags));
        }
        if cmd.xrcd == 0 {
            return bad(offset_of!(CreateQpCmd, xrcd));
        }
        let qp = Qp {
            qp_type: QpType::XrcTgt,
            state: QpState::Reset,
            pd: 0,
            xrcd: cmd.xrcd,
            sq_cqn: NONE,
            rq_cqn: NONE,
            srqn: NONE,
            flags: 0,
            dbrec_addr: 0,
            sq: None,
            rq: None,
            attrs: QpAttrs::initial(),
            inflight: VecDeque::new(),
            pushed: VecDeque::new(),
            rang: Default::default(),
            rq_notified: false,
            queued: false,
            transport: Some(Box::default()),
        };
        self.objects_mut()
            .qps_mut()
            .insert(qp)
            .ok_or(CmdError::new(STATUS_NO_RESOURCES))
    }

    /// Removes a QP and every reference to it (CQ/SRQ users, QID entries, queued work).
    pub fn remove_qp(&mut self, qpn: u32) -> Result<(), CmdError> {
        let qp = self
            .objects_mut()
            .qps_mut()
            .remove(qpn)
            .ok_or(CmdError::new(STATUS_BAD_RESOURCE))?;
        for cqn in [qp.sq_cqn, qp.rq_cqn] {
            if let Some(cq) = self.objects_mut().cqs_mut().get_mut(cqn) {
                cq.users = cq.users.saturating_sub(1);
            }
        }
        if let Some(srq) = self.objects_mut().srqs_mut().get_mut(qp.srqn) {
            srq.users = srq.users.saturating_sub(1);
        }
        self.objects_mut().unmap_qids_of(QID_KIND_QP, qpn);
        self.objects_mut().mcast_mut().detach_all(qpn);
        self.records.unwatch(qpn);
        self.cancel_work(Work::Qp(qpn));
        Ok(())
    }

    /// Validates a modify command against the QP and returns the new state.
    fn check_modify(&self, qp: &Qp, cmd: &ModifyQpCmd) -> Result<QpState, CmdError> {
        let mask = cmd.attr_mask;
        let bad = |offset: usize| Err(CmdError::field(STATUS_BAD_PARAM, offset));
        if mask & !QP_ATTR_VALID_MASK != 0 {
            return bad(offset_of!(ModifyQpCmd, attr_mask));
        }
        reserved_zero(cmd.rsvd.into(), offset_of!(ModifyQpCmd, rsvd))?;
        if mask & QP_ATTR_CUR_STATE != 0
            && cmd.cur_state != QP_STATE_ANY
            && QpState::from_raw(cmd.cur_state) != Some(qp.state)
        {
            return Err(field_error!(STATUS_BAD_STATE, ModifyQpCmd, cur_state));
        }
        // An undefined target state is refused like a forbidden transition.
        let bad_state = field_error!(STATUS_BAD_STATE, ModifyQpCmd, new_state);
        let new_state = if mask & QP_ATTR_STATE != 0 {
            QpState::try_from(cmd.new_state).map_err(|_| bad_state)?
        } else {
            qp.state
        };
        if !qp.state.can_move_to(new_state) {
            return Err(bad_state);
        }
        if mask & QP_ATTR_PATH_MTU != 0 && mtu_bytes(cmd.path_mtu).is_none() {
            return bad(offset_of!(ModifyQpCmd, path_mtu));
        }
        if mask & QP_ATTR_AV != 0 {
            if u32::from(cmd.sgid_index) >= GID_TABLE_LEN {
                return bad(offset_of!(ModifyQpCmd, sgid_index));
            }
            if cmd.vlan != VLAN_NONE && cmd.vlan > 4095 {
                return bad(offset_of!(ModifyQpCmd, vlan));
            }
            if cmd.flow_label > FLOW_LABEL_MASK {
                return bad(offset_of!(ModifyQpCmd, flow_label));
            }
        }
        if mask & QP_ATTR_DEST_QPN != 0 && cmd.dest_qpn > MASK_24 {
            return bad(offset_of!(ModifyQpCmd, dest_qpn));
        }
        if mask & QP_ATTR_RQ_PSN != 0 && cmd.rq_psn > PSN_MASK {
            return bad(offset_of!(ModifyQpCmd, rq_psn));
        }
        if mask & QP_ATTR_SQ_PSN != 0 && cmd.sq_psn > PSN_MASK {
            return bad(offset_of!(ModifyQpCmd, sq_psn));
        }
        if mask & QP_ATTR_ACCESS_FLAGS != 0 && cmd.access_flags & !ACCESS_VALID_MASK != 0 {
            return bad(offset_of!(ModifyQpCmd, access_flags));
        }
        if mask & QP_ATTR_TIMEOUT != 0 && cmd.timeout > 31 {
            return bad(offset_of!(ModifyQpCmd, timeout));
        }
        if mask & QP_ATTR_RETRY_CNT != 0 && cmd.retry_cnt > 7 {
            return bad(offset_of!(ModifyQpCmd, retry_cnt));
        }
        if mask & QP_ATTR_RNR_RETRY != 0 && cmd.rnr_retry > 7 {
            return bad(offset_of!(ModifyQpCmd, rnr_retry));
        }
        if mask & QP_ATTR_MIN_RNR_TIMER != 0 && cmd.min_rnr_timer > 31 {
            return bad(offset_of!(ModifyQpCmd, min_rnr_timer));
        }
        if mask & QP_ATTR_MAX_QP_RD_ATOMIC != 0 && cmd.max_rd_atomic > MAX_RD_ATOMIC {
            return bad(offset_of!(ModifyQpCmd, max_rd_atomic));
        }
        if mask & QP_ATTR_MAX_DEST_RD_ATOMIC != 0 && cmd.max_dest_rd_atomic > MAX_RD_ATOMIC {
            return bad(offset_of!(ModifyQpCmd, max_dest_rd_atomic));
        }
        if mask & QP_ATTR_PKEY_INDEX != 0 && cmd.pkey_index != 0 {
            return bad(offset_of!(ModifyQpCmd, pkey_index));
        }
        // Attributes a connection (RC or UC) cannot do without.
        if qp.qp_type.is_connected() && mask & QP_ATTR_STATE != 0 {
            let needed = match (qp.state, new_state) {
                (QpState::Init, QpState::Rtr) => {
                    QP_ATTR_AV | QP_ATTR_PATH_MTU | QP_ATTR_DEST_QPN | QP_ATTR_RQ_PSN
                }
                (QpState::Rtr, QpState::Rts) => QP_ATTR_SQ_PSN,
                _ => 0,
            };
            if mask & needed != needed {
                return Err(field_error!(STATUS_BAD_PARAM, ModifyQpCmd, attr_mask));
            }
        }
        Ok(new_state)
    }

    /// Applies a modify command; returns the new state. The caller tells the engine.
    pub fn modify_qp(&mut self, cmd: &ModifyQpCmd) -> Result<QpState, CmdError> {
        let qp = self
            .objects()
            .qps()
            .get(cmd.qpn)
            .ok_or(CmdError::new(STATUS_BAD_RESOURCE))?;
        let new_state = self.check_modify(qp, cmd)?;
        let Some(qp) = self.objects_mut().qps_mut().get_mut(cmd.qpn) else {
            return Err(CmdError::new(STATUS_BAD_RESOURCE));
        };
        qp.attrs.apply(cmd);
        let old_state = qp.state;
        qp.state = new_state;
        // Commands run between the engine's turns: the transport is the QP's.
        if let Some(transport) = qp.transport.as_mut() {
            transport.modified(old_state, new_state, &qp.attrs);
        }
        match new_state {
            QpState::Reset => {
                for wq in [qp.sq.as_mut(), qp.rq.as_mut()].into_iter().flatten() {
                    wq.pi = 0;
                    wq.fetch = 0;
                    wq.ci = 0;
                }
                qp.inflight.clear();
                qp.pushed.clear();
                qp.rang = Default::default();
            }
            QpState::Err if old_state != QpState::Err => {
                if qp.srqn != NONE {
                    self.post_async_event(EventType::QpLastWqeReached, 0, cmd.qpn, 0);
                }
                self.queue_work(Work::Qp(cmd.qpn));
            }
            QpState::Rts => self.queue_work(Work::Qp(cmd.qpn)),
            _ => {}
        }
        Ok(new_state)
    }

    /// Moves a QP to ERR after a fatal WQE problem and reports it.
    pub fn qp_fatal(&mut self, qpn: u32, detail: u8) {
        if let Some(qp) = self.objects_mut().qps_mut().get_mut(qpn) {
            // A transport lent to the engine (a receive WQE it asked for was broken) is
            // stopped, and traced, when the engine gives it back.
            let (was, parked) = (u8::from(qp.state), qp.transport.is_some());
            if qp.enter_error() {
                if parked {
                    let event = || serde_json::json!({"qpn": qpn, "was": was, "why": "device"});
                    self.bus().trace().event("qp_error", event);
                }
                self.post_async_event(EventType::QpFatal, detail, qpn, 0);
            }
            self.queue_work(Work::Qp(qpn));
        }
    }

    /// Reads the `wr_id` of a send WQE still in the ring (for flush CQEs).
    fn ring_wqe_ctrl(&self, buf: &RingBuffer, index: u16) -> WqeCtrl {
        let mut bytes = [0u8; WqeCtrl::SIZE];
        match buf
            .map
            .read(self.bus().mem(), buf.offset(index), &mut bytes)
        {
            Ok(()) => WqeCtrl::decode(&bytes),
            Err(_) => WqeCtrl::default(),
        }
    }

    /// Completes every outstanding WQE of a QP in ERR with `WcStatus::WrFlushErr`.
    pub fn flush_qp(&mut self, qpn: u32) {
        let Some(qp) = self.objects_mut().qps_mut().get_mut(qpn) else {
            return;
        };
        let inflight: Vec<InflightSend> = qp.inflight.drain(..).collect();
        qp.pushed.clear();
        qp.rang = Default::default();
        let sq_cqn = qp.sq_cqn;
        let Some(sq) = qp.sq.as_mut() else {
            return; // XRC_TGT: nothing of its own to flush.
        };
        let (sq_buf, fetch, pi) = (sq.buf.clone(), sq.fetch, sq.pi);
        sq.fetch = pi;
        sq.ci = pi;
        let mut flushed: Vec<(u16, u64, u8)> = inflight
            .iter()
            .map(|w| (w.index, w.wr_id, w.opcode))
            .collect();
        let mut index = fetch;
        while index != pi {
            let ctrl = self.ring_wqe_ctrl(&sq_buf, index);
            flushed.push((index, ctrl.wr_id, ctrl.opcode));
            index = index.wrapping_add(1);
        }
        for (index, wr_id, opcode) in flushed {
            let cqe = Cqe {
                wr_id,
                qpn,
                wqe_index: index,
                opcode: cqe_opcode_for_send(opcode),
                status: WcStatus::WrFlushErr.into(),
                ..Cqe::default()
            };
            if self.write_cqe(sq_cqn, cqe).is_err() {
                break;
            }
        }
        // Own RQ: everything the doorbell record says was posted.
        let Some(qp) = self.objects().qps().get(qpn) else {
            return;
        };
        let (Some(rq), rq_cqn, dbrec) = (qp.rq.as_ref(), qp.rq_cqn, qp.dbrec_addr) else {
            return;
        };
        let (rq_buf, mut index) = (rq.buf.clone(), rq.fetch);
        let Some(pi) = self.read_qp_dbrec(dbrec).map(|r| r.rq_pi as u16) else {
            return;
        };
        if !rq_buf.ring.producer_valid(pi, index) {
            return;
        }
        while index != pi {
            let mut header = [0u8; RecvWqeHeader::SIZE];
            let wr_id = match rq_buf
                .map
                .read(self.bus().mem(), rq_buf.offset(index), &mut header)
            {
                Ok(()) => RecvWqeHeader::decode(&header).wr_id,
                Err(_) => 0,
            };
            let cqe = Cqe {
                wr_id,
                qpn,
                wqe_index: index,
                opcode: CQE_OP_RECV,
                status: WcStatus::WrFlushErr.into(),
                ..Cqe::default()
            };
            index = index.wrapping_add(1);
            if self.write_cqe(rq_cqn, cqe).is_err() {
                break;
            }
        }
        if let Some(rq) = self
            .objects_mut()
            .qps_mut()
            .get_mut(qpn)
            .and_then(|qp| qp.rq.as_mut())
        {
            rq.fetch = index;
            rq.ci = index;
            rq.pi = index;
        }
    }

    fn read_qp_dbrec(&self, addr: u64) -> Option<QpDbRecord> {
        let mut bytes = [0u8; QpDbRecord::SIZE];
        self.bus().counters().inc(COUNTER_DBREC_READS);
        self.bus().dma_read(addr, &mut bytes, "qp_dbrec").ok()?;
        Some(QpDbRecord::decode(&bytes))
    }

    /// Fetches the next send WQE of a QP in RTS, or `None` if there is none or it is bad (then
    /// the QP went to ERR).
    fn fetch_send_wqe(&mut self, qpn: u32) -> Option<SendWork> {
        let qp = self.objects_mut().qps_mut().get_mut(qpn)?;
        let sq = qp.sq.as_ref()?;
        if sq.fetch == sq.pi || qp.inflight.len() >= MAX_HELD_SENDS {
            return None;
        }
        let (index, buf) = (sq.fetch, sq.buf.clone());
        let stride = buf.stride as usize;
        // Pushes for WQEs before the fetch point are stale (the QP was flushed or reset).
        while qp.pushed.front().is_some_and(|p| {
            let behind = index.wrapping_sub(p.index);
            behind != 0 && behind < 0x8000
        }) {
            qp.pushed.pop_front();
        }
        let pushed = match qp.pushed.front() {
            Some(p) if p.index == index => qp.pushed.pop_front().map(|p| p.bytes),
            _ => None,
        };
        let (qp_type, ah_handles) = (qp.qp_type, qp.flags & QP_FLAG_AH_HANDLES != 0);
        let (bytes, was_pushed) = match pushed {
            Some(mut bytes) => {
                bytes.truncate(stride);
                self.bus().counters().inc(COUNTER_WQE_PUSHES);
                (bytes, true)
            }
            None => {
                let mut bytes = vec![0u8; stride];
                if buf
                    .map
                    .read(self.bus().mem(), buf.offset(index), &mut bytes)
                    .is_err()
                {
                    self.bus().counters().inc(COUNTER_DMA_ERRORS);
                    self.qp_fatal(qpn, WQE_ERR_DMA);
                    return None;
                }
                // Fetched: the device has the WQE.
                self.bus().counters().inc(COUNTER_WQE_FETCHES);
                (bytes, false)
            }
        };
        let ctrl = WqeCtrl::read_from(&bytes)?;
        self.bus().trace().event("wqe", || {
            serde_json::json!({"qpn": qpn, "index": index, "pushed": was_pushed,
                "opcode": ctrl.opcode, "name": wr_opcode_name(ctrl.opcode), "flags": ctrl.flags,
                "num_sge": ctrl.num_sge})
        });
        let mut seg = [0u8; 40];
        seg.copy_from_slice(bytes.get(WQE_SEG_OFFSET..WQE_HEADER_SIZE)?);
        // Typed once, here: the engine never decodes the WQE's bytes again.
        let parsed = validate_send_wqe(&ctrl, qp_type, stride)
            .and_then(|()| SendOp::parse(&ctrl, &seg, qp_type));
        let ParsedOp { op, ud } = match parsed {
            Ok(parsed) => parsed,
            Err(e) => {
                self.qp_fatal(qpn, e.code());
                return None;
            }
        };
        // A process's UD QP names destinations by the kernel's AHs only.
        if ah_handles && ctrl.flags & WQE_FLAG_AV != 0 {
            self.qp_fatal(qpn, WQE_ERR_BAD_QP_TYPE);
            return None;
        }
        let (sges, inline_data) = if ctrl.flags & WQE_FLAG_INLINE != 0 {
            let end = WQE_HEADER_SIZE + usize::from(ctrl.inline_len);
            (Vec::new(), bytes.get(WQE_HEADER_SIZE..end)?.to_vec())
        } else {
            let sges = (0..usize::from(ctrl.num_sge))
                .filter_map(|i| wqe_sge(&bytes, WQE_HEADER_SIZE, i))
                .collect();
            (sges, Vec::new())
        };
        let qp = self.objects_mut().qps_mut().get_mut(qpn)?;
        let signaled = ctrl.flags & WQE_FLAG_SIGNALED != 0 || qp.flags & QP_FLAG_SIGNAL_ALL != 0;
        qp.inflight.push_back(InflightSend {
            index,
            wr_id: ctrl.wr_id,
            opcode: ctrl.opcode,
            signaled,
        });
        qp.sq.as_mut()?.fetch = index.wrapping_add(1);
        Some(SendWork {
            qpn,
            qp_type,
            index,
            ctrl,
            op,
            ud,
            sges,
            inline_data,
            pushed: was_pushed,
        })
    }

    /// Reads a receive WQE at `index` of `buf`.
    fn read_recv_wqe(&mut self, buf: &RingBuffer, index: u16) -> Result<(u64, Vec<Sge>), u8> {
        let mut bytes = vec![0u8; buf.stride as usize];
        buf.map
            .read(self.bus().mem(), buf.offset(index), &mut bytes)
            .map_err(|_| WQE_ERR_DMA)?;
        self.bus().counters().inc(COUNTER_WQE_FETCHES);
        let header = RecvWqeHeader::read_from(&bytes).ok_or(WQE_ERR_DMA)?;
        validate_recv_wqe(&header, bytes.len()).map_err(|e| e.code())?;
        let sges = (0..usize::from(header.num_sge))
            .filter_map(|i| wqe_sge(&bytes, RecvWqeHeader::SIZE, i))
            .collect();
        Ok((header.wr_id, sges))
    }

    fn take_srq_wqe(&mut self, srqn: u32) -> Option<RecvWork> {
        let srq = self.objects().srqs().get(srqn)?;
        let (dbrec, buf, ci, limit) = (srq.dbrec_addr, srq.buf.clone(), srq.ci, srq.limit);
        let mut bytes = [0u8; SrqDbRecord::SIZE];
        self.bus().counters().inc(COUNTER_DBREC_READS);
        self.bus().dma_read(dbrec, &mut bytes, "srq_dbrec").ok()?;
        let pi = SrqDbRecord::decode(&bytes).pi as u16;
        if pi == ci || !buf.ring.producer_valid(pi, ci) {
            return None;
        }
        let (wr_id, sges) = match self.read_recv_wqe(&buf, ci) {
            Ok(wqe) => wqe,
            Err(detail) => {
                self.post_async_event(EventType::SrqErr, detail, srqn, 0);
                return None;
            }
        };
        let srq = self.objects_mut().srqs_mut().get_mut(srqn)?;
        srq.ci = ci.wrapping_add(1);
        if limit > 0 && buf.ring.used(pi, srq.ci) < limit {
            srq.limit = 0;
            self.post_async_event(EventType::SrqLimit, 0, srqn, 0);
        }
        Some(RecvWork {
            index: ci,
            wr_id,
            sges,
            srqn: Some(srqn),
        })
    }
}

impl Device {
    /// Services a queued QP: flush in ERR, announce receives, fetch send WQEs into the engine.
    pub fn service_qp(&mut self, qpn: u32) {
        let Some(qp) = self.core.objects_mut().qps_mut().get_mut(qpn) else {
            return;
        };
        qp.queued = false;
        let state = qp.state;
        if state == QpState::Err {
            self.core.flush_qp(qpn);
            return;
        }
        if std::mem::take(&mut qp.rq_notified) && state >= QpState::Init {
            self.engine.recv_posted(&mut self.core, qpn);
        }
        if state != QpState::Rts {
            return;
        }
        for _ in 0..FETCH_BUDGET {
            let Some(work) = self.core.fetch_send_wqe(qpn) else {
                return;
            };
            self.engine.post_send(&mut self.core, work);
        }
        // Budget used up: come back after others had their turn.
        self.core.queue_work(Work::Qp(qpn));
    }

    /// Services a queued SRQ: tells the engine about every QP attached to it.
    pub fn service_srq(&mut self, srqn: u32) {
        let Some(srq) = self.core.objects_mut().srqs_mut().get_mut(srqn) else {
            return;
        };
        srq.queued = false;
        let qpns: Vec<u32> = self
            .core
            .objects()
            .qps()
            .iter()
            .filter(|(_, qp)| qp.srqn == srqn)
            .map(|(n, _)| n)
            .collect();
        for qpn in qpns {
            self.engine.recv_posted(&mut self.core, qpn);
        }
    }
}
