//! Planner benches: plan + render for 1k / 10k / 100k generated circuits,
//! and the diff of two 10k plans (1% of circuits changed).
//!
//! 100k circuits need more leaf qdisc handles than one interface has
//! (16-bit majors), so the 100k point runs without leaf qdiscs (`none`);
//! the cake series stops at 60k.
//!
//! Times are the bench thread's CPU time ([`lqos_benches::CpuTime`]): the
//! machine is shared, and wall time would count other processes' turns.
#![allow(missing_docs)] // criterion_group! generates undocumented items

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use lqos_benches::CpuTime;
use lqos_model::{generate, GenParams, Network, Rate};
use lqos_tc::config::LeafSpec;
use lqos_tc::render::{render_combined, render_interface};
use lqos_tc::{diff, plan, PlanConfig};

fn network(circuits: usize) -> Network {
    generate(&{
        let mut p = GenParams::with_circuits(circuits);
        p.sites = 32;
        p
    })
    .network
}

fn config(sqm: &str) -> PlanConfig {
    let mut cfg = PlanConfig::bridge("ens19", "ens20", 16);
    cfg.download_capacity = Rate::from_mbps(10_000);
    cfg.upload_capacity = Rate::from_mbps(10_000);
    cfg.default_sqm = sqm.parse::<LeafSpec>().unwrap();
    cfg
}

fn plan_render(c: &mut Criterion<CpuTime>) {
    for (sqm, sizes) in [
        ("none", [1_000, 10_000, 100_000]),
        ("cake diffserv4", [1_000, 10_000, 60_000]),
    ] {
        let mut g = c.benchmark_group(format!("plan_render/{}", sqm.split(' ').next().unwrap()));
        g.sample_size(20);
        let cfg = config(sqm);
        for n in sizes {
            let net = network(n);
            g.throughput(Throughput::Elements(n as u64));
            g.bench_with_input(BenchmarkId::new("plan+render", n), &net, |b, net| {
                b.iter(|| {
                    let p = plan(net, &cfg, None).unwrap();
                    let bytes: usize = p
                        .interfaces
                        .iter()
                        .map(|i| render_interface(i, false).len())
                        .sum();
                    bytes
                })
            });
            g.bench_with_input(BenchmarkId::new("plan", n), &net, |b, net| {
                b.iter(|| plan(net, &cfg, None).unwrap())
            });
            let p = plan(&net, &cfg, None).unwrap();
            g.bench_with_input(BenchmarkId::new("render", n), &p, |b, p| {
                b.iter(|| {
                    p.interfaces
                        .iter()
                        .map(|i| render_interface(i, false).len())
                        .sum::<usize>()
                })
            });
            g.bench_with_input(BenchmarkId::new("render_combined", n), &p, |b, p| {
                b.iter(|| render_combined(p, false).len())
            });
        }
        g.finish();
    }
}

fn diff_10k(c: &mut Criterion<CpuTime>) {
    let cfg = config("cake diffserv4");
    let net = network(10_000);
    let p1 = plan(&net, &cfg, None).unwrap();
    let mut net2 = net.clone();
    let mut circuits = net2.circuits().to_vec();
    for c in circuits.iter_mut().step_by(100) {
        c.download_max = Rate::from_bps(c.download_max.bps() + 1_000_000);
    }
    net2.set_circuits(circuits);
    let p2 = plan(&net2, &cfg, Some(&p1.allocation)).unwrap();
    let (a, b) = (p1.interfaces[0].tree(), p2.interfaces[0].tree());
    let mut g = c.benchmark_group("diff");
    g.sample_size(20);
    g.bench_function("trees_10k_1pct", |bch| bch.iter(|| diff(&a, &b).len()));
    g.bench_function("plans_10k_1pct", |bch| {
        bch.iter(|| lqos_tc::diff_plans(&p1, &p2).len())
    });
    g.bench_function("trees_10k_same", |bch| bch.iter(|| diff(&a, &a).len()));
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(CpuTime);
    targets = plan_render, diff_10k
}
criterion_main!(benches);
