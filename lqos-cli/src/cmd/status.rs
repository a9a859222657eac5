//! `lqos status`: what `lqos watch` last did, from its status file in the
//! state directory.

use lqos_apply::watch::WatchStatus;

use super::apply::TargetArgs;
use super::{Done, Outcome};
use crate::out::{out, outln};

/// Arguments of `lqos status`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Namespace and state directory of the daemon.
    #[command(flatten)]
    pub target: TargetArgs,
    /// Print the status file as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `lqos status`: exit 0 when the last event succeeded, 1 when it
/// failed or was rejected, 2 when there is no status (the daemon never ran).
pub fn run(args: Args) -> Outcome {
    let state = args.target.state();
    let missing = || {
        anyhow::anyhow!(
            "no status in {} (has `lqos watch` run{}?)",
            state.path().display(),
            state
                .netns()
                .map(|n| format!(" with --netns {n}"))
                .unwrap_or_default()
        )
    };
    let Some(status) = WatchStatus::load(&state)? else {
        return Err(missing());
    };
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&status)?)?;
    } else {
        out!("{status}")?;
        if status.stopped_ms.is_none()
            && !std::path::Path::new(&format!("/proc/{}", status.pid)).exists()
        {
            outln!(
                "(pid {} is not running: the daemon died without a clean exit)",
                status.pid
            )?;
        }
    }
    if status.pending.is_some() && !args.json {
        outln!(
            "to apply the refused inputs once: lqos confirm (with the same --state-dir/--netns)"
        )?;
    }
    let ok = status.pending.is_none()
        && status
            .last
            .as_ref()
            .is_none_or(|e| e.outcome == lqos_apply::watch::Outcome::Applied);
    Ok(if ok { Done::Ok } else { Done::Findings })
}
