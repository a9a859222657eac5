//! Shared helpers for the lqos criterion benches.
//!
//! [`CpuTime`] is a criterion measurement of the benchmark thread's own CPU
//! time (user + system, from `/proc/thread-self/schedstat`), so results stay
//! meaningful on a shared, loaded machine where wall time is inflated by
//! other processes.

use criterion::measurement::{Measurement, ValueFormatter};
use criterion::Throughput;

/// CPU time consumed by the calling thread so far, in nanoseconds.
pub fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

/// Criterion measurement: the benchmark thread's CPU time.
pub struct CpuTime;

/// Formats nanosecond values like criterion's wall-time formatter.
pub struct CpuFormatter;

impl ValueFormatter for CpuFormatter {
    fn scale_values(&self, typical: f64, values: &mut [f64]) -> &'static str {
        let (div, unit) = if typical < 1e3 {
            (1.0, "ns")
        } else if typical < 1e6 {
            (1e3, "µs")
        } else if typical < 1e9 {
            (1e6, "ms")
        } else {
            (1e9, "s")
        };
        for v in values {
            *v /= div;
        }
        unit
    }

    fn scale_throughputs(&self, typical: f64, t: &Throughput, values: &mut [f64]) -> &'static str {
        #[allow(unreachable_patterns)] // more variants in some criterion versions
        let n = match t {
            Throughput::Bytes(n) | Throughput::BytesDecimal(n) | Throughput::Elements(n) => {
                *n as f64
            }
            _ => 1.0,
        };
        let per_sec = n * 1e9 / typical;
        let bytes = matches!(t, Throughput::Bytes(_) | Throughput::BytesDecimal(_));
        let (div, unit) = match (bytes, per_sec) {
            (true, p) if p < 1e6 => (1e3, "kB/s (cpu)"),
            (true, _) => (1e6, "MB/s (cpu)"),
            (false, p) if p < 1e3 => (1.0, "elem/s (cpu)"),
            (false, p) if p < 1e6 => (1e3, "Kelem/s (cpu)"),
            (false, _) => (1e6, "Melem/s (cpu)"),
        };
        for v in values {
            *v = n * 1e9 / *v / div;
        }
        unit
    }

    fn scale_for_machines(&self, _values: &mut [f64]) -> &'static str {
        "ns"
    }
}

impl Measurement for CpuTime {
    type Intermediate = u64;
    type Value = u64;

    fn start(&self) -> u64 {
        thread_cpu_ns()
    }
    fn end(&self, i: u64) -> u64 {
        thread_cpu_ns().saturating_sub(i)
    }
    fn add(&self, a: &u64, b: &u64) -> u64 {
        a + b
    }
    fn zero(&self) -> u64 {
        0
    }
    fn to_f64(&self, v: &u64) -> f64 {
        *v as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        &CpuFormatter
    }
}
