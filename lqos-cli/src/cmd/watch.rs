//! `lqos watch`: the reload daemon.
//!
//! Runs in the foreground (systemd `Type=exec`), holds the state
//! directory's apply lock for its whole life (a concurrent `lqos apply` is
//! refused, naming the daemon's pid), applies once at start, then:
//!
//! - watches the directories of the three input files (integrations and
//!   editors replace files by rename, which a watch on the file itself
//!   would lose), waits for `--debounce` ms of quiet, re-plans and applies
//!   incrementally. While the kernel is known to hold exactly what the
//!   daemon last loaded, the diff is computed against that, without reading
//!   the kernel back; after any error, at SIGHUP and at every periodic
//!   verify it reads the kernel back instead.
//! - an edit of a few ShapedDevices.csv rows (nothing else changed) takes
//!   the incremental path: only those rows are re-read and checked
//!   ([`DevicesIndex`]), only their circuits re-planned in place
//!   ([`lqos_tc::replan_circuits`]) and diffed against the known kernel
//!   state ([`known_diff`]); the result is what the full path would load.
//!   Every other edit (and every edit with an error) takes the full path.
//! - inputs that fail validation are never applied: every problem is
//!   logged (file, line, circuit), the live tree and the last good plan
//!   stay, and the next change applies again.
//! - a kernel error is logged with the failing op and retried after
//!   `--retry` seconds (or at the next change); the daemon does not exit.
//! - SIGHUP applies now; SIGTERM/SIGINT exit 0 and leave the tree as is.
//! - every `--verify-every` minutes, verify and repair (the ops that
//!   repaired drift are logged).
//! - with lazy leaves, every `--poll` seconds one class dump per planned
//!   HTB qdisc gives circuits whose counters moved their leaf, and takes it from
//!   circuits idle for `--idle` seconds ([`lqos_apply::lazy`]).
//!
//! Every event is one log line with its numbers; the last one is also in
//! the status file `lqos status` prints.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::Context;
use lqos_apply::lazy::{self, LeafTracker};
use lqos_apply::memory::check_memory;
use lqos_apply::watch::{Outcome, Trigger, WatchEvent, WatchStatus};
use lqos_apply::{
    apply_plan, last_good_allocation, load_deletes_first, plan_change, plan_raw, preflight,
    read_live, ApplyError, ApplyOptions, Backend, IfaceOps, Inputs, LiveSource, LoadKind,
    NetlinkBackend, NetlinkLive, NoProgress, Parallelism, QueueCount, RawInputs, RootDelete,
    StateDir,
};
use lqos_model::{DevicesEdit, DevicesIndex, Network};
use lqos_tc::{known_diff, render_line, DiffSummary, Plan, PlanIndex, Replan, TcOp, TcTree};
use tracing::{debug, error, info, warn};

use super::apply::{state_path, TargetArgs, PROBE_CACHE_FILE};
use super::inputs::InputArgs;
use super::plan::PlanOptions;
use super::EXIT_OK;

/// `--log-format` values.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// One human-readable line per event.
    Text,
    /// One JSON object per line (for log shippers).
    Json,
}

/// Arguments of `lqos watch`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Input files (watched).
    #[command(flatten)]
    pub inputs: InputArgs,
    /// Planner options.
    #[command(flatten)]
    pub options: PlanOptions,
    /// Namespace and state directory.
    #[command(flatten)]
    pub target: TargetArgs,
    /// Give a circuit its leaf qdisc only while it carries traffic (also
    /// `[lqos] lazy_leaves = true` in lqos.conf, read at start).
    #[arg(long)]
    pub lazy_leaves: bool,
    /// With lazy leaves: seconds between two class-counter dumps.
    #[arg(long, value_name = "SECS", default_value_t = 5.0)]
    pub poll: f64,
    /// With lazy leaves: seconds without traffic before a leaf is removed.
    #[arg(long, value_name = "SECS", default_value_t = 300.0)]
    pub idle: f64,
    /// Minutes between two verify-and-repair runs (0: never).
    #[arg(long, value_name = "MIN", default_value_t = 10.0)]
    pub verify_every: f64,
    /// Milliseconds without further file events before applying.
    #[arg(long, value_name = "MS", default_value_t = 20)]
    pub debounce: u64,
    /// Always re-read and re-plan all input on an edit (no incremental
    /// path for edited ShapedDevices.csv rows).
    #[arg(long)]
    pub no_incremental: bool,
    /// Seconds before retrying an apply the kernel refused.
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    pub retry: f64,
    /// Load even when new leaf qdiscs are estimated not to fit in the
    /// kernel's memory (MemAvailable minus a margin). Without it such a
    /// load is refused (and retried), and a lazy-leaf poll gives only as
    /// many circuits their leaf as fit.
    #[arg(long)]
    pub skip_memory_check: bool,
    /// Log format (logs go to stderr; under systemd, to the journal).
    #[arg(long, value_enum, default_value = "text")]
    pub log_format: LogFormat,
}

