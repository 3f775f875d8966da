// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The engine's side of the port: a sink for frames it sends and a bounded queue of frames
//! steered to it. The converged port ([`crate::port`]) connects these to unix datagram sockets;
//! tests connect two engines back to back with [`back_to_back`]. Frames the engine sends to its
//! own port's MAC never reach the sink: they wait in a [`LoopbackQueue`] for the engine's own
//! receive path.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Where transmitted frames go.
pub trait FrameSink: Send {
    /// Sends one whole Ethernet frame; failures mean the frame is lost, as on a cable. A sink
    /// may hold frames until [`FrameSink::flush`].
    fn send(&mut self, frame: &[u8]);

    /// Sends one whole Ethernet frame the sink may keep, as [`FrameSink::send`] does; returns a
    /// buffer for the engine's next frame: this one if the sink copied it, another (a frame the
    /// far end received and gave back) if it kept it, or none.
    fn send_owned(&mut self, frame: Vec<u8>) -> Option<Vec<u8>> {
        self.send(&frame);
        Some(frame)
    }

    /// Sends what the sink holds: the engine calls it when its round ends.
    fn flush(&mut self) {}
}

/// Discards frames (a port with no cable).
pub struct NullSink;

impl FrameSink for NullSink {
    fn send(&mut self, _frame: &[u8]) {}
}

/// Most frames waiting for the engine; more are dropped (and counted).
pub const RX_QUEUE_CAPACITY: usize = 8192;

/// Most received frames' buffers kept for reuse ([`RxQueue::recycle`]); more are freed.
pub const RX_FREE_CAPACITY: usize = 256;

/// Frames waiting for the engine, and the buffers of frames it received, for whoever fills
/// the queue to fill again instead of allocating.
#[derive(Default)]
pub struct RxQueue {
    frames: Mutex<VecDeque<Vec<u8>>>,
    overflows: AtomicU64,
    free: Mutex<Vec<Vec<u8>>>,
}

impl RxQueue {
    /// An empty queue.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Queues a frame; `false` (frame dropped) if the queue is full.
    pub fn push(&self, frame: Vec<u8>) -> bool {
        let mut frames = self.frames.lock().unwrap_or_else(|e| e.into_inner());
        if frames.len() >= RX_QUEUE_CAPACITY {
            self.overflows.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        frames.push_back(frame);
        true
    }

    /// Takes the oldest frame.
    pub fn pop(&self) -> Option<Vec<u8>> {
        self.frames
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop_front()
    }

    /// Takes up to `max` of the oldest frames into `into`, under one lock: the port's thread
    /// pushes a frame at a time while the engine takes them, and a lock per frame on both
    /// sides made them wait for each other.
    pub fn take(&self, max: usize, into: &mut VecDeque<Vec<u8>>) {
        let mut frames = self.frames.lock().unwrap_or_else(|e| e.into_inner());
        let n = max.min(frames.len());
        into.extend(frames.drain(..n));
    }

    /// Frames waiting.
    pub fn len(&self) -> usize {
        self.frames.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether no frame waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Frames dropped because the queue was full (taken and reset).
    pub fn take_overflows(&self) -> u64 {
        self.overflows.swap(0, Ordering::Relaxed)
    }

    /// Gives back the buffers of received frames (all of `buffers`, under one lock), up to
    /// [`RX_FREE_CAPACITY`] kept.
    pub fn recycle(&self, buffers: &mut Vec<Vec<u8>>) {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        let room = RX_FREE_CAPACITY.saturating_sub(free.len());
        free.extend(buffers.drain(..).take(room));
    }

    /// A buffer a received frame gave back, if there is one. It still holds that frame: the
    /// engine builds its next frame over it ([`super::frame::FrameWriter`]).
    pub fn take_free(&self) -> Option<Vec<u8>> {
        self.free.lock().unwrap_or_else(|e| e.into_inner()).pop()
    }
}

/// Most frames waiting in the loopback queue; more are dropped (and counted). The engine drains
/// the queue after each transmitting step, so a step's burst (a QP's requests, at most
/// `TX_BUDGET` of them, or READ responses, and the ACKs they cause) fits; what does not fit is
/// lost like a frame on a congested link, and RC retransmits it.
pub const LOOPBACK_CAPACITY: usize = 512;

/// Frames the engine sent to its own port's MAC, waiting for its receive path: a bounded FIFO
/// owned by the engine (frames looped while a frame is being received wait behind it instead
/// of being received re-entrantly).
#[derive(Default)]
pub struct LoopbackQueue {
    frames: VecDeque<Vec<u8>>,
}

impl LoopbackQueue {
    /// Queues a frame; `false` (frame dropped) if the queue is full.
    pub fn push(&mut self, frame: Vec<u8>) -> bool {
        if self.frames.len() >= LOOPBACK_CAPACITY {
            return false;
        }
        self.frames.push_back(frame);
        true
    }

    /// Takes the oldest frame.
    pub fn pop(&mut self) -> Option<Vec<u8>> {
        self.frames.pop_front()
    }

    /// Frames waiting.
    pub fn len(&self) -> usize {
        self.frames.len()
    }

    /// Whether no frame waits.
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// Drops every waiting frame.
    pub fn clear(&mut self) {
        self.frames.clear();
    }
}

/// A sink that queues frames for another engine (an in-process cable).
pub struct QueueSink(pub Arc<RxQueue>);

impl FrameSink for QueueSink {
    fn send(&mut self, frame: &[u8]) {
        let mut buffer = self.0.take_free().unwrap_or_default();
        buffer.clear();
        buffer.extend_from_slice(frame);
        // A full queue loses the frame, like a congested link.
        self.0.push(buffer);
    }

    /// Hands the frame itself to the far end, and takes one it gave back for the next.
    fn send_owned(&mut self, frame: Vec<u8>) -> Option<Vec<u8>> {
        self.0.push(frame);
        self.0.take_free()
    }
}

/// One end of a port: what the engine sends into and what it receives from.
pub struct PortEnd {
    /// Transmit side.
    pub sink: Box<dyn FrameSink>,
    /// Receive side.
    pub rx: Arc<RxQueue>,
}

/// Two port ends joined by a cable.
pub fn back_to_back() -> (PortEnd, PortEnd) {
    let (a, b) = (RxQueue::new(), RxQueue::new());
    (
        PortEnd {
            sink: Box::new(QueueSink(b.clone())),
            rx: a.clone(),
        },
        PortEnd {
            sink: Box::new(QueueSink(a)),
            rx: b,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_queue_is_a_bounded_fifo() {
        let mut q = LoopbackQueue::default();
        for i in 0..LOOPBACK_CAPACITY + 10 {
            let kept = q.push((i as u32).to_le_bytes().to_vec());
            assert_eq!(kept, i < LOOPBACK_CAPACITY, "frame {i}");
        }
        assert_eq!(q.len(), LOOPBACK_CAPACITY);
        assert_eq!(q.pop(), Some(0u32.to_le_bytes().to_vec()));
        assert!(q.push(vec![1]), "room again after a pop");
        assert!(!q.push(vec![2]));
        q.clear();
        assert!(q.is_empty() && q.pop().is_none());
    }
}
