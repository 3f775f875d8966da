// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The [`EngineHost`] services the device offers the transport engine: payload DMA under MR
//! protection, send and receive completions, receive WQE hand-out (from the RQ or the SRQ),
//! fast registration and invalidation, async events, and the QP and port facts the engine
//! needs.

use std::time::Instant;

use ferroce_hw::*;

use crate::device::{DeviceCore, Work};
use crate::engine::roce::{QpCtx, QpTransport};
use crate::engine::{EngineHost, HostError, RecvCompletion, RecvWork};
use crate::objects::{
    access_writes, mr_access_valid, Binding, BufferMap, Fault, Mr, MrBacking, MrError, Pieces,
};

impl DeviceCore {
    fn mr_for_key(&self, key: u32) -> Result<&Mr, HostError> {
        match self.objects().mrs().get(mr_key_index(key)) {
            Some(mr) if mr.key == key => Ok(mr),
            _ => Err(HostError::Protection(MrError::BadKey)),
        }
    }

    /// The guest pieces of `[iova, iova + len)` under `key` for `access` in `pd`: an MR's
    /// own, or, through a bound memory window (remote access only, within the window's range
    /// and rights), its MR's.
    fn translate(
        &self,
        pd: u32,
        key: u32,
        iova: u64,
        len: u64,
        access: u32,
    ) -> Result<Pieces, HostError> {
        let entry = self.mr_for_key(key)?;
        let Some(window) = entry.window else {
            return entry
                .translate(pd, iova, len, access)
                .map_err(HostError::Protection);
        };
        let bound = window.bound.ok_or(HostError::Protection(MrError::BadKey))?;
        if access & MW_ACCESS_MASK == 0 {
            // A window grants remote access only: it is no local key.
            return Err(HostError::Protection(MrError::Access));
        }
        entry
            .check(pd, iova, len, access)
            .map_err(HostError::Protection)?;
        let mr = self.mr_for_key(bound.mr_key)?;
        mr.check(pd, iova, len, 0).map_err(HostError::Protection)?;
        mr.pieces(iova, len, access_writes(access))
            .map_err(HostError::Protection)
    }

    /// The guest pieces of an access, as [`translate`](Self::translate); an access that
    /// meets an on-demand page not present also raises its page fault ([`page_fault`]).
    fn translate_or_fault(
        &mut self,
        pd: u32,
        key: u32,
        iova: u64,
        len: u64,
        access: u32,
    ) -> Result<Pieces, HostError> {
        let pieces = self.translate(pd, key, iova, len, access);
        if pieces == Err(HostError::Protection(MrError::NotPresent)) {
            self.page_fault(key, iova, len, access);
        }
        pieces
    }

    /// Whether an access of `len` bytes at `iova` through `key` (an on-demand MR, or a window
    /// bound to one) lacks pages. If it does, it is counted and the MR's page fault is raised
    /// for those pages, unless an outstanding one asks for all of them (raised less than
    /// `PAGE_FAULT_REPEAT_MS` ago and not answered by `CMD_UPDATE_MR_PAGES` yet) or EQ 0 has no
    /// room for it (`async_room`: then a later try raises it). Any other MR lacks nothing.
    fn page_fault(&mut self, key: u32, iova: u64, len: u64, access: u32) -> bool {
        let Ok(entry) = self.mr_for_key(key) else {
            return false;
        };
        let mr_key = entry
            .window
            .and_then(|w| w.bound)
            .map_or(key, |bound| bound.mr_key);
        let now = self.bus().elapsed_us();
        let room = self.async_room();
        let Some(mr) = self.objects_mut().mrs_mut().get_mut(mr_key_index(mr_key)) else {
            return false;
        };
        let write = access_writes(access);
        let Some((first, count)) = mr.absent(iova, len, write) else {
            return false;
        };
        let outstanding = mr.fault.is_some_and(|f| f.covers(now, first, count));
        // With EQ 0 more than half full the fault is not raised, nor remembered: the access
        // waits, and raises it when it comes again and there is room.
        let raise = !outstanding && room;
        if raise {
            mr.fault = Some(Fault {
                at: now,
                first,
                count,
            });
        }
        let key = mr.key;
        self.bus().counters().inc(COUNTER_ODP_FAULTS);
        if raise {
            self.post_page_fault(key, first, count, write);
        } else if !outstanding {
            self.bus().trace().event(
                "page_fault_deferred",
                || serde_json::json!({"key": key, "first": first, "count": count}),
            );
        }
        true
    }

