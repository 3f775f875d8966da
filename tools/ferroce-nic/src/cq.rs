// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Completion queues: CQE writing with overrun detection through the consumer index in the CQ's
//! doorbell record, arming (next / solicited), moderation (count / period) and resizing (a
//! marker CQE at the producer index ends the old ring; that index goes on in the new one).

use core::mem::offset_of;

use ferroce_hw::*;

use crate::device::DeviceCore;
use crate::objects::{field_error, reserved_zero, CmdError, Cq, CqArm, RingBuffer};

impl DeviceCore {
    /// Creates a CQ.
    pub fn create_cq(&mut self, cmd: &CreateCqCmd) -> Result<u32, CmdError> {
        reserved_zero(cmd.flags.into(), offset_of!(CreateCqCmd, flags))?;
        reserved_zero(cmd.rsvd0.into(), offset_of!(CreateCqCmd, rsvd0))?;
        reserved_zero(cmd.rsvd1.into(), offset_of!(CreateCqCmd, rsvd1))?;
        if cmd.dbrec_addr % 8 != 0 || cmd.dbrec_addr == 0 {
            return Err(field_error!(STATUS_BAD_PARAM, CreateCqCmd, dbrec_addr));
        }
        if cmd.eqn < EQN_FIRST_COMPLETION || self.objects().eqs().get(cmd.eqn).is_none() {
            return Err(field_error!(STATUS_BAD_RESOURCE, CreateCqCmd, eqn));
        }
        let mut record = [0u8; CqDbRecord::SIZE];
        self.bus()
            .dma_read(cmd.dbrec_addr, &mut record, "cq_dbrec")
            .map_err(|_| field_error!(STATUS_DMA_ERROR, CreateCqCmd, dbrec_addr))?;
        self.objects()
            .check_translation_budget(u64::from(cmd.ring.page_count))?;
        let buf = RingBuffer::resolve(
            self.bus().mem(),
            &cmd.ring,
            u32::from(cmd.log_size),
            CQE_SIZE as u32,
        )?;
        let cq = Cq::new(
            buf,
            cmd.dbrec_addr,
            cmd.eqn,
            cmd.moder_count,
            cmd.moder_period_us,
        );
        let cqn = self
            .objects_mut()
            .cqs_mut()
            .insert(cq)
            .ok_or(CmdError::new(STATUS_NO_RESOURCES))?;
        if let Some(eq) = self.objects_mut().eqs_mut().get_mut(cmd.eqn) {
            eq.add_user();
        }
        Ok(cqn)
    }

    /// Destroys a CQ no QP uses.
    pub fn destroy_cq(&mut self, cqn: u32) -> Result<(), CmdError> {
        let cq = self
            .objects()
            .cqs()
            .get(cqn)
            .ok_or(CmdError::new(STATUS_BAD_RESOURCE))?;
        if cq.users > 0 {
            return Err(CmdError::new(STATUS_BUSY));
        }
        let eqn = cq.eqn;
        self.objects_mut().remove_cq(cqn);
        if let Some(eq) = self.objects_mut().eqs_mut().get_mut(eqn) {
            eq.drop_user();
        }
        Ok(())
    }

