// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The engine's side of the port: a sink for frames it sends and a bounded queue of frames
//! steered to it. The converged port ([`crate::port`]) connects these to unix datagram sockets;
//! tests connect two engines back to back with [`back_to_back`].

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Where transmitted frames go.
pub trait FrameSink: Send {
    /// Sends one whole Ethernet frame; failures mean the frame is lost, as on a cable.
    fn send(&mut self, frame: &[u8]);
}

/// Discards frames (a port with no cable).
pub struct NullSink;

impl FrameSink for NullSink {
    fn send(&mut self, _frame: &[u8]) {}
}

/// Most frames waiting for the engine; more are dropped (and counted).
pub const RX_QUEUE_CAPACITY: usize = 8192;

/// Frames waiting for the engine.
#[derive(Default)]
pub struct RxQueue {
    frames: Mutex<VecDeque<Vec<u8>>>,
    overflows: AtomicU64,
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
}

/// A sink that queues frames for another engine (an in-process cable).
pub struct QueueSink(pub Arc<RxQueue>);

impl FrameSink for QueueSink {
    fn send(&mut self, frame: &[u8]) {
        // A full queue loses the frame, like a congested link.
        self.0.push(frame.to_vec());
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
