//! Full stack against a real kernel: generated plans of 3000 circuits,
//! every backend and mode, readback, incremental reloads, failures, lock.

mod common;

use std::collections::BTreeMap;

use common::{fixture, generated, mutate, plan_for, tc_classes, DEVS};
use lqos_apply::backend::{Backend, IfaceOps, NoProgress};
use lqos_apply::backend::{NetlinkBackend, Parallelism, RootDelete, TcBatch, TcMode};
use lqos_apply::error::ApplyError;
use lqos_apply::live::NetlinkLive;
use lqos_apply::load::LoadKind;
use lqos_apply::state::{NetnsState, StateDir};
use lqos_apply::Session;
use lqos_apply::{verify_plan, ApplyOptions};
use lqos_tc::TcOp;

const CIRCUITS: usize = 3000;

/// `tc class show` agrees with the plan: same HTB class count, and the
/// rates of a sample of classes print as the plan's.
fn tc_agrees(ns: &lqos_apply::netns::ScratchNetns, plan: &lqos_tc::Plan) {
    for ip in &plan.interfaces {
        let tree = ip.tree();
        let shown = tc_classes(ns, &ip.dev);
        assert_eq!(shown.len(), tree.classes.len(), "{}: class count", ip.dev);
        let by_id: BTreeMap<&str, &common::TcClassLine> =
            shown.iter().map(|c| (c.classid.as_str(), c)).collect();
        for c in tree.classes.values().step_by(97) {
            let id = c.classid.to_string();
            let line = by_id
                .get(id.as_str())
                .unwrap_or_else(|| panic!("{}: {id} not shown", ip.dev));
            // The kernel keeps whole bytes per second.
            let want = tc_rate(c.htb.rate.bps() / 8 * 8);
            assert_eq!(
                line.rate.as_deref(),
                Some(want.as_str()),
                "{}: {id} rate",
                ip.dev
            );
        }
    }
}

/// How tc 6.1 prints a rate (iproute2 `sprint_rate`): divide by 1000
/// while the value is at least 1000 and either divisible or at least a
/// million, truncating (`100Mbit`, `6250Kbit`, `1312Kbit` for 1312500).
fn tc_rate(bps: u64) -> String {
    let units = ["bit", "Kbit", "Mbit", "Gbit", "Tbit"];
    let (mut v, mut i) = (bps, 0);
    while i < units.len() - 1 && v >= 1000 && (v % 1000 == 0 || v >= 1_000_000) {
        v /= 1000;
        i += 1;
    }
    format!("{v}{}", units[i])
}

#[test]
fn every_backend_and_mode_loads_a_generated_plan() {
    let Some(ns) = fixture("all-modes") else {
        return;
    };
    let g = generated(CIRCUITS, 1);
    let plan = plan_for(&g, &g.network, None);
    let live = NetlinkLive::new(Some(ns.name().to_string()));
    let ifaces = IfaceOps::all_from_plan(&plan);
    let name = Some(ns.name().to_string());
    let backends: Vec<Box<dyn Backend>> = vec![
        Box::new(TcBatch::new(name.clone(), TcMode::Combined)),
        Box::new(TcBatch::new(name.clone(), TcMode::Serial)),
        Box::new(TcBatch::new(name.clone(), TcMode::Parallel)),
        Box::new(NetlinkBackend::new(name.clone(), Parallelism::Serial)),
        Box::new(NetlinkBackend::new(name.clone(), Parallelism::Parallel)),
    ];
    for (i, b) in backends.iter().enumerate() {
        // Alternate where the root delete goes; the first load finds none.
        let rd = if i % 2 == 0 {
            RootDelete::InBatch
        } else {
            RootDelete::Separate
        };
        let rep = b.load(&ifaces, rd, &NoProgress);
        assert!(rep.is_ok(), "{}: {:?}", b.describe(), rep.first_error());
        for r in &rep.interfaces {
            assert_eq!(r.ops_applied, r.ops_total, "{} {}", b.describe(), r.dev);
        }
        eprintln!(
            "{} {rd:?}: {} ops, total {}",
            b.describe(),
            rep.ops_applied(),
            rep.total.display()
        );
        let v = verify_plan(&plan, &live).unwrap();
        assert!(v.is_clean(), "{}: readback differs:\n{v}", b.describe());
    }
    tc_agrees(&ns, &plan);
}

