// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Event queues: EQE writing with owner bits, EQ doorbells (consumer index + arm), MSI-X.

use ferroce_hw::*;

use crate::device::DeviceCore;
use crate::objects::{CmdError, Eq, RingBuffer};

impl DeviceCore {
    /// Creates EQ `eqn` (0/1 from the setup registers, others by command).
    pub fn create_eq(
        &mut self,
        eqn: Option<u32>,
        ring: &BufDesc,
        log_size: u32,
        vector: u32,
    ) -> Result<u32, CmdError> {
        if vector >= u32::from(self.irq().vectors()) {
            return Err(CmdError::new(STATUS_BAD_PARAM));
        }
        self.objects()
            .check_translation_budget(u64::from(ring.page_count))?;
        let buf = RingBuffer::resolve(self.mem(), ring, log_size, EQE_SIZE as u32)?;
        let eq = Eq {
            buf,
            pi: 0,
            ci: 0,
            vector: vector as u16,
            armed: false,
            overruns: 0,
            pending_doorbell: None,
            queued: false,
            users: 0,
        };
        match eqn {
            Some(eqn) => {
                if !self.objects_mut().eqs_mut().insert_at(eqn, eq) {
                    return Err(CmdError::new(STATUS_BUSY));
                }
                Ok(eqn)
            }
            None => {
                // Completion EQs never take the fixed numbers 0 and 1.
                let free = (EQN_FIRST_COMPLETION..self.objects().eqs().capacity())
                    .find(|&n| self.objects().eqs().get(n).is_none());
                let eqn = free.ok_or(CmdError::new(STATUS_NO_RESOURCES))?;
                self.objects_mut().eqs_mut().insert_at(eqn, eq);
                Ok(eqn)
            }
        }
    }

    /// Destroys an EQ no CQ uses.
    pub fn destroy_eq(&mut self, eqn: u32) -> Result<(), CmdError> {
        let eq = self
            .objects()
            .eqs()
            .get(eqn)
            .ok_or(CmdError::new(STATUS_BAD_RESOURCE))?;
        if eq.users > 0 {
            return Err(CmdError::new(STATUS_BUSY));
        }
        self.objects_mut().eqs_mut().remove(eqn);
        self.cancel_work(crate::device::Work::Eq(eqn));
        Ok(())
    }

    /// Handles a `REG_EQ_SETUP_CTRL` write (EQ 0 and 1).
    pub fn eq_setup(&mut self, value: u32) {
        let eqn = value & !EQ_SETUP_CREATE;
        let status = if eqn != EQN_ASYNC && eqn != EQN_CMD {
            STATUS_BAD_PARAM
        } else if value & EQ_SETUP_CREATE != 0 {
            let (addr, log, vector) = self.regs().eq_setup();
            let ring = BufDesc {
                addr,
                ..BufDesc::default()
            };
            match self.create_eq(Some(eqn), &ring, log, vector) {
                Ok(_) => STATUS_OK,
                Err(e) => e.status,
            }
        } else {
            match self.destroy_eq(eqn) {
                Ok(()) => STATUS_OK,
                Err(e) => e.status,
            }
        };
        self.regs_mut().set_eq_setup_status(u32::from(status));
        self.trace().event("eq_setup", || serde_json::json!({"eqn": eqn, "create": value & EQ_SETUP_CREATE != 0, "status": status}));
    }

    /// Writes an EQE to `eqn` and raises its vector if armed. `false` if the EQ is missing, full
    /// or not writable.
    pub fn post_eqe(&mut self, eqn: u32, eqe: Eqe) -> bool {
        for lie in self.lies_before_eqe(&eqe) {
            self.write_eqe(eqn, lie);
        }
        self.write_eqe(eqn, eqe)
    }

