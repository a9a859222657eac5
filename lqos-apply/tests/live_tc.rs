//! `tc -b` backend against a real kernel in a private namespace.

mod common;

use common::{both, fixture, hand_built, tc_classes, tc_qdiscs, DEVS};
use lqos_apply::backend::{Backend, CountProgress, NoProgress};
use lqos_apply::backend::{RootDelete, TcBatch, TcMode};
use lqos_apply::error::ApplyError;
use lqos_tc::render::render_line;

#[test]
fn every_tc_mode_loads_and_reloads_a_tree() {
    let Some(ns) = fixture("tc-modes") else {
        return;
    };
    let ops = hand_built(300, 16, |i| 10 + (i % 50) as u64);
    let streams = both(&ops);
    for (mode, rd) in [
        (TcMode::Combined, RootDelete::InBatch),
        (TcMode::Serial, RootDelete::Separate),
        (TcMode::Serial, RootDelete::InBatch),
        (TcMode::Parallel, RootDelete::InBatch),
        (TcMode::Parallel, RootDelete::Separate),
    ] {
        // Twice: first on an empty device (root delete finds nothing), then over the tree.
        for _ in 0..2 {
            let tc = TcBatch::new(Some(ns.name().to_string()), mode);
            let progress = CountProgress::default();
            let rep = tc.load(&streams, rd, &progress);
            assert!(rep.is_ok(), "{mode:?} {rd:?}: {:?}", rep.first_error());
            for (i, dev) in DEVS.iter().enumerate() {
                let r = &rep.interfaces[i];
                assert_eq!(r.ops_applied, r.ops_total, "{mode:?} {rd:?} {dev}");
                assert_eq!(
                    tc_classes(&ns, dev).len(),
                    16 * 2 + 300,
                    "{mode:?} {rd:?} {dev}"
                );
                assert_eq!(
                    tc_qdiscs(&ns, dev).len(),
                    1 + 16 + 300,
                    "{mode:?} {rd:?} {dev}"
                );
                if mode != TcMode::Combined {
                    assert!(r.timing.is_some());
                }
                if rd == RootDelete::Separate {
                    assert!(r.root_delete.is_some());
                }
            }
            assert!(progress.0.load(std::sync::atomic::Ordering::Relaxed) >= 2 * ops.len());
        }
    }
}

#[test]
fn a_failing_line_is_mapped_to_its_op_and_interface() {
    let Some(ns) = fixture("tc-fail") else { return };
    let ops = hand_built(20, 4, |_| 10);
    let mut streams = both(&ops);
    // Op 29 of ens20: a class under a parent that does not exist.
    let mut bad = ops[29].clone();
    if let lqos_tc::TcOp::AddClass(c) = &mut bad {
        c.parent = lqos_tc::TcHandle::new(0x99, 1);
        c.classid = lqos_tc::TcHandle::new(0x99, 5);
    }
    streams[1].ops.to_mut()[29] = bad;
    for mode in [TcMode::Combined, TcMode::Serial, TcMode::Parallel] {
        let tc = TcBatch::new(Some(ns.name().to_string()), mode);
        let rep = tc.load(&streams, RootDelete::InBatch, &NoProgress);
        assert!(!rep.is_ok());
        let e = rep.interfaces[1].error.as_ref().expect("ens20 failed");
        match e {
            ApplyError::OpFailed {
                dev,
                index,
                op,
                message,
                ..
            } => {
                assert_eq!(dev, "ens20");
                assert_eq!(*index, 30, "index counts the in-batch root delete");
                assert!(
                    render_line("ens20", op)
                        .starts_with("class add dev ens20 parent 99:1 classid 99:5"),
                    "{op:?}"
                );
                assert!(!message.is_empty());
            }
            e => panic!("{mode:?}: {e}"),
        }
        assert_eq!(rep.interfaces[1].ops_applied, 30, "{mode:?}");
        if mode != TcMode::Combined {
            assert!(rep.interfaces[0].error.is_none(), "{mode:?}");
        }
        let err = rep.into_result().unwrap_err();
        assert!(matches!(err, ApplyError::OpFailed { .. }), "{err}");
    }
}

#[test]
fn force_keeps_going_and_still_reports_the_failure() {
    let Some(ns) = fixture("tc-force") else {
        return;
    };
    let ops = hand_built(20, 4, |_| 10);
    let mut streams = both(&ops);
    if let lqos_tc::TcOp::AddClass(c) = &mut streams[0].ops.to_mut()[29] {
        c.parent = lqos_tc::TcHandle::new(0x99, 1);
        c.classid = lqos_tc::TcHandle::new(0x99, 5);
    } else {
        panic!("op 29 is not a class");
    }
    let mut tc = TcBatch::new(Some(ns.name().to_string()), TcMode::Combined);
    tc.force = true; // LibreQoS runs `tc -f -b`
    let rep = tc.load(&streams, RootDelete::InBatch, &NoProgress);
    let r = &rep.interfaces[0];
    // The refused class and the leaf qdisc that needed it fail; the rest loads.
    assert_eq!(r.ops_applied, r.ops_total - 2, "{:?}", r.error);
    match r.error.as_ref().unwrap() {
        ApplyError::OpFailed { index, .. } => assert_eq!(*index, 30),
        e => panic!("{e}"),
    }
    assert!(rep.interfaces[1].error.is_none());
    assert_eq!(rep.interfaces[1].ops_applied, rep.interfaces[1].ops_total);
}
