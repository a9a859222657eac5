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
//!   ([`lqos_model::DevicesIndex`]), only their circuits re-planned in place
//!   ([`lqos_tc::replan_circuits`]) and diffed against the known kernel
//!   state ([`lqos_tc::known_diff`]); the result is what the full path
//!   would load.
//!   Every other edit (and every edit with an error) takes the full path.
//! - inputs that fail validation are never applied: every problem is
//!   logged (file, line, circuit), the live tree and the last good plan
//!   stay, and the next change applies again.
//! - a kernel error is logged with the failing op and retried after
//!   `--retry` seconds (or at the next change); the daemon does not exit.
//! - SIGHUP applies now; SIGTERM/SIGINT exit 0 and leave the tree as is
//!   (a load under way stops at its next batch, [`lqos_apply::Cancel`]).
//! - every `--verify-every` minutes, verify and repair (the ops that
//!   repaired drift are logged).
//! - with lazy leaves, every `--poll` seconds one class dump per planned
//!   HTB qdisc gives circuits whose counters moved their leaf, and takes it
//!   from circuits idle for `--idle` seconds ([`lqos_apply::lazy`]).
//!
//! Every event is one log line with its numbers; the last one is also in
//! the status file `lqos status` prints.
//!
//! The daemon itself is [`lqos_apply::daemon`] (the decisions and the I/O
//! driver); this module keeps the flags, the logging, the signals, the
//! file watcher and the loop.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use lqos_apply::daemon::{
    Driver, Event, FileEvent, InputFile, Kernel, LoadPath, Settings, StateFile,
};
use lqos_apply::watch::{confirm_file, Confirmation};
use lqos_apply::{ApplyError, Cancel, NetlinkBackend, NetlinkLive, Parallelism, StateDir, Stopped};
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
    /// Seconds between two statistics polls (lazy leaves: class-counter
    /// dumps; --metrics: class and qdisc dumps, the same ones).
    #[arg(long, value_name = "SECS", default_value_t = 5.0)]
    pub poll: f64,
    /// With lazy leaves: seconds without traffic before a leaf is removed.
    #[arg(long, value_name = "SECS", default_value_t = 300.0)]
    pub idle: f64,
    /// Minutes between two verify-and-repair runs (0: never).
    #[arg(long, value_name = "MIN", default_value_t = 10.0)]
    pub verify_every: f64,
    /// Milliseconds to wait after an input file is closed or renamed into
    /// place before reading it.
    #[arg(long, value_name = "MS", default_value_t = 0)]
    pub debounce: u64,
    /// Seconds without file events after which a file written but never
    /// closed is read anyway (and one that ends in the middle of a record
    /// is read as it is).
    #[arg(long, value_name = "SECS", default_value_t = 2.0)]
    pub quiet_period: f64,
    /// Refuse a reload that would remove more circuits than this (a count,
    /// or a percentage such as `5%`; `0`: no limit) until `lqos confirm`
    /// [default: lqos.conf's `[lqos] max_removals`, else more than 10% and
    /// more than 10 circuits].
    #[arg(long, value_name = "N|P%")]
    pub max_removals: Option<lqos_model::RemovalLimit>,
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
    /// Serve Prometheus metrics (per circuit and node counters, cake
    /// delays, the daemon's health) at http://ADDR/metrics, from a
    /// statistics poll every --poll seconds (with lazy leaves: the same
    /// dumps). Off by default; `--metrics` alone listens on 127.0.0.1:9464.
    /// Name another address only on a network you trust: anyone who can
    /// reach it reads every circuit's traffic.
    #[arg(
        long,
        value_name = "ADDR",
        num_args = 0..=1,
        default_missing_value = "127.0.0.1:9464"
    )]
    pub metrics: Option<std::net::SocketAddr>,
    /// Which circuits get series on /metrics: all, top:N (the N busiest at
    /// each scrape) or none (nodes and the daemon only), for very large
    /// networks.
    #[arg(long, value_name = "WHICH", default_value = "all",
          value_parser = crate::metrics::parse_circuit_series)]
    pub metrics_circuits: crate::metrics::CircuitSeries,
    /// Log format (logs go to stderr; under systemd, to the journal).
    #[arg(long, value_enum, default_value = "text")]
    pub log_format: LogFormat,
}

/// What the event loop waits for.
enum Loop {
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

fn absolute(p: &Path) -> anyhow::Result<PathBuf> {
    std::path::absolute(p).with_context(|| format!("resolving {}", p.display()))
}

/// Milliseconds with one decimal.
fn ms1(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e3)
}

/// Milliseconds with two decimals.
fn ms2(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1e3)
}

/// What is logged once the daemon knows whether leaves are lazy.
struct StartInfo {
    netns: Option<String>,
    files: Vec<PathBuf>,
    state_dir: PathBuf,
}

