//! `lqos diff`.

use std::process::ExitCode;

/// Arguments of `lqos diff`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs `lqos diff`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("lqos diff is not implemented yet")
}
