//! Minimal op streams between two trees of one interface.
//!
//! `old` may be a plan's tree or the kernel's live tree read back. Whether
//! an old object already satisfies the new one, and whether the layout
//! allows an incremental change, is decided by [`crate::rules`] (kernel
//! defaults, quantum 0, handle-0 kernel qdiscs); `diff` only orders the
//! ops. When a leaf must go back to a default, the `qdisc replace` carries
//! the default explicitly ([`rules::reset_kind`](crate::rules::reset_kind)), since the kernel keeps options
//! a change does not send.

use hashbrown::{HashMap, HashSet};
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::classify;
use crate::handle::TcHandle;
use crate::op::TcOp;
use crate::ops::{Qdisc, QdiscKind};
use crate::plan::Plan;
use crate::rules::{self, class_satisfies, kind_satisfies, reset_kind, Layout};
use crate::tree::TcTree;

/// Counts of the ops in a diff.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct DiffSummary {
    /// `AddClass` + `AddQdisc` (a new filter is a `ReplaceFilter`, counted
    /// as changed).
    pub added: usize,
    /// `ChangeClass` + `ReplaceQdisc` + `ReplaceFilter`.
    pub changed: usize,
    /// `DeleteClass` + `DeleteQdisc` + `DeleteRoot` + `DeleteFilter`.
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
                TcOp::DeleteClass { .. }
                | TcOp::DeleteQdisc { .. }
                | TcOp::DeleteRoot
                | TcOp::DeleteFilter(_) => self.removed += 1,
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

fn by_parent(t: &TcTree) -> HashMap<TcHandle, &Qdisc> {
    let mut m = HashMap::default();
    m.reserve(t.qdiscs.len());
    for q in t.qdiscs.values().filter(|q| !q.is_kernel_default()) {
        m.insert(q.parent, q);
    }
    m
}

fn children(t: &TcTree) -> HashMap<TcHandle, Vec<TcHandle>> {
    let mut m: HashMap<TcHandle, Vec<TcHandle>> = HashMap::default();
    for c in t.classes.values() {
        m.entry(c.parent).or_default().push(c.classid);
    }
    m
}

