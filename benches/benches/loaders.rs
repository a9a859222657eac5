//! Loader benches: the `lqos bench` methods 1-8 under criterion, in a
//! private network namespace with a veth pair `ens19`/`ens20` (16 TX
//! queues) and pfifo leaves (this kernel has no cake). Needs root; without
//! it every bench is skipped with a message.
//!
//! `cargo bench -p lqos-benches --bench loaders` (set `LQOS_BENCH_CIRCUITS`
//! to change the default of 2,000 circuits).

#![allow(missing_docs)] // criterion_group! generates undocumented functions

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use lqos_apply::backend::NoProgress;
use lqos_apply::netns::{netns_available, unique_name, ScratchNetns};
use lqos_bench::{BenchTree, Method, Runner};
use lqos_model::{generate, GenParams};
use lqos_tc::PlanConfig;

fn loaders(c: &mut Criterion) {
    if let Err(why) = netns_available() {
        eprintln!("skipping loader benches: they need root and network namespaces ({why})");
        return;
    }
    let circuits: usize = std::env::var("LQOS_BENCH_CIRCUITS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let ns = ScratchNetns::with_veth(
        &unique_name("lqos-bench", "criterion"),
        "ens19",
        "ens20",
        16,
    )
    .expect("scratch namespace");
    let net = generate(&{
        let mut p = GenParams::with_circuits(circuits);
        p.sites = 48;
        p
    })
    .network;
    let mut cfg = PlanConfig::bridge("ens19", "ens20", 16);
    cfg.default_sqm = "pfifo".parse().expect("pfifo");
    cfg.fq_codel_threshold = None;
    let tree = BenchTree::plan(&net, &cfg).expect("plan");
    let runner = Runner::new(ns.name());
    runner.converge(&tree.base).expect("initial load");

    let mut group = c.benchmark_group(format!("load_{circuits}_circuits"));
    group.sample_size(10);
    group.warm_up_time(Duration::from_millis(1));
    for method in Method::ALL {
        if method == Method::Teardown || method.is_process() {
            continue;
        }
        group.bench_function(format!("{}_{}", method.id(), method.name()), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let rows = runner.run(&tree, method, &NoProgress).expect("method run");
                    total += rows.iter().map(|r| r.sample.wall).sum::<Duration>();
                }
                total
            })
        });
    }
    group.finish();
    drop(ns);
}

criterion_group!(benches, loaders);
criterion_main!(benches);
