//! `lqos bench`: reproduce the ens19/ens20 reload tests (LibreQoS issue
//! 526) in a private network namespace, and time lqos's own loaders.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use lqos_apply::backend::{Cancel, NoProgress, Progress};
use lqos_apply::live::KindProbe;
use lqos_apply::netns::{cleanup_stale, netns_available, ScratchNetns};
use lqos_bench::{ApplyCommand, BenchTree, Method, Runner, Sample, Summary};
use lqos_model::config::{BridgeConfig, LqosConfig};
use lqos_model::{GenParams, Network};
use lqos_tc::config::{LeafSpec, QueueStrategy};
use lqos_tc::ops::QdiscKind;
use lqos_tc::PlanConfig;

mod report;

use super::inputs::strategy_name;

use super::{Done, Interrupted, Outcome};
use crate::out::{note, out, outln};

use report::Row;

/// Interfaces of the scratch namespace, named like the users' boxes.
const DOWNLINK: &str = "ens19";
const UPLINK: &str = "ens20";

/// Groups samples into rows: (circuits, strategy index, method index, label).
type RowKey = (usize, usize, usize, String);

/// Arguments of `lqos bench`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Circuits in the generated network [default: 2000 for the quick run,
    /// 10000 otherwise].
    #[arg(long)]
    circuits: Option<usize>,
    /// Circuit counts to sweep instead (e.g. 1000,2000,5000,10000).
    #[arg(long, value_delimiter = ',', value_name = "N,N,...")]
    sweep: Vec<usize>,
    /// Runs of each method [default: 1 for the quick run, 3 otherwise].
    #[arg(long)]
    runs: Option<usize>,
    /// Methods to run, by number (1,2,3a,3b,4,5,6,5p,7,7p,8,9) or `all`
    /// [default: 1,2,4,5,5p,7,7p,8 for the quick run (no --circuits,
    /// --runs, --sweep or own files), else all].
    #[arg(long, value_delimiter = ',', value_name = "ID,ID,...")]
    methods: Vec<String>,
    /// Queue strategy: balanced, round-robin, or both (compared).
    #[arg(long, default_value = "balanced")]
    strategy: String,
    /// Make top-level sites uneven in size (shows what balancing buys).
    #[arg(long)]
    uneven: bool,
    /// TX queues of the veth pair (one HTB each).
    #[arg(long, default_value_t = 16)]
    queues: u32,
    /// Leaf qdisc [default: cake diffserv4 if this kernel has it, else pfifo].
    #[arg(long, value_name = "SPEC")]
    sqm: Option<String>,
    /// Include the classifier in every load (`tc`: clsact + one flower +
    /// skbedit filter per device address per interface; needs cls_flower,
    /// act_skbedit, Linux >= 6.0).
    #[arg(long, value_enum, default_value = "none", value_name = "tc|none")]
    classifier: super::inputs::ClassifierArg,
    /// Generator seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Bench your own network.json instead of a generated network.
    #[arg(long, value_name = "FILE", requires = "devices")]
    network: Option<PathBuf>,
    /// Bench your own ShapedDevices.csv instead of a generated network.
    #[arg(long, value_name = "FILE", requires = "network")]
    devices: Option<PathBuf>,
    /// Print the results as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// Also print the table as markdown.
    #[arg(long)]
    markdown: bool,
    /// Draw median wall time against circuit count into this SVG file.
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
    /// Bench these existing interfaces (download,upload) of the current
    /// namespace instead of a private veth pair, e.g. the lab's virtio NICs.
    /// Their root qdiscs are rebuilt many times and deleted at the end.
    #[arg(long, value_delimiter = ',', value_name = "DOWN,UP", num_args = 1)]
    interfaces: Vec<String>,
    /// With --interfaces: allow replacing a root qdisc that is not the
    /// kernel's default (it is deleted, not restored).
    #[arg(long, requires = "interfaces")]
    replace_existing: bool,
    /// Run even when the tree's leaf qdiscs are estimated not to fit in the
    /// kernel's memory (MemAvailable minus a margin; a cake leaf takes
    /// about 1 MiB). Without it such a bench is refused before loading.
    #[arg(long)]
    skip_memory_check: bool,
}

