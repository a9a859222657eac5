//! The one error type of `lqos-bench`.

use lqos_apply::error::ApplyError;

/// What can go wrong while benchmarking.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    /// Loading, reading back or preflighting failed (the kernel's words inside).
    #[error(transparent)]
    Apply(#[from] ApplyError),
    /// The benchmark network could not be planned.
    #[error("planning the bench tree: {0}")]
    Plan(#[from] lqos_tc::PlanError),
    /// A whole-process method was asked for without a reload command.
    #[error("method {method} runs the reload as a process: no command was given")]
    NoApplyCommand {
        /// The method id.
        method: &'static str,
    },
    /// The reload as a process failed.
    #[error("`{command}` failed: {message}")]
    Process {
        /// The command line.
        command: String,
        /// Exit status and stderr, or why it could not start.
        message: String,
    },
    /// After a method ran, the live tree was not the planned one.
    #[error("{method}: on {dev}, after loading, {live_classes} classes live vs {planned_classes} planned, {qdiscs_missing} planned qdiscs missing")]
    NotLoaded {
        /// The method (or step) that had just run.
        method: String,
        /// The interface.
        dev: String,
        /// Classes read back.
        live_classes: usize,
        /// Classes in the plan.
        planned_classes: usize,
        /// Planned qdisc handles not found live.
        qdiscs_missing: usize,
    },
}

/// `Result` with [`BenchError`].
pub type Result<T, E = BenchError> = std::result::Result<T, E>;
