//! `lqos watch --metrics`: `/metrics` fetched over HTTP while traffic runs
//! into a circuit (a sender with `SO_PRIORITY` = its classid, on a
//! single-queue veth in a scratch namespace), parsed with a Prometheus text
//! parser and checked by promtool in both formats: valid, the busy
//! circuit's counters grow between scrapes; bad and huge requests get a
//! 4xx status, unfinished ones are closed, and none stops the server. And
//! the server under idle, half-sent, slow and many connections: scrapes
//! are still answered, memory stays bounded, edits still apply.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{lqos, netns_with_generated, ok, promtool, set_rates, static_neighbour, udp_sender};
use lqos_apply::netns::require_netns;
use lqos_tc::allocation::Direction;
use lqos_tc::TcHandle;

/// A free loopback port (bound and released).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A body sent with `Transfer-Encoding: chunked`, decoded.
fn unchunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let eol = raw
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("a chunk size line");
        let size = std::str::from_utf8(&raw[..eol])
            .unwrap()
            .split(';')
            .next()
            .unwrap();
        let n = usize::from_str_radix(size.trim(), 16).expect("a chunk size");
        raw = &raw[eol + 2..];
        if n == 0 {
            return out;
        }
        out.extend_from_slice(&raw[..n]);
        raw = &raw[n + 2..];
    }
}

/// One HTTP exchange: `request` sent raw, the answer back as its head,
/// a blank line and its body (unchunked and gunzipped as its head says),
/// and the bytes it took on the wire.
fn http_sized(port: u16, request: &[u8]) -> (String, usize) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = s.write_all(request);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let Some(end) = out.windows(4).position(|w| w == b"\r\n\r\n") else {
        return (String::from_utf8_lossy(&out).into_owned(), out.len());
    };
    let head = String::from_utf8_lossy(&out[..end]).into_owned();
    let lower = head.to_ascii_lowercase();
    let mut body = out[end + 4..].to_vec();
    if lower.contains("transfer-encoding: chunked") {
        body = unchunk(&body);
    }
    if lower.contains("content-encoding: gzip") {
        let mut plain = Vec::new();
        flate2::read::GzDecoder::new(&body[..])
            .read_to_end(&mut plain)
            .expect("a whole gzip stream");
        body = plain;
    }
    let text = format!("{head}\r\n\r\n{}", String::from_utf8_lossy(&body));
    (text, out.len())
}

