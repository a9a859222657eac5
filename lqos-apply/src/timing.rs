//! Wall and CPU time of a load: the caller's thread, or a `tc` child.

use std::time::{Duration, Instant};

use nix::sys::resource::{getrusage, UsageWho};
use serde::{Deserialize, Serialize};

/// Wall clock plus user and system CPU time of whoever did the work (the
/// worker thread for netlink, the `tc` process for `tc -b`). For netlink the
/// kernel's work on each message is system time of the sending thread.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timing {
    /// Elapsed real time.
    pub wall: Duration,
    /// User-space CPU time.
    pub user: Duration,
    /// Kernel CPU time.
    pub sys: Duration,
}

impl std::ops::Add for Timing {
    type Output = Timing;
    /// Component-wise sum.
    fn add(self, other: Timing) -> Timing {
        Timing {
            wall: self.wall + other.wall,
            user: self.user + other.user,
            sys: self.sys + other.sys,
        }
    }
}

impl Timing {
    /// `wall 1.234s user 0.010s sys 1.200s`.
    pub fn display(&self) -> String {
        format!(
            "wall {:.3}s user {:.3}s sys {:.3}s",
            self.wall.as_secs_f64(),
            self.user.as_secs_f64(),
            self.sys.as_secs_f64()
        )
    }
}

/// Whose CPU time a [`Stopwatch`] measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuScope {
    /// The calling thread (`RUSAGE_THREAD`).
    Thread,
    /// The whole process (`RUSAGE_SELF`).
    Process,
    /// Waited-for children (`RUSAGE_CHILDREN`); only meaningful when one
    /// child at a time is reaped in between.
    Children,
    /// The whole process plus its waited-for children: everything a
    /// benchmarked method costs, whichever backend did the work.
    ProcessAndChildren,
}

/// Measures wall time and the CPU time of a [`CpuScope`] between `start`
/// and `stop`.
#[derive(Debug, Clone, Copy)]
pub struct Stopwatch {
    scope: CpuScope,
    start: Instant,
    cpu: (Duration, Duration),
}

fn cpu_now(scope: CpuScope) -> (Duration, Duration) {
    let usage = |who| match getrusage(who) {
        Ok(u) => (tv(u.user_time()), tv(u.system_time())),
        Err(_) => (Duration::ZERO, Duration::ZERO),
    };
    match scope {
        CpuScope::Thread => usage(UsageWho::RUSAGE_THREAD),
        CpuScope::Process => usage(UsageWho::RUSAGE_SELF),
        CpuScope::Children => usage(UsageWho::RUSAGE_CHILDREN),
        CpuScope::ProcessAndChildren => {
            let (a, b) = (
                usage(UsageWho::RUSAGE_SELF),
                usage(UsageWho::RUSAGE_CHILDREN),
            );
            (a.0 + b.0, a.1 + b.1)
        }
    }
}

fn tv(t: nix::sys::time::TimeVal) -> Duration {
    Duration::new(t.tv_sec().max(0) as u64, (t.tv_usec().max(0) as u32) * 1000)
}

impl Stopwatch {
    /// Starts measuring now.
    pub fn start(scope: CpuScope) -> Stopwatch {
        Stopwatch {
            scope,
            cpu: cpu_now(scope),
            start: Instant::now(),
        }
    }

    /// Wall and CPU time since `start`.
    pub fn stop(&self) -> Timing {
        let wall = self.start.elapsed();
        let (u, s) = cpu_now(self.scope);
        Timing {
            wall,
            user: u.saturating_sub(self.cpu.0),
            sys: s.saturating_sub(self.cpu.1),
        }
    }
}

/// User and system time of an exited, not yet reaped child, from
/// `/proc/PID/stat` (clock-tick resolution). Used when several `tc`
/// children run at once, where `RUSAGE_CHILDREN` cannot tell them apart.
pub(crate) fn zombie_cpu(pid: u32) -> Option<(Duration, Duration)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may contain spaces) in parens.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state); utime is field 14, stime 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    let hz = clock_ticks();
    Some((ticks(utime, hz), ticks(stime, hz)))
}

fn ticks(t: u64, hz: u64) -> Duration {
    Duration::from_nanos(t.saturating_mul(1_000_000_000) / hz.max(1))
}

fn clock_ticks() -> u64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .map(|v| v as u64)
        .unwrap_or(100)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stopwatch_measures_own_cpu() {
        let sw = Stopwatch::start(CpuScope::Thread);
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let t = sw.stop();
        assert!(t.wall > Duration::ZERO);
        assert!(t.display().starts_with("wall "));
    }

    #[test]
    fn own_stat_parses() {
        assert!(zombie_cpu(std::process::id()).is_some());
    }
}
