//! Black-box tests of `lqos apply` / `lqos verify` in a private network
//! namespace (skipped without root unless LQOS_REQUIRE_NETNS=1).

mod common;

use std::process::Command;

use common::{code, lqos, text};
use lqos_apply::netns::{require_netns, unique_name, ScratchNetns};
use lqos_apply::state::NetnsState;
use lqos_tc::TcOp;

#[test]
fn apply_verify_drift_repair_lock_and_rollback() {
    if !require_netns("cli apply") {
        return;
    }
    let (ns, dir) = common::netns_with_generated("apply", 16, 500);
    let d = dir.path();
    let base = ["--netns", ns.name(), "--state-dir", "st", "--sqm", "pfifo"];
    let with = |extra: &[&str]| -> Vec<String> {
        extra
            .iter()
            .chain(base.iter())
            .map(|s| s.to_string())
            .collect()
    };
    let run = |extra: &[&str]| {
        let args = with(extra);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        lqos(d, &refs)
    };

    let o = run(&["apply"]);
    let (out, err) = text(&o);
    assert_eq!(code(&o), 0, "{out}\n{err}");
    assert!(
        out.contains("ens19: full rebuild (no tree loaded yet)"),
        "{out}"
    );
    assert!(out.contains("wall ") && out.contains(" sys "), "{out}");

    let o = run(&["verify"]);
    let (out, err) = text(&o);
    assert_eq!(code(&o), 0, "{out}\n{err}");
    assert!(
        out.contains("ens20: plan") && out.contains("in sync"),
        "{out}"
    );

    // In sync: a dry run prints no ops.
    let o = run(&["apply", "--dry-run"]);
    let (out, err) = text(&o);
    assert_eq!(code(&o), 0, "{err}");
    assert_eq!(out, "");
    assert!(err.contains("ens19: incremental, 0 ops"), "{err}");

    // Drift: change one circuit class behind lqos's back.
    let state = NetnsState::new(d.join("st"), Some(ns.name()));
    let saved = lqos_apply::saved::load_saved_plan(&state).unwrap().unwrap();
    let class = saved.plan.interfaces[0]
        .ops
        .iter()
        .find_map(|op| match op {
            TcOp::AddClass(c) if c.classid.minor() >= 3 && !c.htb.rate.is_zero() => Some(c.clone()),
            _ => None,
        })
        .unwrap();
    let id = class.classid.to_string();
    ns.tc(&[
        "class",
        "change",
        "dev",
        "ens19",
        "parent",
        &class.parent.to_string(),
        "classid",
        &id,
        "htb",
        "rate",
        "1mbit",
        "ceil",
        "1mbit",
    ])
    .unwrap();
    let o = run(&["verify"]);
    let (out, _) = text(&o);
    assert_eq!(code(&o), 1, "{out}");
    assert!(
        out.contains(&format!("class {id}")) && out.contains("rate is 1 Mbps"),
        "{out}"
    );

    // The next apply repairs it in place.
    let o = run(&["apply", "--backend", "tc", "--serial"]);
    let (out, err) = text(&o);
    assert_eq!(code(&o), 0, "{out}\n{err}");
    assert!(
        out.contains("ens19: incremental, 1 ops (0 added, 1 changed, 0 removed)"),
        "{out}"
    );
    assert!(out.contains("ens20: incremental, 0 ops"), "{out}");
    let o = lqos(
        d,
        &[
            "verify",
            "--last",
            "--netns",
            ns.name(),
            "--state-dir",
            "st",
        ],
    );
    assert_eq!(code(&o), 0, "{:?}", text(&o));

    // A second apply while one holds the lock is refused, naming the holder.
    let lock = state.lock().unwrap();
    let o = run(&["apply"]);
    let (_, err) = text(&o);
    assert_eq!(code(&o), 2, "{err}");
    assert!(
        err.contains(&format!(
            "another apply is running (pid {})",
            std::process::id()
        )),
        "{err}"
    );
    drop(lock);

    // A plan.json from `lqos plan` applies as well (same inputs, same
    // classids: nothing to do).
    let o = lqos(
        d,
        &["plan", "--out", "p", "--queues", "16", "--sqm", "pfifo"],
    );
    assert_eq!(code(&o), 0, "{:?}", text(&o));
    let o = lqos(
        d,
        &[
            "apply",
            "--plan",
            "p/plan.json",
            "--netns",
            ns.name(),
            "--state-dir",
            "st",
            "--dry-run",
        ],
    );
    let (out, err) = text(&o);
    assert_eq!(code(&o), 0, "{err}");
    assert!(
        err.contains("ens19: incremental") && err.contains("ens20: incremental"),
        "{err}"
    );
    assert!(out.lines().count() < 50, "{out}");

    // Rollback re-applies the last good plan after the tree was wiped.
    ns.tc(&["qdisc", "del", "dev", "ens20", "root"]).unwrap();
    let o = lqos(
        d,
        &[
            "apply",
            "--rollback",
            "--netns",
            ns.name(),
            "--state-dir",
            "st",
            "--verify",
        ],
    );
    let (out, err) = text(&o);
    assert_eq!(code(&o), 0, "{out}\n{err}");
    assert!(out.contains("ens20: full rebuild"), "{out}");
    assert!(
        out.contains("ens20: plan") && !out.contains("difference"),
        "{out}"
    );
}

