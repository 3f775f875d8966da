// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The device thread: one for all the functions of a NIC. It gives each function a budgeted
//! round in turn, and when a round moved nothing it sleeps on events ([`crate::wake`]): a
//! signal from another thread, or the earliest deadline of any function.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::function::Function;
use crate::poll_cpu::PollCpu;
use crate::records::PollWindow;
use crate::wake::{Sleeper, Woken};
use ferroce_hw::{COUNTER_DOORBELLS, COUNTER_RECORD_DOORBELLS};

/// Starts the one device thread of a NIC's functions (which share their wake-up), pinned to
/// `poll_cpu` if given ([`crate::poll_cpu`]).
pub fn spawn_device_thread(
    functions: Vec<Arc<Function>>,
    poll_cpu: Option<PollCpu>,
) -> std::io::Result<JoinHandle<()>> {
    let Some(first) = functions.first() else {
        return Err(std::io::Error::other("a NIC without functions"));
    };
    let sleeper = Sleeper::new(first.wake.clone())?;
    let (pinned_tx, pinned) = std::sync::mpsc::channel();
    let thread = std::thread::Builder::new()
        .name("ferroce-device".into())
        .spawn(move || {
            if let Some(cpu) = poll_cpu {
                let pinned = cpu.pin();
                let failed = pinned.is_err();
                let _ = pinned_tx.send(pinned);
                if failed {
                    return;
                }
            }
            device_loop(&functions, sleeper, poll_cpu.is_some())
        })?;
    if let Some(cpu) = poll_cpu {
        let pinned = pinned
            .recv()
            .unwrap_or_else(|_| Err(std::io::Error::other("the device thread ended")));
        pinned.map_err(|e| {
            std::io::Error::other(format!(
                "pinning the device thread to CPU {}: {e}",
                cpu.cpu()
            ))
        })?;
        tracing::info!(
            cpu = cpu.cpu(),
            "device thread pinned: it polls doorbell records without pause"
        );
    }
    Ok(thread)
}

/// What one turn of the device thread found: each function's round, or its sitting out.
#[derive(Default)]
struct Turn {
    /// A round left work over (its budget ran out).
    more: bool,
    /// A round moved something (frames, CQEs, EQEs), which may have made work of its own.
    moved: bool,
    /// The earliest deadline ahead of the round that reported it, or a function's next turn.
    deadline: Option<Instant>,
    /// Some function polls doorbell records.
    polls: bool,
    /// Frames the functions sent and received.
    frames: u64,
}

impl Turn {
    /// A function over its doorbell rate sat its turn out until `next_turn`.
    fn sat_out(&mut self, next_turn: Option<Instant>) {
        self.deadline = self.deadline.into_iter().chain(next_turn).min();
    }

    /// A function's round, which started at `start`: whether it left work over (`more`) or
    /// moved something (`moved`), and its device's earliest deadline. A deadline at or before
    /// `start` is one the round could act on and did not: its owner cannot act on it yet (a QP
    /// out of RTS keeps its retransmission timer), and it does not count.
    fn ran(&mut self, start: Instant, more: bool, moved: bool, deadline: Option<Instant>) {
        self.more |= more;
        self.moved |= moved;
        let ahead = deadline.filter(|t| *t > start);
        self.deadline = self.deadline.into_iter().chain(ahead).min();
    }

    /// Whether the thread goes on at once at `now` rather than sleep until [`Turn::deadline`]:
    /// work left over, something moved, or a deadline came during the turn.
    fn again(&self, now: Instant) -> bool {
        self.more || self.moved || self.deadline.is_some_and(|t| t <= now)
    }

