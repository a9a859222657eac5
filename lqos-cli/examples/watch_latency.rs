//! Measures `lqos watch` in a scratch network namespace: the start (full
//! load) time and kernel memory it costs, and the edit-to-kernel latency
//! of ShapedDevices.csv replaced by rename with one circuit's speed
//! changed. Prints numbers; asserts nothing.
//!
//! ```text
//! cargo build --release -p lqos-cli
//! cargo run --release -p lqos-cli --example watch_latency -- CIRCUITS SQM [lazy] [EDITS]
//! # e.g. 10000 pfifo; 10000 pfifo lazy; 100000 none
//! ```
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

/// The CSV with data row `row`'s `Download Max Mbps` set to its
/// `Download Min Mbps` + `plus`.
fn set_download_max(csv: &str, row: usize, plus: f64) -> String {
    let mut rdr = csv::Reader::from_reader(csv.as_bytes());
    let header = rdr.headers().unwrap().clone();
    let col = |n: &str| header.iter().position(|h| h == n).unwrap();
    let (min_col, max_col) = (col("Download Min Mbps"), col("Download Max Mbps"));
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(&header).unwrap();
    for (i, rec) in rdr.records().enumerate() {
        let rec = rec.unwrap();
        if i + 1 == row {
            let min: f64 = rec[min_col].parse().unwrap();
            let v = (min + plus).to_string();
            let fields: Vec<&str> = rec
                .iter()
                .enumerate()
                .map(|(k, f)| if k == max_col { v.as_str() } else { f })
                .collect();
            w.write_record(&fields).unwrap();
        } else {
            w.write_record(&rec).unwrap();
        }
    }
    String::from_utf8(w.into_inner().unwrap()).unwrap()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let circuits: usize = args.first().map_or(10_000, |a| a.parse().unwrap());
    let sqm = args.get(1).cloned().unwrap_or_else(|| "pfifo".into());
    let lazy = args.iter().any(|a| a == "lazy");
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
    let ns =
        ScratchNetns::with_veth(&unique_name("lqos-bench", "watch"), "ens19", "ens20", 16).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let gen = Command::new(&bin)
        .args(["gen", "--circuits", &circuits.to_string(), "--out", "."])
        .current_dir(d)
        .output()
        .unwrap();
    assert!(gen.status.success(), "{gen:?}");

    let mem0 = meminfo_kib();
    let mut cmd = Command::new(&bin);
    cmd.args(["watch", "--log-format", "json", "--netns", ns.name()])
        .args(["--state-dir", "st", "--sqm", &sqm, "--verify-every", "0"])
        .current_dir(d)
        .stderr(Stdio::piped())
        .stdout(Stdio::null());
    if lazy {
        cmd.args(["--lazy-leaves", "--poll", "3600"]);
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
                .recv_timeout(Duration::from_secs(600))
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
        "circuits {circuits}, sqm {sqm}, lazy {lazy}: start {} ops in {} ms (daemon), {:.0} ms to log; kernel memory +{} MiB",
        start["added"],
        start["ms"].as_str().unwrap_or("?"),
        t.elapsed().as_secs_f64() * 1e3,
        mem1.saturating_sub(mem0) / 1024
    );

    let path = d.join("ShapedDevices.csv");
    let csv0 = std::fs::read_to_string(&path).unwrap();
    let mut daemon_ms = Vec::new();
    let mut outside_ms = Vec::new();
    let mut plan_ms = Vec::new();
    let mut load_ms = Vec::new();
    for i in 0..edits {
        let csv = set_download_max(&csv0, 1 + i, 1.0 + (i % 2) as f64);
        let tmp = d.join("ShapedDevices.csv.new");
        std::fs::write(&tmp, csv).unwrap();
        let t0 = Instant::now();
        std::fs::rename(&tmp, &path).unwrap();
        let v = wait_applied("file-change");
        outside_ms.push(t0.elapsed().as_secs_f64() * 1e3);
        let num = |k: &str| v[k].as_str().unwrap().parse::<f64>().unwrap();
        daemon_ms.push(num("ms"));
        plan_ms.push(num("plan_ms"));
        load_ms.push(num("load_ms"));
        assert!(v["changed"].as_u64().unwrap() >= 1, "{v}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (v[v.len() / 2], v[0], v[v.len() - 1])
    };
    let (m, lo, hi) = med(&mut daemon_ms);
    let (om, olo, ohi) = med(&mut outside_ms);
    let (pm, _, _) = med(&mut plan_ms);
    let (lm, _, _) = med(&mut load_ms);
    println!(
        "edit-to-kernel over {edits} edits: median {m:.1} ms (min {lo:.1}, max {hi:.1}) from the first inotify event to the kernel's ACK; \
         of it read + validate + plan {pm:.1} ms, diff + load {lm:.1} ms (medians); \
         rename to the daemon's log line (state files written): median {om:.1} ms (min {olo:.1}, max {ohi:.1})"
    );
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = child.wait();
}
