//! `lqos confirm`: apply once the inputs the daemon's removal guard
//! refused (the sha256 of the refused inputs, written to the state
//! directory, is what `lqos watch` applies).

use std::time::{Duration, Instant};

use anyhow::Context;
use lqos_apply::watch::{Confirmation, Outcome as Ended, Trigger, WatchStatus};

use super::apply::TargetArgs;
use super::{Done, Outcome};
use crate::out::{note, outln};

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
pub fn run(args: Args) -> Outcome {
    let state = args.target.state();
    let Some(status) = WatchStatus::load(&state)? else {
        anyhow::bail!(
            "no status in {} (is `lqos watch` running?)",
            state.path().display()
        );
    };
    let Some(pending) = status.pending.clone() else {
        anyhow::bail!("nothing to confirm: the daemon has no refused inputs pending");
    };
    if status.stopped_ms.is_some() {
        anyhow::bail!(
            "the daemon is not running: start it (its first apply checks the files again)"
        );
    }
    outln!("confirming: {}", pending.refusal)?;
    let since = status.last.as_ref().map_or(0, |e| e.at_ms);
    Confirmation {
        sha256: pending.sha256.clone(),
    }
    .save(&state)
    .context("writing the confirmation")?;
    let end = Instant::now() + Duration::try_from_secs_f64(args.wait).unwrap_or_default();
    loop {
        if let Some(s) = WatchStatus::load(&state)? {
            if let Some(e) = s
                .last
                .filter(|e| e.trigger == Trigger::Confirm && e.at_ms >= since)
            {
                outln!("{e}")?;
                return Ok(if e.outcome == Ended::Applied {
                    Done::Ok
                } else {
                    Done::Findings
                });
            }
        }
        if Instant::now() >= end {
            note!(
                "lqos: the daemon did not answer within {} s (the confirmation stays in {})",
                args.wait,
                state.path().display()
            );
            return Ok(Done::Findings);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
