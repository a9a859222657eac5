//! The benchmark runner of lqos's load methods: the front end's bench and
//! the criterion loader benches.
//!
//! Start with [`BenchTree::plan`] (the tree to load and its 1%-changed
//! variant), then [`Runner::new`] on a scratch namespace's name, load the
//! base tree once with [`Runner::converge`], and time each [`Method`] with
//! [`Runner::run`]. [`Summary::of`] turns a method's [`Sample`]s into median,
//! min and max.
//!
//! The per-load timing (`Timing`, `Stopwatch`) stays in `lqos-apply`,
//! because its backends report wall/user/sys per interface; this crate only
//! measures whole methods and summarises them.
#![deny(missing_docs)]

mod error;
mod runner;
mod stats;

pub use error::{BenchError, Result};
pub use runner::{one_percent_changed, ApplyCommand, BenchTree, Measured, Method, Runner};
pub use stats::{Sample, Spread, Summary};

// The README's example runs as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
