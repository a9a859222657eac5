//! The one error type of `lqos-bench`.

use lqos_apply::ApplyError;

/// What can go wrong while benchmarking.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// Loading, reading back or preflighting failed (the kernel's words inside).
    #[error(transparent)]
    Apply(#[from] ApplyError),
    /// The benchmark network could not be planned.
    #[error("planning the bench tree: {0}")]
    Plan(#[from] lqos_tc::PlanError),
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