    /// Moves a CQ to a new ring and doorbell record (`CMD_RESIZE_CQ`, see [`ResizeCqCmd`]):
    /// the marker goes into the old ring at the producer index, the new ring's entries are
    /// made stale for the indices from it on, and the CQ writes there from then on, from that
    /// same index: the marker takes no index of its own, so the CQ holds what it held. Its arm and
    /// moderation state go with it. Nothing changes if the command is refused.
    pub fn resize_cq(&mut self, cmd: &ResizeCqCmd) -> Result<(), CmdError> {
        reserved_zero(cmd.rsvd0.into(), offset_of!(ResizeCqCmd, rsvd0))?;
        reserved_zero(cmd.rsvd1.into(), offset_of!(ResizeCqCmd, rsvd1))?;
        if cmd.dbrec_addr % 8 != 0 || cmd.dbrec_addr == 0 {
            return Err(field_error!(STATUS_BAD_PARAM, ResizeCqCmd, dbrec_addr));
        }
        let (old, pi, dbrec, error) = match self.objects().cqs().get(cmd.cqn) {
            Some(cq) => (cq.buf.clone(), cq.pi, cq.dbrec_addr, cq.error),
            None => return Err(field_error!(STATUS_BAD_RESOURCE, ResizeCqCmd, cqn)),
        };
        if error {
            return Err(field_error!(STATUS_BAD_RESOURCE, ResizeCqCmd, cqn));
        }
        let old_pages = old.map.page_entries();
        self.objects()
            .check_translation_budget(u64::from(cmd.ring.page_count).saturating_sub(old_pages))?;
        let new = RingBuffer::resolve(
            self.bus().mem(),
            &cmd.ring,
            u32::from(cmd.log_size),
            CQE_SIZE as u32,
        )?;
        let ci = self
            .cq_consumer_index(dbrec)
            .ok_or(CmdError::new(STATUS_DMA_ERROR))?;
        if !old.ring.producer_valid(pi, ci) {
            return Err(CmdError::new(STATUS_BUSY));
        }
        if old.ring.is_full(pi, ci) {
            // No room for the marker: the consumer must poll first.
            return Err(CmdError::new(STATUS_BUSY));
        }
        // The new ring counts on from the old one: it must hold the CQEs not consumed, and
        // those owed for send WQEs already posted on QPs completing here (a send posted before
        // the resize completes after it, however late the device gets to it: shrinking the CQ
        // under it would overrun the CQ).
        let owed: u32 = self
            .objects()
            .qps()
            .iter()
            .filter(|(_, qp)| qp.sq_cqn == cmd.cqn)
            .map(|(_, qp)| qp.owed_send_cqes())
            .sum();
        if old.ring.used(pi, ci).saturating_add(owed) > new.ring.size() {
            return Err(field_error!(STATUS_BAD_PARAM, ResizeCqCmd, log_size));
        }
        let mut record = [0u8; CqDbRecord::SIZE];
        self.bus()
            .dma_read(cmd.dbrec_addr, &mut record, "cq_dbrec")
            .map_err(|_| field_error!(STATUS_DMA_ERROR, ResizeCqCmd, dbrec_addr))?;
        // The new ring first: every slot stale for the index it will hold next.
        for slot in 0..new.ring.size() {
            let owner = new.ring.stale_owner(new.ring.next_index_in_slot(pi, slot));
            let at = u64::from(slot) * CQE_SIZE as u64 + CQE_OWNER_OFFSET as u64;
            new.map
                .write(self.bus().mem(), at, &[owner])
                .map_err(|_| CmdError::new(STATUS_DMA_ERROR))?;
        }
        let marker = Cqe {
            opcode: CQE_OP_RESIZE,
            owner: old.ring.owner(pi),
            ..Cqe::default()
        };
        let written = old.publish(self.bus().mem(), pi, &marker.encode(), CQE_OWNER_OFFSET);
        if written.is_err() {
            self.bus().counters().inc(COUNTER_DMA_ERRORS);
            self.cq_error(cmd.cqn);
            return Err(CmdError::new(STATUS_DMA_ERROR));
        }
        self.bus().trace().event("cq_resize", || {
            serde_json::json!({"cqn": cmd.cqn, "marker": pi, "ci": ci, "log_size": cmd.log_size})
        });
        let Some(cq) = self.objects_mut().cqs_mut().get_mut(cmd.cqn) else {
            return Err(CmdError::new(STATUS_BAD_RESOURCE));
        };
        cq.buf = new;
        cq.dbrec_addr = cmd.dbrec_addr;
        Ok(())
    }

    /// Reads the consumer index from a CQ's doorbell record.
    fn cq_consumer_index(&self, dbrec_addr: u64) -> Option<u16> {
        let mut record = [0u8; CqDbRecord::SIZE];
        self.bus().counters().inc(COUNTER_DBREC_READS);
        self.bus()
            .dma_read(dbrec_addr, &mut record, "cq_dbrec")
            .ok()?;
        Some(CqDbRecord::decode(&record).ci as u16)
    }

    /// Marks a CQ in error and tells the driver.
    fn cq_error(&mut self, cqn: u32) {
        if let Some(cq) = self.objects_mut().cqs_mut().get_mut(cqn) {
            if !cq.error {
                cq.error = true;
                self.post_async_event(EventType::CqError, 0, cqn, 0);
            }
        }
    }

