//! The daemon against the [`Recording`] fake kernel: real files in a
//! temporary directory, a real state directory, a manual clock.

use crate::input_file::InputFile;
use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use lqos_model::{Network, Rate};
use lqos_tc::{Plan, TcOp};

use super::*;
use crate::backend::{Backend, IfaceOps, NoProgress, Recording, RootDelete};
use crate::error::ApplyError;
use crate::inputs::{plan_files, Inputs, PlanOverrides, QueueCount};
use crate::memory::MemInfo;
use crate::state::{NetnsState, StateFile};
use crate::watch::{Outcome, Trigger, WatchStatus};

/// Input files of a generated network in a temporary directory.
struct Files {
    dir: tempfile::TempDir,
    net: Network,
}

impl Files {
    fn new(circuits: usize) -> Files {
        let g = lqos_model::generate(&lqos_model::GenParams::with_circuits(circuits));
        let dir = tempfile::tempdir().unwrap();
        let f = Files {
            dir,
            net: g.network,
        };
        f.write(
            "network.json",
            &lqos_model::write::write_network_json(&f.net),
        );
        f.write_devices();
        f.write("lqos.conf", &lqos_model::write::write_config(&g.config));
        f
    }

    fn write(&self, name: &str, text: &str) {
        std::fs::write(self.dir.path().join(name), text).unwrap();
    }

    fn write_devices(&self) {
        self.write(
            "ShapedDevices.csv",
            &lqos_model::write::write_shaped_devices(&self.net),
        );
    }

    /// Circuit `i`'s download ceiling becomes its minimum + `plus` Mbps.
    fn set_download_max(&mut self, i: usize, plus: u64) {
        let mut cs = self.net.circuits().to_vec();
        cs[i].download_max = Rate::from_mbps(cs[i].download_min.mbps_floor() + plus);
        self.net.set_circuits(cs);
        self.write_devices();
    }

    fn inputs(&self) -> Inputs {
        Inputs::in_dir(self.dir.path())
    }

    /// What a full read and plan of the files gives, keeping `prev`'s
    /// classids.
    fn full_plan(&self, settings: &Settings, prev: &Plan) -> Plan {
        plan_files(
            &self.inputs(),
            &settings.overrides,
            QueueCount::Default(4),
            Some(&prev.allocation),
        )
        .unwrap()
        .plan
    }
}

fn settings(sqm: &str) -> Settings {
    Settings {
        overrides: PlanOverrides {
            sqm: Some(sqm.parse().unwrap()),
            ..Default::default()
        },
        verify_every: None,
        debounce: Duration::from_millis(20),
        ..Settings::default()
    }
}

fn kernel() -> Recording {
    Recording::new().with_link("ens19", 4).with_link("ens20", 4)
}

/// A manual clock.
#[derive(Clone)]
struct Clock(Rc<Cell<Instant>>);

impl Clock {
    fn new() -> Clock {
        Clock(Rc::new(Cell::new(Instant::now())))
    }
    fn now(&self) -> Instant {
        self.0.get()
    }
    fn advance(&self, d: Duration) {
        self.0.set(self.0.get() + d);
    }
}

/// Events of one call.
fn collect(f: impl FnOnce(&mut dyn FnMut(Event))) -> Vec<Event> {
    let mut out = Vec::new();
    f(&mut |e| out.push(e));
    out
}

fn applied(events: &[Event]) -> Option<&Applied> {
    events.iter().find_map(|e| match e {
        Event::Applied(a) => Some(a),
        _ => None,
    })
}

fn trees_are(kernel: &Recording, plan: &Plan) {
    for ip in &plan.interfaces {
        assert_eq!(kernel.tree(&ip.dev).unwrap(), ip.tree(), "{}", ip.dev);
    }
}

/// A driver over `files` and `kernel` with `clock`.
fn driver<'a>(
    settings: Settings,
    files: &Files,
    state: &'a NetnsState,
    k: Kernel<'a>,
    clock: &Clock,
) -> Driver<'a> {
    let c = clock.clone();
    Driver::new(settings, files.inputs(), state, k).with_clock(move || c.now())
}

