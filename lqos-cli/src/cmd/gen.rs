//! `lqos gen`.

use std::process::ExitCode;

/// Arguments of `lqos gen`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs `lqos gen`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("lqos gen is not implemented yet")
}
