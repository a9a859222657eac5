//! `lqos detach`: remove lqos's eBPF classifier: its programs from every
//! interface it was attached to (XDP links, tc filters) and its pinned
//! maps, in one network namespace.

use super::apply::{applied_plan, TargetArgs};
use super::{Done, Outcome};
use crate::out::{note, outln};
use lqos_apply::datapath::{DataPath, PinnedDataPath};

/// Arguments of `lqos detach`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Namespace (its own pins: /sys/fs/bpf/lqos-netns-NAME) and state
    /// directory (whose apply lock is taken: not while `lqos watch` runs).
    #[command(flatten)]
    pub target: TargetArgs,
}

/// Runs `lqos detach`: 0 removed (or nothing was there), 2 on error.
pub fn run(args: Args) -> Outcome {
    super::privilege::require("`lqos detach`", true, args.target.netns.is_some())?;
    let state = args.target.state();
    // The daemon would attach it again: refused while it (or an apply) runs.
    let _lock = state.lock()?;
    let dp = PinnedDataPath::new(&state);
    let pins = dp.pin_dir().to_path_buf();
    if !dp.installed() {
        outln!(
            "nothing to remove: no eBPF classifier of lqos is pinned under {}",
            pins.display()
        )?;
        return Ok(Done::Ok);
    }
    let ifs = dp.remove()?;
    outln!(
        "removed lqos's eBPF classifier: {}; unpinned {} (packets of every circuit now go to \
         each HTB's default class until another classifier steers them)",
        if ifs.is_empty() {
            "it was attached to no interface".to_string()
        } else {
            format!("detached from {}", ifs.join(", "))
        },
        pins.display()
    )?;
    if applied_plan(&args.target)?
        .is_some_and(|p| p.plan.config.classifier == lqos_model::config::Classifier::Bpf)
    {
        note!(
            "lqos: the plan last applied has classifier bpf: the next `lqos apply` (or `lqos \
             watch` start) installs it again; set classifier = \"none\" or \"tc\" in lqos.conf's \
             [lqos] (or give --classifier) to keep it off"
        );
    }
    Ok(Done::Ok)
}
