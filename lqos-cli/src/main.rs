//! `lqos`: plan and load LibreQoS-style traffic-shaping trees.
//!
//! A thin front-end: each subcommand parses arguments, makes one library
//! call, prints, and maps the outcome to an exit code. The calls:
//!
//! - `check`: [`lqos_apply::inputs::Inputs::load`] (its report);
//! - `plan`, `show`, `diff`: [`lqos_apply::inputs::plan_files`] or
//!   [`lqos_apply::inputs::read_plan`], then [`lqos_tc`]'s render / diff;
//! - `apply`: [`lqos_apply::Session::apply`] (or `rollback`;
//!   [`lqos_apply::apply_plan`] for `--dry-run`);
//! - `verify`: [`lqos_apply::verify_plan`];
//! - `stats`, `top`: [`lqos_apply::stats::StatsPoll::poll`];
//! - `watch`: [`lqos_apply::daemon::Driver`] (with `--metrics`, its
//!   statistics served over HTTP);
//! - `bench`: the bench runner in a scratch network namespace.

#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod out;

mod cmd;
mod hints;
mod metrics;

use out::note;

/// Plan and load ISP traffic-shaping trees (HTB + cake/fq_codel under mq).
#[derive(Parser)]
#[command(name = "lqos", version, about, long_about = None)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Validate network.json, ShapedDevices.csv and lqos.conf.
    Check(cmd::check::Args),
    /// Compare the tree lqos plans with the one LibreQoS built (its state
    /// directory and tc commands), by name, field by field.
    Compare(cmd::compare::Args),
    /// Write a synthetic network (network.json, ShapedDevices.csv, lqos.conf).
    Gen(cmd::gen::Args),
    /// Plan the tc trees and write tc -b files and plan.json.
    Plan(cmd::plan::Args),
    /// Print the planned tree for a person to read.
    Show(cmd::show::Args),
    /// Diff two plans (or two sets of inputs) into tc ops.
    Diff(cmd::diff::Args),
    /// Load a plan into the kernel (incremental by default).
    ///
    /// Ctrl-C or SIGTERM stops the load at its next batch of netlink
    /// messages (tc -b: its next line) and exits 130 with the ops applied;
    /// nothing is saved, and the next apply continues from there. A second
    /// Ctrl-C exits at once.
    Apply(cmd::apply::Args),
    /// Compare the live kernel tree with a plan.
    Verify(cmd::verify::Args),
    /// Benchmark loading methods in a private network namespace.
    Bench(cmd::bench::Args),
    /// Run as a daemon: apply at start and on every input change, verify
    /// periodically, optionally with lazy leaves.
    ///
    /// Runs in the foreground (systemd Type=exec) and holds the state
    /// directory's apply lock while it runs (`lqos apply` is refused, naming
    /// its pid). Applies once at start, then watches the directories of
    /// network.json, ShapedDevices.csv and lqos.conf and reads an edited
    /// file once its writer closed it or renamed it into place (a writer
    /// that never closes: after --quiet-period seconds without events; a
    /// file that changed while read, or ends in the middle of a record, is
    /// waited for), validates and applies the difference. A reload that
    /// would remove more circuits than the removal guard allows (default:
    /// more than 10% and more than 10; --max-removals, `[lqos]
    /// max_removals`), or comes from an empty file, is refused until `lqos
    /// confirm`. Inputs that fail validation are never applied: every
    /// problem is logged with file, line and circuit, and the live tree and
    /// the last good plan stay until the files are fixed. A kernel error is
    /// logged with the failing op and retried after --retry seconds.
    ///
    /// Signals: SIGHUP applies now (reading the kernel back, so drift is
    /// repaired); SIGTERM and SIGINT exit 0 and leave the tree as it is (a
    /// load under way stops at its next batch; the next start loads the
    /// rest).
    ///
    /// Lazy leaves (--lazy-leaves, or `[lqos] lazy_leaves = true` in
    /// lqos.conf): circuits start without their leaf qdisc; every --poll
    /// seconds one class dump finds the circuits whose counters moved, each
    /// gets its planned leaf; after --idle seconds without traffic it loses
    /// it again.
    ///
    /// Memory: a load whose new leaf qdiscs are estimated not to fit in
    /// MemAvailable (minus a margin; a cake leaf takes about 1 MiB) is
    /// refused and retried, and a lazy-leaf poll gives only as many circuits
    /// their leaf as fit (--skip-memory-check turns this off).
    ///
    /// Logs: one line per event on stderr (text, or --log-format json),
    /// with the ops added/changed/removed and the time from the first file
    /// event to kernel done. Files: STATE_DIR/last-plan.json (last good
    /// plan), STATE_DIR/watch-status.json (read by `lqos status`),
    /// STATE_DIR/journal/ (the last input sets applied, `lqos journal`),
    /// STATE_DIR/apply.lock.
    Watch(cmd::watch::Args),
    /// Print what the `lqos watch` daemon last did.
    Status(cmd::status::Args),
    /// Apply once the inputs the daemon's removal guard refused.
    Confirm(cmd::confirm::Args),
    /// List the last input sets that were applied (the input journal).
    Journal(cmd::journal::Args),
    /// Per-circuit statistics: rates against ceil, drops, ECN marks, cake
    /// delays (one snapshot: two polls an interval apart).
    Stats(cmd::stats::Args),
    /// A full-screen view of the busiest circuits and nodes, refreshed every
    /// second (keys: s sort, v view, / filter, q quit).
    Top(cmd::top::Args),
    /// Print the man page (or write all pages with --out DIR).
    Man(cmd::docs::ManArgs),
    /// Print a shell completion script.
    Completions(cmd::docs::CompletionArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Check(a) => cmd::check::run(a),
        Command::Compare(a) => cmd::compare::run(a),
        Command::Gen(a) => cmd::gen::run(a),
        Command::Plan(a) => cmd::plan::run(a),
        Command::Show(a) => cmd::show::run(a),
        Command::Diff(a) => cmd::diff::run(a),
        Command::Apply(a) => cmd::apply::run(a),
        Command::Verify(a) => cmd::verify::run(a),
        Command::Bench(a) => cmd::bench::run(a),
        Command::Watch(a) => cmd::watch::run(a),
        Command::Status(a) => cmd::status::run(a),
        Command::Confirm(a) => cmd::confirm::run(a),
        Command::Journal(a) => cmd::journal::run(a),
        Command::Stats(a) => cmd::stats::run(a),
        Command::Top(a) => cmd::top::run(a),
        Command::Man(a) => cmd::docs::man(a),
        Command::Completions(a) => cmd::docs::completions(a),
    };
    ExitCode::from(exit_code(&result))
}

