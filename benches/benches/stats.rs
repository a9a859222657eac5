//! The statistics poll's pure part at 10,000 circuits: decoding the class
//! and qdisc dump replies of both interfaces (counters, HTB and cake
//! statistics) and mapping them through the plan to circuits and nodes
//! with rates ([`StatsTracker::observe`]). The replies are synthetic: per
//! planned class and leaf one message laid out as the kernel sends it
//! (the HTB class layout of the host capture in
//! `lqos-apply/tests/fixtures/netlink/stats/`, cake's nested tin
//! statistics), and rendering that poll as `/metrics`
//! ([`openmetrics::render`]: 10,000 circuits with four busy cake tins per
//! direction, 381,000 samples, the worst case; and with the Best Effort tin
//! busy only). Then the same map with every circuit's TCP statistics
//! from the eBPF data path (every circuit with new samples in its four
//! histograms in every interval: the worst case), and `/metrics` with the
//! TCP histograms.

#![allow(missing_docs)] // criterion_group! generates undocumented functions

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use lqos_apply::netlink::LeafXstats;
use lqos_apply::netlink::{decode_class_sample_msg, decode_qdisc_sample_msg};
use lqos_apply::stats::openmetrics::{self, CircuitSeries, Format, Labels};
use lqos_apply::stats::{IfaceSamples, Samples, StatsIndex, StatsTracker};
use lqos_tc::{TcHandle, TcOp};

fn attr(out: &mut Vec<u8>, ty: u16, payload: &[u8]) {
    out.extend_from_slice(&((4 + payload.len()) as u16).to_ne_bytes());
    out.extend_from_slice(&ty.to_ne_bytes());
    out.extend_from_slice(payload);
    while out.len() % 4 != 0 {
        out.push(0);
    }
}

