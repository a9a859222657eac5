//! `lqos compare`: the tree lqos plans against the one a LibreQoS box
//! built, by name, field by field.

use std::path::PathBuf;

use lqos_apply::adopt::LibreQosDir;
use lqos_apply::inputs::QueueCount;
use lqos_tc::libreqos::compare;

use super::inputs::InputArgs;
use super::inputs::PlanOptions;
use super::plan::plan_with_network;
use super::{Done, Outcome};
use crate::out::{out, outln};

/// Arguments of `lqos compare`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// LibreQoS's state directory (lqos.conf `state_directory`, by default
    /// /opt/libreqos/state): shaping/queuingStructure.json and
    /// stats/statsByCircuit.json name LibreQoS's classes.
    #[arg(long, value_name = "DIR")]
    pub libreqos: PathBuf,
    /// LibreQoS's tc commands [default: DIR/debug/linux_tc_rust.txt (what
    /// its bakery loaded), else DIR/debug/linux_tc.txt].
    #[arg(long, value_name = "FILE")]
    pub tc: Option<PathBuf>,
    /// Input files (the ones LibreQoS read).
    #[command(flatten)]
    pub inputs: InputArgs,
    /// Planner options [--queues default: LibreQoS's queue count].
    #[command(flatten)]
    pub options: PlanOptions,
    /// Print only the counts, not every difference.
    #[arg(long)]
    pub summary: bool,
}

/// Runs `lqos compare`: exit 0 when every difference is an expected one
/// (it has a note), 1 otherwise.
pub fn run(args: Args) -> Outcome {
    let lq = LibreQosDir::read(&args.libreqos)?;
    let (tc_file, trees) = lq.trees(args.tc.as_deref())?;
    let mut options = args.options.clone();
    if options.queues.is_none() {
        // On a stick LibreQoS halves the TX queues; lqos takes the TX queues.
        let per_dir = lq.state.queues;
        options.queues = Some(if lq.state.up_offset() != 0 {
            2 * per_dir
        } else {
            per_dir
        });
    }
    let planned = plan_with_network(
        &args.inputs,
        &options,
        QueueCount::Default(lq.state.queues),
        None,
    )?;
    let cmp = compare(&trees, &lq.state, &planned.plan);
    let unshaped = Unshaped::new(
        &lq.state.unattached,
        planned.unshaped.iter().map(|c| c.id.as_str()),
    );
    outln!(
        "compared with LibreQoS's {} ({} queues per direction)",
        tc_file.display(),
        lq.state.queues
    )?;
    if args.summary {
        out!("{}", summary_lines(&cmp.to_string()))?;
    } else {
        out!("{cmp}")?;
    }
    out!("{unshaped}")?;
    Ok(if cmp.only_expected() && unshaped.same() {
        Done::Ok
    } else {
        Done::Findings
    })
}

/// The counts part of a comparison's text (its first lines, up to the
/// first listed class).
fn summary_lines(text: &str) -> String {
    let mut out = String::new();
    for (i, l) in text.lines().enumerate() {
        if i >= 2 && !l.starts_with("  ") {
            break;
        }
        out.push_str(l);
        out.push('\n');
    }
    out
}

/// The circuits neither tree shapes: LibreQoS's unattached ones (no
/// classid in statsByCircuit.json) and lqos's unshaped ones (their parent
/// node is not in network.json).
#[derive(Debug, PartialEq, Eq)]
struct Unshaped {
    both: usize,
    only_libreqos: Vec<String>,
    only_lqos: Vec<String>,
}

impl Unshaped {
    fn new<'a>(libreqos: &[String], lqos: impl Iterator<Item = &'a str>) -> Unshaped {
        use std::collections::BTreeSet;
        let lq: BTreeSet<&str> = libreqos.iter().map(String::as_str).collect();
        let ours: BTreeSet<&str> = lqos.collect();
        let own = |a: &BTreeSet<&str>, b: &BTreeSet<&str>| {
            a.difference(b).map(|s| s.to_string()).collect::<Vec<_>>()
        };
        Unshaped {
            both: lq.intersection(&ours).count(),
            only_libreqos: own(&lq, &ours),
            only_lqos: own(&ours, &lq),
        }
    }

    fn same(&self) -> bool {
        self.only_libreqos.is_empty() && self.only_lqos.is_empty()
    }
}

impl std::fmt::Display for Unshaped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.both == 0 && self.same() {
            return Ok(());
        }
        writeln!(
            f,
            "circuits not shaped (no class): {} in both, {} only by LibreQoS, {} only by lqos",
            self.both,
            self.only_libreqos.len(),
            self.only_lqos.len()
        )?;
        for id in &self.only_libreqos {
            writeln!(f, "not shaped only by LibreQoS: circuit {id}")?;
        }
        for id in &self.only_lqos {
            writeln!(f, "not shaped only by lqos: circuit {id}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unshaped_circuits_are_compared_by_id() {
        let lq = ["e33".to_string(), "e34".to_string()];
        let same = Unshaped::new(&lq, ["e34", "e33"].into_iter());
        assert!(same.same());
        assert_eq!(
            same.to_string(),
            "circuits not shaped (no class): 2 in both, 0 only by LibreQoS, 0 only by lqos\n"
        );
        let other = Unshaped::new(&lq, ["e33", "x"].into_iter());
        assert!(!other.same());
        assert_eq!(
            other.to_string(),
            "circuits not shaped (no class): 1 in both, 1 only by LibreQoS, 1 only by lqos\n\
             not shaped only by LibreQoS: circuit e34\n\
             not shaped only by lqos: circuit x\n"
        );
        assert_eq!(Unshaped::new(&[], std::iter::empty()).to_string(), "");
    }
}
