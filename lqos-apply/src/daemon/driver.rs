//! The thin I/O around the [`Reloader`]: reads the input files, the
//! kernel, the state directory and the clock, sends op streams, saves the
//! last good plan and the status file.

use std::sync::Arc;
use std::time::Instant;

use super::core::{Reloader, Request, Response, Settings};
use super::event::{Event, Record};
use super::health::Health;
use super::ingest::FileEvent;
use crate::backend::{load_deletes_first, Backend, Cancel};
use crate::engine::preflight;
use crate::error::{ApplyError, StateProblem};
use crate::input_file::InputFile;
use crate::inputs::Inputs;
use crate::journal::Journal;
use crate::live::{read_live, LiveSource};
use crate::session::{load_saved_allocation, save_last_good};
use crate::state::{NetnsState, StateFile};
use crate::stats::Snapshot;
use crate::watch::{unix_ms, Pending, WatchEvent, WatchStatus};

/// The kernel as the daemon sees it: where it reads trees, links and
/// counters, and how it loads.
#[derive(Clone, Copy)]
pub struct Kernel<'a> {
    /// Links, trees, qdisc kind probes, memory, counters (polls).
    pub live: &'a dyn LiveSource,
    /// The loader.
    pub backend: &'a dyn Backend,
}

/// Runs a [`Reloader`] against files, a kernel and a state directory.
/// Single-threaded: each call runs what is due to its end (a reload, a
/// verify, a poll) and hands every [`Event`] to the caller's sink. With
/// [`Settings::statistics`], each poll's statistics are at
/// [`Driver::statistics`] and the daemon's health at [`Driver::health`].
///
/// The embedding program keeps the loop: it calls [`Driver::start`] once,
/// [`Driver::file_event`] on each change of an input file,
/// [`Driver::reload_now`] on SIGHUP, and [`Driver::run`] when
/// [`Driver::deadline`] is reached.
pub struct Driver<'a> {
    core: Reloader,
    inputs: Inputs,
    state: &'a NetnsState,
    kernel: Kernel<'a>,
    status: WatchStatus,
    clock: Box<dyn FnMut() -> Instant + 'a>,
    pending: Vec<Event>,
    health: Health,
    cancel: Cancel,
    /// The buffer the next read of `ShapedDevices.csv` goes into (one the
    /// reloader handed back, see [`Reloader::take_spare`]).
    spare: Vec<u8>,
}