    /// What the thread does after this turn, at `now`, polling records for `window` after
    /// activity, lingering after a burst as `linger` says, on a core of its own if `pinned`.
    fn next(&self, now: Instant, window: &PollWindow, linger: &Linger, pinned: bool) -> Next {
        if self.more || (self.polls && window.spinning(now)) || linger.lingers(now) {
            // Work left over, polling, or work coming faster than a sleep and a wake-up: another
            // round, once the vCPUs waiting for a core had it (a pinned thread's core has none).
            if pinned {
                Next::Spin
            } else {
                Next::Yield
            }
        } else if self.again(now) {
            // Something moved, or a deadline came: another round at once. Not after a yield:
            // on a busy machine a yield can keep the thread off the core for a time slice, and a
            // doorbell that comes meanwhile finds it awake (no wake-up) and waits (ib_send_lat:
            // doorbell to wire 2.1 ms at p99, against 42 µs without the yield).
            Next::Again
        } else if self.polls {
            Next::SleepRecords
        } else {
            Next::Sleep
        }
    }
}

/// What the device thread does after a turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Next {
    /// Another round, after yielding the CPU to threads waiting for it.
    Yield,
    /// Another round, after a pause for the CPU's sake (`spin_loop`), not leaving it.
    Spin,
    /// Another round at once.
    Again,
    /// Tell the records' producers that the thread sleeps, look at the records once more, and
    /// sleep until a signal or the earliest deadline.
    SleepRecords,
    /// Sleep until a signal or the earliest deadline.
    Sleep,
}

/// The device thread: each function in turn processes one budgeted round (commands, then
/// queued objects, then the engine). A round that left work over or moved something (frames,
/// CQEs, EQEs: [`Counters::activity`](crate::counters::Counters::activity), as the in-process
/// tests' pump judges) is followed by another at once; otherwise the thread sleeps until a
/// signal or the earliest deadline any function reports. A deadline a round started after and
/// did not act on is one its owner cannot act on yet (a QP out of RTS keeps its timer) and does
/// not count. A function over its doorbell rate sits its turns out until its budget refills.
/// While functions poll doorbell records the thread first goes on polling for a [`PollWindow`]
/// after activity (signals and work count), then sleeps as the records' producers are told; a
/// `pinned` thread ([`crate::poll_cpu`]) polls them for ever, without yielding its core.
fn device_loop(functions: &[Arc<Function>], mut sleeper: Sleeper, pinned: bool) {
    let Some(first) = functions.first() else {
        return;
    };
    let mut window = if pinned {
        PollWindow::forever()
    } else {
        let spin = Duration::from_micros(first.lock().core.config().poll_spin_us.into());
        PollWindow::new(spin, Instant::now())
    };
    let mut linger = Linger::default();
    let mut signalled = false;
    while !first.shutdown.load(Ordering::Relaxed) {
        let mut turn = Turn::default();
        for nic in functions {
            let start = Instant::now();
            // Doorbells written and doorbells found in records count alike.
            let rung =
                nic.counters.get(COUNTER_DOORBELLS) + nic.counters.get(COUNTER_RECORD_DOORBELLS);
            if !nic.schedule.take_turn(start, rung) {
                turn.sat_out(nic.schedule.next_turn());
                continue;
            }
            let frames = nic.counters.frames();
            let activity = nic.counters.activity();
            let mut device = nic.lock();
            let more = device.process();
            nic.schedule.ran(more);
            let moved = nic.counters.activity() != activity || device.frames_waiting();
            turn.ran(start, more, moved, device.next_deadline());
            turn.frames += nic.counters.frames().wrapping_sub(frames);
            turn.polls |= device.polls_records();
        }
        let now = Instant::now();
        if turn.more || signalled {
            window.active(now);
        }
        linger.round(now, turn.frames);
        signalled = match turn.next(now, &window, &linger, pinned) {
            Next::Yield => {
                std::thread::yield_now();
                first.wake.take()
            }
            Next::Spin => {
                std::hint::spin_loop();
                first.wake.take()
            }
            Next::Again => first.wake.take(),
            Next::SleepRecords => {
                let asleep = functions.iter().all(|nic| nic.lock().core.records_sleep());
                let woken = !asleep || sleep(&mut sleeper, turn.deadline);
                functions
                    .iter()
                    .for_each(|nic| nic.lock().core.records_wake());
                woken
            }
            Next::Sleep => sleep(&mut sleeper, turn.deadline),
        };
        functions.iter().for_each(|nic| nic.trace.flush());
    }
}

