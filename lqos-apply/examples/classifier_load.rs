//! The classifiers' cost for one plan, same run (root): lqos's eBPF maps
//! against tc `flower` + `skbedit` filters, on a veth pair with 16 TX
//! queues in a scratch namespace (no HTB tree is needed: both steer by
//! classid, and neither checks that the class exists).
//!
//! - cold load: every address of a generated network of `--circuits`
//!   circuits into the eBPF maps (placed, then written by difference into
//!   empty maps), and the whole install `lqos apply` makes (preflight,
//!   programs verified, maps, attach to both interfaces); the same plan's
//!   clsact and flower filters (one per address per interface) through
//!   lqos's netlink loader. Flower's ops are built in `lqos_tc::plan`,
//!   before its load is timed: that step (placing's counterpart) is timed
//!   apart, as a plan with the tc classifier against one with bpf, and
//!   the ratios are given with and without it;
//! - one edit, `--edits` times: an address moved to another circuit and
//!   back; the eBPF maps through the daemon's `MapSync::sync_prefixes` (the
//!   moved prefix only), flower through one filter replaced per interface.
//!
//! `--object FILE.o` loads the cold load's maps from another build of the
//! programs (`LQOS_BPF_DEFINES=-DLQOS_MAPS_ON_USE lqos-bpf/bpf/build.sh
//! DIR`: hash maps allocated on use) for an A/B in one run; the install
//! rows use the committed object.
//!
//! Flower needs cls_flower and act_skbedit (the lab's kernel has them; the
//! host's does not: its rows are skipped).
//!
//! ```text
//! cargo run --release -p lqos-apply --example classifier_load -- [--circuits 100000] [--edits 200] [--object FILE.o]
//! ```

use std::time::{Duration, Instant};

use ipnet::IpNet;
use lqos_apply::backend::{Backend, IfaceOps, NetlinkBackend, NoProgress, Parallelism, RootDelete};
use lqos_apply::datapath::{DataPath, MapChange, PinnedDataPath};
use lqos_apply::live::KindProbe;
use lqos_apply::netns::{unique_name, ScratchNetns};
use lqos_bpf::plan::{entries, CpuPolicy};
use lqos_bpf::MapSync;
use lqos_tc::classify::Classifier;
use lqos_tc::ops::QdiscKind;
use lqos_tc::{Plan, PlanConfig, TcOp};

fn median(mut v: Vec<Duration>) -> (Duration, Duration) {
    v.sort();
    let p99 = v[(v.len() * 99 / 100).min(v.len() - 1)];
    (v[v.len() / 2], p99)
}

fn us(d: Duration) -> String {
    format!("{:.1} us", d.as_secs_f64() * 1e6)
}

/// The classifier's ops of each interface of `plan` (clsact, filters).
fn filter_ops(plan: &Plan) -> Vec<IfaceOps<'static>> {
    plan.interfaces
        .iter()
        .map(|ip| {
            let ops: Vec<TcOp> = ip
                .ops
                .iter()
                .filter(|op| match op {
                    TcOp::ReplaceFilter(_) => true,
                    TcOp::AddQdisc(q) | TcOp::ReplaceQdisc(q) => q.kind == QdiscKind::Clsact,
                    _ => false,
                })
                .cloned()
                .collect();
            IfaceOps::new(ip.dev.clone(), ops)
        })
        .collect()
}

