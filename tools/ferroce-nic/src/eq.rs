// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Event queues: EQE writing with owner bits, EQ doorbells (consumer index + arm), MSI-X.
//!
//! An [`Eq`] owns its ring, indexes and arm, and writes its EQEs and applies its doorbells
//! through the [`Bus`]. [`DeviceCore`] creates and destroys EQs (by command or by the setup
//! registers), decides what is posted where (async events, page faults, the lies the host
//! asked for) and turns an EQ the device cannot write into a fatal error.

use ferroce_hw::*;
use serde_json::{json, Value};

use crate::bus::Bus;
use crate::device::DeviceCore;
use crate::objects::{CmdError, RingBuffer};

/// Event queue.
pub struct Eq {
    /// EQE ring.
    buf: RingBuffer,
    /// Producer index (device).
    pi: u16,
    /// Consumer index (last EQ doorbell).
    ci: u16,
    /// MSI-X vector.
    vector: u16,
    /// Raise the vector for the next EQE.
    armed: bool,
    /// EQEs lost because the ring was full.
    overruns: u64,
    /// Latest doorbell not yet applied by the device thread.
    pending_doorbell: Option<EqDoorbell>,
    /// Queued for the device thread.
    queued: bool,
    /// CQs using this EQ.
    users: u32,
}

/// What became of an EQE given to [`Eq::write`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EqeOutcome {
    /// Written; the EQ's vector was raised if it was armed.
    Written,
    /// The ring was full: the EQE is lost and counted as an overrun.
    Overrun,
    /// Guest memory refused the write: the EQ is unusable.
    DmaFailed,
}

impl Eq {
    /// An empty, disarmed EQ on `buf` that raises `vector`.
    pub fn new(buf: RingBuffer, vector: u16) -> Self {
        Self {
            buf,
            pi: 0,
            ci: 0,
            vector,
            armed: false,
            overruns: 0,
            pending_doorbell: None,
            queued: false,
            users: 0,
        }
    }

    /// Sets the MSI-X vector (`CMD_MODIFY_EQ`, validated by the caller).
    pub fn set_vector(&mut self, vector: u16) {
        self.vector = vector;
    }

    /// A CQ starts using this EQ.
    pub fn add_user(&mut self) {
        self.users += 1;
    }

    /// A CQ stops using this EQ.
    pub fn drop_user(&mut self) {
        self.users = self.users.saturating_sub(1);
    }

    /// Whether a CQ uses this EQ.
    pub fn in_use(&self) -> bool {
        self.users > 0
    }

    /// EQEs lost because the ring was full.
    pub fn overruns(&self) -> u64 {
        self.overruns
    }

    /// Page-list entries its ring holds.
    pub fn page_entries(&self) -> u64 {
        self.buf.map.page_entries()
    }

    /// Whether the ring is at most half full.
    pub fn at_most_half_full(&self) -> bool {
        self.buf.ring.used(self.pi, self.ci) < self.buf.ring.size() / 2
    }

    /// Marks the EQ queued for the device thread; whether it was already.
    pub fn mark_queued(&mut self) -> bool {
        std::mem::replace(&mut self.queued, true)
    }

    /// Records a doorbell for the device thread to apply. An arm is kept until applied, even if
    /// a later doorbell only moves the consumer index.
    pub fn ring(&mut self, db: EqDoorbell) {
        let arm = db.arm || self.pending_doorbell.is_some_and(|p| p.arm);
        self.pending_doorbell = Some(EqDoorbell { arm, ..db });
    }

    /// The state `ctl objects` shows.
    pub fn to_json(&self, eqn: u32) -> Value {
        json!({"eqn": eqn, "log_size": self.buf.ring.log_size(), "pi": self.pi, "ci": self.ci,
               "vector": self.vector, "armed": self.armed, "overruns": self.overruns})
    }