/// Runs `lqos bench`.
pub fn run(args: Args) -> Outcome {
    // A scratch namespace (or, with --interfaces, the host's qdiscs).
    super::privilege::require("`lqos bench`", true, args.interfaces.is_empty())?;
    let quick = args.circuits.is_none()
        && args.runs.is_none()
        && args.sweep.is_empty()
        && args.network.is_none();
    let methods = if args.methods.is_empty() && quick {
        Method::QUICK.to_vec()
    } else {
        parse_methods(&args.methods)?
    };
    let circuits = args.circuits.unwrap_or(if quick { 2000 } else { 10_000 });
    let runs = args.runs.unwrap_or(if quick { 1 } else { 3 });
    let strategies: Vec<QueueStrategy> = match args.strategy.as_str() {
        "both" => vec![QueueStrategy::Balanced, QueueStrategy::RoundRobin],
        s => vec![s.parse().map_err(anyhow::Error::msg)?],
    };
    anyhow::ensure!(runs > 0, "--runs must be at least 1");
    anyhow::ensure!(args.queues > 0, "--queues must be at least 1");
    netns_available()
        .map_err(|why| anyhow::anyhow!("lqos bench needs root and network namespaces: {why}"))?;
    let own = match (&args.network, &args.devices) {
        (Some(n), Some(d)) => Some(load_own(n, d)?),
        _ => None,
    };
    let sizes: Vec<usize> = match (&own, args.sweep.is_empty()) {
        (Some(net), _) => vec![net.circuits().len()],
        (None, true) => vec![circuits],
        (None, false) => args.sweep.clone(),
    };

    let ns_name = format!("lqos-bench-{}", std::process::id());
    let cancel = Cancel::new();
    let (ns, devs) = if args.interfaces.is_empty() {
        let _ = cleanup_stale("lqos-bench");
        install_interrupt_cleanup(Cleanup::Netns(ns_name.clone()), &cancel)?;
        let ns = ScratchNetns::with_veth(&ns_name, DOWNLINK, UPLINK, args.queues)
            .with_context(|| format!("creating network namespace {ns_name}"))?;
        (Some(ns), [DOWNLINK.to_string(), UPLINK.to_string()])
    } else {
        let devs = existing_interfaces(&args.interfaces, args.queues, args.replace_existing)?;
        install_interrupt_cleanup(Cleanup::Roots(devs.to_vec()), &cancel)?;
        (None, devs)
    };
    let [down, up] = [devs[0].as_str(), devs[1].as_str()];
    let sqm = choose_sqm(args.sqm.as_deref())?;
    let classifier: lqos_model::config::Classifier = args.classifier.into();
    if classifier == lqos_model::config::Classifier::Tc {
        if let Err(why) = KindProbe::new().probe_classifier()? {
            anyhow::bail!("--classifier tc: {why}; bench with --classifier none (or in the lab VM: cargo xtask lab run --nics -- lqos bench --classifier tc)");
        }
    }
    note!(
        "lqos bench: {} ({down}/{up}, {} TX queues), leaf qdisc {sqm}, classifier {classifier}, {runs} run(s) per method",
        match &ns {
            Some(ns) => format!("namespace {}", ns.name()),
            None => "existing interfaces".to_string(),
        },
        args.queues,
    );
    let ids: Vec<&str> = methods.iter().map(|m| m.id()).collect();
    let sizes_text: Vec<String> = sizes.iter().map(usize::to_string).collect();
    note!(
        "lqos bench: {}{} circuits, methods {}{}",
        if quick { "quick run: " } else { "" },
        sizes_text.join(", "),
        ids.join(","),
        if quick {
            "; the full table: lqos bench --circuits 10000 --runs 3 (several minutes on 2 cores)"
        } else {
            ""
        }
    );
    let _restore = RestoreRoots(if ns.is_none() { devs.to_vec() } else { vec![] });

    // Inputs and a state directory for the whole-process methods (5p, 7p):
    // written so that `lqos apply` plans exactly the bench's tree.
    let work = tempfile::Builder::new()
        .prefix("lqos-bench-")
        .tempdir()
        .context("creating the bench's work directory")?;
    let conf = bench_config(&sqm, down, up);
    let conf_path = work.path().join("lqos.conf");
    std::fs::write(&conf_path, lqos_model::write::write_config(&conf))
        .with_context(|| format!("writing {}", conf_path.display()))?;
    let state_dir = work.path().join("state");
    let exe = std::env::current_exe().context("finding the lqos executable")?;

    let total = sizes.len() * strategies.len() * runs * methods.len();
    let bar = Reporter::new(total);
    let mut done = 0usize;
    let mut samples: BTreeMap<RowKey, (Method, Vec<Sample>)> = BTreeMap::new();
    for &n in &sizes {
        let net = match &own {
            Some(net) => net.clone(),
            None => generated(n, args.seed, args.uneven),
        };
        let (net_path, dev_path) = match (&args.network, &args.devices) {
            (Some(n), Some(d)) => (n.clone(), d.clone()),
            _ => {
                let (n, d) = (
                    work.path().join("network.json"),
                    work.path().join("ShapedDevices.csv"),
                );
                std::fs::write(&n, lqos_model::write::write_network_json(&net))
                    .with_context(|| format!("writing {}", n.display()))?;
                std::fs::write(&d, lqos_model::write::write_shaped_devices(&net))
                    .with_context(|| format!("writing {}", d.display()))?;
                (n, d)
            }
        };
        for (si, &strategy) in strategies.iter().enumerate() {
            let mut cfg = PlanConfig::from_lqos_config(&conf, args.queues)?;
            cfg.strategy = strategy;
            cfg.classifier = classifier;
            if !sqm.is_cake() {
                cfg.fq_codel_threshold = None;
            }
            bar.message(format!("{n} circuits: planning"));
            let tree = BenchTree::plan(&net, &cfg)?;
            if !args.skip_memory_check {
                // Every method loads at most one full tree at a time.
                let empty = lqos_tc::tree::TcTree::default();
                let live: Vec<&lqos_tc::tree::TcTree> =
                    tree.base_ops.iter().map(|_| &empty).collect();
                lqos_apply::memory::check_memory(
                    &tree.base_ops,
                    &live,
                    lqos_apply::memory::MemInfo::read,
                )
                .with_context(|| format!("{n} circuits with {sqm} leaves"))?;
            }
            bar.message(format!("{n} circuits: initial load"));
            // A fresh state directory per tree: `lqos apply` keeps the
            // classids of the last plan it loaded.
            let _ = std::fs::remove_dir_all(&state_dir);
            let netns_args: Vec<std::ffi::OsString> = match &ns {
                Some(ns) => vec!["--netns".into(), ns.name().into()],
                None => vec![],
            };
            let runner =
                Runner::in_netns(ns.as_ref().map(|n| n.name())).with_apply_command(ApplyCommand {
                    program: exe.clone(),
                    full: vec!["--full".into()],
                    args: [
                        "apply".into(),
                        "--network".into(),
                        net_path.clone().into_os_string(),
                        "--devices".into(),
                        dev_path.clone().into_os_string(),
                        "--config".into(),
                        conf_path.clone().into_os_string(),
                        "--queues".into(),
                        args.queues.to_string().into(),
                        "--sqm".into(),
                        sqm.to_string().into(),
                        "--classifier".into(),
                        classifier.to_string().into(),
                        "--strategy".into(),
                        strategy_name(strategy).into(),
                        "--state-dir".into(),
                        state_dir.clone().into_os_string(),
                    ]
                    .into_iter()
                    .chain(netns_args)
                    .collect(),
                });
            runner.converge(&tree.base)?;
            for run in 0..runs {
                for (mi, &m) in methods.iter().enumerate() {
                    interrupted(&cancel, done)?;
                    let what = format!(
                        "{n} circuits{}, run {}/{runs}: method {} ({})",
                        if strategies.len() > 1 {
                            format!(" [{}]", strategy_name(strategy))
                        } else {
                            String::new()
                        },
                        run + 1,
                        m.id(),
                        m.name()
                    );
                    bar.message(what.clone());
                    let rows = runner.run(&tree, m, &cancel.with(&NoProgress));
                    interrupted(&cancel, done)?;
                    let rows = rows.with_context(|| format!("method {} ({})", m.id(), m.name()))?;
                    done += 1;
                    for r in rows {
                        bar.finished(done, &what, &r.label, &r.sample);
                        samples
                            .entry((n, si, mi, r.label))
                            .or_insert_with(|| (m, Vec::new()))
                            .1
                            .push(r.sample);
                    }
                }
            }
        }
    }
    bar.finish();
    drop(ns);

    let mut rows: Vec<Row> = samples
        .into_iter()
        .map(|((n, si, _, label), (m, s))| Row {
            id: m.id().to_string(),
            name: if strategies.len() > 1 {
                format!("{label} [{}]", strategy_name(strategies[si]))
            } else {
                label
            },
            circuits: n,
            summary: Summary::of(&s),
            ratio_to_combined: None,
        })
        .collect();
    report::fill_ratios(&mut rows);
    if args.json {
        let out = serde_json::json!({
            "namespace": if args.interfaces.is_empty() { Some(&ns_name) } else { None },
            "interfaces": [down, up],
            "queues": args.queues,
            "sqm": sqm.to_string(),
            "classifier": classifier.to_string(),
            "runs": runs,
            "rows": rows,
        });
        outln!("{}", serde_json::to_string_pretty(&out)?)?;
    } else {
        out!("{}", report::table(&rows))?;
    }
    if args.markdown {
        out!("\n{}", report::markdown(&rows))?;
    }
    if let Some(path) = &args.plot {
        report::plot_svg(&rows, path)?;
        note!("lqos bench: plot written to {}", path.display());
    }
    Ok(Done::Ok)
}

