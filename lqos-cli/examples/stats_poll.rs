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
//! - lqos: [`lqos_apply::live::LiveSource::poll`] of every planned interface
//!   (per HTB its class dump; one qdisc dump per interface: the leaves'
//!   statistics) and [`StatsPoll::observe`] (map to circuits and nodes,
//!   rates);
//! - LibreQoS's way: `tc -s -j class show dev IF` and `tc -s -j qdisc show
//!   dev IF` of both interfaces (four processes), each output parsed as
//!   JSON (serde_json; iproute2 6.1 prints HTB classes as text even with
//!   `-j`: those are parsed as text, each block's numbers);
//! - `/metrics`: the Prometheus text of the last poll's statistics
//!   (every circuit's series).
//!
//! Prints the median and spread of each and the ratio of the medians.
//! `stats_poll --tcp ...` (root) also loads lqos's eBPF data path into a
//! private bpffs and gives every circuit TCP statistics (histograms on
//! every side, written into `lqos1_tcp` as the tc program would keep them,
//! with new samples for every circuit before every run: the worst case),
//! and times the poll with them beside the poll without, in the same
//! runs: the TCP maps' batched read and their mapping and percentiles,
//! and `/metrics` with the histograms.
//! `stats_poll --poll-only ...` makes the polls alone (for a profiler).
//! `stats_poll --synthetic N --runs R` times `/metrics` alone for a
//! generated plan of N circuits with cake leaves (every circuit with
//! counters and four tins; no kernel).

use std::sync::Arc;
use std::time::{Duration, Instant};

use lqos_apply::live::{LiveSource, NetlinkLive};
use lqos_apply::saved::load_saved_plan;
use lqos_apply::state::NetnsState;
use lqos_apply::stats::openmetrics::{self, CircuitSeries, Format};
use lqos_apply::stats::{Snapshot, StatsIndex, StatsPoll, StatsTracker};

/// User and system CPU of this process and its waited-for children.
fn cpu() -> (Duration, Duration) {
    use nix::sys::resource::{getrusage, Usage, UsageWho};
    let d = |tv: nix::sys::time::TimeVal| {
        Duration::from_secs(tv.tv_sec() as u64) + Duration::from_micros(tv.tv_usec() as u64)
    };
    let [me, ch]: [Usage; 2] =
        [UsageWho::RUSAGE_SELF, UsageWho::RUSAGE_CHILDREN].map(|w| getrusage(w).unwrap());
    (
        d(me.user_time()) + d(ch.user_time()),
        d(me.system_time()) + d(ch.system_time()),
    )
}

/// `/metrics` as `lqos watch` renders it (the text format, every
/// circuit, the daemon's health series).
fn exposition(out: &mut Vec<u8>, snapshot: &Snapshot) {
    let health = lqos_apply::daemon::Health::default().families();
    let series = Some((&snapshot.stats, snapshot.labels()));
    openmetrics::render(out, series, &health, CircuitSeries::All, Format::Prometheus).unwrap()
}

/// One timed run: wall, user CPU, system CPU.
type Took = (Duration, Duration, Duration);

/// Median (wall, its run's user and system CPU), min and max in ms.
fn summary(v: &mut [Took]) -> String {
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let mid = v[v.len() / 2];
    format!(
        "median {:.1} ms wall ({:.1} ms user + {:.1} ms sys), min {:.1}, max {:.1}",
        ms(mid.0),
        ms(mid.1),
        ms(mid.2),
        ms(v[0].0),
        ms(v[v.len() - 1].0)
    )
}

