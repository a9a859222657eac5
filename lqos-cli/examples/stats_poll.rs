//! The statistics poll against a loaded tree, side by side with what
//! LibreQoS runs for the same job, in one run: for `docs/benchmarks.md`.
//!
//! ```text
//! lqos gen --circuits 10000 --out net && cd net
//! lqos apply --netns NS --state-dir st --queues 16 --sqm pfifo
//! stats_poll --netns NS --state-dir st --runs 10
//! ```
//!
//! Per run, each timed alone (wall, and this process's and its children's
//! user+system CPU):
//! - lqos: [`lqos_apply::NetlinkLive::poll_stats`] of every planned
//!   interface (per HTB its class dump; one qdisc dump per interface: the
//!   leaves' statistics) and [`StatsTracker::observe`] (map to circuits
//!   and nodes, rates);
//! - LibreQoS's way: `tc -s -j class show dev IF` and `tc -s -j qdisc show
//!   dev IF` of both interfaces (four processes), each output parsed as
//!   JSON (serde_json; iproute2 6.1 prints HTB classes as text even with
//!   `-j`: those are parsed as text, each block's numbers);
//! - `/metrics`: the Prometheus text of the last poll's statistics
//!   (every circuit's series).
//!
//! Prints the median and spread of each and the ratio of the medians.
//! `stats_poll --synthetic N --runs R` times `/metrics` alone for a
//! generated plan of N circuits with cake leaves (every circuit with
//! counters and four tins; no kernel).

#[path = "../src/metrics.rs"]
#[allow(dead_code)]
mod metrics;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lqos_apply::stats::{StatsIndex, StatsTracker};
use lqos_apply::{load_saved_plan, NetlinkLive, StateDir};

fn cpu() -> Duration {
    let me = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF).unwrap();
    let ch = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN).unwrap();
    let t = |u: nix::sys::resource::Usage| {
        let d = |tv: nix::sys::time::TimeVal| {
            Duration::from_secs(tv.tv_sec() as u64) + Duration::from_micros(tv.tv_usec() as u64)
        };
        d(u.user_time()) + d(u.system_time())
    };
    t(me) + t(ch)
}

/// Median, min and max in ms.
fn summary(v: &mut [(Duration, Duration)]) -> String {
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let mid = v[v.len() / 2];
    format!(
        "median {:.1} ms wall ({:.1} ms CPU), min {:.1}, max {:.1}",
        ms(mid.0),
        ms(mid.1),
        ms(v[0].0),
        ms(v[v.len() - 1].0)
    )
}

fn time<T>(f: impl FnOnce() -> T) -> (T, (Duration, Duration)) {
    let (w, c) = (Instant::now(), cpu());
    let r = f();
    (r, (w.elapsed(), cpu() - c))
}

/// tc's output parsed: JSON; or, where iproute2 (6.1) prints text even
/// with `-j` (HTB classes), each block's numbers.
fn parse_tc(out: &[u8]) -> usize {
    if let Ok(serde_json::Value::Array(v)) = serde_json::from_slice::<serde_json::Value>(out) {
        return v.len();
    }
    let text = std::str::from_utf8(out).expect("tc's text");
    let blocks: Vec<Vec<i64>> = text
        .split("\nclass ")
        .map(|b| {
            b.split(|c: char| c.is_whitespace() || c == ',' || c == '(' || c == ')')
                .filter_map(|w| w.parse().ok())
                .collect()
        })
        .collect();
    blocks.len()
}

