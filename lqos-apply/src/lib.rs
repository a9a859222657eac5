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
//! A whole apply, here against the [`Recording`] fake kernel (in real use
//! [`NetlinkLive`] reads the kernel and [`NetlinkBackend`] or [`TcBatch`]
//! loads it):
//!
//! ```
//! use lqos_apply::{ApplyOptions, NoProgress, Recording, Session, state::StateDir};
//!
//! let g = lqos_model::generate(&lqos_model::GenParams { circuits: 50, ..Default::default() });
//! let mut cfg = lqos_tc::PlanConfig::from_lqos_config(&g.config, 4).unwrap();
//! cfg.default_sqm = "pfifo".parse().unwrap();
//! let plan = lqos_tc::plan(&g.network, &cfg, None).unwrap();
//!
//! let kernel = Recording::new().with_link("ens19", 4).with_link("ens20", 4);
//! let dir = tempfile::tempdir().unwrap();
//! let state = StateDir::open(dir.path()).unwrap();
//! let s = Session { state: &state, netns: None, live: &kernel, backend: &kernel };
//! let first = s.apply(&plan, ApplyOptions::default(), &NoProgress).unwrap();
//! assert_eq!(first.ops_total(), 2 * plan.interfaces[0].ops.len()); // full build
//! let again = s.apply(&plan, ApplyOptions::default(), &NoProgress).unwrap();
//! assert_eq!(again.ops_total(), 0); // incremental: nothing changed
//! ```
//!
//! For benchmarks: [`netns::ScratchNetns::with_veth`] gives a private
//! namespace with `ens19`/`ens20`; [`IfaceOps::all_from_plan`] the full
//! builds; [`TcBatch`] ([`TcMode`] combined / serial / parallel) and
//! [`NetlinkBackend`] ([`Parallelism`]) load them with a [`RootDelete`]
//! placement; [`LoadReport`] has per-interface [`Timing`] (wall, user, sys)
//! and the total; [`read_live`] + [`plan_change`] is an incremental reload.

pub mod backend;
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
    Backend, IfaceOps, IfaceReport, LoadReport, NetlinkBackend, NoProgress, Parallelism, Progress,
    Recording, RootDelete, TcBatch, TcMode,
};
pub use engine::{apply_targets, plan_change, preflight, ApplyOptions, ApplyReport, Target};
pub use error::ApplyError;
pub use live::{read_live, LinkSummary, LiveSource, NetlinkLive};
pub use session::{load_saved, load_saved_allocation, load_saved_plan, SavedPlan, Session};
pub use timing::Timing;
pub use verify::{verify_tree, VerifyReport};
