//! cake and fq_codel leaves against a real kernel that has them (the
//! stock-kernel lab: `cargo xtask lab test`): loaded by both backends, read
//! back over netlink into the tree model, verified clean, changed in place,
//! a no-op reload sends nothing, and drift made by hand with `tc` is found.
//!
//! Each scenario runs on a veth pair in a scratch namespace and, when
//! `LQOS_LIVE_IFACES=DOWN,UP` names existing interfaces with 16 TX queues
//! (the lab's virtio NICs ens19,ens20), on those too; their root qdiscs are
//! deleted afterwards (back to the kernel's default).
//!
//! Skips with a message when the kernel has no sch_cake or fq_codel, unless
//! `LQOS_REQUIRE_CAKE=1`. `LQOS_LIVE_LEAF_CIRCUITS` sizes the plans
//! (default 120 circuits: ~260 cake instances, ~280 MiB of kernel memory).

mod common;

use common::{fixture, generated, QUEUES};
use lqos_apply::backend::{Backend, NetlinkBackend, NoProgress, Parallelism, TcBatch, TcMode};
use lqos_apply::live::{read_live, LiveSource, NetlinkLive};
use lqos_apply::load::LoadKind;
use lqos_apply::netns::ScratchNetns;
use lqos_apply::state::NetnsState;
use lqos_apply::verify::Drift;
use lqos_apply::{verify_plan, ApplyOptions, Session};
use lqos_model::{Rate, SqmOverride};
use lqos_tc::config::Interfaces;
use lqos_tc::ops::{FqCodelParams, QdiscKind};
use lqos_tc::options::{CakeDiffserv, CakeFlowMode};
use lqos_tc::{Plan, PlanConfig, TcHandle, TcOp};

/// Where a scenario runs: a scratch namespace with veths, or existing
/// interfaces in the current namespace.
struct Env {
    netns: Option<ScratchNetns>,
    devs: [String; 2],
}

impl Env {
    fn ns_name(&self) -> Option<&str> {
        self.netns.as_ref().map(|n| n.name())
    }

    /// `tc ARGS` where the interfaces are.
    fn tc(&self, args: &[&str]) {
        let out: Result<(), String> = match &self.netns {
            Some(ns) => ns.tc(args).map(|_| ()).map_err(|e| e.to_string()),
            None => std::process::Command::new("tc")
                .args(args)
                .output()
                .map_err(|e| e.to_string())
                .and_then(|o| {
                    if o.status.success() {
                        Ok(())
                    } else {
                        Err(String::from_utf8_lossy(&o.stderr).into_owned())
                    }
                }),
        };
        out.unwrap_or_else(|e| panic!("tc {}: {e}", args.join(" ")));
    }

    fn live(&self) -> NetlinkLive {
        NetlinkLive::new(self.ns_name().map(str::to_string))
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        if self.netns.is_none() {
            for d in &self.devs {
                let _ = std::process::Command::new("tc")
                    .args(["qdisc", "del", "dev", d, "root"])
                    .output();
            }
        }
    }
}

/// The veth fixture, or `None` (skip) without netns or cake/fq_codel.
fn veth_env(test: &str) -> Option<Env> {
    let ns = fixture(test)?;
    let env = Env {
        netns: Some(ns),
        devs: [common::DEVS[0].into(), common::DEVS[1].into()],
    };
    leaves_available(&env, test).then_some(env)
}

/// `LQOS_LIVE_IFACES=A,B` in the current namespace, or `None` (skip).
fn iface_env(test: &str) -> Option<Env> {
    let Ok(list) = std::env::var("LQOS_LIVE_IFACES") else {
        eprintln!("skipping {test}: set LQOS_LIVE_IFACES=DOWN,UP to run on existing interfaces");
        return None;
    };
    let devs: Vec<&str> = list.split(',').map(str::trim).collect();
    let [down, up] = devs[..] else {
        panic!("LQOS_LIVE_IFACES={list:?}: expected two comma-separated interfaces");
    };
    if !lqos_apply::netns::require_netns(test) {
        return None;
    }
    let env = Env {
        netns: None,
        devs: [down.into(), up.into()],
    };
    let live = env.live();
    for d in &env.devs {
        let link = live
            .link(d)
            .unwrap()
            .unwrap_or_else(|| panic!("LQOS_LIVE_IFACES: no interface {d}"));
        assert!(
            link.num_tx_queues >= QUEUES,
            "{d} has {} TX queues, the test needs {QUEUES}",
            link.num_tx_queues
        );
    }
    leaves_available(&env, test).then_some(env)
}

