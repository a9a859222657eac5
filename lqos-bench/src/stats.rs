//! Timing samples and their summaries (median, min, max).

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// One timed run of one method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Sample {
    /// Wall-clock time.
    pub wall: Duration,
    /// User CPU time of this process and its waited-for children.
    pub user: Duration,
    /// System (kernel) CPU time of this process and its waited-for children.
    pub sys: Duration,
    /// tc operations (netlink requests) sent.
    pub ops: usize,
}

impl Sample {
    /// A sample from a measured [`Timing`](lqos_apply::timing::Timing) and the ops sent.
    pub fn new(t: lqos_apply::timing::Timing, ops: usize) -> Sample {
        Sample {
            wall: t.wall,
            user: t.user,
            sys: t.sys,
            ops,
        }
    }
}

/// Median, minimum and maximum of one quantity over runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Spread {
    /// Median (mean of the two middle values for an even count).
    pub median: Duration,
    /// Smallest value.
    pub min: Duration,
    /// Largest value.
    pub max: Duration,
}

impl Spread {
    /// The spread of `values`; all zero for an empty slice.
    pub fn of(values: impl IntoIterator<Item = Duration>) -> Spread {
        let mut v: Vec<Duration> = values.into_iter().collect();
        if v.is_empty() {
            return Spread::default();
        }
        v.sort_unstable();
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2
        };
        Spread {
            median,
            min: v[0],
            max: v[n - 1],
        }
    }
}

/// Summary of a method's samples.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Summary {
    /// Number of runs.
    pub runs: usize,
    /// Wall-clock spread.
    pub wall: Spread,
    /// User CPU spread.
    pub user: Spread,
    /// System CPU spread.
    pub sys: Spread,
    /// Ops sent per run (median).
    pub ops: usize,
    /// Ops per second of median wall time.
    pub ops_per_sec: f64,
}

impl Summary {
    /// Summarises `samples`.
    pub fn of(samples: &[Sample]) -> Summary {
        let wall = Spread::of(samples.iter().map(|s| s.wall));
        let mut ops: Vec<usize> = samples.iter().map(|s| s.ops).collect();
        ops.sort_unstable();
        let ops = ops.get(ops.len() / 2).copied().unwrap_or(0);
        let secs = wall.median.as_secs_f64();
        Summary {
            runs: samples.len(),
            wall,
            user: Spread::of(samples.iter().map(|s| s.user)),
            sys: Spread::of(samples.iter().map(|s| s.sys)),
            ops,
            ops_per_sec: if secs > 0.0 { ops as f64 / secs } else { 0.0 },
        }
    }

    /// This summary's median wall time divided by `baseline`'s.
    pub fn ratio_to(&self, baseline: &Summary) -> Option<f64> {
        let b = baseline.wall.median.as_secs_f64();
        (b > 0.0).then(|| self.wall.median.as_secs_f64() / b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn spread_odd_even_empty() {
        assert_eq!(
            Spread::of([ms(5), ms(1), ms(3)]),
            Spread {
                median: ms(3),
                min: ms(1),
                max: ms(5)
            }
        );
        assert_eq!(Spread::of([ms(4), ms(2)]).median, ms(3));
        assert_eq!(Spread::of([]), Spread::default());
    }

    #[test]
    fn summary_rates_and_ratio() {
        let s = |w| Sample {
            wall: ms(w),
            user: ms(1),
            sys: ms(w - 1),
            ops: 1000,
        };
        let a = Summary::of(&[s(100), s(300), s(200)]);
        assert_eq!(a.wall.median, ms(200));
        assert!((a.ops_per_sec - 5000.0).abs() < 1e-6);
        let b = Summary::of(&[s(400)]);
        assert!((a.ratio_to(&b).unwrap() - 0.5).abs() < 1e-9);
        assert_eq!(a.ratio_to(&Summary::default()), None);
    }
}
