//! `lqos status`: what `lqos watch` last did, from its status file in the
//! state directory.

use std::process::ExitCode;

use lqos_apply::watch::{status_file, WatchStatus};
use lqos_apply::StateDir;

use super::apply::{state_path, TargetArgs};
use super::{EXIT_ERROR, EXIT_OK, EXIT_WARN};

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
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let path = state_path(&args.target);
    let netns = args.target.netns.as_deref();
    if !path.join(status_file(netns)).exists() {
        eprintln!(
            "lqos: no status in {} (has `lqos watch` run{}?)",
            path.display(),
            netns
                .map(|n| format!(" with --netns {n}"))
                .unwrap_or_default()
        );
        return Ok(ExitCode::from(EXIT_ERROR));
    }
    let state = StateDir::open(&path)?;
    let Some(status) = WatchStatus::load(&state, netns)? else {
        return Ok(ExitCode::from(EXIT_ERROR));
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&status)?);
    } else {
        print!("{status}");
        if status.stopped_ms.is_none()
            && !std::path::Path::new(&format!("/proc/{}", status.pid)).exists()
        {
            println!(
                "(pid {} is not running: the daemon died without a clean exit)",
                status.pid
            );
        }
    }
    if status.pending.is_some() && !args.json {
        println!(
            "to apply the refused inputs once: lqos confirm (with the same --state-dir/--netns)"
        );
    }
    let ok = status.pending.is_none()
        && status
            .last
            .as_ref()
            .is_none_or(|e| e.outcome == lqos_apply::watch::Outcome::Applied);
    Ok(ExitCode::from(if ok { EXIT_OK } else { EXIT_WARN }))
}
