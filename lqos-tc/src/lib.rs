//! Pure tc planner for LibreQoS-style shaping trees.
//!
//! `lqos-tc` turns a validated [`lqos_model::Network`] and a plan
//! configuration into a plan: for each interface an ordered stream of typed
//! [`TcOp`]s (mq root, one HTB per TX queue, site and circuit classes, leaf
//! qdiscs). Ops render as `tc -b` text and parse back; two trees diff into
//! the minimal op stream between them. No I/O and no clock.
//!
//! ```
//! use lqos_tc::TcHandle;
//! assert_eq!(TcHandle::new(1, 3).to_string(), "1:3");
//! ```
#![forbid(unsafe_code)]

mod handle;
mod ops;
mod tree;

pub use handle::{HandleError, TcHandle};
pub use ops::{
    CakeAckFilter, CakeDiffserv, CakeFlowMode, CakeParams, Class, FqCodelParams, HtbClass,
    HtbQdisc, Qdisc, QdiscKind, TcOp,
};
pub use tree::TcTree;
