//! `lqos check`: validate the inputs and print every problem.

use lqos_apply::inputs::{config_key, interface_names, plan_config, PlanOverrides, QueueCount};
use lqos_apply::live::{LiveSource, NetlinkLive};

use super::inputs::{InputArgs, Loaded};
use super::{Done, Outcome};
use crate::out::{out, outln};

/// Arguments of `lqos check`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Input files.
    #[command(flatten)]
    pub inputs: InputArgs,
    /// Exit 1 when there are warnings (and no errors).
    #[arg(long)]
    pub strict: bool,
    /// Do not look up the interfaces lqos.conf names (the files are
    /// checked for another machine).
    #[arg(long, conflicts_with = "netns")]
    pub offline: bool,
    /// Look the interfaces lqos.conf names up in this network namespace.
    #[arg(long, value_name = "NAME")]
    pub netns: Option<String>,
}

/// Runs `lqos check`: prints a summary and every warning and error.
///
/// Exit code 0 when clean (or warnings only without `--strict`), 1 for
/// warnings with `--strict`, 2 for errors or unreadable files.
pub fn run(args: Args) -> Outcome {
    let loaded = args.inputs.load()?;
    let s = super::inputs::summary(&loaded);
    let config = loaded
        .config_path
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "built-in defaults".to_string());
    outln!(
        "{}: {} nodes, depth {}",
        args.inputs.network.display(),
        s.nodes,
        s.depth
    )?;
    let unshaped = match loaded.unshaped.len() {
        0 => String::new(),
        n => format!(" ({n} more not shaped: parent node not in network.json)"),
    };
    outln!(
        "{}: {} circuits, {} devices{unshaped}",
        args.inputs.devices.display(),
        s.circuits,
        s.devices
    )?;
    outln!("config: {config}")?;
    out!("{}", crate::hints::report(&loaded.report))?;
    let (mut errors, mut warnings) = (loaded.report.error_count(), loaded.report.warning_count());
    // What the planner squashes, as `lqos plan` plans it.
    if errors == 0 {
        match squashed(&loaded) {
            Ok(plan) => {
                let devices = args.inputs.devices.display();
                for s in &plan {
                    outln!("warning: {devices}: {s}")?;
                }
                warnings += plan.len();
            }
            Err(e) => {
                outln!("error: cannot plan: {e}")?;
                errors += 1;
            }
        }
    }
    // The interfaces lqos.conf names, on this machine.
    if !args.offline {
        for line in missing_interfaces(&loaded, args.netns.as_deref(), &config) {
            outln!("warning: {line}")?;
            warnings += 1;
        }
    }
    outln!("{errors} error(s), {warnings} warning(s)")?;
    // The process ends here: freeing every circuit one by one would only
    // cost time.
    std::mem::forget(loaded);
    if errors > 0 {
        anyhow::bail!("the inputs have {errors} error(s)");
    }
    Ok(if warnings > 0 && args.strict {
        Done::Findings
    } else {
        Done::Ok
    })
}

/// `CONFIG: [bridge] to_network = "ens99": no such interface on this
/// machine` for each interface lqos.conf names that does not exist here
/// (nothing when the config names none or links cannot be read).
fn missing_interfaces(loaded: &Loaded, netns: Option<&str>, config: &str) -> Vec<String> {
    let Ok(cfg) = lqos_tc::PlanConfig::from_lqos_config(&loaded.config, 1) else {
        return Vec::new();
    };
    let live = NetlinkLive::new(netns.map(str::to_string));
    let place = match netns {
        Some(ns) => format!("in network namespace {ns}"),
        None => "on this machine".to_string(),
    };
    interface_names(&cfg.interfaces)
        .into_iter()
        .filter(|dev| matches!(live.link(dev), Ok(None)))
        .map(|dev| {
            let key = config_key(&cfg.interfaces, dev).unwrap_or("an interface key");
            format!("{config}: {key} = {dev:?}: no such interface {place} (`lqos apply` would refuse it)")
        })
        .collect()
}

/// The nodes the planner squashes, planned as `lqos plan` plans the
/// inputs (a config that names no interface is planned as a bridge of two:
/// which interfaces does not change what is squashed).
fn squashed(loaded: &Loaded) -> anyhow::Result<Vec<lqos_tc::rates::Squashed>> {
    let mut config = loaded.config.clone();
    if config.bridge.is_none() && config.single_interface.is_none() {
        config.bridge = Some(lqos_model::config::BridgeConfig {
            to_internet: "upload".into(),
            to_network: "download".into(),
        });
    }
    let queues = QueueCount::Default(super::plan::DEFAULT_QUEUES);
    let cfg = plan_config(
        &config,
        loaded.config_path.as_deref(),
        &PlanOverrides::default(),
        queues,
    )?;
    Ok(lqos_tc::plan(&loaded.network, &cfg, None)?.squashed)
}
