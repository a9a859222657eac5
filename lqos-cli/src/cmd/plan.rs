//! `lqos plan`.

use std::process::ExitCode;

/// Arguments of `lqos plan`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs `lqos plan`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("lqos plan is not implemented yet")
}
