//! `lqos verify`: compare the live kernel trees with a plan.

use anyhow::Context;
use lqos_apply::live::{read_live, NetlinkLive};
use lqos_apply::verify_plan;
use lqos_tc::rules::{lazy_plan, present_leaves};

use super::apply::{applied_from, applied_plan, PlanArgs, TargetArgs};
use super::{Done, Outcome};
use crate::out::{note, out, outln};

/// Arguments of `lqos verify`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Plan source.
    #[command(flatten)]
    pub source: PlanArgs,
    /// Namespace and state directory.
    #[command(flatten)]
    pub target: TargetArgs,
    /// Only against the plan last applied (`lqos apply` or `lqos watch`;
    /// what verify uses by default when there is one): an error when there
    /// is none, instead of planning the input files.
    #[arg(long, conflicts_with_all = ["plan", "from_inputs"])]
    pub last: bool,
    /// Plan the input files (with the planner options given, and the
    /// interfaces' TX queues) and verify against that plan, instead of
    /// the plan last applied. Implied by --queues, --sqm, --strategy and
    /// --classifier.
    #[arg(long, conflicts_with = "plan")]
    pub from_inputs: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Leaves are lazy (`lqos watch --lazy-leaves`, or `[lqos] lazy_leaves
    /// = true` in lqos.conf): a circuit without its leaf is not drift; a
    /// leaf that is there must match the plan.
    #[arg(long)]
    pub lazy_leaves: bool,
}

/// Runs `lqos verify`: exit 0 in sync, 1 on drift, 2 on error. The plan:
/// `--plan FILE`; the input files' with `--from-inputs` or a planner
/// option; else the one last applied (else the input files' plan).
pub fn run(args: Args) -> Outcome {
    super::privilege::require("`lqos verify`", false, args.target.netns.is_some())?;
    let netns = args.target.netns.clone();
    let state = args.target.state();
    let live = NetlinkLive::new(netns.clone());
    let planned = args.source.plan.is_some() || args.from_inputs || args.source.options.given();
    let applied = if planned {
        None
    } else {
        applied_plan(&args.target)?
    };
    if args.last && applied.is_none() {
        anyhow::bail!(
            "no plan was applied successfully yet (state dir {})",
            state.path().display()
        );
    }
    let (plan, lazy_conf) = if let Some(saved) = applied {
        note!(
            "lqos: verifying against {} (--from-inputs: the input files' plan instead)",
            applied_from(&args.target, &saved)
        );
        // The saved plan has every leaf; lazy_leaves still comes from
        // lqos.conf.
        let lazy = match args.source.inputs.inputs_quiet().config {
            Some(p) => {
                let text = std::fs::read_to_string(&p)
                    .with_context(|| format!("cannot read config file {}", p.display()))?;
                lqos_model::config::parse_config(&p.display().to_string(), &text)?
                    .lqos
                    .lazy_leaves
            }
            None => false,
        };
        (saved.plan, lazy)
    } else {
        let r = args.source.resolve_with_network(&live, &state)?;
        let lazy = r.config.is_some_and(|c| c.lqos.lazy_leaves);
        (r.plan, lazy)
    };
    let plan = if args.lazy_leaves || lazy_conf {
        let devs: Vec<&str> = plan.interfaces.iter().map(|i| i.dev.as_str()).collect();
        let present = present_leaves(&plan, &read_live(&live, &devs)?);
        lazy_plan(&plan, &present)
    } else {
        plan
    };
    let report = verify_plan(&plan, &live)?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&report)?)?;
    } else {
        out!("{report}")?;
    }
    Ok(if report.is_clean() {
        Done::Ok
    } else {
        Done::Findings
    })
}
