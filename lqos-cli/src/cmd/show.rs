//! `lqos show`.

use std::process::ExitCode;

/// Arguments of `lqos show`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs `lqos show`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("lqos show is not implemented yet")
}
