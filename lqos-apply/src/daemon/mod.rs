//! The reload daemon as a library: what `lqos watch` runs, for any
//! program that embeds lqos.
//!
//! - [`Reloader`]: the decisions, without I/O (quinn-proto's style). It
//!   owns the plan the daemon runs, the model of what the kernel holds
//!   ([`KnownKernel`]: updated op by op as loads succeed, unknown after an
//!   error, then read back), the lazy-leaf tracker and the timers. It takes
//!   triggers (start, an input file's events, SIGHUP, a confirmation, a
//!   counter [`Sample`]) and `now`
//!   values, asks for what it needs ([`Request`]: the input files, links,
//!   a preflight, trees, memory, a load, counters) and reports what
//!   happened ([`Output`]: typed [`Event`]s to log, the last good plan and
//!   the status [`Record`]s to save). The full path (all inputs planned)
//!   and the incremental one (a few ShapedDevices.csv rows re-planned in
//!   place, diffed against the known state) end in the same load step.
//!   An edit is read only when complete ([`ingest`]: after a close or a
//!   rename, or a quiet period; never while it changes or ends mid-record),
//!   and the removal guard ([`crate::guard`]) refuses one that would
//!   remove too many circuits until it is confirmed.
//! - [`Driver`]: the thin I/O around it (files, kernel, state directory,
//!   clock); the embedding program keeps the loop (signals, the file
//!   watcher, logging).
//!
//! A start and an edit, against the [`crate::Recording`] fake kernel:
//!
//! ```
//! use lqos_apply::daemon::{Driver, Event, FileEvent, InputFile, Kernel, LoadPath, Settings};
//! use lqos_apply::{Inputs, PlanOverrides, Recording, StateDir};
//!
//! # struct NoCounters;
//! # impl lqos_apply::daemon::Counters for NoCounters {
//! #     fn class_stats(&self, _: &str, _: &[u16]) -> lqos_apply::Result<Vec<lqos_apply::netlink::ClassStats>> { Ok(vec![]) }
//! # }
//! let dir = tempfile::tempdir().unwrap();
//! let g = lqos_model::generate(&lqos_model::GenParams { circuits: 30, ..Default::default() });
//! let csv = lqos_model::write_shaped_devices(&g.network);
//! std::fs::write(dir.path().join("network.json"), lqos_model::write_network_json(&g.network)).unwrap();
//! std::fs::write(dir.path().join("ShapedDevices.csv"), &csv).unwrap();
//! std::fs::write(dir.path().join("lqos.conf"), lqos_model::write_config(&g.config)).unwrap();
//!
//! let kernel = Recording::new().with_link("ens19", 4).with_link("ens20", 4);
//! let state = StateDir::open(dir.path().join("state")).unwrap();
//! let mut settings = Settings::default();
//! settings.overrides = PlanOverrides { sqm: Some("pfifo".parse().unwrap()), ..Default::default() };
//! let k = Kernel { live: &kernel, backend: &kernel, counters: &NoCounters };
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
//! ```

mod core;
mod describe;
mod driver;
mod event;
pub mod ingest;
mod known;
#[cfg(test)]
mod tests;

pub use self::core::{
    Output, Refused, Reloader, Request, Response, Sample, SampleTarget, Settings, Status,
};
pub use describe::{Level, LogLine, Value, REPAIRS_LOGGED};
pub use driver::{sample, Counters, Driver, Kernel};
pub use event::{Applied, Breakdown, Event, Fallback, LoadPath, Record, StateFile};
pub use ingest::{FileEvent, InputFile};
pub use known::{KnownKernel, OutOfStep};
