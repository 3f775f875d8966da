// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The device thread: one for all the functions of a NIC. It gives each function a budgeted
//! round in turn and sleeps on the functions' shared [`Wake`](crate::function::Wake) when none has work.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::function::Function;
use crate::records::PollWindow;
use ferroce_hw::{COUNTER_DOORBELLS, COUNTER_RECORD_DOORBELLS};

/// Starts the one device thread of a NIC's functions (which share `doorbell`).
pub fn spawn_device_thread(functions: Vec<Arc<Function>>) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("ferroce-device".into())
        .spawn(move || device_loop(&functions))
}

/// What one turn of the device thread found.
#[derive(Default)]
struct Turn {
    /// Work left over (another round at once).
    more: bool,
    /// Something timed is pending (moderation, retransmission, a throttled function).
    timed: bool,
    /// Some function polls doorbell records.
    polls: bool,
    /// Frames the functions sent and received.
    frames: u64,
}

/// The device thread: each function in turn processes one budgeted round (commands, then
/// queued objects, then the engine), then the thread waits for a doorbell, a frame or a timer.
/// A function over its doorbell rate sits its turns out until its budget refills. While
/// functions poll doorbell records the thread first goes on polling for a [`PollWindow`]
/// after activity (signals and work count), then sleeps as the records' producers are told.
fn device_loop(functions: &[Arc<Function>]) {
    let Some(first) = functions.first() else {
        return;
    };
    let spin = Duration::from_micros(first.lock().core.config().poll_spin_us.into());
    let mut window = PollWindow::new(spin, Instant::now());
    let mut linger = Linger::default();
    let mut signalled = false;
    while !first.shutdown.load(Ordering::Relaxed) {
        let mut turn = Turn::default();
        for nic in functions {
            let now = Instant::now();
            // Doorbells written and doorbells found in records count alike.
            let rung =
                nic.counters.get(COUNTER_DOORBELLS) + nic.counters.get(COUNTER_RECORD_DOORBELLS);
            if !nic.schedule.take_turn(now, rung) {
                turn.timed = true;
                continue;
            }
            let before = nic.counters.frames();
            let mut device = nic.lock();
            let more = device.process();
            nic.schedule.ran(more);
            turn.more |= more;
            turn.frames += nic.counters.frames().wrapping_sub(before);
            turn.timed |= device.has_work();
            turn.polls |= device.polls_records();
        }
        // Short sleeps only while something is pending (moderation timers, budgets).
        let timeout = if turn.timed {
            Duration::from_micros(200)
        } else {
            Duration::from_millis(50)
        };
        let now = Instant::now();
        if turn.more || signalled {
            window.active(now);
        }
        linger.round(now, turn.frames);
        signalled = if turn.more || (turn.polls && window.spinning(now)) || linger.lingers(now) {
            // Work left over, polling, or work coming faster than a sleep and a wake-up: another
            // round at once.
            std::thread::yield_now();
            first.wake.take()
        } else if turn.polls {
            if functions.iter().all(|nic| nic.lock().core.records_sleep()) {
                let rung = first.wake.wait(timeout);
                functions
                    .iter()
                    .for_each(|nic| nic.lock().core.records_wake());
                rung
            } else {
                functions
                    .iter()
                    .for_each(|nic| nic.lock().core.records_wake());
                true
            }
        } else {
            first.wake.wait(timeout)
        };
        functions.iter().for_each(|nic| nic.trace.flush());
    }
}

/// Whether the device thread, out of work, stays awake a little instead of sleeping. After a
/// round that moved a burst of frames (a stream: ib_write_bw), the next frames are likely to
/// come before a sleep and a wake-up would be over; sleeping between them cost a futex wait, a
/// wake-up by the port's thread and a context switch each (ib_write_bw 64 KiB at MTU 1500:
/// 21,000 sleeps a second in the two device threads). After a round of a frame or two (a
/// ping-pong: ib_send_lat), the thread sleeps at once and leaves the CPU to the vCPUs, which
/// then poll for the completion: staying awake there made ib_send_lat slower.
#[derive(Debug, Default)]
struct Linger {
    /// Until when the thread stays awake.
    until: Option<Instant>,
}

impl Linger {
    /// How long the thread stays awake after a burst.
    const WINDOW: Duration = Duration::from_micros(20);
    /// Frames sent and received in one round that make a burst.
    const BURST: u64 = 4;

    /// A round at `now` moved `frames` frames.
    fn round(&mut self, now: Instant, frames: u64) {
        if frames >= Self::BURST {
            self.until = Some(now + Self::WINDOW);
        }
    }

    /// Whether to look for work again at once rather than sleep.
    fn lingers(&self, now: Instant) -> bool {
        self.until.is_some_and(|t| now < t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_device_thread_lingers_after_a_burst_only() {
        let t0 = Instant::now();
        let us = |n| t0 + Duration::from_micros(n);
        let mut l = Linger::default();
        assert!(!l.lingers(t0), "nothing moved yet");
        l.round(t0, Linger::BURST - 1);
        assert!(!l.lingers(t0), "a ping-pong's frame or two: sleep at once");
        l.round(us(10), Linger::BURST);
        assert!(l.lingers(us(29)), "after a burst: stay awake");
        assert!(!l.lingers(us(30)), "but only for the window");
        l.round(us(31), 0);
        assert!(!l.lingers(us(31)), "an empty round does not extend it");
    }
}
