//! The daemon's soak run (`cargo xtask soak --minutes M --circuits N`):
//! `lqos watch` in a scratch network namespace (veth ens19/ens20, 16
//! queues, pfifo leaves: the host kernel has no cake) over `lqos gen`
//! files, and random edits for M minutes: speed changes, circuits added
//! and removed, moves between APs, address changes, `network.json` rate
//! edits, invalid files (then the good file back), each written by rename
//! or in place (open, truncate, write, close). After each edit's outcome
//! `lqos verify` compares the kernel with the plan of the files.
//!
//! ```text
//! cargo build --release -p lqos-cli --bin lqos --example soak
//! target/release/examples/soak --minutes 30 --circuits 10000 [--seed S] [--queues Q]
//! ```
//!
//! Reports edits by kind, reloads by path (incremental, full), outcomes,
//! drift found by verify, the daemon's RSS and open file descriptors at
//! the start and the end, and the edit latency (before the rename or the
//! writer's open, to the daemon's log line of the outcome) as p50/p99/max.
//! Exits 1 when verify found drift, an edit had no outcome, the daemon
//! logged a kernel error or did not exit cleanly; prints numbers, asserts
//! no timing. Runs `target/release/lqos` (or `$LQOS_BIN`). Needs root.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use lqos_apply::netns::{unique_name, ScratchNetns};

/// splitmix64: a seeded, reproducible stream of edits.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// The edit kinds.
const KINDS: [&str; 7] = [
    "speed", "add", "remove", "move", "address", "network", "invalid",
];

/// ShapedDevices.csv as records (one line per record, as `lqos gen`
/// writes it).
struct Devices {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Devices {
    fn read(path: &Path) -> Devices {
        let mut r = csv::Reader::from_path(path).unwrap();
        let header = r.headers().unwrap().iter().map(String::from).collect();
        let rows = r
            .records()
            .map(|r| r.unwrap().iter().map(String::from).collect())
            .collect();
        Devices { header, rows }
    }

    fn col(&self, name: &str) -> usize {
        self.header.iter().position(|h| h == name).unwrap()
    }

    fn bytes(&self) -> Vec<u8> {
        let mut w = csv::WriterBuilder::new()
            .quote_style(csv::QuoteStyle::NonNumeric)
            .from_writer(Vec::new());
        w.write_record(&self.header).unwrap();
        for r in &self.rows {
            w.write_record(r).unwrap();
        }
        w.into_inner().unwrap()
    }

    /// The rows of the circuit of row `i`.
    fn circuit_rows(&self, i: usize) -> Vec<usize> {
        let id = &self.rows[i][0];
        (0..self.rows.len())
            .filter(|&j| &self.rows[j][0] == id)
            .collect()
    }

    fn circuits(&self) -> usize {
        let mut ids: Vec<&str> = self.rows.iter().map(|r| r[0].as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        ids.len()
    }
}

/// The names of the leaf nodes (APs) of network.json.
fn aps(network: &str) -> Vec<String> {
    fn walk(v: &serde_json::Value, out: &mut Vec<String>) {
        for (name, node) in v.as_object().into_iter().flatten() {
            match node.get("children") {
                Some(c) if c.as_object().is_some_and(|o| !o.is_empty()) => walk(c, out),
                _ => out.push(name.clone()),
            }
        }
    }
    let mut out = Vec::new();
    walk(&serde_json::from_str(network).unwrap(), &mut out);
    out.sort();
    out
}

/// network.json with node `name`'s `downloadBandwidthMbps` set to `mbps`
/// (a line edit: the rest of the file stays byte for byte).
fn set_node_rate(network: &str, name: &str, mbps: u32) -> String {
    let mut lines: Vec<String> = network.lines().map(String::from).collect();
    let at = lines
        .iter()
        .position(|l| l.trim_start().starts_with(&format!("\"{name}\":")))
        .unwrap();
    let rate = (at + 1..lines.len())
        .find(|&i| lines[i].contains("\"downloadBandwidthMbps\""))
        .unwrap();
    let indent: String = lines[rate]
        .chars()
        .take_while(|c| c.is_whitespace())
        .collect();
    lines[rate] = format!("{indent}\"downloadBandwidthMbps\": {mbps},");
    lines.join("\n") + "\n"
}

/// Writes `path`: by rename, or in place (open with truncation, write,
/// close). Returns the moment the edit started (just before the rename or
/// the open).
fn write_file(path: &Path, bytes: &[u8], in_place: bool) -> Instant {
    if in_place {
        let t0 = Instant::now();
        let mut f = std::fs::File::create(path).unwrap();
        f.write_all(bytes).unwrap();
        drop(f);
        return t0;
    }
    let tmp = path.with_extension("soak-tmp");
    std::fs::write(&tmp, bytes).unwrap();
    let t0 = Instant::now();
    std::fs::rename(&tmp, path).unwrap();
    t0
}

/// The daemon's resident set (KiB) and open file descriptors.
fn rss_fds(pid: u32) -> (u64, usize) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0);
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count());
    (rss, fds)
}