#[test]
fn start_loads_everything_reads_back_and_records_it() {
    let files = Files::new(40);
    let kernel = kernel();
    let state = NetnsState::new(files.dir.path().join("st"), None);
    let k = Kernel {
        live: &kernel,
        backend: &kernel,
    };
    let clock = Clock::new();
    let mut d = driver(settings("pfifo"), &files, &state, k, &clock);
    let ev = collect(|s| d.start(s));
    assert!(
        matches!(ev[0], Event::Started { lazy_leaves: false }),
        "{ev:?}"
    );
    let a = applied(&ev).expect("applied");
    assert_eq!(a.trigger, Trigger::Start);
    assert!(
        matches!(a.path, LoadPath::Full { readback: true, .. }),
        "{a:?}"
    );
    let plan = d.core().plan().unwrap().clone();
    // Everything but the roots (`qdisc replace`) is added.
    assert_eq!(
        a.summary.added + a.summary.changed,
        2 * plan.interfaces[0].ops.len()
    );
    assert_eq!(a.summary.changed, 2);
    trees_are(&kernel, &plan);
    assert!(d.core().known().is_known());
    // The state files: the last good plan, the status.
    let saved = crate::session::load_saved_plan(&state).unwrap().unwrap();
    assert_eq!(saved.plan, plan);
    let st = WatchStatus::load(&state).unwrap().unwrap();
    assert_eq!(st.last.as_ref().unwrap().outcome, Outcome::Applied);
    assert_eq!(st.circuits, 40);
    assert_eq!(st.active_leaves, 80);
    // Nothing else is due.
    assert_eq!(d.deadline(), None);
}

#[test]
fn edits_take_the_incremental_path_or_the_full_one_and_equal_a_full_plan() {
    let mut files = Files::new(60);
    let kernel = kernel();
    let state = NetnsState::new(files.dir.path().join("st"), None);
    let k = Kernel {
        live: &kernel,
        backend: &kernel,
    };
    let clock = Clock::new();
    let s = settings("pfifo");
    let mut d = driver(s.clone(), &files, &state, k, &clock);
    collect(|s| d.start(s));
    let sent0 = kernel.sent().len();

    // One row: incremental, one class change, and what a full plan gives.
    files.set_download_max(7, 3);
    d.file_event(InputFile::Devices, FileEvent::Closed);
    let t_edit = clock.now();
    assert_eq!(d.deadline(), Some(t_edit + s.debounce));
    assert!(collect(|s| d.run(s)).is_empty(), "not before the debounce");
    clock.advance(s.debounce);
    let ev = collect(|s| d.run(s));
    let a = applied(&ev).expect("applied");
    let LoadPath::Incremental(b) = &a.path else {
        panic!("{a:?}");
    };
    assert_eq!((b.rows, b.circuits), (1, 1));
    assert_eq!(
        (a.summary.added, a.summary.changed, a.summary.removed),
        (0, 1, 0)
    );
    assert_eq!(kernel.sent().len(), sent0 + 1);
    let prev = d.core().plan().unwrap().clone();
    let full = files.full_plan(&s, &prev);
    assert_eq!(d.core().plan().unwrap(), &full);
    trees_are(&kernel, &full);
    // The last good state is the compact record (inputs and allocation, no
    // ops) of the edited network, and re-plans to the running plan.
    let text = String::from_utf8(state.read(StateFile::LastPlan).unwrap().unwrap()).unwrap();
    assert!(
        text.contains("\"inputs\":") && !text.contains("\"interfaces\":["),
        "{}",
        &text[..text.len().min(400)]
    );
    let saved = crate::session::load_saved_plan(&state).unwrap().unwrap();
    assert_eq!(saved.plan, full);

    // The same bytes again: nothing to do.
    files.write_devices();
    d.file_event(InputFile::Devices, FileEvent::Closed);
    clock.advance(s.debounce);
    let ev = collect(|s| d.run(s));
    assert!(
        matches!(
            ev[..],
            [Event::Unchanged {
                trigger: Trigger::FileChange
            }]
        ),
        "{ev:?}"
    );

    // network.json changed: the full path, against the known state (no
    // read-back).
    let mut net_text = std::fs::read_to_string(files.dir.path().join("network.json")).unwrap();
    net_text.push('\n');
    files.write("network.json", &net_text);
    files.set_download_max(9, 5);
    d.file_event(InputFile::Devices, FileEvent::Closed);
    clock.advance(s.debounce);
    let ev = collect(|s| d.run(s));
    assert!(
        ev.iter().any(|e| matches!(
            e,
            Event::PlannedInFull {
                reason: Fallback::OtherFileChanged
            }
        )),
        "{ev:?}"
    );
    let a = applied(&ev).unwrap();
    assert!(
        matches!(
            a.path,
            LoadPath::Full {
                readback: false,
                ..
            }
        ),
        "{a:?}"
    );
    assert_eq!(a.summary.changed, 1);
    let full = files.full_plan(&s, &prev);
    trees_are(&kernel, &full);

    // And incremental again after a full one (the index was replaced).
    files.set_download_max(11, 2);
    d.file_event(InputFile::Devices, FileEvent::Closed);
    clock.advance(s.debounce);
    let ev = collect(|s| d.run(s));
    assert!(matches!(
        applied(&ev).unwrap().path,
        LoadPath::Incremental(_)
    ));
    trees_are(&kernel, &files.full_plan(&s, &prev));
}

