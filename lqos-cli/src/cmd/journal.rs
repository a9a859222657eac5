//! `lqos journal`: the last input sets that were applied (newest first),
//! kept in the state directory; `lqos apply --rollback --to N` applies one.

use std::process::ExitCode;

use lqos_apply::journal::Journal;
use lqos_apply::StateDir;

use super::apply::{state_path, TargetArgs};
use super::EXIT_OK;

/// Arguments of `lqos journal`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Namespace and state directory.
    #[command(flatten)]
    pub target: TargetArgs,
}

/// Runs `lqos journal`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let state = StateDir::open(state_path(&args.target))?;
    let j = Journal::open(&state, args.target.netns.as_deref())?;
    let entries = j.entries()?;
    if entries.is_empty() {
        println!("no input set applied yet");
    }
    for (i, e) in entries.iter().enumerate() {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(e.at_ms);
        println!(
            "{}: {} {} circuits, sha256 {} ({})",
            i + 1,
            humantime::format_rfc3339_millis(t),
            e.circuits,
            &e.sha256[..16],
            e.source
        );
        for p in j.paths(e).into_iter().flatten() {
            println!("   {}", p.display());
        }
    }
    Ok(ExitCode::from(EXIT_OK))
}