/// What the event loop waits for.
enum Event {
    Fs(notify::Result<notify::Event>),
    Hup,
    Stop(i32),
}

fn secs(s: f64, what: &str) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(s).with_context(|| format!("{what} {s} is not a duration"))
}

fn init_logging(format: LogFormat) {
    let b = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_max_level(if std::env::var_os("LQOS_DEBUG").is_some() {
            tracing::Level::DEBUG
        } else {
            tracing::Level::INFO
        });
    match format {
        LogFormat::Text => b.with_ansi(false).init(),
        LogFormat::Json => b.json().flatten_event(true).init(),
    }
}

/// The daemon's state between events.
struct Daemon {
    inputs: Inputs,
    overrides: lqos_apply::PlanOverrides,
    netns: Option<String>,
    state: StateDir,
    live: NetlinkLive,
    backend: NetlinkBackend,
    /// The last plan loaded completely (all leaves, for stable handles).
    plan: Option<Plan>,
    /// What the kernel holds as far as the daemon knows (the lazy plan's
    /// trees plus leaf changes); `None` = unknown, read it back.
    model: Option<BTreeMap<String, TcTree>>,
    tracker: Option<LeafTracker>,
    status: WatchStatus,
    /// How long the last read + validate + plan of the inputs took.
    plan_time: Duration,
    /// `--skip-memory-check`.
    skip_memory_check: bool,
    /// The last good inputs, indexed for incremental edits: what `plan`
    /// was planned from (`None`: the next edit is read and planned in
    /// full).
    incr: Option<Incremental>,
    /// The inputs of a plan being loaded: `incr` once the load succeeds.
    incr_pending: Option<Incremental>,
    /// `--no-incremental`.
    no_incremental: bool,
}

/// What the incremental edit path keeps of the last good inputs: the
/// bytes of `network.json` and `lqos.conf` (an edit of either is planned
/// in full), the model read from them, `ShapedDevices.csv` indexed by
/// record, and where every class and leaf is in the plan.
struct Incremental {
    network_text: String,
    config_text: Option<String>,
    net: Network,
    index: DevicesIndex,
    plan_index: PlanIndex,
}

/// Why an incremental edit gave way to the full path (logged at debug).
struct NotIncremental(String);

/// The parts of an incremental edit's time.
#[derive(Default)]
struct Breakdown {
    /// Read the files, find and re-read the changed rows, check them.
    parse: Duration,
    /// Re-plan the changed circuits.
    plan: Duration,
    /// Diff their ops against the known kernel model.
    diff: Duration,
    /// Send them and wait for the kernel's ACKs.
    load: Duration,
    rows: usize,
    circuits: usize,
}

/// A failure of one apply step, already logged: [`Outcome::Rejected`]
/// (wait for the next change) or [`Outcome::Failed`] (retry).
struct Failed(Outcome);

/// When to retry after `r`: only kernel failures are retried by timer.
fn retry_after(r: Result<(), Failed>, retry: Duration) -> Option<Instant> {
    match r {
        Err(Failed(Outcome::Failed)) => Some(Instant::now() + retry),
        _ => None,
    }
}

impl Daemon {
    fn active_leaves(&self, plan: &Plan) -> usize {
        match &self.tracker {
            Some(t) => t.active().len(),
            None => plan
                .interfaces
                .iter()
                .map(|ip| lazy::circuit_leaves(ip).count())
                .sum(),
        }
    }

    fn save_status(&mut self, e: WatchEvent) {
        self.status.record(e);
        if let Err(e) = self.status.save(&self.state) {
            warn!(error = %e, "cannot write the status file");
        }
    }