#[test]
fn apply_errors_exit_2_and_change_nothing() {
    if !require_netns("cli apply errors") {
        return;
    }
    let ns = ScratchNetns::create(&unique_name("lqos-cli", "errors")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    assert_eq!(
        code(&lqos(d, &["gen", "--circuits", "50", "--out", "."])),
        0
    );
    // No interfaces in the namespace.
    let o = lqos(
        d,
        &[
            "apply",
            "--netns",
            ns.name(),
            "--state-dir",
            "st",
            "--queues",
            "4",
            "--sqm",
            "pfifo",
        ],
    );
    let (_, err) = text(&o);
    assert_eq!(code(&o), 2, "{err}");
    assert!(
        err.contains(&format!(
            "interface ens19 does not exist in network namespace {}",
            ns.name()
        )),
        "{err}"
    );
    // Without --queues the probe names lqos.conf's key and what to do.
    let o = lqos(
        d,
        &[
            "apply",
            "--netns",
            ns.name(),
            "--state-dir",
            "st",
            "--sqm",
            "pfifo",
        ],
    );
    let (_, err) = text(&o);
    assert_eq!(code(&o), 2, "{err}");
    assert!(
        err.contains("(lqos.conf's [bridge] to_network names it)")
            && err.contains(&format!(
                "hint: name an interface of network namespace {}",
                ns.name()
            )),
        "{err}"
    );
    // cake on a kernel without sch_cake: preflight refuses. The state dir
    // comes from LQOS_STATE_DIR and is created on first use.
    ns.add_veth("ens19", "ens20", 4).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_lqos"))
        .args(["apply", "--netns", ns.name(), "--sqm", "cake diffserv4"])
        .env("LQOS_STATE_DIR", d.join("env-state"))
        .current_dir(d)
        .output()
        .unwrap();
    assert!(d.join("env-state/apply.lock").exists());
    let (out, err) = text(&o);
    if code(&o) == 2 {
        assert!(
            err.contains("this kernel has no sch_cake") && err.contains("use --sqm"),
            "{err}"
        );
        assert!(ns
            .tc(&["class", "show", "dev", "ens19"])
            .unwrap()
            .is_empty());
    } else {
        assert_eq!(code(&o), 0, "{out}\n{err}"); // a kernel with cake
    }
}

/// `--rollback` with nothing to roll back to: exit 2 naming the state, and
/// a missing state directory is not created (no root needed: the kernel is
/// never asked).
#[test]
fn rollback_without_a_saved_plan_says_so_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let o = lqos(d, &["apply", "--rollback", "--state-dir", "st"]);
    let (_, err) = text(&o);
    assert_eq!(code(&o), 2, "{err}");
    assert!(err.contains("nothing to roll back to"), "{err}");
    assert!(!d.join("st").exists());
    std::fs::create_dir(d.join("st")).unwrap();
    let o = lqos(
        d,
        &["apply", "--rollback", "--dry-run", "--state-dir", "st"],
    );
    let (_, err) = text(&o);
    assert_eq!(code(&o), 2, "{err}");
    assert!(
        err.contains("nothing to roll back to") && err.contains("last-plan.json"),
        "{err}"
    );
}

