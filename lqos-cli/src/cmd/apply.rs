//! `lqos apply`: load a plan into the kernel (incremental by default).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::Context;
use lqos_apply::backend::{
    Backend, Cancel, IfaceOps, NetlinkBackend, NoProgress, Parallelism, Progress, TcBatch, TcMode,
};
use lqos_apply::error::{ApplyError, Stopped};
use lqos_apply::inputs::{plan_raw, PlanOverrides, QueueCount, RawInputs};
use lqos_apply::journal::Journal;
use lqos_apply::live::{LiveSource, NetlinkLive};
use lqos_apply::load::{Change, Prefetched};
use lqos_apply::saved::{load_saved_allocation, SavedPlan};
use lqos_apply::state::StateFile;
use lqos_apply::state::{resolve_state_dir, NetnsState};
use lqos_apply::{apply_plan, guard, ApplyOptions, ApplyReport, Session};
use lqos_model::config::LqosConfig;
use lqos_model::Network;
use lqos_tc::render::render_line;
use lqos_tc::Plan;

use super::adopt::adopt;
use super::inputs::print_report as print_problems;
use super::inputs::InputArgs;
use super::inputs::PlanOptions;
use super::{Done, Interrupted, Outcome};
use crate::hints::{LoadStopped, Refused};
use crate::out::{note, outln, with_stdout};
use crate::EXIT_INTERRUPTED;

/// Where the plan comes from: LibreQoS inputs (planned here) or a plan file.
#[derive(clap::Args, Debug, Clone)]
pub struct PlanArgs {
    /// LibreQoS inputs to plan from (ignored with --plan).
    #[command(flatten)]
    pub inputs: InputArgs,
    /// Use this plan (JSON written by `lqos plan`) instead of the inputs.
    #[arg(long, value_name = "FILE")]
    pub plan: Option<PathBuf>,
    /// Planner options (ignored with --plan).
    #[command(flatten)]
    pub options: PlanOptions,
    /// Adopt the tree a LibreQoS box built: plan from the allocation in
    /// LibreQoS's state directory DIR (shaping/queuingStructure.json,
    /// stats/statsByCircuit.json: every node's and circuit's classid) and
    /// the leaf handles the kernel holds, instead of the last good plan, so
    /// LibreQoS's tree and classids are kept (its XDP map stays right).
    /// Afterwards the saved plan keeps them.
    #[arg(long, value_name = "DIR", conflicts_with = "plan")]
    pub adopt_libreqos: Option<PathBuf>,
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
    /// Re-apply the last plan that loaded successfully (with --to N: the
    /// input set N of the journal, `lqos journal`).
    #[arg(long, conflicts_with = "plan")]
    pub rollback: bool,
    /// With --rollback: the journal's input set N (1: the newest, 2: the
    /// one live before it, ...).
    #[arg(long, value_name = "N", requires = "rollback")]
    pub to: Option<usize>,
    /// Apply even when more circuits would be removed than the removal
    /// guard allows (an empty input is refused all the same).
    #[arg(long)]
    pub allow_removals: bool,
    /// Refuse to remove more circuits than this (a count, or a percentage
    /// such as `5%`; `0`: no limit) [default: lqos.conf's `[lqos]
    /// max_removals`, else more than 10% and more than 10 circuits].
    #[arg(long, value_name = "N|P%")]
    pub max_removals: Option<lqos_model::config::RemovalLimit>,
    /// Read the trees back after loading and verify them.
    #[arg(long)]
    pub verify: bool,
    /// Load even when the new leaf qdiscs are estimated not to fit in the
    /// kernel's memory (MemAvailable minus a margin; a cake leaf takes
    /// about 1 MiB). Without it such a load is refused before anything
    /// changes.
    #[arg(long)]
    pub skip_memory_check: bool,
}

impl TargetArgs {
    /// The state of the target's namespace in its state directory
    /// (nothing is created until written).
    pub fn state(&self) -> NetnsState {
        NetnsState::new(
            resolve_state_dir(self.state_dir.as_deref()),
            self.netns.as_deref(),
        )
    }
}

