//! Every printing command ends quietly (exit 0, nothing on stderr about
//! it) when the reader of its output goes away, as `lqos verify | head -1`
//! does: regression tests for `failed printing to stdout: Broken pipe`
//! panics (exit 101) and `lqos man | head` exiting 2.
//!
//! The reader here closes its end before the command writes anything, so
//! the first write fails with EPIPE every time (a `head` that reads a
//! line first would race with small outputs).

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::{code, lqos, lqos_bin, netns_with_generated, ok, text};
use lqos_apply::netns::require_netns;

/// Runs `lqos ARGS` in `dir` with stdout a pipe whose reader is gone.
fn into_closed_pipe(dir: &Path, args: &[&str]) -> Output {
    let mut child = Command::new(lqos_bin())
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run lqos");
    drop(child.stdout.take());
    child.wait_with_output().expect("wait for lqos")
}

/// Exit 0 and no panic or error on stderr.
fn quiet(args: &[&str], o: &Output) {
    let (_, err) = text(o);
    assert_eq!(code(o), 0, "lqos {}: {err}", args.join(" "));
    assert!(
        !err.contains("panicked") && !err.contains("error") && !err.contains("Broken pipe"),
        "lqos {}: {err}",
        args.join(" ")
    );
}

#[test]
fn a_closed_pipe_ends_every_offline_command_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ok(&lqos(d, &["gen", "--circuits", "200", "--out", "."]));
    ok(&lqos(d, &["plan", "--out", "old"]));
    let state = d.join("state");
    let state = state.to_str().unwrap();
    for args in [
        &["man"][..],
        &["completions", "bash"],
        &["check"],
        &["show"],
        &["show", "--circuits"],
        &["show", "--ip", "100.64.0.7"],
        &["plan", "--out", "new"],
        &["diff", "old/plan.json", "new/plan.json"],
        &["diff", "old/plan.json", "--queues", "4"],
        &["journal", "--state-dir", state],
        &["gen", "--circuits", "10", "--out", "g"],
        &["help"],
        &["--version"],
    ] {
        quiet(args, &into_closed_pipe(d, args));
    }
}

/// The commands that read the kernel: `apply`, `verify`, `stats` and
/// `status` against a tree loaded in a scratch namespace.
#[test]
fn a_closed_pipe_ends_every_live_command_quietly() {
    if !require_netns("a_closed_pipe_ends_every_live_command_quietly") {
        return;
    }
    let (ns, dir) = netns_with_generated("pipes", 4, 200);
    let d = dir.path();
    let state = d.join("state");
    let state = state.to_str().unwrap();
    let target = ["--netns", ns.name(), "--state-dir", state];
    let with = |args: &[&'static str]| -> Vec<String> {
        args.iter()
            .chain(target.iter())
            .map(|s| s.to_string())
            .collect()
    };
    let args = with(&["apply", "--sqm", "pfifo"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    quiet(&args, &into_closed_pipe(d, &args));
    for args in [
        &["apply", "--sqm", "pfifo", "--dry-run", "--full"][..],
        &["apply", "--sqm", "pfifo", "--verify"],
        &["verify"],
        &["verify", "--json"],
        &["stats", "--interval", "0"],
        &["stats", "--interval", "0", "--json"],
        &["journal"],
    ] {
        let args = with(args);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        quiet(&args, &into_closed_pipe(d, &args));
    }
}
