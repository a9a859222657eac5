//! `lqos apply`: load a plan into the kernel (incremental by default).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use lqos_apply::backend::{NoProgress, Progress};
use lqos_apply::engine::{apply_targets, ApplyOptions, ApplyReport, LoadKind, Target};
use lqos_apply::live::LiveSource;
use lqos_apply::state::{resolve_state_dir, StateDir};
use lqos_apply::{
    load_saved, load_saved_allocation, ApplyError, Backend, NetlinkBackend, NetlinkLive,
    Parallelism, Session, TcBatch, TcMode,
};
use lqos_model::Network;
use lqos_tc::{
    render_line, Allocation, DiffSummary, Interfaces, LeafSpec, Plan, PlanConfig, QueueStrategy,
    TcOp,
};

use super::inputs::InputArgs;
use super::plan::{ClassifierArg, Strategy};
use super::{EXIT_ERROR, EXIT_OK};

/// Where the plan comes from: LibreQoS inputs (planned here) or a plan file.
#[derive(clap::Args, Debug, Clone)]
pub struct PlanArgs {
    /// LibreQoS inputs to plan from (ignored with --plan).
    #[command(flatten)]
    pub inputs: InputArgs,
    /// Use this plan (JSON written by `lqos plan`) instead of the inputs.
    #[arg(long, value_name = "FILE")]
    pub plan: Option<PathBuf>,
    /// TX queues to plan for [default: lqos.conf override_available_queues,
    /// else the interfaces' num_tx_queues].
    #[arg(long, value_name = "N")]
    pub queues: Option<u32>,
    /// Leaf qdisc for circuits instead of lqos.conf's default_sqm (e.g.
    /// `pfifo`, `fq_codel`, `"cake diffserv4"`).
    #[arg(long, value_name = "SPEC")]
    pub sqm: Option<String>,
    /// How top-level subtrees are spread over the queues (as `lqos plan`).
    #[arg(long, value_enum, default_value_t = Strategy::Balanced)]
    pub strategy: Strategy,
    /// Classifier (as `lqos plan`) [default: lqos.conf [lqos] classifier,
    /// else none].
    #[arg(long, value_enum, value_name = "tc|none")]
    pub classifier: Option<ClassifierArg>,
}

/// Where the kernel state is.
#[derive(clap::Args, Debug, Clone)]
pub struct TargetArgs {
    /// Work inside this network namespace (`ip netns` name).
    #[arg(long, value_name = "NAME")]
    pub netns: Option<String>,
    /// State directory (last good plan, lock) [default: $LQOS_STATE_DIR, else /var/lib/lqos].
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
}

/// Loader choice.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendArg {
    /// rtnetlink, many requests per sendmsg.
    Netlink,
    /// `tc -b` processes fed on stdin.
    Tc,
}

/// Arguments of `lqos apply`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Plan source.
    #[command(flatten)]
    pub source: PlanArgs,
    /// Namespace and state directory.
    #[command(flatten)]
    pub target: TargetArgs,
    /// Loader.
    #[arg(long, value_enum, default_value = "netlink")]
    pub backend: BackendArg,
    /// One worker per interface (the default for --backend tc).
    #[arg(long, conflicts_with = "serial")]
    pub parallel: bool,
    /// One interface after another (the default for --backend netlink: the
    /// kernel handles tc messages one at a time under its RTNL lock, and two
    /// netlink workers only contend for it; `lqos bench` measures this).
    #[arg(long)]
    pub serial: bool,
    /// With --backend tc: one combined tc batch for all interfaces
    /// (LibreQoS's way).
    #[arg(long, conflicts_with_all = ["parallel", "serial"])]
    pub combined: bool,
    /// Delete the root and rebuild everything instead of sending the diff.
    #[arg(long)]
    pub full: bool,
    /// Print the ops that would be sent (tc syntax) and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Re-apply the last plan that loaded successfully.
    #[arg(long, conflicts_with = "plan")]
    pub rollback: bool,
    /// Read the trees back after loading and verify them.
    #[arg(long)]
    pub verify: bool,
}

/// Probe cache file in the state directory (qdisc kinds this boot supports).
pub const PROBE_CACHE_FILE: &str = "qdisc-kinds.json";

/// The state directory path (not created).
pub fn state_path(target: &TargetArgs) -> PathBuf {
    resolve_state_dir(target.state_dir.as_deref())
}