fn time<T>(f: impl FnOnce() -> T) -> (T, Took) {
    let (w, (u, s)) = (Instant::now(), cpu());
    let r = f();
    let (u2, s2) = cpu();
    (r, (w.elapsed(), u2 - u, s2 - s))
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
    use lqos_apply::stats::{IfaceSamples, Samples};
    let g = lqos_model::generate(&lqos_model::GenParams::with_circuits(n));
    let mut cfg = lqos_tc::PlanConfig::bridge("ens19", "ens20", 16);
    cfg.default_sqm = "cake diffserv4".parse().unwrap();
    let plan = lqos_tc::plan(&g.network, &cfg, None).unwrap();
    let index = StatsIndex::new(&plan);
    let raw = Samples::from(
        plan.interfaces
            .iter()
            .map(|ip| {
                let mut r = IfaceSamples::empty(&ip.dev);
                for op in &ip.ops {
                    match op {
                        lqos_tc::TcOp::AddClass(c) => r.classes.push(ClassSample {
                            classid: c.classid,
                            counters: Counters {
                                bytes: 123_456_789,
                                packets: 98_765,
                                ..Default::default()
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
                                            sent_packets: 1,
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
            .collect::<Vec<_>>(),
    );
    let mut tracker = StatsTracker::new(&index);
    tracker.observe(&index, &raw, Duration::ZERO);
    let stats = tracker.observe(&index, &raw, Duration::from_secs(1));
    let snapshot = Snapshot::new(stats, Arc::new(index));
    snapshot.labels();
    let mut v = Vec::new();
    let mut out = Vec::new();
    for _ in 0..runs {
        out.clear();
        let ((), t) = time(|| exposition(&mut out, &snapshot));
        v.push(t);
    }
    let lines = out.iter().filter(|&&b| b == b'\n').count();
    println!(
        "/metrics of {n} circuits with cake leaves, every tin busy (synthetic, {lines} lines, {} bytes): {}",
        out.len(),
        summary(&mut v)
    );
}

/// Writes every circuit of `plan` an entry in the TCP statistics map as
/// the tc program would have counted by poll `round`: every histogram with
/// samples in 16 buckets (more each round, so every circuit has new
/// samples in every interval), retransmits, flows.
fn write_tcp(
    tcp: &lqos_bpf::tcp::TcpMaps,
    plan: &lqos_tc::Plan,
    round: u32,
) -> Result<(), Box<dyn std::error::Error>> {
    use lqos_bpf::layout::{circuit_tag, TcpCircuit, TcpKey};
    for (i, c) in plan.allocation.circuits.iter().enumerate() {
        let down = lqos_tc::TcHandle::new(
            plan.major(lqos_tc::allocation::Direction::Download, c.queue),
            c.minor,
        );
        let key = TcpKey {
            classid: down.raw(),
            tag: circuit_tag(&c.id),
        };
        let mut v = TcpCircuit::default();
        for h in v.rtt.iter_mut().flatten() {
            for b in 20..36 {
                h.buckets[b] = (round + 1) * (i % 7 + b) as u32;
                h.count += u64::from(h.buckets[b]);
            }
            h.sum_ns = h.count * 30_000_000;
        }
        v.retransmits = [u64::from(round) * (i as u64 % 5), u64::from(round)];
        v.flows = 20 * u64::from(round + 1);
        tcp.insert(&key, &v)?;
    }
    Ok(())
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
    let dir = NetnsState::new(&state, netns.as_deref());
    let plan = load_saved_plan(&dir)?
        .ok_or("no plan applied in the state directory")?
        .plan;
    let live = NetlinkLive::new(netns.clone());
    let mut poll = StatsPoll::new(&plan);
    let req = poll.request(true);
    // With --tcp: a data path of its own with every circuit's TCP
    // statistics, and a second poll that reads them too.
    let bpffs = args
        .iter()
        .any(|a| a == "--tcp")
        .then(|| lqos_bpf::sys::PrivateBpffs::new("stats-poll"))
        .transpose()?;
    let _dp = bpffs
        .as_ref()
        .map(|b| lqos_bpf::loader::DataPath::load(b.path()))
        .transpose()?;
    let tcp_maps = bpffs
        .as_ref()
        .map(|b| lqos_bpf::tcp::TcpMaps::open(b.path()))
        .transpose()?;
    let mut tcp_poll = bpffs
        .as_ref()
        .map(|b| StatsPoll::new(&plan).with_tcp(Some(b.path().to_path_buf())));
    let start = Instant::now();
    if args.iter().any(|a| a == "--poll-only") {
        // For a profiler: the polls alone.
        for _ in 0..runs {
            let polled = live.poll(&req);
            assert!(polled.failed.is_empty(), "{:?}", polled.failed);
            std::hint::black_box(poll.observe(&polled, start.elapsed()));
        }
        return Ok(());
    }
    let devs: Vec<String> = poll.index().devs().map(str::to_string).collect();
    let (mut ours, mut theirs, mut render) = (Vec::new(), Vec::new(), Vec::new());
    let (mut dumps, mut maps) = (Vec::new(), Vec::new());
    let (mut with_tcp, mut tcp_read, mut tcp_map, mut tcp_render) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut lines, mut tcp_lines) = (0, 0);
    let mut out = Vec::new();
    for run in 0..runs {
        if let (Some(tp), Some(maps)) = (&mut tcp_poll, &tcp_maps) {
            write_tcp(maps, &plan, run as u32)?;
            let treq = tp.request(true);
            let (polled, td) = time(|| live.poll(&treq));
            assert!(polled.failed.is_empty() && polled.tcp_failed.is_none());
            let dir = treq.tcp.as_deref().unwrap();
            let (_, tr) = time(|| lqos_apply::stats::Polled::read_tcp(dir).unwrap());
            let (snapshot, tm) = time(|| tp.observe(&polled, start.elapsed()));
            with_tcp.push((td.0 + tm.0, td.1 + tm.1, td.2 + tm.2));
            tcp_read.push(tr);
            tcp_map.push(tm);
            snapshot.labels();
            out.clear();
            let ((), t) = time(|| exposition(&mut out, &snapshot));
            tcp_lines = out.iter().filter(|&&b| b == b'\n').count();
            tcp_render.push(t);
        }
        let (polled, td) = time(|| live.poll(&req));
        assert!(polled.failed.is_empty(), "{:?}", polled.failed);
        let (snapshot, tm) = time(|| poll.observe(&polled, start.elapsed()));
        dumps.push(td);
        maps.push(tm);
        ours.push((td.0 + tm.0, td.1 + tm.1, td.2 + tm.2));
        // The label sets are built once per plan, not per render.
        snapshot.labels();
        out.clear();
        let ((), t) = time(|| exposition(&mut out, &snapshot));
        lines = out.iter().filter(|&&b| b == b'\n').count();
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
    let med = |v: &mut Vec<Took>| {
        v.sort();
        v[v.len() / 2].0.as_secs_f64()
    };
    println!(
        "{} circuits, {} interfaces, {runs} runs",
        poll.index().circuits.len(),
        devs.len()
    );
    println!(
        "lqos poll (dumps, decode, map, rates): {}",
        summary(&mut ours)
    );
    println!("  of which dumps and decode: {}", summary(&mut dumps));
    println!("  of which map and rates: {}", summary(&mut maps));
    println!(
        "tc -s -j class+qdisc show of both interfaces, parsed: {}",
        summary(&mut theirs)
    );
    println!("ratio lqos / tc: {:.3}", med(&mut ours) / med(&mut theirs));
    println!("/metrics render ({lines} lines): {}", summary(&mut render));
    if !with_tcp.is_empty() {
        println!(
            "lqos poll with every circuit's TCP statistics (dumps, TCP maps, decode, map, rates, percentiles): {}",
            summary(&mut with_tcp)
        );
        println!(
            "  the TCP maps alone (batched read of {} circuits): {}",
            plan.allocation.circuits.len(),
            summary(&mut tcp_read)
        );
        println!(
            "  map, rates and percentiles with TCP: {}",
            summary(&mut tcp_map)
        );
        println!(
            "/metrics render with the TCP histograms ({tcp_lines} lines): {}",
            summary(&mut tcp_render)
        );
    }
    let status = std::fs::read_to_string("/proc/self/status")?;
    for l in status
        .lines()
        .filter(|l| l.starts_with("VmHWM") || l.starts_with("VmRSS"))
    {
        println!("this process: {l}");
    }
    Ok(())
}
