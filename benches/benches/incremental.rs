//! One edited `ShapedDevices.csv` row (a circuit's download max), from
//! the new file's bytes to the ops to send, as `lqos watch` does it:
//!
//! - `incremental`: find and re-read the changed row
//!   ([`DevicesIndex::edit`] + commit), re-plan its circuit in place
//!   ([`replan_circuits`]), diff its ops against the known kernel model
//!   ([`known_diff`]);
//! - `full`: read and validate both files, plan everything (previous
//!   allocation kept), diff the whole trees (the path before, and the one
//!   any other edit takes).
//!
//! Every iteration toggles the row between two values, so the state stays
//! valid. No root needed.

#![allow(missing_docs)] // criterion_group! generates undocumented functions

use std::collections::BTreeMap;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use lqos_model::devices_index::{DevicesEdit, DevicesIndex};
use lqos_model::write::{write_network_json, write_shaped_devices};
use lqos_model::{generate, load, GenParams, Rate};
use lqos_tc::config::LeafSpec;
use lqos_tc::replan::{known_diff, PlanIndex, Replan};
use lqos_tc::tree::TcTree;
use lqos_tc::{plan, PlanConfig};

fn edit_one_row(c: &mut Criterion) {
    let mut group = c.benchmark_group("edit_one_row");
    group.sample_size(10);
    for circuits in [10_000usize, 100_000] {
        let g = generate(&GenParams::with_circuits(circuits));
        let json = write_network_json(&g.network);
        let csv_a = write_shaped_devices(&g.network).into_bytes();
        let mut edited = g.network.clone();
        let mut cs = edited.circuits().to_vec();
        let k = circuits / 2;
        cs[k].download_max = Rate::from_bps(cs[k].download_max.bps() + 1_000_000);
        edited.set_circuits(cs);
        let csv_b = write_shaped_devices(&edited).into_bytes();
        let mut cfg = PlanConfig::bridge("ens19", "ens20", 16);
        cfg.default_sqm = LeafSpec::None;
        let loaded = load(
            ("network.json", &json),
            ("ShapedDevices.csv", csv_a.as_slice()),
        );
        let plan0 = plan(&loaded.network, &cfg, None).unwrap();
        let model: BTreeMap<String, TcTree> = plan0
            .interfaces
            .iter()
            .map(|ip| (ip.dev.clone(), ip.tree()))
            .collect();

        // Incremental: the daemon's state, toggled A <-> B.
        let mut net = loaded.network.clone();
        let mut index =
            DevicesIndex::new("ShapedDevices.csv", csv_a.clone(), &loaded.network).unwrap();
        let mut p = plan0.clone();
        let pindex = PlanIndex::new(&p);
        let mut spare = csv_b.clone();
        group.bench_with_input(
            BenchmarkId::new("incremental", circuits),
            &circuits,
            |b, _| {
                b.iter(|| {
                    // `spare` holds the other version's bytes (commit hands
                    // back the replaced ones).
                    let DevicesEdit::Patch(patch) = index.edit(&net, &spare) else {
                        panic!("not a patch")
                    };
                    let Replan::Patched(at) =
                        lqos_tc::replan::replan_circuits(&mut p, &pindex, &net, &patch.circuits)
                    else {
                        panic!("not patched")
                    };
                    spare = index.commit(&mut net, patch, std::mem::take(&mut spare));
                    let mut n = 0;
                    for (i, ip) in p.interfaces.iter().enumerate() {
                        let ops = at.iter().filter(|(k, _)| *k == i).map(|&(_, o)| &ip.ops[o]);
                        n += known_diff(&model[&ip.dev], ops).unwrap().len();
                    }
                    n
                })
            },
        );
        // Full: read, validate, plan, diff everything.
        let mut to_b = true;
        group.bench_with_input(BenchmarkId::new("full", circuits), &circuits, |b, _| {
            b.iter(|| {
                let new = if to_b { &csv_b } else { &csv_a };
                to_b = !to_b;
                let l = load(
                    ("network.json", &json),
                    ("ShapedDevices.csv", new.as_slice()),
                );
                assert!(!l.report.has_errors());
                let p = plan(&l.network, &cfg, Some(&plan0.allocation)).unwrap();
                p.interfaces
                    .iter()
                    .map(|ip| lqos_tc::diff(&model[&ip.dev], &ip.tree()).len())
                    .sum::<usize>()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, edit_one_row);
criterion_main!(benches);
