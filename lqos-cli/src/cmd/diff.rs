//! `lqos diff`: the tc ops between two plans (or two sets of inputs).

use std::path::PathBuf;

use lqos_tc::{DiffSummary, Plan};

use super::inputs::InputArgs;
use super::inputs::PlanOptions;
use super::plan::{plan_inputs, read_plan};
use super::{Done, Outcome};
use crate::out::{note, outln, with_stdout};

/// Arguments of `lqos diff`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Old plan.json [default: plan the --old-* inputs].
    #[arg(value_name = "OLD")]
    pub old: Option<PathBuf>,
    /// New plan.json [default: plan --network/--devices/--config, keeping
    /// OLD's classids].
    #[arg(value_name = "NEW")]
    pub new: Option<PathBuf>,
    /// Old network.json (when OLD is not given).
    #[arg(long, value_name = "FILE")]
    pub old_network: Option<PathBuf>,
    /// Old ShapedDevices.csv (when OLD is not given).
    #[arg(long, value_name = "FILE")]
    pub old_devices: Option<PathBuf>,
    /// Old lqos.conf (when OLD is not given) [default: the new --config].
    #[arg(long, value_name = "FILE")]
    pub old_config: Option<PathBuf>,
    /// New input files (when NEW is not given).
    #[command(flatten)]
    pub inputs: InputArgs,
    /// Planner options for plans made from inputs.
    #[command(flatten)]
    pub options: PlanOptions,
    /// Print only the summary.
    #[arg(long)]
    pub summary: bool,
}

/// Runs `lqos diff`.
pub fn run(args: Args) -> Outcome {
    let old: Plan = match &args.old {
        Some(p) => read_plan(p)?,
        None => {
            let (Some(network), Some(devices)) = (&args.old_network, &args.old_devices) else {
                anyhow::bail!("give OLD (a plan.json) or both --old-network and --old-devices");
            };
            let inputs = InputArgs {
                network: network.clone(),
                devices: devices.clone(),
                config: args.old_config.clone().or(args.inputs.config.clone()),
            };
            plan_inputs(&inputs, &args.options, None)?
        }
    };
    let new: Plan = match &args.new {
        Some(p) => read_plan(p)?,
        None => plan_inputs(&args.inputs, &args.options, Some(&old))?,
    };
    let mut total = DiffSummary::default();
    for (dev, ops) in lqos_tc::diff_plans(&old, &new) {
        let s = DiffSummary::of(&ops);
        total.add(&ops);
        if !args.summary {
            with_stdout(|w| {
                for op in &ops {
                    writeln!(w, "{}", lqos_tc::render::render_line(&dev, op))?;
                }
                Ok(())
            })?;
        }
        note!("{dev}: {s}");
    }
    outln!("{total}")?;
    Ok(Done::Ok)
}
