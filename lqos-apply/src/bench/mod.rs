//! Load-method benchmarks (`lqos bench` and the criterion loader benches).

mod stats;

pub use stats::{Sample, Spread, Summary};