#[test]
fn invalid_inputs_are_rejected_with_the_last_good_plan_kept() {
    let mut files = Files::new(30);
    let kernel = kernel();
    let state = NetnsState::new(files.dir.path().join("st"), None);
    let k = Kernel {
        live: &kernel,
        backend: &kernel,
    };
    let clock = Clock::new();
    let s = settings("pfifo");
    let mut d = driver(s.clone(), &files, &state, k, &clock);
    collect(|s| d.start(s));
    let plan0 = d.core().plan().unwrap().clone();
    let sent0 = kernel.sent().len();

    let good = std::fs::read_to_string(files.dir.path().join("ShapedDevices.csv")).unwrap();
    let mut lines: Vec<&str> = good.lines().collect();
    let broken_row = lines[3].replacen(',', ",,", 1);
    lines[3] = &broken_row;
    files.write("ShapedDevices.csv", &(lines.join("\n") + "\n"));
    d.file_event(InputFile::Devices, FileEvent::Closed);
    clock.advance(s.debounce);
    let ev = collect(|s| d.run(s));
    let problem = ev
        .iter()
        .find_map(|e| match e {
            Event::InvalidInput(p) => Some(p),
            _ => None,
        })
        .expect("the problem");
    assert_eq!(problem.line, Some(4), "{problem}");
    assert!(ev.iter().any(
        |e| matches!(e, Event::Rejected { trigger: Trigger::FileChange, errors } if *errors >= 1)
    ));
    assert!(applied(&ev).is_none());
    assert_eq!(kernel.sent().len(), sent0, "nothing sent");
    assert_eq!(d.core().plan().unwrap(), &plan0);
    trees_are(&kernel, &plan0);
    let st = WatchStatus::load(&state).unwrap().unwrap();
    assert_eq!(st.last.unwrap().outcome, Outcome::Rejected);
    // Not retried by timer.
    assert_eq!(d.deadline(), None);

    // A valid file again: applied, still incrementally (the kernel holds
    // the last good state).
    files.set_download_max(2, 4);
    d.file_event(InputFile::Devices, FileEvent::Closed);
    clock.advance(s.debounce);
    let ev = collect(|s| d.run(s));
    assert!(matches!(
        applied(&ev).unwrap().path,
        LoadPath::Incremental(_)
    ));
    trees_are(&kernel, &files.full_plan(&s, &plan0));
}

#[test]
fn a_kernel_failure_is_retried_reading_back_and_converges() {
    let mut files = Files::new(30);
    let kernel = kernel();
    let state = NetnsState::new(files.dir.path().join("st"), None);
    let k = Kernel {
        live: &kernel,
        backend: &kernel,
    };
    let clock = Clock::new();
    let s = settings("pfifo");
    let mut d = driver(s.clone(), &files, &state, k, &clock);
    collect(|s| d.start(s));
    let plan0 = d.core().plan().unwrap().clone();

    // The next op to ens19 fails.
    kernel.fail_at("ens19", kernel.sent_for("ens19").len(), "Error: boom.");
    files.set_download_max(4, 6);
    d.file_event(InputFile::Devices, FileEvent::Closed);
    clock.advance(s.debounce);
    let ev = collect(|s| d.run(s));
    let err = ev
        .iter()
        .find_map(|e| match e {
            Event::LoadFailed { error, .. } => Some(error),
            _ => None,
        })
        .expect("the failure");
    assert!(
        matches!(err, ApplyError::OpFailed { dev, .. } if dev == "ens19"),
        "{err}"
    );
    assert!(!d.core().known().is_known());
    let st = WatchStatus::load(&state).unwrap().unwrap();
    assert_eq!(st.last.as_ref().unwrap().outcome, Outcome::Failed);
    assert!(st.last.unwrap().error.unwrap().contains("boom"));
    // The saved plan is still the last good one.
    assert_eq!(
        crate::session::load_saved_plan(&state)
            .unwrap()
            .unwrap()
            .plan,
        plan0
    );

    // The retry, after the retry time, reads back and converges.
    let retry_at = d.deadline().expect("a retry");
    assert_eq!(retry_at, clock.now() + s.retry);
    clock.advance(s.retry);
    let ev = collect(|s| d.run(s));
    let a = applied(&ev).expect("applied");
    assert_eq!(a.trigger, Trigger::Retry);
    assert!(matches!(a.path, LoadPath::Full { readback: true, .. }));
    trees_are(&kernel, &files.full_plan(&s, &plan0));
    assert!(d.core().known().is_known());
    assert_eq!(d.deadline(), None);
}