/// `/metrics` of a generated plan of `n` circuits with cake leaves on both
/// interfaces, every circuit with counters and four tins (no kernel).
fn synthetic(n: usize, runs: usize) {
    use lqos_apply::netlink::{
        CakeTin, CakeXstats, ClassSample, Counters, LeafXstats, QdiscSample,
    };
    use lqos_apply::stats::{RawIface, RawStats};
    let g = lqos_model::generate(&lqos_model::GenParams {
        circuits: n,
        ..Default::default()
    });
    let mut cfg = lqos_tc::PlanConfig::bridge("ens19", "ens20", 16);
    cfg.default_sqm = "cake diffserv4".parse().unwrap();
    let plan = lqos_tc::plan(&g.network, &cfg, None).unwrap();
    let index = StatsIndex::new(&plan);
    let raw = RawStats {
        interfaces: plan
            .interfaces
            .iter()
            .map(|ip| {
                let mut r = RawIface::empty(&ip.dev);
                for op in &ip.ops {
                    match op {
                        lqos_tc::TcOp::AddClass(c) => r.classes.push(ClassSample {
                            classid: c.classid,
                            counters: Counters {
                                bytes: 123_456_789,
                                packets: 98_765,
                                ..Counters::default()
                            },
                            htb: None,
                        }),
                        lqos_tc::TcOp::AddQdisc(q) | lqos_tc::TcOp::ReplaceQdisc(q)
                            if q.kind.name() == "cake" =>
                        {
                            r.qdiscs.push(QdiscSample {
                                handle: q.handle,
                                parent: q.parent,
                                kind: "cake".into(),
                                counters: Counters::default(),
                                xstats: LeafXstats::Cake(CakeXstats {
                                    tins: vec![
                                        CakeTin {
                                            peak_delay_us: 1234,
                                            avg_delay_us: 456,
                                            ..CakeTin::default()
                                        };
                                        4
                                    ],
                                    ..CakeXstats::default()
                                }),
                            })
                        }
                        _ => {}
                    }
                }
                r
            })
            .collect(),
    };
    let mut tracker = StatsTracker::new(&index);
    tracker.observe(&index, &raw, Duration::ZERO);
    let stats = tracker.observe(&index, &raw, Duration::from_secs(1));
    let shared = Arc::new(Mutex::new(metrics::Shared {
        stats: Some(stats),
        ..Default::default()
    }));
    let registry = metrics::registry(shared, metrics::CircuitSeries::All);
    let mut v = Vec::new();
    let mut lines = 0;
    for _ in 0..runs {
        let (text, t) = time(|| metrics::render(&registry));
        lines = text.lines().count();
        v.push(t);
    }
    println!(
        "/metrics of {n} circuits with cake leaves (synthetic, {lines} lines): {}",
        summary(&mut v)
    );
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opt = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let netns = opt("--netns");
    let state = opt("--state-dir").unwrap_or_else(|| "st".into());
    let runs: usize = opt("--runs").map_or(Ok(10), |r| r.parse())?;
    if let Some(n) = opt("--synthetic") {
        synthetic(n.parse()?, runs);
        return Ok(());
    }
    let dir = StateDir::open(&state)?;
    let plan = load_saved_plan(&dir, netns.as_deref())?
        .ok_or("no plan applied in the state directory")?
        .plan;
    let live = NetlinkLive::new(netns.clone());
    let index = StatsIndex::new(&plan);
    let mut tracker = StatsTracker::new(&index);
    let start = Instant::now();
    let devs: Vec<String> = index.devs().map(str::to_string).collect();
    let (mut ours, mut theirs, mut render) = (Vec::new(), Vec::new(), Vec::new());
    let shared = Arc::new(Mutex::new(metrics::Shared::default()));
    let registry = metrics::registry(shared.clone(), metrics::CircuitSeries::All);
    let mut lines = 0;
    for _ in 0..runs {
        let (stats, t) = time(|| {
            let raw = live.poll_stats(&index, true).expect("poll");
            tracker.observe(&index, &raw, start.elapsed())
        });
        ours.push(t);
        shared.lock().unwrap().stats = Some(stats);
        let (text, t) = time(|| metrics::render(&registry));
        lines = text.lines().count();
        render.push(t);
        let (_, t) = time(|| {
            for dev in &devs {
                for what in ["class", "qdisc"] {
                    let mut c = std::process::Command::new("tc");
                    if let Some(ns) = &netns {
                        c.args(["-n", ns]);
                    }
                    let out = c
                        .args(["-s", "-j", what, "show", "dev", dev])
                        .output()
                        .expect("tc");
                    assert!(out.status.success(), "tc {what} show dev {dev}");
                    std::hint::black_box(parse_tc(&out.stdout));
                }
            }
        });
        theirs.push(t);
    }
    let med = |v: &mut Vec<(Duration, Duration)>| {
        v.sort();
        v[v.len() / 2].0.as_secs_f64()
    };
    println!(
        "{} circuits, {} interfaces, {runs} runs",
        index.circuits.len(),
        devs.len()
    );
    println!(
        "lqos poll (dumps, decode, map, rates): {}",
        summary(&mut ours)
    );
    println!(
        "tc -s -j class+qdisc show of both interfaces, parsed: {}",
        summary(&mut theirs)
    );
    println!("ratio lqos / tc: {:.3}", med(&mut ours) / med(&mut theirs));
    println!("/metrics render ({lines} lines): {}", summary(&mut render));
    let status = std::fs::read_to_string("/proc/self/status")?;
    for l in status
        .lines()
        .filter(|l| l.starts_with("VmHWM") || l.starts_with("VmRSS"))
    {
        println!("this process: {l}");
    }
    Ok(())
}