/// Sleeps until a signal or `deadline`; `true` if signalled. If an epoll or timerfd call fails
/// (it cannot, short of a bad descriptor), the thread polls instead: it logs the error once and
/// looks for work every millisecond, and nothing is lost.
fn sleep(sleeper: &mut Sleeper, deadline: Option<Instant>) -> bool {
    static LOGGED: std::sync::Once = std::sync::Once::new();
    match sleeper.sleep(deadline) {
        Ok(woken) => woken == Woken::Signal,
        Err(e) => {
            LOGGED.call_once(|| {
                tracing::error!("device thread: cannot sleep on events ({e}): polling")
            });
            std::thread::sleep(Duration::from_millis(1));
            true
        }
    }
}

/// Whether the device thread, out of work, stays awake a little instead of sleeping. After a
/// round that moved a burst of frames (a stream: ib_write_bw), the next frames are likely to
/// come before a sleep and a wake-up would be over; sleeping between them cost a sleep, a
/// wake-up by the port's thread and a context switch each (ib_write_bw 64 KiB at MTU 1500:
/// 21,000 sleeps a second in the two device threads). After rounds of a frame or two (a
/// ping-pong: ib_send_lat), the thread sleeps as soon as a round moves nothing and leaves the
/// CPU to the vCPUs, which then poll for the completion: staying awake there made
/// ib_send_lat slower.
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
    fn a_turn_sleeps_until_the_earliest_deadline_ahead() {
        let t0 = Instant::now();
        let us = |n| t0 + Duration::from_micros(n);
        let mut turn = Turn::default();
        turn.ran(us(10), false, false, Some(us(5)));
        assert_eq!(
            turn.deadline, None,
            "a deadline the round did not act on does not count"
        );
        assert!(
            !turn.again(us(20)),
            "nothing moved, nothing due: sleep, until a signal"
        );
        turn.ran(us(20), false, false, Some(us(900)));
        turn.sat_out(Some(us(700)));
        turn.ran(us(30), false, false, Some(us(800)));
        assert_eq!(
            turn.deadline,
            Some(us(700)),
            "the earliest, a throttled function's included"
        );
        assert!(!turn.again(us(40)));
        assert!(
            turn.again(us(700)),
            "a deadline that came during the turn is due at once"
        );
        turn.ran(us(40), false, true, None);
        assert!(
            turn.again(us(40)),
            "work left over or something moved: at once"
        );
    }

    #[test]
    fn records_are_polled_for_the_window_then_slept_on_unless_pinned() {
        let t0 = Instant::now();
        let us = |n| t0 + Duration::from_micros(n);
        let window = PollWindow::new(PollWindow::SPIN, t0);
        let idle = Linger::default();
        let polling = Turn {
            polls: true,
            ..Turn::default()
        };
        assert_eq!(polling.next(us(10), &window, &idle, false), Next::Yield);
        assert_eq!(
            polling.next(us(50), &window, &idle, false),
            Next::SleepRecords,
            "the window closed: the producers are told, then the thread sleeps"
        );
        assert_eq!(
            Turn::default().next(us(50), &window, &idle, false),
            Next::Sleep
        );
        let forever = PollWindow::forever();
        for t in [10, 50, 60_000_000] {
            assert_eq!(
                polling.next(us(t), &forever, &idle, true),
                Next::Spin,
                "pinned: polled without pause, never slept on ({t} µs)"
            );
        }
        assert_eq!(
            Turn::default().next(us(50), &forever, &idle, true),
            Next::Sleep,
            "no record to poll: a pinned thread sleeps on events too"
        );
        let moved = Turn {
            moved: true,
            polls: true,
            ..Turn::default()
        };
        assert_eq!(moved.next(us(60), &window, &idle, false), Next::Again);
        let more = Turn {
            more: true,
            ..Turn::default()
        };
        assert_eq!(more.next(us(60), &window, &idle, false), Next::Yield);
        assert_eq!(more.next(us(60), &window, &idle, true), Next::Spin);
    }

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
