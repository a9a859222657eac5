//! `lqos`: plan and load LibreQoS-style traffic-shaping trees.
//!
//! A thin front-end: each subcommand parses arguments, makes one library
//! call, prints, and maps the outcome to an exit code. The calls:
//!
//! - `check`: [`lqos_apply::Inputs::load`] (its report);
//! - `plan`, `show`, `diff`: [`lqos_apply::plan_files`] or
//!   [`lqos_apply::read_plan`], then [`lqos_tc`]'s render / diff;
//! - `apply`: [`lqos_apply::Session::apply`] (or `rollback`;
//!   [`lqos_apply::apply_plan`] for `--dry-run`);
//! - `verify`: [`lqos_apply::verify_plan`];
//! - `bench`: the bench runner in a scratch network namespace.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cmd;

/// Plan and load ISP traffic-shaping trees (HTB + cake/fq_codel under mq).
#[derive(Parser)]
#[command(name = "lqos", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Validate network.json, ShapedDevices.csv and lqos.conf.
    Check(cmd::check::Args),
    /// Write a synthetic network (network.json, ShapedDevices.csv, lqos.conf).
    Gen(cmd::gen::Args),
    /// Plan the tc trees and write tc -b files and plan.json.
    Plan(cmd::plan::Args),
    /// Print the planned tree for a person to read.
    Show(cmd::show::Args),
    /// Diff two plans (or two sets of inputs) into tc ops.
    Diff(cmd::diff::Args),
    /// Load a plan into the kernel (incremental by default).
    Apply(cmd::apply::Args),
    /// Compare the live kernel tree with a plan.
    Verify(cmd::verify::Args),
    /// Benchmark loading methods in a private network namespace.
    Bench(cmd::bench::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Check(a) => cmd::check::run(a),
        Command::Gen(a) => cmd::gen::run(a),
        Command::Plan(a) => cmd::plan::run(a),
        Command::Show(a) => cmd::show::run(a),
        Command::Diff(a) => cmd::diff::run(a),
        Command::Apply(a) => cmd::apply::run(a),
        Command::Verify(a) => cmd::verify::run(a),
        Command::Bench(a) => cmd::bench::run(a),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("lqos: error: {err:#}");
            ExitCode::from(cmd::EXIT_ERROR)
        }
    }
}
