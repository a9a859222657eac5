//! `lqos compare`: the tree lqos plans against the one a LibreQoS box
//! built, by name, field by field.

use std::path::PathBuf;
use std::process::ExitCode;

use lqos_apply::adopt::LibreQosDir;
use lqos_apply::QueueCount;
use lqos_tc::libreqos::compare;

use super::inputs::InputArgs;
use super::plan::{plan_with, PlanOptions};
use super::{EXIT_OK, EXIT_WARN};

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
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
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
    let plan = plan_with(
        &args.inputs,
        &options,
        QueueCount::Default(lq.state.queues),
        None,
    )?;
    let cmp = compare(&trees, &lq.state, &plan);
    println!(
        "compared with LibreQoS's {} ({} queues per direction)",
        tc_file.display(),
        lq.state.queues
    );
    if args.summary {
        print!("{}", summary_lines(&cmp.to_string()));
    } else {
        print!("{cmp}");
    }
    Ok(ExitCode::from(if cmp.only_expected() {
        EXIT_OK
    } else {
        EXIT_WARN
    }))
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