    /// Reads the inputs and plans; invalid inputs are logged problem by
    /// problem and nothing else happens.
    fn plan_inputs(&mut self, trigger: Trigger, since: Instant) -> Result<Plan, Failed> {
        let prev = match &self.plan {
            Some(p) => Some(p.allocation.clone()),
            None => {
                last_good_allocation(self.state.path(), self.netns.as_deref()).unwrap_or_else(|e| {
                    warn!(error = %e, "ignoring the saved plan; classids may change");
                    None
                })
            }
        };
        let t = Instant::now();
        self.incr_pending = None;
        let r = self.inputs.read().and_then(|raw| {
            plan_raw(
                &self.inputs,
                &raw,
                &self.overrides,
                QueueCount::FromInterfaces(&self.live),
                prev.as_ref(),
            )
            .map(|p| (p, raw))
        });
        self.plan_time = t.elapsed();
        match r {
            Ok((planned, raw)) => {
                for w in planned.report.warnings() {
                    warn!(problem = %w, "input warning");
                }
                if !self.no_incremental {
                    let t = Instant::now();
                    // Taken up once this plan is loaded.
                    self.incr_pending =
                        Incremental::new(&self.inputs, raw, planned.network, &planned.plan);
                    debug!(
                        ms = format!("{:.1}", t.elapsed().as_secs_f64() * 1e3),
                        indexed = self.incr_pending.is_some(),
                        "inputs indexed for incremental edits"
                    );
                }
                Ok(planned.plan)
            }
            Err(ApplyError::InvalidInputs { report }) => {
                for p in report.errors() {
                    error!(
                        file = %p.file,
                        line = p.line,
                        circuit = p.circuit.as_deref(),
                        problem = %p,
                        "invalid input"
                    );
                }
                let mut ev = WatchEvent::now(trigger, Outcome::Rejected, since.elapsed());
                ev.error = Some(report.to_string());
                error!(
                    %trigger,
                    errors = report.error_count(),
                    "inputs rejected: nothing applied, the live tree and the last good plan stay"
                );
                self.save_status(ev);
                Err(Failed(Outcome::Rejected))
            }
            Err(e @ (ApplyError::Config { .. } | ApplyError::Planning { .. })) => {
                error!(%trigger, error = %e, "inputs rejected: nothing applied");
                let mut ev = WatchEvent::now(trigger, Outcome::Rejected, since.elapsed());
                ev.error = Some(e.to_string());
                self.save_status(ev);
                Err(Failed(Outcome::Rejected))
            }
            Err(e) => {
                error!(%trigger, error = %e, "cannot plan");
                let mut ev = WatchEvent::now(trigger, Outcome::Failed, since.elapsed());
                ev.error = Some(e.to_string());
                self.save_status(ev);
                Err(Failed(Outcome::Failed))
            }
        }
    }

    /// Loads `plan` (its lazy form): against the known kernel state when
    /// there is one (and `readback` is off), else reading the kernel back.
    /// Returns the ops sent, rendered (read-back path only: verify logs
    /// them).
    fn load(
        &mut self,
        plan: Plan,
        trigger: Trigger,
        since: Instant,
        readback: bool,
    ) -> Result<Vec<String>, Failed> {
        let eff: Cow<Plan> = match &self.tracker {
            Some(t) => Cow::Owned(lazy::lazy_plan(&plan, t.active())),
            None => Cow::Borrowed(&plan),
        };
        let load_start = Instant::now();
        let mut model = self.model.take();
        let used_readback = readback || model.is_none();
        let result = match (&mut model, readback) {
            (Some(model), false) => self.load_known(&eff, model),
            _ => self.load_readback(&eff),
        };
        let took = since.elapsed();
        let load_time = load_start.elapsed();
        let (sum, sent, err) = match result {
            Ok(x) => x,
            Err(e) => (DiffSummary::default(), Vec::new(), Some(e)),
        };
        let mut ev = load_event(trigger, took, &sum, err.as_ref());
        if let Some(e) = err {
            ev.error = Some(e.to_string());
            self.model = None;
            self.incr = None;
            self.incr_pending = None;
            self.resync_leaves();
            self.save_status(ev);
            return Err(Failed(Outcome::Failed));
        }
        if let Some(i) = self.incr_pending.take() {
            self.incr = Some(i);
        }
        // The known model was updated op by op; after a read-back it is the
        // plan's trees.
        self.model = match (model, readback) {
            (Some(m), false) => Some(m),
            _ => Some(
                eff.interfaces
                    .iter()
                    .map(|ip| (ip.dev.clone(), ip.tree()))
                    .collect(),
            ),
        };
        drop(eff);
        self.save_last_good(&plan);
        self.status.circuits = plan.allocation.circuits.len();
        self.status.active_leaves = self.active_leaves(&plan);
        self.plan = Some(plan);
        self.save_status(ev);
        // Logged once the state files are written (the times end at kernel
        // done).
        info!(
            %trigger,
            added = sum.added,
            changed = sum.changed,
            removed = sum.removed,
            ms = format!("{:.1}", took.as_secs_f64() * 1e3),
            plan_ms = format!("{:.1}", self.plan_time.as_secs_f64() * 1e3),
            load_ms = format!("{:.1}", load_time.as_secs_f64() * 1e3),
            readback = used_readback,
            "applied"
        );
        Ok(sent)
    }

