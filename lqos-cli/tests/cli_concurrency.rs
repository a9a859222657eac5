//! Concurrency (the real binary, spawned, in a private network namespace):
//! two `lqos apply` at once, `lqos apply` and a second daemon while `lqos
//! watch` runs, and a daemon killed (-9) in the middle of a load, the files
//! edited, the daemon started again. One owner of the tree at a time, no
//! interleaved loads, no lost edit. Skipped without root unless
//! LQOS_REQUIRE_NETNS=1.

mod common;

use std::path::Path;
use std::time::Instant;

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
        assert_refused_by(&lqos(d, &apply_args(ns.name(), extra)), daemon.id());
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

/// `csv` with its first `rows` data rows only.
fn first_rows(csv: &str, rows: usize) -> String {
    csv.lines().take(rows + 1).collect::<Vec<_>>().join("\n") + "\n"
}

/// Replaces `path` by rename.
fn replace(path: &Path, contents: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, contents).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

#[test]
fn a_daemon_killed_mid_load_then_restarted_after_an_edit_loses_no_edit() {
    if !require_netns("cli watch killed mid-load") {
        return;
    }
    let (ns, dir) = common::netns_with_generated("killwatch", 16, 8000);
    let d = dir.path();
    let devices = d.join("ShapedDevices.csv");
    let all = std::fs::read_to_string(&devices).unwrap();
    let rows = all.lines().count() - 1;
    std::fs::write(&devices, first_rows(&all, rows / 2)).unwrap();

    let mut daemon = spawn(d, &watch_args(ns.name()));
    let log = Log::of(&mut daemon);
    wait_while_running(&mut daemon, "the start load", || log.has(applied("start")));
    let half = class_count(&ns, "ens19").unwrap();

    // An edit adds the other half of the circuits (thousands of classes:
    // a load of seconds); the daemon is killed in the middle of it.
    replace(&devices, &all);
    wait_while_running(&mut daemon, "the edit's load", || {
        class_count(&ns, "ens19").is_some_and(|n| n > half + 200)
    });
    daemon.kill().unwrap();
    daemon.wait().unwrap();
    let partial = class_count(&ns, "ens19").unwrap();
    assert!(
        partial < 2 * half,
        "the edit's load had finished: {partial}"
    );

    // While it is down, the files change again: one circuit's speed.
    let edited = {
        let mut r = csv::Reader::from_reader(all.as_bytes());
        let header = r.headers().unwrap().clone();
        let col = |name| header.iter().position(|h| h == name).unwrap();
        let (min, max) = (col("Download Min Mbps"), col("Download Max Mbps"));
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(&header).unwrap();
        for (i, rec) in r.records().enumerate() {
            let rec = rec.unwrap();
            let faster = format!("{}", rec[min].parse::<f64>().unwrap() + 1.0);
            let f: Vec<&str> = rec
                .iter()
                .enumerate()
                .map(|(j, v)| if i == 0 && j == max { &faster } else { v })
                .collect();
            w.write_record(&f).unwrap();
        }
        String::from_utf8(w.into_inner().unwrap()).unwrap()
    };
    replace(&devices, &edited);

    // The next daemon owns the tree alone, and converges to both edits.
    let t = Instant::now();
    let mut daemon = spawn(d, &watch_args(ns.name()));
    let log = Log::of(&mut daemon);
    let converged = |v: &serde_json::Value| v["message"] == "applied";
    let failed = std::cell::Cell::new(false);
    wait_while_running(&mut daemon, "the restart's load", || {
        failed.set(log.has(|v| v["level"] == "ERROR"));
        failed.get() || log.has(converged)
    });
    assert!(!failed.get(), "{}", log.dump());
    eprintln!("restart converged after {:?}:\n{}", t.elapsed(), log.dump());
    assert_refused_by(&lqos(d, &apply_args(ns.name(), &[])), daemon.id());
    assert_in_sync(d, &ns);
    assert!(class_count(&ns, "ens19").unwrap() > partial);
    common::signal(&daemon, Signal::SIGTERM);
    assert_eq!(daemon.wait().unwrap().code(), Some(0), "{}", log.dump());
    ns.tc(&["qdisc", "del", "dev", "ens19", "root"]).unwrap();
    ns.tc(&["qdisc", "del", "dev", "ens20", "root"]).unwrap();
}
