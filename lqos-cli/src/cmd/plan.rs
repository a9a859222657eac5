//! `lqos plan`: plan the tc trees and write `tc_<iface>.txt`,
//! `linux_tc.txt`, `ip_map.csv` and `plan.json`.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use lqos_apply::{plan_files, ApplyError, PlanOverrides, QueueCount};
use lqos_model::Network;
use lqos_tc::{Allocation, Classifier, LeafSpec, Plan, PlanRecord, QueueStrategy};

use super::inputs::{print_report, InputArgs};
use super::EXIT_OK;

/// Queues used when neither `--queues` nor `override_available_queues` says.
pub const DEFAULT_QUEUES: u32 = 16;

/// Planner options shared by `plan`, `show` and `diff`.
#[derive(clap::Args, Debug, Clone)]
pub struct PlanOptions {
    /// TX queues per interface [default: lqos.conf override_available_queues,
    /// else 16 for plan/show/diff, the interfaces' TX queues for apply/verify].
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

impl PlanOptions {
    /// The overrides these options give on top of lqos.conf.
    pub fn overrides(&self) -> anyhow::Result<PlanOverrides> {
        let sqm = match &self.sqm {
            Some(s) => Some(
                s.parse::<LeafSpec>()
                    .with_context(|| format!("--sqm {s:?}"))?,
            ),
            None => None,
        };
        Ok(PlanOverrides {
            queues: self.queues,
            sqm,
            strategy: Some(match self.strategy {
                Strategy::Balanced => QueueStrategy::Balanced,
                Strategy::RoundRobin => QueueStrategy::RoundRobin,
            }),
            classifier: self.classifier.map(Classifier::from),
        })
    }
}

/// Plans `inputs` with `options` ([`lqos_apply::plan_files`]), printing
/// the inputs' problems to stderr; `queues` is the fallback queue count.
pub fn plan_with(
    inputs: &InputArgs,
    options: &PlanOptions,
    queues: QueueCount<'_>,
    previous: Option<&Allocation>,
) -> anyhow::Result<Plan> {
    Ok(plan_with_network(inputs, options, queues, previous)?.0)
}

/// [`plan_with`], also returning the network it planned (for the compact
/// plan record).
pub fn plan_with_network(
    inputs: &InputArgs,
    options: &PlanOptions,
    queues: QueueCount<'_>,
    previous: Option<&Allocation>,
) -> anyhow::Result<(Plan, Network)> {
    match plan_files(&inputs.inputs(), &options.overrides()?, queues, previous) {
        Ok(planned) => {
            print_report(&planned.report);
            Ok((planned.plan, planned.network))
        }
        Err(ApplyError::InvalidInputs { report }) => {
            print_report(&report);
            Err(ApplyError::InvalidInputs { report }.into())
        }
        Err(e) => Err(e.into()),
    }
}

/// Plans the inputs offline (queue count from `--queues`, lqos.conf, else
/// [`DEFAULT_QUEUES`]).
pub fn plan_inputs(
    inputs: &InputArgs,
    options: &PlanOptions,
    previous: Option<&Plan>,
) -> anyhow::Result<Plan> {
    plan_with(
        inputs,
        options,
        QueueCount::Default(DEFAULT_QUEUES),
        previous.map(|p| &p.allocation),
    )
}

/// Reads a plan.json ([`lqos_apply::read_plan`]).
pub fn read_plan(path: &Path) -> anyhow::Result<Plan> {
    Ok(lqos_apply::read_plan(path)?)
}

fn write_file(path: &Path, body: &str) -> anyhow::Result<()> {
    std::fs::write(path, body).with_context(|| format!("cannot write {}", path.display()))
}

/// Runs `lqos plan`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let previous = args.previous.as_deref().map(read_plan).transpose()?;
    let (plan, network) = plan_with_network(
        &args.inputs,
        &args.options,
        QueueCount::Default(DEFAULT_QUEUES),
        previous.as_ref().map(|p| &p.allocation),
    )?;
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