    /// Diff against what the daemon loaded last (no kernel read-back);
    /// on success `model` is updated with the ops sent.
    fn load_known(
        &self,
        eff: &Plan,
        model: &mut BTreeMap<String, TcTree>,
    ) -> Result<(DiffSummary, Vec<String>, Option<ApplyError>), ApplyError> {
        preflight(eff, &self.live)?;
        let empty = TcTree::default();
        let changes: Vec<_> = eff
            .interfaces
            .iter()
            .map(|ip| plan_change(ip, model.get(&ip.dev).unwrap_or(&empty), false))
            .collect();
        let streams: Vec<IfaceOps> = changes.iter().map(|c| c.stream.clone()).collect();
        let sum = summarize(&streams);
        if streams.iter().all(|s| s.is_empty()) {
            return Ok((sum, Vec::new(), None));
        }
        if !self.skip_memory_check {
            let trees: Vec<&TcTree> = streams
                .iter()
                .map(|s| model.get(&s.dev).unwrap_or(&empty))
                .collect();
            check_memory(&streams, &trees, || self.live.meminfo())?;
        }
        let err = load_deletes_first(&self.backend, &streams, &NoProgress)
            .into_result()
            .err();
        if err.is_none() {
            for s in &streams {
                let tree = model.entry(s.dev.clone()).or_default();
                if s.sent().any(|op| tree.apply(&op).is_err()) {
                    // Our model and the kernel disagree: read back next time.
                    model.clear();
                    break;
                }
            }
            if model.is_empty() {
                return Err(ApplyError::Plan(
                    "the daemon's model of the kernel went out of step; reading back".into(),
                ));
            }
        }
        Ok((sum, Vec::new(), err))
    }

    /// Read back, diff, load ([`apply_plan`]).
    fn load_readback(
        &self,
        eff: &Plan,
    ) -> Result<(DiffSummary, Vec<String>, Option<ApplyError>), ApplyError> {
        let report = apply_plan(
            eff,
            &self.live,
            &self.backend,
            ApplyOptions::default().skip_memory_check(self.skip_memory_check),
            &NoProgress,
        )?;
        let streams: Vec<IfaceOps> = report.changes.iter().map(|c| c.stream.clone()).collect();
        for c in &report.changes {
            if let LoadKind::Full { reason } = &c.kind {
                info!(dev = %c.stream.dev, reason = %reason, ops = c.stream.len(), "full rebuild");
            }
        }
        let sum = summarize(&streams);
        let sent = rendered(&streams);
        let err = report.load.and_then(|l| l.into_result().err());
        Ok((sum, sent, err))
    }

    fn save_last_good(&self, plan: &Plan) {
        if let Err(e) = lqos_apply::save_last_good(&self.state, self.netns.as_deref(), plan, None) {
            warn!(error = %e, "cannot save the last good plan");
        }
    }

    /// After a failed load: the active set is what the kernel has.
    fn resync_leaves(&mut self) {
        let (Some(plan), Some(t)) = (&self.plan, &mut self.tracker) else {
            return;
        };
        let devs: Vec<&str> = plan.interfaces.iter().map(|i| i.dev.as_str()).collect();
        match read_live(&self.live, &devs) {
            Ok(trees) => t.resync(lazy::present_leaves(plan, &trees), Instant::now()),
            Err(e) => warn!(error = %e, "cannot read the leaves back"),
        }
    }

    /// Plan the inputs and load them: an edit of a few ShapedDevices.csv
    /// rows through the incremental path when the kernel's state is known,
    /// everything else (and whatever that path does not take) in full.
    fn reload(&mut self, trigger: Trigger, since: Instant, readback: bool) -> Result<(), Failed> {
        if !readback && trigger == Trigger::FileChange {
            match self.edit_incremental(trigger, since) {
                Ok(r) => return r,
                Err(NotIncremental(why)) => {
                    debug!(reason = %why, "edit planned in full");
                }
            }
        }
        let plan = self.plan_inputs(trigger, since)?;
        self.load(plan, trigger, since, readback).map(drop)
    }

