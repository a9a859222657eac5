//! `cargo xtask soak`: builds the release `lqos` and the soak driver
//! (`lqos-cli/examples/soak.rs`) and runs it on the host, as root: `lqos
//! watch` in a scratch network namespace under M minutes of random edits,
//! each followed by `lqos verify` (see the example's docs for the report).

use std::process::Command;

use anyhow::{bail, Context, Result};
use clap::Args;

/// The soak run's options.
#[derive(Args, Clone)]
pub struct SoakArgs {
    /// How long the edits go on.
    #[arg(long, default_value_t = 5.0)]
    minutes: f64,
    /// Circuits of the generated network (the population stays near it).
    #[arg(long, default_value_t = 1000)]
    circuits: usize,
    /// Seed of the generated files and of the edits.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// TX queues of each veth interface.
    #[arg(long, default_value_t = 16)]
    queues: u32,
}

/// Builds, runs the soak; its exit status (0: clean).
pub fn soak(lab: &super::Lab, a: &SoakArgs) -> Result<i32> {
    let st = super::cargo()
        .args(["build", "--release", "-p", "lqos-cli", "--bin", "lqos"])
        .args(["--example", "soak"])
        .current_dir(&lab.repo)
        .status()
        .context("soak: running cargo build")?;
    if !st.success() {
        bail!("soak: `cargo build --release -p lqos-cli --example soak` failed");
    }
    let target = lab.target();
    let st = Command::new(target.join("release/examples/soak"))
        .args(["--minutes", &a.minutes.to_string()])
        .args(["--circuits", &a.circuits.to_string()])
        .args(["--seed", &a.seed.to_string()])
        .args(["--queues", &a.queues.to_string()])
        .env("LQOS_BIN", target.join("release/lqos"))
        .current_dir(&lab.repo)
        .status()
        .context("soak: running target/release/examples/soak")?;
    Ok(st.code().unwrap_or(1))
}
