//! Load-method benchmarks (`lqos bench` and the criterion loader benches).

mod clock;
mod stats;

pub use clock::{CpuTimes, Stopwatch};
pub use stats::{Sample, Spread, Summary};