impl<'a> Driver<'a> {
    /// A driver of `inputs` on `kernel`, keeping its state (the last good
    /// plan, whose classids it keeps; the status file; the journal) in
    /// `state`.
    pub fn new(
        settings: Settings,
        inputs: Inputs,
        state: &'a NetnsState,
        kernel: Kernel<'a>,
    ) -> Driver<'a> {
        let mut pending = Vec::new();
        let previous = load_saved_allocation(state).unwrap_or_else(|error| {
            pending.push(Event::SavedPlanIgnored { error });
            None
        });
        Driver {
            core: Reloader::new(settings, inputs.clone(), previous),
            inputs,
            state,
            kernel,
            status: WatchStatus::new(state.netns(), false),
            clock: Box::new(Instant::now),
            pending,
            health: Health::default(),
            cancel: Cancel::new(),
            spare: Vec::new(),
        }
    }

    /// The same driver whose loads stop at their next safe point once
    /// `cancel` is set (SIGTERM): such a load ends as a failed one (the
    /// kernel read back next time, nothing saved as last good), with
    /// [`crate::error::Stopped::Cancelled`] in its error.
    pub fn with_cancel(mut self, cancel: Cancel) -> Driver<'a> {
        self.cancel = cancel;
        self
    }

    /// The same driver reading time from `clock` (tests).
    pub fn with_clock(mut self, clock: impl FnMut() -> Instant + 'a) -> Driver<'a> {
        self.clock = Box::new(clock);
        self
    }

    /// The reloader.
    pub fn core(&self) -> &Reloader {
        &self.core
    }

    /// The status as last saved.
    pub fn status(&self) -> &WatchStatus {
        &self.status
    }

    /// The statistics of the latest poll ([`Settings::statistics`]): a
    /// snapshot that stays as it is while the daemon goes on (a reader on
    /// another thread renders it without holding up a reload).
    pub fn statistics(&self) -> Option<Arc<Snapshot>> {
        self.core.statistics().cloned()
    }

    /// The daemon's health, from the events reported so far.
    pub fn health(&self) -> &Health {
        &self.health
    }

    /// Applies once: reads everything and the kernel back, loads.
    pub fn start(&mut self, sink: &mut dyn FnMut(Event)) {
        let now = (self.clock)();
        self.core.start(now);
        self.run(sink);
    }

    /// Applies now, reading the kernel back (SIGHUP).
    pub fn reload_now(&mut self, sink: &mut dyn FnMut(Event)) {
        let now = (self.clock)();
        self.core.reload_now(now);
        self.run(sink);
    }

    /// Something happened to an input file (the edit is read once
    /// complete, at [`Driver::deadline`]).
    pub fn file_event(&mut self, file: InputFile, e: FileEvent) {
        let now = (self.clock)();
        self.core.file_event(file, e, now);
    }

    /// An operator confirmed the refused inputs with sha256 `sha`
    /// ([`crate::watch::Confirmation`]): applied once, now.
    pub fn confirm(&mut self, sha: &str, sink: &mut dyn FnMut(Event)) {
        let now = (self.clock)();
        self.core.confirm(sha, now);
        self.run(sink);
    }

    /// When [`Driver::run`] has something to do next.
    pub fn deadline(&self) -> Option<Instant> {
        self.core.poll_timeout()
    }

    /// Runs everything that is due now, each to its end.
    pub fn run(&mut self, sink: &mut dyn FnMut(Event)) {
        for e in std::mem::take(&mut self.pending) {
            self.report(e, sink);
        }
        self.drain(sink);
        let mut reloaded = false;
        loop {
            let now = (self.clock)();
            if !self.core.handle_timeout(now) {
                break;
            }
            loop {
                self.drain(sink);
                let Some(req) = self.core.next_request() else {
                    break;
                };
                reloaded |= matches!(req, Request::ReadInputs | Request::Send(_));
                let resp = execute(
                    &self.inputs,
                    self.kernel,
                    &self.cancel,
                    req,
                    &mut self.spare,
                );
                let now = (self.clock)();
                self.core.handle(resp, now);
                if let Some(b) = self.core.take_spare() {
                    self.spare = b;
                }
            }
            self.drain(sink);
        }
        if reloaded {
            // A reload's plans, streams and messages are freed by now; without
            // this glibc keeps their pages and the daemon's RSS stays at the
            // largest reload's high-water mark.
            crate::alloc::release_free_heap();
        }
    }

    /// Records that the daemon stopped (status file).
    pub fn stop(&mut self, sink: &mut dyn FnMut(Event)) {
        self.status.stopped_ms = Some(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|x| x.as_millis() as u64)
                .unwrap_or(0),
        );
        self.save_status(sink);
    }

    fn drain(&mut self, sink: &mut dyn FnMut(Event)) {
        while let Some(o) = self.core.poll_output() {
            match o {
                super::Output::Event(e) => self.report(e, sink),
                super::Output::SaveLastGood => self.save_last_good(sink),
                super::Output::Record(r) => self.record(r, sink),
                super::Output::Pending(p) => {
                    self.status.pending = p.map(|r| Pending {
                        sha256: r.sha256,
                        refusal: r.refusal,
                        at_ms: unix_ms(std::time::SystemTime::now()),
                    });
                    self.save_status(sink);
                }
                super::Output::Journal => self.journal(sink),
            }
        }
    }

    /// Hands `e` to the sink, after the health numbers took it.
    fn report(&mut self, e: Event, sink: &mut dyn FnMut(Event)) {
        self.health
            .event(&e, unix_ms(std::time::SystemTime::now()) as f64 / 1e3);
        sink(e);
    }

    fn save_last_good(&mut self, sink: &mut dyn FnMut(Event)) {
        let Some(plan) = self.core.plan() else { return };
        let t = (self.clock)();
        // The compact record (allocation and inputs, re-planned on read:
        // a fifth of the bytes of the ops at 100,000 circuits); the ops
        // where the inputs cannot be recorded.
        let saved = match save_last_good(self.state, plan, self.core.network()) {
            Err(ApplyError::State {
                reason: StateProblem::Unrecordable(_),
                ..
            }) => save_last_good(self.state, plan, None),
            r => r,
        };
        match saved {
            Ok(_) => {
                let took = (self.clock)().saturating_duration_since(t);
                sink(Event::LastGoodSaved { took });
            }
            Err(error) => sink(Event::SaveFailed {
                what: StateFile::LastPlan,
                error,
            }),
        }
    }

    fn journal(&mut self, sink: &mut dyn FnMut(Event)) {
        let Some(set) = self.core.applied() else {
            return;
        };
        let circuits = self.core.status().circuits;
        let trigger = self.status.last.as_ref().map(|e| e.trigger);
        let source = trigger.map_or("watch".to_string(), |t| format!("watch {t}"));
        let settings = self.core.settings();
        let r = Journal::open(self.state)
            .and_then(|j| j.push(set, &settings.overrides, circuits, &source));
        if let Err(error) = r {
            sink(Event::SaveFailed {
                what: StateFile::Journal,
                error,
            });
        }
    }

    fn record(&mut self, r: Record, sink: &mut dyn FnMut(Event)) {
        let mut ev = WatchEvent::now(r.trigger, r.outcome, r.took);
        (ev.added, ev.changed, ev.removed) =
            (r.summary.added, r.summary.changed, r.summary.removed);
        ev.error = r.error;
        self.status.record(ev);
        self.save_status(sink);
    }

    fn save_status(&mut self, sink: &mut dyn FnMut(Event)) {
        let s = self.core.status();
        self.status.lazy_leaves = s.lazy_leaves;
        self.status.circuits = s.circuits;
        self.status.active_leaves = s.active_leaves;
        if let Err(error) = self.status.save(self.state) {
            sink(Event::SaveFailed {
                what: StateFile::WatchStatus,
                error,
            });
        }
    }
}