#[test]
fn verify_repairs_drift_behind_the_daemons_back() {
    let files = Files::new(30);
    let kernel = kernel();
    let state = NetnsState::new(files.dir.path().join("st"), None);
    let k = Kernel {
        live: &kernel,
        backend: &kernel,
    };
    let clock = Clock::new();
    let mut s = settings("pfifo");
    s.verify_every = Some(Duration::from_secs(600));
    let mut d = driver(s.clone(), &files, &state, k, &clock);
    collect(|s| d.start(s));
    let plan = d.core().plan().unwrap().clone();
    assert_eq!(d.deadline(), Some(clock.now() + Duration::from_secs(600)));

    // Someone changes a circuit class.
    let class = plan.interfaces[0]
        .ops
        .iter()
        .rev()
        .find_map(|op| match op {
            TcOp::AddClass(c) => Some(c.clone()),
            _ => None,
        })
        .unwrap();
    let mut drifted = class.clone();
    drifted.htb.ceil = Rate::from_mbps(1);
    drifted.htb.rate = Rate::from_mbps(1);
    let r = kernel.load(
        &[IfaceOps::new("ens19", vec![TcOp::ChangeClass(drifted)])],
        RootDelete::None,
        &NoProgress,
    );
    assert!(r.is_ok());

    clock.advance(Duration::from_secs(600));
    let ev = collect(|s| d.run(s));
    let a = applied(&ev).expect("applied");
    assert_eq!((a.trigger, a.summary.changed), (Trigger::Verify, 1));
    let ops = ev
        .iter()
        .find_map(|e| match e {
            Event::Repaired { ops } => Some(ops),
            _ => None,
        })
        .expect("repaired");
    assert_eq!(ops.len(), 1);
    assert!(ops[0].starts_with("class change dev ens19"), "{ops:?}");
    trees_are(&kernel, &plan);
    // The next verify finds nothing.
    clock.advance(Duration::from_secs(600));
    let ev = collect(|s| d.run(s));
    assert!(ev.iter().any(|e| matches!(e, Event::InSync)), "{ev:?}");
}

