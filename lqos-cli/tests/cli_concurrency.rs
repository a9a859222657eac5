//! Concurrency (the real binary, spawned, in a private network namespace):
//! two `lqos apply` at once, `lqos apply` and a second daemon while `lqos
//! watch` runs, a daemon killed in the middle of an edit and restarted.
//! One owner of the tree at a time, no interleaved loads, no lost edit.
//! Skipped without root unless LQOS_REQUIRE_NETNS=1.

mod common;

use common::{assert_in_sync, class_count, code, lqos, spawn, text, wait_while_running};
use lqos_apply::netns::require_netns;
use nix::sys::signal::Signal;

fn apply_args<'a>(ns: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec![
        "apply",
        "--netns",
        ns,
        "--state-dir",
        "st",
        "--sqm",
        "pfifo",
    ];
    a.extend_from_slice(extra);
    a
}

fn watch_args(ns: &str) -> Vec<&str> {
    vec![
        "watch",
        "--netns",
        ns,
        "--state-dir",
        "st",
        "--sqm",
        "pfifo",
        "--verify-every",
        "0",
        "--debounce",
        "20",
        "--log-format",
        "json",
    ]
}

/// What a refused run printed: it names the lock's holder.
fn assert_refused_by(o: &std::process::Output, holder: u32) {
    let (out, err) = text(o);
    assert_eq!(code(o), 2, "{out}\n{err}");
    assert!(
        err.contains(&format!("(pid {holder})")),
        "does not name pid {holder}: {err}"
    );
}

#[test]
fn two_applies_at_once_never_interleave_the_second_is_refused_naming_the_first() {
    if !require_netns("cli concurrent applies") {
        return;
    }
    let (ns, dir) = common::netns_with_generated("twoapply", 16, 6000);
    let d = dir.path();

    // The second starts while the first loads: refused at once, naming it.
    let mut first = spawn(d, &apply_args(ns.name(), &[]));
    wait_while_running(&mut first, "the first load", || {
        class_count(&ns, "ens19").is_some_and(|n| n > 200)
    });
    let second = lqos(d, &apply_args(ns.name(), &["--full"]));
    assert_refused_by(&second, first.id());
    let o = first.wait_with_output().unwrap();
    assert_eq!(code(&o), 0, "{:?}", text(&o));
    assert_in_sync(d, &ns);

    // Both started together (a full rebuild each): one loads, the other is
    // refused; the tree is the one load's.
    let a = spawn(d, &apply_args(ns.name(), &["--full"]));
    let b = spawn(d, &apply_args(ns.name(), &["--full"]));
    let (pa, pb) = (a.id(), b.id());
    let (oa, ob) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    let (ok, refused, winner) = match (code(&oa), code(&ob)) {
        (0, 2) => (&oa, &ob, pa),
        (2, 0) => (&ob, &oa, pb),
        c => panic!("exit codes {c:?}: {:?} {:?}", text(&oa), text(&ob)),
    };
    assert!(text(ok).0.contains("full rebuild"), "{:?}", text(ok));
    assert_refused_by(refused, winner);
    assert_in_sync(d, &ns);
    ns.tc(&["qdisc", "del", "dev", "ens19", "root"]).unwrap();
    ns.tc(&["qdisc", "del", "dev", "ens20", "root"]).unwrap();
}

/// The JSON log lines of a daemon's stderr so far, read by a thread.
struct Log(std::sync::Arc<std::sync::Mutex<Vec<serde_json::Value>>>);