    fn write_eqe(&mut self, eqn: u32, mut eqe: Eqe) -> bool {
        let Some(eq) = self.objects_mut().eqs_mut().get_mut(eqn) else {
            return false;
        };
        let ring = eq.buf.ring;
        if ring.is_full(eq.pi, eq.ci) {
            eq.overruns += 1;
            self.trace()
                .event("eq_overrun", || serde_json::json!({"eqn": eqn}));
            return false;
        }
        let index = eq.pi;
        let offset = eq.buf.offset(index);
        eqe.owner = ring.owner(index);
        let bytes = eqe.encode();
        let map = eq.buf.map.clone();
        // Body first, owner byte last, so a polling driver never sees a half-written entry.
        let body = map.write(self.mem(), offset, &bytes[..EQE_OWNER_OFFSET]);
        std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
        let owner = body.and_then(|()| {
            map.write(
                self.mem(),
                offset + EQE_OWNER_OFFSET as u64,
                &bytes[EQE_OWNER_OFFSET..],
            )
        });
        if owner.is_err() {
            self.counters().inc(COUNTER_DMA_ERRORS);
            // An EQ that cannot be written leaves the driver deaf: that is fatal.
            self.objects_mut().eqs_mut().remove(eqn);
            self.fatal(FATAL_EQ_DMA);
            return false;
        }
        self.counters().inc(COUNTER_EQES);
        self.trace().event("eqe", || {
            serde_json::json!({"eqn": eqn, "index": index, "type": eqe.event_type, "data0": eqe.data0, "data1": eqe.data1})
        });
        let Some(eq) = self.objects_mut().eqs_mut().get_mut(eqn) else {
            return false;
        };
        eq.pi = eq.pi.wrapping_add(1);
        if eq.armed {
            eq.armed = false;
            let vector = eq.vector;
            self.raise(vector);
        }
        true
    }

    /// Raises an MSI-X vector, counting and tracing it.
    pub fn raise(&self, vector: u16) {
        let outcome = self.irq().raise(vector);
        self.counters().inc(COUNTER_INTERRUPTS);
        self.trace().event(
            "irq",
            || serde_json::json!({"vector": vector, "outcome": outcome}),
        );
    }

    /// Posts an async event on EQ 0 (dropped, and counted, if there is none).
    pub fn post_async_event(&mut self, event_type: EventType, subtype: u8, data0: u32, data1: u32) {
        let event_type = u8::from(event_type);
        self.counters().inc(COUNTER_ASYNC_EVENTS);
        self.trace().event(
            "async_event",
            || serde_json::json!({"type": event_type, "subtype": subtype, "data0": data0}),
        );
        let eqe = Eqe {
            event_type,
            subtype,
            data0,
            data1,
            ..Eqe::default()
        };
        self.post_eqe(EQN_ASYNC, eqe);
    }

    /// Whether EQ 0 is at most half full. Events a process can cause in numbers (doorbell
    /// errors, page faults) are posted only then: the other half stays for the port's, the
    /// QPs' and the device's own events, which every process of the function needs.
    pub fn async_room(&self) -> bool {
        self.objects()
            .eqs()
            .get(EQN_ASYNC)
            .is_some_and(|eq| eq.buf.ring.used(eq.pi, eq.ci) < eq.buf.ring.size() / 2)
    }

    /// Posts a page fault on EQ 0: on-demand MR `key` needs pages `first .. first + count`
    /// (writable if `write`). The caller checked [`Self::async_room`].
    pub fn post_page_fault(&mut self, key: u32, first: u32, count: u32, write: bool) {
        self.counters().inc(COUNTER_ASYNC_EVENTS);
        self.counters().inc(COUNTER_ODP_FAULT_EVENTS);
        self.trace().event(
            "page_fault",
            || serde_json::json!({"key": key, "first": first, "count": count, "write": write}),
        );
        let eqe = Eqe {
            event_type: EventType::PageFault.into(),
            subtype: if write { PAGE_FAULT_WRITE } else { 0 },
            data0: key,
            data1: first,
            data2: count.min(PAGE_FAULT_MAX_PAGES) as u16,
            ..Eqe::default()
        };
        self.post_eqe(EQN_ASYNC, eqe);
    }

    /// Applies a pending EQ doorbell: new consumer index, then arm (firing at once if EQEs are
    /// already waiting).
    pub fn service_eq_doorbell(&mut self, eqn: u32) {
        let Some(eq) = self.objects_mut().eqs_mut().get_mut(eqn) else {
            return;
        };
        eq.queued = false;
        let Some(db) = eq.pending_doorbell.take() else {
            return;
        };
        let ring = eq.buf.ring;
        // The consumer may only move forward, up to the producer.
        if ring.used(eq.pi, db.ci) <= ring.used(eq.pi, eq.ci) {
            eq.ci = db.ci;
        } else {
            self.counters().inc(COUNTER_BAD_DOORBELLS);
            return;
        }
        if db.arm {
            if eq.pi != eq.ci {
                let vector = eq.vector;
                self.raise(vector);
            } else {
                eq.armed = true;
            }
        }
    }
}