    /// Unbinds memory window `index` (if bound), releasing its MR.
    pub(crate) fn unbind_window(&mut self, index: u32) {
        let Some(mw) = self.objects_mut().mrs_mut().get_mut(index) else {
            return;
        };
        let Some(bound) = mw.window.as_mut().and_then(|w| w.bound.take()) else {
            return;
        };
        (mw.access, mw.iova, mw.length) = (0, 0, 0);
        if let Some(mr) = self
            .objects_mut()
            .mrs_mut()
            .get_mut(mr_key_index(bound.mr_key))
        {
            mr.windows = mr.windows.saturating_sub(1);
        }
    }
}

impl EngineHost for DeviceCore {
    fn read_payload(
        &mut self,
        pd: u32,
        lkey: u32,
        iova: u64,
        buf: &mut [u8],
        access: u32,
    ) -> Result<(), HostError> {
        let pieces = self.translate_or_fault(pd, lkey, iova, buf.len() as u64, access)?;
        let mut done = 0usize;
        for (addr, len) in pieces {
            let len = len as usize;
            self.bus()
                .mem()
                .read(addr, &mut buf[done..done + len])
                .map_err(HostError::Dma)?;
            done += len;
        }
        // The buffer may be a frame's room, over an older frame's bytes: every byte is read
        // or the read fails.
        if done != buf.len() {
            return Err(HostError::Protection(MrError::Bounds));
        }
        self.bus().counters().inc(COUNTER_PAYLOAD_DMA_READS);
        self.bus()
            .counters()
            .add(COUNTER_PAYLOAD_READ_BYTES, buf.len() as u64);
        self.bus().trace().event("dma", || serde_json::json!({"dir": "read", "what": "payload", "iova": iova, "len": buf.len()}));
        Ok(())
    }

    fn write_payload(
        &mut self,
        pd: u32,
        key: u32,
        iova: u64,
        data: &[u8],
        access: u32,
    ) -> Result<(), HostError> {
        let pieces = self.translate_or_fault(pd, key, iova, data.len() as u64, access)?;
        let mut done = 0usize;
        for (addr, len) in pieces {
            let len = len as usize;
            self.bus()
                .mem()
                .write(addr, &data[done..done + len])
                .map_err(HostError::Dma)?;
            done += len;
        }
        self.bus().counters().inc(COUNTER_PAYLOAD_DMA_WRITES);
        self.bus()
            .counters()
            .add(COUNTER_PAYLOAD_WRITE_BYTES, data.len() as u64);
        self.bus().trace().event("dma", || serde_json::json!({"dir": "write", "what": "payload", "iova": iova, "len": data.len()}));
        Ok(())
    }

    fn complete_send(
        &mut self,
        qpn: u32,
        index: u16,
        status: WcStatus,
        byte_len: u32,
    ) -> Result<(), HostError> {
        let qp = self
            .objects_mut()
            .qps_mut()
            .get_mut(qpn)
            .ok_or(HostError::BadQp)?;
        if !qp.inflight.iter().any(|w| w.index == index) {
            return Err(HostError::BadQp);
        }
        let cqn = qp.sq_cqn;
        let mut done = Vec::new();
        while let Some(wqe) = qp.inflight.pop_front() {
            let last = wqe.index == index;
            done.push((wqe, last));
            if last {
                break;
            }
        }
        let Some(sq) = qp.sq.as_mut() else {
            return Err(HostError::BadQp);
        };
        sq.ci = index.wrapping_add(1);
        // Room for WQEs still in the ring (see `MAX_HELD_SENDS`).
        let more = sq.fetch != sq.pi;
        let mut written = Ok(());
        for (wqe, last) in done {
            let wc_status = if last { status } else { WcStatus::Success };
            if wqe.signaled || wc_status != WcStatus::Success {
                let cqe = Cqe {
                    wr_id: wqe.wr_id,
                    byte_len: if last { byte_len } else { 0 },
                    qpn,
                    wqe_index: wqe.index,
                    opcode: cqe_opcode_for_send(wqe.opcode),
                    status: wc_status.into(),
                    ..Cqe::default()
                };
                if let Err(e) = self.write_cqe(cqn, cqe) {
                    written = Err(e);
                    break;
                }
            }
        }
        // An error moves the QP to ERR even if its CQE could not be written (its transport,
        // lent for this turn, stops when the engine gives it back).
        if status != WcStatus::Success {
            if let Some(qp) = self.objects_mut().qps_mut().get_mut(qpn) {
                qp.enter_error();
            }
            self.queue_work(Work::Qp(qpn));
        } else if more {
            self.queue_work(Work::Qp(qpn));
        }
        written
    }

