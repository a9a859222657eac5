//! `lqos check`.

use std::process::ExitCode;

/// Arguments of `lqos check`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs `lqos check`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("lqos check is not implemented yet")
}