/// `--name VALUE` from the arguments.
fn opt<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> T {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map_or(default, |v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name}: not a number: {v}"))
        })
}

/// What became of one edit, as the daemon logged it.
#[derive(Debug)]
struct Outcome {
    /// `applied`, `unchanged`, `rejected`, `failed`.
    what: &'static str,
    line: serde_json::Value,
    at: Instant,
}

/// The daemon's outcome of a file change (its next log line that ends one).
fn outcome(
    rx: &mpsc::Receiver<(Instant, serde_json::Value)>,
    timeout: Duration,
) -> Option<Outcome> {
    let end = Instant::now() + timeout;
    loop {
        let left = end.checked_duration_since(Instant::now())?;
        let (at, v) = rx.recv_timeout(left).ok()?;
        let msg = v["message"].as_str().unwrap_or("");
        let what = if msg == "applied" {
            "applied"
        } else if msg.starts_with("inputs unchanged") {
            "unchanged"
        } else if msg.starts_with("inputs rejected") || msg.starts_with("inputs refused") {
            "rejected"
        } else if msg.starts_with("cannot plan") || msg.contains("will retry") {
            "failed"
        } else {
            continue;
        };
        return Some(Outcome { what, line: v, at });
    }
}

/// Outcomes that follow within `quiet` of the last (a re-read of files
/// that changed while the daemon was busy): counted apart, so that the next
/// edit waits for its own.
fn drain_outcomes(
    rx: &mpsc::Receiver<(Instant, serde_json::Value)>,
    quiet: Duration,
    extra: &mut BTreeMap<String, usize>,
    unexpected: &mut Vec<String>,
) {
    while let Some(o) = outcome(rx, quiet) {
        *extra.entry(o.what.to_string()).or_default() += 1;
        // Rejecting or finding unchanged the same files again is harmless;
        // applying or failing after the edit's outcome is not.
        if o.what == "applied" || o.what == "failed" {
            unexpected.push(format!("a further outcome: {}", o.line));
        }
    }
}

fn percentiles(v: &mut [f64]) -> String {
    if v.is_empty() {
        return "none".into();
    }
    v.sort_by(f64::total_cmp);
    let p = |q: usize| v[((v.len() * q).div_ceil(100)).saturating_sub(1)];
    format!(
        "p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms ({} edits)",
        p(50),
        p(99),
        v[v.len() - 1],
        v.len()
    )
}

