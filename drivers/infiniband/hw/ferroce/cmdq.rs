// SPDX-License-Identifier: GPL-2.0

//! The command queue: a ring of 128-byte commands and a ring of 32-byte completions in
//! DMA-coherent memory, a producer-index doorbell, and completion by the owner bit.
//!
//! Each command is its own type implementing [`hw::Command`] (the payloads of `hw.rs`), so
//! [`Cmdq::exec`] is generic: `cmdq.exec(&hw::QueryPortCmd { port: 1, rsvd: 0 })`. Up to a
//! ring's worth of commands are in flight at once, as in erdma: a [`Mutex`] is held only to take
//! a slot and ring the doorbell, and each caller then waits for the completion in its own slot.
//! A slot is free again once its caller has read the completion. Completion is found by polling
//! the completion ring; once interrupts are enabled ([`Cmdq::use_interrupts`]) the waiters sleep
//! until EQ 1's next command-done event instead. Every wait is bounded by the device's
//! `REG_CMD_TIMEOUT_MS`: a stalled device makes commands fail with [`ETIMEDOUT`], never hang.
//!
//! Everything read back from the device (consumer index, completion token, index, opcode,
//! status) is validated before use.

use kernel::{
    device,
    dma::Coherent,
    io::{
        io_project,
        io_read,
        poll::read_poll_timeout,
        Io, //
    },
    prelude::*,
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
        new_mutex,
        Arc,
        CondVar,
        CondVarTimeoutResult,
        Mutex,
        MutexGuard, //
    },
    time::{
        delay::fsleep,
        msecs_to_jiffies,
        Delta,
        Instant,
        Monotonic, //
    },
};

use crate::{
    eq::{
        CmdEvents,
        EventQueue, //
    },
    hw,
    regs::{
        self,
        SharedBar, //
    },
    state::DeviceState,
};

/// log2 of the entries of both command rings.
pub(crate) const CMDQ_LOG_SIZE: u32 = 6;
const _: () = assert!(CMDQ_LOG_SIZE <= hw::MAX_LOG_CMDQ);
// One bit of `CmdqState::busy` per slot.
const _: () = assert!(1 << CMDQ_LOG_SIZE <= u64::BITS);

/// Longest sleep between two looks at the completion ring while polling.
const POLL_MAX: Delta = Delta::from_millis(1);
/// Longest sleep on the command EQ before looking at the ring again.
const EVENT_WAIT_MAX: Delta = Delta::from_millis(100);

/// Maps a command status (`hw::STATUS_*`, any width) to its name and an errno.
pub(crate) fn status_error(status: u32) -> (&'static str, Error) {
    let Ok(status) = u8::try_from(status) else {
        return ("unknown", EIO);
    };
    let err = match status {
        hw::STATUS_BAD_OPCODE | hw::STATUS_NOT_SUPPORTED => EOPNOTSUPP,
        hw::STATUS_BAD_PARAM | hw::STATUS_BAD_STATE | hw::STATUS_BAD_SIZE => EINVAL,
        hw::STATUS_BAD_RESOURCE => ENOENT,
        hw::STATUS_NO_RESOURCES => ENOMEM,
        hw::STATUS_BUSY => EBUSY,
        hw::STATUS_DMA_ERROR => EFAULT,
        hw::STATUS_STALE_KEY => EAGAIN,
        _ => EIO,
    };
    (hw::status_name(status), err)
}

/// Whether the queue is enabled in the device; disables it on drop.
///
/// A field of [`Cmdq`] declared before the rings, so that the device stops using them before
/// their memory is freed, also when probe fails half-way.
struct CmdqEnable {
    dev: ARef<device::Device>,
    bar: Arc<SharedBar>,
    live: Atomic<bool>,
}

impl CmdqEnable {
    fn is_live(&self) -> bool {
        self.live.load(Relaxed)
    }