impl Log {
    fn of(child: &mut std::process::Child) -> Log {
        use std::io::BufRead;
        let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let l = lines.clone();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                let v = serde_json::from_str(&line)
                    .unwrap_or_else(|_| serde_json::json!({ "message": line }));
                l.lock().unwrap().push(v);
            }
        });
        Log(lines)
    }

    fn has(&self, pred: impl Fn(&serde_json::Value) -> bool) -> bool {
        self.0.lock().unwrap().iter().any(pred)
    }

    fn dump(&self) -> String {
        let l = self.0.lock().unwrap();
        l.iter()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

fn applied(trigger: &'static str) -> impl Fn(&serde_json::Value) -> bool {
    move |v| v["message"] == "applied" && v["trigger"] == trigger
}

#[test]
fn while_the_daemon_runs_apply_and_a_second_daemon_are_refused_naming_its_pid() {
    if !require_netns("cli apply beside watch") {
        return;
    }
    let (ns, dir) = common::netns_with_generated("besidewatch", 4, 200);
    let d = dir.path();
    let mut daemon = spawn(d, &watch_args(ns.name()));
    let log = Log::of(&mut daemon);
    wait_while_running(&mut daemon, "the start load", || log.has(applied("start")));

    for extra in [&[][..], &["--full"], &["--rollback"]] {
        let o = lqos(d, &apply_args(ns.name(), extra));
        assert_refused_by(&o, daemon.id());
        // Regression: it said another apply was running and to wait for
        // it; the daemon never finishes. It says what holds the lock and
        // what to do instead.
        let (_, err) = text(&o);
        assert!(
            err.contains("the reload daemon holds the lock") && !err.contains("wait for it"),
            "{err}"
        );
        assert!(
            err.contains(&format!("hint: `lqos watch` (pid {})", daemon.id()))
                && err.contains("lqos status")
                && err.contains("systemctl stop lqos-watch"),
            "{err}"
        );
    }
    let second = lqos(d, &watch_args(ns.name()));
    assert_refused_by(&second, daemon.id());
    assert_in_sync(d, &ns);
    common::signal(&daemon, Signal::SIGTERM);
    let status = daemon.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{}", log.dump());
    // Its lock is released with it.
    let o = lqos(d, &apply_args(ns.name(), &[]));
    assert_eq!(code(&o), 0, "{:?}", text(&o));
}

/// `n` new single-device circuits under `parent`, as `ShapedDevices.csv`
/// rows (ids from 50,000, addresses in 100.96.0.0/16).
fn new_rows(n: usize, parent: &str) -> String {
    (0..n)
        .map(|i| {
            let ipv4 = format!("100.96.{}.{}", i / 250, i % 250 + 1);
            common::device_row(&(50_000 + i).to_string(), parent, &ipv4)
        })
        .collect()
}

#[test]
fn a_daemon_killed_mid_edit_and_restarted_loses_no_edit_and_is_the_only_owner() {
    if !require_netns("cli watch killed mid-edit") {
        return;
    }
    let (ns, dir) = common::netns_with_generated("killedit", 4, 300);
    let d = dir.path();
    let mut daemon = spawn(d, &watch_args(ns.name()));
    let log = Log::of(&mut daemon);
    wait_while_running(&mut daemon, "the start load", || log.has(applied("start")));
    let start = class_count(&ns, "ens19").unwrap();

    // The edit: 1,500 circuits more (thousands of ops). SIGKILL once the
    // kernel has the first of them: no clean stop, no state saved.
    let csv = d.join("ShapedDevices.csv");
    let mut rows = std::fs::read_to_string(&csv).unwrap();
    let parent = rows
        .lines()
        .nth(1)
        .unwrap()
        .split("\",\"")
        .nth(3)
        .unwrap()
        .to_string();
    rows.push_str(&new_rows(1500, &parent));
    let tmp = d.join("ShapedDevices.csv.new");
    std::fs::write(&tmp, &rows).unwrap();
    std::fs::rename(&tmp, &csv).unwrap();
    wait_while_running(&mut daemon, "the edit's first classes", || {
        class_count(&ns, "ens19").is_some_and(|n| n > start)
    });
    common::signal(&daemon, Signal::SIGKILL);
    daemon.wait().unwrap();
    let at_kill = class_count(&ns, "ens19").unwrap();
    eprintln!("ens19: {start} classes before the edit, {at_kill} when killed");
    assert!(
        at_kill < start + 1500,
        "the edit's load ended before the kill ({at_kill} classes): nothing was cut"
    );

    // The restart takes over the dead daemon's lock and converges to the
    // edited file: the edit is not lost.
    let mut daemon = spawn(d, &watch_args(ns.name()));
    let log = Log::of(&mut daemon);
    wait_while_running(&mut daemon, "the restart's load", || {
        log.has(applied("start"))
    });
    assert_in_sync(d, &ns);
    assert!(
        class_count(&ns, "ens19").unwrap() >= start + 1500,
        "{}",
        log.dump()
    );
    // One owner: the restarted daemon, named by a refused apply.
    assert_refused_by(&lqos(d, &apply_args(ns.name(), &[])), daemon.id());
    common::signal(&daemon, Signal::SIGTERM);
    let status = daemon.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{}", log.dump());
}
