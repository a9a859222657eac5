//! Load-method benchmarks (`lqos bench` and the criterion loader benches).

mod runner;
mod stats;

pub use runner::{BenchTree, Measured, Method, Runner};
pub use stats::{Sample, Spread, Summary};