    /// Disables the queue in the device, once, and waits until the device says so.
    fn disable(&self) {
        if !self.live.xchg(false, Relaxed) {
            return;
        }
        let done = self
            .bar
            .with(|bar| bar.write_reg(regs::CMDQ_CTRL::zeroed()))
            .and_then(|()| {
                read_poll_timeout(
                    || self.bar.with(|bar| bar.read(regs::CMDQ_STATUS)),
                    |status: &regs::CMDQ_STATUS| !status.enabled().into_bool(),
                    Delta::from_micros(10),
                    Delta::from_millis(100),
                )
            });
        if let Err(e) = done {
            dev_warn!(
                self.dev,
                "disabling the command queue failed (error {})\n",
                e.to_errno()
            );
        }
    }
}

impl Drop for CmdqEnable {
    fn drop(&mut self) {
        self.disable();
    }
}

/// Producer side of the command ring.
struct CmdqState {
    /// Producer index: the next command's slot.
    pi: u16,
    /// Token of the last command.
    token: u32,
    /// The slots (one bit each) of commands whose completion was not read yet. A command that
    /// timed out keeps its slot: the device may still complete it there.
    busy: u64,
}

/// The command queue.
#[pin_data]
pub(crate) struct Cmdq {
    dev: ARef<device::Device>,
    bar: Arc<SharedBar>,
    ring: hw::Ring,
    timeout_ms: u32,
    /// Disables the queue in the device when dropped; declared before the rings.
    enable: CmdqEnable,
    /// Command ring, `hw::CMD_ENTRY_SIZE`-byte entries.
    sq: Coherent<[u8]>,
    /// Completion ring, [`hw::CmdCompletion`] entries.
    cq: Coherent<[u8]>,
    #[pin]
    state: Mutex<CmdqState>,
    /// Signalled when a slot becomes free.
    #[pin]
    slot_freed: CondVar,
    /// EQ 1, which receives a command-done event per command.
    events: Arc<EventQueue<CmdEvents>>,
    /// Wait for EQ 1's events instead of sleeping between looks at the completion ring.
    irq_mode: Atomic<bool>,
    /// The device's health: once it reported a fatal error or stopped answering (a command
    /// timed out, or reads return all ones), commands fail at once instead of each waiting out
    /// the timeout. Only a reset (a new bind) recovers.
    device_state: Arc<DeviceState>,
}

impl Cmdq {
    /// Allocates the rings and enables the queue in the device (bring-up step 4).
    ///
    /// `timeout_ms` is the device's `REG_CMD_TIMEOUT_MS`; `events` is EQ 1; `device_state` is
    /// consulted before and during every command.
    ///
    /// # Errors
    ///
    /// Allocation failures, [`ENODEV`] if the BAR is gone, [`EIO`] if the device refuses the
    /// queue (logged).
    pub(crate) fn new(
        dev: &device::Device<device::Bound>,
        bar: &Arc<SharedBar>,
        timeout_ms: u32,
        events: Arc<EventQueue<CmdEvents>>,
        device_state: Arc<DeviceState>,
    ) -> Result<Arc<Self>> {
        let ring = hw::Ring::new(CMDQ_LOG_SIZE, hw::MAX_LOG_CMDQ).ok_or(EINVAL)?;
        let entries = usize::try_from(ring.size())?;
        let sq = Coherent::<u8>::zeroed_slice(dev, entries * hw::CMD_ENTRY_SIZE, GFP_KERNEL)?;
        let cq = Coherent::<u8>::zeroed_slice(dev, entries * hw::CmdCompletion::SIZE, GFP_KERNEL)?;
        let dev: &device::Device = dev;
        let dev: ARef<device::Device> = dev.into();
        // Built outside the initializer, whose initialized fields shadow locals.
        let enable = CmdqEnable {
            dev: dev.clone(),
            bar: bar.clone(),
            live: Atomic::new(false),
        };
        let cmdq = Arc::pin_init(
            try_pin_init!(Self {
                dev,
                bar: bar.clone(),
                ring,
                timeout_ms,
                enable,
                sq,
                cq,
                state <- new_mutex!(CmdqState { pi: 0, token: 0, busy: 0 }, "ferroce::cmdq"),
                slot_freed <- new_condvar!("ferroce::cmdq_slot_freed"),
                events,
                irq_mode: Atomic::new(false),
                device_state,
            }),
            GFP_KERNEL,
        )?;
        cmdq.start()?;
        Ok(cmdq)
    }

