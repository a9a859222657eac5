//! `lqos confirm`: apply once the inputs the daemon's removal guard
//! refused (the sha256 of the refused inputs, written to the state
//! directory, is what `lqos watch` applies).

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use lqos_apply::watch::{confirm_file, Confirmation, Outcome, Trigger, WatchStatus};
use lqos_apply::StateDir;

use super::apply::{state_path, TargetArgs};
use super::{EXIT_ERROR, EXIT_OK, EXIT_WARN};

/// Arguments of `lqos confirm`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Namespace and state directory of the daemon.
    #[command(flatten)]
    pub target: TargetArgs,
    /// Seconds to wait for the daemon to apply them.
    #[arg(long, value_name = "SECS", default_value_t = 60.0)]
    pub wait: f64,
}

/// Runs `lqos confirm`: 0 applied, 1 not applied (it failed, or the files
/// changed since and were refused again), 2 nothing to confirm.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let path = state_path(&args.target);
    let netns = args.target.netns.as_deref();
    let state = StateDir::open(&path)?;
    let Some(status) = WatchStatus::load(&state, netns)? else {
        eprintln!(
            "lqos: no status in {} (is `lqos watch` running?)",
            path.display()
        );
        return Ok(ExitCode::from(EXIT_ERROR));
    };
    let Some(pending) = status.pending.clone() else {
        eprintln!("lqos: nothing to confirm: the daemon has no refused inputs pending");
        return Ok(ExitCode::from(EXIT_ERROR));
    };
    if status.stopped_ms.is_some() {
        eprintln!(
            "lqos: the daemon is not running: start it (its first apply checks the files again)"
        );
        return Ok(ExitCode::from(EXIT_ERROR));
    }
    println!("confirming: {}", pending.refusal);
    let since = status.last.as_ref().map_or(0, |e| e.at_ms);
    state
        .save_json(
            &confirm_file(netns),
            &Confirmation {
                sha256: pending.sha256.clone(),
            },
        )
        .context("writing the confirmation")?;
    let end = Instant::now() + Duration::try_from_secs_f64(args.wait).unwrap_or_default();
    loop {
        if let Some(s) = WatchStatus::load(&state, netns)? {
            if let Some(e) = s
                .last
                .filter(|e| e.trigger == Trigger::Confirm && e.at_ms >= since)
            {
                println!("{e}");
                return Ok(ExitCode::from(if e.outcome == Outcome::Applied {
                    EXIT_OK
                } else {
                    EXIT_WARN
                }));
            }
        }
        if Instant::now() >= end {
            eprintln!(
                "lqos: the daemon did not answer within {} s (the confirmation stays in {})",
                args.wait,
                path.display()
            );
            return Ok(ExitCode::from(EXIT_WARN));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
