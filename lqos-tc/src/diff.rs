//! Minimal op streams between two trees of one interface.
//!
//! `old` may be a plan's tree or the kernel's live tree read back. A live
//! tree has concrete values where a plan says "kernel default" (`None`:
//! burst/cburst, pfifo limit, htb r2q/direct_qlen, cake/fq_codel options),
//! and may hold qdiscs the kernel created itself (handle `0:`). The
//! comparison is therefore "does `old` satisfy `new`": a `None` in `new`
//! means the kernel's default (where lqos knows it, e.g. cake `rtt 100ms`;
//! where it depends on the device, e.g. pfifo's limit, anything is
//! accepted), and handle-0 qdiscs are ignored. When a leaf must go back to
//! a default, the `qdisc replace` carries the default explicitly, since the
//! kernel keeps options a change does not send.

use crate::fx::{FxMap, FxSet};
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::classify;
use crate::{CakeParams, Class, FqCodelParams, Plan, Qdisc, QdiscKind, TcHandle, TcOp, TcTree};
use lqos_model::Rate;

/// Counts of the ops in a diff.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiffSummary {
    /// `AddClass` + `AddQdisc` (a new filter is a `ReplaceFilter`, counted
    /// as changed).
    pub added: usize,
    /// `ChangeClass` + `ReplaceQdisc` + `ReplaceFilter`.
    pub changed: usize,
    /// `DeleteClass` + `DeleteQdisc` + `DeleteFilter`.
    pub removed: usize,
}

impl DiffSummary {
    /// Counts the ops.
    pub fn of(ops: &[TcOp]) -> DiffSummary {
        let mut s = DiffSummary::default();
        s.add(ops);
        s
    }

    /// Adds the counts of more ops.
    pub fn add(&mut self, ops: &[TcOp]) {
        for op in ops {
            match op {
                TcOp::AddClass(_) | TcOp::AddQdisc(_) => self.added += 1,
                TcOp::ChangeClass(_) | TcOp::ReplaceQdisc(_) => self.changed += 1,
                TcOp::ReplaceFilter(_) => self.changed += 1,
                TcOp::DeleteClass { .. } | TcOp::DeleteQdisc { .. } | TcOp::DeleteFilter(_) => {
                    self.removed += 1
                }
            }
        }
    }

    /// True when nothing changes.
    pub fn is_empty(&self) -> bool {
        self.added + self.changed + self.removed == 0
    }
}

impl fmt::Display for DiffSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} added, {} changed, {} removed",
            self.added, self.changed, self.removed
        )
    }
}

/// Rates as the kernel keeps them (bytes/s) compare equal.
fn rate_eq(a: Rate, b: Rate) -> bool {
    a.bytes_per_sec() == b.bytes_per_sec()
}

fn opt_ok<T: PartialEq>(actual: &Option<T>, wanted: &Option<T>) -> bool {
    wanted.is_none() || actual == wanted
}

/// `actual` satisfies `wanted` for an option whose kernel default is
/// `default` (`None`: unknown, e.g. it depends on the device): a `None` on
/// either side means the default; a `None` wanted with an unknown default
/// accepts anything.
fn opt_def<T: PartialEq + Copy>(actual: Option<T>, wanted: Option<T>, default: Option<T>) -> bool {
    match (wanted, default) {
        (None, None) => true,
        _ => actual.or(default) == wanted.or(default),
    }
}

/// `wanted`'s value, or the default when `actual` holds a non-default value
/// that must be reset (a qdisc change keeps options it is not sent).
fn reset<T: PartialEq + Copy>(
    actual: Option<T>,
    wanted: Option<T>,
    default: Option<T>,
) -> Option<T> {
    match (wanted, actual, default) {
        (None, Some(a), Some(d)) if a != d => Some(d),
        _ => wanted,
    }
}

/// Kernel defaults of the cake options lqos sends.
mod cake_default {
    use crate::{CakeAckFilter, CakeDiffserv, CakeFlowMode};
    pub const RTT_US: u32 = 100_000;
    pub const DIFFSERV: CakeDiffserv = CakeDiffserv::Diffserv3;
    pub const FLOW_MODE: CakeFlowMode = CakeFlowMode::TripleIsolate;
    pub const ACK_FILTER: CakeAckFilter = CakeAckFilter::Off;
}

/// Kernel defaults of fq_codel's options.
mod fq_codel_default {
    pub const LIMIT: u32 = 10_240;
    pub const FLOWS: u32 = 1024;
    pub const TARGET_US: u32 = 5_000;
    pub const INTERVAL_US: u32 = 100_000;
    pub const MEMORY_LIMIT: u32 = 32 << 20;
}