/// The ops that build `t` from an empty interface, parents first (each
/// class followed by its leaf qdisc), without the classifier. The root
/// qdisc is a replace.
fn build_classes(t: &TcTree) -> Vec<TcOp> {
    let mut ops = Vec::with_capacity(t.qdiscs.len() + t.classes.len());
    let by_parent = by_parent(t);
    let kids = children(t);
    let Some(root) = t.root() else {
        return ops;
    };
    ops.push(TcOp::ReplaceQdisc(root.clone()));
    let mut lay: Vec<&Qdisc> = rules::layout_qdiscs(t).into_iter().skip(1).collect();
    if root.kind != QdiscKind::Mq {
        // An HTB root (single-queue interface): its classes hang off it.
        emit_subtree(
            t,
            &by_parent,
            &kids,
            root.handle,
            &mut ops,
            &|_| true,
            &|_| true,
        );
    }
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
    by_parent: &HashMap<TcHandle, &Qdisc>,
    kids: &HashMap<TcHandle, Vec<TcHandle>>,
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
/// - Different layout ([`rules::layout`]): a full rebuild, with `qdisc del
///   root` first whenever a tree is loaded ([`rules::rebuild_deletes_root`]).
///
/// - Then the classifier ([`classify::diff_filters`]): a `clsact` replace
///   if it is missing, deletes of filters `new` lacks, one replace per new
///   or different filter. The root delete of a rebuild leaves `clsact` and
///   its filters in place, so they are diffed the same way.
///
/// ```
/// use lqos_tc::diff;
/// use lqos_tc::tree::TcTree;
/// assert!(diff(&TcTree::default(), &TcTree::default()).is_empty());
/// ```
pub fn diff(old: &TcTree, new: &TcTree) -> Vec<TcOp> {
    let mut ops = diff_classes(old, new);
    ops.extend(classify::diff_filters(old, new));
    ops
}

/// [`diff`] of the class trees (root, HTBs, classes, leaves).
fn diff_classes(old: &TcTree, new: &TcTree) -> Vec<TcOp> {
    if new.root().is_none() {
        return match old.root() {
            Some(_) => vec![TcOp::delete_root()],
            None => Vec::new(),
        };
    }
    if let Layout::Rebuild(_) = rules::layout(old, new) {
        let mut ops = Vec::new();
        if rules::rebuild_deletes_root(old) {
            ops.push(TcOp::delete_root());
        }
        ops.extend(build_classes(new));
        return ops;
    }
    let layout_handles: HashSet<TcHandle> =
        rules::layout_qdiscs(new).iter().map(|q| q.handle).collect();
    let old_by_parent = by_parent(old);
    let new_by_parent = by_parent(new);
    let old_kids = children(old);
    let new_kids = children(new);

    // Classes to delete: gone, moved, or below such a class.
    let mut doomed: HashSet<TcHandle> = HashSet::default();
    let mut doomed_order: Vec<TcHandle> = Vec::new(); // preorder
    for q in rules::htb_qdiscs(old) {
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
    let mut leaf_done: HashSet<TcHandle> = HashSet::default();

    // Leaf qdiscs on surviving classes.
    for oq in old.qdiscs.values() {
        let parent = &oq.parent;
        if oq.is_kernel_default()
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
    for q in rules::htb_qdiscs(new) {
        let mut stack: Vec<TcHandle> = new_kids
            .get(&q.handle)
            .map(|v| v.iter().rev().copied().collect())
            .unwrap_or_default();
        while let Some(id) = stack.pop() {
            let nc = &new.classes[&id];
            if kept(id) {
                if !class_satisfies(&old.classes[&id], nc, new_kids.contains_key(&id)) {
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

/// The ops that take `model` (the kernel's tree as far as the caller
/// knows) to the objects `ops` describe (class and leaf ops of a plan, as
/// [`replan_circuits`](crate::replan::replan_circuits) reports them): `class change` for a class whose
/// parameters differ, `qdisc replace` for a leaf whose options differ,
/// nothing for objects already satisfied. These are the ops
/// [`diff`](crate::diff()) sends for those objects (leaves before classes).
/// An object the model lacks, under another parent, or a leaf of another
/// kind is an error: diff the whole tree instead.
pub fn known_diff<'a>(
    model: &TcTree,
    ops: impl IntoIterator<Item = &'a TcOp>,
) -> Result<Vec<TcOp>, KnownDiffError> {
    let mut leaves = Vec::new();
    let mut classes = Vec::new();
    // The model's classes with children, read only for a class whose
    // quantum or prio alone differs.
    let mut inner = None;
    for op in ops {
        match op {
            TcOp::AddClass(nc) => match model.classes.get(&nc.classid) {
                Some(oc) if oc.parent == nc.parent => {
                    let satisfied = class_satisfies(oc, nc, false)
                        || (class_satisfies(oc, nc, true)
                            && inner
                                .get_or_insert_with(|| rules::parents(model))
                                .contains(&nc.classid));
                    if !satisfied {
                        classes.push(TcOp::ChangeClass(nc.clone()));
                    }
                }
                _ => return Err(KnownDiffError::ClassNotInModel(nc.classid)),
            },
            TcOp::AddQdisc(nq) => match model.qdiscs.get(&nq.handle) {
                Some(oq) if oq.parent == nq.parent && oq.kind.name() == nq.kind.name() => {
                    if !kind_satisfies(&oq.kind, &nq.kind) {
                        leaves.push(TcOp::ReplaceQdisc(Qdisc {
                            kind: reset_kind(&oq.kind, &nq.kind),
                            ..nq.clone()
                        }));
                    }
                }
                _ => return Err(KnownDiffError::QdiscNotAsPlanned(nq.handle)),
            },
            op => return Err(KnownDiffError::NotClassOrLeaf(Box::new(op.clone()))),
        }
    }
    leaves.extend(classes);
    Ok(leaves)
}

/// Why [`known_diff`] cannot give the ops (diff the whole tree instead).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KnownDiffError {
    /// The class is not in the model, or hangs under another parent there.
    #[error("class {0} is not in the model")]
    ClassNotInModel(TcHandle),
    /// The leaf qdisc is not in the model, or is under another parent or of
    /// another kind there.
    #[error("qdisc {0} is not in the model as planned")]
    QdiscNotAsPlanned(TcHandle),
    /// An op that is not a class or leaf add (what a re-plan reports).
    #[error("not a class or leaf op: {0:?}")]
    NotClassOrLeaf(Box<TcOp>),
}
