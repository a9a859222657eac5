//! Measures `lqos watch` in a scratch network namespace: the start (full
//! load) time and kernel memory it costs, and the edit-to-kernel latency
//! of ShapedDevices.csv with one circuit's speed changed, by an outside
//! clock: from just before the rename (or, with `inplace`, the writer's
//! open of the file it rewrites in place and closes) to the moment
//! `tc monitor` in the namespace prints the changed class. Prints numbers
//! (median, p99, max); asserts nothing.
//!
//! ```text
//! cargo build --release -p lqos-cli
//! cargo run --release -p lqos-cli --example watch_latency -- CIRCUITS SQM [lazy] [EDITS] [full] [inplace]
//! # e.g. 10000 pfifo; 10000 pfifo lazy; 100000 none
//! # a tree already loaded in an existing namespace, from files in DIR
//! # (copied there with their state dir; the CSV is restored at the end):
//! cargo run --release -p lqos-cli --example watch_latency -- 0 none 9 \
//!     --netns lqos-100k --dir DIR --state-dir STATE --gap 2000
//! ```
//!
//! `--gap MS` (300) is the pause between edits: the daemon writes its
//! state files after each edit's kernel ACK, and an edit arriving while it
//! does would wait (its clock starts when the daemon reads the event).
//!
//! Each edit changes one single-device circuit's `Download Max Mbps` in
//! place (one line of the file rewritten, the file replaced by rename),
//! cumulatively; `full` adds `--no-incremental` to the daemon (every edit
//! read and planned in full, for comparison).
//!
//! Runs `target/release/lqos` (or `$LQOS_BIN`). Needs root. Kernel memory
//! is the change of `SUnreclaim + Percpu + VmallocUsed` in /proc/meminfo
//! around the start: other work on the machine adds noise.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use lqos_apply::netns::{unique_name, ScratchNetns};

fn meminfo_kib() -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap();
    text.lines()
        .filter(|l| {
            l.starts_with("SUnreclaim:")
                || l.starts_with("Percpu:")
                || l.starts_with("VmallocUsed:")
        })
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum()
}

/// Data rows (1-based) of circuits with one device.
fn single_device_rows(csv: &str) -> Vec<usize> {
    let mut rdr = csv::Reader::from_reader(csv.as_bytes());
    let ids: Vec<String> = rdr.records().map(|r| r.unwrap()[0].to_string()).collect();
    let mut count = std::collections::HashMap::<&str, usize>::new();
    for id in &ids {
        *count.entry(id).or_default() += 1;
    }
    (0..ids.len())
        .filter(|&i| count[ids[i].as_str()] == 1)
        .map(|i| i + 1)
        .collect()
}

/// The CSV with data row `row`'s `Download Max Mbps` set to its
/// `Download Min Mbps` + `plus`, only that line rewritten (the file must
/// have one line per record).
fn set_download_max(csv: &str, row: usize, plus: f64) -> String {
    let header = csv::Reader::from_reader(csv.as_bytes())
        .headers()
        .unwrap()
        .clone();
    let col = |n: &str| header.iter().position(|h| h == n).unwrap();
    let (min_col, max_col) = (col("Download Min Mbps"), col("Download Max Mbps"));
    let mut lines: Vec<&str> = csv.split_inclusive('\n').collect();
    let line = lines[row];
    let rec = csv::ReaderBuilder::new()
        .has_headers(false)
        .from_reader(line.as_bytes())
        .records()
        .next()
        .unwrap()
        .unwrap();
    let min: f64 = rec[min_col].parse().unwrap();
    let v = (min + plus).to_string();
    let mut w = csv::WriterBuilder::new()
        .quote_style(csv::QuoteStyle::NonNumeric)
        .from_writer(Vec::new());
    let fields: Vec<&str> = rec
        .iter()
        .enumerate()
        .map(|(k, f)| if k == max_col { v.as_str() } else { f })
        .collect();
    w.write_record(&fields).unwrap();
    let new_line = String::from_utf8(w.into_inner().unwrap()).unwrap();
    lines[row] = &new_line;
    lines.concat()
}