/// With statistics on, the daemon polls every `poll` (its one poll timer)
/// and keeps each poll's statistics as a snapshot that does not change
/// under its reader; a reload keeps the circuits' counters; the health
/// numbers count the polls and reloads.
#[test]
fn statistics_are_polled_on_the_poll_timer_and_kept_as_snapshots() {
    let mut files = Files::new(20);
    let kernel = kernel();
    let state = NetnsState::new(files.dir.path().join("st"), None);
    let k = Kernel {
        live: &kernel,
        backend: &kernel,
    };
    let clock = Clock::new();
    let mut s = settings("pfifo");
    s.statistics = true;
    let mut d = driver(s.clone(), &files, &state, k, &clock);
    let ev = collect(|s| d.start(s));
    // The baseline poll ran with the start; the next is the only timer.
    assert!(
        ev.iter().any(|e| matches!(
            e,
            Event::CountersRead {
                interfaces: 2,
                failed: 0,
                ..
            }
        )),
        "{ev:?}"
    );
    assert_eq!(d.deadline(), Some(clock.now() + s.poll));
    let first = d.statistics().expect("polled at start");
    assert_eq!(first.stats.circuits.len(), 20);
    assert_eq!(first.stats.interval_secs, None);

    // 625,000 bytes through circuit 0's download class in 5 s: 1 Mbit/s.
    let plan = d.core().plan().unwrap().clone();
    let c = &plan.allocation.circuits[0];
    let class = lqos_tc::TcHandle::new(
        plan.major(lqos_tc::allocation::Direction::Download, c.queue),
        c.minor,
    );
    let down = plan
        .interfaces
        .iter()
        .find(|ip| ip.direction == lqos_tc::allocation::Direction::Download)
        .unwrap();
    kernel.count(&down.dev, class, 625_000);
    clock.advance(s.poll);
    collect(|s| d.run(s));
    let second = d.statistics().unwrap();
    assert_eq!(second.stats.circuits[0].download.bytes, 625_000);
    assert_eq!(second.stats.circuits[0].download.rate_bps, 1e6);
    assert_eq!(second.stats.circuits[0].upload.bytes, 0);
    assert_eq!(
        first.stats.circuits[0].download.bytes, 0,
        "a snapshot stays"
    );

    // An edit reloads; the next poll maps the new plan and keeps counting.
    files.set_download_max(5, 3);
    d.file_event(InputFile::Devices, FileEvent::Closed);
    clock.advance(s.debounce);
    assert!(applied(&collect(|s| d.run(s))).is_some());
    kernel.count(&down.dev, class, 625_000);
    clock.advance(s.poll);
    collect(|s| d.run(s));
    let third = d.statistics().unwrap();
    assert_eq!(third.stats.circuits[0].download.bytes, 1_250_000);
    let ceil = |snap: &crate::stats::Snapshot| snap.stats.circuits[5].download.ceil_bps;
    assert_ne!(ceil(&third), ceil(&second), "the new plan's ceil");

    let h = d.health();
    assert_eq!((h.polls, h.poll_errors), (3, 0));
    assert!(h.last_ok);
    let reloads: Vec<_> = h.reloads.keys().map(|(t, o)| format!("{t} {o}")).collect();
    assert_eq!(reloads, ["file-change applied", "start applied"]);
}

#[test]
fn lazy_leaves_follow_the_counters() {
    let files = Files::new(20);
    let kernel = kernel();
    let state = NetnsState::new(files.dir.path().join("st"), None);
    let k = Kernel {
        live: &kernel,
        backend: &kernel,
    };
    let clock = Clock::new();
    let mut s = settings("pfifo");
    s.lazy_leaves = true;
    s.poll = Duration::from_secs(1);
    s.idle = Duration::from_secs(3);
    let mut d = driver(s.clone(), &files, &state, k, &clock);
    let ev = collect(|s| d.start(s));
    assert!(matches!(ev[0], Event::Started { lazy_leaves: true }));
    let plan = d.core().plan().unwrap().clone();
    let ip = &plan.interfaces[0];
    let dev = ip.dev.as_str();
    let leaves: Vec<lqos_tc::ops::Qdisc> = lqos_tc::rules::circuit_leaves(ip).cloned().collect();
    let tree = kernel.tree(dev).unwrap();
    assert!(leaves.iter().all(|q| !tree.qdiscs.contains_key(&q.handle)));
    assert!(leaves.iter().all(|q| tree.classes.contains_key(&q.parent)));
    // The baseline poll ran with the start.
    assert_eq!(d.deadline(), Some(clock.now() + s.poll));

    // Traffic through one circuit: its leaf at the next poll.
    kernel.count(dev, leaves[3].parent, 1000);
    clock.advance(s.poll);
    let ev = collect(|s| d.run(s));
    assert!(
        ev.iter().any(|e| matches!(
            e,
            Event::Leaves {
                added: 1,
                removed: 0,
                active: 1,
                ..
            }
        )),
        "{ev:?}"
    );
    let tree = kernel.tree(dev).unwrap();
    assert_eq!(tree.qdiscs.get(&leaves[3].handle), Some(&leaves[3]));
    assert_eq!(d.status().active_leaves, 1);

    // Still moving at the next poll: kept.
    kernel.count(dev, leaves[3].parent, 1000);
    clock.advance(s.poll);
    let ev = collect(|s| d.run(s));
    assert!(
        ev.iter()
            .any(|e| matches!(e, Event::LeavesUnchanged { active: 1 })),
        "{ev:?}"
    );

    // Idle for the idle time (3 s since it last moved): removed.
    for _ in 0..2 {
        clock.advance(s.poll);
        let ev = collect(|s| d.run(s));
        assert!(
            matches!(
                ev[..],
                [
                    Event::CountersRead { failed: 0, .. },
                    Event::LeavesUnchanged { active: 1 }
                ]
            ),
            "{ev:?}"
        );
    }
    clock.advance(s.poll);
    let ev = collect(|s| d.run(s));
    assert!(
        ev.iter().any(|e| matches!(
            e,
            Event::Leaves {
                added: 0,
                removed: 1,
                active: 0,
                ..
            }
        )),
        "{ev:?}"
    );
    assert!(!kernel
        .tree(dev)
        .unwrap()
        .qdiscs
        .contains_key(&leaves[3].handle));
    // The model followed: an edit diffs against it without a read-back.
    assert!(d.core().known().is_known());
    assert_eq!(d.core().known().tree(dev), kernel.tree(dev).as_ref());
}