/// `Err(Interrupted)` once SIGINT, SIGTERM or SIGHUP set `cancel` (the
/// load under way stopped at its next batch); the namespace, or the
/// benched interfaces' root qdiscs, are removed on the way out.
fn interrupted(cancel: &Cancel, done: usize) -> anyhow::Result<()> {
    if cancel.cancelled() {
        return Err(Interrupted(format!(
            "stopped after {done} finished run(s); the bench's namespace (or the benched \
             interfaces' root qdiscs) removed"
        ))
        .into());
    }
    Ok(())
}

fn parse_methods(ids: &[String]) -> anyhow::Result<Vec<Method>> {
    if ids.is_empty() || ids.iter().any(|i| i.trim() == "all") {
        return Ok(Method::ALL.to_vec());
    }
    ids.iter()
        .map(|id| {
            Method::from_id(id.trim()).ok_or_else(|| {
                anyhow::anyhow!(
                    "unknown method {id:?} (expected one of {})",
                    Method::ALL.map(|m| m.id()).join(", ")
                )
            })
        })
        .collect()
}

/// A generated network; `uneven` gives top-level sites very different
/// sizes (site k gets about 1/k of the circuits).
fn generated(circuits: usize, seed: u64, uneven: bool) -> Network {
    let params = {
        let mut p = GenParams::with_circuits(circuits);
        p.seed = seed;
        p.sites = 48;
        p.site_skew = if uneven { 1.0 } else { 0.0 };
        p
    };
    lqos_model::generate(&params).network
}