    /// Writes a CQE (owner bit set here) and generates the completion event the arm state and
    /// moderation call for. Fails if the CQ is missing, in error, or full according to its
    /// doorbell record (which puts it in error).
    pub fn write_cqe(&mut self, cqn: u32, mut cqe: Cqe) -> Result<(), crate::engine::HostError> {
        use crate::engine::HostError;
        let (dbrec, pi, ring) = match self.objects().cqs().get(cqn) {
            Some(cq) if !cq.error => (cq.dbrec_addr, cq.pi, cq.buf.ring),
            _ => return Err(HostError::CqError),
        };
        let Some(ci) = self.cq_consumer_index(dbrec) else {
            self.cq_error(cqn);
            return Err(HostError::CqError);
        };
        if !ring.producer_valid(pi, ci) || ring.is_full(pi, ci) {
            self.bus().trace().event(
                "cq_overrun",
                || serde_json::json!({"cqn": cqn, "pi": pi, "ci": ci}),
            );
            self.cq_error(cqn);
            return Err(HostError::CqError);
        }
        self.lie_about_cqe(cqn, &mut cqe);
        cqe.owner = ring.owner(pi);
        let (objects, bus) = self.objects_and_bus();
        let Some(cq) = objects.cqs().get(cqn) else {
            return Err(HostError::CqError);
        };
        let written = cq
            .buf
            .publish(bus.mem(), pi, &cqe.encode(), CQE_OWNER_OFFSET);
        if written.is_err() {
            self.bus().counters().inc(COUNTER_DMA_ERRORS);
            self.cq_error(cqn);
            return Err(HostError::CqError);
        }
        self.bus().counters().inc(COUNTER_CQES);
        self.bus().trace().event("cqe", || {
            serde_json::json!({"cqn": cqn, "index": pi, "qpn": cqe.qpn, "wqe_index": cqe.wqe_index, "opcode": cqe.opcode, "name": cqe_opcode_name(cqe.opcode), "status": cqe.status, "wr_id": cqe.wr_id, "byte_len": cqe.byte_len})
        });
        let now = self.bus().elapsed_us();
        let Some(cq) = self.objects_mut().cqs_mut().get_mut(cqn) else {
            return Err(HostError::CqError);
        };
        cq.pi = pi.wrapping_add(1);
        if cq.triggered_by(&cqe) || cq.has_unreported() {
            let due = self
                .objects_mut()
                .cq_unreported(cqn, now)
                .is_some_and(Cq::count_reached);
            if due {
                self.completion_event(cqn);
            }
        }
        Ok(())
    }

    /// Posts the completion EQE of a CQ and disarms it.
    fn completion_event(&mut self, cqn: u32) {
        let Some(cq) = self.objects_mut().cq_reported(cqn) else {
            return;
        };
        cq.arm = CqArm::Disarmed;
        let eqn = cq.eqn;
        self.post_eqe(
            eqn,
            Eqe {
                event_type: EventType::Completion.into(),
                data0: cqn,
                ..Eqe::default()
            },
        );
    }

    /// Fires moderated completion events whose period expired.
    pub fn moderation_tick(&mut self) {
        let now = self.bus().elapsed_us();
        let is_due = |cq: &Cq| cq.moderation_due_us().is_some_and(|due| due <= now);
        // Called every round: nothing is allocated unless an event is due.
        if !self.objects().unreported_cqs().any(|(_, cq)| is_due(cq)) {
            return;
        }
        let due: Vec<u32> = self
            .objects()
            .unreported_cqs()
            .filter(|(_, cq)| is_due(cq))
            .map(|(cqn, _)| cqn)
            .collect();
        for cqn in due {
            self.completion_event(cqn);
        }
    }

    /// Applies an arm doorbell when the guest writes it (under the device lock, so in order
    /// with every CQE): the CQ raises its event for the next CQE written from now on (or the
    /// next solicited / error one). CQEs already in the ring, consumed or not, do not count:
    /// "upon the addition of a new CQE" (ibv_req_notify_cq(3), and rxe). A consumer that arms
    /// before polling what woke it (perftest's `ctx_notify_events`) would otherwise get an
    /// event for CQEs it is about to poll, then wait on that stale event for a CQE not yet
    /// there. Re-arming an armed CQ keeps "next" over "solicited". `false` for no such CQ.
    pub fn arm_cq(&mut self, cqn: u32, solicited: bool) -> bool {
        let Some(cq) = self.objects_mut().cqs_mut().get_mut(cqn) else {
            return false;
        };
        if cq.error {
            return true;
        }
        cq.rearm(solicited);
        self.bus().counters().inc(COUNTER_CQ_ARMS);
        self.bus().trace().event(
            "cq_arm",
            || serde_json::json!({"cqn": cqn, "solicited": solicited}),
        );
        true
    }
}