/// Does the kernel have sch_cake and fq_codel? Panics when it has not but
/// `LQOS_REQUIRE_CAKE=1`.
fn leaves_available(env: &Env, test: &str) -> bool {
    let kinds = [
        QdiscKind::Cake(Default::default()),
        QdiscKind::FqCodel(Default::default()),
    ];
    let probe = env.live().probe_qdiscs(&kinds).expect("probe");
    let missing: Vec<String> = kinds
        .iter()
        .zip(&probe)
        .filter_map(|(k, r)| {
            r.as_ref()
                .err()
                .map(|e| format!("{} ({})", k.name(), e.message))
        })
        .collect();
    if missing.is_empty() {
        return true;
    }
    if std::env::var("LQOS_REQUIRE_CAKE").as_deref() == Ok("1") {
        panic!(
            "{test}: LQOS_REQUIRE_CAKE=1 but this kernel lacks {}",
            missing.join(", ")
        );
    }
    eprintln!(
        "skipping {test}: this kernel lacks {} (run it in the lab: cargo xtask lab test)",
        missing.join(", ")
    );
    false
}

fn circuits() -> usize {
    std::env::var("LQOS_LIVE_LEAF_CIRCUITS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(120)
}

/// A generated network whose first circuits carry LibreQoS `sqm` overrides.
fn network_with(
    g: &lqos_model::Generated,
    overrides: &[(&str, &str)],
    rate_change: bool,
) -> lqos_model::Network {
    let mut net = g.network.clone();
    let mut cs = net.circuits().to_vec();
    for (c, (down, up)) in cs.iter_mut().zip(overrides) {
        c.sqm = Some(SqmOverride::new(*down, *up));
    }
    if rate_change {
        // Every 10th circuit (not the overridden ones) to a new ceiling.
        for c in cs.iter_mut().skip(overrides.len()).step_by(10) {
            c.download_max = Rate::from_bps(c.download_max.bps() + 3_500_000);
            c.upload_max = Rate::from_bps(c.upload_max.bps() + 1_500_000);
        }
    }
    net.set_circuits(cs);
    net
}

fn plan_of(
    env: &Env,
    g: &lqos_model::Generated,
    net: &lqos_model::Network,
    sqm: &str,
    prev: Option<&lqos_tc::Allocation>,
) -> Plan {
    let mut cfg = PlanConfig::from_lqos_config(&g.config, QUEUES).expect("generated config");
    cfg.interfaces = Interfaces::Bridge {
        download: env.devs[0].clone(),
        upload: env.devs[1].clone(),
    };
    cfg.default_sqm = sqm.parse().expect("sqm spec");
    lqos_tc::plan(net, &cfg, prev).expect("plan")
}

/// Circuit `idx`'s class (the same on both interfaces).
fn classid_of(plan: &Plan, idx: usize) -> TcHandle {
    let c = &plan.allocation.circuits[idx];
    TcHandle::new(c.queue as u16 + 1, c.minor)
}

/// The planned leaf of circuit `idx` on interface `iface` (0 = download).
fn leaf_of(plan: &Plan, iface: usize, idx: usize) -> (TcHandle, QdiscKind) {
    let tree = plan.interfaces[iface].tree();
    let classid = classid_of(plan, idx);
    let q = tree
        .qdiscs
        .values()
        .find(|q| q.parent == classid)
        .unwrap_or_else(|| panic!("circuit {idx} has no leaf"));
    (q.handle, q.kind.clone())
}

/// Read back: every planned leaf is in the kernel with its kind, and the
/// decoded options satisfy the plan's.
fn assert_leaves_read_back(env: &Env, plan: &Plan) -> (usize, usize) {
    let live = env.live();
    let devs: Vec<&str> = env.devs.iter().map(String::as_str).collect();
    let trees = read_live(&live, &devs).unwrap();
    let (mut cake, mut fq) = (0, 0);
    for ip in &plan.interfaces {
        let got = &trees[&ip.dev];
        for q in ip.tree().qdiscs.values() {
            let l = got
                .qdiscs
                .get(&q.handle)
                .unwrap_or_else(|| panic!("{}: leaf {} not read back", ip.dev, q.handle));
            assert_eq!(l.kind.name(), q.kind.name(), "{}: {}", ip.dev, q.handle);
            assert!(
                lqos_tc::rules::kind_satisfies(&l.kind, &q.kind),
                "{}: {} read back as {:?}, planned {:?}",
                ip.dev,
                q.handle,
                l.kind,
                q.kind
            );
            match l.kind {
                QdiscKind::Cake(_) => cake += 1,
                QdiscKind::FqCodel(_) => fq += 1,
                _ => {}
            }
        }
    }
    (cake, fq)
}

/// The scenario: `sqm` as default plus `overrides` on the first circuits;
/// `changed` overrides for the in-place change step.
fn scenario(env: &Env, sqm: &str, overrides: &[(&str, &str)], changed: &[(&str, &str)]) {
    let g = generated(circuits(), 11);
    let net1 = network_with(&g, overrides, false);
    let p1 = plan_of(env, &g, &net1, sqm, None);
    let net2 = network_with(&g, changed, true);
    let p2 = plan_of(env, &g, &net2, sqm, Some(&p1.allocation));
    let live = env.live();
    let dir = tempfile::tempdir().unwrap();
    let state = NetnsState::new(dir.path(), env.ns_name());
    let ns = env.ns_name().map(str::to_string);
    let backends: [Box<dyn Backend>; 2] = [
        Box::new(NetlinkBackend::new(ns.clone(), Parallelism::Serial)),
        Box::new(TcBatch::new(ns.clone(), TcMode::Parallel)),
    ];
    let verify = ApplyOptions::default().verify_after(true);
    for b in &backends {
        let name = b.describe();
        let s = Session {
            state: &state,
            live: &live,
            backend: b.as_ref(),
        };
        // Full load (the first backend finds nothing, the second p2's tree).
        let r = s
            .apply(
                &p1,
                ApplyOptions::default().full(true).verify_after(true),
                &NoProgress,
            )
            .unwrap();
        let load = r.load.unwrap();
        assert!(load.is_ok(), "{name}: {:?}", load.first_error());
        let v = r.verify.unwrap();
        assert!(v.is_clean(), "{name}: full load not clean:\n{v}");
        let (cake, fq) = assert_leaves_read_back(env, &p1);
        eprintln!("{name}: loaded {cake} cake and {fq} fq_codel leaves");
        let planned = |kind: &str| {
            p1.interfaces
                .iter()
                .flat_map(|i| i.tree().qdiscs.into_values())
                .filter(|q| q.kind.name() == kind)
                .count()
        };
        assert_eq!((cake, fq), (planned("cake"), planned("fq_codel")));

        // No-op reload: nothing sent.
        let r = s.apply(&p1, ApplyOptions::default(), &NoProgress).unwrap();
        assert_eq!(r.ops_total(), 0, "{name}: no-op reload sent ops");
        assert_eq!(r.load.unwrap().ops_applied(), 0);

        // In place: rates (class change) and leaf options (qdisc replace).
        let r = s.apply(&p2, verify, &NoProgress).unwrap();
        for c in &r.changes {
            assert_eq!(c.kind, LoadKind::Incremental, "{name} {}", c.stream.dev);
            assert!(
                c.stream
                    .ops
                    .iter()
                    .any(|op| matches!(op, TcOp::ChangeClass(_))),
                "{name} {}: no class change",
                c.stream.dev
            );
            assert!(
                !c.stream
                    .ops
                    .iter()
                    .any(|op| matches!(op, TcOp::DeleteClass { .. })),
                "{name} {}: a class was deleted",
                c.stream.dev
            );
        }
        let replaced: usize = r
            .changes
            .iter()
            .map(|c| {
                c.stream
                    .ops
                    .iter()
                    .filter(|op| matches!(op, TcOp::ReplaceQdisc(_)))
                    .count()
            })
            .sum();
        assert!(replaced > 0, "{name}: option change sent no qdisc replace");
        let load = r.load.unwrap();
        assert!(load.is_ok(), "{name}: {:?}", load.first_error());
        let v = r.verify.unwrap();
        assert!(v.is_clean(), "{name}: after in-place change:\n{v}");
        assert_leaves_read_back(env, &p2);
        let r = s.apply(&p2, ApplyOptions::default(), &NoProgress).unwrap();
        assert_eq!(r.ops_total(), 0, "{name}: no-op reload after change");

        // Back to p1 for the drift check.
        let r = s.apply(&p1, verify, &NoProgress).unwrap();
        assert!(r.load.unwrap().is_ok(), "{name}: back to p1");
        let v = r.verify.unwrap();
        assert!(v.is_clean(), "{name}: back to p1:\n{v}");
        drift_is_detected(env, &p1, &live, sqm);
        // The next apply repairs it (kind: delete + add; options: replace).
        let r = s.apply(&p1, verify, &NoProgress).unwrap();
        assert!(
            r.ops_total() >= 2,
            "{name}: drift repair sent {} ops",
            r.ops_total()
        );
        assert!(r.load.unwrap().is_ok(), "{name}: drift repair");
        let v = r.verify.unwrap();
        assert!(v.is_clean(), "{name}: after drift repair:\n{v}");
    }
}

/// A leaf replaced by hand with another kind, and a cake/fq_codel leaf's
/// option changed by hand, are both reported by verify.
fn drift_is_detected(env: &Env, plan: &Plan, live: &NetlinkLive, sqm: &str) {
    let idx = plan.allocation.circuits.len() - 1;
    let (h0, k0) = leaf_of(plan, 0, idx);
    let (h1, k1) = leaf_of(plan, 1, idx);
    let parent0 = classid_of(plan, idx).to_string();
    let (h0s, h1s) = (h0.to_string(), h1.to_string());
    env.tc(&[
        "qdisc",
        "del",
        "dev",
        &env.devs[0],
        "parent",
        &parent0,
        "handle",
        &h0s,
    ]);
    env.tc(&[
        "qdisc",
        "add",
        "dev",
        &env.devs[0],
        "parent",
        &parent0,
        "handle",
        &h0s,
        "pfifo",
    ]);
    let opt_change: &[&str] = match &k1 {
        QdiscKind::Cake(_) => &["cake", "besteffort", "rtt", "20ms"],
        QdiscKind::FqCodel(_) => &["fq_codel", "limit", "777"],
        other => panic!("unexpected leaf {other:?} for {sqm}"),
    };
    let mut args = vec!["qdisc", "change", "dev", &env.devs[1], "handle", &h1s];
    args.extend_from_slice(opt_change);
    env.tc(&args);
    let v = verify_plan(plan, live).unwrap();
    assert!(!v.is_clean(), "hand-made drift not found");
    let d0 = &v.interfaces[0].drift;
    assert!(
        d0.iter().any(
            |d| matches!(d, Drift::QdiscDiffers { handle, field, planned, live }
            if *handle == h0 && field == "kind" && planned == k0.name() && live == "pfifo")
        ),
        "{}: kind drift not reported: {d0:?}",
        env.devs[0]
    );
    let d1 = &v.interfaces[1].drift;
    let field = if matches!(k1, QdiscKind::Cake(_)) {
        "diffserv"
    } else {
        "limit"
    };
    assert!(
        d1.iter()
            .any(|d| matches!(d, Drift::QdiscDiffers { handle, field: f, .. }
            if *handle == h1 && f.contains(field))),
        "{}: option drift not reported: {d1:?}",
        env.devs[1]
    );
    let only_ours = |h: TcHandle, ds: &[Drift]| {
        ds.iter()
            .all(|d| matches!(d, Drift::QdiscDiffers { handle, .. } if *handle == h))
    };
    assert!(
        only_ours(h0, d0) && only_ours(h1, d1),
        "only the hand-made changes: {v}"
    );
}

/// Default `cake diffserv4`, a fq_codel circuit, a cake circuit with its
/// own options, a down/up pair with `none`, a plain `cake` circuit.
const CAKE_OVERRIDES: &[(&str, &str)] = &[
    ("fq_codel", "fq_codel"),
    ("cake besteffort rtt 50ms", "cake diffserv8 nat"),
    ("none", "fq_codel"),
    ("cake", "cake"),
];
/// The same circuits after an option change in place.
const CAKE_OVERRIDES_CHANGED: &[(&str, &str)] = &[
    ("fq_codel", "fq_codel"),
    ("cake besteffort rtt 80ms", "cake diffserv4 nat wash"),
    ("none", "fq_codel"),
    ("cake", "cake"),
];
/// Default fq_codel with a tuned fq_codel circuit and a cake circuit.
const FQ_OVERRIDES: &[(&str, &str)] = &[
    ("fq_codel limit 2000 target 3ms", "fq_codel noecn"),
    ("cake diffserv4", "cake diffserv4"),
];
const FQ_OVERRIDES_CHANGED: &[(&str, &str)] = &[
    ("fq_codel limit 3000 target 4ms", "fq_codel ecn"),
    ("cake diffserv4", "cake diffserv4"),
];

/// The decoded options of specific leaves are what the overrides say.
fn assert_override_options(env: &Env) {
    let g = generated(circuits(), 11);
    let net = network_with(&g, CAKE_OVERRIDES, false);
    let plan = plan_of(env, &g, &net, "cake diffserv4", None);
    let live = env.live();
    let trees = read_live(&live, &[&env.devs[0], &env.devs[1]]).unwrap();
    let kind = |iface: usize, idx: usize| {
        let (h, _) = leaf_of(&plan, iface, idx);
        trees[&env.devs[iface]].qdiscs[&h].kind.clone()
    };
    let QdiscKind::Cake(c) = kind(0, 1) else {
        panic!("circuit 1 download is not cake")
    };
    assert_eq!(c.diffserv, Some(CakeDiffserv::Besteffort));
    assert_eq!(c.rtt_us, Some(50_000));
    let QdiscKind::Cake(c) = kind(1, 1) else {
        panic!("circuit 1 upload is not cake")
    };
    assert_eq!(c.diffserv, Some(CakeDiffserv::Diffserv8));
    assert_eq!(c.nat, Some(true));
    assert_eq!(c.flow_mode, Some(CakeFlowMode::TripleIsolate));
    let QdiscKind::Cake(c) = kind(0, 5) else {
        panic!("a default circuit is not cake")
    };
    assert_eq!(c.diffserv, Some(CakeDiffserv::Diffserv4));
    assert!(matches!(kind(0, 0), QdiscKind::FqCodel(_)));
    let (h, _) = {
        let tree = plan.interfaces[0].tree();
        let classid = classid_of(&plan, 2);
        assert!(
            !tree.qdiscs.values().any(|q| q.parent == classid),
            "sqm none: no leaf planned"
        );
        (classid, ())
    };
    assert!(
        !trees[&env.devs[0]]
            .qdiscs
            .values()
            .any(|q| q.parent == h && q.handle != TcHandle::UNSPEC),
        "sqm none: no leaf loaded"
    );
    let QdiscKind::FqCodel(FqCodelParams { limit, .. }) = kind(1, 2) else {
        panic!("circuit 2 upload is not fq_codel")
    };
    assert_eq!(limit, Some(10_240), "fq_codel's default limit read back");
}

fn cake_scenario(env: &Env) {
    scenario(
        env,
        "cake diffserv4",
        CAKE_OVERRIDES,
        CAKE_OVERRIDES_CHANGED,
    );
    // The loop leaves p1 loaded: check named options too.
    assert_override_options(env);
}

fn fq_codel_scenario(env: &Env) {
    scenario(env, "fq_codel", FQ_OVERRIDES, FQ_OVERRIDES_CHANGED);
}

#[test]
#[ignore = "needs sch_cake and sch_fq_codel, which many kernels lack: runs in the lab (cargo xtask lab test); cargo test -- --include-ignored where the kernel has them"]
fn cake_diffserv4_leaves_with_overrides_on_veth() {
    if let Some(env) = veth_env("cake-leaves") {
        cake_scenario(&env);
    }
}

#[test]
#[ignore = "needs sch_cake and sch_fq_codel, which many kernels lack: runs in the lab (cargo xtask lab test); cargo test -- --include-ignored where the kernel has them"]
fn fq_codel_leaves_on_veth() {
    if let Some(env) = veth_env("fq-codel-leaves") {
        fq_codel_scenario(&env);
    }
}

#[test]
#[ignore = "needs LQOS_LIVE_IFACES=DOWN,UP (existing interfaces with cake and fq_codel): runs in the lab on its virtio NICs (cargo xtask lab test)"]
fn cake_and_fq_codel_leaves_on_existing_interfaces() {
    if let Some(env) = iface_env("leaves-on-ifaces") {
        cake_scenario(&env);
        fq_codel_scenario(&env);
    }
}

/// A full load of more cake leaves than the machine's memory holds is
/// refused by the memory preflight before anything changes (without it the
/// kernel would run out of memory mid-load), and `skip_memory_check` is
/// what it says. The plan is sized from this machine's `MemAvailable`: a
/// quarter more cake leaves than the check allows.
#[test]
#[ignore = "needs sch_cake and sch_fq_codel, which many kernels lack: runs in the lab (cargo xtask lab test); cargo test -- --include-ignored where the kernel has them"]
fn a_cake_load_that_does_not_fit_in_memory_is_refused() {
    let Some(env) = veth_env("memory refusal") else {
        return;
    };
    let mem = lqos_apply::memory::MemInfo::read().expect("/proc/meminfo");
    let per_circuit = 2 * lqos_tc::memory::CAKE_BYTES;
    let n = (mem.usable() / per_circuit) as usize * 5 / 4 + 16;
    let g = generated(n, 3);
    let p = plan_of(&env, &g, &g.network, "cake diffserv4", None);
    let live = env.live();
    let dir = tempfile::tempdir().unwrap();
    let state = NetnsState::new(dir.path(), env.ns_name());
    let backend = NetlinkBackend::new(env.ns_name().map(str::to_string), Parallelism::Serial);
    let s = Session {
        state: &state,
        live: &live,
        backend: &backend,
    };
    let e = s
        .apply(&p, ApplyOptions::default(), &NoProgress)
        .expect_err("refused");
    let msg = e.to_string();
    assert!(
        // The facts; the CLI adds what helps (`--lazy-leaves`, ...).
        matches!(e, lqos_apply::error::ApplyError::NotEnoughMemory { .. })
            && msg.contains("Nothing was changed"),
        "{msg}"
    );
    eprintln!("{n} circuits: {msg}");
    // Nothing was loaded: no HTB on either interface, no saved plan.
    for d in &env.devs {
        let t = live.dump(d).unwrap();
        assert!(
            t.qdiscs
                .values()
                .all(|q| !matches!(q.kind, QdiscKind::Htb(_) | QdiscKind::Cake(_))),
            "{d}: {t:?}"
        );
    }
    assert!(lqos_apply::saved::load_saved_plan(&state)
        .unwrap()
        .is_none());
}
