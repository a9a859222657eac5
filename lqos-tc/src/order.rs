//! Op orders for locality: one HTB subtree at a time, depth-first, a leaf
//! right after its class.
//!
//! The planner emits a full build as its setup (mq, HTBs, top and default
//! classes) followed by every node class and then every circuit class in
//! input order, so consecutive circuits jump between HTBs. [`locality_order`]
//! reorders such a build the way LibreQoS.py walks its tree: per HTB, per
//! node depth-first, the node's class, then its circuits (each class with its
//! leaf qdisc right after it), then its child nodes. Every parent still comes
//! before its children, so the result loads wherever the input did.

use std::collections::HashMap;

use crate::{TcHandle, TcOp};

/// Index of the first op that belongs to the site/circuit tree (an
/// `AddClass` with minor >= 3); everything before it is the setup.
pub fn setup_len(ops: &[TcOp]) -> usize {
    ops.iter()
        .position(|op| matches!(op, TcOp::AddClass(c) if c.classid.minor() >= 3))
        .unwrap_or(ops.len())
}

/// `ops` (one interface's full build) in locality order: the setup as it
/// is, then per HTB (by major, in order of first appearance) the class tree
/// depth-first, each class followed by the qdiscs attached to it, classes
/// without children (circuits) before classes with children (nodes), ties in
/// stream order. A stream with anything but `AddClass`/`AddQdisc` after its
/// setup (an incremental change) is returned unchanged.
pub fn locality_order(ops: &[TcOp]) -> Vec<TcOp> {
    into_locality_order(ops.to_vec())
}

/// [`locality_order`], moving the ops instead of cloning them.
pub fn into_locality_order(mut ops: Vec<TcOp>) -> Vec<TcOp> {
    let setup = setup_len(&ops);
    if !ops[setup..]
        .iter()
        .all(|op| matches!(op, TcOp::AddClass(_) | TcOp::AddQdisc(_)))
    {
        return ops;
    }
    let tree = &ops[setup..];
    // Class index by classid, children and attached qdiscs by parent class.
    let mut class_at: HashMap<TcHandle, usize> = HashMap::with_capacity(tree.len());
    for (i, op) in tree.iter().enumerate() {
        if let TcOp::AddClass(c) = op {
            class_at.insert(c.classid, i);
        }
    }
    let mut children: HashMap<TcHandle, Vec<usize>> = HashMap::new();
    let mut qdiscs: HashMap<TcHandle, Vec<usize>> = HashMap::new();
    let mut roots: Vec<usize> = Vec::new();
    let mut loose: Vec<usize> = Vec::new();
    for (i, op) in tree.iter().enumerate() {
        match op {
            TcOp::AddClass(c) if class_at.contains_key(&c.parent) => {
                children.entry(c.parent).or_default().push(i)
            }
            TcOp::AddClass(_) => roots.push(i),
            TcOp::AddQdisc(q) if class_at.contains_key(&q.parent) => {
                qdiscs.entry(q.parent).or_default().push(i)
            }
            _ => loose.push(i),
        }
    }
    let classid = |i: usize| match &tree[i] {
        TcOp::AddClass(c) => c.classid,
        _ => unreachable!("only classes are visited"),
    };
    // One HTB at a time, in order of first appearance.
    let mut first_seen: HashMap<u16, usize> = HashMap::new();
    for (n, &r) in roots.iter().enumerate() {
        first_seen.entry(classid(r).major()).or_insert(n);
    }
    roots.sort_by_key(|&r| first_seen[&classid(r).major()]);

    // The visiting order as indices into `tree`; explicit stack (reversed
    // pushes keep the visiting order).
    let mut order: Vec<usize> = Vec::with_capacity(tree.len());
    let mut stack: Vec<usize> = roots.into_iter().rev().collect();
    while let Some(i) = stack.pop() {
        let id = classid(i);
        order.push(i);
        if let Some(qs) = qdiscs.get(&id) {
            order.extend(qs);
        }
        if let Some(kids) = children.get(&id) {
            let (leaves, inner): (Vec<usize>, Vec<usize>) = kids
                .iter()
                .partition(|&&k| !children.contains_key(&classid(k)));
            stack.extend(inner.iter().rev());
            stack.extend(leaves.iter().rev());
        }
    }
    order.extend(loose);
    drop((class_at, children, qdiscs));
    let mut slots: Vec<Option<TcOp>> = ops.drain(setup..).map(Some).collect();
    ops.extend(order.into_iter().filter_map(|i| slots[i].take()));
    ops
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PlanConfig;

    fn build(circuits: usize) -> Vec<TcOp> {
        let g = lqos_model::generate(&lqos_model::GenParams {
            circuits,
            seed: 3,
            ..Default::default()
        });
        let cfg = PlanConfig::bridge("ens19", "ens20", 4);
        crate::plan(&g.network, &cfg, None).unwrap().interfaces[0]
            .ops
            .clone()
    }

    #[test]
    fn same_ops_same_tree_one_htb_at_a_time() {
        let ops = build(300);
        let ordered = locality_order(&ops);
        assert_eq!(ordered.len(), ops.len());
        // Same multiset of ops, and loading either gives the same tree.
        let mut a = ops.clone();
        let mut b = ordered.clone();
        let key = |o: &TcOp| format!("{o:?}");
        a.sort_by_key(key);
        b.sort_by_key(key);
        assert_eq!(a, b);
        let mut ta = crate::TcTree::default();
        let mut tb = crate::TcTree::default();
        ta.apply_all(&ops).unwrap();
        tb.apply_all(&ordered).unwrap();
        assert_eq!(ta, tb);
        // After the setup, the HTB major changes once per HTB only.
        let majors: Vec<u16> = ordered[setup_len(&ordered)..]
            .iter()
            .filter_map(|o| match o {
                TcOp::AddClass(c) => Some(c.classid.major()),
                _ => None,
            })
            .collect();
        let switches = majors.windows(2).filter(|w| w[0] != w[1]).count();
        assert!(switches < 4, "{switches} HTB switches");
        // Every leaf qdisc directly follows its class.
        for (i, o) in ordered.iter().enumerate().skip(setup_len(&ordered)) {
            if let TcOp::AddQdisc(q) = o {
                match &ordered[i - 1] {
                    TcOp::AddClass(c) => assert_eq!(c.classid, q.parent),
                    other => panic!("qdisc {q:?} after {other:?}"),
                }
            }
        }
    }

    #[test]
    fn incremental_streams_are_left_alone() {
        let mut ops = build(50);
        ops.push(TcOp::DeleteClass {
            parent: TcHandle::new(1, 1),
            classid: TcHandle::new(1, 3),
        });
        assert_eq!(locality_order(&ops), ops);
    }
}