/// `--name VALUE` from the arguments.
fn opt(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn main() {
    let all: Vec<String> = std::env::args().skip(1).collect();
    let netns = opt(&all, "--netns");
    let files = opt(&all, "--dir");
    let state = opt(&all, "--state-dir").unwrap_or_else(|| "st".into());
    // Pause between edits (the daemon writes its state files after each).
    let gap: u64 = opt(&all, "--gap").map_or(300, |g| g.parse().unwrap());
    // Positional arguments: everything but the options and their values.
    let mut args = Vec::new();
    let mut it = all.iter();
    while let Some(a) = it.next() {
        if a.starts_with("--") {
            it.next();
        } else {
            args.push(a.clone());
        }
    }
    let circuits: usize = args.first().map_or(10_000, |a| a.parse().unwrap());
    let sqm = args.get(1).cloned().unwrap_or_else(|| "pfifo".into());
    let lazy = args.iter().any(|a| a == "lazy");
    let full = args.iter().any(|a| a == "full");
    let inplace = args.iter().any(|a| a == "inplace");
    let edits: usize = args
        .iter()
        .skip(2)
        .find_map(|a| a.parse().ok())
        .unwrap_or(9);
    let bin = std::env::var("LQOS_BIN").unwrap_or_else(|_| {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../target/release/lqos")
            .to_string_lossy()
            .into_owned()
    });
    // A scratch namespace and generated files, or the given ones.
    let scratch = netns.is_none().then(|| {
        ScratchNetns::with_veth(&unique_name("lqos-bench", "watch"), "ens19", "ens20", 16).unwrap()
    });
    let ns_name = netns.unwrap_or_else(|| scratch.as_ref().unwrap().name().to_string());
    let tmp = tempfile::tempdir().unwrap();
    let d = files.as_deref().map_or(tmp.path(), Path::new);
    if files.is_none() {
        let gen = Command::new(&bin)
            .args(["gen", "--circuits", &circuits.to_string(), "--out", "."])
            .current_dir(d)
            .output()
            .unwrap();
        assert!(gen.status.success(), "{gen:?}");
    }

    let mem0 = meminfo_kib();
    let mut cmd = Command::new(&bin);
    cmd.args(["watch", "--log-format", "json", "--netns", &ns_name])
        .args(["--state-dir", &state, "--sqm", &sqm, "--verify-every", "0"])
        .args([
            "--network",
            "network.json",
            "--devices",
            "ShapedDevices.csv",
        ])
        .current_dir(d)
        .stderr(Stdio::piped())
        .stdout(Stdio::null());
    if d.join("lqos.conf").exists() {
        cmd.args(["--config", "lqos.conf"]);
    }
    if lazy {
        cmd.args(["--lazy-leaves", "--poll", "3600"]);
    }
    if full {
        cmd.arg("--no-incremental");
    }
    let mut child = cmd.spawn().unwrap();
    let (tx, rx) = mpsc::channel::<serde_json::Value>();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str(&line) {
                let _ = tx.send(v);
            }
        }
    });
    let wait_applied = |trigger: &str| -> serde_json::Value {
        loop {
            let v = rx
                .recv_timeout(Duration::from_secs(3600))
                .expect("daemon log");
            if v["message"] == "applied" && v["trigger"] == trigger {
                return v;
            }
            if v["level"] == "ERROR" {
                panic!("{v}");
            }
        }
    };
    let t = Instant::now();
    let start = wait_applied("start");
    let mem1 = meminfo_kib();
    println!(
        "circuits {circuits}, sqm {sqm}, lazy {lazy}, incremental {}: start {} ops added, {} changed, {} removed in {} ms (daemon), {:.0} ms to log; kernel memory +{} MiB",
        !full,
        start["added"],
        start["changed"],
        start["removed"],
        start["ms"].as_str().unwrap_or("?"),
        t.elapsed().as_secs_f64() * 1e3,
        mem1.saturating_sub(mem0) / 1024
    );

    // The outside clock: `tc monitor` in the namespace, each line stamped
    // when it arrives.
    let mut mon = Command::new("tc")
        .args(["-n", &ns_name, "monitor"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("tc monitor");
    let (mtx, mrx) = mpsc::channel::<(Instant, String)>();
    let mout = mon.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(mout).lines().map_while(Result::ok) {
            let _ = mtx.send((Instant::now(), line));
        }
    });
    std::thread::sleep(Duration::from_millis(300));
    while mrx.try_recv().is_ok() {}
    let path = d.join("ShapedDevices.csv");
    let csv0 = std::fs::read_to_string(&path).unwrap();
    let rows = single_device_rows(&csv0);
    let mut csv = csv0.clone();
    let mut times: std::collections::BTreeMap<&str, Vec<f64>> = Default::default();
    let mut incremental = 0;
    // The edit: returns when it started (the rename, or the writer's
    // open) and how long the writer took (open to close; 0 for a rename).
    let replace = |text: &str| {
        if inplace {
            use std::io::Write;
            let t0 = Instant::now();
            let mut f = std::fs::File::create(&path).unwrap();
            f.write_all(text.as_bytes()).unwrap();
            drop(f);
            return (t0, t0.elapsed());
        }
        let tmp = d.join("ShapedDevices.csv.new");
        std::fs::write(&tmp, text).unwrap();
        let t0 = Instant::now();
        std::fs::rename(&tmp, &path).unwrap();
        (t0, Duration::ZERO)
    };
    for i in 0..edits {
        // Spread over the file: the first, middle and last rows alike.
        let row = rows[(i * 7919) % rows.len()];
        csv = set_download_max(&csv, row, 1.0 + (i % 3) as f64);
        let (t0, writer) = replace(&csv);
        if inplace {
            times
                .entry("writer")
                .or_default()
                .push(writer.as_secs_f64() * 1e3);
        }
        let v = wait_applied("file-change");
        times
            .entry("rename")
            .or_default()
            .push(t0.elapsed().as_secs_f64() * 1e3);
        // The first class line `tc monitor` printed after t0.
        let seen = loop {
            let (t, line) = mrx
                .recv_timeout(Duration::from_secs(10))
                .expect("tc monitor saw the change");
            if t >= t0 && line.contains("class ") {
                break t;
            }
        };
        times
            .entry("outside")
            .or_default()
            .push(seen.duration_since(t0).as_secs_f64() * 1e3);
        if inplace {
            times
                .entry("closed")
                .or_default()
                .push(seen.saturating_duration_since(t0 + writer).as_secs_f64() * 1e3);
        }
        while mrx.try_recv().is_ok() {}
        for k in ["ms", "plan_ms", "load_ms", "parse_ms", "diff_ms"] {
            if let Some(x) = v[k].as_str().and_then(|s| s.parse::<f64>().ok()) {
                times.entry(k).or_default().push(x);
            }
        }
        incremental += usize::from(v["incremental"].as_bool() == Some(true));
        assert!(v["changed"].as_u64().unwrap() >= 1, "{v}");
        std::thread::sleep(Duration::from_millis(gap));
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        let p99 = v[((v.len() * 99).div_ceil(100)).saturating_sub(1)];
        (v[v.len() / 2], p99, v[v.len() - 1])
    };
    println!(
        "{edits} edits ({}), {incremental} through the incremental path; median (p99, max) in ms:",
        if inplace {
            "in place: open-write-close"
        } else {
            "by rename"
        }
    );
    for k in [
        "outside", "writer", "closed", "ms", "parse_ms", "plan_ms", "diff_ms", "load_ms", "rename",
    ] {
        let Some(v) = times.get_mut(k) else { continue };
        let (m, lo, hi) = med(v);
        let what = match k {
            "outside" => "edit-to-kernel, outside clock (before the rename / the writer's open, to tc monitor)",
            "writer" => "  of it the writer (open, write the file, close)",
            "closed" => "  the rest: the writer's close to tc monitor",
            "ms" => "daemon: first inotify event to the kernel's last ACK",
            "parse_ms" => "  read + find + re-read + check the changed rows",
            "plan_ms" => "  plan (incremental: the changed circuits; full: read + validate + plan)",
            "diff_ms" => "  diff against the known kernel state",
            "load_ms" => "  load (full: diff + load)",
            _ => "rename (or open) to the daemon's log line",
        };
        println!("  {what}: {m:.2} (p99 {lo:.2}, max {hi:.2})");
    }
    // Back to the original file (and tree).
    if csv != csv0 {
        let _ = replace(&csv0);
        let v = wait_applied("file-change");
        println!("restored the original ShapedDevices.csv: {v}");
    }
    let _ = mon.kill();
    let _ = mon.wait();
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = child.wait();
}