#[test]
fn a_load_that_does_not_fit_in_memory_is_refused_before_any_op() {
    let files = Files::new(200);
    let kernel = kernel().with_meminfo(MemInfo {
        total: 4 << 30,
        available: 300 << 20,
    });
    let state = NetnsState::new(files.dir.path().join("st"), None);
    let k = Kernel {
        live: &kernel,
        backend: &kernel,
    };
    let clock = Clock::new();
    let mut d = driver(settings("cake diffserv4"), &files, &state, k, &clock);
    let ev = collect(|s| d.start(s));
    let (summary, error) = ev
        .iter()
        .find_map(|e| match e {
            Event::LoadFailed { summary, error, .. } => Some((summary, error)),
            _ => None,
        })
        .expect("refused");
    assert!(
        matches!(error, ApplyError::NotEnoughMemory { .. }),
        "{error}"
    );
    assert!(summary.added > 400, "{summary:?}");
    assert!(kernel.sent().is_empty(), "nothing sent");
    assert!(d.deadline().is_some(), "retried");
}

/// A fixture of the tests below: files, kernel, state, a started driver.
macro_rules! started {
    ($files:ident, $kernel:ident, $state:ident, $d:ident, $clock:ident, $s:ident) => {
        let $kernel = kernel();
        let $state = NetnsState::new($files.dir.path().join("st"), None);
        let k = Kernel {
            live: &$kernel,
            backend: &$kernel,
        };
        let $clock = Clock::new();
        let $s = settings("pfifo");
        let mut $d = driver($s.clone(), &$files, &$state, k, &$clock);
        collect(|s| $d.start(s));
    };
}

#[test]
fn a_cut_short_file_is_refused_until_confirmed_and_then_applied_once() {
    let mut files = Files::new(60);
    started!(files, kernel, state, d, clock, s);
    let plan0 = d.core().plan().unwrap().clone();
    let sent0 = kernel.sent().len();
    // The export lost its last 20 circuits.
    let full = files.net.clone();
    files.net.set_circuits(full.circuits()[..40].to_vec());
    files.write_devices();
    d.file_event(InputFile::Devices, FileEvent::Renamed);
    clock.advance(s.debounce);
    let ev = collect(|s| d.run(s));
    let (refusal, sha) = ev
        .iter()
        .find_map(|e| match e {
            Event::RemovalsRefused {
                refusal, sha256, ..
            } => Some((refusal.clone(), sha256.clone())),
            _ => None,
        })
        .expect("refused");
    let text = refusal.to_string();
    assert!(
        text.starts_with("would remove 20 of 60 circuits (33%)"),
        "{text}"
    );
    assert!(
        text.contains(&format!("{:?}", plan0.allocation.circuits[40].id)),
        "{text}"
    );
    assert!(applied(&ev).is_none());
    assert_eq!(kernel.sent().len(), sent0, "nothing sent");
    trees_are(&kernel, &plan0);
    let st = WatchStatus::load(&state).unwrap().unwrap();
    assert_eq!(st.last.as_ref().unwrap().outcome, Outcome::Refused);
    assert_eq!(st.pending.as_ref().unwrap().sha256, sha);
    assert_eq!(d.deadline(), None, "not retried");

    // A confirmation naming other inputs does nothing.
    let ev = collect(|s| d.confirm("00", s));
    assert!(
        matches!(ev[..], [Event::ConfirmIgnored { pending: true, .. }]),
        "{ev:?}"
    );
    // The confirmation: applied once.
    let ev = collect(|s| d.confirm(&sha, s));
    let a = applied(&ev).expect("applied");
    assert_eq!(a.trigger, Trigger::Confirm);
    assert!(a.summary.removed >= 40, "{a:?}");
    assert_eq!(d.core().plan().unwrap().allocation.circuits.len(), 40);
    trees_are(&kernel, d.core().plan().unwrap());
    let st = WatchStatus::load(&state).unwrap().unwrap();
    assert_eq!(st.pending, None);
    // The journal: both input sets, newest first.
    let j = crate::journal::Journal::open(&state).unwrap();
    let e = j.entries().unwrap();
    assert_eq!((e.len(), e[0].circuits, e[1].circuits), (2, 40, 60));
    assert_eq!(e[0].sha256, sha);
    // The same cut again after the full file: refused again (once).
    files.net = full;
    files.write_devices();
    d.file_event(InputFile::Devices, FileEvent::Renamed);
    clock.advance(s.debounce);
    collect(|s| d.run(s));
    assert_eq!(d.core().plan().unwrap().allocation.circuits.len(), 60);
}

