//! Classifier benches: what `--classifier tc` adds to planning, `tc -b`
//! rendering and netlink encoding of a 10k-circuit plan (generated network:
//! about 1.2 devices per circuit, half with an IPv6 prefix), and the no-op
//! diff with filters in the tree (must stay at 0 ops); the user-space part
//! of the eBPF classifier's cold load of 100,000 circuits.
//!
//! Times are the bench thread's CPU time ([`lqos_benches::CpuTime`]). The
//! kernel's cost of loading the filters cannot be measured on a host
//! without cls_flower; `lqos bench --classifier tc` in the lab VM does.
#![allow(missing_docs)] // criterion_group! generates undocumented items

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use lqos_apply::netlink::encode_op;
use lqos_benches::CpuTime;
use lqos_bpf::model::Entries;
use lqos_bpf::plan::{entries, CpuPolicy};
use lqos_model::config::Classifier;
use lqos_model::{generate, GenParams, Rate};
use lqos_tc::config::LeafSpec;
use lqos_tc::render::render_interface;
use lqos_tc::{diff, plan, PlanConfig, TcOp};

fn config(classifier: Classifier) -> PlanConfig {
    let mut cfg = PlanConfig::bridge("ens19", "ens20", 16);
    cfg.download_capacity = Rate::from_mbps(10_000);
    cfg.upload_capacity = Rate::from_mbps(10_000);
    cfg.default_sqm = "cake diffserv4".parse::<LeafSpec>().unwrap();
    cfg.classifier = classifier;
    cfg
}

fn classifier_10k(c: &mut Criterion<CpuTime>) {
    let n = 10_000;
    let net = generate(&{
        let mut p = GenParams::with_circuits(n);
        p.sites = 32;
        p
    })
    .network;
    let mut g = c.benchmark_group("classifier_10k");
    g.sample_size(20);
    g.throughput(Throughput::Elements(n as u64));
    for cl in [Classifier::None, Classifier::Tc] {
        let cfg = config(cl);
        let name = cl.to_string();
        g.bench_with_input(BenchmarkId::new("plan", &name), &net, |b, net| {
            b.iter(|| plan(net, &cfg, None).unwrap())
        });
        let p = plan(&net, &cfg, None).unwrap();
        let filters = p.interfaces[0]
            .ops
            .iter()
            .filter(|op| matches!(op, TcOp::ReplaceFilter(_)))
            .count();
        eprintln!(
            "classifier {name}: {} ops on {}, {filters} of them filters ({} ip map rows)",
            p.interfaces[0].ops.len(),
            p.interfaces[0].dev,
            p.ip_map.len()
        );
        g.bench_with_input(BenchmarkId::new("render", &name), &p, |b, p| {
            b.iter(|| {
                p.interfaces
                    .iter()
                    .map(|i| render_interface(i, false).len())
                    .sum::<usize>()
            })
        });
        g.bench_with_input(BenchmarkId::new("encode_netlink", &name), &p, |b, p| {
            let mut buf = Vec::with_capacity(1 << 24);
            b.iter(|| {
                buf.clear();
                for ip in &p.interfaces {
                    for (i, op) in ip.ops.iter().enumerate() {
                        encode_op(op, 3, i as u32, &mut buf).unwrap();
                    }
                }
                buf.len()
            })
        });
        let again = plan(&net, &cfg, Some(&p.allocation)).unwrap();
        let (ta, tb) = (p.interfaces[0].tree(), again.interfaces[0].tree());
        assert!(diff(&ta, &tb).is_empty(), "no-op reload must be 0 ops");
        g.bench_with_input(
            BenchmarkId::new("noop_diff", &name),
            &(ta, tb),
            |b, (ta, tb)| b.iter(|| diff(ta, tb).len()),
        );
    }
    g.finish();
}

/// The user-space part of the eBPF classifier's cold load of 100,000
/// circuits (`classifier_load`'s network, 157,587 addresses): placing the
/// plan's addresses, and the diff against empty maps (the writes grouped
/// by prefix length and map). The kernel's writes are timed by
/// `lqos-apply/examples/classifier_load.rs`.
fn bpf_cold_100k(c: &mut Criterion<CpuTime>) {
    let net = generate(&GenParams::with_circuits(100_000)).network;
    let mut cfg = PlanConfig::bridge("ens19", "ens20", 16);
    cfg.default_sqm = "none".parse::<LeafSpec>().unwrap();
    cfg.classifier = Classifier::Bpf;
    let p = plan(&net, &cfg, None).unwrap();
    let cpus = CpuPolicy::new(vec![0, 1]);
    let mut g = c.benchmark_group("bpf_cold_100k");
    g.sample_size(20);
    g.throughput(Throughput::Elements(p.ip_map.len() as u64));
    g.bench_function("place", |b| b.iter(|| entries(&p, &cpus).unwrap()));
    let want = entries(&p, &cpus).unwrap();
    let empty = Entries::default();
    g.bench_function("diff_from_empty", |b| {
        b.iter(|| lqos_bpf::model::diff(&empty, &want).writes.len())
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(CpuTime);
    targets = classifier_10k, bpf_cold_100k
}
criterion_main!(benches);
