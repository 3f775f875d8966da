// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! A core of the device thread's own (`serve --poll-cpu N`): the thread is pinned to CPU N, and
//! while any QP's doorbell record is watched it polls the records without pause, never yielding
//! the CPU and never sleeping, so the producers never find the sleeping word set and never ring
//! (a record-mode WR costs no MMIO write, no vfio-user message: under KVM, no VM exit). This is
//! how a hardware RNIC's doorbell-record poller behaves; it is only worth its core where that
//! core has nothing else to run: the vCPUs must run on other CPUs.
//!
//! Without it the thread polls for [`PollWindow::SPIN`](crate::records::PollWindow::SPIN) after
//! activity, yielding to the vCPUs it shares cores with, and then sleeps.

use std::fmt;

/// The CPU the device thread is pinned to, one this process may run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PollCpu(usize);

impl PollCpu {
    /// CPU `cpu`, if this process may run on it (its affinity mask, as `taskset` or a cgroup
    /// set it): otherwise why not, with the CPUs it may run on (clap names the flag and value).
    pub fn new(cpu: usize) -> Result<Self, String> {
        let allowed = allowed_cpus().map_err(|e| format!("sched_getaffinity: {e}"))?;
        if allowed.contains(&cpu) {
            Ok(Self(cpu))
        } else {
            Err(format!(
                "this process may run only on CPUs {}",
                CpuList(&allowed)
            ))
        }
    }

    /// `--poll-cpu`'s value: a CPU number this process may run on.
    pub fn parse(arg: &str) -> Result<Self, String> {
        let cpu = arg.parse().map_err(|_| "not a CPU number".to_string())?;
        Self::new(cpu)
    }

    /// The CPU's number.
    pub fn cpu(self) -> usize {
        self.0
    }

    /// Pins the calling thread to the CPU.
    pub fn pin(self) -> std::io::Result<()> {
        // SAFETY: an all-zero `cpu_set_t` is a valid, empty set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: `new` checked that the CPU is in this process's mask, which sched_getaffinity
        // filled from a `cpu_set_t` of this size, so the index is inside the set.
        unsafe { libc::CPU_SET(self.0, &mut set) };
        // SAFETY: `set` is a valid `cpu_set_t` of the size passed; pid 0 is the calling thread.
        let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }
}

/// The CPUs this process may run on.
pub fn allowed_cpus() -> std::io::Result<Vec<usize>> {
    // SAFETY: an all-zero `cpu_set_t` is a valid, empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable `cpu_set_t` of the size passed; pid 0 is this thread.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let bits = 8 * std::mem::size_of_val(&set);
    // SAFETY: every index is below the set's size in bits.
    Ok((0..bits)
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect())
}

/// CPUs as `taskset -c` writes them: `0-3,6`.
struct CpuList<'a>(&'a [usize]);

impl fmt::Display for CpuList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut cpus = self.0.iter().copied().peekable();
        while let Some(start) = cpus.next() {
            let mut end = start;
            while cpus.peek() == Some(&(end + 1)) {
                end += 1;
                cpus.next();
            }
            let sep = if first { "" } else { "," };
            first = false;
            if end == start {
                write!(f, "{sep}{start}")?;
            } else {
                write!(f, "{sep}{start}-{end}")?;
            }
        }
        if first {
            write!(f, "(none)")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cpu_outside_the_affinity_mask_is_refused_with_the_allowed_ones() {
        let allowed = allowed_cpus().expect("sched_getaffinity");
        let first = *allowed.first().expect("this process runs on some CPU");
        assert_eq!(PollCpu::new(first).map(PollCpu::cpu), Ok(first));
        let outside = 8 * std::mem::size_of::<libc::cpu_set_t>();
        let err = PollCpu::new(outside).expect_err("no such CPU");
        assert!(
            err.starts_with("this process may run only on CPUs "),
            "{err}"
        );
        assert!(err.contains(&first.to_string()), "{err}");
    }

    #[test]
    fn a_poll_cpu_that_is_no_number_is_refused() {
        assert_eq!(PollCpu::parse("one"), Err("not a CPU number".into()));
        assert_eq!(
            PollCpu::parse(&allowed_cpus().expect("mask")[0].to_string()).map(PollCpu::cpu),
            Ok(allowed_cpus().expect("mask")[0])
        );
    }

    #[test]
    fn cpu_lists_are_written_as_taskset_writes_them() {
        assert_eq!(CpuList(&[0, 1, 2, 3, 6]).to_string(), "0-3,6");
        assert_eq!(CpuList(&[1]).to_string(), "1");
        assert_eq!(CpuList(&[0, 2, 4, 5]).to_string(), "0,2,4-5");
        assert_eq!(CpuList(&[]).to_string(), "(none)");
    }

    #[test]
    fn a_thread_pinned_to_an_allowed_cpu_runs_there_only() {
        let first = allowed_cpus().expect("mask")[0];
        let cpu = PollCpu::new(first).expect("allowed");
        let mask = std::thread::spawn(move || {
            cpu.pin().expect("sched_setaffinity");
            allowed_cpus().expect("mask")
        })
        .join()
        .expect("thread");
        assert_eq!(mask, vec![first]);
    }
}