/// The kind to send so that a qdisc holding `actual` ends up satisfying
/// `wanted`: `wanted` plus explicit defaults for options `actual` has set
/// to something else (a `qdisc replace` of an existing handle only changes
/// the options it carries).
pub fn reset_kind(actual: &QdiscKind, wanted: &QdiscKind) -> QdiscKind {
    match (actual, wanted) {
        (QdiscKind::Cake(a), QdiscKind::Cake(w)) => QdiscKind::Cake(CakeParams {
            bandwidth: reset(a.bandwidth, w.bandwidth, Some(Rate::ZERO)),
            diffserv: reset(a.diffserv, w.diffserv, Some(cake_default::DIFFSERV)),
            rtt_us: reset(a.rtt_us, w.rtt_us, Some(cake_default::RTT_US)),
            flow_mode: reset(a.flow_mode, w.flow_mode, Some(cake_default::FLOW_MODE)),
            nat: reset(a.nat, w.nat, Some(false)),
            wash: reset(a.wash, w.wash, Some(false)),
            ack_filter: reset(a.ack_filter, w.ack_filter, Some(cake_default::ACK_FILTER)),
            split_gso: reset(a.split_gso, w.split_gso, Some(true)),
            memlimit: reset(a.memlimit, w.memlimit, Some(0)),
        }),
        (QdiscKind::FqCodel(a), QdiscKind::FqCodel(w)) => QdiscKind::FqCodel(FqCodelParams {
            limit: reset(a.limit, w.limit, Some(fq_codel_default::LIMIT)),
            flows: reset(a.flows, w.flows, Some(fq_codel_default::FLOWS)),
            target_us: reset(a.target_us, w.target_us, Some(fq_codel_default::TARGET_US)),
            interval_us: reset(
                a.interval_us,
                w.interval_us,
                Some(fq_codel_default::INTERVAL_US),
            ),
            quantum: w.quantum,
            ecn: reset(a.ecn, w.ecn, Some(true)),
            memory_limit: reset(
                a.memory_limit,
                w.memory_limit,
                Some(fq_codel_default::MEMORY_LIMIT),
            ),
        }),
        _ => wanted.clone(),
    }
}

/// Does class `actual` satisfy `wanted` (same place, same rates at bytes/s
/// granularity, same prio, same quantum unless `wanted.quantum == 0`, same
/// burst/cburst where `wanted` gives them)?
pub fn class_satisfies(actual: &Class, wanted: &Class) -> bool {
    let (a, w) = (&actual.htb, &wanted.htb);
    actual.classid == wanted.classid
        && actual.parent == wanted.parent
        && rate_eq(a.rate, w.rate)
        && rate_eq(a.ceil, w.ceil)
        && a.prio == w.prio
        && (w.quantum == 0 || a.quantum == w.quantum)
        && opt_ok(&a.burst, &w.burst)
        && opt_ok(&a.cburst, &w.cburst)
}

/// Does qdisc kind `actual` satisfy `wanted` (same kind; every option
/// `wanted` sets has that value)?
pub fn kind_satisfies(actual: &QdiscKind, wanted: &QdiscKind) -> bool {
    match (actual, wanted) {
        (QdiscKind::Mq, QdiscKind::Mq) | (QdiscKind::Clsact, QdiscKind::Clsact) => true,
        (QdiscKind::Htb(a), QdiscKind::Htb(w)) => {
            a.default_minor == w.default_minor
                && opt_ok(&a.r2q, &w.r2q)
                && opt_ok(&a.direct_qlen, &w.direct_qlen)
        }
        (QdiscKind::Cake(a), QdiscKind::Cake(w)) => cake_satisfies(a, w),
        (QdiscKind::FqCodel(a), QdiscKind::FqCodel(w)) => fq_codel_satisfies(a, w),
        (QdiscKind::Pfifo { limit: a }, QdiscKind::Pfifo { limit: w })
        | (QdiscKind::Bfifo { limit: a }, QdiscKind::Bfifo { limit: w }) => opt_ok(a, w),
        (QdiscKind::Other(a), QdiscKind::Other(w)) => a == w,
        _ => false,
    }
}