/// The usual reload reads the live trees on a second thread while it
/// plans: a no-op still sees every kind of drift (a changed rate, a
/// missing leaf, an extra class) and repairs exactly that; inputs that do
/// not parse fail before anything is sent, leave the trees as they were
/// and release the lock; a missing interface is named.
#[test]
fn read_ahead_noop_sees_every_drift_and_bad_inputs_change_nothing() {
    if !require_netns("cli apply read-ahead") {
        return;
    }
    let (ns, dir) = common::netns_with_generated("ahead", 4, 300);
    let d = dir.path();
    let run = |extra: &[&str]| {
        let mut args = vec!["apply", "--netns", ns.name(), "--state-dir", "st"];
        args.extend_from_slice(&["--sqm", "pfifo", "--queues", "4"]);
        args.extend_from_slice(extra);
        lqos(d, &args)
    };
    let o = run(&[]);
    assert_eq!(code(&o), 0, "{:?}", text(&o));
    // Nothing changed: nothing sent, and the readback time is the read-ahead's.
    let o = run(&[]);
    let (out, err) = text(&o);
    assert_eq!(code(&o), 0, "{out}\n{err}");
    assert!(
        out.contains("ens19: incremental, 0 ops") && out.contains("ens20: incremental, 0 ops"),
        "{out}"
    );
    assert!(out.contains("readback "), "{out}");

    // Three kinds of drift behind lqos's back.
    let state = NetnsState::new(d.join("st"), Some(ns.name()));
    let saved = lqos_apply::saved::load_saved_plan(&state).unwrap().unwrap();
    let ops = &saved.plan.interfaces[0].ops;
    let class = ops
        .iter()
        .find_map(|op| match op {
            TcOp::AddClass(c) if c.classid.minor() >= 3 && !c.htb.rate.is_zero() => Some(c.clone()),
            _ => None,
        })
        .unwrap();
    let leaf = ops
        .iter()
        .rev()
        .find_map(|op| match op {
            TcOp::AddQdisc(q) if q.parent.minor() >= 3 => Some(q.clone()),
            _ => None,
        })
        .unwrap();
    let id = class.classid.to_string();
    let parent = class.parent.to_string();
    ns.tc(&[
        "class", "change", "dev", "ens19", "parent", &parent, "classid", &id, "htb", "rate",
        "1mbit", "ceil", "1mbit",
    ])
    .unwrap();
    ns.tc(&[
        "qdisc",
        "del",
        "dev",
        "ens19",
        "parent",
        &leaf.parent.to_string(),
        "handle",
        &leaf.handle.to_string(),
    ])
    .unwrap();
    ns.tc(&[
        "class", "add", "dev", "ens20", "parent", "1:1", "classid", "1:fff0", "htb", "rate",
        "1mbit",
    ])
    .unwrap();
    let o = run(&["--verify"]);
    let (out, err) = text(&o);
    assert_eq!(code(&o), 0, "{out}\n{err}");
    assert!(
        out.contains("ens19: incremental, 2 ops (1 added, 1 changed, 0 removed)"),
        "{out}"
    );
    assert!(
        out.contains("ens20: incremental, 1 ops (0 added, 0 changed, 1 removed)"),
        "{out}"
    );
    assert!(!out.contains("difference"), "{out}");
    let o = run(&[]);
    let (out, _) = text(&o);
    assert!(
        out.contains("ens19: incremental, 0 ops") && out.contains("ens20: incremental, 0 ops"),
        "{out}"
    );

    // Inputs that do not parse: exit 2 naming the file, nothing sent, the
    // trees as they were, the lock released.
    let trees = |ns: &ScratchNetns| {
        ["ens19", "ens20"].map(|dev| {
            (
                ns.tc(&["qdisc", "show", "dev", dev]).unwrap(),
                ns.tc(&["class", "show", "dev", dev]).unwrap(),
            )
        })
    };
    let before = trees(&ns);
    let csv = std::fs::read_to_string(d.join("ShapedDevices.csv")).unwrap();
    let mut bad: Vec<String> = csv.lines().map(str::to_string).collect();
    bad[2] = bad[2].replacen(",", ",\"unterminated", 1);
    bad.push("x,y".into());
    std::fs::write(d.join("ShapedDevices.csv"), bad.join("\n")).unwrap();
    let o = run(&[]);
    let (out, err) = text(&o);
    assert_eq!(code(&o), 2, "{out}\n{err}");
    assert!(err.contains("ShapedDevices.csv"), "{err}");
    // Regression: invalid inputs were met with `cannot plan (give --queues
    // N if the interfaces cannot be probed)`; the queues are not the
    // problem.
    assert!(!err.contains("--queues"), "{err}");
    assert_eq!(trees(&ns), before);
    drop(state.lock().expect("the failed apply released the lock"));
    std::fs::write(d.join("ShapedDevices.csv"), csv).unwrap();

    // An interface that does not exist is named (the read-ahead's failed
    // dump of it does not hide the preflight's message).
    let conf = std::fs::read_to_string(d.join("lqos.conf")).unwrap();
    std::fs::write(
        d.join("lqos.conf"),
        conf.replace("to_internet = \"ens20\"", "to_internet = \"ens21\""),
    )
    .unwrap();
    let o = run(&[]);
    let (_, err) = text(&o);
    assert_eq!(code(&o), 2, "{err}");
    assert!(
        err.contains(&format!(
            "interface ens21 does not exist in network namespace {}",
            ns.name()
        )),
        "{err}"
    );
    assert_eq!(trees(&ns), before);
}