fn main() {
    let mut circuits = 100_000usize;
    let mut edits = 200usize;
    let mut object: Option<Vec<u8>> = None;
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let v = it.next().expect("a value");
        match k.as_str() {
            "--circuits" => circuits = v.parse().unwrap(),
            "--edits" => edits = v.parse().unwrap(),
            "--object" => object = Some(std::fs::read(&v).expect("the object")),
            _ => panic!("unknown option {k}"),
        }
    }
    let g = lqos_model::generate(&lqos_model::GenParams::with_circuits(circuits));
    let mut cfg = PlanConfig::bridge("ens19", "ens20", 16);
    // No leaves: 100,000 circuits do not fit one interface's qdisc handles.
    cfg.default_sqm = "none".parse().unwrap();
    cfg.classifier = Classifier::Tc;
    let plan = lqos_tc::plan(&g.network, &cfg, None).unwrap();
    // The same network with one device's first address moved to the last
    // circuit, planned with the first plan's classids.
    let mut moved_net = g.network.clone();
    let mut cs = moved_net.circuits().to_vec();
    let moved: IpNet = IpNet::V4(cs[0].devices[0].ipv4.remove(0));
    let last = cs.len() - 1;
    cs[last].devices[0]
        .ipv4
        .push(moved.to_string().parse().unwrap());
    moved_net.set_circuits(cs);
    let other = lqos_tc::plan(&moved_net, &cfg, Some(&plan.allocation)).unwrap();
    let mut bpf_plan = plan.clone();
    bpf_plan.config.classifier = Classifier::Bpf;
    let mut bpf_other = other.clone();
    bpf_other.config.classifier = Classifier::Bpf;

    let ns = ScratchNetns::with_veth(&unique_name("lqos-clsload", "x"), "ens19", "ens20", 16)
        .expect("scratch namespace");
    println!(
        "# {} circuits, {} addresses (both directions in one entry / one filter per interface), {} CPUs",
        circuits,
        plan.ip_map.len(),
        lqos_bpf::sys::online_cpus().unwrap().len()
    );

    // eBPF: the maps, cold, then the whole install.
    let bpffs = lqos_bpf::sys::PrivateBpffs::new("clsload").expect("private bpffs");
    let cpus = CpuPolicy::online().unwrap();
    let cold;
    let writes_only;
    {
        let pins = bpffs.path().join("maps-only");
        let t = Instant::now();
        let _dp = match &object {
            Some(o) => lqos_bpf::loader::DataPath::load_object(&pins, o),
            None => lqos_bpf::loader::DataPath::load(&pins),
        }
        .unwrap();
        println!(
            "bpf: programs loaded and maps created ({}) in {:.0} ms",
            if object.is_some() {
                "--object"
            } else {
                "committed object"
            },
            t.elapsed().as_secs_f64() * 1e3
        );
        let t = Instant::now();
        let want = entries(&bpf_plan, &cpus).unwrap();
        let placed = t.elapsed();
        let mut sync = MapSync::open(&pins).unwrap();
        // The diff alone, once more (not counted in the cold load): with
        // the placing, what of the cold load is user space.
        let t = Instant::now();
        let d = sync.diff_to(&want);
        let diffed = t.elapsed();
        drop(d);
        let t = Instant::now();
        let n = sync.sync_owned(want).unwrap();
        let wrote = t.elapsed();
        cold = placed + wrote;
        writes_only = wrote;
        println!(
            "bpf: {} entries placed in {:.0} ms, written to empty maps in {:.0} ms: {:.0} ms in all",
            n.written,
            placed.as_secs_f64() * 1e3,
            wrote.as_secs_f64() * 1e3,
            (placed + wrote).as_secs_f64() * 1e3
        );
        println!(
            "bpf: of the writing, the diff alone takes {:.0} ms (timed apart), the rest {:.0} ms",
            diffed.as_secs_f64() * 1e3,
            wrote.saturating_sub(diffed).as_secs_f64() * 1e3
        );
        let mem = sync.maps().memlock().unwrap();
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        println!(
            "bpf: kernel memory after the cold load {:.1} MiB ({})",
            mib(mem.iter().map(|(_, b)| b).sum()),
            mem.iter()
                .filter(|(_, b)| *b >= 1 << 20)
                .map(|(n, b)| format!("{n} {:.1}", mib(*b)))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let dp = PinnedDataPath::at(bpffs.path().join("lqos"), Some(ns.name()));
    let t = Instant::now();
    dp.preflight(&bpf_plan).unwrap();
    let pre = t.elapsed();
    let t = Instant::now();
    let done = dp.install(&bpf_plan).unwrap();
    println!(
        "bpf: the install lqos apply makes: preflight {:.0} ms, then programs, {} entries and attach {:.0} ms",
        pre.as_secs_f64() * 1e3,
        done.entries.written,
        t.elapsed().as_secs_f64() * 1e3
    );
    let mut sync = MapSync::open(dp.pin_dir()).unwrap();
    let nets = [moved];
    let mut times = Vec::with_capacity(edits);
    for i in 0..edits {
        let p = if i % 2 == 0 { &bpf_other } else { &bpf_plan };
        let t = Instant::now();
        let n = sync.sync_prefixes(&p.ip_map, &nets, &cpus).unwrap();
        times.push(t.elapsed());
        assert_eq!(n.written, 1);
    }
    let (bpf_med, bpf_p99) = median(times);
    println!(
        "bpf: one edit (the moved /32 through MapSync::sync_prefixes): median {}, p99 {}",
        us(bpf_med),
        us(bpf_p99)
    );
    drop(sync);
    // The same edits as the daemon makes them: the data path's step
    // before the tree load and the one after it.
    let mut times = Vec::with_capacity(edits);
    for i in 0..edits {
        let p = if i % 2 == 0 { &bpf_other } else { &bpf_plan };
        let change = MapChange::Prefixes {
            ip_map: &p.ip_map,
            nets: &nets,
        };
        let t = Instant::now();
        dp.before_load(change).unwrap();
        let n = dp.after_load(change).unwrap();
        times.push(t.elapsed());
        assert_eq!(n.written, 1);
    }
    let (med, p99) = median(times);
    println!(
        "bpf: one edit as the daemon makes it (DataPath::before_load + after_load): median {}, p99 {}",
        us(med),
        us(p99)
    );
    dp.remove().unwrap();

    // flower's counterpart of placing: its filter ops are built in
    // lqos_tc::plan (the plans differ only in them), not in the load timed
    // below. Median of 3 each, alternated.
    let mut bpf_cfg = cfg.clone();
    bpf_cfg.classifier = Classifier::Bpf;
    let (mut with_filters, mut without) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        for (c, times) in [(&cfg, &mut with_filters), (&bpf_cfg, &mut without)] {
            let t = Instant::now();
            let p = lqos_tc::plan(&g.network, c, None).unwrap();
            times.push(t.elapsed());
            drop(p);
        }
    }
    let filter_planning = median(with_filters).0.saturating_sub(median(without).0);
    println!(
        "flower: building its filter ops in the plan: {:.0} ms (plan with classifier tc minus bpf, medians of 3)",
        filter_planning.as_secs_f64() * 1e3
    );

    // flower.
    match KindProbe::new().probe_classifier() {
        Ok(Ok(())) => {}
        other => {
            println!("flower: not measured: this kernel cannot run it ({other:?})");
            return;
        }
    }
    let backend = NetlinkBackend::new(Some(ns.name().to_string()), Parallelism::Serial);
    let ops = filter_ops(&plan);
    let total: usize = ops.iter().map(|o| o.len()).sum();
    let t = Instant::now();
    let r = backend.load(&ops, RootDelete::None, &NoProgress);
    let flower_load = t.elapsed();
    assert!(r.is_ok(), "{:?}", r.into_result().err());
    println!(
        "flower: {total} ops (clsact and one filter per address per interface) in {:.0} ms",
        flower_load.as_secs_f64() * 1e3
    );
    let diffs: [[Vec<IfaceOps<'static>>; 2]; 1] = [[
        [0, 1]
            .iter()
            .map(|&i| {
                IfaceOps::new(
                    plan.interfaces[i].dev.clone(),
                    lqos_tc::diff(&plan.interfaces[i].tree(), &other.interfaces[i].tree()),
                )
            })
            .collect(),
        [0, 1]
            .iter()
            .map(|&i| {
                IfaceOps::new(
                    plan.interfaces[i].dev.clone(),
                    lqos_tc::diff(&other.interfaces[i].tree(), &plan.interfaces[i].tree()),
                )
            })
            .collect(),
    ]];
    let ops_per_edit: usize = diffs[0][0].iter().map(|o| o.len()).sum();
    let mut times = Vec::with_capacity(edits);
    for i in 0..edits {
        let d = &diffs[0][i % 2];
        let t = Instant::now();
        let r = backend.load(d, RootDelete::None, &NoProgress);
        times.push(t.elapsed());
        assert!(r.is_ok());
    }
    let (fl_med, fl_p99) = median(times);
    println!(
        "flower: one edit ({ops_per_edit} filters replaced through netlink): median {}, p99 {}",
        us(fl_med),
        us(fl_p99)
    );
    println!(
        "flower / bpf: cold load {:.0}x (placing + writing against loading the planned filters), \
         {:.0}x (each from the plan's IP map: placing + writing against building + loading the filters), \
         {:.0}x (the map writes against the filters' load); one edit {:.0}x",
        flower_load.as_secs_f64() / cold.as_secs_f64(),
        (flower_load + filter_planning).as_secs_f64() / cold.as_secs_f64(),
        flower_load.as_secs_f64() / writes_only.as_secs_f64(),
        fl_med.as_secs_f64() / bpf_med.as_secs_f64()
    );
}