    /// The incremental edit path: only ShapedDevices.csv changed, in rows
    /// [`DevicesIndex::edit`] can read alone; re-plan their circuits in
    /// place ([`lqos_tc::replan_circuits`]), diff their ops against the
    /// known kernel model ([`known_diff`]) and send that. `Err` (nothing
    /// sent, nothing changed but the dropped index) when the full path
    /// must run instead.
    fn edit_incremental(
        &mut self,
        trigger: Trigger,
        since: Instant,
    ) -> Result<Result<(), Failed>, NotIncremental> {
        let no = |why: &str| NotIncremental(why.to_string());
        let mut b = Breakdown::default();
        let t = Instant::now();
        let (Some(incr), Some(_), Some(_)) = (&mut self.incr, &self.model, &self.plan) else {
            return Err(no("no indexed last good state"));
        };
        let raw = self.inputs.read().map_err(|e| no(&e.to_string()))?;
        if raw.network != incr.network_text || raw.config != incr.config_text {
            return Err(no("network.json or lqos.conf changed"));
        }
        let patch = match incr.index.edit(&incr.net, &raw.devices) {
            DevicesEdit::Same => {
                info!(%trigger, "inputs unchanged; nothing to apply");
                return Ok(Ok(()));
            }
            DevicesEdit::Full(why) => return Err(NotIncremental(why)),
            DevicesEdit::Patch(p) => p,
        };
        for w in patch.report.warnings() {
            warn!(problem = %w, "input warning");
        }
        b.rows = patch.rows;
        b.circuits = patch.circuits.len();
        b.parse = t.elapsed();
        let t = Instant::now();
        let plan = self.plan.as_mut().expect("checked above");
        let at = match lqos_tc::replan_circuits(plan, &incr.plan_index, &incr.net, &patch.circuits)
        {
            Replan::Patched(at) => at,
            // Nothing changed yet: the full path from the same state.
            Replan::Full(why) => return Err(NotIncremental(why)),
        };
        let t_commit = Instant::now();
        incr.index.commit(&mut incr.net, patch, raw.devices);
        b.parse += t_commit.elapsed();
        b.plan = t.elapsed();
        let t = Instant::now();
        let mut streams: Vec<IfaceOps> = Vec::new();
        let model = self.model.as_ref().expect("checked above");
        let empty = TcTree::default();
        let mut fallback = None;
        for (i, ip) in plan.interfaces.iter().enumerate() {
            let ops = at
                .iter()
                .filter(|(k, _)| *k == i)
                .map(|&(_, o)| &ip.ops[o])
                .filter(|op| match (op, &self.tracker) {
                    // Lazy leaves: an idle circuit's leaf is not loaded.
                    (TcOp::AddQdisc(q), Some(t)) => {
                        t.active().contains(&(ip.dev.clone(), q.parent))
                    }
                    _ => true,
                });
            match known_diff(model.get(&ip.dev).unwrap_or(&empty), ops) {
                Ok(d) => streams.push(IfaceOps::new(ip.dev.clone(), d)),
                Err(e) => {
                    fallback = Some(e);
                    break;
                }
            }
        }
        b.diff = t.elapsed();
        let plan = self.plan.take().expect("checked above");
        if let Some(why) = fallback {
            // The patched plan is right; only the short diff does not
            // apply (e.g. a leaf changes kind): diff the whole tree.
            debug!(reason = %why, "diffing the whole tree against the known state");
            return Ok(self.load(plan, trigger, since, false).map(drop));
        }
        Ok(self.load_patch(plan, streams, trigger, since, b))
    }

    /// Sends an incremental edit's ops and records the outcome.
    fn load_patch(
        &mut self,
        plan: Plan,
        streams: Vec<IfaceOps<'_>>,
        trigger: Trigger,
        since: Instant,
        mut b: Breakdown,
    ) -> Result<(), Failed> {
        let sum = summarize(&streams);
        let t = Instant::now();
        let memory = match (&self.model, self.skip_memory_check) {
            (Some(model), false) => {
                let empty = TcTree::default();
                let trees: Vec<&TcTree> = streams
                    .iter()
                    .map(|s| model.get(&s.dev).unwrap_or(&empty))
                    .collect();
                check_memory(&streams, &trees, || self.live.meminfo()).err()
            }
            _ => None,
        };
        let err = if memory.is_some() {
            memory
        } else if streams.iter().all(|s| s.is_empty()) {
            None
        } else {
            load_deletes_first(&self.backend, &streams, &NoProgress)
                .into_result()
                .err()
        };
        b.load = t.elapsed();
        let took = since.elapsed();
        let mut ev = load_event(trigger, took, &sum, err.as_ref());
        if let Some(e) = err {
            ev.error = Some(e.to_string());
            // Unknown kernel state: the retry reads it back and plans in full.
            self.model = None;
            self.incr = None;
            self.plan = Some(plan);
            self.resync_leaves();
            self.save_status(ev);
            return Err(Failed(Outcome::Failed));
        }
        if let Some(model) = self.model.as_mut() {
            for s in &streams {
                let tree = model.entry(s.dev.clone()).or_default();
                if s.sent().any(|op| tree.apply(&op).is_err()) {
                    warn!(dev = %s.dev, "the daemon's model of the kernel went out of step; reading back next time");
                    self.model = None;
                    break;
                }
            }
        }
        let ms = |d: Duration| format!("{:.2}", d.as_secs_f64() * 1e3);
        info!(
            %trigger,
            added = sum.added,
            changed = sum.changed,
            removed = sum.removed,
            ms = format!("{:.1}", took.as_secs_f64() * 1e3),
            incremental = true,
            rows = b.rows,
            circuits = b.circuits,
            parse_ms = ms(b.parse),
            plan_ms = ms(b.plan),
            diff_ms = ms(b.diff),
            load_ms = ms(b.load),
            "applied"
        );
        // After the kernel is done: the state files.
        let t = Instant::now();
        self.save_last_good(&plan);
        debug!(ms = ms(t.elapsed()), "last good plan saved");
        self.status.active_leaves = self.active_leaves(&plan);
        self.plan = Some(plan);
        self.save_status(ev);
        Ok(())
    }

