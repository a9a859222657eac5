//! Wall and CPU time of this process and its children.

use std::time::{Duration, Instant};

use nix::sys::resource::{getrusage, UsageWho};

use super::Sample;

/// User and system CPU time consumed so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTimes {
    /// User-space CPU time.
    pub user: Duration,
    /// Kernel CPU time.
    pub sys: Duration,
}

impl CpuTimes {
    /// CPU time of this process (all threads) plus its waited-for children
    /// (`tc` processes). Netlink requests are processed in the sending
    /// thread's system call, so kernel work shows up as `sys`.
    pub fn now() -> CpuTimes {
        let mut t = CpuTimes::default();
        for who in [UsageWho::RUSAGE_SELF, UsageWho::RUSAGE_CHILDREN] {
            if let Ok(u) = getrusage(who) {
                t.user += tv(u.user_time());
                t.sys += tv(u.system_time());
            }
        }
        t
    }
}

fn tv(t: nix::sys::time::TimeVal) -> Duration {
    Duration::new(t.tv_sec().max(0) as u64, (t.tv_usec().max(0) as u32) * 1000)
}

/// Measures one run: wall clock plus CPU deltas.
#[derive(Debug, Clone, Copy)]
pub struct Stopwatch {
    wall: Instant,
    cpu: CpuTimes,
}

impl Stopwatch {
    /// Starts measuring now.
    pub fn start() -> Stopwatch {
        Stopwatch {
            wall: Instant::now(),
            cpu: CpuTimes::now(),
        }
    }

    /// Stops and returns the sample for a run that sent `ops` operations.
    pub fn stop(&self, ops: usize) -> Sample {
        let wall = self.wall.elapsed();
        let cpu = CpuTimes::now();
        Sample {
            wall,
            user: cpu.user.saturating_sub(self.cpu.user),
            sys: cpu.sys.saturating_sub(self.cpu.sys),
            ops,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stopwatch_counts_cpu_of_busy_work() {
        let sw = Stopwatch::start();
        let mut x = 0u64;
        while sw.wall.elapsed() < Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let s = sw.stop(7);
        assert_eq!(s.ops, 7);
        assert!(s.wall >= Duration::from_millis(30));
        // rusage granularity is coarse; only check the counters moved at all
        assert!(s.user + s.sys > Duration::ZERO);
    }
}
