// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! How the device thread sleeps and what wakes it: an epoll set (vmm-sys-util's, as rust-vmm
//! device models use) of two file descriptors, the [`Wake`] eventfd that every other thread
//! signals, and a timerfd armed to the device's next deadline.
//!
//! Everything that gives the device work from outside signals the [`Wake`]: the guest's
//! doorbells and register writes (the vfio-user thread), frames for its engine (the port's
//! thread), and the host's control requests (the control socket). Everything timed (the
//! transport's retransmission and RNR timers, frames the fault injector holds, CQ moderation,
//! the repeat of an unanswered page fault, a throttled function's next turn) is a deadline the
//! device reports, and the [`Sleeper`]'s timer fires at the earliest. Nothing is polled.

use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use vmm_sys_util::epoll::{ControlOperation, Epoll, EpollEvent, EventSet};
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};
use vmm_sys_util::timerfd::TimerFd;

/// Wakes the device thread (a thread wake-up, not a register: the guest's doorbells are
/// `ferroce_hw`'s and go to the [`Mailbox`](crate::mailbox::Mailbox)).
///
/// A signal is a flag; it writes the eventfd (a system call) only if the thread sleeps. The
/// port's thread signals once per frame, and while the device thread is busy a lock shared
/// with it (contended) and a wake-up per frame were a tenth of both threads' time in a profile
/// of ib_write_bw at MTU 1500.
pub struct Wake {
    /// Work was signalled since the thread last looked.
    pending: AtomicBool,
    /// The thread sleeps, or is about to.
    sleeping: AtomicBool,
    /// Readable once written: what the sleeping thread's epoll waits on.
    fd: EventFd,
}

impl Wake {
    /// A wake-up with nothing signalled.
    pub fn new() -> std::io::Result<Self> {
        Ok(Self {
            pending: AtomicBool::new(false),
            sleeping: AtomicBool::new(false),
            fd: EventFd::new(EFD_NONBLOCK)?,
        })
    }

    /// Signals work.
    pub fn signal(&self) {
        // Both flags sequentially consistent: either this sees `sleeping`, or the thread, which
        // sets `sleeping` before it looks at `pending`, sees the signal and does not sleep.
        self.pending.store(true, Ordering::SeqCst);
        if self.sleeping.load(Ordering::SeqCst) {
            // Cannot fail short of the counter's overflow, which a readable eventfd already is.
            let _ = self.fd.write(1);
        }
    }

    /// Takes a signal without waiting; `true` if there was one.
    pub(crate) fn take(&self) -> bool {
        self.pending.swap(false, Ordering::SeqCst)
    }

    /// Runs `sleep` (which returns once the eventfd is readable, or earlier) unless a signal is
    /// already pending; then takes the signal, `true` if there was one.
    fn sleep_unless_signalled(&self, sleep: impl FnOnce()) -> bool {
        self.sleeping.store(true, Ordering::SeqCst);
        if !self.pending.load(Ordering::SeqCst) {
            sleep();
        }
        self.sleeping.store(false, Ordering::SeqCst);
        // Empties the eventfd (`EAGAIN` if nothing wrote it). A signal that wrote it after this
        // read costs the next sleep a spurious wake-up, never a lost one.
        let _ = self.fd.read();
        self.take()
    }
}

impl std::fmt::Debug for Wake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wake")
            .field("pending", &self.pending)
            .field("sleeping", &self.sleeping)
            .finish_non_exhaustive()
    }
}

/// What woke a [`Sleeper`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Woken {
    /// A signal: work arrived.
    Signal,
    /// The deadline came (or a spurious wake-up).
    Timer,
}

/// Where the device thread sleeps: its [`Wake`]'s eventfd and a timerfd, in one epoll set.
pub struct Sleeper {
    epoll: Epoll,
    timer: TimerFd,
    /// The deadline the timer is armed to (it may have expired), if any: a sleep to the same
    /// deadline leaves the timer as it is.
    armed: Option<Instant>,
    wake: Arc<Wake>,
}

impl Sleeper {
    /// The epoll token of the wake-up's eventfd.
    const WAKE: u64 = 0;
    /// The epoll token of the timer.
    const TIMER: u64 = 1;