/// The allocation of the last good plan, for stable classids; `None` when
/// there is none (or it is unreadable: warned).
fn previous_allocation(state: &Path, netns: Option<&str>) -> Option<Allocation> {
    if !state.exists() {
        return None;
    }
    let dir = StateDir::open(state).ok()?;
    match load_saved_allocation(&dir, netns) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("lqos: warning: ignoring the saved plan ({e}); classids may change");
            None
        }
    }
}

fn interface_names(cfg: &PlanConfig) -> Vec<String> {
    match &cfg.interfaces {
        Interfaces::Bridge { download, upload } => vec![download.clone(), upload.clone()],
        Interfaces::OnAStick { interface, .. } => vec![interface.clone()],
    }
}

impl PlanArgs {
    /// The plan: from `--plan`, or planned from the inputs with the queue
    /// count from `--queues` / lqos.conf / the interfaces, and the previous
    /// allocation from the state directory; with the network it was
    /// planned from when known.
    pub fn resolve(
        &self,
        live: &dyn LiveSource,
        state: &Path,
        netns: Option<&str>,
    ) -> anyhow::Result<(Plan, Option<Network>)> {
        if let Some(p) = &self.plan {
            return super::plan::read_plan_record(p);
        }
        let loaded = self.inputs.load()?;
        loaded.require_valid()?;
        // Interface names first (queue count does not matter for that).
        let names =
            interface_names(&PlanConfig::from_lqos_config(&loaded.config, 2).context("lqos.conf")?);
        let queues = match (self.queues, loaded.config.queues.override_available_queues) {
            (Some(q), _) => q,
            (None, Some(q)) if q > 0 => q,
            _ => {
                let mut min = u32::MAX;
                for dev in &names {
                    let link = live
                        .link(dev)
                        .with_context(|| format!("probing the TX queues of {dev}"))?
                        .ok_or_else(|| ApplyError::NoInterface {
                            dev: dev.clone(),
                            netns: netns.map(str::to_string),
                        })
                        .context("cannot probe the TX queue count (give --queues N)")?;
                    min = min.min(link.num_tx_queues);
                }
                min
            }
        };
        let mut cfg = PlanConfig::from_lqos_config(&loaded.config, queues).context("lqos.conf")?;
        if let Some(spec) = &self.sqm {
            cfg.default_sqm = spec
                .parse::<LeafSpec>()
                .with_context(|| format!("--sqm {spec:?}"))?;
        }
        cfg.strategy = match self.strategy {
            Strategy::Balanced => QueueStrategy::Balanced,
            Strategy::RoundRobin => QueueStrategy::RoundRobin,
        };
        if let Some(c) = self.classifier {
            cfg.classifier = c.into();
        }
        let prev = previous_allocation(state, netns);
        let plan = lqos_tc::plan(&loaded.network, &cfg, prev.as_ref()).context("planning")?;
        Ok((plan, Some(loaded.network)))
    }
}

/// indicatif progress over all ops of a load.
struct Bar(indicatif::ProgressBar);

impl Progress for Bar {
    fn advance(&self, _dev: &str, n: usize) {
        self.0.inc(n as u64);
    }
}

fn summary(ops: &[TcOp]) -> String {
    DiffSummary::of(ops).to_string()
}

fn print_report(report: &ApplyReport) {
    let load = report.load.as_ref();
    for (i, c) in report.changes.iter().enumerate() {
        let kind = match &c.kind {
            LoadKind::Full { reason } => format!("full rebuild ({reason})"),
            LoadKind::Incremental => "incremental".to_string(),
        };
        let mut line = format!(
            "{}: {kind}, {} ops ({})",
            c.dev,
            c.ops.len(),
            summary(&c.ops)
        );
        if let Some(r) = load.and_then(|l| l.interfaces.get(i)) {
            line += &format!(", {} applied", r.ops_applied);
            if let Some(t) = r.timing {
                line += &format!(", {}", t.display());
            }
        }
        println!("{line}");
    }
    if let Some(l) = load {
        println!(
            "total: {} ops applied by {}; preflight {:.3}s, readback {:.3}s, diff {:.3}s, load {}",
            l.ops_applied(),
            l.backend,
            report.preflight.wall.as_secs_f64(),
            report.readback.wall.as_secs_f64(),
            report.diff.wall.as_secs_f64(),
            l.total.display()
        );
    }
}