fn cake_satisfies(a: &CakeParams, w: &CakeParams) -> bool {
    let bw = |r: Option<Rate>| r.map(Rate::bytes_per_sec);
    opt_def(bw(a.bandwidth), bw(w.bandwidth), Some(0))
        && opt_def(a.diffserv, w.diffserv, Some(cake_default::DIFFSERV))
        && opt_def(a.rtt_us, w.rtt_us, Some(cake_default::RTT_US))
        && opt_def(a.flow_mode, w.flow_mode, Some(cake_default::FLOW_MODE))
        && opt_def(a.nat, w.nat, Some(false))
        && opt_def(a.wash, w.wash, Some(false))
        && opt_def(a.ack_filter, w.ack_filter, Some(cake_default::ACK_FILTER))
        && opt_def(a.split_gso, w.split_gso, Some(true))
        && opt_def(a.memlimit, w.memlimit, Some(0))
}

fn fq_codel_satisfies(a: &FqCodelParams, w: &FqCodelParams) -> bool {
    opt_def(a.limit, w.limit, Some(fq_codel_default::LIMIT))
        && opt_def(a.flows, w.flows, Some(fq_codel_default::FLOWS))
        && opt_def(a.target_us, w.target_us, Some(fq_codel_default::TARGET_US))
        && opt_def(
            a.interval_us,
            w.interval_us,
            Some(fq_codel_default::INTERVAL_US),
        )
        && opt_def(a.quantum, w.quantum, None)
        && opt_def(a.ecn, w.ecn, Some(true))
        && opt_def(
            a.memory_limit,
            w.memory_limit,
            Some(fq_codel_default::MEMORY_LIMIT),
        )
}

/// Does qdisc `actual` satisfy `wanted` (same handle, parent, kind options)?
pub fn qdisc_satisfies(actual: &Qdisc, wanted: &Qdisc) -> bool {
    actual.handle == wanted.handle
        && actual.parent == wanted.parent
        && kind_satisfies(&actual.kind, &wanted.kind)
}

/// Does tree `actual` satisfy `wanted`: the same classes and explicit-handle
/// qdiscs, each satisfying its wanted counterpart, and the same filters?
/// Handle-0 qdiscs in `actual`, and a `clsact` that `wanted` lacks, are
/// ignored.
pub fn tree_satisfies(actual: &TcTree, wanted: &TcTree) -> bool {
    // A clsact lqos does not want may be another program's: not drift.
    let ours = |q: &&Qdisc| q.handle != TcHandle::UNSPEC && q.kind != QdiscKind::Clsact;
    let aq = actual.qdiscs.values().filter(ours);
    let wq = wanted.qdiscs.values().filter(ours);
    (classify::has_clsact(actual) || !classify::has_clsact(wanted))
        && aq.clone().count() == wq.clone().count()
        && wq.into_iter().all(|w| {
            actual
                .qdiscs
                .get(&w.handle)
                .is_some_and(|a| qdisc_satisfies(a, w))
        })
        && actual.filters == wanted.filters
        && actual.classes.len() == wanted.classes.len()
        && wanted.classes.values().all(|w| {
            actual
                .classes
                .get(&w.classid)
                .is_some_and(|a| class_satisfies(a, w))
        })
}

fn by_parent(t: &TcTree) -> FxMap<TcHandle, &Qdisc> {
    let mut m = FxMap::default();
    m.reserve(t.qdiscs.len());
    for q in t.qdiscs.values().filter(|q| q.handle != TcHandle::UNSPEC) {
        m.insert(q.parent, q);
    }
    m
}

fn children(t: &TcTree) -> FxMap<TcHandle, Vec<TcHandle>> {
    let mut m: FxMap<TcHandle, Vec<TcHandle>> = FxMap::default();
    for c in t.classes.values() {
        m.entry(c.parent).or_default().push(c.classid);
    }
    m
}

/// The qdiscs that make up the queue layout: the root and the qdiscs on its
/// classes (the per-queue HTBs under `mq`).
fn layout(t: &TcTree) -> Vec<&Qdisc> {
    let Some(root) = t.root() else {
        return Vec::new();
    };
    let major = root.handle.major();
    let mut v = vec![root];
    v.extend(t.qdiscs.values().filter(|q| {
        q.handle != TcHandle::UNSPEC && q.parent != TcHandle::ROOT && q.parent.major() == major
    }));
    v
}

fn layout_same(old: &TcTree, new: &TcTree) -> bool {
    let (lo, ln) = (layout(old), layout(new));
    lo.len() == ln.len()
        && ln.iter().all(|w| {
            old.qdiscs
                .get(&w.handle)
                .is_some_and(|a| qdisc_satisfies(a, w))
        })
}

/// The ops that build `t` from an empty interface, parents first (each
/// class followed by its leaf qdisc), then the classifier (`clsact` and
/// its filters) if `t` has one. The root qdisc is a replace.
pub fn build_ops(t: &TcTree) -> Vec<TcOp> {
    let mut ops = build_classes(t);
    ops.extend(classify::diff_filters(&TcTree::default(), t));
    ops
}

