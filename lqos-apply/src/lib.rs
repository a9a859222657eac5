//! The only lqos crate that touches the kernel.
//!
//! `lqos-apply` drives the planner's per-interface op streams into the kernel
//! through rtnetlink or `tc -b`, serially or one worker per interface, reads
//! live trees back into [`lqos_tc::TcTree`], verifies them against a plan and
//! reloads incrementally.
//!
//! - [`backend`]: the [`Backend`] trait with [`TcBatch`] (`tc -b`),
//!   [`NetlinkBackend`] and [`Recording`] (a fake kernel for tests).
//! - [`engine`]: preflight, full-or-incremental choice, load.
//! - [`verify`]: live tree vs plan.
//! - [`netns`]: scratch network namespaces (tests, benches, probes).
//! - [`state`]: state directory, atomic files, apply lock.
//! - [`session`]: lock + apply + save the last good plan; rollback.
//!
//! ```
//! use lqos_apply::backend::{Backend, IfaceOps, NoProgress, Recording, RootDelete};
//! use lqos_tc::{Qdisc, QdiscKind, TcHandle, TcOp};
//! let rec = Recording::new().with_link("ens19", 4);
//! let mq = TcOp::ReplaceQdisc(Qdisc { parent: TcHandle::ROOT, handle: TcHandle::new(0x7fff, 0), kind: QdiscKind::Mq });
//! let report = rec.load(&[IfaceOps::new("ens19", vec![mq])], RootDelete::None, &NoProgress);
//! assert!(report.is_ok());
//! assert_eq!(rec.sent_for("ens19").len(), 1);
//! ```

pub mod backend;
pub mod bench;
pub mod engine;
pub mod error;
pub mod live;
pub mod netlink;
pub mod netns;
pub mod session;
pub mod state;
pub mod timing;
pub mod verify;

pub use backend::{
    Backend, IfaceOps, IfaceReport, LoadReport, NetlinkBackend, Parallelism, Progress, Recording,
    RootDelete, TcBatch, TcMode,
};
pub use engine::{apply_targets, plan_change, preflight, ApplyOptions, ApplyReport, Target};
pub use error::ApplyError;
pub use live::{read_live, LinkSummary, LiveSource, NetlinkLive};
pub use session::{load_saved_plan, SavedPlan, Session};
pub use timing::Timing;
pub use verify::{verify_tree, VerifyReport};