/// The plan last applied in `target` (the state directory's record of it:
/// the inputs and the options it was applied with, re-planned), if one
/// was; a state directory that does not exist is not created.
pub fn applied_plan(target: &TargetArgs) -> anyhow::Result<Option<SavedPlan>> {
    Ok(lqos_apply::saved::load_saved_plan(&target.state())?)
}

/// `the plan applied at TIME (STATE_DIR/last-plan.json)`: what a command
/// that describes it says it used.
pub fn applied_from(target: &TargetArgs, saved: &SavedPlan) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(saved.applied_at);
    format!(
        "the plan applied at {} ({})",
        humantime::format_rfc3339_seconds(at),
        target.state().file(StateFile::LastPlan).display()
    )
}

impl PlanArgs {
    /// The plan: from `--plan`, or planned from the inputs with the queue
    /// count from `--queues` / lqos.conf / the interfaces, keeping the
    /// classids of the last good plan in the state directory; with the
    /// network it was made from when known (so the saved state can be the
    /// compact record) and the config.
    pub fn resolve_with_network(
        &self,
        live: &dyn LiveSource,
        state: &NetnsState,
    ) -> anyhow::Result<Resolved> {
        self.resolve_from(live, state, None)
    }

    /// [`PlanArgs::resolve_with_network`], planning `from` (a journal
    /// entry: its inputs, with the overrides it was applied with under
    /// those of the command line) instead of the files when given.
    pub fn resolve_from(
        &self,
        live: &dyn LiveSource,
        state: &NetnsState,
        from: Option<(PlanOverrides, RawInputs)>,
    ) -> anyhow::Result<Resolved> {
        let (applied_with, raw) = match from {
            Some((o, r)) => (o, Some(r)),
            None => (PlanOverrides::default(), None),
        };
        // Adopting: LibreQoS's allocation stands for the last good plan's
        // (classids to keep, and what the removal guard counts from).
        let mut options = self.options.clone();
        let adoption = match &self.adopt_libreqos {
            Some(dir) => Some(adopt(dir, &self.inputs, &mut options, Some(live))?),
            None => None,
        };
        let prev = match &adoption {
            Some(a) => Some(a.seed.clone()),
            None => load_saved_allocation(state).unwrap_or_else(|e| {
                note!("lqos: warning: ignoring the saved plan ({e}); classids may change");
                None
            }),
        };
        if let (Some(p), None) = (&self.plan, &raw) {
            let (plan, network) = lqos_apply::inputs::read_plan_record(p)?;
            return Ok(Resolved {
                plan,
                network,
                config: None,
                previous: prev,
                raw: None,
                overrides: PlanOverrides::default(),
            });
        }
        let inputs = self.inputs.inputs();
        let raw = match raw {
            Some(r) => r,
            None => inputs.read()?,
        };
        let overrides = applied_with.under(&options.overrides()?);
        let planned = match plan_raw(
            &inputs,
            &raw,
            &overrides,
            QueueCount::FromInterfaces(live),
            prev.as_ref(),
        ) {
            Ok(p) => {
                print_problems(&p.report);
                super::inputs::print_squashed(&p.plan);
                p
            }
            Err(ApplyError::InvalidInputs { report }) => {
                print_problems(&report);
                return Err(anyhow::Error::from(ApplyError::InvalidInputs { report }))
                    .context("cannot plan");
            }
            Err(e) => return Err(anyhow::Error::from(e)).context("cannot plan"),
        };
        if let Some(a) = &adoption {
            a.report(&planned.plan)?;
        }
        Ok(Resolved {
            plan: planned.plan,
            network: Some(planned.network),
            config: Some(planned.config),
            previous: prev,
            raw: Some(raw),
            overrides,
        })
    }
}

/// A plan as [`PlanArgs::resolve_with_network`] found it.
pub struct Resolved {
    /// The plan.
    pub plan: Plan,
    /// The network it was planned from, when known.
    pub network: Option<Network>,
    /// The config it was planned with (`None` for a plan file).
    pub config: Option<LqosConfig>,
    /// The last good plan's allocation, if there is one.
    pub previous: Option<lqos_tc::Allocation>,
    /// The inputs planned (`None` for a plan file).
    pub raw: Option<RawInputs>,
    /// The planner settings given on top of lqos.conf (kept with the
    /// inputs in the journal).
    pub overrides: PlanOverrides,
}

