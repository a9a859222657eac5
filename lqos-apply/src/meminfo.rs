//! The machine's memory as `/proc/meminfo` states it (the same in every
//! network namespace), for the memory preflight ([`crate::memory`]).

const MIB: u64 = 1 << 20;

/// The two numbers of `/proc/meminfo` the preflight needs, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemInfo {
    /// `MemTotal`.
    pub total: u64,
    /// `MemAvailable`: what can be allocated without swapping (free memory
    /// plus reclaimable caches).
    pub available: u64,
}

impl MemInfo {
    /// Parses `/proc/meminfo` text (`MemTotal:  6080276 kB`); `None` when a
    /// field is missing.
    pub fn parse(text: &str) -> Option<MemInfo> {
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
                .map(|kb| kb * 1024)
        };
        Some(MemInfo {
            total: field("MemTotal")?,
            available: field("MemAvailable")?,
        })
    }

    /// This machine's `/proc/meminfo` (the same in every network
    /// namespace); `None` when it cannot be read or parsed.
    pub fn read() -> Option<MemInfo> {
        std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|t| MemInfo::parse(&t))
    }

    /// What a load must leave free: 5% of `MemTotal`, at least 256 MiB
    /// (the estimate's error, and everything else the machine runs).
    pub fn margin(&self) -> u64 {
        (self.total / 20).max(256 * MIB)
    }

    /// What a load may add: `MemAvailable` minus the margin.
    pub fn usable(&self) -> u64 {
        self.available.saturating_sub(self.margin())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MEMINFO: &str = "MemTotal:        6080276 kB\nMemFree:         5900000 kB\nMemAvailable:    5855440 kB\nBuffers:               0 kB\n";

    #[test]
    fn parses_proc_meminfo() {
        let m = MemInfo::parse(MEMINFO).unwrap();
        assert_eq!(m.total, 6_080_276 * 1024);
        assert_eq!(m.available, 5_855_440 * 1024);
        // 5% of 5.8 GiB is above the 256 MiB floor.
        assert_eq!(m.margin(), m.total / 20);
        assert_eq!(m.usable(), m.available - m.total / 20);
        let small = MemInfo {
            total: 2048 * MIB,
            available: 1800 * MIB,
        };
        assert_eq!(small.margin(), 256 * MIB);
        assert_eq!(MemInfo::parse("MemTotal: 1 kB\n"), None);
        assert_eq!(
            MemInfo::parse("MemAvailableX: 1 kB\nMemTotal: 2 kB\n"),
            None
        );
    }
}
