//! Loads cancelled mid-way (what SIGTERM / Ctrl-C do) in a private network
//! namespace: the netlink backend stops between two batches, `tc -b`
//! between two lines, and each reports exactly the ops the kernel holds.

mod common;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};

use lqos_apply::backend::IfaceReport;
use lqos_apply::backend::{
    Backend, IfaceOps, NetlinkBackend, Parallelism, Progress, RootDelete, TcBatch, TcMode,
};
use lqos_apply::error::ApplyError;
use lqos_apply::error::Stopped;
use lqos_apply::live::{LiveSource, NetlinkLive};
use lqos_tc::ops::QdiscKind;
use lqos_tc::tree::TcTree;
use lqos_tc::{TcHandle, TcOp};

/// Cancels once `after` ops were reported sent.
struct CancelAfter {
    after: usize,
    sent: AtomicUsize,
}

impl CancelAfter {
    fn new(after: usize) -> CancelAfter {
        CancelAfter {
            after,
            sent: AtomicUsize::new(0),
        }
    }
}

impl Progress for CancelAfter {
    fn advance(&self, _dev: &str, n: usize) {
        self.sent.fetch_add(n, Ordering::SeqCst);
    }

    fn cancelled(&self) -> bool {
        self.sent.load(Ordering::SeqCst) >= self.after
    }
}

/// The qdisc handles and classids `ops` (adds only) create.
fn created(ops: &[TcOp]) -> (BTreeSet<TcHandle>, BTreeSet<TcHandle>) {
    let (mut q, mut c) = (BTreeSet::new(), BTreeSet::new());
    for op in ops {
        match op {
            TcOp::AddQdisc(x) | TcOp::ReplaceQdisc(x) => {
                q.insert(x.handle);
            }
            TcOp::AddClass(x) => {
                c.insert(x.classid);
            }
            other => panic!("unexpected op {other:?}"),
        }
    }
    (q, c)
}

/// What the kernel holds (kernel defaults aside).
fn held(tree: &TcTree) -> (BTreeSet<TcHandle>, BTreeSet<TcHandle>) {
    (
        tree.qdiscs.keys().copied().collect(),
        tree.classes.keys().copied().collect(),
    )
}

/// The cancelled report of one interface: its error says so and every
/// applied op (and no other) is in the kernel. `acked`: progress counted
/// ops the kernel answered (netlink), so at least that many were applied;
/// tc's progress counts lines written to it.
fn check(rep: &IfaceReport, ops: &[TcOp], live: &NetlinkLive, cancel: &CancelAfter, acked: bool) {
    let applied = rep.ops_applied;
    eprintln!(
        "{}: cancelled after {} ops reported; {applied} of {} applied",
        rep.dev,
        cancel.after,
        ops.len()
    );
    match &rep.error {
        Some(ApplyError::Incomplete {
            reason: Stopped::Cancelled { unsure: 0 },
            sent,
            total,
            ..
        }) => assert_eq!((*sent, *total), (applied, ops.len())),
        e => panic!("{}: {e:?}", rep.dev),
    }
    assert!(applied < ops.len(), "{applied}");
    if acked {
        assert!(applied >= cancel.after, "{applied}");
    }
    let tree = live.dump(&rep.dev).unwrap();
    assert_eq!(held(&tree), created(&ops[..applied]), "{}", rep.dev);
}

fn ops() -> Vec<TcOp> {
    common::tree_ops(
        16,
        1500,
        common::varied_rates,
        QdiscKind::Pfifo { limit: None },
    )
}

#[test]
fn a_cancelled_netlink_load_stops_between_batches_with_every_sent_op_acked() {
    let Some(ns) = common::fixture("cancel_netlink") else {
        return;
    };
    let ops = ops();
    let backend = NetlinkBackend::new(Some(ns.name().to_string()), Parallelism::Serial);
    let cancel = CancelAfter::new(1000);
    let streams = [
        IfaceOps::new("ens19", &ops[..]),
        IfaceOps::new("ens20", &ops[..]),
    ];
    let report = backend.load(&streams, RootDelete::None, &cancel);
    let live = NetlinkLive::new(Some(ns.name().to_string()));
    check(&report.interfaces[0], &ops, &live, &cancel, true);
    // One batch at most past the cancel point.
    assert!(report.interfaces[0].ops_applied <= 1000 + backend.send.batch);
    // The second interface saw the flag before its first batch.
    let second = &report.interfaces[1];
    assert_eq!(second.ops_applied, 0);
    assert!(matches!(
        second.error,
        Some(ApplyError::Incomplete {
            reason: Stopped::Cancelled { .. },
            ..
        })
    ));
    assert!(held(&live.dump("ens20").unwrap()).1.is_empty());
}

#[test]
fn a_cancelled_tc_batch_stops_between_lines_and_counts_what_tc_ran() {
    let Some(ns) = common::fixture("cancel_tc") else {
        return;
    };
    let ops = ops();
    for (dev, mode) in [("ens19", TcMode::Serial), ("ens20", TcMode::Combined)] {
        let backend = TcBatch::new(Some(ns.name().to_string()), mode);
        let cancel = CancelAfter::new(1200);
        let report = backend.load(&[IfaceOps::new(dev, &ops[..])], RootDelete::None, &cancel);
        let live = NetlinkLive::new(Some(ns.name().to_string()));
        check(&report.interfaces[0], &ops, &live, &cancel, false);
    }
}