fn print_dry_run(changes: &[(String, Vec<TcOp>)]) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut write = || -> std::io::Result<()> {
        for (dev, ops) in changes {
            for op in ops {
                writeln!(out, "{}", render_line(dev, op))?;
            }
        }
        out.flush()
    };
    match write() {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

/// Runs `lqos apply`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.combined && args.backend != BackendArg::Tc {
        anyhow::bail!("--combined needs --backend tc");
    }
    let netns = args.target.netns.clone();
    let state_path = state_path(&args.target);
    let live = NetlinkLive::new(netns.clone()).with_probe_cache(state_path.join(PROBE_CACHE_FILE));
    let (plan, network) = if args.rollback {
        let dir = StateDir::open(&state_path)?;
        let (saved, net) = load_saved(&dir, netns.as_deref())?.with_context(|| {
            format!(
                "no plan was applied successfully yet (state dir {}): nothing to roll back to",
                state_path.display()
            )
        })?;
        (saved.plan, net)
    } else {
        args.source.resolve(&live, &state_path, netns.as_deref())?
    };
    let parallelism = match (args.serial, args.parallel, args.backend) {
        (true, _, _) => Parallelism::Serial,
        (_, true, _) => Parallelism::Parallel,
        (_, _, BackendArg::Netlink) => Parallelism::Serial,
        (_, _, BackendArg::Tc) => Parallelism::Parallel,
    };
    let backend: Box<dyn Backend> = match args.backend {
        BackendArg::Netlink => Box::new(NetlinkBackend::new(netns.clone(), parallelism)),
        BackendArg::Tc => {
            let mode = match (args.combined, parallelism) {
                (true, _) => TcMode::Combined,
                (false, Parallelism::Serial) => TcMode::Serial,
                (false, Parallelism::Parallel) => TcMode::Parallel,
            };
            Box::new(TcBatch::new(netns.clone(), mode))
        }
    };
    let opts = ApplyOptions {
        full: args.full,
        dry_run: args.dry_run,
        verify_after: args.verify,
    };

    if args.dry_run {
        // No lock, nothing saved, the state dir is not even created.
        let targets = Target::from_plan(&plan);
        let changes: Vec<(String, Vec<TcOp>)> =
            match apply_targets(&targets, &live, backend.as_ref(), opts, &NoProgress) {
                Ok(r) => {
                    for c in &r.changes {
                        let kind = match &c.kind {
                            LoadKind::Full { reason } => format!("full rebuild ({reason})"),
                            LoadKind::Incremental => "incremental".into(),
                        };
                        eprintln!(
                            "{}: {kind}, {} ops ({})",
                            c.dev,
                            c.ops.len(),
                            summary(&c.ops)
                        );
                    }
                    r.changes.into_iter().map(|c| (c.dev, c.ops)).collect()
                }
                Err(e @ (ApplyError::NoInterface { .. } | ApplyError::Netlink { .. })) => {
                    eprintln!("lqos: cannot read the live trees ({e}); showing the full build");
                    plan.interfaces
                        .iter()
                        .map(|ip| {
                            let mut ops = vec![TcOp::delete_root()];
                            ops.extend(ip.ops.iter().cloned());
                            (ip.dev.clone(), ops)
                        })
                        .collect()
                }
                Err(e) => return Err(e.into()),
            };
        print_dry_run(&changes)?;
        return Ok(ExitCode::from(EXIT_OK));
    }

    let state = StateDir::open(&state_path)?;
    let session = Session {
        state: &state,
        netns: netns.as_deref(),
        live: &live,
        backend: backend.as_ref(),
    };
    let total_ops: usize = plan.interfaces.iter().map(|i| i.ops.len()).sum();
    let bar = (std::io::stderr().is_terminal() && total_ops >= 2000).then(|| {
        let pb = indicatif::ProgressBar::new(0);
        pb.set_style(
            indicatif::ProgressStyle::with_template("{spinner} loading {pos} ops [{elapsed}]")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
        );
        Bar(pb)
    });
    let progress: &dyn Progress = match &bar {
        Some(b) => b,
        None => &NoProgress,
    };
    let report = session.apply_planned(&plan, network.as_ref(), opts, progress);
    if let Some(b) = &bar {
        b.0.finish_and_clear();
    }
    let mut report = report?;
    print_report(&report);
    if let Some(load) = report.load.take() {
        if let Err(e) = load.into_result() {
            eprintln!("lqos: error: {e}");
            eprintln!(
                "lqos: the interface was left partly loaded; the next `lqos apply` continues from there (or use --rollback)"
            );
            return Ok(ExitCode::from(EXIT_ERROR));
        }
    }
    if let Some(v) = &report.verify {
        print!("{v}");
        if !v.is_clean() {
            eprintln!("lqos: error: the kernel's trees differ from the plan after loading");
            return Ok(ExitCode::from(EXIT_ERROR));
        }
    }
    Ok(ExitCode::from(EXIT_OK))
}
