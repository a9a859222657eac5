//! `lqos check`: validate the inputs and print every problem.

use super::inputs::InputArgs;
use super::{Done, Outcome};
use crate::out::{out, outln};

/// Arguments of `lqos check`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Input files.
    #[command(flatten)]
    pub inputs: InputArgs,
    /// Exit 1 when there are warnings (and no errors).
    #[arg(long)]
    pub strict: bool,
}

/// Runs `lqos check`: prints a summary and every warning and error.
///
/// Exit code 0 when clean (or warnings only without `--strict`), 1 for
/// warnings with `--strict`, 2 for errors or unreadable files.
pub fn run(args: Args) -> Outcome {
    let loaded = args.inputs.load()?;
    let s = super::inputs::summary(&loaded);
    let config = loaded
        .config_path
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "built-in defaults".to_string());
    outln!(
        "{}: {} nodes, depth {}",
        args.inputs.network.display(),
        s.nodes,
        s.depth
    )?;
    let unshaped = match loaded.unshaped.len() {
        0 => String::new(),
        n => format!(" ({n} more not shaped: parent node not in network.json)"),
    };
    outln!(
        "{}: {} circuits, {} devices{unshaped}",
        args.inputs.devices.display(),
        s.circuits,
        s.devices
    )?;
    outln!("config: {config}")?;
    out!("{}", loaded.report)?;
    let (errors, warnings) = (loaded.report.error_count(), loaded.report.warning_count());
    outln!("{errors} error(s), {warnings} warning(s)")?;
    // The process ends here: freeing every circuit one by one would only
    // cost time.
    std::mem::forget(loaded);
    if errors > 0 {
        anyhow::bail!("the inputs have {errors} error(s)");
    }
    Ok(if warnings > 0 && args.strict {
        Done::Findings
    } else {
        Done::Ok
    })
}