    fn take_recv(&mut self, qpn: u32) -> Result<Option<RecvWork>, HostError> {
        let qp = self.objects().qps().get(qpn).ok_or(HostError::BadQp)?;
        if !matches!(qp.state, QpState::Rtr | QpState::Rts | QpState::Sqd) {
            return Err(HostError::BadQp);
        }
        if qp.srqn != NONE {
            return Ok(self.take_srq_wqe(qp.srqn));
        }
        let Some(rq) = qp.rq.as_ref() else {
            return Err(HostError::BadQp);
        };
        let (buf, fetch, dbrec) = (rq.buf.clone(), rq.fetch, qp.dbrec_addr);
        let pi = self
            .read_qp_dbrec(dbrec)
            .map(|r| r.rq_pi as u16)
            .ok_or(HostError::BadQp)?;
        if pi == fetch {
            return Ok(None);
        }
        if !buf.ring.producer_valid(pi, fetch) {
            self.qp_fatal(qpn, WQE_ERR_BAD_INDEX);
            return Err(HostError::BadQp);
        }
        match self.read_recv_wqe(&buf, fetch) {
            Ok((wr_id, sges)) => {
                if let Some(rq) = self
                    .objects_mut()
                    .qps_mut()
                    .get_mut(qpn)
                    .and_then(|qp| qp.rq.as_mut())
                {
                    rq.pi = pi;
                    rq.fetch = fetch.wrapping_add(1);
                }
                Ok(Some(RecvWork {
                    index: fetch,
                    wr_id,
                    sges,
                    srqn: None,
                }))
            }
            Err(detail) => {
                self.qp_fatal(qpn, detail);
                Err(HostError::BadQp)
            }
        }
    }

    fn xrc_target(&self, qpn: u32, srqn: u32) -> Option<u32> {
        let qp = self.objects().qps().get(qpn)?;
        let srq = self.objects().srqs().get(srqn)?;
        let xrc = srq.xrc?;
        (qp.qp_type == QpType::XrcTgt && xrc.xrcd == qp.xrcd).then_some(srq.pd)
    }

    fn take_xrc_recv(&mut self, qpn: u32, srqn: u32) -> Result<Option<RecvWork>, HostError> {
        let qp = self.objects().qps().get(qpn).ok_or(HostError::BadQp)?;
        if !matches!(qp.state, QpState::Rtr | QpState::Rts | QpState::Sqd)
            || self.xrc_target(qpn, srqn).is_none()
        {
            return Err(HostError::BadQp);
        }
        Ok(self.take_srq_wqe(srqn))
    }

    fn complete_recv(
        &mut self,
        qpn: u32,
        work: &RecvWork,
        c: RecvCompletion,
    ) -> Result<(), HostError> {
        // An XRC SRQ's WQE completes on the SRQ's CQ, naming the SRQ.
        let xrc = work
            .srqn
            .and_then(|srqn| Some((srqn, self.objects().srqs().get(srqn)?.xrc?)));
        let qp = self
            .objects_mut()
            .qps_mut()
            .get_mut(qpn)
            .ok_or(HostError::BadQp)?;
        let (cqn, flags, srqn) = match xrc {
            Some((srqn, x)) => (x.cqn, c.flags | CQE_FLAG_XRC, srqn),
            None => (qp.rq_cqn, c.flags, 0),
        };
        if let Some(rq) = qp.rq.as_mut() {
            rq.ci = rq.ci.wrapping_add(1);
        }
        let cqe = Cqe {
            wr_id: work.wr_id,
            byte_len: c.byte_len,
            imm_or_inv: c.imm_or_inv,
            qpn,
            src_qpn: c.src_qpn,
            wqe_index: work.index,
            opcode: c.opcode,
            status: c.status.into(),
            flags,
            vlan: c.vlan,
            smac: c.smac,
            network_hdr_type: c.network_hdr_type,
            srqn,
            ..Cqe::default()
        };
        self.write_cqe(cqn, cqe)
    }

