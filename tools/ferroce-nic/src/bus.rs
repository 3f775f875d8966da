// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The function's way out: guest memory (DMA), MSI-X, the counters, the trace and the clock.
//!
//! Every unit of the device (registers, command queue, event queues, completion queues, QPs,
//! doorbell records) reaches the outside world through a [`Bus`] and nothing else. A unit's
//! behaviour is written as methods of its own part taking `&Bus`, so that what a unit may
//! touch is in its signature. The bus holds no device state of its own: it is shared handles
//! and the instant the device started.

use std::sync::Arc;
use std::time::Instant;

use ferroce_hw::{COUNTER_DMA_ERRORS, COUNTER_INTERRUPTS};

use crate::clock::Clock;
use crate::counters::Counters;
use crate::interrupts::InterruptSink;
use crate::memory::{DmaError, GuestMemory};
use crate::trace::Tracer;

/// Guest memory, MSI-X, counters, trace and clock of one function.
pub struct Bus {
    /// Guest memory.
    mem: Arc<dyn GuestMemory>,
    /// MSI-X.
    irq: Arc<dyn InterruptSink>,
    /// Counters (shared with the control socket).
    counters: Arc<Counters>,
    /// Trace (shared with the port's threads).
    trace: Arc<Tracer>,
    /// Where the device's timers read the time: the host's clock, or the tests' virtual time.
    clock: Clock,
    /// When the device was created, on `clock`: CQ moderation and page faults count
    /// microseconds from it.
    start: Instant,
}

impl Bus {
    /// A bus on the host's clock, started now.
    pub fn new(
        mem: Arc<dyn GuestMemory>,
        irq: Arc<dyn InterruptSink>,
        counters: Arc<Counters>,
        trace: Arc<Tracer>,
    ) -> Self {
        let clock = Clock::Wall;
        Self {
            mem,
            irq,
            counters,
            trace,
            start: clock.now(),
            clock,
        }
    }

    /// Moves the bus to `clock` (the tests' virtual time), started at its now.
    pub fn set_clock(&mut self, clock: Clock) {
        self.start = clock.now();
        self.clock = clock;
    }

    /// The time on the device's clock: the only source of "now" for its timers.
    pub fn now(&self) -> Instant {
        self.clock.now()
    }

    /// When the device started, on its clock.
    pub fn start(&self) -> Instant {
        self.start
    }

    /// Microseconds since the device started, on its clock.
    pub fn elapsed_us(&self) -> u64 {
        self.now().saturating_duration_since(self.start).as_micros() as u64
    }

    /// Reads guest memory for device structures (rings, records), counting DMA errors.
    pub fn dma_read(&self, addr: u64, buf: &mut [u8], what: &'static str) -> Result<(), DmaError> {
        let result = self.mem.read(addr, buf);
        self.account("read", what, addr, buf.len(), result)
    }

    /// Writes guest memory for device structures, counting DMA errors.
    pub fn dma_write(&self, addr: u64, data: &[u8], what: &'static str) -> Result<(), DmaError> {
        let result = self.mem.write(addr, data);
        self.account("write", what, addr, data.len(), result)
    }

    /// Traces a device structure's DMA and counts it if it failed.
    fn account(
        &self,
        dir: &'static str,
        what: &'static str,
        addr: u64,
        len: usize,
        result: Result<(), DmaError>,
    ) -> Result<(), DmaError> {
        self.trace.event("dma", || {
            serde_json::json!({"dir": dir, "what": what, "addr": addr, "len": len, "ok": result.is_ok()})
        });
        if result.is_err() {
            self.counters.inc(COUNTER_DMA_ERRORS);
        }
        result
    }

    /// Raises an MSI-X vector, counting and tracing it.
    pub fn raise(&self, vector: u16) {
        let outcome = self.irq.raise(vector);
        self.counters.inc(COUNTER_INTERRUPTS);
        self.trace.event(
            "irq",
            || serde_json::json!({"vector": vector, "outcome": outcome}),
        );
    }

    /// Guest memory.
    pub fn mem(&self) -> &dyn GuestMemory {
        &*self.mem
    }

    /// MSI-X.
    pub fn irq(&self) -> &dyn InterruptSink {
        &*self.irq
    }

    /// Counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Trace.
    pub fn trace(&self) -> &Tracer {
        &self.trace
    }
}
