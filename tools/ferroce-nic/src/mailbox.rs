// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! A function's doorbell mailbox: the BAR0 writes to its doorbell pages, queued by the
//! vfio-user thread without the device's lock and applied by whoever holds the lock next (the
//! device thread at the start of its round, or any other locked access first), in the order
//! the guest made them.
//!
//! A doorbell therefore never waits for an engine round: the device thread holds the device's
//! lock for a whole round, and a doorbell that took the lock waited for the round to end. The
//! stores of a pushed WQE into its push window wake nothing; its push doorbell does.
//!
//! The queue is bounded. When it is full, the writer takes the device's lock, which applies
//! everything queued, and applies its own write behind it: a doorbell is never lost, and the
//! order of writes is kept.

use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::Mutex;
use std::time::Instant;

use crate::bar0::DoorbellTarget;
use crate::device::Device;

/// Writes a mailbox holds before the writer takes the device's lock itself.
pub const MAILBOX_CAPACITY: usize = 4096;

/// One BAR0 write to a doorbell page: offset, bytes (1 to 8) and when the guest made it.
#[derive(Clone, Copy, Debug)]
pub struct DoorbellWrite {
    offset: u64,
    len: u8,
    data: [u8; 8],
    at: Instant,
}

impl DoorbellWrite {
    /// The write of `data` (at most 8 bytes: one MMIO access) at BAR0 offset `offset`.
    fn new(offset: u64, data: &[u8], at: Instant) -> Option<Self> {
        let len = u8::try_from(data.len()).ok().filter(|&n| n <= 8)?;
        let mut bytes = [0u8; 8];
        bytes[..data.len()].copy_from_slice(data);
        Some(Self {
            offset,
            len,
            data: bytes,
            at,
        })
    }

    /// Applies the write to `device`.
    fn apply(&self, device: &mut Device) {
        device.bar0_write_at(self.offset, &self.data[..usize::from(self.len)], self.at);
    }
}

/// What the guest's write to the doorbell area asks of the device thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Posted {
    /// Bytes of a WQE in a push window: nothing to do until its push doorbell.
    PushBytes,
    /// A doorbell register: the device thread has work.
    Doorbell,
}

/// A function's doorbell mailbox (see the module's documentation).
pub struct Mailbox {
    tx: SyncSender<DoorbellWrite>,
    /// Taken only by a holder of the device's lock, which it is applied to.
    rx: Mutex<Receiver<DoorbellWrite>>,
}

impl Default for Mailbox {
    fn default() -> Self {
        Self::with_capacity(MAILBOX_CAPACITY)
    }
}

impl Mailbox {
    /// A mailbox of `capacity` writes.
    pub fn with_capacity(capacity: usize) -> Self {
        let (tx, rx) = mpsc::sync_channel(capacity);
        Self {
            tx,
            rx: Mutex::new(rx),
        }
    }

    /// Queues the guest's write of `data` at BAR0 offset `offset`, if it is one to the doorbell
    /// area, and says what it asks for; `None` for any other write (it is the caller's to
    /// apply under the lock). `lock` locks the device when the mailbox is full: the guard it
    /// returns has applied what the mailbox held ([`Mailbox::apply`]), and the write is applied
    /// behind it.
    pub fn post<'a>(
        &self,
        offset: u64,
        data: &[u8],
        lock: impl FnOnce() -> std::sync::MutexGuard<'a, Device>,
    ) -> Option<Posted> {
        let target = DoorbellTarget::of(offset)?;
        let write = DoorbellWrite::new(offset, data, Instant::now())?;
        match self.tx.try_send(write) {
            Ok(()) => {}
            Err(TrySendError::Full(write) | TrySendError::Disconnected(write)) => {
                write.apply(&mut lock());
            }
        }
        Some(if target.push_window {
            Posted::PushBytes
        } else {
            Posted::Doorbell
        })
    }

    /// Applies every queued write to `device`, oldest first. The caller holds the device's
    /// lock (`device` is the guard's), so that no other write comes between.
    pub fn apply(&self, device: &mut Device) {
        let rx = self.rx.lock().unwrap_or_else(|e| e.into_inner());
        while let Ok(write) = rx.try_recv() {
            write.apply(device);
        }
    }
}