impl Resolved {
    /// The removal guard: an error (the refusal; `main` adds how to go on)
    /// when the plan removes more circuits than the limit, or comes from an
    /// empty input.
    fn guard(&self, args: &Args) -> anyhow::Result<()> {
        let limit = args
            .max_removals
            .or(self.config.as_ref().map(|c| c.lqos.max_removals))
            .unwrap_or_default();
        let none = lqos_tc::Allocation::default();
        let r = guard::removals(
            self.previous.as_ref().unwrap_or(&none),
            &self.plan.allocation,
        );
        let empty: Vec<&str> = self
            .raw
            .as_ref()
            .and_then(|r| r.config.as_deref())
            .filter(|c| c.trim().is_empty())
            .map(|_| "lqos.conf")
            .into_iter()
            .collect();
        match guard::check(limit, &r, &empty) {
            Ok(()) => Ok(()),
            Err(e @ guard::Refusal::TooManyRemovals { .. }) if args.allow_removals => {
                note!("lqos: --allow-removals: {e}");
                Ok(())
            }
            Err(e) => Err(Refused(e).into()),
        }
    }

    /// Records the inputs as applied (the journal).
    fn journal(&self, state: &NetnsState, source: &str) {
        let Some(raw) = &self.raw else { return };
        let circuits = self.plan.allocation.circuits.len();
        let r = Journal::open(state)
            .and_then(|j| j.push(raw.into(), &self.overrides, circuits, source));
        if let Err(e) = r {
            note!("lqos: warning: cannot write the input journal: {e}");
        }
    }
}

/// indicatif progress over all ops of a load.
struct Bar(indicatif::ProgressBar);

impl Progress for Bar {
    fn advance(&self, _dev: &str, n: usize) {
        self.0.inc(n as u64);
    }
}

/// `ens19: full rebuild (why), N ops (a added, c changed, r removed)`.
fn change_line(c: &Change<'_>) -> String {
    format!(
        "{}: {}, {} ops ({})",
        c.stream.dev,
        crate::hints::load_kind(&c.kind),
        c.stream.len(),
        c.stream.summary()
    )
}

fn print_report(report: &ApplyReport<'_>) -> anyhow::Result<()> {
    let load = report.load.as_ref();
    for (i, c) in report.changes.iter().enumerate() {
        let mut line = change_line(c);
        if let Some(r) = load.and_then(|l| l.interfaces.get(i)) {
            line += &format!(", {} applied", r.ops_applied);
            if let Some(t) = r.timing {
                line += &format!(", {}", t.display());
            }
        }
        outln!("{line}")?;
    }
    if let Some(m) = &report.memory {
        outln!(
            "memory: the load adds about {} of kernel memory ({}); it fits",
            lqos_tc::memory::human_bytes(m.net_bytes().max(0) as u64),
            m.describe()
        )?;
    }
    if let Some(l) = load {
        outln!(
            "total: {} ops applied by {}; preflight {:.3}s, readback {:.3}s, diff {:.3}s, load {}",
            l.ops_applied(),
            l.backend,
            report.preflight.wall.as_secs_f64(),
            report.readback.wall.as_secs_f64(),
            report.diff.wall.as_secs_f64(),
            l.total.display()
        )?;
    }
    Ok(())
}

fn print_dry_run<'a>(streams: impl Iterator<Item = &'a IfaceOps<'a>>) -> anyhow::Result<()> {
    with_stdout(|out| {
        for s in streams {
            for op in s.sent() {
                writeln!(out, "{}", render_line(&s.dev, &op))?;
            }
        }
        Ok(())
    })
}

fn backend(args: &Args, netns: Option<String>) -> Box<dyn Backend> {
    let parallelism = match (args.serial, args.parallel, args.backend) {
        (true, _, _) => Parallelism::Serial,
        (_, true, _) => Parallelism::Parallel,
        (_, _, BackendArg::Netlink) => Parallelism::Serial,
        (_, _, BackendArg::Tc) => Parallelism::Parallel,
    };
    match args.backend {
        BackendArg::Netlink => Box::new(NetlinkBackend::new(netns, parallelism)),
        BackendArg::Tc => {
            let mode = match (args.combined, parallelism) {
                (true, _) => TcMode::Combined,
                (false, Parallelism::Serial) => TcMode::Serial,
                (false, Parallelism::Parallel) => TcMode::Parallel,
            };
            Box::new(TcBatch::new(netns, mode))
        }
    }
}