fn load_own(network: &std::path::Path, devices: &std::path::Path) -> anyhow::Result<Network> {
    let inputs = crate::cmd::inputs::InputArgs {
        network: network.to_path_buf(),
        devices: devices.to_path_buf(),
        config: None,
    };
    let loaded = inputs.load()?;
    if let Err(e) = loaded.require_valid() {
        crate::cmd::inputs::print_report(&loaded.report);
        return Err(e.into());
    }
    Ok(loaded.network)
}

/// The leaf qdisc: as asked, else cake where the kernel has it, else pfifo
/// with a notice.
fn choose_sqm(asked: Option<&str>) -> anyhow::Result<LeafSpec> {
    if let Some(s) = asked {
        return s.parse().map_err(|e| anyhow::anyhow!("--sqm {s:?}: {e}"));
    }
    let cake = QdiscKind::Cake(Default::default());
    match KindProbe::new().probe(&cake)? {
        Ok(()) => Ok(LeafSpec::cake_diffserv4()),
        Err(why) => {
            note!(
                "lqos bench: notice: this kernel has no sch_cake ({why}); using pfifo leaves instead"
            );
            Ok("pfifo".parse().map_err(|e| anyhow::anyhow!("{e}"))?)
        }
    }
}

/// `--interfaces DOWN,UP`: both exist with enough TX queues, and carry no
/// root qdisc other than the kernel's default unless `replace` is set.
fn existing_interfaces(list: &[String], queues: u32, replace: bool) -> anyhow::Result<[String; 2]> {
    let [down, up] = list else {
        anyhow::bail!(
            "--interfaces {:?}: expected two interfaces, download,upload",
            list.join(",")
        );
    };
    anyhow::ensure!(down != up, "--interfaces: {down} given twice");
    let live = lqos_apply::live::NetlinkLive::new(None);
    for dev in [down, up] {
        use lqos_apply::live::LiveSource;
        let link = live
            .link(dev)?
            .ok_or_else(|| anyhow::anyhow!("--interfaces: no interface {dev} here"))?;
        anyhow::ensure!(
            link.num_tx_queues >= queues,
            "--interfaces: {dev} has {} TX queues, the bench wants {queues} (use --queues {})",
            link.num_tx_queues,
            link.num_tx_queues
        );
        if let Some(root) = foreign_root(&live.dump(dev)?) {
            anyhow::ensure!(
                replace,
                "--interfaces: {dev} already has a root qdisc ({root}) that is not the kernel's default; \
                 the bench would delete it and leave none: pass --replace-existing if that is what you want"
            );
            note!("lqos bench: notice: replacing {dev}'s root qdisc {root} (--replace-existing)");
        }
    }
    Ok([down.clone(), up.clone()])
}

