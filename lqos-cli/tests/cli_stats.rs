//! `lqos stats` and `lqos top` against a loaded tree in a scratch network
//! namespace, with real traffic: UDP datagrams sent out of the download
//! interface with `SO_PRIORITY` set to a circuit's classid (HTB takes a
//! priority equal to one of its classids as that class), on a single-queue
//! veth (an HTB root: every flow reaches the circuits' HTB).
//!
//! - the bytes `lqos stats --json` reports are within 1% of what was sent,
//!   counted as the kernel counts them (ethernet + IP + UDP headers);
//! - a flow below its circuit's ceil shows its sending rate (+-10%), a flow
//!   above it shows the ceil (+-10%) and drops;
//! - `lqos top` in a pseudo-terminal (tmux) shows the busy circuit first.

mod common;

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{code, lqos, netns_with_generated, ok, set_rates, static_neighbour, text, udp_sender};
use lqos_apply::netns::require_netns;
use lqos_tc::allocation::Direction;
use lqos_tc::TcHandle;

/// UDP payload: with 42 bytes of ethernet, IP and UDP headers, 1000 bytes
/// per packet as HTB counts them (`skb->len` at egress).
const PAYLOAD: usize = 958;
const WIRE: u64 = 1000;

/// A UDP socket in namespace `ns` bound to `dev` with `SO_PRIORITY` =
/// `priority` (no TOS).
fn sender(ns: &str, dev: &str, priority: u32) -> UdpSocket {
    udp_sender(ns, dev, priority, 0)
}

/// Sends `pps` datagrams per second (in 10 ms slots, on an absolute
/// schedule) until `stop`; counts those the socket took.
fn paced(s: UdpSocket, pps: u64, stop: Arc<AtomicBool>, sent: Arc<AtomicU64>) {
    let payload = [0u8; PAYLOAD];
    let start = Instant::now();
    let mut slot = 0u64;
    while !stop.load(Ordering::Relaxed) {
        slot += 1;
        let due = (pps * slot) / 100 - (pps * (slot - 1)) / 100;
        for _ in 0..due {
            if s.send(&payload).is_ok() {
                sent.fetch_add(1, Ordering::Relaxed);
            }
        }
        let next = start + Duration::from_millis(10 * slot);
        if let Some(wait) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
}

fn circuit<'a>(j: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    j["circuits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("circuit {id} not in {j}"))
}

