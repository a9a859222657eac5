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

use crate::handle::TcHandle;
use crate::op::TcOp;
use hashbrown::HashMap;

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
    let n = tree.len();
    // Class index by classid.
    let mut class_at: HashMap<TcHandle, u32> = HashMap::default();
    class_at.reserve(n);
    for (i, op) in tree.iter().enumerate() {
        if let TcOp::AddClass(c) = op {
            class_at.insert(c.classid, i as u32);
        }
    }
    // What each op hangs off: a parent class (as a child class or an
    // attached qdisc), a root, or nothing it knows (loose).
    const ROOT: u32 = u32::MAX;
    const LOOSE: u32 = u32::MAX - 1;
    let mut owner: Vec<u32> = Vec::with_capacity(n);
    let mut kids = vec![0u32; n + 1];
    let mut quals = vec![0u32; n + 1];
    for op in tree {
        let o = match op {
            TcOp::AddClass(c) => match class_at.get(&c.parent) {
                Some(&p) => {
                    kids[p as usize] += 1;
                    p
                }
                None => ROOT,
            },
            TcOp::AddQdisc(q) => match class_at.get(&q.parent) {
                Some(&p) => {
                    quals[p as usize] += 1;
                    p
                }
                None => LOOSE,
            },
            _ => LOOSE,
        };
        owner.push(o);
    }
    drop(class_at);
    let has_children: Vec<bool> = kids[..n].iter().map(|&k| k > 0).collect();
    // Children and attached qdiscs of each class, in stream order
    // (compressed rows: `kids[p]..kids[p + 1]` into `kid_list`).
    let prefix = |counts: &mut Vec<u32>| {
        let mut sum = 0;
        for c in counts.iter_mut() {
            let k = *c;
            *c = sum;
            sum += k;
        }
        sum as usize
    };
    let (nk, nq) = (prefix(&mut kids), prefix(&mut quals));
    let mut kid_list = vec![0u32; nk];
    let mut qdisc_list = vec![0u32; nq];
    let (mut kid_fill, mut qdisc_fill) = (kids.clone(), quals.clone());
    let mut roots: Vec<u32> = Vec::new();
    let mut loose: Vec<u32> = Vec::new();
    for (i, (&o, op)) in owner.iter().zip(tree).enumerate() {
        let i = i as u32;
        match (o, op) {
            (ROOT, _) => roots.push(i),
            (LOOSE, _) => loose.push(i),
            (p, TcOp::AddClass(_)) => {
                kid_list[kid_fill[p as usize] as usize] = i;
                kid_fill[p as usize] += 1;
            }
            (p, _) => {
                qdisc_list[qdisc_fill[p as usize] as usize] = i;
                qdisc_fill[p as usize] += 1;
            }
        }
    }
    drop((owner, kid_fill, qdisc_fill));
    let major = |i: u32| match &tree[i as usize] {
        TcOp::AddClass(c) => c.classid.major(),
        _ => unreachable!("only classes are visited"),
    };
    // One HTB at a time, in order of first appearance.
    let mut first_seen: HashMap<u16, usize> = HashMap::default();
    for (n, &r) in roots.iter().enumerate() {
        first_seen.entry(major(r)).or_insert(n);
    }
    roots.sort_by_key(|&r| first_seen[&major(r)]);

    // The visiting order as indices into `tree`; explicit stack (reversed
    // pushes keep the visiting order): per class its qdiscs, then its
    // children without children of their own (circuits), then the others.
    let mut order: Vec<u32> = Vec::with_capacity(n);
    let mut stack: Vec<u32> = roots.into_iter().rev().collect();
    while let Some(i) = stack.pop() {
        let iu = i as usize;
        order.push(i);
        order.extend_from_slice(&qdisc_list[quals[iu] as usize..quals[iu + 1] as usize]);
        let ks = &kid_list[kids[iu] as usize..kids[iu + 1] as usize];
        stack.extend(ks.iter().rev().filter(|&&k| has_children[k as usize]));
        stack.extend(ks.iter().rev().filter(|&&k| !has_children[k as usize]));
    }
    order.extend(loose);
    drop((kid_list, qdisc_list, kids, quals, has_children));
    if order.len() < n {
        // Classes no root reaches (a parent cycle, never in a plan): keep
        // them, in stream order, at the end.
        let mut seen = vec![false; n];
        for &i in &order {
            seen[i as usize] = true;
        }
        order.extend((0..n as u32).filter(|&i| !seen[i as usize]));
    }
    // Permute the tree part in place (position k takes op order[k]), cycle
    // by cycle: no second vector of ops.
    let tree = &mut ops[setup..];
    let mut done = vec![false; tree.len()];
    for start in 0..tree.len() {
        let mut cur = start;
        while !done[cur] {
            done[cur] = true;
            let next = order[cur] as usize;
            if next == start {
                break;
            }
            tree.swap(cur, next);
            cur = next;
        }
    }
    ops
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan_config::PlanConfig;

    fn build(circuits: usize) -> Vec<TcOp> {
        let g = lqos_model::generate(&{
            let mut p = lqos_model::GenParams::with_circuits(circuits);
            p.seed = 3;
            p
        });
        let cfg = PlanConfig::bridge("ens19", "ens20", 4);
        crate::plan::plan(&g.network, &cfg, None)
            .unwrap()
            .interfaces[0]
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
        let mut ta = crate::tree::TcTree::default();
        let mut tb = crate::tree::TcTree::default();
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