/// `lqos apply` refuses a cut-short ShapedDevices.csv (exit 2, the count
/// and the first circuits named, nothing changed); `--allow-removals`
/// applies it; `--rollback --to 2` brings the whole one back.
#[test]
fn apply_refuses_too_many_removals_until_allowed_and_rolls_back_from_the_journal() {
    if !require_netns("cli apply removal guard") {
        return;
    }
    let (ns, dir) = common::netns_with_generated("guard", 4, 200);
    let d = dir.path();
    let base = ["--netns", ns.name(), "--state-dir", "st", "--sqm", "pfifo"];
    let run = |extra: &[&str]| {
        let args: Vec<&str> = extra.iter().chain(base.iter()).copied().collect();
        lqos(d, &args)
    };
    let o = run(&["apply"]);
    assert_eq!(code(&o), 0, "{:?}", text(&o));
    let csv = std::fs::read_to_string(d.join("ShapedDevices.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    let short = lines[..151].join("\n") + "\n";
    let kept = csv::Reader::from_reader(short.as_bytes())
        .records()
        .map(|r| r.unwrap()[0].to_string())
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    std::fs::write(d.join("ShapedDevices.csv"), &short).unwrap();
    let before = ns.tc(&["class", "show", "dev", "ens19"]).unwrap();
    let o = run(&["apply"]);
    let (out, err) = text(&o);
    assert_eq!(code(&o), 2, "{out}{err}");
    assert!(
        err.contains(&format!(
            "refused: would remove {} of 200 circuits",
            200 - kept
        )),
        "{err}"
    );
    assert!(err.contains("--allow-removals"), "{err}");
    assert_eq!(ns.tc(&["class", "show", "dev", "ens19"]).unwrap(), before);
    // A higher limit, or --allow-removals: applied.
    let o = run(&["apply", "--max-removals", "100"]);
    assert_eq!(code(&o), 0, "{:?}", text(&o));
    let o = lqos(d, &["journal", "--netns", ns.name(), "--state-dir", "st"]);
    let (out, _) = text(&o);
    assert!(
        out.contains("1: ")
            && out.contains(&format!("{kept} circuits"))
            && out.contains("200 circuits"),
        "{out}"
    );
    // Back to what was live before.
    let o = run(&["apply", "--rollback", "--to", "2"]);
    assert_eq!(code(&o), 0, "{:?}", text(&o));
    assert_eq!(ns.tc(&["class", "show", "dev", "ens19"]).unwrap(), before);
    // Removing them again needs the flag.
    let o = run(&["apply"]);
    assert_eq!(code(&o), 2, "{:?}", text(&o));
    let o = run(&["apply", "--allow-removals"]);
    assert_eq!(code(&o), 0, "{:?}", text(&o));
}

/// A circuit whose Parent Node is not in network.json: `lqos apply` loads
/// the rest, warns naming the file, line, circuit and node, and gives that
/// circuit nothing in the kernel (the tree verifies in sync against the
/// files, and has as many classes as without the circuit).
#[test]
fn apply_loads_a_circuit_with_an_unknown_parent_node_unshaped_with_a_warning() {
    if !require_netns("cli apply unshaped") {
        return;
    }
    let (ns, dir) = common::netns_with_generated("unshaped", 2, 20);
    let d = dir.path();
    let args = ["--netns", ns.name(), "--state-dir", "st", "--sqm", "pfifo"];
    let run = |cmd: &str| {
        let mut a = vec![cmd];
        a.extend(args);
        lqos(d, &a)
    };
    let classes = || common::class_count(&ns, "ens20").unwrap();
    let o = run("apply");
    assert_eq!(code(&o), 0, "{:?}", text(&o));
    let before = classes();

    let csv = d.join("ShapedDevices.csv");
    let mut rows = std::fs::read_to_string(&csv).unwrap();
    let line = rows.lines().count() + 1;
    rows.push_str(&common::device_row("99999", "Nowhere", "100.127.0.9"));
    std::fs::write(&csv, rows).unwrap();
    let o = run("apply");
    let (out, err) = text(&o);
    assert_eq!(code(&o), 0, "{out}\n{err}");
    let warning = format!(
        "ShapedDevices.csv:{line}: circuit \"99999\": parent node \"Nowhere\" does not exist in network.json; the circuit is not shaped"
    );
    assert!(err.contains(&warning), "{err}");
    assert_eq!(classes(), before, "the unshaped circuit got a class");
    common::assert_in_sync(d, &ns);
}

/// Regression: the flags of the last apply were forgotten. After `lqos
/// apply --sqm pfifo` on a 4-queue pair (the generated lqos.conf asks for
/// cake), a plain `lqos verify` reported every leaf as drift, `lqos show
/// --ip` named classids of a 16-queue plan that is not live, and `lqos
/// apply --rollback --to N` planned cake. They now use what was applied:
/// the state directory's record of it, and the journal's overrides.
#[test]
fn the_flags_of_the_last_apply_are_not_forgotten() {
    if !require_netns("the_flags_of_the_last_apply_are_not_forgotten") {
        return;
    }
    let (ns, dir) = common::netns_with_generated("flags", 4, 200);
    let d = dir.path();
    let target = ["--netns", ns.name(), "--state-dir", "st"];
    let run = |args: &[&str]| {
        let all: Vec<&str> = args.iter().chain(target.iter()).copied().collect();
        lqos(d, &all)
    };
    let o = run(&["apply", "--sqm", "pfifo"]);
    assert_eq!(code(&o), 0, "{:?}", text(&o));

    // verify: against what was applied, and says so.
    let o = run(&["verify"]);
    let (out, err) = text(&o);
    assert_eq!(code(&o), 0, "{out}{err}");
    assert!(
        err.contains("verifying against the plan applied at"),
        "{err}"
    );
    // Told otherwise: the input files' plan (cake) is not what is live.
    let o = run(&["verify", "--from-inputs"]);
    assert_eq!(code(&o), 1, "{:?}", text(&o));

    // show --ip: the classid that is live (4 queues, not 16).
    let o = run(&["show", "--ip", "100.64.0.7"]);
    let (out, err) = text(&o);
    assert_eq!(code(&o), 0, "{out}{err}");
    let class = out
        .lines()
        .find(|l| l.trim_start().starts_with("download:"))
        .and_then(|l| l.split(" class ").nth(1))
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("{out}"))
        .to_string();
    let live = ns
        .tc(&["class", "show", "dev", "ens19", "classid", &class])
        .unwrap();
    assert!(
        live.contains(&format!("class htb {class} ")),
        "{class}: {live}"
    );
    let o = run(&["show"]);
    let (out, _) = text(&o);
    assert_eq!(
        out.lines().filter(|l| l.contains("queue ")).count(),
        8,
        "4 queues per direction:\n{out}"
    );

    // A second input set, then back to the first: planned with pfifo.
    let csv = std::fs::read_to_string(d.join("ShapedDevices.csv")).unwrap();
    std::fs::write(
        d.join("ShapedDevices.csv"),
        csv.replacen(",1000,100,", ",900,100,", 1),
    )
    .unwrap();
    let o = run(&["apply", "--sqm", "pfifo"]);
    assert_eq!(code(&o), 0, "{:?}", text(&o));
    let o = run(&["journal"]);
    let (out, _) = text(&o);
    assert!(out.contains("(apply, with --sqm pfifo)"), "{out}");
    assert!(
        out.contains("network.json ")
            && out.contains("ShapedDevices.csv ")
            && out.contains("lqos.conf "),
        "{out}"
    );
    let o = run(&["apply", "--rollback", "--to", "2"]);
    let (out, err) = text(&o);
    assert_eq!(code(&o), 0, "{out}{err}");
    assert!(out.contains("0 added, 1 changed, 0 removed"), "{out}");
    let o = run(&["verify"]);
    assert_eq!(code(&o), 0, "{:?}", text(&o));
}