/// [`build_ops`] without the classifier.
fn build_classes(t: &TcTree) -> Vec<TcOp> {
    let mut ops = Vec::with_capacity(t.qdiscs.len() + t.classes.len());
    let by_parent = by_parent(t);
    let kids = children(t);
    let Some(root) = t.root() else {
        return ops;
    };
    ops.push(TcOp::ReplaceQdisc(root.clone()));
    let mut lay: Vec<&Qdisc> = layout(t).into_iter().skip(1).collect();
    lay.sort_by_key(|q| q.handle);
    for q in lay {
        ops.push(TcOp::AddQdisc(q.clone()));
        emit_subtree(t, &by_parent, &kids, q.handle, &mut ops, &|_| true, &|_| {
            true
        });
    }
    ops
}

/// Preorder over the classes under `parent` (a class or an HTB qdisc):
/// `AddClass` where `add_class(classid)`, then its leaf qdisc where
/// `add_leaf(handle)`.
fn emit_subtree(
    t: &TcTree,
    by_parent: &FxMap<TcHandle, &Qdisc>,
    kids: &FxMap<TcHandle, Vec<TcHandle>>,
    parent: TcHandle,
    ops: &mut Vec<TcOp>,
    add_class: &dyn Fn(TcHandle) -> bool,
    add_leaf: &dyn Fn(TcHandle) -> bool,
) {
    let mut stack: Vec<TcHandle> = kids
        .get(&parent)
        .map(|v| v.iter().rev().copied().collect())
        .unwrap_or_default();
    while let Some(id) = stack.pop() {
        if add_class(id) {
            ops.push(TcOp::AddClass(t.classes[&id].clone()));
        }
        if let Some(q) = by_parent.get(&id) {
            if add_leaf(q.handle) {
                ops.push(TcOp::AddQdisc((*q).clone()));
            }
        }
        if let Some(v) = kids.get(&id) {
            stack.extend(v.iter().rev().copied());
        }
    }
}

/// The ordered ops that turn `old` into (a tree satisfying) `new` on one
/// interface.
///
/// - Same queue layout (root and per-queue HTB qdiscs): incremental. First
///   deletions (leaf qdiscs, then classes children-first: removed classes,
///   classes whose parent changed, and everything below them), then
///   in-place changes (`class change`; `qdisc replace` for a leaf whose
///   options changed, or for a new leaf handle on the same class), then
///   additions parents-first, each class followed by its leaf qdisc. A leaf
///   whose kind changes under the same handle is deleted and re-added (the
///   kernel cannot change a qdisc's kind in place).
/// - Different layout: a full rebuild (`qdisc del root` first only when the
///   old root has the new root's handle; otherwise the root replace
///   discards the old tree).
///
/// - Then the classifier ([`classify::diff_filters`]): a `clsact` replace
///   if it is missing, deletes of filters `new` lacks, one replace per new
///   or different filter. The root delete of a rebuild leaves `clsact` and
///   its filters in place, so they are diffed the same way.
///
/// ```
/// use lqos_tc::{diff::diff, TcTree};
/// assert!(diff(&TcTree::default(), &TcTree::default()).is_empty());
/// ```
pub fn diff(old: &TcTree, new: &TcTree) -> Vec<TcOp> {
    let mut ops = diff_classes(old, new);
    ops.extend(classify::diff_filters(old, new));
    ops
}