    fn fast_register(&mut self, pd: u32, seg: &RegMrSeg) -> Result<(), HostError> {
        let bad = HostError::Protection(MrError::BadKey);
        let mr = self.objects().mrs().get(mr_key_index(seg.key)).ok_or(bad)?;
        let max_pages = mr.fast_reg_max_pages.ok_or(bad)?;
        if mr.pd != pd {
            return Err(HostError::Protection(MrError::BadPd));
        }
        // Only an MR in the free state is registered (IBA 10.6.3.1, as rxe): a valid one is
        // invalidated first, so that no key of it outlives the registration unnoticed.
        if !matches!(mr.backing, MrBacking::Invalid) {
            return Err(bad);
        }
        // The access rules of CREATE_MR.
        if !mr_access_valid(seg.access)
            || seg.rsvd != [0; 3]
            || seg.page_count == 0
            || seg.page_count > max_pages
        {
            return Err(bad);
        }
        let desc = BufDesc {
            addr: seg.pbl_addr,
            page_count: seg.page_count,
            log_page_size: seg.log_page_size,
            rsvd: [0; 3],
        };
        let log = u32::from(seg.log_page_size).min(MAX_LOG_PAGE_SIZE);
        let span = seg.length.saturating_add(seg.iova & ((1u64 << log) - 1));
        let map =
            BufferMap::resolve(self.bus().mem(), &desc, span, 1, max_pages).map_err(|_| bad)?;
        if seg.iova.checked_add(seg.length).is_none() {
            return Err(HostError::Protection(MrError::Bounds));
        }
        let mr = self
            .objects_mut()
            .mrs_mut()
            .get_mut(mr_key_index(seg.key))
            .ok_or(bad)?;
        mr.key = seg.key;
        mr.iova = seg.iova;
        mr.length = seg.length;
        mr.access = seg.access;
        mr.backing = MrBacking::Buffer(map);
        self.bus().trace().event(
            "reg_mr",
            || serde_json::json!({"key": seg.key, "iova": seg.iova, "length": seg.length}),
        );
        Ok(())
    }

    fn invalidate(&mut self, pd: u32, qpn: u32, key: u32) -> Result<(), HostError> {
        let bad = HostError::Protection(MrError::BadKey);
        let index = mr_key_index(key);
        if let Some(window) = self.mr_for_key(key)?.window {
            // Type 2 windows only, bound to this QP, in its PD (IBA 10.6.7.2.6).
            let bound = window.bound.ok_or(bad)?;
            if window.mw_type != MW_TYPE_2 || bound.qpn != Some(qpn) {
                return Err(bad);
            }
            if self.mr_for_key(key)?.pd != pd {
                return Err(HostError::Protection(MrError::BadPd));
            }
            self.unbind_window(index);
            self.bus().trace().event(
                "invalidate",
                || serde_json::json!({"key": key, "window": true}),
            );
            return Ok(());
        }
        let mr = self
            .objects_mut()
            .mrs_mut()
            .get_mut(mr_key_index(key))
            .filter(|mr| mr.key == key && mr.fast_reg_max_pages.is_some());
        let mr = mr.ok_or(HostError::Protection(MrError::BadKey))?;
        if mr.pd != pd {
            return Err(HostError::Protection(MrError::BadPd));
        }
        // Windows bound to it keep it valid until they are unbound or invalidated (as rxe).
        if mr.windows > 0 {
            return Err(bad);
        }
        mr.backing = MrBacking::Invalid;
        self.bus()
            .trace()
            .event("invalidate", || serde_json::json!({"key": key}));
        Ok(())
    }

    fn bind_mw(&mut self, pd: u32, qpn: u32, seg: &BindMwSeg) -> Result<(), HostError> {
        let (bad, access_err) = (
            HostError::Protection(MrError::BadKey),
            HostError::Protection(MrError::Access),
        );
        let mw_index = mr_key_index(seg.mw_key);
        let mw = self.objects().mrs().get(mw_index).ok_or(bad)?;
        let window = mw.window.ok_or(bad)?;
        if mw.pd != pd {
            return Err(HostError::Protection(MrError::BadPd));
        }
        if seg.rsvd != [0; 12] || seg.access & !MW_ACCESS_MASK != 0 {
            return Err(access_err);
        }
        // A type 2 window is bound once, until it is invalidated; a type 1 window is rebound
        // at will, and unbound by a bind of length 0.
        if window.mw_type == MW_TYPE_2 && window.bound.is_some() {
            return Err(bad);
        }
        let unbinding = window.mw_type == MW_TYPE_1 && seg.length == 0;
        if !unbinding {
            let mr = self.mr_for_key(seg.mr_key)?;
            if mr.window.is_some() || matches!(mr.backing, MrBacking::Invalid) {
                return Err(bad);
            }
            if mr.access & ACCESS_MW_BIND == 0 {
                return Err(access_err);
            }
            // Remote write or atomic rights need the MR's local write (IBA C10-75).
            let writes = seg.access & (ACCESS_REMOTE_WRITE | ACCESS_REMOTE_ATOMIC) != 0;
            if writes && mr.access & ACCESS_LOCAL_WRITE == 0 {
                return Err(access_err);
            }
            mr.check(pd, seg.addr, seg.length, 0)
                .map_err(HostError::Protection)?;
        }
        self.unbind_window(mw_index);
        if !unbinding {
            if let Some(mr) = self
                .objects_mut()
                .mrs_mut()
                .get_mut(mr_key_index(seg.mr_key))
            {
                mr.windows += 1;
            }
        }
        let mw = self.objects_mut().mrs_mut().get_mut(mw_index).ok_or(bad)?;
        mw.key = seg.mw_key;
        if let (false, Some(w)) = (unbinding, mw.window.as_mut()) {
            w.bound = Some(Binding {
                mr_key: seg.mr_key,
                qpn: (w.mw_type == MW_TYPE_2).then_some(qpn),
            });
            (mw.access, mw.iova, mw.length) = (seg.access, seg.addr, seg.length);
        }
        self.bus().trace().event("bind_mw", || {
            serde_json::json!({"mw_key": seg.mw_key, "mr_key": seg.mr_key, "addr": seg.addr,
                "length": seg.length, "access": seg.access, "qpn": qpn})
        });
        Ok(())
    }