#[test]
fn incremental_reload_sends_only_the_diff() {
    let Some(ns) = fixture("incremental") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let state = NetnsState::new(dir.path(), Some(ns.name()));
    let live = NetlinkLive::new(Some(ns.name().to_string()));
    let nl = NetlinkBackend::new(Some(ns.name().to_string()), Parallelism::Parallel);
    let tc = TcBatch::new(Some(ns.name().to_string()), TcMode::Parallel);
    let g = generated(CIRCUITS, 2);
    let p1 = plan_for(&g, &g.network, None);
    let verify = {
        let mut p = ApplyOptions::default();
        p.verify_after = true;
        p
    };
    let s = Session {
        state: &state,
        live: &live,
        backend: &nl,
    };
    let r = s.apply(&p1, verify, &NoProgress).unwrap();
    assert!(r
        .changes
        .iter()
        .all(|c| matches!(c.kind, LoadKind::Full { .. })));
    assert!(r.load.unwrap().is_ok());
    assert!(r.verify.unwrap().is_clean());

    // No change: nothing mutating is sent (with either backend).
    for backend in [&nl as &dyn Backend, &tc] {
        let s = Session {
            state: &state,
            live: &live,
            backend,
        };
        let r = s.apply(&p1, ApplyOptions::default(), &NoProgress).unwrap();
        assert_eq!(r.ops_total(), 0, "{}", backend.describe());
        assert_eq!(r.load.unwrap().ops_applied(), 0);
    }

    // 1% rates changed, 15 added, 15 removed; classids stay stable.
    let net2 = mutate(&g.network, 15, 15);
    let p2 = plan_for(&g, &net2, Some(&p1.allocation));
    for backend in [&tc as &dyn Backend, &nl] {
        let (from, to) = if backend.describe().starts_with("tc") {
            (&p1, &p2)
        } else {
            (&p2, &p1)
        };
        // Going p1 -> p2 with tc, then back p2 -> p1 with netlink.
        let s = Session {
            state: &state,
            live: &live,
            backend,
        };
        let r = s.apply(to, verify, &NoProgress).unwrap();
        for (c, (old, new)) in r
            .changes
            .iter()
            .zip(from.interfaces.iter().zip(&to.interfaces))
        {
            assert_eq!(c.kind, LoadKind::Incremental, "{}", c.stream.dev);
            let expected = lqos_tc::diff(&old.tree(), &new.tree());
            assert_eq!(
                c.stream.ops.len(),
                expected.len(),
                "{}: ops = diff size",
                c.stream.dev
            );
            assert!(
                !c.stream.ops.is_empty() && c.stream.ops.len() < 200,
                "{}: {} ops",
                c.stream.dev,
                c.stream.ops.len()
            );
            assert!(
                c.stream
                    .ops
                    .iter()
                    .any(|op| matches!(op, TcOp::ChangeClass(_))),
                "rate change in place"
            );
            assert!(!c.stream.ops.iter().any(|op| *op == TcOp::delete_root()));
        }
        let load = r.load.unwrap();
        assert!(load.is_ok(), "{:?}", load.first_error());
        assert_eq!(
            load.ops_applied(),
            r.changes.iter().map(|c| c.stream.ops.len()).sum::<usize>()
        );
        assert!(r.verify.unwrap().is_clean(), "{}", backend.describe());
    }
    tc_agrees(&ns, &p1);
}

#[test]
fn kernel_error_mid_load_is_reported_and_the_next_apply_converges() {
    let Some(ns) = fixture("midload") else { return };
    let dir = tempfile::tempdir().unwrap();
    let state = NetnsState::new(dir.path(), Some(ns.name()));
    let live = NetlinkLive::new(Some(ns.name().to_string()));
    let g = generated(CIRCUITS, 3);
    let good = plan_for(&g, &g.network, None);
    // Corrupt one class op in the middle of ens20's build: its parent does
    // not exist, so the kernel refuses it.
    let mut bad = good.clone();
    let k = bad.interfaces[1].ops.len() / 2;
    let k = k + bad.interfaces[1].ops[k..]
        .iter()
        .position(|op| matches!(op, TcOp::AddClass(_)))
        .unwrap();
    if let TcOp::AddClass(c) = &mut bad.interfaces[1].ops[k] {
        c.parent = lqos_tc::TcHandle::new(0x7ffe, 1);
    }
    for (round, backend) in [
        Box::new(NetlinkBackend::new(
            Some(ns.name().to_string()),
            Parallelism::Parallel,
        )) as Box<dyn Backend>,
        Box::new(TcBatch::new(Some(ns.name().to_string()), TcMode::Serial)),
    ]
    .iter()
    .enumerate()
    {
        let s = Session {
            state: &state,
            live: &live,
            backend: backend.as_ref(),
        };
        let opts = {
            let mut p = ApplyOptions::default();
            p.full = true;
            p
        };
        let r = s.apply(&bad, opts, &NoProgress).unwrap();
        let load = r.load.unwrap();
        assert!(load.interfaces[0].error.is_none(), "ens19 unaffected");
        let failed_at = load.interfaces[1].ops_applied;
        match load.into_result().unwrap_err() {
            ApplyError::OpFailed {
                dev,
                index,
                op,
                message,
                ..
            } => {
                assert_eq!(dev, "ens20");
                // +1: the full reload starts with the root delete (a tree is
                // there from the previous round).
                let shift = usize::from(round > 0);
                assert_eq!(index, k + shift, "{}", backend.describe());
                assert_eq!(*op, bad.interfaces[1].ops[k]);
                assert!(!message.is_empty());
                assert!(failed_at >= k, "{failed_at} < {k}");
            }
            e => panic!("{}: {e}", backend.describe()),
        }
        if round == 0 {
            assert!(
                lqos_apply::saved::load_saved_plan(&state)
                    .unwrap()
                    .is_none(),
                "a failed load is not saved"
            );
        }
        // The next apply converges incrementally from the partial tree.
        let r = s
            .apply(
                &good,
                {
                    let mut p = ApplyOptions::default();
                    p.verify_after = true;
                    p
                },
                &NoProgress,
            )
            .unwrap();
        assert_eq!(r.changes[1].kind, LoadKind::Incremental);
        assert!(r.changes[1].stream.len() < good.interfaces[1].ops.len() / 2 + 10);
        assert!(r.load.unwrap().is_ok());
        assert!(r.verify.unwrap().is_clean());
    }
}

