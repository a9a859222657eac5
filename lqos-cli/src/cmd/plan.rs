//! `lqos plan`: plan the tc trees and write `tc_<iface>.txt`,
//! `linux_tc.txt`, `ip_map.csv` and `plan.json`.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use lqos_model::Network;
use lqos_tc::{Classifier, LeafSpec, Plan, PlanConfig, PlanRecord, QueueStrategy};

use super::inputs::InputArgs;
use super::EXIT_OK;

/// Queues used when neither `--queues` nor `override_available_queues` says.
pub const DEFAULT_QUEUES: u32 = 16;

/// Planner options shared by `plan`, `show` and `diff`.
#[derive(clap::Args, Debug, Clone)]
pub struct PlanOptions {
    /// TX queues per interface [default: lqos.conf override_available_queues, else 16].
    #[arg(long, value_name = "N")]
    pub queues: Option<u32>,
    /// Leaf qdisc for circuits, overriding lqos.conf default_sqm
    /// (e.g. "cake diffserv4", "fq_codel", "pfifo limit 1000", "none").
    #[arg(long, value_name = "SPEC")]
    pub sqm: Option<String>,
    /// How top-level subtrees are spread over the queues.
    #[arg(long, value_enum, default_value_t = Strategy::Balanced)]
    pub strategy: Strategy,
    /// Classifier: `tc` plans clsact + flower + skbedit filters with the
    /// tree; `none` leaves classification to an external program (feed it
    /// ip_map.csv) [default: lqos.conf [lqos] classifier, else none].
    #[arg(long, value_enum, value_name = "tc|none")]
    pub classifier: Option<ClassifierArg>,
}

/// `--classifier` values.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClassifierArg {
    /// clsact + flower + skbedit filters (needs cls_flower, act_skbedit, Linux >= 6.0).
    Tc,
    /// No classifier ops (LibreQoS's XDP or another program classifies).
    None,
}

impl From<ClassifierArg> for Classifier {
    fn from(c: ClassifierArg) -> Classifier {
        match c {
            ClassifierArg::Tc => Classifier::Tc,
            ClassifierArg::None => Classifier::None,
        }
    }
}

/// `--strategy` values.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// Largest subtree first into the least-loaded queue (default).
    Balanced,
    /// LibreQoS's round robin over top-level nodes.
    RoundRobin,
}

/// Arguments of `lqos plan`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Input files.
    #[command(flatten)]
    pub inputs: InputArgs,
    /// Planner options.
    #[command(flatten)]
    pub options: PlanOptions,
    /// A previous plan.json: keep its classids for circuits and nodes that
    /// still exist.
    #[arg(long, value_name = "FILE")]
    pub previous: Option<PathBuf>,
    /// Start each tc file with `qdisc del dev X root`.
    #[arg(long)]
    pub root_delete: bool,
    /// Output directory (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Also store the ops in plan.json (by default it holds the config, the
    /// tc-relevant inputs and the allocation; readers re-derive the ops).
    #[arg(long)]
    pub with_ops: bool,
}

/// Loads the inputs (failing on validation errors) and plans them.
pub fn plan_inputs(
    inputs: &InputArgs,
    options: &PlanOptions,
    previous: Option<&Plan>,
) -> anyhow::Result<Plan> {
    Ok(plan_network(inputs, options, previous)?.0)
}

