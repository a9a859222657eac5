//! Netlink backend, readback and preflight against a real kernel in a
//! private namespace.

mod common;

use common::{both, fixture, hand_built, tc_classes, DEVS};
use lqos_apply::backend::{Backend, CountProgress, NoProgress};
use lqos_apply::backend::{NetlinkBackend, Parallelism, RootDelete};
use lqos_apply::error::ApplyError;
use lqos_apply::live::LiveSource;
use lqos_apply::live::NetlinkLive;
use lqos_tc::ops::QdiscKind;
use lqos_tc::render::render_line;
use lqos_tc::TcOp;

#[test]
fn netlink_serial_and_parallel_load_and_read_back() {
    let Some(ns) = fixture("nl-modes") else {
        return;
    };
    let ops = hand_built(300, 16, |i| 10 + (i % 50) as u64);
    let streams = both(&ops);
    let live = NetlinkLive::new(Some(ns.name().to_string()));
    let mut planned = lqos_tc::tree::TcTree::default();
    for op in &ops {
        // The hand-built stream only adds, so the planned tree is its content.
        match op {
            TcOp::AddQdisc(q) | TcOp::ReplaceQdisc(q) => {
                planned.qdiscs.insert(q.handle, q.clone());
            }
            TcOp::AddClass(c) => {
                planned.classes.insert(c.classid, c.clone());
            }
            _ => unreachable!(),
        }
    }
    for par in [Parallelism::Serial, Parallelism::Parallel] {
        for rd in [RootDelete::InBatch, RootDelete::Separate] {
            let nl = NetlinkBackend::new(Some(ns.name().to_string()), par);
            let progress = CountProgress::default();
            let rep = nl.load(&streams, rd, &progress);
            assert!(rep.is_ok(), "{par:?} {rd:?}: {:?}", rep.first_error());
            for (i, dev) in DEVS.iter().enumerate() {
                assert_eq!(rep.interfaces[i].ops_applied, rep.interfaces[i].ops_total);
                assert!(rep.interfaces[i].timing.is_some());
                let tree = live.dump(dev).unwrap();
                let v = lqos_apply::verify::verify_tree(dev, &planned, &tree, &Default::default());
                assert!(
                    v.drift.is_empty(),
                    "{par:?} {rd:?} {dev}: {:?}",
                    &v.drift[..v.drift.len().min(5)]
                );
                assert_eq!(tc_classes(&ns, dev).len(), 16 * 2 + 300);
            }
        }
    }
}

#[test]
fn netlink_failure_names_op_and_kernel_message() {
    let Some(ns) = fixture("nl-fail") else { return };
    let ops = hand_built(20, 4, |_| 10);
    let mut streams = both(&ops);
    if let TcOp::AddClass(c) = &mut streams[1].ops.to_mut()[29] {
        c.parent = lqos_tc::TcHandle::new(0x99, 1);
        c.classid = lqos_tc::TcHandle::new(0x99, 5);
    } else {
        panic!("op 29 is not a class");
    }
    for par in [Parallelism::Serial, Parallelism::Parallel] {
        let nl = NetlinkBackend::new(Some(ns.name().to_string()), par);
        let rep = nl.load(&streams, RootDelete::InBatch, &NoProgress);
        assert!(rep.interfaces[0].error.is_none());
        match rep.interfaces[1].error.as_ref().unwrap() {
            ApplyError::OpFailed {
                dev,
                index,
                op,
                message,
                errno,
            } => {
                assert_eq!((dev.as_str(), *index), ("ens20", 30));
                assert!(
                    render_line("ens20", op)
                        .starts_with("class add dev ens20 parent 99:1 classid 99:5"),
                    "{op:?}"
                );
                assert!(!message.is_empty());
                assert!(errno.is_some());
            }
            e => panic!("{e}"),
        }
    }
}

#[test]
fn qdisc_probe_knows_what_this_kernel_has() {
    if !lqos_apply::netns::require_netns("qdisc_probe") {
        return;
    }
    let live = NetlinkLive::new(None);
    let r = live
        .probe_qdiscs(&[
            QdiscKind::Pfifo { limit: None },
            QdiscKind::Cake(Default::default()),
        ])
        .unwrap();
    assert!(r[0].is_ok(), "{r:?}");
    // This project's machines have no sch_cake; elsewhere it may exist.
    if let Err(m) = &r[1] {
        assert!(m.is_unknown_kind(), "{m}");
        assert_eq!(m.errno, libc::ENOENT, "{m}");
    }
}
