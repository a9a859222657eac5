//! The only lqos crate that touches the kernel: loads plans into Linux
//! (rtnetlink or `tc -b`), reads live trees back, verifies them and reloads
//! incrementally.
//!
//! # What to call first
//!
//! 1. Inputs to a plan: [`plan_files`] (read `network.json`,
//!    `ShapedDevices.csv`, `lqos.conf`; validate; resolve the planner config
//!    with [`PlanOverrides`] and a [`QueueCount`]; plan). In memory, without
//!    files: [`lqos_model::load_with_config`] + [`plan_config`] +
//!    [`lqos_tc::plan`]. A saved plan: [`read_plan`].
//! 2. A plan to a loaded kernel: [`Session::apply`] (machine-wide lock,
//!    preflight, read back, diff or full rebuild, load, save the last good
//!    plan; [`Session::rollback`] re-applies it). The kernel is a
//!    [`LiveSource`] ([`NetlinkLive`]) and a [`Backend`] ([`NetlinkBackend`]
//!    or [`TcBatch`]); [`Recording`] fakes both for tests.
//! 3. Check: [`verify_plan`].
//!
//! A whole apply, here against the [`Recording`] fake kernel (`examples/`
//! has the same against a network namespace):
//!
//! ```
//! use lqos_apply::{plan_config, ApplyOptions, NoProgress, PlanOverrides, QueueCount, Recording, Session, NetnsState};
//!
//! let g = lqos_model::generate(&lqos_model::GenParams::with_circuits(50));
//! let overrides = PlanOverrides { sqm: Some("pfifo".parse().unwrap()), ..Default::default() };
//! let cfg = plan_config(&g.config, None, &overrides, QueueCount::Default(4)).unwrap();
//! let plan = lqos_tc::plan(&g.network, &cfg, None).unwrap();
//!
//! let kernel = Recording::new().with_link("ens19", 4).with_link("ens20", 4);
//! let dir = tempfile::tempdir().unwrap();
//! let state = NetnsState::new(dir.path(), None);
//! let s = Session { state: &state, live: &kernel, backend: &kernel };
//! let first = s.apply(&plan, ApplyOptions::default(), &NoProgress).unwrap();
//! assert_eq!(first.ops_total(), 2 * plan.interfaces[0].ops.len()); // full build
//! let again = s.apply(&plan, ApplyOptions::default(), &NoProgress).unwrap();
//! assert_eq!(again.ops_total(), 0); // incremental: nothing changed
//! ```
//!
//! # Lower levels
//!
//! - [`apply_plan`] is [`Session::apply`] without lock and saved state;
//!   [`preflight`], [`plan_change`] and [`load_deletes_first`] are its steps.
//! - A [`Backend`] loads [`IfaceOps`] streams (a full build borrowed from the
//!   plan, or a diff) with a [`RootDelete`] placement and reports per
//!   interface ([`LoadReport`], with [`Timing`]).
//! - [`Prefetched`]: the live trees read on a second thread while the
//!   caller plans (what `lqos apply` does under its lock, so that a reload
//!   with no change costs about the longer of the two, not their sum);
//!   [`Session::apply_planned_locked`] applies under a lock already held.
//! - [`netlink`]: the rtnetlink encoder, decoder and socket.
//! - [`memory`]: the memory preflight (a load whose leaf qdiscs would not
//!   fit in `MemAvailable` is refused before anything changes).
//! - [`lazy`]: lazy leaves (a circuit's leaf qdisc only while it carries
//!   traffic), used by `lqos watch --lazy-leaves`.
//! - [`stats`]: per-circuit statistics (one poll of class and qdisc
//!   dumps mapped through the plan, rates from counter deltas), used by
//!   `lqos stats`, `lqos top` and `lqos watch --metrics`.
//! - [`daemon`]: the reload daemon (`lqos watch`) as a library: a sans-I/O
//!   [`daemon::Reloader`] and the [`daemon::Driver`] that runs it.
//! - [`guard`]: the removal guard (a reload that would remove too many
//!   circuits, or from an empty file, is refused until confirmed).
//! - [`journal`]: the last input sets applied, kept in the state directory.
//! - [`watch`]: the status file `lqos watch` writes and `lqos status` reads.
//! - `netns` (feature `test-util`): scratch network namespaces with veth
//!   pairs for tests and benchmarks.
#![deny(missing_docs)]

pub mod adopt;
pub mod alloc;
mod backend;
pub mod daemon;
mod engine;
mod error;
pub mod fuzzing;
pub mod guard;
mod inputs;
pub mod journal;
pub mod lazy;
mod live;
mod meminfo;
pub mod memory;
pub mod netlink;
#[cfg(feature = "test-util")]
pub mod netns;
#[cfg(not(feature = "test-util"))]
#[allow(dead_code, unreachable_pub)]
mod netns;
mod prefetch;
mod sample;
mod session;
pub mod state;
pub mod stats;
#[cfg(test)]
mod test_fixtures;
pub mod timing;
mod verify;
pub mod watch;

pub use backend::{
    load_deletes_first, Backend, Cancel, CountProgress, IfaceOps, IfaceReport, LoadReport,
    NetlinkBackend, NoProgress, Parallelism, Progress, Recording, RootDelete, TcBatch, TcMode,
    WithCancel, RECORDING_BATCH,
};
#[cfg(feature = "test-util")]
pub use backend::{Fault, Faulty};
pub use engine::{
    apply_plan, plan_change, preflight, verify_plan, ApplyOptions, ApplyReport, Change, FullReason,
    LoadKind,
};
pub use error::{
    ApplyError, ClassifierMissing, PlanProblem, QdiscRefusal, Result, StateProblem, Stopped,
    UnsafeState,
};
pub use inputs::{
    config_key, given_queues, interface_names, plan_config, plan_files, plan_raw, read_plan,
    read_plan_record, Inputs, LoadedInputs, PlanOverrides, Planned, QueueCount, RawInputs,
    CONFIG_FILE, DEVICES_FILE, NETWORK_FILE,
};
pub use live::{read_live, KindProbe, KindSupport, LinkSummary, LiveSource, NetlinkLive};
pub use prefetch::Prefetched;
pub use session::{
    load_saved, load_saved_allocation, load_saved_plan, save_last_good, SavedPlan, Session,
    SAVED_PLAN_VERSION,
};
pub use state::{resolve_state_dir, ApplyLock, NetnsState, StateDir};
pub use timing::Timing;
pub use verify::{verify_tree, Drift, IfaceVerify, VerifyReport};

// The README's example runs as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