    /// Verify and repair against the current plan (read back, send the
    /// drift), logging what was repaired.
    fn verify(&mut self) -> Result<(), Failed> {
        let Some(plan) = self.plan.clone() else {
            return Ok(());
        };
        let since = Instant::now();
        let sent = self.load(plan, Trigger::Verify, since, true)?;
        if sent.is_empty() {
            info!("verify: in sync");
        } else {
            for line in sent.iter().take(50) {
                warn!(op = %line, "verify: repaired drift");
            }
            warn!(ops = sent.len(), "verify: repaired drift");
        }
        Ok(())
    }

    /// One lazy-leaf poll: counters of every interface, one op per leaf
    /// to add or remove.
    fn poll_leaves(&mut self) {
        let (Some(plan), Some(tracker)) = (&self.plan, &mut self.tracker) else {
            return;
        };
        let since = Instant::now();
        let mut total = (0, 0);
        let mut failed = None;
        for ip in &plan.interfaces {
            let stats = match self.live.class_stats(&ip.dev, &ip.htb_majors()) {
                Ok(s) => s,
                Err(e) => {
                    warn!(dev = %ip.dev, error = %e, "leaf poll: cannot read class counters");
                    continue;
                }
            };
            let mut ch = tracker.observe(ip, &stats, Instant::now());
            if !self.skip_memory_check && !ch.add.is_empty() {
                if let Some(mem) = self.live.meminfo() {
                    let fit = leaves_that_fit(&ch.add, mem.usable());
                    if fit < ch.add.len() {
                        let deferred = ch.add.split_off(fit);
                        tracker.defer(&ip.dev, &deferred);
                        warn!(
                            dev = %ip.dev,
                            added = fit,
                            deferred = deferred.len(),
                            mem_available_mib = mem.available >> 20,
                            margin_mib = mem.margin() >> 20,
                            "leaf poll: not enough memory for every active circuit's leaf; \
                             the rest stay without until memory frees up (--sqm fq_codel \
                             or more memory)"
                        );
                    }
                }
            }
            if ch.is_empty() {
                continue;
            }
            let ops = ch.ops();
            let stream = [IfaceOps::new(ip.dev.clone(), ops.clone())];
            if let Err(e) = self
                .backend
                .load(&stream, RootDelete::None, &NoProgress)
                .into_result()
            {
                error!(dev = %ip.dev, error = %e, "leaf poll: kernel error");
                failed = Some(e);
                break;
            }
            if let Some(tree) = self.model.as_mut().and_then(|m| m.get_mut(&ip.dev)) {
                if ops.iter().any(|op| tree.apply(op).is_err()) {
                    self.model = None;
                }
            }
            total.0 += ch.add.len();
            total.1 += ch.remove.len();
        }
        let active = tracker.active().len();
        if total == (0, 0) && failed.is_none() {
            debug!(active, "leaf poll: no change");
            return;
        }
        let took = since.elapsed();
        let mut ev = WatchEvent::now(
            Trigger::LeafPoll,
            if failed.is_some() {
                Outcome::Failed
            } else {
                Outcome::Applied
            },
            took,
        );
        (ev.added, ev.removed) = total;
        ev.error = failed.map(|e| e.to_string());
        if ev.error.is_some() {
            self.model = None;
            self.resync_leaves();
        }
        let active = self.tracker.as_ref().map_or(0, |t| t.active().len());
        info!(
            added = total.0,
            removed = total.1,
            active,
            ms = format!("{:.1}", took.as_secs_f64() * 1e3),
            "leaves"
        );
        self.status.active_leaves = active;
        self.save_status(ev);
    }
}

impl Incremental {
    /// Indexes the last good inputs (`None` if ShapedDevices.csv cannot be
    /// indexed: then every edit is planned in full).
    fn new(inputs: &Inputs, raw: RawInputs, net: Network, plan: &Plan) -> Option<Incremental> {
        let index = DevicesIndex::new(&inputs.devices_label(), raw.devices, &net)?;
        Some(Incremental {
            network_text: raw.network,
            config_text: raw.config,
            net,
            index,
            plan_index: PlanIndex::new(plan),
        })
    }
}

/// How many of the leaf ops `add` (in order) fit in `usable` bytes.
fn leaves_that_fit(add: &[lqos_tc::TcOp], usable: u64) -> usize {
    let mut sum = 0u64;
    add.iter()
        .take_while(|op| {
            if let lqos_tc::TcOp::ReplaceQdisc(q) | lqos_tc::TcOp::AddQdisc(q) = op {
                sum += lqos_tc::memory::qdisc_bytes(&q.kind);
            }
            sum <= usable
        })
        .count()
}