    /// Programs and enables the queue in the device.
    fn start(&self) -> Result {
        let (sq, cq) = (self.sq.dma_address(), self.cq.dma_address());
        let status = self.bar.with(|bar| {
            bar.write_reg(regs::CMDQ_SQ_BASE_LO::from_raw(sq as u32));
            bar.write_reg(regs::CMDQ_SQ_BASE_HI::from_raw((sq >> 32) as u32));
            bar.write_reg(regs::CMDQ_CQ_BASE_LO::from_raw(cq as u32));
            bar.write_reg(regs::CMDQ_CQ_BASE_HI::from_raw((cq >> 32) as u32));
            bar.write_reg(regs::CMDQ_LOG_SIZE::from_raw(self.ring.log_size()));
            bar.write_reg(regs::CMDQ_CTRL::zeroed().with_enable(true));
            bar.read(regs::CMDQ_STATUS)
        })?;
        // From here on the device may use the rings: disable it before freeing them.
        self.enable.live.store(true, Relaxed);
        if status.error().into_bool() || !status.enabled().into_bool() {
            dev_err!(
                self.dev,
                "the device refused the command queue (status {:#x})\n",
                status.into_raw()
            );
            return Err(EIO);
        }
        Ok(())
    }

    /// Executes a command and waits for its completion.
    ///
    /// # Errors
    ///
    /// - [`ETIMEDOUT`] if the device does not complete it within `REG_CMD_TIMEOUT_MS`;
    /// - the device's status mapped to an errno (see [`status_error`]);
    /// - [`EIO`] for a completion that does not match the command;
    /// - [`ENODEV`] once the queue is disabled or the device unbound.
    ///
    /// Every error is logged with the command's name.
    pub(crate) fn exec<C: hw::Command>(&self, cmd: &C) -> Result<C::Reply> {
        self.exec_with_output(cmd, 0)
    }