/// [`plan_inputs`], also returning the network it planned.
pub fn plan_network(
    inputs: &InputArgs,
    options: &PlanOptions,
    previous: Option<&Plan>,
) -> anyhow::Result<(Plan, Network)> {
    let loaded = inputs.load()?;
    loaded.require_valid()?;
    let queues = options
        .queues
        .or(loaded
            .config
            .queues
            .override_available_queues
            .filter(|&q| q > 0))
        .unwrap_or(DEFAULT_QUEUES);
    let mut cfg = PlanConfig::from_lqos_config(&loaded.config, queues).with_context(|| {
        match &loaded.config_path {
            Some(p) => format!("config {}", p.display()),
            None => "built-in config".to_string(),
        }
    })?;
    if let Some(s) = &options.sqm {
        cfg.default_sqm = s.parse::<LeafSpec>().context("--sqm")?;
    }
    cfg.strategy = match options.strategy {
        Strategy::Balanced => QueueStrategy::Balanced,
        Strategy::RoundRobin => QueueStrategy::RoundRobin,
    };
    if let Some(c) = options.classifier {
        cfg.classifier = c.into();
    }
    let plan = lqos_tc::plan(&loaded.network, &cfg, previous.map(|p| &p.allocation))
        .with_context(|| format!("planning {}", inputs.devices.display()))?;
    Ok((plan, loaded.network))
}

/// Reads a plan.json.
pub fn read_plan(path: &Path) -> anyhow::Result<Plan> {
    Ok(read_plan_record(path)?.0)
}

/// Reads a plan.json: a [`PlanRecord`] (re-planned unless it holds its
/// ops; with the network it describes), or the whole-plan JSON of earlier
/// versions.
pub fn read_plan_record(path: &Path) -> anyhow::Result<(Plan, Option<Network>)> {
    let text =
        std::fs::read(path).with_context(|| format!("cannot read plan {}", path.display()))?;
    match serde_json::from_slice::<PlanRecord>(&text) {
        Ok(rec) => {
            let plan = rec
                .replan()
                .with_context(|| format!("plan {}", path.display()))?;
            let net = rec
                .inputs
                .as_ref()
                .map(|i| i.network())
                .transpose()
                .with_context(|| format!("plan {}", path.display()))?;
            Ok((plan, net))
        }
        Err(e) => match serde_json::from_slice::<Plan>(&text) {
            Ok(plan) => Ok((plan, None)),
            Err(_) => Err(anyhow::anyhow!(
                "{} is not a plan.json of this lqos: {e}",
                path.display()
            )),
        },
    }
}

fn write_file(path: &Path, body: &str) -> anyhow::Result<()> {
    std::fs::write(path, body).with_context(|| format!("cannot write {}", path.display()))
}

/// Runs `lqos plan`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let previous = args.previous.as_deref().map(read_plan).transpose()?;
    let (plan, network) = plan_network(&args.inputs, &args.options, previous.as_ref())?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    for ip in &plan.interfaces {
        let path = args.out.join(format!("tc_{}.txt", ip.dev));
        write_file(&path, &lqos_tc::render_interface(ip, args.root_delete))?;
    }
    write_file(
        &args.out.join("linux_tc.txt"),
        &lqos_tc::render_combined(&plan, args.root_delete),
    )?;
    write_file(&args.out.join("ip_map.csv"), &plan.ip_map.to_csv())?;
    let json_path = args.out.join("plan.json");
    let f = File::create(&json_path)
        .with_context(|| format!("cannot write {}", json_path.display()))?;
    let mut w = BufWriter::new(f);
    let record = PlanRecord::new(&plan, Some(&network), args.with_ops)?;
    serde_json::to_writer(&mut w, &record)?;
    w.flush()
        .with_context(|| format!("cannot write {}", json_path.display()))?;

    println!(
        "planned {} circuits and {} nodes on {} queue(s) per direction ({:?} strategy); {} addresses/prefixes in ip_map.csv, classifier {}",
        plan.allocation.circuits.len(),
        plan.allocation.nodes.len(),
        plan.allocation.queues,
        plan.config.strategy,
        plan.ip_map.len(),
        plan.config.classifier
    );
    for ip in &plan.interfaces {
        let counts: Vec<String> = ip
            .queue_class_counts
            .iter()
            .map(|c| c.to_string())
            .collect();
        println!(
            "{} ({:?}): {} ops; classes per queue: {}",
            ip.dev,
            ip.direction,
            ip.ops.len(),
            counts.join(" ")
        );
    }
    println!("wrote {}", args.out.display());
    Ok(ExitCode::from(EXIT_OK))
}
