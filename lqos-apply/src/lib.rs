//! The only lqos crate that touches the kernel.
//!
//! `lqos-apply` drives the planner's per-interface op streams into the kernel
//! through rtnetlink or `tc -b`, serially or one worker per interface, reads
//! live trees back into [`lqos_tc::TcTree`], verifies them against a plan and
//! reloads incrementally.

pub mod bench;
pub mod netlink;
