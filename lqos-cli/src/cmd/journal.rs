//! `lqos journal`: the last input sets that were applied (newest first),
//! kept in the state directory; `lqos apply --rollback --to N` applies one.

use lqos_apply::journal::Journal;
use lqos_apply::StateDir;

use super::apply::{state_path, TargetArgs};
use super::{Done, Outcome};
use crate::out::outln;

/// Arguments of `lqos journal`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Namespace and state directory.
    #[command(flatten)]
    pub target: TargetArgs,
}

/// Runs `lqos journal`.
pub fn run(args: Args) -> Outcome {
    let state = StateDir::open(state_path(&args.target))?;
    let j = Journal::open(&state, args.target.netns.as_deref())?;
    let entries = j.entries()?;
    if entries.is_empty() {
        outln!("no input set applied yet")?;
    }
    for (i, e) in entries.iter().enumerate() {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(e.at_ms);
        outln!(
            "{}: {} {} circuits, sha256 {} ({})",
            i + 1,
            humantime::format_rfc3339_millis(t),
            e.circuits,
            &e.sha256[..16],
            e.source
        )?;
        for p in j.paths(e).into_iter().flatten() {
            outln!("   {}", p.display())?;
        }
    }
    Ok(Done::Ok)
}
