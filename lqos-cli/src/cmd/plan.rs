//! `lqos plan`: plan the tc trees and write `tc_<iface>.txt`,
//! `linux_tc.txt`, `ip_map.csv` and `plan.json`.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use lqos_apply::error::ApplyError;
use lqos_apply::inputs::{plan_files, Planned, QueueCount};
use lqos_model::Network;
use lqos_tc::record::PlanRecordRef;
use lqos_tc::{Allocation, Plan};

use super::inputs::{print_report, print_squashed, InputArgs, PlanOptions};
use super::{Done, Outcome};
use crate::out::outln;

/// Queues used when neither `--queues` nor `override_available_queues` says.
pub const DEFAULT_QUEUES: u32 = 16;

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
    /// Plan from the allocation a LibreQoS box recorded in its state
    /// directory DIR (shaping/queuingStructure.json,
    /// stats/statsByCircuit.json): LibreQoS's classids, so ip_map.csv
    /// matches its XDP map. Leaf handles are lqos's (`lqos apply
    /// --adopt-libreqos` takes the kernel's).
    #[arg(long, value_name = "DIR", conflicts_with = "previous")]
    pub adopt_libreqos: Option<PathBuf>,
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

/// Plans `inputs` with `options` ([`lqos_apply::inputs::plan_files`]), printing
/// the inputs' problems to stderr; `queues` is the fallback queue count.
pub fn plan_with(
    inputs: &InputArgs,
    options: &PlanOptions,
    queues: QueueCount<'_>,
    previous: Option<&Allocation>,
) -> anyhow::Result<Plan> {
    Ok(plan_with_network(inputs, options, queues, previous)?.plan)
}

/// [`plan_with`], also returning the network it planned (for the compact
/// plan record) and the config.
pub fn plan_with_network(
    inputs: &InputArgs,
    options: &PlanOptions,
    queues: QueueCount<'_>,
    previous: Option<&Allocation>,
) -> anyhow::Result<Planned> {
    match plan_files(&inputs.inputs(), &options.overrides()?, queues, previous) {
        Ok(planned) => {
            print_report(&planned.report);
            print_squashed(&planned.plan);
            Ok(planned)
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

/// Reads a plan.json ([`lqos_apply::inputs::read_plan`]).
pub fn read_plan(path: &Path) -> anyhow::Result<Plan> {
    Ok(lqos_apply::inputs::read_plan(path)?)
}

/// Creates `path` and hands it to `body` (the renderers write in 64 KiB
/// chunks, so no buffering is added), naming the path in any error.
fn write_with(
    path: &Path,
    body: impl FnOnce(&mut File) -> std::io::Result<()>,
) -> anyhow::Result<()> {
    let mut f = File::create(path).with_context(|| format!("cannot write {}", path.display()))?;
    body(&mut f).with_context(|| format!("cannot write {}", path.display()))
}

/// Writes plan.json: the compact record of `plan` (with the ops when
/// `with_ops`).
fn write_plan_json(
    path: &Path,
    plan: &Plan,
    network: &Network,
    with_ops: bool,
) -> anyhow::Result<()> {
    // Borrowed: each row is made as it is written (no copy of the record).
    let record = PlanRecordRef::new(plan, Some(network), with_ops)?;
    let f = File::create(path).with_context(|| format!("cannot write {}", path.display()))?;
    let mut w = BufWriter::with_capacity(64 * 1024, f);
    serde_json::to_writer(&mut w, &record)
        .with_context(|| format!("cannot write {}", path.display()))?;
    w.flush()
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// Runs `lqos plan`.
///
/// The output files are written on two threads (plan.json and the first
/// interface's tc file on one; the other tc files, linux_tc.txt and
/// ip_map.csv on the other), each streamed in chunks; the bytes are the
/// same as written one after the other.
pub fn run(args: Args) -> Outcome {
    let previous = args.previous.as_deref().map(read_plan).transpose()?;
    let mut options = args.options.clone();
    let adoption = match &args.adopt_libreqos {
        Some(dir) => Some(super::adopt::adopt(dir, &args.inputs, &mut options, None)?),
        None => None,
    };
    let prev = match &adoption {
        Some(a) => Some(&a.seed),
        None => previous.as_ref().map(|p| &p.allocation),
    };
    let Planned { plan, network, .. } = plan_with_network(
        &args.inputs,
        &options,
        QueueCount::Default(DEFAULT_QUEUES),
        prev,
    )?;
    if let Some(a) = &adoption {
        a.report(&plan)?;
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let (out, rd) = (&args.out, args.root_delete);
    let tc_file = |ip: &lqos_tc::InterfacePlan| {
        let path = out.join(format!("tc_{}.txt", ip.dev));
        write_with(&path, |w| lqos_tc::render::render_interface_to(ip, rd, w))
    };
    // Balanced by measured cost: plan.json and the first interface's file
    // on one thread, the rest on this one.
    let (first, rest) = match plan.interfaces.split_first() {
        Some((f, r)) => (Some(f), r),
        None => (None, &[][..]),
    };
    std::thread::scope(|sc| -> anyhow::Result<()> {
        let json = sc.spawn(|| {
            write_plan_json(&out.join("plan.json"), &plan, &network, args.with_ops)?;
            first.map_or(Ok(()), tc_file)
        });
        let text = (|| -> anyhow::Result<()> {
            for ip in rest {
                tc_file(ip)?;
            }
            write_with(&out.join("linux_tc.txt"), |w| {
                lqos_tc::render::render_combined_to(&plan, rd, w)
            })?;
            write_with(&out.join("ip_map.csv"), |w| plan.ip_map.write_csv_to(w))
        })();
        let json = json
            .join()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("the plan.json writer panicked")));
        text.and(json)
    })?;

    outln!(
        "planned {} circuits and {} nodes on {} queue(s) per direction ({:?} strategy); {} addresses/prefixes in ip_map.csv, classifier {}",
        plan.allocation.circuits.len(),
        plan.allocation.nodes.len(),
        plan.allocation.queues,
        plan.config.strategy,
        plan.ip_map.len(),
        plan.config.classifier
    )?;
    if !plan.squashed.is_empty() {
        outln!(
            "minimums squashed in {} node(s), {} circuit(s): their minimums add up to more than \
             the node guarantees (each gets 1 Mbps or less; the warnings name them)",
            plan.squashed.len(),
            plan.squashed.iter().map(|s| s.circuits).sum::<u32>()
        )?;
    }
    for ip in &plan.interfaces {
        let counts: Vec<String> = ip
            .queue_class_counts
            .iter()
            .map(|c| c.to_string())
            .collect();
        outln!(
            "{} ({:?}): {} ops; classes per queue: {}",
            ip.dev,
            ip.direction,
            ip.ops.len(),
            counts.join(" ")
        )?;
    }
    outln!("wrote {}", args.out.display())?;
    // As above: the process ends here, nothing needs these freed.
    std::mem::forget((plan, network));
    Ok(Done::Ok)
}