    /// A sleeper on `wake` and a timer of its own.
    pub fn new(wake: Arc<Wake>) -> std::io::Result<Self> {
        let epoll = Epoll::new()?;
        let timer = TimerFd::new()?;
        epoll.ctl(
            ControlOperation::Add,
            wake.fd.as_raw_fd(),
            EpollEvent::new(EventSet::IN, Self::WAKE),
        )?;
        epoll.ctl(
            ControlOperation::Add,
            timer.as_raw_fd(),
            EpollEvent::new(EventSet::IN, Self::TIMER),
        )?;
        Ok(Self {
            epoll,
            timer,
            armed: None,
            wake,
        })
    }

    /// The wake-up it sleeps on.
    pub fn wake(&self) -> &Arc<Wake> {
        &self.wake
    }

    /// Sleeps until a signal, or until `deadline` if there is one (at once if it is past).
    pub fn sleep(&mut self, deadline: Option<Instant>) -> std::io::Result<Woken> {
        match deadline {
            // Zero would disarm the timer: a past deadline is due now.
            Some(at) => {
                let wait = at.saturating_duration_since(Instant::now());
                if wait.is_zero() {
                    return Ok(self.woken(self.wake.take()));
                }
                // Armed to this deadline already, the timer has not expired (it is not past).
                if self.armed != Some(at) {
                    self.timer.reset(wait, None)?;
                    self.armed = Some(at);
                }
            }
            // Disarming also resets what an earlier expiry left readable.
            None if self.armed.is_some() => {
                self.timer.clear()?;
                self.armed = None;
            }
            None => {}
        }
        let mut result = Ok(());
        let signalled = self.wake.sleep_unless_signalled(|| {
            let mut events = [EpollEvent::default(); 2];
            result = loop {
                match self.epoll.wait(-1, &mut events) {
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    other => break other.map(drop),
                }
            };
        });
        result?;
        Ok(self.woken(signalled))
    }

    fn woken(&self, signalled: bool) -> Woken {
        if signalled {
            Woken::Signal
        } else {
            Woken::Timer
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn sleeper() -> Sleeper {
        Sleeper::new(Arc::new(Wake::new().unwrap())).unwrap()
    }

    #[test]
    fn a_signal_before_the_sleep_is_not_lost() {
        let mut s = sleeper();
        s.wake().signal();
        let far = Instant::now() + Duration::from_secs(30);
        assert_eq!(
            s.sleep(Some(far)).unwrap(),
            Woken::Signal,
            "the signal was kept"
        );
        assert!(!s.wake().take(), "and taken once");
    }

    #[test]
    fn a_signal_wakes_a_sleeping_thread() {
        let mut s = sleeper();
        let wake = s.wake().clone();
        let sleeping = std::thread::spawn(move || s.sleep(None).unwrap());
        // Only once it sleeps, so that the wake-up itself is what is tested.
        while !wake.sleeping.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        wake.signal();
        assert_eq!(sleeping.join().ok(), Some(Woken::Signal));
    }

    #[test]
    fn the_timer_ends_a_sleep_at_its_deadline() {
        let mut s = sleeper();
        let deadline = Instant::now() + Duration::from_millis(2);
        assert_eq!(s.sleep(Some(deadline)).unwrap(), Woken::Timer);
        assert!(Instant::now() >= deadline, "not before the deadline");
        // The expiry left readable does not end the next sleep early.
        let next = Instant::now() + Duration::from_millis(20);
        assert_eq!(s.sleep(Some(next)).unwrap(), Woken::Timer);
        assert!(
            Instant::now() >= next,
            "the next sleep lasts to its own deadline"
        );
        // A past deadline does not sleep.
        assert_eq!(s.sleep(Some(deadline)).unwrap(), Woken::Timer);
    }

    #[test]
    fn a_sleep_to_the_deadline_the_timer_is_armed_to_ends_at_it() {
        let mut s = sleeper();
        let deadline = Instant::now() + Duration::from_millis(20);
        // Armed, and woken early by a signal.
        s.wake().signal();
        assert_eq!(s.sleep(Some(deadline)).unwrap(), Woken::Signal);
        // The timer is left armed to the same deadline, and ends the next sleep there.
        assert_eq!(s.sleep(Some(deadline)).unwrap(), Woken::Timer);
        assert!(Instant::now() >= deadline, "not before the deadline");
    }
}