/// SIGINT (Ctrl-C) and SIGTERM cancel the load: it stops at the next
/// batch of ops, reports what was applied and saves nothing; a second
/// signal exits at once.
fn cancel_on_signals() -> anyhow::Result<Cancel> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let cancel = Cancel::new();
    for sig in [SIGINT, SIGTERM] {
        // Registered first: it sees the flag the second signal finds set.
        signal_hook::flag::register_conditional_shutdown(
            sig,
            i32::from(EXIT_INTERRUPTED),
            cancel.flag(),
        )
        .context("installing the signal handlers")?;
        signal_hook::flag::register(sig, cancel.flag())
            .context("installing the signal handlers")?;
    }
    Ok(cancel)
}

fn no_state(state_path: &Path) -> anyhow::Error {
    anyhow::anyhow!(
        "no plan was applied successfully yet (state dir {}): nothing to roll back to",
        state_path.display()
    )
}

/// Runs `lqos apply`.
pub fn run(args: Args) -> Outcome {
    super::privilege::require("`lqos apply`", !args.dry_run, args.target.netns.is_some())?;
    if args.combined && args.backend != BackendArg::Tc {
        anyhow::bail!("--combined needs --backend tc");
    }
    let netns = args.target.netns.clone();
    let state = args.target.state();
    let live = NetlinkLive::new(netns.clone()).with_probe_cache(state.file(StateFile::ProbeCache));
    let backend = backend(&args, netns.clone());
    let opts = {
        let mut p = ApplyOptions::default();
        p.full = args.full;
        p.dry_run = args.dry_run;
        p.verify_after = args.verify;
        p.skip_memory_check = args.skip_memory_check;
        p
    };
    // Rollback re-applies the saved plan through the session; it needs the
    // state directory to exist.
    if args.rollback && !state.path().exists() {
        return Err(no_state(state.path()));
    }
    // The usual reload (planned from the inputs, not a dry run): take the
    // lock first, then read the live trees on a second thread while this
    // one reads the saved allocation, parses the inputs and plans (the
    // interfaces are known from lqos.conf alone). The lock keeps any other
    // apply from changing the trees between that read and the diff.
    // (A dry run sends nothing: Ctrl-C ends it as usual.)
    let cancel = if args.dry_run {
        Cancel::new()
    } else {
        cancel_on_signals()?
    };
    if (!args.rollback || args.to.is_some())
        && !args.dry_run
        && args.source.plan.is_none()
        && args.source.adopt_libreqos.is_none()
    {
        let lock = state.lock()?;
        let from_journal = match args.to {
            Some(n) => {
                let (entry, raw) = Journal::open(&state)?.inputs(n)?;
                Some((entry.overrides, raw))
            }
            None => None,
        };
        let devs = args.source.inputs.inputs_quiet().interface_hint();
        let reader = NetlinkLive::new(netns.clone());
        let (resolved, prefetched) = Prefetched::overlap(&live, &reader, &devs, || {
            args.source.resolve_from(&live, &state, from_journal)
        })?;
        resolved.guard(&args)?;
        let (plan, network) = (&resolved.plan, resolved.network.as_ref());
        let session = Session {
            state: &state,
            live: &prefetched,
            backend: backend.as_ref(),
        };
        let bar = progress_bar(plan);
        let report = session.apply_planned_locked(
            &lock,
            plan,
            network,
            opts,
            &cancel.with(bar.as_ref().map_or(&NoProgress as &dyn Progress, |b| b)),
        );
        if let Some(b) = &bar {
            b.0.finish_and_clear();
        }
        let report = report?;
        if report.load.as_ref().is_some_and(|l| l.is_ok()) {
            let source = match args.to {
                Some(n) => format!("apply --rollback --to {n}"),
                None => "apply".to_string(),
            };
            resolved.journal(&state, &source);
        }
        let code = finish(report, Some(prefetched.timing()));
        // The process ends here: the plan, the network and the allocation
        // (a few hundred thousand small allocations at 10,000 circuits)
        // need not be freed one by one first. The lock is released as usual.
        std::mem::forget(prefetched);
        std::mem::forget(resolved);
        return code;
    }

    let (plan, network) = if args.rollback {
        (None, None)
    } else {
        let r = args.source.resolve_with_network(&live, &state)?;
        if !args.dry_run {
            r.guard(&args)?;
        }
        (Some(r.plan), r.network)
    };

    if args.dry_run {
        // No lock, nothing saved, the state dir is not even created.
        let result = match &plan {
            Some(p) => apply_plan(p, &live, backend.as_ref(), opts, &NoProgress),
            None => Session {
                state: &state,
                live: &live,
                backend: backend.as_ref(),
            }
            .rollback(opts, &NoProgress),
        };
        match (result, &plan) {
            (Ok(r), _) => {
                for c in &r.changes {
                    note!("{}", change_line(c));
                }
                print_dry_run(r.changes.iter().map(|c| &c.stream))?;
            }
            (Err(e @ (ApplyError::NoInterface { .. } | ApplyError::Netlink { .. })), Some(p)) => {
                note!("lqos: cannot read the live trees ({e}); showing the full build");
                let full: Vec<IfaceOps> = IfaceOps::all_from_plan(p)
                    .into_iter()
                    .map(IfaceOps::with_delete_root)
                    .collect();
                print_dry_run(full.iter())?;
            }
            (Err(e), _) => return Err(e.into()),
        }
        return Ok(Done::Ok);
    }

    let session = Session {
        state: &state,
        live: &live,
        backend: backend.as_ref(),
    };
    let total_ops: usize = plan.as_ref().map_or(usize::MAX, |p| {
        p.interfaces.iter().map(|i| i.ops.len()).sum()
    });
    let bar = bar_for(total_ops);
    let progress: &dyn Progress = match &bar {
        Some(b) => b,
        None => &NoProgress,
    };
    let progress = cancel.with(progress);
    let report = match &plan {
        Some(p) => session.apply_planned(p, network.as_ref(), opts, &progress),
        None => session.rollback(opts, &progress),
    };
    if let Some(b) = &bar {
        b.0.finish_and_clear();
    }
    // A missing saved plan is the library's State error naming the file.
    finish(report?, None)
}