#[test]
fn a_file_ending_mid_record_or_empty_waits_and_an_empty_one_is_refused() {
    let files = Files::new(30);
    started!(files, kernel, state, d, clock, s);
    let plan0 = d.core().plan().unwrap().clone();
    let csv = std::fs::read(files.dir.path().join("ShapedDevices.csv")).unwrap();
    let sent0 = kernel.sent().len();
    // Closed in the middle of a record: waited for.
    let path = files.dir.path().join("ShapedDevices.csv");
    std::fs::write(&path, &csv[..csv.len() / 2 + 7]).unwrap();
    d.file_event(InputFile::Devices, FileEvent::Closed);
    clock.advance(s.debounce);
    let ev = collect(|s| d.run(s));
    assert!(
        matches!(
            ev[..],
            [Event::PartialWrite {
                file: InputFile::Devices,
                ..
            }]
        ),
        "{ev:?}"
    );
    assert_eq!(d.deadline(), Some(clock.now() + s.quiet));
    // The rest comes with another close: applied (nothing changed).
    std::fs::write(&path, &csv).unwrap();
    d.file_event(InputFile::Devices, FileEvent::Written);
    d.file_event(InputFile::Devices, FileEvent::Closed);
    clock.advance(s.debounce);
    let ev = collect(|s| d.run(s));
    assert!(matches!(ev[..], [Event::Unchanged { .. }]), "{ev:?}");
    assert_eq!(kernel.sent().len(), sent0);

    // Truncated and left empty: after the quiet period, refused.
    std::fs::write(&path, "").unwrap();
    d.file_event(InputFile::Devices, FileEvent::Written);
    clock.advance(s.quiet);
    let ev = collect(|s| d.run(s));
    assert!(
        ev.iter().any(|e| matches!(
            e,
            Event::RemovalsRefused {
                refusal: crate::guard::Refusal::Empty { of: 30, .. },
                ..
            }
        )) || ev.iter().any(|e| matches!(e, Event::Rejected { .. })),
        "{ev:?}"
    );
    assert_eq!(kernel.sent().len(), sent0);
    trees_are(&kernel, &plan0);
}

/// Regression: inputs fixed after a rejected (or refused) reload were
/// found "unchanged" against the applied set and nothing was recorded, so
/// the status (and `lqos status`'s exit code, and the metrics' last
/// success) kept saying the daemon failed until a SIGHUP. The status now
/// follows what is live: the fixed files are the live inputs again.
#[test]
fn fixed_input_clears_failed_status() {
    let files = Files::new(60);
    started!(files, kernel, state, d, clock, s);
    let plan0 = d.core().plan().unwrap().clone();
    let sent0 = kernel.sent().len();
    let path = files.dir.path().join("ShapedDevices.csv");
    let good = std::fs::read_to_string(&path).unwrap();
    let mut edit = |text: &str| {
        std::fs::write(&path, text).unwrap();
        d.file_event(InputFile::Devices, FileEvent::Closed);
        clock.advance(s.debounce);
        collect(|s| d.run(s))
    };
    let status = || WatchStatus::load(&state).unwrap().unwrap();

    // A typo in a row: rejected.
    let mut lines: Vec<&str> = good.lines().collect();
    let typo = lines[3].replacen(',', ",,", 1);
    lines[3] = &typo;
    let ev = edit(&(lines.join("\n") + "\n"));
    assert!(ev.iter().any(|e| matches!(e, Event::Rejected { .. })));
    assert_eq!(status().last.unwrap().outcome, Outcome::Rejected);

    // The file restored: live again, nothing sent, the status a success.
    let ev = edit(&good);
    let a = applied(&ev).expect("the inputs are live again");
    assert_eq!(a.path, LoadPath::Unchanged);
    assert_eq!(a.summary, lqos_tc::DiffSummary::default());
    assert_eq!(kernel.sent().len(), sent0, "nothing sent");
    let st = status();
    assert_eq!(st.last.as_ref().unwrap().outcome, Outcome::Applied);
    assert_eq!(st.last.unwrap().trigger, Trigger::FileChange);
    assert_eq!(
        st.last_error.unwrap().outcome,
        Outcome::Rejected,
        "the history stays"
    );
    // Once that is reported, the same bytes again are just unchanged.
    let ev = edit(&good);
    assert!(matches!(ev[..], [Event::Unchanged { .. }]), "{ev:?}");

    // A file cut short: refused, pending; restored: nothing pending.
    let cut: String = good.lines().take(30).map(|l| format!("{l}\n")).collect();
    let ev = edit(&cut);
    assert!(ev
        .iter()
        .any(|e| matches!(e, Event::RemovalsRefused { .. })));
    assert!(status().pending.is_some());
    let ev = edit(&good);
    assert_eq!(applied(&ev).unwrap().path, LoadPath::Unchanged);
    let st = status();
    assert_eq!(st.pending, None);
    assert_eq!(st.last.unwrap().outcome, Outcome::Applied);
    assert!(d.core().refused().is_none());
    assert_eq!(d.deadline(), None);
    assert_eq!(kernel.sent().len(), sent0);
    trees_are(&kernel, &plan0);
}