/// The root qdisc of `tree` if it is not one the kernel made itself
/// (`noqueue 0:`, `pfifo_fast 0:`, a default `mq 0:`): `"htb 1:"`.
fn foreign_root(tree: &lqos_tc::tree::TcTree) -> Option<String> {
    tree.qdiscs
        .values()
        .find(|q| q.parent == lqos_tc::TcHandle::ROOT && !q.is_kernel_default())
        .map(|q| format!("{} {}", q.kind.name(), q.handle))
}

/// Deletes the root qdiscs of existing interfaces when the bench ends
/// (normally or on error): they go back to the kernel's default.
struct RestoreRoots(Vec<String>);

impl Drop for RestoreRoots {
    fn drop(&mut self) {
        for dev in &self.0 {
            delete_root(dev);
        }
    }
}

fn delete_root(dev: &str) {
    let _ = std::process::Command::new("tc")
        .args(["qdisc", "del", "dev", dev, "root"])
        .output();
}

/// What an interrupted bench must undo.
enum Cleanup {
    /// Delete the scratch namespace.
    Netns(String),
    /// Delete the root qdiscs of these existing interfaces.
    Roots(Vec<String>),
}

/// Ctrl-C, SIGTERM or SIGHUP set `cancel`: the load under way stops at its
/// next batch and the bench returns [`Interrupted`] (the namespace, or the
/// benched interfaces' root qdiscs, are removed on drop as on any other
/// way out). A second signal does the cleanup and exits at once.
fn install_interrupt_cleanup(cleanup: Cleanup, cancel: &Cancel) -> anyhow::Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])
        .context("installing the Ctrl-C handler")?;
    let cancel = cancel.clone();
    std::thread::spawn(move || {
        let mut forever = signals.forever();
        if forever.next().is_none() {
            return;
        }
        cancel.cancel();
        if forever.next().is_none() {
            return;
        }
        match &cleanup {
            Cleanup::Netns(ns) => {
                let _ = std::process::Command::new("ip")
                    .args(["netns", "del", ns])
                    .status();
                note!("\nlqos bench: interrupted again; removed namespace {ns}");
            }
            Cleanup::Roots(devs) => {
                for d in devs {
                    delete_root(d);
                }
                note!(
                    "\nlqos bench: interrupted again; deleted the root qdiscs of {}",
                    devs.join(", ")
                );
            }
        }
        // The second signal: at once, as `lqos apply` does.
        std::process::exit(i32::from(crate::EXIT_INTERRUPTED));
    });
    Ok(())
}

