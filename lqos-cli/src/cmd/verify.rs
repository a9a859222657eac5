//! `lqos verify`: compare the live kernel trees with a plan.

use anyhow::Context;
use lqos_apply::{lazy, load_saved_plan, read_live, verify_plan, NetlinkLive, StateDir};

use super::apply::{state_path, PlanArgs, TargetArgs};
use super::{Done, Outcome};
use crate::out::{out, outln};

/// Arguments of `lqos verify`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Plan source.
    #[command(flatten)]
    pub source: PlanArgs,
    /// Namespace and state directory.
    #[command(flatten)]
    pub target: TargetArgs,
    /// Verify against the last plan `lqos apply` loaded successfully.
    #[arg(long, conflicts_with = "plan")]
    pub last: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Leaves are lazy (`lqos watch --lazy-leaves`, or `[lqos] lazy_leaves
    /// = true` in lqos.conf): a circuit without its leaf is not drift; a
    /// leaf that is there must match the plan.
    #[arg(long)]
    pub lazy_leaves: bool,
}

/// Runs `lqos verify`: exit 0 in sync, 1 on drift, 2 on error.
pub fn run(args: Args) -> Outcome {
    let netns = args.target.netns.clone();
    let state_path = state_path(&args.target);
    let live = NetlinkLive::new(netns.clone());
    let (plan, lazy_conf) = if args.last {
        let dir = StateDir::open(&state_path)?;
        let saved = load_saved_plan(&dir, netns.as_deref())?.with_context(|| {
            format!(
                "no plan was applied successfully yet (state dir {})",
                state_path.display()
            )
        })?;
        // The saved plan has every leaf; lazy_leaves still comes from
        // lqos.conf.
        let lazy = match args.source.inputs.inputs_quiet().config {
            Some(p) => {
                let text = std::fs::read_to_string(&p)
                    .with_context(|| format!("cannot read config file {}", p.display()))?;
                lqos_model::parse_config(&p.display().to_string(), &text)?
                    .lqos
                    .lazy_leaves
            }
            None => false,
        };
        (saved.plan, lazy)
    } else {
        let r = args
            .source
            .resolve_with_network(&live, &state_path, netns.as_deref())?;
        let lazy = r.config.is_some_and(|c| c.lqos.lazy_leaves);
        (r.plan, lazy)
    };
    let plan = if args.lazy_leaves || lazy_conf {
        let devs: Vec<&str> = plan.interfaces.iter().map(|i| i.dev.as_str()).collect();
        let present = lazy::present_leaves(&plan, &read_live(&live, &devs)?);
        lazy::lazy_plan(&plan, &present)
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