    fn gid(&self, index: u32) -> Option<crate::objects::GidEntry> {
        self.objects().gid(index)
    }

    fn has_gid(&self, gid: &[u8; 16], gid_type: u8) -> bool {
        self.objects()
            .gids()
            .any(|(_, g)| g.gid == *gid && g.gid_type == gid_type)
    }

    fn mcast_members(&self, mgid: &[u8; 16]) -> Vec<u32> {
        self.objects().mcast().members(mgid).to_vec()
    }

    fn ah(&self, ah: u32) -> Option<CreateAhCmd> {
        self.objects().ahs().get(ah).copied()
    }

    fn qp_state(&self, qpn: u32) -> Option<QpState> {
        self.objects().qps().get(qpn).map(|qp| qp.state)
    }

    fn count(&self, counter: usize, n: u64) {
        self.bus().counters().add(counter, n);
    }

    fn wqe_on_wire(&mut self, qpn: u32, index: u16) {
        let rang = self
            .objects_mut()
            .qps_mut()
            .get_mut(qpn)
            .and_then(|qp| qp.rang.on_wire(index));
        if let Some(r) = rang {
            self.latency_mut().record(r.noticed, r.at.elapsed());
        }
    }

    fn now(&self) -> Instant {
        self.bus().now()
    }

    fn check_out(&mut self, qpn: u32) -> Option<QpCtx> {
        let qp = self.objects_mut().qps_mut().get_mut(qpn)?;
        let Some(transport) = qp.transport.take() else {
            // Turns do not nest: a QP's transport is lent once at a time.
            debug_assert!(false, "QP {qpn}'s transport is lent already");
            return None;
        };
        Some(QpCtx::lent(
            qpn, qp.qp_type, qp.state, qp.pd, qp.attrs, transport,
        ))
    }

    fn check_in(&mut self, qpn: u32, transport: Box<QpTransport>) {
        if let Some(qp) = self.objects_mut().qps_mut().get_mut(qpn) {
            qp.transport = Some(transport);
        }
    }

    fn check_access(
        &mut self,
        pd: u32,
        key: u32,
        iova: u64,
        len: u64,
        access: u32,
    ) -> Result<(), HostError> {
        self.translate_or_fault(pd, key, iova, len, access)
            .map(|_| ())
    }

    fn pages_present(&mut self, key: u32, iova: u64, len: u64, access: u32) -> bool {
        !self.page_fault(key, iova, len, access)
    }

    fn key_range(&self, pd: u32, key: u32, access: u32) -> Result<(u64, u64), HostError> {
        let entry = self.mr_for_key(key)?;
        let range = (entry.iova, entry.length);
        self.translate(pd, key, range.0, 0, access).map(|_| range)
    }

    fn key_usable_on(&self, key: u32, qpn: u32) -> bool {
        match self.mr_for_key(key).map(|mr| mr.window) {
            Ok(Some(w)) if w.mw_type == MW_TYPE_2 => w.bound.is_some_and(|b| b.qpn == Some(qpn)),
            _ => true,
        }
    }

    fn qp_error(&mut self, qpn: u32, event_type: EventType) {
        if let Some(qp) = self.objects_mut().qps_mut().get_mut(qpn) {
            if qp.enter_error() {
                if qp.srqn != NONE {
                    self.post_async_event(EventType::QpLastWqeReached, 0, qpn, 0);
                }
                self.post_async_event(event_type, 0, qpn, 0);
            }
            self.queue_work(Work::Qp(qpn));
        }
    }

    fn port_mtu(&self) -> u8 {
        self.port().active_mtu()
    }

    fn port_active(&self) -> bool {
        self.port().state() == PORT_STATE_ACTIVE
    }
}
