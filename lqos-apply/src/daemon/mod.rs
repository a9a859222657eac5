//! The reload daemon as a library, for any program that embeds lqos.
//!
//! - [`Reloader`]: the decisions, without I/O (quinn-proto's style). It
//!   owns the plan the daemon runs, the model of what the kernel holds
//!   ([`KnownKernel`]: updated op by op as loads succeed, unknown after an
//!   error, then read back), the lazy-leaf tracker, the statistics
//!   ([`crate::stats::StatsPoll`]) and every timer, in one table
//!   ([`Reloader::poll_timeout`]). It takes triggers (start, an input
//!   file's events, SIGHUP, a confirmation) and `now` values, asks for
//!   what it needs ([`Request`]: the input files, links, a preflight,
//!   trees, memory, a load, a poll) and reports what happened
//!   ([`Output`]: typed [`Event`]s to log, the last good plan and the
//!   status [`Record`]s to save). One poll every [`Settings::poll`] feeds
//!   lazy leaves and the statistics ([`Reloader::statistics`]) from the
//!   same dumps; neither is polled for unless asked. The full path (all inputs planned)
//!   and the incremental one (a few ShapedDevices.csv rows re-planned in
//!   place, diffed against the known state) end in the same load step.
//!   An edit is read only when complete (after a close or a
//!   rename, or a quiet period; never while it changes or ends mid-record),
//!   and the removal guard ([`crate::guard`]) refuses one that would
//!   remove too many circuits until it is confirmed.
//! - [`Driver`]: the thin I/O around it (files, kernel, state directory,
//!   clock); the embedding program keeps the loop (signals, the file
//!   watcher, logging) and reads the statistics and the daemon's
//!   [`Health`] from it.
//!
//! A start, an edit and the statistics, against the [`crate::backend::Recording`]
//! fake kernel:
//!
//! ```
//! use lqos_apply::daemon::{Driver, Event, FileEvent, Kernel, LoadPath, Settings};
//! use lqos_apply::inputs::InputFile;
//! use lqos_apply::backend::Recording;
//! use lqos_apply::inputs::{Inputs, PlanOverrides};
//! use lqos_apply::state::NetnsState;
//!
//! let dir = tempfile::tempdir().unwrap();
//! let g = lqos_model::generate(&lqos_model::GenParams::with_circuits(30));
//! let csv = lqos_model::write::write_shaped_devices(&g.network);
//! std::fs::write(dir.path().join("network.json"), lqos_model::write::write_network_json(&g.network)).unwrap();
//! std::fs::write(dir.path().join("ShapedDevices.csv"), &csv).unwrap();
//! std::fs::write(dir.path().join("lqos.conf"), lqos_model::write::write_config(&g.config)).unwrap();
//!
//! let kernel = Recording::new().with_link("ens19", 4).with_link("ens20", 4);
//! let state = NetnsState::new(dir.path().join("state"), None);
//! let mut settings = Settings::default();
//! settings.overrides = PlanOverrides::default().sqm("pfifo".parse().unwrap());
//! settings.statistics = true; // a poll every `settings.poll`, the first at start
//! let k = Kernel { live: &kernel, backend: &kernel };
//! let mut d = Driver::new(settings, Inputs::in_dir(dir.path()), &state, k);
//! let mut events = Vec::new();
//! d.start(&mut |e| events.push(e));
//! assert!(events.iter().any(|e| matches!(e, Event::Applied(a) if a.summary.added > 60)));
//!
//! // One circuit's download ceiling changes: one class change, incrementally.
//! let edited = csv.replacen(",100,", ",77,", 1);
//! std::fs::write(dir.path().join("ShapedDevices.csv"), edited).unwrap();
//! d.file_event(InputFile::Devices, FileEvent::Closed);
//! events.clear();
//! d.run(&mut |e| events.push(e));
//! let applied = events.iter().find_map(|e| match e { Event::Applied(a) => Some(a), _ => None }).unwrap();
//! assert!(matches!(applied.path, LoadPath::Incremental(_)));
//! assert_eq!(applied.summary.changed, 1);
//!
//! // Every circuit's counters, from the poll made at start.
//! let stats = d.statistics().unwrap();
//! assert_eq!(stats.stats.circuits.len(), 30);
//! assert_eq!(d.health().polls, 1);
//! ```

mod core;
mod describe;
mod driver;
mod event;
mod health;
mod ingest;
mod known;
#[cfg(test)]
mod tests;

pub use self::core::{Output, Refused, Reloader, Request, Response, Settings, Status};
pub use describe::{Level, LogLine, Value, REPAIRS_LOGGED};
pub use driver::{Driver, Kernel};
pub use event::{Applied, Breakdown, Event, Fallback, LoadPath, Record};
pub use health::Health;
pub use ingest::FileEvent;
pub use known::{KnownKernel, OutOfStep};
