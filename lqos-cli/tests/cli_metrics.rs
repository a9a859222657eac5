//! `lqos watch --metrics`: `/metrics` fetched over HTTP while traffic runs
//! into a circuit (a sender with `SO_PRIORITY` = its classid, on a
//! single-queue veth in a scratch namespace), parsed with a Prometheus text
//! parser: valid, the busy circuit's counters grow between scrapes; bad,
//! huge and slow requests get a 4xx status and never stop the server.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{lqos, netns_with_generated, ok, promtool, static_neighbour, udp_sender};
use lqos_apply::netns::require_netns;
use lqos_tc::{Direction, TcHandle};

/// A free loopback port (bound and released).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One HTTP exchange: `request` sent raw, the whole answer back.
fn http(port: u16, request: &[u8]) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = s.write_all(request);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn status(answer: &str) -> u16 {
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {answer:?}"))
}

/// The head and the body of an answer.
fn split(answer: &str) -> (&str, &str) {
    answer.split_once("\r\n\r\n").unwrap()
}

fn scrape(port: u16) -> prometheus_parse::Scrape {
    let a = http(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(status(&a), 200, "{a}");
    let body = split(&a).1;
    let lines = body.lines().map(|l| Ok(l.to_string()));
    prometheus_parse::Scrape::parse(lines).expect("valid Prometheus text")
}

fn value(s: &prometheus_parse::Scrape, name: &str, circuit: &str, dir: &str) -> Option<f64> {
    s.samples.iter().find_map(|x| {
        let ok = x.metric == name
            && x.labels.get("circuit_id") == Some(circuit)
            && x.labels.get("direction") == Some(dir);
        match (ok, &x.value) {
            (true, prometheus_parse::Value::Counter(v) | prometheus_parse::Value::Gauge(v)) => {
                Some(*v)
            }
            (true, prometheus_parse::Value::Untyped(v)) => Some(*v),
            _ => None,
        }
    })
}

#[test]
fn metrics_are_valid_grow_with_traffic_and_bad_requests_get_errors() {
    if !require_netns("cli watch --metrics") {
        return;
    }
    let (ns, dir) = netns_with_generated("metrics", 1, 20);
    let d = dir.path();
    static_neighbour(&ns);
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let log = std::fs::File::create(d.join("watch.log")).unwrap();
    let mut daemon = std::process::Command::new(env!("CARGO_BIN_EXE_lqos"))
        .args([
            "watch",
            "--netns",
            ns.name(),
            "--state-dir",
            "st",
            "--queues",
            "1",
            "--sqm",
            "pfifo",
            "--poll",
            "0.5",
            "--verify-every",
            "0",
            "--metrics",
            &addr,
        ])
        .current_dir(d)
        .stderr(log)
        .spawn()
        .unwrap();
    let stop_daemon = |daemon: &mut std::process::Child| {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(daemon.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = daemon.wait();
    };
    // The first scrape with circuit series: the daemon loaded and polled.
    let t0 = Instant::now();
    let first = loop {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            let s = scrape(port);
            if s.samples.iter().any(|x| x.metric == "lqos_circuit_info") {
                break s;
            }
        }
        if t0.elapsed() > Duration::from_secs(60) {
            stop_daemon(&mut daemon);
            panic!(
                "no metrics within 60 s; log:\n{}",
                std::fs::read_to_string(d.join("watch.log")).unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let circuits = first
        .samples
        .iter()
        .filter(|x| x.metric == "lqos_circuit_info")
        .count();
    assert_eq!(circuits, 20);
    assert!(first
        .samples
        .iter()
        .any(|x| x.metric == "lqos_reloads_total" && x.labels.get("trigger") == Some("start")));

    // The text format without an Accept header, OpenMetrics when asked:
    // both pass promtool.
    let text = http(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    let om = http(
        port,
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5\r\n\r\n",
    );
    let (head, body) = split(&text);
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/plain; version=0.0.4"),
        "{head}"
    );
    assert!(!body.contains("# EOF"));
    promtool::assert_passes(body, false, "a scrape in the text format");
    let (head, body) = split(&om);
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/openmetrics-text; version=1.0.0"),
        "{head}"
    );
    assert!(
        body.ends_with("\n# EOF\n"),
        "{}",
        &body[body.len().saturating_sub(200)..]
    );
    promtool::assert_passes(body, true, "a scrape in OpenMetrics");

    // Traffic into circuit 10001's download class.
    let state = lqos_apply::StateDir::open(d.join("st")).unwrap();
    let plan = lqos_apply::load_saved_plan(&state, Some(ns.name()))
        .unwrap()
        .unwrap()
        .plan;
    let c = plan
        .allocation
        .circuits
        .iter()
        .find(|c| c.id == "10001")
        .unwrap();
    let classid = TcHandle::new(plan.major(Direction::Download, c.queue), c.minor);
    let stop = Arc::new(AtomicBool::new(false));
    let sender = {
        let (ns, stop) = (ns.name().to_string(), stop.clone());
        std::thread::spawn(move || {
            let s = udp_sender(&ns, "ens19", classid.raw(), 0);
            while !stop.load(Ordering::Relaxed) {
                for _ in 0..10 {
                    let _ = s.send(&[0u8; 500]);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    let bytes = |s: &prometheus_parse::Scrape| {
        value(s, "lqos_circuit_sent_bytes_total", "10001", "download").unwrap_or(0.0)
    };
    std::thread::sleep(Duration::from_millis(1500));
    let a = scrape(port);
    std::thread::sleep(Duration::from_millis(1500));
    let b = scrape(port);
    stop.store(true, Ordering::Relaxed);
    sender.join().unwrap();
    assert!(bytes(&a) > 0.0, "no bytes counted");
    assert!(bytes(&b) > bytes(&a), "{} then {}", bytes(&a), bytes(&b));
    let packets = |s: &prometheus_parse::Scrape| {
        value(s, "lqos_circuit_sent_packets_total", "10001", "download").unwrap_or(0.0)
    };
    assert!(packets(&b) > packets(&a));
    // An idle circuit's counter stands still (a poll is not traffic).
    let idle = |s: &prometheus_parse::Scrape| {
        value(s, "lqos_circuit_sent_bytes_total", "10002", "download").unwrap()
    };
    assert_eq!(idle(&a), idle(&b));
    assert!(
        value(
            &b,
            "lqos_circuit_ceil_bytes_per_second",
            "10001",
            "download"
        )
        .unwrap()
            > 0.0
    );

    // Bad requests: an error status each, then the server still answers.
    assert_eq!(status(&http(port, b"GARBAGE\r\n\r\n")), 400);
    assert_eq!(status(&http(port, b"POST /metrics HTTP/1.1\r\n\r\n")), 405);
    assert_eq!(status(&http(port, b"GET /other HTTP/1.1\r\n\r\n")), 404);
    let mut huge = b"GET /metrics HTTP/1.1\r\nX-Big: ".to_vec();
    huge.extend(std::iter::repeat_n(b'a', 1 << 20));
    huge.extend_from_slice(b"\r\n\r\n");
    assert_eq!(status(&http(port, &huge)), 431);
    // A request that never ends: answered with 408 after the read timeout.
    let t = Instant::now();
    assert_eq!(
        status(&http(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n")),
        408
    );
    assert!(t.elapsed() < Duration::from_secs(9));
    let after = scrape(port);
    assert!(bytes(&after) >= bytes(&b));

    stop_daemon(&mut daemon);
    let log = std::fs::read_to_string(d.join("watch.log")).unwrap();
    assert!(!log.contains("panicked"), "{log}");
    drop(ok(&lqos(
        d,
        &["status", "--netns", ns.name(), "--state-dir", "st"],
    )));
}
