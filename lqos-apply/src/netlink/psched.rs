//! The kernel's packet-scheduler clock (`/proc/net/psched`): HTB's
//! `buffer`/`cbuffer` are in its ticks, and tc's default burst uses its
//! `HZ`.

use super::consts::TC_DEFAULT_MTU;

/// The kernel's packet-scheduler clock, as published in `/proc/net/psched`
/// (`t2us us2t clock_res hz`, four hex words). HTB `buffer`/`cbuffer` are in
/// these ticks. Encoding takes it as a value so it stays pure; the socket
/// layer reads the real file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PschedClock {
    /// First word: nanoseconds per microsecond (1000) on current kernels.
    pub t2us: u32,
    /// Second word: nanoseconds per tick (64 on current kernels).
    pub us2t: u32,
    /// Third word: clock resolution (1000000).
    pub clock_res: u32,
    /// Fourth word: what tc uses as `HZ` for its default burst
    /// (`NSEC_PER_SEC / hrtimer_resolution`, 1000000000 with high-res timers).
    pub hz: u32,
}

impl Default for PschedClock {
    /// `000003e8 00000040 000f4240 3b9aca00`: every kernel since 3.x with
    /// high-resolution timers (this project's kernel 6.18 included).
    fn default() -> Self {
        PschedClock {
            t2us: 0x3e8,
            us2t: 0x40,
            clock_res: 0xf4240,
            hz: 0x3b9a_ca00,
        }
    }
}

/// `/proc/net/psched` could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot parse /proc/net/psched contents {text:?} (expected four hex words)")]
#[non_exhaustive]
pub struct PschedParseError {
    /// What the file held.
    pub text: String,
}

impl PschedClock {
    /// Parses the text of `/proc/net/psched`.
    ///
    /// ```
    /// use lqos_apply::netlink::PschedClock;
    /// let c = PschedClock::parse("000003e8 00000040 000f4240 3b9aca00\n").unwrap();
    /// assert_eq!(c, PschedClock::default());
    /// assert_eq!(c.tick_in_usec(), 15.625);
    /// ```
    pub fn parse(text: &str) -> Result<PschedClock, PschedParseError> {
        let err = || PschedParseError {
            text: text.to_string(),
        };
        let mut words = text.split_whitespace().map(|w| u32::from_str_radix(w, 16));
        let mut next = || words.next().and_then(|w| w.ok()).ok_or_else(err);
        let c = PschedClock {
            t2us: next()?,
            us2t: next()?,
            clock_res: next()?,
            hz: next()?,
        };
        if c.us2t == 0 || c.clock_res == 0 {
            return Err(err());
        }
        Ok(c)
    }

    /// Scheduler ticks per microsecond, computed as `tc_core_init` does.
    pub fn tick_in_usec(&self) -> f64 {
        // tc's compatibility hack: a nanosecond clock advertises t2us = 1000.
        let t2us = if self.clock_res == 1_000_000_000 {
            self.us2t
        } else {
            self.t2us
        };
        let clock_factor = f64::from(self.clock_res) / 1e6;
        f64::from(t2us) / f64::from(self.us2t) * clock_factor
    }

    /// tc's `HZ` for default bursts (`get_hz`): the fourth word when the
    /// clock resolution is 1000000, else 100.
    pub fn tc_hz(&self) -> u32 {
        if self.clock_res == 1_000_000 && self.hz != 0 {
            self.hz
        } else {
            100
        }
    }

    /// Ticks needed to send `size` bytes at `bytes_per_sec`, as
    /// `tc_calc_xmittime` computes them (time truncated to whole
    /// microseconds, then converted to ticks) whenever that is at least 1 µs.
    /// Below 1 µs tc 6.1 truncates to 0 ticks (an HTB class that can never
    /// burst, e.g. any default burst above ~12.8 Gbit); lqos then uses the
    /// untruncated time instead, and never returns 0 for a non-zero size.
    pub fn xmit_ticks(&self, bytes_per_sec: u64, size: u32) -> u32 {
        if bytes_per_sec == 0 || size == 0 {
            return 0;
        }
        let exact_us = 1e6 * (f64::from(size) / bytes_per_sec as f64);
        let tc_us = exact_us as u32; // saturating, truncating: C's (unsigned)
        let ticks = if tc_us >= 1 {
            f64::from(tc_us) * self.tick_in_usec()
        } else {
            exact_us * self.tick_in_usec()
        };
        (ticks as u32).max(1)
    }

    /// Bytes that `ticks` of transmit time hold at `bytes_per_sec` (the
    /// inverse of [`PschedClock::xmit_ticks`], rounded to the nearest byte;
    /// exact to within the bytes of ~1.1 µs at `bytes_per_sec`: tc's
    /// whole-microsecond truncation plus one 64 ns tick).
    pub fn xmit_size(&self, bytes_per_sec: u64, ticks: u32) -> u32 {
        let bytes = f64::from(ticks) / self.tick_in_usec() * bytes_per_sec as f64 / 1e6;
        bytes.round().min(f64::from(u32::MAX)) as u32
    }

    /// tc's default HTB burst for a rate: `rate / HZ + mtu` bytes.
    pub fn default_burst(&self, bytes_per_sec: u64) -> u32 {
        let b = bytes_per_sec / u64::from(self.tc_hz()) + u64::from(TC_DEFAULT_MTU);
        u32::try_from(b).unwrap_or(u32::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_math_matches_tc() {
        let c = PschedClock::default();
        assert_eq!(c.tick_in_usec(), 15.625);
        assert_eq!(c.tc_hz(), 1_000_000_000);
        // 10mbit: 1600 bytes in 1280 us = 20000 ticks (tc's capture).
        assert_eq!(c.xmit_ticks(1_250_000, c.default_burst(1_250_000)), 20000);
        // 0.7mbit: tc truncates 18285.71 us to 18285 us first.
        assert_eq!(c.xmit_ticks(87_500, 1600), 285_703);
        // 10gbit: 1.28 us -> 1 us -> 15 ticks, like tc.
        assert_eq!(
            c.xmit_ticks(1_250_000_000, c.default_burst(1_250_000_000)),
            15
        );
        // 50gbit: tc sends 0; lqos keeps the sub-microsecond time.
        let r = 6_250_000_000;
        assert_eq!(c.xmit_ticks(r, c.default_burst(r)), 4);
        assert!(c.xmit_ticks(u64::MAX, 1) >= 1);
    }

    #[test]
    fn xmit_size_inverts_ticks() {
        let c = PschedClock::default();
        for (rate, size) in [(87_500u64, 1600u32), (1_250_000, 15000), (350, 1600)] {
            let t = c.xmit_ticks(rate, size);
            let back = c.xmit_size(rate, t);
            assert!(
                back.abs_diff(size) <= 1 + (rate / 1_000_000) as u32,
                "{rate} {size} {back}"
            );
        }
    }

    #[test]
    fn psched_parse_rejects_garbage() {
        assert!(PschedClock::parse("").is_err());
        assert!(PschedClock::parse("1 0 1 1").is_err());
        assert!(PschedClock::parse("zz 1 1 1").is_err());
    }
}
