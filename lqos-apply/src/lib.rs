//! The only lqos crate that touches the kernel: loads plans into Linux
//! (rtnetlink or `tc -b`), reads live trees back, verifies them and reloads
//! incrementally.
//!
//! # Load a plan into a network namespace
//!
//! Plan LibreQoS's files and load the plan into the interfaces of network
//! namespace `shaper` (root or `CAP_NET_ADMIN`): the first load builds the
//! trees, every later one sends only what changed, and the last good plan
//! is kept in the state directory.
//!
//! ```no_run
//! use lqos_apply::backend::{NetlinkBackend, NoProgress, Parallelism};
//! use lqos_apply::inputs::{plan_files, Inputs, PlanOverrides, QueueCount};
//! use lqos_apply::live::NetlinkLive;
//! use lqos_apply::saved::load_saved_allocation;
//! use lqos_apply::state::NetnsState;
//! use lqos_apply::{ApplyOptions, Session};
//!
//! # fn main() -> Result<(), lqos_apply::error::ApplyError> {
//! let netns = Some("shaper".to_string()); // an `ip netns` name; None: this one
//! let state = NetnsState::new("/var/lib/lqos", netns.as_deref());
//! let live = NetlinkLive::new(netns.clone());
//! let backend = NetlinkBackend::new(netns.clone(), Parallelism::Serial);
//!
//! // network.json, ShapedDevices.csv and lqos.conf in /etc/lqos; as many
//! // queues as the interfaces have; the classids of the last good plan.
//! let inputs = Inputs::in_dir(std::path::Path::new("/etc/lqos"));
//! let previous = load_saved_allocation(&state)?;
//! let planned = plan_files(
//!     &inputs,
//!     &PlanOverrides::default(),
//!     QueueCount::FromInterfaces(&live),
//!     previous.as_ref(),
//! )?;
//!
//! let session = Session { state: &state, live: &live, backend: &backend };
//! let opts = ApplyOptions::default().verify_after(true);
//! let report = session.apply_planned(&planned.plan, Some(&planned.network), opts, &NoProgress)?;
//! println!("{} ops sent", report.ops_total());
//! # Ok(())
//! # }
//! ```
//!
//! # Run the reload daemon
//!
//! [`daemon::Driver`] runs the reloader (the daemon's decisions, without
//! I/O) against files, a kernel and a state directory; here the kernel is
//! [`Recording`](backend::Recording), the fake that every kernel-facing
//! part accepts, so this runs anywhere:
//!
//! ```
//! use lqos_apply::backend::Recording;
//! use lqos_apply::daemon::{Driver, Event, FileEvent, Kernel, Settings};
//! use lqos_apply::inputs::{InputFile, Inputs, PlanOverrides};
//! use lqos_apply::state::NetnsState;
//!
//! let dir = tempfile::tempdir().unwrap();
//! let g = lqos_model::generate(&lqos_model::GenParams::with_circuits(20));
//! let csv = lqos_model::write::write_shaped_devices(&g.network);
//! std::fs::write(dir.path().join("network.json"), lqos_model::write::write_network_json(&g.network)).unwrap();
//! std::fs::write(dir.path().join("ShapedDevices.csv"), &csv).unwrap();
//! std::fs::write(dir.path().join("lqos.conf"), lqos_model::write::write_config(&g.config)).unwrap();
//!
//! let kernel = Recording::new().with_link("ens19", 4).with_link("ens20", 4);
//! let state = NetnsState::new(dir.path().join("state"), None);
//! let mut settings = Settings::default();
//! settings.overrides = PlanOverrides::default().sqm("pfifo".parse().unwrap());
//! let k = Kernel { live: &kernel, backend: &kernel };
//! let mut d = Driver::new(settings, Inputs::in_dir(dir.path()), &state, k);
//! let mut events = Vec::new();
//! d.start(&mut |e| events.push(e)); // the first load
//! assert!(events.iter().any(|e| matches!(e, Event::Applied(_))));
//!
//! // An edit of the devices file: the embedding program's file watcher
//! // says so, and the driver reloads when it is due.
//! std::fs::write(dir.path().join("ShapedDevices.csv"), csv.replacen(",100,", ",77,", 1)).unwrap();
//! d.file_event(InputFile::Devices, FileEvent::Closed);
//! events.clear();
//! d.run(&mut |e| events.push(e));
//! let applied = events.iter().find_map(|e| match e { Event::Applied(a) => Some(a), _ => None }).unwrap();
//! assert_eq!(applied.summary.changed, 1);
//! ```
//!
//! # What is where
//!
//! The root holds the load: [`Session`] (machine-wide lock, preflight,
//! read back, diff or full rebuild, load, save the last good plan;
//! [`Session::rollback`] re-applies it), [`apply_plan`] (the same without
//! lock and saved state), [`ApplyOptions`], [`ApplyReport`] and
//! [`verify_plan`]. The rest:
//!
//! - [`inputs`]: LibreQoS's files to a plan ([`inputs::plan_files`]), the
//!   planner overrides and the queue count; [`error`]: the one error type.
//! - [`live`] reads the kernel ([`live::LiveSource`], [`live::NetlinkLive`]);
//!   [`backend`] loads op streams ([`backend::Backend`]: rtnetlink, `tc -b`,
//!   and the [`backend::Recording`] fake); [`load`]: the steps of a load
//!   and the trees read ahead while planning; [`verify`]: drift reports.
//! - [`state`]: the state directory and what each namespace keeps there;
//!   [`saved`]: the last good plan; [`journal`]: the last input sets
//!   applied; [`guard`]: the removal guard.
//! - [`daemon`]: the reload daemon as a library; [`watch`]: its status
//!   file; [`lazy`]: lazy leaves; [`stats`]: per-circuit statistics.
//! - [`netlink`]: the rtnetlink encoder, decoder and socket; [`memory`]:
//!   the memory preflight; [`timing`]: wall, user and system time;
//!   [`adopt`]: a LibreQoS box's state.
//! - `netns` (feature `test-util`): scratch network namespaces with veth
//!   pairs for tests and benchmarks.
#![deny(missing_docs)]