#[test]
fn stats_report_what_was_sent_and_top_shows_the_busy_circuit_first() {
    if !require_netns("cli stats") {
        return;
    }
    let (ns, dir) = netns_with_generated("stats", 1, 20);
    let d = dir.path();
    static_neighbour(&ns);
    // Two circuits with small download ceilings: A 10 Mbit (fed 4 Mbit),
    // B 6 Mbit (fed 12 Mbit: the busiest).
    let csv0 = std::fs::read_to_string(d.join("ShapedDevices.csv")).unwrap();
    let (a, b) = ("10001", "10002");
    let csv1 = set_rates(&set_rates(&csv0, a, "2", "10"), b, "1", "6");
    std::fs::write(d.join("ShapedDevices.csv"), csv1).unwrap();
    let target = ["--netns", ns.name(), "--state-dir", "st"];
    let mut apply = vec!["apply", "--queues", "1", "--sqm", "pfifo"];
    apply.extend(target);
    ok(&lqos(d, &apply));
    let state = lqos_apply::state::NetnsState::new(d.join("st"), Some(ns.name()));
    let plan = lqos_apply::saved::load_saved_plan(&state)
        .unwrap()
        .unwrap()
        .plan;
    let classid = |id: &str| {
        let c = plan
            .allocation
            .circuits
            .iter()
            .find(|c| c.id == id)
            .unwrap();
        TcHandle::new(plan.major(Direction::Download, c.queue), c.minor)
    };

    let stop = Arc::new(AtomicBool::new(false));
    let sent_a = Arc::new(AtomicU64::new(0));
    let sent_b = Arc::new(AtomicU64::new(0));
    let sent_none = Arc::new(AtomicU64::new(0));
    // A, B, and 200 datagrams/s that no circuit's class takes (priority 0:
    // the queue's default class).
    let flows: Vec<_> = [
        (Some(a), 500, &sent_a),
        (Some(b), 1500, &sent_b),
        (None, 200, &sent_none),
    ]
    .into_iter()
    .map(|(id, pps, sent)| {
        let s = sender(ns.name(), "ens19", id.map_or(0, |id| classid(id).raw()));
        let (stop, sent) = (stop.clone(), sent.clone());
        std::thread::spawn(move || paced(s, pps, stop, sent))
    })
    .collect();
    // B's leaf fills (1000 packets at +750/s) before the measurement.
    std::thread::sleep(Duration::from_millis(2500));
    let mut stats = vec!["stats", "--json", "--interval", "2"];
    stats.extend(target);
    let j: serde_json::Value = serde_json::from_str(&ok(&lqos(d, &stats))).unwrap();

    // `lqos top` in a pseudo-terminal while B is the busiest circuit.
    let top_screen = top_in_tmux(d, &target);

    stop.store(true, Ordering::Relaxed);
    for f in flows {
        f.join().unwrap();
    }
    let ca = circuit(&j, a);
    let cb = circuit(&j, b);
    let rate = |c: &serde_json::Value| c["download"]["rate_bps"].as_f64().unwrap();
    let sent_rate_a = 500.0 * WIRE as f64 * 8.0;
    assert!(
        (rate(ca) / sent_rate_a - 1.0).abs() <= 0.10,
        "below its ceil, A shows its sending rate: {} vs {sent_rate_a}: {ca}",
        rate(ca)
    );
    let ceil_b = cb["download"]["ceil_bps"].as_f64().unwrap();
    assert_eq!(ceil_b, 6e6);
    assert!(
        (rate(cb) / ceil_b - 1.0).abs() <= 0.10,
        "above its ceil, B shows the ceil: {} vs {ceil_b}",
        rate(cb)
    );
    assert!(
        cb["download"]["drop_rate"].as_f64().unwrap() > 0.0,
        "B drops: {cb}"
    );
    assert_eq!(ca["download"]["drops"], 0, "{ca}");
    // Regression: the default classes' traffic appeared nowhere.
    let unclassified = j["unclassified"]["download"]["rate_bps"].as_f64().unwrap();
    let sent_rate_none = 200.0 * WIRE as f64 * 8.0;
    assert!(
        (unclassified / sent_rate_none - 1.0).abs() <= 0.10,
        "unclassified {unclassified} vs {sent_rate_none}: {}",
        j["unclassified"]
    );

    // Once the queues drained: every byte sent to A, as the kernel counts.
    std::thread::sleep(Duration::from_millis(1500));
    let mut once = vec!["stats", "--json", "--interval", "0", "--circuit", a];
    once.extend(target);
    let j: serde_json::Value = serde_json::from_str(&ok(&lqos(d, &once))).unwrap();
    let got = circuit(&j, a)["download"]["bytes"].as_u64().unwrap();
    let want = sent_a.load(Ordering::Relaxed) * WIRE;
    assert!(
        (got as f64 / want as f64 - 1.0).abs() <= 0.01,
        "bytes {got} vs sent {want}"
    );
    assert_eq!(j["circuits"].as_array().unwrap().len(), 1);

    // The busy circuit is on top's first row.
    let first = top_screen
        .lines()
        .skip_while(|l| !l.contains("CIRCUIT"))
        .nth(1)
        .unwrap_or_default()
        .to_string();
    assert!(
        first.split_whitespace().next() == Some(b),
        "first row {first:?}, screen:\n{top_screen}"
    );

    // The table and its filters.
    let mut table = vec!["stats", "--interval", "0", "--top", "3", "--sort", "drops"];
    table.extend(target);
    let out = ok(&lqos(d, &table));
    assert!(out.lines().nth(1).unwrap().starts_with(b), "{out}");
    assert!(
        out.contains("unclassified (the default classes: addresses no circuit has): down "),
        "{out}"
    );
    let mut bad = vec!["stats", "--circuit", "nope", "--interval", "0"];
    bad.extend(target);
    let o = lqos(d, &bad);
    assert_eq!(code(&o), 2, "{:?}", text(&o));
}

/// Runs `lqos top` in a detached tmux session (a real pseudo-terminal) for
/// a few refreshes and returns its screen.
fn top_in_tmux(d: &std::path::Path, target: &[&str]) -> String {
    let session = format!("lqos-top-{}", std::process::id());
    let cmd = format!(
        "cd {} && {} top {}",
        d.display(),
        env!("CARGO_BIN_EXE_lqos"),
        target.join(" ")
    );
    let tmux = |args: &[&str]| {
        std::process::Command::new("tmux")
            .args(args)
            .output()
            .expect("tmux")
    };
    let o = tmux(&[
        "new-session",
        "-d",
        "-s",
        &session,
        "-x",
        "160",
        "-y",
        "40",
        &cmd,
    ]);
    assert!(o.status.success(), "tmux: {:?}", text(&o));
    // Two refreshes (the first has no rates yet), plus slack.
    let mut screen = String::new();
    for _ in 0..30 {
        std::thread::sleep(Duration::from_millis(300));
        let o = tmux(&["capture-pane", "-p", "-t", &session]);
        screen = String::from_utf8_lossy(&o.stdout).into_owned();
        if screen.contains("sorted by rate") && !screen.contains("rates after the next refresh") {
            break;
        }
    }
    let _ = tmux(&["send-keys", "-t", &session, "q"]);
    std::thread::sleep(Duration::from_millis(300));
    let _ = tmux(&["kill-session", "-t", &session]);
    screen
}

/// Whether this kernel has sch_cake (else the test is skipped, unless
/// `LQOS_REQUIRE_CAKE=1`, as in the lab).
/// Without a terminal `lqos top` says to use `lqos stats` (exit 2).
#[test]
fn top_without_a_terminal_points_to_stats() {
    let dir = tempfile::tempdir().unwrap();
    let o = lqos(dir.path(), &["top", "--state-dir", "st"]);
    let (_, err) = text(&o);
    assert_eq!(code(&o), 2, "{err}");
    assert!(err.contains("lqos stats"), "{err}");
}
