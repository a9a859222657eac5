//! Shared helpers for the lqos criterion benches.