/// The `lqos.conf` of a bench: the scratch interfaces as a bridge, the
/// default capacities, and the leaf qdisc.
fn bench_config(sqm: &LeafSpec, down: &str, up: &str) -> LqosConfig {
    let mut c = LqosConfig::default();
    c.bridge = Some(BridgeConfig {
        to_internet: up.to_string(),
        to_network: down.to_string(),
    });
    c.single_interface = None;
    c.queues.default_sqm = sqm.to_string().into();
    c
}

/// Progress: a bar on a terminal, else one line per finished run.
struct Reporter {
    bar: Option<ProgressBar>,
    total: usize,
}

impl Reporter {
    fn new(total: usize) -> Reporter {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(total as u64);
            bar.set_style(
                ProgressStyle::with_template("[{elapsed_precise}] {bar:30} {pos}/{len} {msg}")
                    .expect("valid template"),
            );
            bar
        });
        Reporter { bar, total }
    }

    fn message(&self, msg: String) {
        if let Some(b) = &self.bar {
            b.set_message(msg);
        }
    }

    fn finished(&self, done: usize, what: &str, label: &str, s: &Sample) {
        match &self.bar {
            Some(b) => b.set_position(done as u64),
            None => note!(
                "lqos bench: [{done}/{}] {what}{}: wall {:.3}s user {:.3}s sys {:.3}s, {} ops",
                self.total,
                if label.contains(" alone") {
                    format!(" {label}")
                } else {
                    String::new()
                },
                s.wall.as_secs_f64(),
                s.user.as_secs_f64(),
                s.sys.as_secs_f64(),
                s.ops
            ),
        }
    }

    fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lqos_tc::ops::Qdisc;
    use lqos_tc::tree::TcTree;
    use lqos_tc::TcHandle;

    fn tree(root: Qdisc) -> TcTree {
        let mut t = TcTree::default();
        t.qdiscs.insert(root.handle, root);
        t
    }

    #[test]
    fn kernel_default_roots_are_not_foreign() {
        let noqueue = Qdisc {
            parent: TcHandle::ROOT,
            handle: TcHandle::UNSPEC,
            kind: QdiscKind::Other("noqueue".into()),
        };
        assert_eq!(foreign_root(&tree(noqueue)), None);
        assert_eq!(foreign_root(&TcTree::default()), None);
        let mq = Qdisc {
            parent: TcHandle::ROOT,
            handle: TcHandle::new(0x7fff, 0),
            kind: QdiscKind::Mq,
        };
        assert_eq!(foreign_root(&tree(mq)).as_deref(), Some("mq 7fff:"));
    }
}
