//! `lqos journal`: the last input sets that were applied (newest first),
//! kept in the state directory; `lqos apply --rollback --to N` applies one.

use lqos_apply::inputs::PlanOverrides;
use lqos_apply::journal::Journal;

use super::apply::TargetArgs;
use super::{Done, Outcome};
use crate::out::outln;

/// Arguments of `lqos journal`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Namespace and state directory.
    #[command(flatten)]
    pub target: TargetArgs,
}

/// The files of an entry, in the order [`Journal::paths`] gives them.
const FILES: [&str; 3] = ["network.json", "ShapedDevices.csv", "lqos.conf"];

/// The overrides as the flags that give them (`--queues 4 --sqm pfifo`).
pub fn flags(o: &PlanOverrides) -> String {
    let mut v = Vec::new();
    if let Some(q) = o.queues {
        v.push(format!("--queues {q}"));
    }
    if let Some(s) = &o.sqm {
        let s = s.to_string();
        v.push(match s.contains(' ') {
            true => format!("--sqm \"{s}\""),
            false => format!("--sqm {s}"),
        });
    }
    if let Some(s) = o.strategy {
        v.push(format!("--strategy {}", super::inputs::strategy_name(s)));
    }
    if let Some(c) = o.classifier {
        v.push(format!("--classifier {c}"));
    }
    v.join(" ")
}

/// Runs `lqos journal`: each entry, then which stored file is which of
/// its inputs.
pub fn run(args: Args) -> Outcome {
    let j = Journal::open(&args.target.state())?;
    let entries = j.entries()?;
    if entries.is_empty() {
        outln!("no input set applied yet")?;
    }
    for (i, e) in entries.iter().enumerate() {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(e.at_ms);
        let with = match e.overrides.is_empty() {
            true => String::new(),
            false => format!(", with {}", flags(&e.overrides)),
        };
        outln!(
            "{}: {} {} circuits, sha256 {} ({}{with})",
            i + 1,
            humantime::format_rfc3339_millis(t),
            e.circuits,
            &e.sha256[..16],
            e.source
        )?;
        for (name, p) in FILES.iter().zip(j.paths(e)) {
            if let Some(p) = p {
                outln!("   {name:<17} {}", p.display())?;
            }
        }
    }
    Ok(Done::Ok)
}