/// One log line per event.
fn log(e: Event, start: &StartInfo) {
    match e {
        Event::SavedPlanIgnored { error } => {
            warn!(error = %error, "ignoring the saved plan; classids may change")
        }
        Event::Started { lazy_leaves } => info!(
            netns = start.netns.as_deref(),
            lazy_leaves,
            files = ?start.files,
            state_dir = %start.state_dir.display(),
            "lqos watch started"
        ),
        Event::InputWarning(p) => warn!(problem = %p, "input warning"),
        Event::InvalidInput(p) => error!(
            file = %p.file,
            line = p.line,
            circuit = p.circuit.as_deref(),
            problem = %p,
            "invalid input"
        ),
        Event::Rejected { trigger, errors } => error!(
            %trigger,
            errors,
            "inputs rejected: nothing applied, the live tree and the last good plan stay"
        ),
        Event::PlanRefused { trigger, error } => {
            error!(%trigger, error = %error, "inputs rejected: nothing applied")
        }
        Event::PlanFailed { trigger, error } => error!(%trigger, error = %error, "cannot plan"),
        Event::Indexed { took, indexed } => debug!(
            ms = ms1(took),
            indexed, "inputs indexed for incremental edits"
        ),
        Event::PlannedInFull { reason } => debug!(reason = %reason, "edit planned in full"),
        Event::WholeTreeDiff { reason } => debug!(
            reason = %reason,
            "diffing the whole tree against the known state"
        ),
        Event::Unchanged { trigger } => info!(%trigger, "inputs unchanged; nothing to apply"),
        Event::PartialWrite { file, wait } => info!(
            file = file.name(),
            wait_ms = wait.as_millis() as u64,
            "input ends in the middle of a record: waiting for the rest"
        ),
        Event::InputsChanging { path } => debug!(
            path = %path.display(),
            "input changed while read: reading again"
        ),
        Event::RemovalsRefused {
            trigger,
            refusal,
            sha256,
        } => error!(
            %trigger,
            refusal = %refusal,
            sha256 = %sha256,
            "inputs refused: nothing applied, the live tree and the last good plan stay; \
             `lqos confirm` applies them once"
        ),
        Event::ConfirmIgnored { sha256, pending } => warn!(
            sha256 = %sha256,
            pending,
            "confirmation ignored: it does not name the refused inputs"
        ),
        Event::FullRebuild { dev, reason, ops } => {
            info!(dev = %dev, reason = %reason, ops, "full rebuild")
        }
        Event::Applied(a) => {
            let s = a.summary;
            match a.path {
                LoadPath::Full {
                    plan,
                    load,
                    readback,
                } => info!(
                    trigger = %a.trigger,
                    added = s.added,
                    changed = s.changed,
                    removed = s.removed,
                    ms = ms1(a.took),
                    plan_ms = ms1(plan),
                    load_ms = ms1(load),
                    readback,
                    "applied"
                ),
                LoadPath::Incremental(b) => info!(
                    trigger = %a.trigger,
                    added = s.added,
                    changed = s.changed,
                    removed = s.removed,
                    ms = ms1(a.took),
                    incremental = true,
                    rows = b.rows,
                    circuits = b.circuits,
                    parse_ms = ms2(b.parse),
                    plan_ms = ms2(b.plan),
                    diff_ms = ms2(b.diff),
                    load_ms = ms2(b.load),
                    "applied"
                ),
            }
        }
        Event::LoadFailed {
            trigger,
            summary: s,
            error,
        } => {
            let what = if matches!(error, ApplyError::NotEnoughMemory { .. }) {
                "not enough memory: nothing changed; will retry"
            } else if matches!(
                error,
                ApplyError::Incomplete {
                    reason: Stopped::Cancelled { .. },
                    ..
                }
            ) {
                "load stopped by a signal between two batches; the next start reads the kernel back"
            } else {
                "kernel error; will retry"
            };
            error!(
                %trigger,
                added = s.added,
                changed = s.changed,
                removed = s.removed,
                error = %crate::hints::with_hint(&error),
                "{what}"
            )
        }
        Event::OutOfStep { dev } => warn!(
            dev = %dev,
            "the daemon's model of the kernel went out of step; reading back next time"
        ),
        Event::LastGoodSaved { took } => debug!(ms = ms2(took), "last good plan saved"),
        Event::SaveFailed {
            what: StateFile::LastGood,
            error,
        } => warn!(error = %error, "cannot save the last good plan"),
        Event::SaveFailed {
            what: StateFile::Status,
            error,
        } => warn!(error = %error, "cannot write the status file"),
        Event::SaveFailed {
            what: StateFile::Journal,
            error,
        } => warn!(error = %error, "cannot write the input journal"),
        Event::LeavesUnreadable { error } => warn!(error = %error, "cannot read the leaves back"),
        Event::InSync => info!("verify: in sync"),
        Event::Repaired { ops } => {
            for line in ops.iter().take(50) {
                warn!(op = %line, "verify: repaired drift");
            }
            warn!(ops = ops.len(), "verify: repaired drift");
        }
        Event::CountersUnreadable { dev, error } => warn!(
            dev = %dev,
            error = %error,
            "leaf poll: cannot read class counters"
        ),
        Event::LeavesDeferred {
            dev,
            added,
            deferred,
            mem,
        } => warn!(
            dev = %dev,
            added,
            deferred,
            mem_available_mib = mem.available >> 20,
            margin_mib = mem.margin() >> 20,
            "leaf poll: not enough memory for every active circuit's leaf; \
             the rest stay without until memory frees up (--sqm fq_codel \
             or more memory)"
        ),
        Event::LeafKernelError { dev, error } => {
            error!(dev = %dev, error = %error, "leaf poll: kernel error")
        }
        Event::LeavesUnchanged { active } => debug!(active, "leaf poll: no change"),
        Event::Leaves {
            added,
            removed,
            active,
            took,
        } => info!(added, removed, active, ms = ms1(took), "leaves"),
        e => debug!(event = ?e, "event"),
    }
}