/// The nodes the planner squashes are logged when they change (new, other
/// numbers, or no longer squashed), not on every reload.
#[test]
fn squashed_guarantees_are_logged_once_per_change() {
    let mut files = Files::new(60);
    started!(files, kernel, state, d, clock, s);
    let squashed = |ev: &[Event]| {
        ev.iter()
            .filter_map(|e| match e {
                Event::Squashed {
                    now,
                    cleared,
                    total,
                } => Some((now.clone(), cleared.clone(), *total)),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    // `lqos gen`'s network guarantees every minimum: nothing to say.
    assert!(d.core().plan().unwrap().squashed.is_empty());
    let ap = files.net.circuits()[0].parent.clone().unwrap();
    let mut edit = |files: &mut Files, i: usize, min: u64| {
        let mut cs = files.net.circuits().to_vec();
        cs[i].download_min = Rate::from_mbps(min);
        cs[i].download_max = Rate::from_mbps(min.max(cs[i].download_max.mbps_floor()));
        files.net.set_circuits(cs);
        files.write_devices();
        d.file_event(InputFile::Devices, FileEvent::Closed);
        clock.advance(s.debounce);
        collect(|s| d.run(s))
    };
    // One circuit asks for more than its AP guarantees: the AP is squashed.
    let ev = edit(&mut files, 0, 2500);
    assert!(applied(&ev).is_some(), "{ev:?}");
    let sq = squashed(&ev);
    assert_eq!(sq.len(), 1, "{ev:?}");
    let (now, cleared, total) = &sq[0];
    assert_eq!((now.len(), cleared.len(), *total), (1, 0, 1));
    assert_eq!(now[0].node, ap.as_str());
    assert!(now[0].asked_down > now[0].fits_down);
    let lines = ev
        .iter()
        .find(|e| matches!(e, Event::Squashed { .. }))
        .unwrap()
        .describe();
    assert_eq!(lines.len(), 1);
    assert_eq!(
        lines[0].field("node"),
        Some(&describe::Value::Str(ap.to_string()))
    );
    // A reload that changes nothing squashed: not said again.
    let other = files
        .net
        .circuits()
        .iter()
        .position(|c| c.parent.as_ref() != Some(&ap))
        .unwrap();
    let ev = edit(&mut files, other, 1);
    assert!(applied(&ev).is_some() && squashed(&ev).is_empty(), "{ev:?}");
    // Its numbers change: said once more.
    let ev = edit(&mut files, 0, 2600);
    assert_eq!(squashed(&ev).len(), 1, "{ev:?}");
    // Back under what the AP guarantees: no longer squashed.
    let ev = edit(&mut files, 0, 1);
    let sq = squashed(&ev);
    assert_eq!(sq.len(), 1, "{ev:?}");
    assert_eq!(
        (sq[0].0.len(), sq[0].1.clone(), sq[0].2),
        (0, vec![ap.to_string()], 0)
    );
}
