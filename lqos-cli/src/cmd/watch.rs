//! `lqos watch`: the reload daemon.
//!
//! The daemon itself is [`lqos_apply::daemon`]: the decisions
//! ([`lqos_apply::daemon::Reloader`]), the I/O ([`Driver`]) and what each
//! event says ([`Event::describe`]). This module keeps the flags, the
//! logging (with this binary's advice, in `log`), the signals, the file
//! watcher and the loop. It runs in the foreground (systemd `Type=exec`)
//! and holds the state directory's apply lock for its whole life; what it
//! does on each change is in docs/daemon.md.

use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use lqos_apply::backend::{Cancel, NetlinkBackend, Parallelism};
use lqos_apply::daemon::{Driver, Event, FileEvent, Kernel, Settings};
use lqos_apply::inputs::InputFile;
use lqos_apply::live::NetlinkLive;
use lqos_apply::state::NetnsState;
use lqos_apply::state::{Holder, StateFile};
use lqos_apply::watch::Confirmation;
use tracing::{debug, info, warn};

use super::apply::TargetArgs;
use super::inputs::InputArgs;
use super::inputs::PlanOptions;
use super::{Done, Outcome};

mod log;
use log::{log, StartInfo};

/// The target of the daemon's log lines.
const TARGET: &str = module_path!();

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
    pub max_removals: Option<lqos_model::config::RemovalLimit>,
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
fn take_confirmation(state: &NetnsState) -> Option<String> {
    match Confirmation::take(state) {
        Ok(c) => c.map(|c| c.sha256),
        Err(e) => {
            warn!(error = %e, "unreadable confirmation");
            None
        }
    }
}

/// Runs `lqos watch` until SIGTERM/SIGINT.
pub fn run(args: Args) -> Outcome {
    super::privilege::require("`lqos watch`", true, args.target.netns.is_some())?;
    init_logging(args.log_format);
    let mut inputs = args.inputs.inputs();
    inputs.network = absolute(&inputs.network)?;
    inputs.devices = absolute(&inputs.devices)?;
    inputs.config = inputs.config.as_deref().map(absolute).transpose()?;
    let mut settings = Settings::default();
    settings.overrides = args.options.overrides()?;
    settings.lazy_leaves = args.lazy_leaves;
    settings.statistics = args.metrics.is_some();
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
    let state = args.target.state();
    // The daemon owns the tree: no `lqos apply` runs beside it.
    let _lock = state.lock_for(Holder::Daemon)?;
    let live = NetlinkLive::new(netns.clone()).with_probe_cache(state.file(StateFile::ProbeCache));
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
    let confirm_path = absolute(&state.file(StateFile::Confirm))?;
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
    if let Some(addr) = args.metrics {
        let listener = crate::metrics::bind(addr)
            .with_context(|| format!("--metrics {addr}: cannot listen"))?;
        crate::metrics::serve(listener, shared.clone(), args.metrics_circuits);
        info!(addr = %addr, "metrics at http://{addr}/metrics");
    }
    let metrics_on = args.metrics.is_some();

    let start = StartInfo {
        netns: netns.clone(),
        files: files.clone(),
        state_dir: state.path().to_path_buf(),
    };
    let sink = &mut |e: Event| log(e, &start);
    let kernel = Kernel {
        live: &live,
        backend: &backend,
    };
    let mut d = Driver::new(settings, inputs, &state, kernel).with_cancel(cancel);
    d.start(sink);
    loop {
        if metrics_on {
            // What `/metrics` serves: the driver's latest snapshot (a
            // pointer swap; scrapes render it on their own thread).
            let mut sh = shared.lock().expect("metrics state");
            sh.latest = d.statistics();
            sh.health.clone_from(d.health());
        }
        let now = Instant::now();
        let deadline = d
            .deadline()
            .unwrap_or(now + Duration::from_secs(3600))
            .min(now + Duration::from_secs(3600));
        match rx.recv_timeout(deadline.saturating_duration_since(now)) {
            Ok(Loop::Fs(Ok(ev))) => {
                if ev.paths.contains(&confirm_path) && is_written(&ev.kind) {
                    if let Some(sha) = take_confirmation(&state) {
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
    Ok(Done::Ok)
}