    /// Writes `eqe` at the producer index with the owner bit of this lap, body first and owner
    /// byte last, so that a polling driver never sees a half-written entry; raises the vector if
    /// the EQ was armed.
    pub fn write(&mut self, bus: &Bus, eqn: u32, mut eqe: Eqe) -> EqeOutcome {
        let ring = self.buf.ring;
        if ring.is_full(self.pi, self.ci) {
            self.overruns += 1;
            bus.trace().event("eq_overrun", || json!({"eqn": eqn}));
            return EqeOutcome::Overrun;
        }
        let index = self.pi;
        eqe.owner = ring.owner(index);
        let written = self
            .buf
            .publish(bus.mem(), index, &eqe.encode(), EQE_OWNER_OFFSET);
        if written.is_err() {
            bus.counters().inc(COUNTER_DMA_ERRORS);
            return EqeOutcome::DmaFailed;
        }
        bus.counters().inc(COUNTER_EQES);
        bus.trace().event("eqe", || {
            json!({"eqn": eqn, "index": index, "type": eqe.event_type, "data0": eqe.data0, "data1": eqe.data1})
        });
        self.pi = self.pi.wrapping_add(1);
        if std::mem::take(&mut self.armed) {
            bus.raise(self.vector);
        }
        EqeOutcome::Written
    }

    /// Applies the pending doorbell (device thread): the new consumer index, then the arm,
    /// which fires at once if EQEs are already waiting. A consumer index that would move
    /// backwards or past the producer is refused and counted.
    pub fn apply_doorbell(&mut self, bus: &Bus) {
        self.queued = false;
        let Some(db) = self.pending_doorbell.take() else {
            return;
        };
        let ring = self.buf.ring;
        if ring.used(self.pi, db.ci) <= ring.used(self.pi, self.ci) {
            self.ci = db.ci;
        } else {
            bus.counters().inc(COUNTER_BAD_DOORBELLS);
            return;
        }
        if db.arm {
            if self.pi != self.ci {
                bus.raise(self.vector);
            } else {
                self.armed = true;
            }
        }
    }
}

impl DeviceCore {
    /// Creates EQ `eqn` (0/1 from the setup registers, others by command).
    pub fn create_eq(
        &mut self,
        eqn: Option<u32>,
        ring: &BufDesc,
        log_size: u32,
        vector: u32,
    ) -> Result<u32, CmdError> {
        if vector >= u32::from(self.bus().irq().vectors()) {
            return Err(CmdError::new(STATUS_BAD_PARAM));
        }
        self.objects()
            .check_translation_budget(u64::from(ring.page_count))?;
        let buf = RingBuffer::resolve(self.bus().mem(), ring, log_size, EQE_SIZE as u32)?;
        let eq = Eq::new(buf, vector as u16);
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
        if eq.in_use() {
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
        self.bus().trace().event("eq_setup", || serde_json::json!({"eqn": eqn, "create": value & EQ_SETUP_CREATE != 0, "status": status}));
    }

    /// Writes an EQE to `eqn` and raises its vector if armed. `false` if the EQ is missing, full
    /// or not writable.
    pub fn post_eqe(&mut self, eqn: u32, eqe: Eqe) -> bool {
        for lie in self.lies_before_eqe(&eqe) {
            self.write_eqe(eqn, lie);
        }
        self.write_eqe(eqn, eqe)
    }

    fn write_eqe(&mut self, eqn: u32, eqe: Eqe) -> bool {
        let (objects, bus) = self.objects_and_bus();
        let Some(eq) = objects.eqs_mut().get_mut(eqn) else {
            return false;
        };
        match eq.write(bus, eqn, eqe) {
            EqeOutcome::Written => true,
            EqeOutcome::Overrun => false,
            EqeOutcome::DmaFailed => {
                // An EQ that cannot be written leaves the driver deaf: that is fatal.
                self.objects_mut().eqs_mut().remove(eqn);
                self.fatal(FATAL_EQ_DMA);
                false
            }
        }
    }

    /// Posts an async event on EQ 0 (dropped, and counted, if there is none).
    pub fn post_async_event(&mut self, event_type: EventType, subtype: u8, data0: u32, data1: u32) {
        let event_type = u8::from(event_type);
        self.bus().counters().inc(COUNTER_ASYNC_EVENTS);
        self.bus().trace().event(
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
            .is_some_and(Eq::at_most_half_full)
    }

    /// Posts a page fault on EQ 0: on-demand MR `key` needs pages `first .. first + count`
    /// (writable if `write`). The caller checked [`Self::async_room`].
    pub fn post_page_fault(&mut self, key: u32, first: u32, count: u32, write: bool) {
        self.bus().counters().inc(COUNTER_ASYNC_EVENTS);
        self.bus().counters().inc(COUNTER_ODP_FAULT_EVENTS);
        self.bus().trace().event(
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
        let (objects, bus) = self.objects_and_bus();
        if let Some(eq) = objects.eqs_mut().get_mut(eqn) {
            eq.apply_doorbell(bus);
        }
    }
}