pub mod adopt;
// Giving freed heap back to the system (the daemon calls it when idle);
// public only for its own test.
#[cfg(feature = "test-util")]
#[doc(hidden)]
pub mod alloc;
#[cfg(not(feature = "test-util"))]
mod alloc;
pub mod backend;
pub mod daemon;
mod engine;
pub mod error;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod guard;
mod input_file;
pub mod inputs;
pub mod journal;
pub mod lazy;
pub mod live;
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
pub mod verify;
pub mod watch;

pub use engine::{apply_plan, verify_plan, ApplyOptions, ApplyReport};
pub use session::Session;

pub mod load {
    //! The steps of [`apply_plan`](crate::apply_plan), for a caller that
    //! runs them itself: [`preflight`] (everything that would refuse the
    //! load, before anything changes), [`plan_change`] (per interface, the
    //! diff or a full rebuild, with the reason) and the live trees read
    //! ahead on a second thread while the caller plans ([`Prefetched`]).
    //! The loaders themselves are [`crate::backend`]'s.

    pub use crate::engine::{plan_change, preflight, Change, FullReason, LoadKind};
    pub use crate::prefetch::Prefetched;
}

pub mod saved {
    //! The last plan that loaded completely, as the state directory keeps
    //! it for each network namespace ([`crate::state::NetnsState`]): a
    //! compact record (config, inputs, allocation) re-planned on read, so
    //! the next plan keeps its classids and a rollback re-applies it.

    pub use crate::session::{
        load_saved, load_saved_allocation, load_saved_plan, save_last_good, SavedPlan,
        SAVED_PLAN_VERSION,
    };
}

// The README's example runs as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