fn lqos(bin: &str, dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(bin)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let minutes: f64 = opt(&args, "--minutes", 1.0);
    let circuits: usize = opt(&args, "--circuits", 1000);
    let seed: u64 = opt(&args, "--seed", 1);
    let queues: u32 = opt(&args, "--queues", 16);
    let bin = std::env::var("LQOS_BIN").unwrap_or_else(|_| {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../target/release/lqos")
            .to_string_lossy()
            .into_owned()
    });
    // The daemon and verify run in the scratch directory: an absolute path.
    let bin = std::fs::canonicalize(&bin)
        .unwrap_or_else(|e| panic!("{bin}: {e}"))
        .to_string_lossy()
        .into_owned();
    let mut rng = Rng(seed);

    let ns = ScratchNetns::with_veth(&unique_name("lqos-soak", "watch"), "ens19", "ens20", queues)
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let n = circuits.to_string();
    let gen = lqos(
        &bin,
        d,
        &["gen", "--circuits", &n, "--seed", &seed.to_string()],
    );
    assert!(gen.status.success(), "{gen:?}");
    let csv_path = d.join("ShapedDevices.csv");
    let net_path = d.join("network.json");
    let mut devices = Devices::read(&csv_path);
    assert_eq!(
        devices.bytes(),
        std::fs::read(&csv_path).unwrap(),
        "the CSV does not round-trip through the soak's writer"
    );
    let mut network = std::fs::read_to_string(&net_path).unwrap();
    let aps = aps(&network);
    let (down_min, down_max) = (
        devices.col("Download Min Mbps"),
        devices.col("Download Max Mbps"),
    );
    let (up_min, up_max) = (
        devices.col("Upload Min Mbps"),
        devices.col("Upload Max Mbps"),
    );
    let (parent, ipv4, mac) = (
        devices.col("Parent Node"),
        devices.col("IPv4"),
        devices.col("MAC"),
    );
    let mut next_id: u64 = devices
        .rows
        .iter()
        .filter_map(|r| r[0].parse::<u64>().ok())
        .max()
        .unwrap_or(0)
        + 1;
    // New addresses come from a range `lqos gen` does not use.
    let mut next_addr: u32 = 0;
    let mut new_addr = || {
        next_addr += 1;
        format!("100.96.{}.{}", next_addr / 250, next_addr % 250 + 1)
    };

    let t_start = Instant::now();
    let mut daemon: Child = Command::new(&bin)
        .args(["watch", "--log-format", "json", "--netns", ns.name()])
        .args(["--state-dir", "st", "--sqm", "pfifo", "--verify-every", "0"])
        .current_dir(d)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel::<(Instant, serde_json::Value)>();
    let stderr = daemon.stderr.take().unwrap();
    let errors = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let errs = errors.clone();
    // `$SOAK_TRACE`: every daemon line and every edit, in order, to a file.
    let trace = std::sync::Arc::new(std::sync::Mutex::new(
        std::env::var_os("SOAK_TRACE").map(|p| std::fs::File::create(p).unwrap()),
    ));
    let tr = trace.clone();
    let note = move |what: &str| {
        if let Some(f) = tr.lock().unwrap().as_mut() {
            let _ = writeln!(f, "{:.3} {what}", t_start.elapsed().as_secs_f64());
        }
    };
    let note2 = note.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            note2(&line);
            let v = serde_json::from_str(&line)
                .unwrap_or_else(|_| serde_json::json!({ "message": line }));
            if v["level"] == "ERROR"
                && !v["message"]
                    .as_str()
                    .unwrap_or("")
                    .starts_with("inputs rejected")
                && !v["message"]
                    .as_str()
                    .unwrap_or("")
                    .starts_with("invalid input")
            {
                errs.lock().unwrap().push(v.to_string());
            }
            let _ = tx.send((Instant::now(), v));
        }
    });
    let start = outcome(&rx, Duration::from_secs(3600)).expect("the start load");
    assert_eq!(start.what, "applied", "{}", start.line);
    println!(
        "start: {} circuits loaded in {:.1} s ({} ops added); daemon pid {}",
        devices.circuits(),
        t_start.elapsed().as_secs_f64(),
        start.line["added"],
        daemon.id()
    );
    let (rss0, fds0) = rss_fds(daemon.id());
    // The M minutes of edits start after the start load.
    let t_edits = Instant::now();

    let mut edits: BTreeMap<&str, usize> = BTreeMap::new();
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    let mut extra: BTreeMap<String, usize> = BTreeMap::new();
    let mut paths: BTreeMap<&str, usize> = BTreeMap::new();
    let mut in_place = 0usize;
    let mut latency = Vec::new();
    let mut daemon_ms = Vec::new();
    let mut verify_ms = Vec::new();
    let mut drift = 0usize;
    let mut lost = 0usize;
    let mut unexpected = Vec::new();
    let mut rss_max = rss0;
    let end = t_edits + Duration::from_secs_f64(minutes * 60.0);
    let mut last_progress = Instant::now();
    while Instant::now() < end {
        // Removals below N circuits and additions above it swap, so the
        // population stays near N.
        let kind = match KINDS[rng.below(KINDS.len())] {
            "remove" if devices.circuits() < circuits => "add",
            "add" if devices.circuits() > circuits => "remove",
            k => k,
        };
        let inplace = rng.below(3) == 0;
        let row = rng.below(devices.rows.len());
        // The expected outcome: an edit that changes the tree is applied,
        // an invalid file rejected.
        let mut expect = "applied";
        let (t0, valid_after) = match kind {
            "network" => {
                let ap = &aps[rng.below(aps.len())];
                let mbps = [300, 500, 700, 1000, 1500, 2000][rng.below(6)];
                let edited = set_node_rate(&network, ap, mbps);
                if edited == network {
                    expect = "unchanged";
                }
                network = edited;
                (write_file(&net_path, network.as_bytes(), inplace), None)
            }
            "invalid" => {
                // One row's rate is not a number: the file is rejected, the
                // tree and the last good plan stay; then the good file.
                let mut bad = Devices {
                    header: devices.header.clone(),
                    rows: devices.rows.clone(),
                };
                bad.rows[row][down_max] = "fast".into();
                expect = "rejected";
                (
                    write_file(&csv_path, &bad.bytes(), inplace),
                    Some(devices.bytes()),
                )
            }
            _ => {
                match kind {
                    "speed" => {
                        let k = [2.0, 3.0, 4.0, 5.0][rng.below(4)];
                        for i in devices.circuit_rows(row) {
                            let r = &mut devices.rows[i];
                            let (dmin, umin): (f64, f64) =
                                (r[down_min].parse().unwrap(), r[up_min].parse().unwrap());
                            let (d, u) = ((dmin * k).to_string(), (umin * k).to_string());
                            if r[down_max] == d && r[up_max] == u {
                                expect = "unchanged";
                            }
                            r[down_max] = d;
                            r[up_max] = u;
                        }
                    }
                    "add" => {
                        add_circuit(
                            &mut devices,
                            &mut next_id,
                            &aps,
                            &mut rng,
                            &mut new_addr,
                            [parent, ipv4, mac, down_min, down_max, up_min, up_max],
                        );
                    }
                    "remove" => {
                        let rows = devices.circuit_rows(row);
                        for i in rows.into_iter().rev() {
                            devices.rows.remove(i);
                        }
                    }
                    "move" => {
                        let to = aps[rng.below(aps.len())].clone();
                        for i in devices.circuit_rows(row) {
                            if devices.rows[i][parent] == to {
                                expect = "unchanged";
                            }
                            devices.rows[i][parent] = to.clone();
                        }
                    }
                    "address" => {
                        // Addresses are the classifier's, not the tree's:
                        // applied or unchanged.
                        expect = "unchanged";
                        devices.rows[row][ipv4] = new_addr();
                    }
                    _ => unreachable!(),
                }
                (write_file(&csv_path, &devices.bytes(), inplace), None)
            }
        };
        note(&format!("EDIT {kind} in_place={inplace} expect={expect}"));
        *edits.entry(kind).or_default() += 1;
        in_place += usize::from(inplace);
        let Some(o) = outcome(&rx, Duration::from_secs(300)) else {
            lost += 1;
            unexpected.push(format!("{kind}: no outcome within 300 s"));
            continue;
        };
        *outcomes.entry(o.what.to_string()).or_default() += 1;
        if o.what != expect && !(expect == "unchanged" && o.what == "applied") {
            unexpected.push(format!("{kind} (expected {expect}): {}", o.line));
        }
        if o.what == "applied" {
            latency.push(o.at.duration_since(t0).as_secs_f64() * 1e3);
            if let Some(ms) = o.line["ms"].as_str().and_then(|s| s.parse::<f64>().ok()) {
                daemon_ms.push(ms);
            }
            let path = if o.line["incremental"] == true {
                "incremental"
            } else {
                "full"
            };
            *paths.entry(path).or_default() += 1;
        }
        if let Some(good) = valid_after {
            drain_outcomes(&rx, Duration::from_millis(300), &mut extra, &mut unexpected);
            note("EDIT the good file back");
            write_file(&csv_path, &good, rng.below(2) == 0);
            match outcome(&rx, Duration::from_secs(300)) {
                Some(o) => {
                    *outcomes
                        .entry(format!("{} (good file back)", o.what))
                        .or_default() += 1
                }
                None => {
                    lost += 1;
                    unexpected.push("the good file back: no outcome within 300 s".into());
                }
            }
        }
        // Any further outcome of the same edit, then verify.
        drain_outcomes(&rx, Duration::from_millis(300), &mut extra, &mut unexpected);
        let tv = Instant::now();
        let v = lqos(
            &bin,
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
        verify_ms.push(tv.elapsed().as_secs_f64() * 1e3);
        let out = String::from_utf8_lossy(&v.stdout);
        if !v.status.success() || !out.contains("in sync") {
            drift += 1;
            unexpected.push(format!(
                "verify after {kind}: {:?}\n{out}\n{}",
                v.status.code(),
                String::from_utf8_lossy(&v.stderr)
            ));
        }
        rss_max = rss_max.max(rss_fds(daemon.id()).0);
        if last_progress.elapsed() > Duration::from_secs(60) {
            last_progress = Instant::now();
            let (rss, fds) = rss_fds(daemon.id());
            println!(
                "{:.1} min: {} edits, drift {drift}, rss {} MiB, fds {fds}",
                t_edits.elapsed().as_secs_f64() / 60.0,
                edits.values().sum::<usize>(),
                rss / 1024
            );
        }
    }
    let (rss1, fds1) = rss_fds(daemon.id());
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(daemon.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = daemon.wait().unwrap();
    // Tear the tree down now (a big tree slows every class add on the machine).
    let _ = ns.tc(&["qdisc", "del", "dev", "ens19", "root"]);
    let _ = ns.tc(&["qdisc", "del", "dev", "ens20", "root"]);
    drop(ns);

    let total: usize = edits.values().sum();
    println!("soak: {minutes} min, {circuits} circuits (seed {seed}, {queues} queues, pfifo leaves), {total} edits ({in_place} written in place, the rest by rename)");
    println!("  edits by kind: {edits:?}");
    println!("  outcomes: {outcomes:?}");
    println!("  further outcomes of the same edit (re-reads): {extra:?}");
    println!("  reloads by path: {paths:?}");
    println!("  drift found by lqos verify after an edit: {drift}");
    println!("  edits without an outcome: {lost}");
    println!(
        "  daemon RSS: {} MiB at the start, {} MiB at the end ({:+.1}%), max {} MiB",
        rss0 / 1024,
        rss1 / 1024,
        (rss1 as f64 / rss0 as f64 - 1.0) * 100.0,
        rss_max / 1024
    );
    println!("  daemon open fds: {fds0} at the start, {fds1} at the end");
    println!(
        "  edit latency (before the rename/open to the outcome's log line): {}",
        percentiles(&mut latency)
    );
    println!(
        "  daemon's own time (first event to the last ACK): {}",
        percentiles(&mut daemon_ms)
    );
    println!("  lqos verify: {}", percentiles(&mut verify_ms));
    println!("  daemon exit: {status}");
    let errors = errors.lock().unwrap();
    for e in errors.iter().take(10) {
        println!("  daemon error: {e}");
    }
    for u in unexpected.iter().take(20) {
        println!("  unexpected: {u}");
    }
    let ok =
        drift == 0 && lost == 0 && errors.is_empty() && status.success() && unexpected.is_empty();
    println!("  result: {}", if ok { "clean" } else { "NOT clean" });
    std::process::exit(i32::from(!ok));
}

/// Appends a one-device circuit under a random AP, with new addresses.
fn add_circuit(
    devices: &mut Devices,
    next_id: &mut u64,
    aps: &[String],
    rng: &mut Rng,
    new_addr: &mut impl FnMut() -> String,
    [parent, ipv4, mac, down_min, down_max, up_min, up_max]: [usize; 7],
) {
    let id = *next_id;
    *next_id += 1;
    let mut r = vec![String::new(); devices.header.len()];
    r[0] = id.to_string();
    r[1] = format!("soak circuit {id}");
    r[2] = format!("{id}-1");
    r[3] = "Router".into();
    r[parent] = aps[rng.below(aps.len())].clone();
    r[mac] = format!(
        "02:50:{:02x}:{:02x}:{:02x}:{:02x}",
        (id >> 24) & 0xff,
        (id >> 16) & 0xff,
        (id >> 8) & 0xff,
        id & 0xff
    );
    r[ipv4] = new_addr();
    let (dmin, umin) = [(25, 5), (50, 10), (100, 20)][rng.below(3)];
    r[down_min] = dmin.to_string();
    r[up_min] = umin.to_string();
    r[down_max] = (dmin * 4).to_string();
    r[up_max] = (umin * 4).to_string();
    devices.rows.push(r);
}
