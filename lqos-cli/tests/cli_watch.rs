//! Black-box tests of `lqos watch` (the real binary, spawned) in a private
//! network namespace: edit-to-kernel by rename, broken inputs, SIGHUP,
//! SIGTERM, `lqos status`, and lazy leaves driven by real traffic.
//! Skipped without root unless LQOS_REQUIRE_NETNS=1.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{code, lqos, text};
use lqos_apply::netlink::NetlinkSocket;
use lqos_apply::netns::{require_netns, unique_name, ScratchNetns};
use lqos_tc::tree::TcTree;
use lqos_tc::TcHandle;
use serde_json::Value;

/// The daemon, its JSON log lines collected by a reader thread; killed on
/// drop if a test fails before stopping it.
struct Daemon {
    child: Child,
    log: Arc<Mutex<Vec<Value>>>,
}

impl Daemon {
    fn start(dir: &Path, args: &[&str]) -> Daemon {
        let mut child = Command::new(env!("CARGO_BIN_EXE_lqos"))
            .arg("watch")
            .args(["--log-format", "json"])
            .args(args)
            .current_dir(dir)
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn lqos watch");
        let log = Arc::new(Mutex::new(Vec::new()));
        let l = log.clone();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let v = serde_json::from_str(&line)
                    .unwrap_or_else(|_| serde_json::json!({ "message": line }));
                l.lock().unwrap().push(v);
            }
        });
        Daemon { child, log }
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    fn signal(&self, sig: nix::sys::signal::Signal) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid()), sig).unwrap();
    }

    fn lines(&self) -> Vec<Value> {
        self.log.lock().unwrap().clone()
    }

    fn dump(&self) -> String {
        self.lines()
            .iter()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Waits (up to `within`) for a log line, after the first `skip`,
    /// matching `pred`.
    fn wait_log(&self, skip: usize, within: Duration, pred: impl Fn(&Value) -> bool) -> Value {
        let end = Instant::now() + within;
        loop {
            if let Some(v) = self.lines().into_iter().skip(skip).find(&pred) {
                return v;
            }
            assert!(
                Instant::now() < end,
                "no such log line within {within:?}; log:\n{}",
                self.dump()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn count(&self) -> usize {
        self.log.lock().unwrap().len()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn msg(v: &Value) -> &str {
    v["message"].as_str().unwrap_or("")
}

fn applied(trigger: &'static str) -> impl Fn(&Value) -> bool {
    move |v| msg(v) == "applied" && v["trigger"] == trigger
}

/// The live tree of `dev` in `ns`, read with lqos's own netlink dump.
fn tree(ns: &str, dev: &str) -> TcTree {
    let mut s = NetlinkSocket::open_in_netns(ns).unwrap();
    let l = s.link(dev).unwrap();
    s.dump(l.ifindex).unwrap()
}

/// Replaces `path` by rename, as CRM integrations do.
fn replace(path: &Path, contents: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, contents).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// The CSV with row `row` (1-based data row)'s `Download Max Mbps` set.
fn with_download_max(csv: &str, row: usize, value: &str) -> String {
    with_field(csv, row, "Download Max Mbps", value)
}

/// The CSV with row `row` (1-based data row)'s column `name` set.
fn with_field(csv: &str, row: usize, name: &str, value: &str) -> String {
    let mut lines: Vec<String> = csv.lines().map(str::to_string).collect();
    let header: Vec<&str> = lines[0].split(',').collect();
    let col = header
        .iter()
        .position(|h| h.trim_matches('"') == name)
        .unwrap();
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(false)
        .from_reader(lines[row].as_bytes());
    let rec = rdr.records().next().unwrap().unwrap();
    let mut w = csv::Writer::from_writer(Vec::new());
    let fields: Vec<String> = rec
        .iter()
        .enumerate()
        .map(|(i, f)| {
            if i == col {
                value.to_string()
            } else {
                f.to_string()
            }
        })
        .collect();
    w.write_record(&fields).unwrap();
    lines[row] = String::from_utf8(w.into_inner().unwrap())
        .unwrap()
        .trim_end()
        .to_string();
    lines.join("\n") + "\n"
}

/// Row `row`'s (1-based data row) column `name`.
fn field(csv: &str, row: usize, name: &str) -> String {
    let mut rdr = csv::Reader::from_reader(csv.as_bytes());
    let col = rdr
        .headers()
        .unwrap()
        .iter()
        .position(|h| h == name)
        .unwrap();
    rdr.records().nth(row - 1).unwrap().unwrap()[col].to_string()
}

/// The classes of `a` that differ from `b` (changed or missing).
fn changed_classes(a: &TcTree, b: &TcTree) -> Vec<TcHandle> {
    let mut out: Vec<TcHandle> = a
        .classes
        .iter()
        .filter(|(id, c)| b.classes.get(id) != Some(c))
        .map(|(id, _)| *id)
        .collect();
    out.extend(b.classes.keys().filter(|id| !a.classes.contains_key(id)));
    out
}

#[test]
fn watch_applies_renamed_edits_rejects_broken_files_and_handles_signals() {
    if !require_netns("cli watch") {
        return;
    }
    let (ns, dir) = common::netns_with_generated("watch", 8, 300);
    let d = dir.path();
    let daemon = Daemon::start(
        d,
        &[
            "--netns",
            ns.name(),
            "--state-dir",
            "st",
            "--sqm",
            "pfifo",
            "--verify-every",
            "0",
            "--debounce",
            "20",
            "--retry",
            "1",
        ],
    );
    let start = daemon.wait_log(0, Duration::from_secs(60), applied("start"));
    assert!(start["added"].as_u64().unwrap() > 600, "{start}");
    let down0 = tree(ns.name(), "ens19");
    let up0 = tree(ns.name(), "ens20");

    // `lqos status` while it runs.
    let o = lqos(d, &["status", "--netns", ns.name(), "--state-dir", "st"]);
    let (out, err) = text(&o);
    assert_eq!(code(&o), 0, "{out}{err}");
    assert!(out.contains(&format!("(pid {})", daemon.pid())), "{out}");
    assert!(
        out.contains("running since") && out.contains("start: applied"),
        "{out}"
    );

    // One circuit's download speed changes, file replaced by rename: its
    // ceil is in the kernel and nothing else changed. (The time is printed,
    // not asserted: docs/benchmarks.md has the measurement.)
    let csv0 = std::fs::read_to_string(d.join("ShapedDevices.csv")).unwrap();
    let csv1 = with_download_max(&csv0, 5, "77");
    let n = daemon.count();
    let t0 = Instant::now();
    replace(&d.join("ShapedDevices.csv"), &csv1);
    loop {
        if tree(ns.name(), "ens19") != down0 {
            eprintln!("edit-to-kernel: {:.1} ms", t0.elapsed().as_secs_f64() * 1e3);
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "no change in the kernel; log:\n{}",
            daemon.dump()
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    // The line comes once the daemon is done with every interface.
    let ev = daemon.wait_log(n, Duration::from_secs(30), applied("file-change"));
    assert_eq!(
        (
            ev["added"].as_u64(),
            ev["changed"].as_u64(),
            ev["removed"].as_u64()
        ),
        (Some(0), Some(1), Some(0)),
        "{ev}"
    );
    let down1 = tree(ns.name(), "ens19");
    let diff = changed_classes(&down0, &down1);
    assert_eq!(diff.len(), 1, "{diff:?}");
    assert_eq!(
        down1.classes[&diff[0]].htb.ceil,
        lqos_model::Rate::from_mbps(77)
    );
    assert_eq!(down1.qdiscs, down0.qdiscs);
    assert_eq!(tree(ns.name(), "ens20"), up0);

    // A broken file: rejected with the line named; tree and daemon stay.
    let broken = with_download_max(&csv1, 3, "fast");
    let n = daemon.count();
    replace(&d.join("ShapedDevices.csv"), &broken);
    let bad = daemon.wait_log(n, Duration::from_secs(30), |v| msg(v) == "invalid input");
    assert!(
        bad["problem"]
            .as_str()
            .unwrap()
            .contains("ShapedDevices.csv:4"),
        "{bad}"
    );
    assert_eq!(bad["line"].as_u64(), Some(4), "{bad}");
    daemon.wait_log(n, Duration::from_secs(30), |v| {
        msg(v).starts_with("inputs rejected")
    });
    assert!(
        daemon.lines()[n..].iter().all(|v| msg(v) != "applied"),
        "{}",
        daemon.dump()
    );
    assert_eq!(tree(ns.name(), "ens19"), down1);
    assert_eq!(tree(ns.name(), "ens20"), up0);
    let o = lqos(d, &["status", "--netns", ns.name(), "--state-dir", "st"]);
    let (out, _) = text(&o);
    assert_eq!(code(&o), 1, "{out}");
    assert!(
        out.contains("rejected") && out.contains("ShapedDevices.csv:4"),
        "{out}"
    );

    // The file restored to what is live (regression,
    // fixed_input_clears_failed_status): nothing to send, and the status
    // says so at once (no SIGHUP needed).
    let n = daemon.count();
    replace(&d.join("ShapedDevices.csv"), &csv1);
    daemon.wait_log(n, Duration::from_secs(30), |v| {
        msg(v).starts_with("inputs are the ones live again")
    });
    let o = lqos(d, &["status", "--netns", ns.name(), "--state-dir", "st"]);
    let (out, _) = text(&o);
    assert_eq!(code(&o), 0, "{out}");
    assert!(out.contains("file-change: applied"), "{out}");

    // Fixed (back to the original speeds): applied.
    let n = daemon.count();
    replace(&d.join("ShapedDevices.csv"), &csv0);
    daemon.wait_log(n, Duration::from_secs(30), applied("file-change"));
    assert_eq!(tree(ns.name(), "ens19"), down0);

    // Drift behind the daemon's back; SIGHUP applies now, reading the
    // kernel back, and repairs it.
    let id = diff[0].to_string();
    let parent = down0.classes[&diff[0]].parent.to_string();
    ns.tc(&[
        "class", "change", "dev", "ens19", "parent", &parent, "classid", &id, "htb", "rate",
        "1mbit", "ceil", "1mbit",
    ])
    .unwrap();
    let n = daemon.count();
    daemon.signal(nix::sys::signal::Signal::SIGHUP);
    let ev = daemon.wait_log(n, Duration::from_secs(30), applied("sighup"));
    assert_eq!(ev["changed"].as_u64(), Some(1), "{ev}");
    assert_eq!(tree(ns.name(), "ens19"), down0);

    // A kernel error: ens20's tree is wiped behind the daemon's back, then
    // an upload speed changes. The class change fails (the daemon trusted
    // its model): logged with the op, retried with a read-back, repaired.
    ns.tc(&["qdisc", "del", "dev", "ens20", "root"]).unwrap();
    let n = daemon.count();
    let up_min: f64 = field(&csv0, 5, "Upload Min Mbps").parse().unwrap();
    replace(
        &d.join("ShapedDevices.csv"),
        &with_field(&csv0, 5, "Upload Max Mbps", &(up_min + 1.0).to_string()),
    );
    let err = daemon.wait_log(n, Duration::from_secs(30), |v| {
        msg(v) == "kernel error; will retry"
    });
    let e = err["error"].as_str().unwrap();
    assert!(e.contains("ens20") && e.contains("class change"), "{err}");
    let ev = daemon.wait_log(n, Duration::from_secs(30), applied("retry"));
    assert!(ev["added"].as_u64().unwrap() > 300, "{ev}");
    let up1 = tree(ns.name(), "ens20");
    assert_eq!(changed_classes(&up0, &up1).len(), 1);
    // (The count before the edit: the line may come before `replace`
    // returns to this thread.)
    let n2 = daemon.count();
    replace(&d.join("ShapedDevices.csv"), &csv0);
    daemon.wait_log(n2, Duration::from_secs(30), applied("file-change"));
    assert_eq!(tree(ns.name(), "ens20"), up0);
    assert_eq!(tree(ns.name(), "ens19"), down0);

    // SIGTERM: clean exit, tree left as it is, status says stopped.
    let mut daemon = daemon;
    daemon.signal(nix::sys::signal::Signal::SIGTERM);
    let end = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = daemon.child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < end, "still running after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0), "{}", daemon.dump());
    assert_eq!(tree(ns.name(), "ens19"), down0);
    assert_eq!(tree(ns.name(), "ens20"), up0);
    let o = lqos(d, &["status", "--netns", ns.name(), "--state-dir", "st"]);
    let (out, _) = text(&o);
    assert!(out.contains("stopped at"), "{out}");
}

/// Data rows (1-based) of circuits with one device.
fn single_device_rows(csv: &str) -> Vec<usize> {
    let mut rdr = csv::Reader::from_reader(csv.as_bytes());
    let ids: Vec<String> = rdr.records().map(|r| r.unwrap()[0].to_string()).collect();
    (0..ids.len())
        .filter(|&i| ids.iter().filter(|x| **x == ids[i]).count() == 1)
        .map(|i| i + 1)
        .collect()
}

/// `lqos verify` of the files against the kernel: exit 0 and in sync.
fn assert_in_sync(d: &Path, ns: &str, daemon: &Daemon) {
    let o = lqos(
        d,
        &[
            "verify",
            "--netns",
            ns,
            "--state-dir",
            "st",
            "--sqm",
            "pfifo",
        ],
    );
    let (out, err) = text(&o);
    assert_eq!(code(&o), 0, "{out}\n{err}\nlog:\n{}", daemon.dump());
    assert!(out.contains("in sync"), "{out}");
}

#[test]
fn watch_edits_take_the_incremental_path_and_match_a_full_plan() {
    if !require_netns("cli watch incremental") {
        return;
    }
    let (ns, dir) = common::netns_with_generated("incr", 4, 400);
    let d = dir.path();
    let daemon = Daemon::start(
        d,
        &[
            "--netns",
            ns.name(),
            "--state-dir",
            "st",
            "--sqm",
            "pfifo",
            "--verify-every",
            "0",
            "--retry",
            "1",
        ],
    );
    daemon.wait_log(0, Duration::from_secs(60), applied("start"));
    let path = d.join("ShapedDevices.csv");
    let csv0 = std::fs::read_to_string(&path).unwrap();
    let rows = single_device_rows(&csv0);
    let edit = |csv: &str, want_incremental: bool| -> Value {
        let n = daemon.count();
        replace(&path, csv);
        let ev = daemon.wait_log(n, Duration::from_secs(30), applied("file-change"));
        assert_eq!(
            ev["incremental"].as_bool().unwrap_or(false),
            want_incremental,
            "{ev}\nlog:\n{}",
            daemon.dump()
        );
        assert_in_sync(d, ns.name(), &daemon);
        ev
    };

    // A rate: one class change, through the incremental path.
    let csv1 = with_download_max(&csv0, rows[3], "77");
    let ev = edit(&csv1, true);
    assert_eq!(
        (
            ev["added"].as_u64(),
            ev["changed"].as_u64(),
            ev["removed"].as_u64()
        ),
        (Some(0), Some(1), Some(0)),
        "{ev}"
    );
    assert_eq!(ev["rows"].as_u64(), Some(1), "{ev}");
    for key in ["parse_ms", "plan_ms", "diff_ms", "load_ms"] {
        assert!(ev[key].as_str().is_some(), "{key}: {ev}");
    }
    // Names, a comment and an address (longer lines: later rows move):
    // nothing to send, still incremental.
    let csv2 = with_field(
        &csv1,
        rows[5],
        "Circuit Name",
        "A much, much longer \"name\"",
    );
    let csv2 = with_field(&csv2, rows[6], "Comment", "moved in May");
    let csv2 = with_field(&csv2, rows[7], "IPv4", "100.127.250.1");
    let ev = edit(&csv2, true);
    assert_eq!(ev["changed"].as_u64(), Some(0), "{ev}");
    assert_eq!(ev["rows"].as_u64(), Some(3), "{ev}");
    // Rows after the longer ones still edit incrementally (the index moved).
    let last = *rows.last().unwrap();
    let csv3 = with_field(&csv2, last, "Upload Max Mbps", "33");
    let ev = edit(&csv3, true);
    assert_eq!(ev["changed"].as_u64(), Some(1), "{ev}");

    // An address of another circuit: rejected with the full report.
    let other_ip = field(&csv3, rows[1], "IPv4");
    let bad = with_field(&csv3, rows[2], "IPv4", &other_ip);
    let n = daemon.count();
    replace(&path, &bad);
    let p = daemon.wait_log(n, Duration::from_secs(30), |v| msg(v) == "invalid input");
    assert!(p["problem"].as_str().unwrap().contains("overlaps"), "{p}");
    daemon.wait_log(n, Duration::from_secs(30), |v| {
        msg(v).starts_with("inputs rejected")
    });
    // Fixed, plus a rate: incremental again (the kernel still holds the
    // last good state).
    let csv4 = with_download_max(&csv3, rows[2], "55");
    let ev = edit(&csv4, true);
    assert_eq!(ev["changed"].as_u64(), Some(1), "{ev}");

    // A circuit moved to another parent: the full path.
    let parent = field(&csv4, rows[20], "Parent Node");
    let mut moved = None;
    for &r in &rows {
        if field(&csv4, r, "Parent Node") != parent {
            moved = Some(with_field(&csv4, r, "Parent Node", &parent));
            break;
        }
    }
    let ev = edit(&moved.unwrap(), false);
    assert!(ev["added"].as_u64().unwrap() > 0, "{ev}");
    // Back to the original file: the full path again (many rows).
    edit(&csv0, false);
    // And incremental after a full one.
    let ev = edit(&with_download_max(&csv0, rows[9], "66"), true);
    assert_eq!(ev["changed"].as_u64(), Some(1), "{ev}");
}

/// Sends `packets` datagrams with `SO_PRIORITY` = `priority` (HTB takes a
/// priority equal to one of its classids as that class).
fn send_udp(s: &std::net::UdpSocket, priority: u32, packets: usize) {
    nix::sys::socket::setsockopt(s, nix::sys::socket::sockopt::Priority, &(priority as i32))
        .unwrap();
    for _ in 0..packets {
        let _ = s.send(&[0u8; 200]);
    }
}

fn class_bytes(ns: &str, dev: &str) -> std::collections::BTreeMap<TcHandle, u64> {
    let mut s = NetlinkSocket::open_in_netns(ns).unwrap();
    let l = s.link(dev).unwrap();
    s.class_samples(l.ifindex)
        .unwrap()
        .into_iter()
        .map(|c| (c.classid, c.counters.bytes))
        .collect()
}

#[test]
fn lazy_leaves_follow_traffic() {
    if !require_netns("cli watch lazy leaves") {
        return;
    }
    let ns =
        ScratchNetns::with_veth(&unique_name("lqos-cli", "lazy"), "ens19", "ens20", 4).unwrap();
    common::static_neighbour(&ns);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    assert_eq!(
        code(&lqos(d, &["gen", "--circuits", "40", "--out", "."])),
        0
    );
    let daemon = Daemon::start(
        d,
        &[
            "--netns",
            ns.name(),
            "--state-dir",
            "st",
            "--sqm",
            "pfifo",
            "--lazy-leaves",
            "--poll",
            "1",
            "--idle",
            "3",
            "--verify-every",
            "0",
        ],
    );
    daemon.wait_log(0, Duration::from_secs(60), applied("start"));
    let state = lqos_apply::state::NetnsState::new(d.join("st"), Some(ns.name()));
    let plan = lqos_apply::saved::load_saved_plan(&state)
        .unwrap()
        .unwrap()
        .plan;
    let ip = plan.interfaces.iter().find(|i| i.dev == "ens19").unwrap();
    let leaves: Vec<lqos_tc::ops::Qdisc> = lqos_tc::rules::circuit_leaves(ip).cloned().collect();
    assert_eq!(leaves.len(), 40);
    // Idle circuits have no leaf (but every class is there).
    let t = tree(ns.name(), "ens19");
    assert!(leaves.iter().all(|q| !t.qdiscs.contains_key(&q.handle)));
    assert!(leaves.iter().all(|q| t.classes.contains_key(&q.parent)));

    // Which TX queue does our flow take? A probe with priority 0 lands in
    // that queue's HTB default class (`N:2`).
    // One socket for the whole test: one flow, so one TX queue; send_udp
    // sets each circuit's priority.
    let sender = common::udp_sender(ns.name(), "ens19", 0, 0);
    let before = class_bytes(ns.name(), "ens19");
    send_udp(&sender, 0, 3);
    let after = class_bytes(ns.name(), "ens19");
    let default = *after
        .iter()
        .find(|(id, b)| id.minor() == 2 && before.get(id) != Some(b))
        .expect("the probe went through a default class")
        .0;
    let leaf = leaves
        .iter()
        .find(|q| q.parent.major() == default.major())
        .expect("a circuit in that queue")
        .clone();

    // Traffic into that circuit's class: its leaf at a following poll.
    let n = daemon.count();
    let t0 = Instant::now();
    let mut sent_at;
    let got = loop {
        sent_at = Instant::now();
        send_udp(&sender, leaf.parent.raw(), 5);
        let t = tree(ns.name(), "ens19");
        if let Some(q) = t.qdiscs.get(&leaf.handle) {
            break q.clone();
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "no leaf; log:\n{}",
            daemon.dump()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    // The circuit's last traffic: no leaf goes before the idle time after it.
    let last_traffic = sent_at;
    assert_eq!((got.parent, got.kind.name()), (leaf.parent, "pfifo"));
    let ev = daemon.wait_log(n, Duration::from_secs(30), |v| msg(v) == "leaves");
    assert_eq!(ev["added"].as_u64(), Some(1), "{ev}");
    // Only that circuit got one.
    let t = tree(ns.name(), "ens19");
    let with_leaf: Vec<_> = leaves
        .iter()
        .filter(|q| t.qdiscs.contains_key(&q.handle))
        .collect();
    assert_eq!(with_leaf.len(), 1, "{with_leaf:?}");

    // `lqos verify --lazy-leaves` agrees (a missing leaf on an idle
    // circuit is not drift), while a plain verify sees the missing leaves.
    let o = lqos(
        d,
        &[
            "verify",
            "--netns",
            ns.name(),
            "--state-dir",
            "st",
            "--sqm",
            "pfifo",
            "--lazy-leaves",
        ],
    );
    let (out, err) = text(&o);
    assert_eq!(code(&o), 0, "{out}{err}");
    let o = lqos(
        d,
        &[
            "verify",
            "--netns",
            ns.name(),
            "--state-dir",
            "st",
            "--sqm",
            "pfifo",
        ],
    );
    let (out, err) = text(&o);
    assert_eq!(code(&o), 1, "{out}{err}");
    assert!(out.contains("missing"), "{out}");

    // Idle for 3 s (`--idle`): removed again, not before (the poll that
    // saw the traffic came after it was sent).
    let n = daemon.count();
    loop {
        if !tree(ns.name(), "ens19").qdiscs.contains_key(&leaf.handle) {
            break;
        }
        assert!(
            last_traffic.elapsed() < Duration::from_secs(30),
            "leaf not removed; log:\n{}",
            daemon.dump()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        last_traffic.elapsed() >= Duration::from_secs(3),
        "removed before the idle time"
    );
    let ev = daemon.wait_log(n, Duration::from_secs(30), |v| msg(v) == "leaves");
    assert_eq!(ev["removed"].as_u64(), Some(1), "{ev}");
}

/// The number of classes of `dev`, polled every few ms on a thread until
/// dropped: the smallest seen.
struct ClassFloor {
    stop: Arc<std::sync::atomic::AtomicBool>,
    min: Arc<Mutex<usize>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ClassFloor {
    fn watch(ns: &str, dev: &str) -> ClassFloor {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let min = Arc::new(Mutex::new(usize::MAX));
        let (s, m, ns, dev) = (stop.clone(), min.clone(), ns.to_string(), dev.to_string());
        let thread = std::thread::spawn(move || {
            while !s.load(std::sync::atomic::Ordering::Relaxed) {
                let n = tree(&ns, &dev).classes.len();
                let mut g = m.lock().unwrap();
                *g = (*g).min(n);
                drop(g);
                std::thread::sleep(Duration::from_millis(3));
            }
        });
        ClassFloor {
            stop,
            min,
            thread: Some(thread),
        }
    }

    fn min(mut self) -> usize {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap();
        let m = *self.min.lock().unwrap();
        m
    }
}

fn applied_count(d: &Daemon, skip: usize, trigger: &str) -> usize {
    d.lines()
        .iter()
        .skip(skip)
        .filter(|v| msg(v) == "applied" && v["trigger"] == trigger)
        .count()
}

/// Every kind of writer the daemon must wait for, one after another, on
/// one daemon: in place with pauses and one close (no class disappears at
/// any moment), truncate + a pause longer than the quiet period + the
/// rest, a writer that never closes (applied once after the quiet
/// period), a file cut short (refused, tree unchanged; confirmed: applied)
/// and an empty file (refused).
#[test]
fn watch_applies_only_complete_files_and_refuses_cut_short_ones() {
    use std::io::Write;
    if !require_netns("cli watch ingestion") {
        return;
    }
    let (ns, dir) = common::netns_with_generated("ingest", 4, 1500);
    let d = dir.path();
    let daemon = Daemon::start(
        d,
        &[
            "--netns",
            ns.name(),
            "--state-dir",
            "st",
            "--sqm",
            "pfifo",
            "--verify-every",
            "0",
            "--quiet-period",
            "1",
        ],
    );
    daemon.wait_log(0, Duration::from_secs(120), applied("start"));
    let path = d.join("ShapedDevices.csv");
    let csv0 = std::fs::read_to_string(&path).unwrap();
    let rows = single_device_rows(&csv0);
    let classes0 = tree(ns.name(), "ens19").classes.len();

    // In place: truncate, 32 KiB every 100 ms, one close. Nothing is
    // applied before the close, and no class ever disappears.
    let csv1 = with_download_max(&csv0, rows[1], "61");
    assert!(csv1.len() > 3 * 32 * 1024, "{} bytes", csv1.len());
    let n = daemon.count();
    let floor = ClassFloor::watch(ns.name(), "ens19");
    let mut f = std::fs::File::create(&path).unwrap();
    for chunk in csv1.as_bytes().chunks(32 * 1024) {
        f.write_all(chunk).unwrap();
        f.flush().unwrap();
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(
            applied_count(&daemon, n, "file-change"),
            0,
            "{}",
            daemon.dump()
        );
    }
    drop(f);
    let ev = daemon.wait_log(n, Duration::from_secs(30), applied("file-change"));
    assert_eq!(ev["changed"].as_u64(), Some(1), "{ev}");
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(
        floor.min(),
        classes0,
        "a class disappeared while the file was written"
    );
    assert_eq!(applied_count(&daemon, n, "file-change"), 1);

    // Truncate, a pause longer than the quiet period, the rest: the empty
    // file is refused (never applied), the whole one applied.
    let csv2 = with_download_max(&csv1, rows[2], "62");
    let n = daemon.count();
    let floor = ClassFloor::watch(ns.name(), "ens19");
    let mut f = std::fs::File::create(&path).unwrap();
    std::thread::sleep(Duration::from_millis(1600));
    let refused = daemon.wait_log(n, Duration::from_secs(30), |v| {
        msg(v).starts_with("inputs refused")
    });
    assert!(
        refused["refusal"].as_str().unwrap().contains("empty"),
        "{refused}"
    );
    f.write_all(csv2.as_bytes()).unwrap();
    drop(f);
    let ev = daemon.wait_log(n, Duration::from_secs(30), applied("file-change"));
    assert_eq!(ev["changed"].as_u64(), Some(1), "{ev}");
    assert_eq!(floor.min(), classes0);

    // A writer that never closes: applied once, after the quiet period.
    let csv3 = with_download_max(&csv2, rows[3], "63");
    let n = daemon.count();
    let t0 = Instant::now();
    let mut f = std::fs::File::create(&path).unwrap();
    f.write_all(csv3.as_bytes()).unwrap();
    f.flush().unwrap();
    let ev = daemon.wait_log(n, Duration::from_secs(30), applied("file-change"));
    assert!(
        t0.elapsed() >= Duration::from_millis(900),
        "before the quiet period"
    );
    assert_eq!(ev["changed"].as_u64(), Some(1), "{ev}");
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        applied_count(&daemon, n, "file-change"),
        1,
        "{}",
        daemon.dump()
    );
    drop(f);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        applied_count(&daemon, n, "file-change"),
        1,
        "{}",
        daemon.dump()
    );

    // Cut short (an export that lost 30%), by rename: refused, the tree
    // stays; `lqos confirm` applies it once.
    let lines: Vec<&str> = csv3.lines().collect();
    let keep = 1 + (lines.len() - 1) * 7 / 10;
    let short = lines[..keep].join("\n") + "\n";
    let before = tree(ns.name(), "ens19");
    let n = daemon.count();
    replace(&path, &short);
    let refused = daemon.wait_log(n, Duration::from_secs(30), |v| {
        msg(v).starts_with("inputs refused")
    });
    let gone = 1500 - circuits_in(&short);
    let why = refused["refusal"].as_str().unwrap();
    assert!(
        why.starts_with(&format!("would remove {gone} of 1500 circuits")),
        "{refused}"
    );
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(tree(ns.name(), "ens19"), before);
    let o = lqos(d, &["status", "--netns", ns.name(), "--state-dir", "st"]);
    let (out, _) = text(&o);
    assert!(
        out.contains("pending:") && out.contains("lqos confirm"),
        "{out}"
    );
    let o = lqos(d, &["confirm", "--netns", ns.name(), "--state-dir", "st"]);
    let (out, err) = text(&o);
    assert_eq!(code(&o), 0, "{out}{err}\nlog:\n{}", daemon.dump());
    assert!(out.contains("confirm: applied"), "{out}");
    assert_eq!(
        tree(ns.name(), "ens19").classes.len(),
        classes0 - gone,
        "{}",
        daemon.dump()
    );

    // An empty file by rename: refused.
    let before = tree(ns.name(), "ens19");
    let n = daemon.count();
    replace(&path, "");
    let refused = daemon.wait_log(n, Duration::from_secs(30), |v| {
        msg(v).starts_with("inputs refused")
    });
    assert!(
        refused["refusal"].as_str().unwrap().contains("empty"),
        "{refused}"
    );
    assert_eq!(tree(ns.name(), "ens19"), before);
    // The journal has what was applied.
    let o = lqos(d, &["journal", "--netns", ns.name(), "--state-dir", "st"]);
    let (out, _) = text(&o);
    assert!(
        out.contains("1: ") && out.contains(&format!("{} circuits", 1500 - gone)),
        "{out}"
    );
}

/// Distinct Circuit IDs of a ShapedDevices.csv.
fn circuits_in(csv: &str) -> usize {
    let mut rdr = csv::Reader::from_reader(csv.as_bytes());
    rdr.records()
        .map(|r| r.unwrap()[0].to_string())
        .collect::<std::collections::BTreeSet<_>>()
        .len()
}