    /// Executes a command that destroys an object. ib_core cannot handle a failed destroy (it
    /// warns and leaks its own part), and the object cannot outlive a device that stopped
    /// answering or was unbound: then the destroy counts as done. Other failures (the device
    /// refused, e.g. an object still in use) are returned.
    ///
    /// # Errors
    ///
    /// As [`Self::exec`], except the device being gone.
    pub(crate) fn exec_destroy<C: hw::Command>(&self, cmd: &C) -> Result {
        match self.exec(cmd) {
            Ok(_) => Ok(()),
            Err(_) if self.is_gone() => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Whether the device no longer executes commands: it timed out, stopped responding or
    /// reported a fatal error, or the queue was disabled (unbind).
    fn is_gone(&self) -> bool {
        self.device_state.is_dead() || !self.enable.is_live()
    }

    /// Executes a command whose results go to the DMA buffer at `out_addr` (`CMD_QUERY_QP`,
    /// `CMD_QUERY_COUNTERS`), like [`Self::exec`].
    ///
    /// # Errors
    ///
    /// As [`Self::exec`].
    pub(crate) fn exec_with_output<C: hw::Command>(
        &self,
        cmd: &C,
        out_addr: u64,
    ) -> Result<C::Reply> {
        self.run(cmd, out_addr, &[])
    }

    /// Executes a command the device may refuse as the answer to a request of its user (a
    /// resize below what a CQ holds): a refusal with a status in `answers` is returned as its
    /// errno and not logged. Otherwise as [`Self::exec`].
    ///
    /// # Errors
    ///
    /// As [`Self::exec`].
    pub(crate) fn exec_or_refuse<C: hw::Command>(
        &self,
        cmd: &C,
        answers: &[u8],
    ) -> Result<C::Reply> {
        self.run(cmd, 0, answers)
    }

    fn run<C: hw::Command>(&self, cmd: &C, out_addr: u64, answers: &[u8]) -> Result<C::Reply> {
        let name = hw::command_name(C::OPCODE);
        let (pi, token) = self.post(cmd, out_addr, name)?;
        let completion = self.wait_for_completion(pi, token, name);
        if !self.irq_mode.load(Relaxed) {
            // Nobody else drains EQ 1 while polling: take this command's event off it. A
            // failure here is the device going away, which the next command reports.
            let _ = self.events.poll();
        }
        let completion = completion?;
        // Read: the slot may take the next command.
        self.release(pi);

        if completion.index != pi || completion.opcode != C::OPCODE {
            dev_err!(
                self.dev,
                "command {}: bogus completion (token {:#x}, index {}, opcode {:#06x}; expected {:#x}, {}, {:#06x})\n",
                name,
                completion.token,
                completion.index,
                completion.opcode,
                token,
                pi,
                C::OPCODE
            );
            return Err(EIO);
        }
        if completion.status != hw::STATUS_OK {
            let (status, err) = status_error(u32::from(completion.status));
            if answers.contains(&completion.status) {
                return Err(err);
            }
            dev_err!(
                self.dev,
                "command {} failed: status {} ({}), syndrome {}\n",
                name,
                status,
                completion.status,
                completion.syndrome
            );
            return Err(err);
        }
        completion.reply::<C>().ok_or_else(|| {
            dev_err!(
                self.dev,
                "command {}: bogus results {:#x?}\n",
                name,
                completion.results
            );
            EIO
        })
    }

    /// Writes the command into the next free slot and rings the doorbell; returns its index
    /// and token. Waits (at most `REG_CMD_TIMEOUT_MS`) while the slot is still taken.
    fn post<C: hw::Command>(&self, cmd: &C, out_addr: u64, name: &str) -> Result<(u16, u32)> {
        let mut state = self.state.lock();
        let pi = self.wait_for_slot(&mut state, name)?;
        state.token = state.token.wrapping_add(1);
        let token = state.token;
        let header = hw::CmdHeader {
            opcode: C::OPCODE,
            flags: 0,
            token,
            out_addr,
        };
        let entry = hw::encode_command(&header, &cmd.to_payload());
        let off = usize::try_from(self.ring.slot(pi))? * hw::CMD_ENTRY_SIZE;
        io_project!(&self.sq, [try: off..off + hw::CMD_ENTRY_SIZE]).copy_from_slice(&entry);
        // The command is posted whatever happens next: the next one goes to the next slot, and
        // this one's slot stays taken until its completion is read.
        state.busy |= self.slot_bit(pi);
        state.pi = pi.wrapping_add(1);
        // `writel` orders the doorbell after the entry's memory writes.
        self.bar
            .with(|bar| bar.write_reg(regs::CMDQ_DB::zeroed().with_pi(state.pi)))?;
        Ok((pi, token))
    }

    /// The bit of `index`'s slot in [`CmdqState::busy`].
    fn slot_bit(&self, index: u16) -> u64 {
        1 << self.ring.slot(index)
    }

    /// Frees the slot of the command at `index`, whose completion was read.
    fn release(&self, index: u16) {
        self.state.lock().busy &= !self.slot_bit(index);
        self.slot_freed.notify_all();
    }

    /// Waits until the slot of the next command is free, in our records and in the device's
    /// (its consumer index); returns the command's index. Only a full ring of commands in
    /// flight, or commands that timed out, can hold it.
    fn wait_for_slot(&self, state: &mut MutexGuard<'_, CmdqState>, name: &str) -> Result<u16> {
        let timeout = Delta::from_millis(i64::from(self.timeout_ms));
        let start = Instant::<Monotonic>::now();
        loop {
            if !self.enable.is_live() {
                return Err(ENODEV);
            }
            if self.device_state.is_dead() {
                // Reported once, when it happened.
                return Err(EIO);
            }
            let pi = state.pi;
            let ci = self.device_ci(pi, name)?;
            if state.busy & self.slot_bit(pi) == 0 && !self.ring.is_full(pi, ci) {
                return Ok(pi);
            }
            if start.elapsed() > timeout {
                dev_err!(
                    self.dev,
                    "command {} timed out after {} ms: the command queue is full ({} commands outstanding)\n",
                    name,
                    self.timeout_ms,
                    state.busy.count_ones()
                );
                return Err(ETIMEDOUT);
            }
            // Woken by a freed slot; the device's consumer index is polled.
            sleep_on(&self.slot_freed, state, POLL_MAX);
        }
    }

    /// The device's consumer index, validated against our producer index `pi`.
    fn device_ci(&self, pi: u16, name: &str) -> Result<u16> {
        let raw = self.bar.with(|bar| bar.read(regs::CMDQ_CI).into_raw())?;
        match u16::try_from(raw) {
            Ok(ci) if self.ring.producer_valid(pi, ci) => Ok(ci),
            _ if raw == u32::MAX => {
                dev_err!(
                    self.dev,
                    "command {}: the device does not respond (reads return all ones); later commands fail at once\n",
                    name
                );
                self.device_state.set_unresponsive();
                Err(EIO)
            }
            _ => {
                dev_err!(
                    self.dev,
                    "command {}: bogus command queue consumer index {:#x} (producer index {})\n",
                    name,
                    raw,
                    pi
                );
                Err(EIO)
            }
        }
    }

    /// The completion of the command at index `pi`, if the device has written it.
    fn completion(&self, pi: u16) -> Result<Option<hw::CmdCompletion>> {
        let off = usize::try_from(self.ring.slot(pi))? * hw::CmdCompletion::SIZE;
        let owner: u8 = io_read!(&self.cq, [try: off + hw::CMD_COMPLETION_OWNER_OFFSET]);
        if !self.ring.entry_valid(pi, owner) {
            return Ok(None);
        }
        // The device writes the body before the owner byte; read it only after seeing the owner.
        dma_mb(Read);
        let mut bytes = [0u8; hw::CmdCompletion::SIZE];
        io_project!(&self.cq, [try: off..off + hw::CmdCompletion::SIZE]).copy_to_slice(&mut bytes);
        Ok(Some(hw::CmdCompletion::decode(&bytes)))
    }

    /// Waits for the completion of the command at index `pi` with `token`, at most
    /// `REG_CMD_TIMEOUT_MS`. A completion in its slot with another token is not its own (the
    /// device wrote one for a command nobody posted): it is counted, and the wait goes on until
    /// the device writes the command's own over it.
    fn wait_for_completion(&self, pi: u16, token: u32, name: &str) -> Result<hw::CmdCompletion> {
        let timeout = Delta::from_millis(i64::from(self.timeout_ms));
        let start = Instant::<Monotonic>::now();
        let mut sleep = Delta::from_micros(10);
        let mut passed_over = None;
        loop {
            // Taken before looking at the ring: an event after the look ends the wait below.
            let seen = self.events.dispatcher().seen();
            match self.completion(pi)? {
                Some(completion) if completion.token == token => return Ok(completion),
                Some(foreign) if passed_over != Some(foreign.token) => {
                    passed_over = Some(foreign.token);
                    self.device_state
                        .checks()
                        .foreign_completion(&self.dev, name, foreign.token);
                }
                _ => {}
            }
            if let Some(code) = self.device_state.fatal() {
                // A device in fatal state executes nothing more: no use waiting.
                dev_err!(
                    self.dev,
                    "command {} abandoned: the device reported fatal error {} ({})\n",
                    name,
                    code,
                    hw::fatal_name(code)
                );
                return Err(EIO);
            }
            if self.device_state.is_dead() {
                // Another command timed out or found the device gone, and said so.
                return Err(EIO);
            }
            let elapsed = start.elapsed();
            if elapsed > timeout {
                self.report_timeout(pi, name);
                self.device_state.set_unresponsive();
                return Err(ETIMEDOUT);
            }
            if self.irq_mode.load(Relaxed) {
                let left = timeout - elapsed;
                self.events.dispatcher().wait(
                    seen,
                    if left < EVENT_WAIT_MAX {
                        left
                    } else {
                        EVENT_WAIT_MAX
                    },
                );
            } else {
                fsleep(sleep);
                if sleep < POLL_MAX {
                    sleep *= 2;
                }
            }
        }
    }

    fn report_timeout(&self, pi: u16, name: &str) {
        let regs = self.bar.with(|bar| {
            (
                bar.read(regs::CMDQ_CI).into_raw(),
                bar.read(regs::DEV_STATUS),
                bar.read(regs::FATAL_CODE).into_raw(),
            )
        });
        match regs {
            Ok((ci, status, fatal)) => {
                let (sep, fatal) = if status.fatal().into_bool() {
                    (", fatal error: ", hw::fatal_name(fatal))
                } else {
                    ("", "")
                };
                dev_err!(
                    self.dev,
                    "command {} timed out after {} ms (index {}, device consumer index {:#x}, device status {:#x}{}{})\n",
                    name,
                    self.timeout_ms,
                    pi,
                    ci,
                    status.into_raw(),
                    sep,
                    fatal
                );
            }
            Err(_) => {
                dev_err!(
                    self.dev,
                    "command {} timed out after {} ms (device gone)\n",
                    name,
                    self.timeout_ms
                );
            }
        }
    }

    /// Waits for EQ 1's command-done events instead of polling: call once EQ 1's interrupt
    /// handler is registered and its interrupts enabled.
    pub(crate) fn use_interrupts(&self, on: bool) {
        self.irq_mode.store(on, Relaxed);
    }

    /// Disables the queue: waits (at most `REG_CMD_TIMEOUT_MS`) for the commands in flight,
    /// unless the device is dead, then tells the device; later commands fail with [`ENODEV`].
    pub(crate) fn disable(&self) {
        let timeout = Delta::from_millis(i64::from(self.timeout_ms));
        let start = Instant::<Monotonic>::now();
        let mut state = self.state.lock();
        while state.busy != 0 && !self.device_state.is_dead() && start.elapsed() <= timeout {
            sleep_on(&self.slot_freed, &mut state, POLL_MAX);
        }
        self.enable.disable();
    }

    /// The device, for messages.
    pub(crate) fn device(&self) -> &device::Device {
        &self.dev
    }

    /// The command timeout, in milliseconds.
    pub(crate) fn timeout_ms(&self) -> u32 {
        self.timeout_ms
    }

    /// Number of entries of each ring.
    pub(crate) fn size(&self) -> u32 {
        self.ring.size()
    }
}

/// Sleeps on `cond` for at most `max`, releasing `guard` meanwhile.
fn sleep_on(cond: &CondVar, guard: &mut MutexGuard<'_, CmdqState>, max: Delta) {
    let jiffies = msecs_to_jiffies(u32::try_from(max.as_millis_ceil()).unwrap_or(1).max(1));
    if let CondVarTimeoutResult::Signal { .. } = cond.wait_interruptible_timeout(guard, jiffies) {
        // With a signal pending the wait returns at once: sleep instead of spinning.
        fsleep(max);
    }
}

#[kunit_tests(ferroce_cmdq)]
mod tests {
    use super::*;

    #[test]
    fn device_statuses_map_to_errnos() {
        assert_eq!(status_error(u32::from(hw::STATUS_BAD_PARAM)).1, EINVAL);
        assert_eq!(status_error(u32::from(hw::STATUS_NO_RESOURCES)).1, ENOMEM);
        assert_eq!(status_error(u32::from(hw::STATUS_BUSY)).1, EBUSY);
        assert_eq!(status_error(u32::from(hw::STATUS_BAD_OPCODE)).1, EOPNOTSUPP);
        // Whatever the device makes up is an I/O error, never a panic.
        assert_eq!(status_error(0x1_0000).1, EIO);
        assert_eq!(status_error(0xff).1, EIO);
    }

    #[test]
    fn command_ring_indexes_wrap() -> Result {
        let ring = hw::Ring::new(CMDQ_LOG_SIZE, hw::MAX_LOG_CMDQ).ok_or(EINVAL)?;
        let size = 1u16 << CMDQ_LOG_SIZE;
        // A full ring across the 16-bit wrap of the free-running indexes.
        let ci = u16::MAX - 3;
        let pi = ci.wrapping_add(size);
        assert!(ring.is_full(pi, ci));
        assert!(ring.producer_valid(pi, ci));
        assert!(!ring.producer_valid(pi.wrapping_add(1), ci));
        assert_eq!(ring.slot(pi), ring.slot(ci));
        // The owner bit flips every pass, also across the wrap.
        assert_ne!(ring.owner(ci), ring.owner(pi));
        assert_eq!(ring.owner(0), 1);
        Ok(())
    }
}