fn msg(ty: u16, handle: TcHandle, parent: TcHandle, kind: &str, app: &[u8]) -> Vec<u8> {
    let mut p = vec![0u8; 20];
    p[4..8].copy_from_slice(&3i32.to_ne_bytes());
    p[8..12].copy_from_slice(&handle.raw().to_ne_bytes());
    p[12..16].copy_from_slice(&parent.raw().to_ne_bytes());
    let mut k = kind.as_bytes().to_vec();
    k.push(0);
    attr(&mut p, 1, &k);
    let mut s2 = Vec::new();
    let mut basic = Vec::new();
    basic.extend_from_slice(&123_456_789u64.to_ne_bytes());
    basic.extend_from_slice(&98_765u32.to_ne_bytes());
    basic.extend_from_slice(&[0; 4]);
    attr(&mut s2, 1, &basic);
    attr(&mut s2, 3, &[7u8; 20]);
    attr(&mut s2, 4, app);
    attr(&mut p, 7, &s2);
    let mut m = Vec::new();
    m.extend_from_slice(&((16 + p.len()) as u32).to_ne_bytes());
    m.extend_from_slice(&ty.to_ne_bytes());
    m.extend_from_slice(&2u16.to_ne_bytes());
    m.extend_from_slice(&1u32.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(&p);
    m
}

fn cake_app() -> Vec<u8> {
    let mut tins = Vec::new();
    for i in 1..=4u16 {
        let mut t = Vec::new();
        for ty in 2..=23u16 {
            if [3, 5, 7, 9, 12].contains(&ty) {
                attr(&mut t, ty, &1000u64.to_ne_bytes());
            } else {
                attr(&mut t, ty, &17u32.to_ne_bytes());
            }
        }
        attr(&mut tins, i, &t);
    }
    let mut app = Vec::new();
    attr(&mut app, 3, &(4u32 << 20).to_ne_bytes());
    attr(&mut app, 4, &1234u32.to_ne_bytes());
    attr(&mut app, 10, &tins);
    app
}

fn bench(c: &mut Criterion) {
    let g = lqos_model::generate(&lqos_model::GenParams::with_circuits(10_000));
    let mut cfg = lqos_tc::PlanConfig::bridge("ens19", "ens20", 16);
    cfg.default_sqm = "cake diffserv4".parse().unwrap();
    let plan = lqos_tc::plan(&g.network, &cfg, None).unwrap();
    let index = StatsIndex::new(&plan);
    let htb_app = [1u8; 20];
    let cake = cake_app();
    // Per interface: its class replies and its qdisc replies.
    type Replies = (String, Vec<Vec<u8>>, Vec<Vec<u8>>);
    let replies: Vec<Replies> = plan
        .interfaces
        .iter()
        .map(|ip| {
            let mut classes = Vec::new();
            let mut qdiscs = Vec::new();
            for op in &ip.ops {
                match op {
                    TcOp::AddClass(cl) => {
                        classes.push(msg(40, cl.classid, cl.parent, "htb", &htb_app))
                    }
                    TcOp::AddQdisc(q) | TcOp::ReplaceQdisc(q) => {
                        qdiscs.push(msg(36, q.handle, q.parent, q.kind.name(), &cake))
                    }
                    _ => {}
                }
            }
            (ip.dev.clone(), classes, qdiscs)
        })
        .collect();
    let n: usize = replies.iter().map(|r| r.1.len() + r.2.len()).sum();
    let decode = || {
        Samples::from(
            replies
                .iter()
                .map(|(dev, classes, qdiscs)| {
                    let mut r = IfaceSamples::empty(dev);
                    r.classes = classes
                        .iter()
                        .filter_map(|m| decode_class_sample_msg(m).unwrap())
                        .map(|(_, s)| s)
                        .collect();
                    r.qdiscs = qdiscs
                        .iter()
                        .map(|m| decode_qdisc_sample_msg(m).unwrap().unwrap().1)
                        .collect();
                    r
                })
                .collect::<Vec<_>>(),
        )
    };
    let mut group = c.benchmark_group(format!("stats 10000 circuits ({n} replies)"));
    group.sample_size(20);
    group.bench_function("decode", |b| b.iter(decode));
    let raw = decode();
    let mut tracker = StatsTracker::new(&index);
    let mut t = 0u64;
    group.bench_function("map and rates", |b| {
        b.iter(|| {
            t += 1;
            tracker.observe(&index, &raw, Duration::from_secs(t))
        })
    });
    group.bench_function("decode, map and rates", |b| {
        b.iter(|| {
            t += 1;
            tracker.observe(&index, &decode(), Duration::from_secs(t))
        })
    });
    group.finish();

    let mut group = c.benchmark_group("/metrics 10000 circuits");
    group.sample_size(20);
    let labels = Labels::new(&index);
    let mut out = Vec::new();
    let stats = tracker.observe(&index, &raw, Duration::from_secs(t + 1));
    group.bench_function("render, every tin busy", |b| {
        b.iter(|| {
            out.clear();
            openmetrics::render(
                &mut out,
                Some((&stats, &labels)),
                &[],
                CircuitSeries::All,
                Format::Prometheus,
            )
            .unwrap();
        })
    });
    let lines = out.iter().filter(|&&b| b == b'\n').count();
    // Best Effort only: the other tins have sent nothing.
    let mut raw_be = raw.clone();
    for q in raw_be
        .interfaces
        .iter_mut()
        .flat_map(|i| i.qdiscs.iter_mut())
    {
        if let LeafXstats::Cake(x) = &mut q.xstats {
            for (i, tin) in x.tins.iter_mut().enumerate() {
                if i != 1 {
                    tin.sent_packets = 0;
                    tin.sent_bytes = 0;
                }
            }
        }
    }
    let stats_be = StatsTracker::new(&index).observe(&index, &raw_be, Duration::ZERO);
    group.bench_function("render, Best Effort busy", |b| {
        b.iter(|| {
            out.clear();
            openmetrics::render(
                &mut out,
                Some((&stats_be, &labels)),
                &[],
                CircuitSeries::All,
                Format::Prometheus,
            )
            .unwrap();
        })
    });
    let lines_be = out.iter().filter(|&&b| b == b'\n').count();
    group.bench_function("label sets of the plan (once per reload)", |b| {
        b.iter(|| Labels::new(&index))
    });
    group.finish();
    println!("/metrics lines: every tin busy {lines}, Best Effort busy {lines_be}");

    // TCP: every circuit's entry as of poll `round` (16 buckets per
    // histogram, all growing).
    let tcp_read = |round: u32| {
        let circuits = plan
            .allocation
            .circuits
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let down = TcHandle::new(
                    plan.major(lqos_tc::allocation::Direction::Download, c.queue),
                    c.minor,
                );
                let key = lqos_bpf::layout::TcpKey {
                    classid: down.raw(),
                    tag: lqos_bpf::layout::circuit_tag(&c.id),
                };
                let mut v = lqos_bpf::layout::TcpCircuit::default();
                for h in v.rtt.iter_mut().flatten() {
                    for b in 20..36 {
                        h.buckets[b] = (round + 1) * (i % 7 + b) as u32;
                        h.count += u64::from(h.buckets[b]);
                    }
                    h.sum_ns = h.count * 30_000_000;
                }
                v.retransmits = [u64::from(round), 0];
                v.flows = u64::from(round) + 1;
                (key, v)
            })
            .collect();
        lqos_bpf::tcp::TcpRead::new(circuits, Default::default())
    };
    let mut group = c.benchmark_group("stats 10000 circuits with TCP");
    group.sample_size(10);
    let mut tracker = StatsTracker::new(&index);
    let mut round = 0u32;
    let with = |round: u32| {
        let mut s = raw.clone();
        s.tcp = Some(tcp_read(round));
        s
    };
    tracker.observe(&index, &with(0), Duration::from_secs(1));
    group.bench_function(
        "map, rates and percentiles, every circuit with new samples",
        |b| {
            b.iter_batched(
                || {
                    round += 1;
                    (with(round), Duration::from_secs(u64::from(round) + 1))
                },
                |(r, now)| tracker.observe(&index, &r, now),
                criterion::BatchSize::PerIteration,
            )
        },
    );
    let same = with(round);
    group.bench_function("map, rates and percentiles, no new samples", |b| {
        b.iter(|| {
            t += 1;
            tracker.observe(&index, &same, Duration::from_secs(u64::from(round) + t))
        })
    });
    let stats = tracker.observe(
        &index,
        &with(round + 1),
        Duration::from_secs(u64::from(round) + t + 1),
    );
    group.bench_function("/metrics render with the TCP histograms", |b| {
        b.iter(|| {
            out.clear();
            openmetrics::render(
                &mut out,
                Some((&stats, &labels)),
                &[],
                CircuitSeries::All,
                Format::Prometheus,
            )
            .unwrap();
        })
    });
    group.finish();
    let lines_tcp = out.iter().filter(|&&b| b == b'\n').count();
    println!("/metrics lines with the TCP histograms: {lines_tcp}");
}

criterion_group!(benches, bench);
criterion_main!(benches);
