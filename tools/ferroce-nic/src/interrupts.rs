// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Interrupt delivery: the [`InterruptSink`] the device raises MSI-X vectors through, the
//! production MSI-X controller on the eventfds QEMU passes in SET_IRQS, and a recording sink for
//! tests.

use std::fs::File;
use std::io::Write;
use std::sync::Mutex;

use ferroce_hw::MAX_MSIX_VECTORS;

/// What happened to a raised vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum IrqOutcome {
    /// Signalled to the VMM.
    Delivered,
    /// Masked or not yet wired: the pending bit is set and it fires on unmask.
    Pending,
    /// The vector does not exist.
    Invalid,
}

/// Where the device raises MSI-X vectors.
pub trait InterruptSink: Send + Sync {
    /// Raises `vector`.
    fn raise(&self, vector: u16) -> IrqOutcome;
    /// The pending bit array, 64 vectors per word (for PBA reads).
    fn pending_bits(&self) -> u64;
    /// Number of vectors.
    fn vectors(&self) -> u16;
}

struct MsixState {
    eventfds: Vec<Option<File>>,
    masked: Vec<bool>,
    pending: u64,
    /// MSI-X enable bit of the capability's message control.
    enabled: bool,
    /// Function mask bit of the capability's message control.
    function_masked: bool,
}

/// MSI-X over the eventfds from SET_IRQS. QEMU emulates the table; masking reaches us as
/// SET_IRQS mask/unmask actions and as the function mask bit in config space.
pub struct MsixController {
    state: Mutex<MsixState>,
    count: u16,
}

impl MsixController {
    /// A controller for `count` vectors (clamped to `MAX_MSIX_VECTORS`).
    pub fn new(count: u16) -> Self {
        let count = count.min(MAX_MSIX_VECTORS as u16);
        Self {
            state: Mutex::new(MsixState {
                eventfds: (0..count).map(|_| None).collect(),
                masked: vec![false; count as usize],
                pending: 0,
                enabled: false,
                function_masked: false,
            }),
            count,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, MsixState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sets or clears (with `None`) the eventfd of each vector from `start`.
    pub fn set_eventfds(&self, start: u32, fds: Vec<Option<File>>) {
        let mut state = self.lock();
        for (i, fd) in fds.into_iter().enumerate() {
            let vector = start as usize + i;
            if let Some(slot) = state.eventfds.get_mut(vector) {
                *slot = fd;
            }
        }
        Self::deliver_pending(&mut state);
    }

    /// Drops every eventfd (MSI-X disabled by SET_IRQS with count 0, or device reset).
    pub fn clear_eventfds(&self) {
        let mut state = self.lock();
        state.eventfds.iter_mut().for_each(|fd| *fd = None);
        state.pending = 0;
    }

    /// Masks or unmasks `count` vectors from `start`; unmasking delivers pending ones.
    pub fn set_masked(&self, start: u32, count: u32, masked: bool) {
        let mut state = self.lock();
        for vector in start..start.saturating_add(count) {
            if let Some(m) = state.masked.get_mut(vector as usize) {
                *m = masked;
            }
        }
        Self::deliver_pending(&mut state);
    }

    /// Updates the capability's enable and function mask bits.
    pub fn set_control(&self, enabled: bool, function_masked: bool) {
        let mut state = self.lock();
        state.enabled = enabled;
        state.function_masked = function_masked;
        Self::deliver_pending(&mut state);
    }

    fn can_deliver(state: &MsixState, vector: usize) -> bool {
        state.enabled
            && !state.function_masked
            && !state.masked.get(vector).copied().unwrap_or(true)
            && state.eventfds.get(vector).is_some_and(|fd| fd.is_some())
    }

    fn signal(state: &mut MsixState, vector: usize) -> bool {
        match state.eventfds.get_mut(vector).and_then(|fd| fd.as_mut()) {
            Some(fd) => fd.write_all(&1u64.to_ne_bytes()).is_ok(),
            None => false,
        }
    }

    fn deliver_pending(state: &mut MsixState) {
        for vector in 0..state.eventfds.len().min(64) {
            if state.pending & (1 << vector) != 0 && Self::can_deliver(state, vector) {
                state.pending &= !(1 << vector);
                Self::signal(state, vector);
            }
        }
    }
}

impl InterruptSink for MsixController {
    fn raise(&self, vector: u16) -> IrqOutcome {
        let vector = vector as usize;
        if vector >= self.count as usize {
            return IrqOutcome::Invalid;
        }
        let mut state = self.lock();
        if Self::can_deliver(&state, vector) && Self::signal(&mut state, vector) {
            IrqOutcome::Delivered
        } else {
            state.pending |= 1 << vector;
            IrqOutcome::Pending
        }
    }

    fn pending_bits(&self) -> u64 {
        self.lock().pending
    }

    fn vectors(&self) -> u16 {
        self.count
    }
}

/// Records raised vectors (tests).
pub struct RecordingSink {
    raised: Mutex<Vec<u16>>,
    count: u16,
}

impl RecordingSink {
    /// A sink for `count` vectors.
    pub fn new(count: u16) -> Self {
        Self {
            raised: Mutex::new(Vec::new()),
            count,
        }
    }

    /// Takes the vectors raised so far.
    pub fn take(&self) -> Vec<u16> {
        std::mem::take(&mut *self.raised.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl InterruptSink for RecordingSink {
    fn raise(&self, vector: u16) -> IrqOutcome {
        if vector >= self.count {
            return IrqOutcome::Invalid;
        }
        let mut raised = self.raised.lock().unwrap_or_else(|e| e.into_inner());
        // Bounded: tests drain it; a runaway test stops recording rather than growing forever.
        if raised.len() < 1 << 20 {
            raised.push(vector);
        }
        IrqOutcome::Delivered
    }

    fn pending_bits(&self) -> u64 {
        0
    }

    fn vectors(&self) -> u16 {
        self.count
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::fd::FromRawFd;

    fn eventfd() -> File {
        // SAFETY: eventfd returns a new owned descriptor or -1 (checked).
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK) };
        assert!(fd >= 0);
        // SAFETY: `fd` is a fresh descriptor we own.
        unsafe { File::from_raw_fd(fd) }
    }

    fn count(file: &mut File) -> u64 {
        let mut buf = [0u8; 8];
        match file.read(&mut buf) {
            Ok(8) => u64::from_ne_bytes(buf),
            _ => 0,
        }
    }

    #[test]
    fn masking_and_pending() {
        let msix = MsixController::new(2);
        let fd = eventfd();
        let mut reader = fd.try_clone().expect("clone");
        msix.set_eventfds(0, vec![Some(fd)]);
        // Not enabled yet: pending.
        assert_eq!(msix.raise(0), IrqOutcome::Pending);
        assert_eq!(msix.pending_bits(), 1);
        msix.set_control(true, false);
        assert_eq!(msix.pending_bits(), 0);
        assert_eq!(count(&mut reader), 1);
        msix.set_masked(0, 1, true);
        assert_eq!(msix.raise(0), IrqOutcome::Pending);
        assert_eq!(count(&mut reader), 0);
        msix.set_masked(0, 1, false);
        assert_eq!(count(&mut reader), 1);
        assert_eq!(msix.raise(0), IrqOutcome::Delivered);
        // Vector 1 has no eventfd: pending; out of range: invalid.
        assert_eq!(msix.raise(1), IrqOutcome::Pending);
        assert_eq!(msix.raise(5), IrqOutcome::Invalid);
    }
}