/// What a watcher event says about the input files (`files`: network,
/// devices, config).
fn input_events(ev: &notify::Event, files: &[PathBuf]) -> Vec<(InputFile, FileEvent)> {
    use notify::event::{AccessKind, AccessMode, ModifyKind, RenameMode};
    use notify::EventKind as K;
    let which = |p: &PathBuf| {
        let i = files.iter().position(|f| f == p)?;
        Some([InputFile::Network, InputFile::Devices, InputFile::Config][i.min(2)])
    };
    let mut out = Vec::new();
    for (i, p) in ev.paths.iter().enumerate() {
        let Some(file) = which(p) else { continue };
        let e = match ev.kind {
            K::Access(AccessKind::Close(AccessMode::Write)) => FileEvent::Closed,
            K::Access(_) | K::Modify(ModifyKind::Metadata(_)) => continue,
            K::Modify(ModifyKind::Name(RenameMode::To)) => FileEvent::Renamed,
            K::Modify(ModifyKind::Name(RenameMode::From)) => FileEvent::Removed,
            // [from, to]
            K::Modify(ModifyKind::Name(RenameMode::Both)) if i == 0 => FileEvent::Removed,
            K::Modify(ModifyKind::Name(RenameMode::Both)) => FileEvent::Renamed,
            K::Remove(_) => FileEvent::Removed,
            _ => FileEvent::Written,
        };
        out.push((file, e));
    }
    out
}

/// A close after writing or a rename into place.
fn is_written(kind: &notify::EventKind) -> bool {
    use notify::event::{AccessKind, AccessMode, ModifyKind};
    matches!(
        kind,
        notify::EventKind::Access(AccessKind::Close(AccessMode::Write))
            | notify::EventKind::Modify(ModifyKind::Name(_))
    )
}

/// The sha256 `lqos confirm` wrote (the file is removed: a confirmation
/// is used once).
fn take_confirmation(path: &Path) -> Option<String> {
    let bytes = std::fs::read(path).ok()?;
    let _ = std::fs::remove_file(path);
    match serde_json::from_slice::<Confirmation>(&bytes) {
        Ok(c) => Some(c.sha256),
        Err(e) => {
            warn!(path = %path.display(), error = %e, "unreadable confirmation");
            None
        }
    }
}