/// [`diff`] of the class trees (root, HTBs, classes, leaves).
fn diff_classes(old: &TcTree, new: &TcTree) -> Vec<TcOp> {
    let Some(new_root) = new.root() else {
        return match old.root() {
            Some(_) => vec![TcOp::delete_root()],
            None => Vec::new(),
        };
    };
    if !layout_same(old, new) {
        let mut ops = Vec::new();
        if old.root().is_some_and(|r| r.handle == new_root.handle) {
            ops.push(TcOp::delete_root());
        }
        ops.extend(build_classes(new));
        return ops;
    }
    let layout_handles: FxSet<TcHandle> = layout(new).iter().map(|q| q.handle).collect();
    let old_by_parent = by_parent(old);
    let new_by_parent = by_parent(new);
    let old_kids = children(old);
    let new_kids = children(new);

    // Classes to delete: gone, moved, or below such a class.
    let mut doomed: FxSet<TcHandle> = FxSet::default();
    let mut doomed_order: Vec<TcHandle> = Vec::new(); // preorder
    for q in layout(old).iter().skip(1) {
        let mut stack: Vec<(TcHandle, bool)> = old_kids
            .get(&q.handle)
            .map(|v| v.iter().rev().map(|&c| (c, false)).collect())
            .unwrap_or_default();
        while let Some((id, parent_doomed)) = stack.pop() {
            let keep = !parent_doomed
                && new
                    .classes
                    .get(&id)
                    .is_some_and(|n| n.parent == old.classes[&id].parent);
            if !keep {
                doomed.insert(id);
                doomed_order.push(id);
            }
            if let Some(v) = old_kids.get(&id) {
                stack.extend(v.iter().rev().map(|&c| (c, !keep)));
            }
        }
    }

    let mut deletes = Vec::new();
    let mut changes = Vec::new();
    // Leaf qdiscs of `new` already in place (kept or replaced in place).
    let mut leaf_done: FxSet<TcHandle> = FxSet::default();

    // Leaf qdiscs on surviving classes.
    for oq in old.qdiscs.values() {
        let parent = &oq.parent;
        if oq.handle == TcHandle::UNSPEC
            || layout_handles.contains(&oq.handle)
            || *parent == TcHandle::ROOT
        {
            continue;
        }
        if doomed.contains(parent) || !old.classes.contains_key(parent) {
            continue; // deleted with its class below
        }
        match new.qdiscs.get(&oq.handle) {
            Some(nq) if nq.parent == oq.parent && nq.kind.name() == oq.kind.name() => {
                if !kind_satisfies(&oq.kind, &nq.kind) {
                    changes.push(TcOp::ReplaceQdisc(Qdisc {
                        kind: reset_kind(&oq.kind, &nq.kind),
                        ..nq.clone()
                    }));
                }
                leaf_done.insert(nq.handle);
            }
            _ => match new_by_parent.get(parent) {
                Some(nq) if !old.qdiscs.contains_key(&nq.handle) => {
                    // A fresh handle on the same class: graft it over the old leaf.
                    changes.push(TcOp::ReplaceQdisc((*nq).clone()));
                    leaf_done.insert(nq.handle);
                }
                _ => deletes.push(TcOp::DeleteQdisc {
                    parent: *parent,
                    handle: oq.handle,
                }),
            },
        }
    }
    // Doomed classes, children first, each after its leaf qdisc.
    for id in doomed_order.iter().rev() {
        let c = &old.classes[id];
        if let Some(q) = old_by_parent.get(id) {
            deletes.push(TcOp::DeleteQdisc {
                parent: *id,
                handle: q.handle,
            });
        }
        deletes.push(TcOp::DeleteClass {
            parent: c.parent,
            classid: *id,
        });
    }
    // In-place class changes, in new's preorder.
    let mut adds = Vec::new();
    let kept = |id: TcHandle| old.classes.contains_key(&id) && !doomed.contains(&id);
    for q in layout(new).iter().skip(1) {
        let mut stack: Vec<TcHandle> = new_kids
            .get(&q.handle)
            .map(|v| v.iter().rev().copied().collect())
            .unwrap_or_default();
        while let Some(id) = stack.pop() {
            let nc = &new.classes[&id];
            if kept(id) {
                if !class_satisfies(&old.classes[&id], nc) {
                    changes.push(TcOp::ChangeClass(nc.clone()));
                }
            } else {
                adds.push(TcOp::AddClass(nc.clone()));
            }
            if let Some(nq) = new_by_parent.get(&id) {
                if !leaf_done.contains(&nq.handle) {
                    adds.push(TcOp::AddQdisc((*nq).clone()));
                }
            }
            if let Some(v) = new_kids.get(&id) {
                stack.extend(v.iter().rev().copied());
            }
        }
    }
    let mut ops = deletes;
    ops.extend(changes);
    ops.extend(adds);
    ops
}

/// Diffs two plans interface by interface: `(device, ops)` for every
/// interface of either plan (an interface only in `old` gets a root delete).
pub fn diff_plans(old: &Plan, new: &Plan) -> Vec<(String, Vec<TcOp>)> {
    let mut out = Vec::new();
    for ni in &new.interfaces {
        let old_tree = old
            .interface(&ni.dev)
            .map(|oi| oi.tree())
            .unwrap_or_default();
        out.push((ni.dev.clone(), diff(&old_tree, &ni.tree())));
    }
    for oi in &old.interfaces {
        if new.interface(&oi.dev).is_none() {
            out.push((oi.dev.clone(), vec![TcOp::delete_root()]));
        }
    }
    out
}