/// Does what `req` asks.
/// `spare`: the buffer a read of `ShapedDevices.csv` goes into.
fn execute(
    inputs: &Inputs,
    k: Kernel<'_>,
    cancel: &Cancel,
    req: Request<'_>,
    spare: &mut Vec<u8>,
) -> Response {
    match req {
        Request::ReadInputs => read_stable(inputs, std::mem::take(spare)),
        Request::Links(devs) => Response::Links(
            devs.iter()
                .map(|d| {
                    k.live.link(d)?.ok_or_else(|| ApplyError::NoInterface {
                        dev: d.clone(),
                        netns: k.live.netns().map(str::to_string),
                        config_key: None,
                    })
                })
                .collect(),
        ),
        Request::Preflight(plan) => Response::Preflight(preflight(plan, k.live).map(drop)),
        Request::ReadTrees(devs) => {
            let devs: Vec<&str> = devs.iter().map(String::as_str).collect();
            Response::Trees(read_live(k.live, &devs))
        }
        Request::MemInfo => Response::MemInfo(k.live.meminfo()),
        Request::Send(streams) => Response::Sent(load_deletes_first(k.backend, streams, cancel)),
        Request::Poll(req) => Response::Polled(k.live.poll(req)),
        Request::Continue => Response::Continue,
    }
}

/// What identifies a file's content for the stability check.
fn stamp(p: &std::path::Path) -> Option<(u64, i64, i64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(p).ok()?;
    Some((m.len(), m.mtime(), m.mtime_nsec(), m.ino()))
}

/// Reads the inputs, `ShapedDevices.csv` into `buffer` (see
/// [`Inputs::read_reusing`]), and checks that no file changed while it
/// was read (size, mtime and inode the same before and after).
pub fn read_stable(inputs: &Inputs, buffer: Vec<u8>) -> Response {
    let paths: Vec<&std::path::Path> = [
        Some(inputs.network.as_path()),
        Some(inputs.devices.as_path()),
    ]
    .into_iter()
    .chain([inputs.config.as_deref()])
    .flatten()
    .collect();
    let before: Vec<_> = paths.iter().map(|p| stamp(p)).collect();
    let raw = inputs.read_reusing(buffer);
    for (p, b) in paths.iter().zip(before) {
        if stamp(p) != b {
            return Response::InputsChanging(p.to_path_buf());
        }
    }
    Response::Inputs(raw)
}
