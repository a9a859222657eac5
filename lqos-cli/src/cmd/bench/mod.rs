//! `lqos bench`: reproduce the ens19/ens20 reload tests in a private netns.

use std::process::ExitCode;

#[allow(dead_code)] // wired up when the runner lands
mod report;

/// Arguments of `lqos bench`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs `lqos bench`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("lqos bench is not implemented yet")
}