fn http(port: u16, request: &[u8]) -> String {
    http_sized(port, request).0
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
    let state = lqos_apply::state::NetnsState::new(d.join("st"), Some(ns.name()));
    let plan = lqos_apply::saved::load_saved_plan(&state)
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
    // A request that never ends: the connection is closed (the head's
    // deadline is 5 s; the client gives up after 10).
    let t = Instant::now();
    assert_eq!(http(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n"), "");
    assert!(t.elapsed() < Duration::from_secs(9), "{:?}", t.elapsed());
    // gzip when asked: the same text.
    let plain = http(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    let (gz, wire) = http_sized(
        port,
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n",
    );
    assert!(
        gz.to_ascii_lowercase().contains("content-encoding: gzip"),
        "{gz}"
    );
    let samples = |t: &str| {
        let body = split(t).1;
        body.lines()
            .filter(|l| l.starts_with("lqos_circuit_info"))
            .count()
    };
    assert_eq!(samples(&gz), samples(&plain));
    assert!(
        wire < split(&plain).1.len() / 2,
        "{wire} bytes for {}",
        split(&plain).1.len()
    );
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

/// A connection whose receive buffer is 4 KiB, so a server writing to it
/// fills its own buffers at once and has to wait for the reader.
fn small_window_connection(port: u16) -> TcpStream {
    common::tcp_connect(
        None,
        std::net::SocketAddrV4::new([127, 0, 0, 1].into(), port),
        4096,
    )
}

/// The daemon's resident memory, kB.
fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// A whole scrape, timed (the text format, no gzip: about 1 MB here).
fn timed_scrape(port: u16) -> Duration {
    let t = Instant::now();
    let a = http(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    let took = t.elapsed();
    assert_eq!(status(&a), 200, "{}", &a[..a.len().min(300)]);
    assert!(
        a.contains("\nlqos_stats_poll_errors_total "),
        "a cut answer"
    );
    took
}

/// Idle sockets, half-sent requests, a reader taking 1 byte a second and
/// a flood of 1,000 connections do not stop scrapes (each answers before
/// a 10 s client timeout; the times are printed, the numbers are in
/// docs/benchmarks.md), the daemon's memory stays bounded and an edit is
/// still applied during the flood.
#[test]
fn metrics_stay_answerable_under_idle_slow_and_many_clients() {
    if !require_netns("cli watch --metrics under load") {
        return;
    }
    // The flood needs more descriptors than the default 1,024.
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    setrlimit(Resource::RLIMIT_NOFILE, hard.min(8192), hard).unwrap();

    let (ns, dir) = netns_with_generated("metrics-load", 1, 1000);
    let d = dir.path();
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let log = std::fs::File::create(d.join("watch.log")).unwrap();
    let mut daemon = std::process::Command::new(env!("CARGO_BIN_EXE_lqos"))
        .args(["watch", "--netns", ns.name(), "--state-dir", "st"])
        .args(["--queues", "1", "--sqm", "pfifo", "--poll", "1"])
        .args(["--verify-every", "0", "--metrics", &addr])
        .current_dir(d)
        .stderr(log)
        .spawn()
        .unwrap();
    let pid = daemon.id();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let t0 = Instant::now();
        let up = || TcpStream::connect(("127.0.0.1", port)).is_ok();
        while !(up()
            && http(port, b"GET /metrics HTTP/1.1\r\n\r\n").contains("\nlqos_circuit_info{"))
        {
            assert!(t0.elapsed() < Duration::from_secs(120), "no metrics");
            std::thread::sleep(Duration::from_millis(200));
        }
        println!("a scrape alone: {:?}", timed_scrape(port));

        // 100 idle connections and 100 half-sent requests, held.
        let mut held = Vec::new();
        for i in 0..200 {
            let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            if i % 2 == 1 {
                s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nAcc")
                    .unwrap();
            }
            held.push(s);
        }
        println!(
            "a scrape beside 100 idle and 100 half-sent: {:?}",
            timed_scrape(port)
        );
        drop(held);

        // A reader taking a byte a second of a 1 MB answer.
        let mut slow = small_window_connection(port);
        slow.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let reader = std::thread::spawn(move || {
            let mut b = [0u8; 1];
            for _ in 0..4 {
                let _ = slow.read(&mut b);
                std::thread::sleep(Duration::from_secs(1));
            }
        });
        std::thread::sleep(Duration::from_millis(500));
        println!(
            "a scrape beside a 1-byte/s reader: {:?}",
            timed_scrape(port)
        );
        reader.join().unwrap();

        // 1,000 connections at once, held, half of them with half a request.
        let before = rss_kb(pid);
        let mut flood = Vec::new();
        for i in 0..1000 {
            match TcpStream::connect(("127.0.0.1", port)) {
                Ok(mut s) => {
                    if i % 2 == 1 {
                        let _ = s.write_all(b"GET /metrics HTTP/1.1\r\n");
                    }
                    flood.push(s);
                }
                Err(e) => panic!("connection {i}: {e}"),
            }
        }
        println!("a scrape beside a flood of 1,000: {:?}", timed_scrape(port));
        // An edit during the flood is applied: circuit 10001's ceil.
        let live = lqos_apply::live::NetlinkLive::new(Some(ns.name().to_string()));
        let ceils = || -> Vec<u64> {
            use lqos_apply::live::LiveSource;
            let t = live.dump("ens19").unwrap();
            t.classes.values().map(|c| c.htb.ceil.bps()).collect()
        };
        let old = ceils();
        let csv = std::fs::read_to_string(d.join("ShapedDevices.csv")).unwrap();
        std::fs::write(d.join("edit.csv"), set_rates(&csv, "10001", "1", "777")).unwrap();
        std::fs::rename(d.join("edit.csv"), d.join("ShapedDevices.csv")).unwrap();
        let t = Instant::now();
        while !ceils().contains(&777_000_000) {
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "the edit was not applied during the flood"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(!old.contains(&777_000_000));
        println!("an edit applied during the flood after {:?}", t.elapsed());
        let during = rss_kb(pid);
        println!("daemon VmRSS {before} kB before the flood, {during} kB during it");
        assert!(
            during < before + 64 * 1024,
            "RSS grew from {before} to {during} kB"
        );
        drop(flood);
        timed_scrape(port);
    }));
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = daemon.wait();
    let log = std::fs::read_to_string(d.join("watch.log")).unwrap();
    if let Err(e) = result {
        eprintln!("daemon log:\n{log}");
        std::panic::resume_unwind(e);
    }
    assert!(!log.contains("panicked"), "{log}");
}
