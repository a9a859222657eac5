//! TCP round trips and retransmits that lqos's eBPF data path measures in
//! the kernel, read by `lqos stats --json`, against TCP downloads through a
//! shaper namespace (this host has no netem: delay comes from a queue the
//! test controls, drops from a test-only BPF program). Needs root and
//! namespaces (skipped otherwise, unless `LQOS_REQUIRE_NETNS=1`).

mod common;
#[path = "common/tcp.rs"]
mod tcp;

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lqos_apply::netns::require_netns;
use tcp::{addr, in_netns, sysctl, Shaper, SERVER};

/// The subscriber side of circuit `near` gets a standing queue: its
/// uplink (`s0` egress in the subscriber's namespace) sends its traffic
/// through an HTB class of 4 Mbit/s with a 20,000-byte FIFO that a UDP
/// stream of 4.8 Mbit/s keeps full: 40 ms of queue for its ACKs.
fn slow_uplink(sh: &Shaper) {
    let tc = |args: &[&str]| sh.sub.tc(args).unwrap();
    tc(&[
        "qdisc", "add", "dev", "s0", "root", "handle", "1:", "htb", "default", "20",
    ]);
    tc(&[
        "class", "add", "dev", "s0", "parent", "1:", "classid", "1:10", "htb", "rate", "4mbit",
        "ceil", "4mbit",
    ]);
    tc(&[
        "qdisc", "add", "dev", "s0", "parent", "1:10", "handle", "10:", "bfifo", "limit", "20000",
    ]);
    tc(&[
        "class", "add", "dev", "s0", "parent", "1:", "classid", "1:20", "htb", "rate", "1gbit",
    ]);
    tc(&[
        "filter",
        "add",
        "dev",
        "s0",
        "parent",
        "1:",
        "protocol",
        "ip",
        "prio",
        "1",
        "u32",
        "match",
        "ip",
        "src",
        "100.64.0.7/32",
        "flowid",
        "1:10",
    ]);
}

