//! `lqos bench`.

use std::process::ExitCode;

/// Arguments of `lqos bench`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs `lqos bench`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("lqos bench is not implemented yet")
}