/// A progress bar for a load of `total_ops` (only on a terminal, and only
/// for loads big enough to watch).
fn bar_for(total_ops: usize) -> Option<Bar> {
    (std::io::stderr().is_terminal() && total_ops >= 2000).then(|| {
        let pb = indicatif::ProgressBar::new(0);
        pb.set_style(
            indicatif::ProgressStyle::with_template("{spinner} loading {pos} ops [{elapsed}]")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
        );
        Bar(pb)
    })
}

fn progress_bar(plan: &Plan) -> Option<Bar> {
    bar_for(plan.interfaces.iter().map(|i| i.ops.len()).sum())
}

/// Prints the report (with `readback`, the time of the trees read ahead
/// during planning, when they were) and turns a failed or interrupted
/// load, or a verify that found drift, into the error `main` maps.
fn finish(mut report: ApplyReport<'_>, readback: Option<lqos_apply::timing::Timing>) -> Outcome {
    if let Some(t) = readback {
        // The read-ahead's own time (apply_plan only took those trees,
        // and dumped any interface the read-ahead did not know).
        report.readback = report.readback + t;
    }
    print_report(&report)?;
    if let Some(load) = report.load.take() {
        let applied = load.ops_applied();
        if let Err(e) = load.into_result() {
            if let ApplyError::Incomplete {
                reason: Stopped::Cancelled { .. },
                ..
            } = &e
            {
                return Err(Interrupted(format!(
                    "stopped after {applied} ops ({e}); nothing was saved (the last good plan \
                     stays); the next `lqos apply` continues from there"
                ))
                .into());
            }
            // With its causes (e.g. why the tc process failed); the hint
            // says the interface was left partly loaded and how to go on.
            return Err(anyhow::Error::from(e).context(LoadStopped));
        }
    }
    if let Some(v) = &report.verify {
        crate::out::out!("{v}")?;
        if !v.is_clean() {
            anyhow::bail!("the kernel's trees differ from the plan after loading");
        }
    }
    Ok(Done::Ok)
}