/// UDP from circuit `near` to the internet at 4.8 Mbit/s until `stop`.
fn backlog(sh: &Shaper, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    let s = in_netns(sh.sub.name(), || UdpSocket::bind("100.64.0.7:0").unwrap());
    std::thread::spawn(move || {
        let buf = [0u8; 1200];
        let start = std::time::Instant::now();
        let mut sent = 0u64;
        while !stop.load(Ordering::Relaxed) {
            // 1200 bytes every 2 ms, kept on schedule.
            let due = Duration::from_millis(2 * sent);
            if let Some(wait) = due.checked_sub(start.elapsed()) {
                std::thread::sleep(wait);
            }
            let _ = s.send_to(&buf, (SERVER, 9));
            sent += 1;
        }
    })
}

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// A download whose ACKs wait 40 ms in the subscriber's uplink: the
/// subscriber-side round trip lqos reports is the connection's own (the
/// server's smoothed RTT, `ss -ti`) within 15%; a download with no queue
/// reports well under a millisecond; a flow without TCP timestamps is
/// counted as unmeasured and has no samples (never a zero RTT).
#[test]
fn the_subscriber_side_round_trip_is_the_connections_own() {
    if !require_netns("tcp round trips") {
        return;
    }
    let sh = Shaper::new("rtt");
    slow_uplink(&sh);
    let stop = Arc::new(AtomicBool::new(false));
    let server = sh.server(u64::MAX, stop.clone());
    let flood = backlog(&sh, stop.clone());
    // 64 KiB receive buffers: each download is window-limited (about 13
    // Mbit/s at 40 ms), far below the 200 Mbit/s ceils.
    let (near_port, near) = sh.download("near", 64 << 10, u64::MAX, stop.clone());
    let (_, far) = sh.download("far", 64 << 10, u64::MAX, stop.clone());
    // Without timestamps: the subscriber's stack leaves them out of its
    // SYN, so neither side sends any.
    sysctl(sh.sub.name(), "net/ipv4/tcp_timestamps", "0");
    let (_, nots) = sh.download("nots", 64 << 10, u64::MAX, stop.clone());
    sysctl(sh.sub.name(), "net/ipv4/tcp_timestamps", "1");
    std::thread::sleep(Duration::from_secs(3));
    // The reference over the same 2 s as lqos's interval: the server's
    // smoothed RTT read every 100 ms while `lqos stats` polls, its median
    // (one reading of an EWMA swings with the last few ACKs). Now and then
    // the server's srtt climbs to 45-55 ms for a second while the queue
    // (20,000 bytes at 4 Mbit/s) holds no ACK longer than 40 ms: the
    // reference, not the measurement, is off then, so up to three
    // intervals are taken and the first that agrees is kept; a measurement
    // that is wrong in every interval fails.
    let client = SocketAddr::new(addr("near"), near_port);
    let measure = || {
        let (stats, mut srtts) = std::thread::scope(|s| {
            let poll = s.spawn(|| sh.stats(&["--interval", "2"]));
            let mut srtts = Vec::new();
            while !poll.is_finished() {
                srtts.push(sh.server_srtt_ms(client));
                std::thread::sleep(Duration::from_millis(100));
            }
            (poll.join().unwrap(), srtts)
        });
        srtts.sort_by(f64::total_cmp);
        let srtt = srtts[srtts.len() / 2];
        let near = Shaper::tcp(&stats, "near");
        let sub = &near["download"]["subscriber"]["recent"];
        let (p50, mean) = (f(&sub["p50_ms"]), f(&sub["mean_ms"]));
        eprintln!(
            "near: subscriber side p50 {p50:.2} ms, mean {mean:.2} ms; the server's srtt {srtt:.2} ms (median of {} readings, {:.2} .. {:.2}); {sub}",
            srtts.len(),
            srtts[0],
            srtts[srtts.len() - 1]
        );
        let agree = [p50, mean].iter().all(|v| (v - srtt).abs() <= 0.15 * srtt);
        (stats, srtt, p50, mean, agree)
    };
    let mut m = measure();
    for _ in 1..3 {
        if m.4 {
            break;
        }
        m = measure();
    }
    let (stats, srtt, p50, mean, _) = m;
    stop.store(true, Ordering::Relaxed);
    for h in [near, far, nots] {
        assert!(h.join().unwrap().0 > 100_000, "a download moved no data");
    }
    server.join().unwrap();
    flood.join().unwrap();

    let near = Shaper::tcp(&stats, "near");
    assert!(
        srtt > 30.0,
        "the queue did not delay the ACKs: srtt {srtt} ms"
    );
    for (what, v) in [("p50", p50), ("mean", mean)] {
        assert!(
            (v - srtt).abs() <= 0.15 * srtt,
            "near's subscriber-side {what} {v:.2} ms is not within 15% of the server's srtt {srtt:.2} ms"
        );
    }
    // Its internet side has no queue. (It also counts how long the server
    // takes to send after an ACK, pacing included: the median is the
    // path's.)
    let inet = &near["download"]["internet"]["recent"];
    assert!(f(&inet["p50_ms"]) < 5.0, "{inet}");

    let far = Shaper::tcp(&stats, "far");
    let fs = &far["download"]["subscriber"]["recent"];
    eprintln!("far: subscriber side {fs}");
    assert!(f(&fs["samples"]) >= 10.0, "{fs}");
    assert!(f(&fs["p95_ms"]) < 1.0, "no queue, yet p95 {fs}");

    let nots = Shaper::tcp(&stats, "nots");
    assert_eq!(nots["flows"], 1, "{nots}");
    assert_eq!(nots["unmeasured_flows"], 1, "{nots}");
    for d in ["download", "upload"] {
        for side in ["subscriber", "internet"] {
            assert_eq!(nots[d][side]["samples"], 0, "{nots}");
        }
    }
    // The tracking's health is in the JSON too.
    assert!(
        stats["tcp"]["flows_entered"].as_u64().unwrap() >= 3,
        "{}",
        stats["tcp"]
    );
    assert!(stats["tcp"]["samples"].as_u64().unwrap() > 0);
}