/// `err` and its causes, `: `-separated, each said once: a library error
/// that already prints its source (`cannot read X: No such file or
/// directory`) is not followed by the source again.
fn chain(err: &anyhow::Error) -> String {
    let mut out = String::new();
    for e in err.chain() {
        let text = e.to_string();
        if out.ends_with(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

/// Exit code 0: success, or the reader of the output went away (a closed
/// pipe ends a command quietly).
pub const EXIT_OK: u8 = 0;
/// Exit code 1: findings (warnings under `--strict`, drift, differences,
/// a failed last action of the daemon).
pub const EXIT_FINDINGS: u8 = 1;
/// Exit code 2: bad input or a failed operation.
pub const EXIT_ERROR: u8 = 2;
/// Exit code 130: stopped by SIGINT or SIGTERM (128 + SIGINT, as shells
/// report Ctrl-C).
pub const EXIT_INTERRUPTED: u8 = 130;

/// The one mapping of a command's end to its exit code, printing the error
/// (and the advice for it) when there is one.
fn exit_code(result: &cmd::Outcome) -> u8 {
    let err = match result {
        Ok(cmd::Done::Ok) => return EXIT_OK,
        Ok(cmd::Done::Findings) => return EXIT_FINDINGS,
        Err(err) => err,
    };
    if err.chain().any(|e| e.is::<out::Closed>()) {
        return EXIT_OK;
    }
    if let Some(i) = err.downcast_ref::<cmd::Interrupted>() {
        note!("lqos: {i}");
        return EXIT_INTERRUPTED;
    }
    note!("lqos: error: {}", chain(err));
    // The library states what is wrong; what to do, with this binary's
    // flags, comes from here.
    if let Some(hint) = hints::hint(err) {
        note!("lqos: hint: {hint}");
    }
    EXIT_ERROR
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: `lqos compare` on a missing file printed the OS error
    /// twice (the library's error prints its source, and anyhow's chain
    /// printed it again).
    #[test]
    fn an_error_chain_says_each_cause_once() {
        let io = std::io::Error::from(std::io::ErrorKind::NotFound);
        let e = lqos_apply::error::ApplyError::io(
            lqos_apply::error::IoAction::ReadLibreQosState,
            Some(std::path::Path::new("/x/y.json")),
            io,
        );
        let err = anyhow::Error::new(e).context("comparing");
        assert_eq!(
            chain(&err),
            "comparing: cannot read LibreQoS state /x/y.json: entity not found"
        );
    }
}