/// The status event of a load (full or incremental) that took `took` and
/// sent `sum`; a failed one (`err`) is logged here, one line for both
/// paths.
fn load_event(
    trigger: Trigger,
    took: Duration,
    sum: &DiffSummary,
    err: Option<&ApplyError>,
) -> WatchEvent {
    let outcome = if err.is_none() {
        Outcome::Applied
    } else {
        Outcome::Failed
    };
    let mut ev = WatchEvent::now(trigger, outcome, took);
    (ev.added, ev.changed, ev.removed) = (sum.added, sum.changed, sum.removed);
    if let Some(e) = err {
        let what = if matches!(e, ApplyError::NotEnoughMemory { .. }) {
            "not enough memory: nothing changed; will retry"
        } else {
            "kernel error; will retry"
        };
        error!(
            %trigger,
            added = sum.added,
            changed = sum.changed,
            removed = sum.removed,
            error = %e,
            "{what}"
        );
    }
    ev
}

fn summarize(streams: &[IfaceOps<'_>]) -> DiffSummary {
    let mut sum = DiffSummary::default();
    for s in streams {
        let x = s.summary();
        sum.added += x.added;
        sum.changed += x.changed;
        sum.removed += x.removed;
    }
    sum
}

fn rendered(streams: &[IfaceOps<'_>]) -> Vec<String> {
    streams
        .iter()
        .flat_map(|s| {
            s.sent()
                .map(|op| render_line(&s.dev, &op))
                .collect::<Vec<_>>()
        })
        .collect()
}

fn absolute(p: &Path) -> anyhow::Result<PathBuf> {
    std::path::absolute(p).with_context(|| format!("resolving {}", p.display()))
}

/// Runs `lqos watch` until SIGTERM/SIGINT.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    init_logging(args.log_format);
    let mut inputs = args.inputs.inputs();
    inputs.network = absolute(&inputs.network)?;
    inputs.devices = absolute(&inputs.devices)?;
    inputs.config = inputs.config.as_deref().map(absolute).transpose()?;
    let lazy_conf = match &inputs.config {
        Some(p) => match std::fs::read_to_string(p) {
            Ok(t) => {
                lqos_model::parse_config(&p.display().to_string(), &t)?
                    .lqos
                    .lazy_leaves
            }
            Err(_) => false,
        },
        None => false,
    };
    let lazy_on = args.lazy_leaves || lazy_conf;
    let poll = secs(args.poll, "--poll")?.max(Duration::from_millis(100));
    let idle = secs(args.idle, "--idle")?;
    let verify_every = secs(args.verify_every * 60.0, "--verify-every")?;
    let retry = secs(args.retry, "--retry")?.max(Duration::from_millis(100));
    let debounce = Duration::from_millis(args.debounce);

    let netns = args.target.netns.clone();
    let state_path = state_path(&args.target);
    let state = StateDir::open(&state_path)?;
    // The daemon owns the tree: no `lqos apply` runs beside it.
    let _lock = state.lock()?;
    let live = NetlinkLive::new(netns.clone()).with_probe_cache(state_path.join(PROBE_CACHE_FILE));
    let backend = NetlinkBackend::new(netns.clone(), Parallelism::Serial);

    // Signals and file events feed one channel.
    let (tx, rx) = mpsc::channel::<Event>();
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGHUP,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
    ])
    .context("installing signal handlers")?;
    {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for s in signals.forever() {
                let e = if s == signal_hook::consts::SIGHUP {
                    Event::Hup
                } else {
                    Event::Stop(s)
                };
                if tx.send(e).is_err() {
                    break;
                }
            }
        });
    }
    let files: Vec<PathBuf> = [Some(&inputs.network), Some(&inputs.devices)]
        .into_iter()
        .chain([inputs.config.as_ref()])
        .flatten()
        .cloned()
        .collect();
    let fs_tx = tx.clone();
    let mut watcher = notify::recommended_watcher(move |r| {
        let _ = fs_tx.send(Event::Fs(r));
    })
    .context("starting the file watcher")?;
    let mut dirs: Vec<PathBuf> = files
        .iter()
        .map(|f| f.parent().unwrap_or(Path::new("/")).to_path_buf())
        .collect();
    dirs.sort();
    dirs.dedup();
    for d in &dirs {
        use notify::Watcher;
        watcher
            .watch(d, notify::RecursiveMode::NonRecursive)
            .with_context(|| format!("watching {}", d.display()))?;
    }

    let mut d = Daemon {
        overrides: args.options.overrides()?,
        inputs,
        netns: netns.clone(),
        state,
        live,
        backend,
        plan: None,
        model: None,
        tracker: None,
        status: WatchStatus::new(netns.as_deref(), lazy_on),
        plan_time: Duration::ZERO,
        incr: None,
        incr_pending: None,
        no_incremental: args.no_incremental,
        skip_memory_check: args.skip_memory_check,
    };
    info!(
        netns = netns.as_deref(),
        lazy_leaves = lazy_on,
        files = ?files,
        state_dir = %state_path.display(),
        "lqos watch started"
    );

    // Start: lazy leaves keep the planned leaves the kernel already has
    // (a restarted daemon does not drop the leaves of busy circuits).
    let start = Instant::now();
    if lazy_on {
        let active = match d.plan_inputs(Trigger::Start, start) {
            Ok(p) => {
                let devs: Vec<&str> = p.interfaces.iter().map(|i| i.dev.as_str()).collect();
                read_live(&d.live, &devs)
                    .map(|t| lazy::present_leaves(&p, &t))
                    .unwrap_or_default()
            }
            Err(_) => Default::default(),
        };
        d.tracker = Some(LeafTracker::new(idle, active, start));
    }
    let mut retry_at = retry_after(d.reload(Trigger::Start, start, true), retry);
    // The counters' baseline right away: traffic from now on gives a leaf
    // at the next poll.
    d.poll_leaves();

    let mut pending: Option<(Instant, Instant)> = None; // (first, last) event
    let mut next_poll = Instant::now() + poll;
    let mut next_verify = (!verify_every.is_zero()).then(|| Instant::now() + verify_every);
    loop {
        let now = Instant::now();
        let mut deadline = now + Duration::from_secs(3600);
        if let Some((_, last)) = pending {
            deadline = deadline.min(last + debounce);
        }
        if let Some(r) = retry_at {
            deadline = deadline.min(r);
        }
        if d.tracker.is_some() {
            deadline = deadline.min(next_poll);
        }
        if let Some(v) = next_verify {
            deadline = deadline.min(v);
        }
        match rx.recv_timeout(deadline.saturating_duration_since(now)) {
            Ok(Event::Fs(Ok(ev))) => {
                if matches!(ev.kind, notify::EventKind::Access(_)) {
                    continue;
                }
                if ev.paths.iter().any(|p| files.contains(p)) {
                    let t = Instant::now();
                    debug!(paths = ?ev.paths, kind = ?ev.kind, "input changed");
                    pending = Some((pending.map_or(t, |(f, _)| f), t));
                }
                continue;
            }
            Ok(Event::Fs(Err(e))) => {
                warn!(error = %e, "file watcher error");
                continue;
            }
            Ok(Event::Hup) => {
                info!("SIGHUP: applying now");
                pending = None;
                retry_at = retry_after(d.reload(Trigger::Sighup, Instant::now(), true), retry);
                continue;
            }
            Ok(Event::Stop(sig)) => {
                info!(signal = sig, "exiting; the tree stays as it is");
                break;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        let now = Instant::now();
        if let Some((first, last)) = pending {
            if now >= last + debounce {
                pending = None;
                retry_at = retry_after(d.reload(Trigger::FileChange, first, false), retry);
            }
        }
        if retry_at.is_some_and(|r| now >= r) {
            retry_at = retry_after(d.reload(Trigger::Retry, now, true), retry);
        }
        if d.tracker.is_some() && now >= next_poll {
            d.poll_leaves();
            next_poll = Instant::now() + poll;
        }
        if next_verify.is_some_and(|v| now >= v) {
            if let Some(r) = retry_after(d.verify(), retry) {
                retry_at = Some(r);
            }
            next_verify = Some(Instant::now() + verify_every);
        }
    }
    d.status.stopped_ms = Some(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|x| x.as_millis() as u64)
            .unwrap_or(0),
    );
    if let Err(e) = d.status.save(&d.state) {
        warn!(error = %e, "cannot write the status file");
    }
    drop(watcher);
    Ok(ExitCode::from(EXIT_OK))
}

#[cfg(test)]
mod tests {
    use super::*;
    use lqos_tc::{Qdisc, QdiscKind, TcHandle, TcOp};

    #[test]
    fn leaves_that_fit_counts_in_order_by_kind() {
        let leaf = |minor, kind| {
            TcOp::ReplaceQdisc(Qdisc {
                parent: TcHandle::new(1, minor),
                handle: TcHandle::new(0x100 + minor, 0),
                kind,
            })
        };
        let cake = || QdiscKind::Cake(Default::default());
        let fq = || QdiscKind::FqCodel(Default::default());
        let add = [leaf(3, cake()), leaf(4, fq()), leaf(5, cake())];
        let mib = 1u64 << 20;
        assert_eq!(leaves_that_fit(&add, 0), 0);
        assert_eq!(leaves_that_fit(&add, mib), 0);
        assert_eq!(leaves_that_fit(&add, 2 * mib), 2);
        assert_eq!(leaves_that_fit(&add, 3 * mib), 3);
        assert_eq!(leaves_that_fit(&[], 0), 0);
    }
}