#[test]
fn preflight_refuses_before_any_change() {
    let Some(ns) = fixture("preflight") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let state = NetnsState::new(dir.path(), Some(ns.name()));
    let live = NetlinkLive::new(Some(ns.name().to_string()));
    let nl = NetlinkBackend::new(Some(ns.name().to_string()), Parallelism::Parallel);
    let s = Session {
        state: &state,
        live: &live,
        backend: &nl,
    };
    let g = generated(200, 4);
    // Too many queues for the 16-queue veths.
    let mut cfg = lqos_tc::PlanConfig::from_lqos_config(&g.config, 32).unwrap();
    cfg.default_sqm = "pfifo".parse().unwrap();
    let p = lqos_tc::plan(&g.network, &cfg, None).unwrap();
    let e = s
        .apply(&p, ApplyOptions::default(), &NoProgress)
        .unwrap_err();
    assert!(e.to_string().contains("the interface has 16"), "{e}");
    // cake, where the kernel has no sch_cake.
    let mut cfg = lqos_tc::PlanConfig::from_lqos_config(&g.config, 16).unwrap();
    cfg.default_sqm = "cake diffserv4".parse().unwrap();
    let p = lqos_tc::plan(&g.network, &cfg, None).unwrap();
    let has_cake = lqos_apply::live::LiveSource::probe_qdiscs(
        &live,
        &[lqos_tc::ops::QdiscKind::Cake(Default::default())],
    )
    .unwrap()[0]
        .is_ok();
    if !has_cake {
        let e = s
            .apply(&p, ApplyOptions::default(), &NoProgress)
            .unwrap_err();
        assert!(e.to_string().contains("this kernel has no sch_cake"), "{e}");
        // The leaves that work instead (the CLI turns them into `--sqm`).
        assert!(
            matches!(&e, lqos_apply::error::ApplyError::UnsupportedQdisc { alternatives, .. }
                if alternatives.iter().any(|a| a == "pfifo")),
            "{e:?}"
        );
    }
    // Nothing was touched.
    for dev in DEVS {
        assert!(common::tc_classes(&ns, dev).is_empty());
    }
}

#[test]
fn two_concurrent_applies_are_refused() {
    let Some(ns) = fixture("lock") else { return };
    let dir = tempfile::tempdir().unwrap();
    let state = NetnsState::new(dir.path(), Some(ns.name()));
    let live = NetlinkLive::new(Some(ns.name().to_string()));
    let nl = NetlinkBackend::new(Some(ns.name().to_string()), Parallelism::Parallel);
    let g = generated(100, 5);
    let p = plan_for(&g, &g.network, None);
    // Another holder (a separate open file description, as another process
    // would have).
    let other = StateDir::open(dir.path()).unwrap();
    let held = other.lock().unwrap();
    let s = Session {
        state: &state,
        live: &live,
        backend: &nl,
    };
    let e = s
        .apply(&p, ApplyOptions::default(), &NoProgress)
        .unwrap_err();
    assert!(
        matches!(e, ApplyError::Locked { holder: Some(pid), .. } if pid == std::process::id()),
        "{e}"
    );
    assert!(common::tc_classes(&ns, "ens19").is_empty());
    drop(held);
    assert!(s
        .apply(&p, ApplyOptions::default(), &NoProgress)
        .unwrap()
        .load
        .unwrap()
        .is_ok());
}