/// Runs `lqos watch` until SIGTERM/SIGINT.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    init_logging(args.log_format);
    let mut inputs = args.inputs.inputs();
    inputs.network = absolute(&inputs.network)?;
    inputs.devices = absolute(&inputs.devices)?;
    inputs.config = inputs.config.as_deref().map(absolute).transpose()?;
    let mut settings = Settings::default();
    settings.overrides = args.options.overrides()?;
    settings.netns = args.target.netns.clone();
    settings.lazy_leaves = args.lazy_leaves;
    settings.poll = secs(args.poll, "--poll")?.max(Duration::from_millis(100));
    settings.idle = secs(args.idle, "--idle")?;
    let verify_every = secs(args.verify_every * 60.0, "--verify-every")?;
    settings.verify_every = (!verify_every.is_zero()).then_some(verify_every);
    settings.retry = secs(args.retry, "--retry")?.max(Duration::from_millis(100));
    settings.debounce = Duration::from_millis(args.debounce);
    settings.quiet = secs(args.quiet_period, "--quiet-period")?;
    settings.max_removals = args.max_removals;
    settings.incremental = !args.no_incremental;
    settings.memory_check = !args.skip_memory_check;

    let netns = args.target.netns.clone();
    let state_path = state_path(&args.target);
    let state = StateDir::open(&state_path)?;
    // The daemon owns the tree: no `lqos apply` runs beside it.
    let _lock = state.lock()?;
    let live = NetlinkLive::new(netns.clone()).with_probe_cache(state_path.join(PROBE_CACHE_FILE));
    let backend = NetlinkBackend::new(netns.clone(), Parallelism::Serial);

    // Signals and file events feed one channel; SIGTERM/SIGINT also stop
    // a load under way at its next batch.
    let (tx, rx) = mpsc::channel::<Loop>();
    let cancel = Cancel::new();
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGHUP,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
    ])
    .context("installing signal handlers")?;
    {
        let tx = tx.clone();
        let cancel = cancel.clone();
        std::thread::spawn(move || {
            for s in signals.forever() {
                let e = if s == signal_hook::consts::SIGHUP {
                    Loop::Hup
                } else {
                    cancel.cancel();
                    Loop::Stop(s)
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
        let _ = fs_tx.send(Loop::Fs(r));
    })
    .context("starting the file watcher")?;
    let confirm_path = absolute(&state_path)?.join(confirm_file(netns.as_deref()));
    let mut dirs: Vec<PathBuf> = files
        .iter()
        .map(|f| f.parent().unwrap_or(Path::new("/")).to_path_buf())
        .chain(confirm_path.parent().map(Path::to_path_buf))
        .collect();
    dirs.sort();
    dirs.dedup();
    for d in &dirs {
        use notify::Watcher;
        watcher
            .watch(d, notify::RecursiveMode::NonRecursive)
            .with_context(|| format!("watching {}", d.display()))?;
    }

    // Metrics: bound before the first load (a taken port fails at start).
    let shared = Arc::new(Mutex::new(crate::metrics::Shared::default()));
    let poller = crate::metrics::Poller::new(&live, shared.clone());
    if let Some(addr) = args.metrics {
        let listener = crate::metrics::bind(addr)
            .with_context(|| format!("--metrics {addr}: cannot listen"))?;
        crate::metrics::serve(listener, shared.clone(), args.metrics_circuits);
        info!(addr = %addr, "metrics at http://{addr}/metrics");
    }
    let metrics_on = args.metrics.is_some();
    let poll_every = settings.poll;
    let lazy = settings.lazy_leaves;

    let start = StartInfo {
        netns: netns.clone(),
        files: files.clone(),
        state_dir: state_path.clone(),
    };
    let plan_changed = std::cell::Cell::new(false);
    let sink = &mut |e: Event| {
        if metrics_on {
            shared.lock().expect("metrics state").health.event(&e);
            if matches!(e, Event::Applied(_)) {
                plan_changed.set(true);
            }
        }
        log(e, &start)
    };
    let kernel = Kernel {
        live: &live,
        backend: &backend,
        // With metrics, the lazy-leaf poll's dumps feed them too.
        counters: if metrics_on { &poller } else { &live },
    };
    let mut d = Driver::new(settings, inputs, &state, kernel).with_cancel(cancel);
    let mut next_stats = Instant::now();
    d.start(sink);
    loop {
        if metrics_on {
            if plan_changed.take() || !poller.has_plan() {
                if let Some(p) = d.core().plan() {
                    poller.set_plan(p);
                }
            }
            poller.flush();
            // Without lazy leaves nothing else polls: the loop does.
            if !lazy && Instant::now() >= next_stats {
                poller.poll_all();
                next_stats = Instant::now() + poll_every;
            }
        }
        let now = Instant::now();
        let mut deadline = d
            .deadline()
            .unwrap_or(now + Duration::from_secs(3600))
            .min(now + Duration::from_secs(3600));
        if metrics_on && !lazy {
            deadline = deadline.min(next_stats);
        }
        match rx.recv_timeout(deadline.saturating_duration_since(now)) {
            Ok(Loop::Fs(Ok(ev))) => {
                if ev.paths.contains(&confirm_path) && is_written(&ev.kind) {
                    if let Some(sha) = take_confirmation(&confirm_path) {
                        info!(sha256 = %sha, "confirmation received: applying the refused inputs");
                        d.confirm(&sha, sink);
                    }
                    continue;
                }
                for (file, e) in input_events(&ev, &files) {
                    debug!(file = file.name(), event = ?e, kind = ?ev.kind, "input changed");
                    d.file_event(file, e);
                }
                continue;
            }
            Ok(Loop::Fs(Err(e))) => {
                warn!(error = %e, "file watcher error");
                continue;
            }
            Ok(Loop::Hup) => {
                info!("SIGHUP: applying now");
                d.reload_now(sink);
                continue;
            }
            Ok(Loop::Stop(sig)) => {
                info!(signal = sig, "exiting; the tree stays as it is");
                break;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        d.run(sink);
    }
    d.stop(sink);
    drop(watcher);
    Ok(ExitCode::from(EXIT_OK))
}
