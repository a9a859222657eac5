//! `lqos verify`.

use std::process::ExitCode;

/// Arguments of `lqos verify`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs `lqos verify`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("lqos verify is not implemented yet")
}