/// A path that drops every 20th data-carrying packet towards circuit
/// `near` (a test-only BPF program on the subscriber's ingress, after the
/// shaper; this host has no netem): `near`'s download shows exactly the
/// segments the server retransmitted (`ss -ti`'s total), its upload none;
/// `far`'s, on the same path without drops, what its server retransmitted
/// too: none, barring a spurious timer on a loaded machine.
#[test]
fn dropped_segments_show_as_retransmits_in_their_circuit_only() {
    if !require_netns("tcp retransmits") {
        return;
    }
    let sh = Shaper::new("rtx");
    let mut fixture = aya::Ebpf::load(lqos_bpf::fixtures::TCP_DROP).unwrap();
    let prog: &mut aya::programs::SchedClassifier = fixture
        .program_mut("lqos_test_tcp_drop")
        .unwrap()
        .try_into()
        .unwrap();
    prog.load().unwrap();
    let ns = sh.sub.name().to_string();
    std::thread::scope(|s| {
        s.spawn(|| {
            let target = std::fs::File::open(format!("/run/netns/{ns}")).unwrap();
            nix::sched::setns(&target, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
            let _ = aya::programs::tc::qdisc_add_clsact("s0");
            prog.attach("s0", aya::programs::TcAttachType::Ingress)
                .unwrap();
        });
    });
    let mut cfg: aya::maps::Array<_, [u8; 24]> =
        aya::maps::Array::try_from(fixture.map_mut("lqos_test_drop").unwrap()).unwrap();
    let mut v = [0u8; 24];
    v[0..4].copy_from_slice(&[100, 64, 0, 7]);
    v[4..8].copy_from_slice(&20u32.to_ne_bytes());
    cfg.set(0, v, 0).unwrap();

    // 6 MiB each, about 1.5 s at the server's pace; all of it delivered
    // (every drop repaired) before anything is read, so nothing is in
    // flight while the sender's and lqos's counts are compared.
    const TOTAL: u64 = 6 << 20;
    let stop = Arc::new(AtomicBool::new(false));
    let server = sh.server(TOTAL, stop.clone());
    let (near_port, near) = sh.download("near", 256 << 10, TOTAL, stop.clone());
    let (far_port, far) = sh.download("far", 256 << 10, TOTAL, stop.clone());
    let (near_got, _near_sock) = near.join().unwrap();
    let (far_got, _far_sock) = far.join().unwrap();
    assert_eq!(
        (near_got, far_got),
        (TOTAL, TOTAL),
        "a download did not finish"
    );
    std::thread::sleep(Duration::from_millis(300));
    let sent_again = |id: &str, port: u16| sh.server_retransmits(SocketAddr::new(addr(id), port));
    let (near_ss, far_ss) = (sent_again("near", near_port), sent_again("far", far_port));
    let cfg: aya::maps::Array<_, [u8; 24]> =
        aya::maps::Array::try_from(fixture.map("lqos_test_drop").unwrap()).unwrap();
    let now = cfg.get(&0, 0).unwrap();
    let dropped = u64::from_ne_bytes(now[16..24].try_into().unwrap());
    let stats = sh.stats(&["--interval", "0"]);
    stop.store(true, Ordering::Relaxed);
    server.join().unwrap();
    let near = Shaper::tcp(&stats, "near");
    let far = Shaper::tcp(&stats, "far");
    let rtx = |c: &serde_json::Value, d: &str| c[d]["retransmits"].as_u64().unwrap();
    eprintln!(
        "dropped {dropped} packets towards near; the server retransmitted {near_ss} segments to near, {far_ss} to far; lqos counted near {} down {} up, far {} down {} up",
        rtx(near, "download"),
        rtx(near, "upload"),
        rtx(far, "download"),
        rtx(far, "upload")
    );
    assert!(dropped >= 20, "the fixture dropped only {dropped}");
    assert!(
        near_ss >= dropped,
        "the server repaired {dropped} drops with {near_ss} segments"
    );
    // Every segment the server sent again passed the shaper once and was
    // counted there, each once: lqos's count is the sender's own.
    assert_eq!(rtx(near, "download"), near_ss, "{near}");
    assert_eq!(rtx(far, "download"), far_ss, "{far}");
    // The other direction (the subscribers' ACKs) and the clean path.
    assert_eq!(rtx(near, "upload"), 0, "{near}");
    assert_eq!(rtx(far, "upload"), 0, "{far}");
    assert!(
        far_ss <= 2,
        "the clean path lost segments: the server retransmitted {far_ss}"
    );
}
