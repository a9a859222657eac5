//! Input parsing throughput: `network.json` + `ShapedDevices.csv` of 10k
//! and 100k generated circuits, parsed and validated (no root needed), and
//! `ShapedDevices.csv` alone in bytes per second (target: >= 100 MB/s).
//!
//! Times are the bench thread's CPU time ([`lqos_benches::CpuTime`]; the
//! machine is shared), throughput in decimal MB/s of CSV.

#![allow(missing_docs)] // criterion_group! generates undocumented functions

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use lqos_benches::CpuTime;
use lqos_model::write::{write_network_json, write_shaped_devices};
use lqos_model::{generate, GenParams};

fn parse(c: &mut Criterion<CpuTime>) {
    let mut group = c.benchmark_group("parse_inputs");
    group.sample_size(10);
    for circuits in [10_000usize, 100_000] {
        let g = generate(&GenParams::with_circuits(circuits));
        let json = write_network_json(&g.network);
        let csv = write_shaped_devices(&g.network);
        group.throughput(Throughput::Elements(circuits as u64));
        group.bench_with_input(
            BenchmarkId::new("csv_json_load", circuits),
            &circuits,
            |b, _| {
                b.iter(|| {
                    let loaded = lqos_model::load(
                        ("network.json", &json),
                        ("ShapedDevices.csv", csv.as_bytes()),
                    );
                    assert_eq!(loaded.network.circuits().len(), circuits);
                    loaded
                })
            },
        );
    }
    group.finish();
}

/// `ShapedDevices.csv` parse + row checks alone, reported in bytes/s.
fn parse_csv(c: &mut Criterion<CpuTime>) {
    let mut group = c.benchmark_group("parse_shaped_devices");
    group.sample_size(10);
    for circuits in [10_000usize, 60_000] {
        let g = generate(&GenParams::with_circuits(circuits));
        let csv = write_shaped_devices(&g.network);
        group.throughput(Throughput::Bytes(csv.len() as u64));
        group.bench_with_input(BenchmarkId::new("csv", circuits), &circuits, |b, _| {
            b.iter(|| {
                let sd = lqos_model::shaped_devices::parse_shaped_devices(
                    "ShapedDevices.csv",
                    csv.as_bytes(),
                )
                .expect("generated CSV parses");
                assert_eq!(sd.circuits.len(), circuits);
                sd
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(CpuTime);
    targets = parse, parse_csv
}
criterion_main!(benches);
