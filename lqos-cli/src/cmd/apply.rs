//! `lqos apply`.

use std::process::ExitCode;

/// Arguments of `lqos apply`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs `lqos apply`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("lqos apply is not implemented yet")
}
