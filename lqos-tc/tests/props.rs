//! Property tests: plans are valid on the kernel model, render/parse round
//! trips, diffs are minimal and correct, allocations are stable.

mod common;

use std::collections::HashMap;

use common::*;
use lqos_model::{Network, Rate};
use lqos_tc::allocation::Direction;
use lqos_tc::config::{Interfaces, LeafSpec, QueueStrategy};
use lqos_tc::diff;
use lqos_tc::parse::parse_batch;
use lqos_tc::rates::{QUANTUM_MAX, QUANTUM_MIN};
use lqos_tc::render::{render_combined, render_interface};
use lqos_tc::rules::tree_satisfies;
use lqos_tc::tree::TcTree;
use lqos_tc::{plan, Plan, PlanConfig, TcHandle, TcOp};
use proptest::prelude::*;

fn node_spec() -> impl Strategy<Value = NodeSpec> {
    (
        proptest::option::weighted(0.7, 0usize..40),
        proptest::bool::weighted(0.15),
        0..RATES.len(),
        0..RATES.len(),
    )
        .prop_map(|(parent, virt, down, up)| NodeSpec {
            parent,
            virt,
            down,
            up,
        })
}

fn circ_spec() -> impl Strategy<Value = CircSpec> {
    (
        proptest::option::weighted(0.85, 0usize..40),
        0..RATES.len(),
        0..RATES.len(),
        0..RATES.len(),
        0..RATES.len(),
        0..SQMS.len(),
    )
        .prop_map(|(parent, dmin, dmax, umin, umax, sqm)| CircSpec {
            id: 0,
            parent,
            dmin,
            dmax,
            umin,
            umax,
            sqm,
        })
}

#[derive(Debug, Clone)]
struct Case {
    nodes: Vec<NodeSpec>,
    circuits: Vec<CircSpec>,
    /// Per node: 0 keep, 1 drop, 2 change rates.
    node_mut: Vec<u8>,
    /// Per circuit: 0..=3 keep, 4 drop, 5 rates, 6 parent, 7 sqm.
    circ_mut: Vec<u8>,
    extra: Vec<CircSpec>,
    cfg: PlanConfig,
}

fn config() -> impl Strategy<Value = PlanConfig> {
    (
        1u32..6,
        any::<bool>(),
        any::<bool>(),
        0usize..5,
        prop::sample::select(vec![100u64, 1000, 10_000]),
    )
        .prop_map(|(queues, stick, rr, sqm, cap)| {
            let mut cfg = PlanConfig::bridge("ens19", "ens20", queues);
            if stick {
                cfg.queues = queues * 2;
                cfg.interfaces = Interfaces::OnAStick {
                    interface: "ens19".into(),
                    internet_vlan: 2,
                    network_vlan: 3,
                };
            }
            if rr {
                cfg.strategy = QueueStrategy::RoundRobin;
            }
            cfg.default_sqm = [
                "cake diffserv4",
                "cake besteffort rtt 300ms",
                "fq_codel",
                "pfifo limit 1000",
                "none",
            ][sqm]
                .parse()
                .unwrap();
            cfg.download_capacity = Rate::from_mbps(cap);
            cfg.upload_capacity = Rate::from_mbps(cap / 2);
            cfg
        })
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec(node_spec(), 0..25),
        prop::collection::vec(circ_spec(), 0..60),
        prop::collection::vec(0u8..3, 25),
        prop::collection::vec(0u8..8, 60),
        prop::collection::vec(circ_spec(), 0..10),
        config(),
    )
        .prop_map(
            |(nodes, mut circuits, node_mut, circ_mut, mut extra, cfg)| {
                for (i, c) in circuits.iter_mut().enumerate() {
                    c.id = i;
                }
                for (i, c) in extra.iter_mut().enumerate() {
                    c.id = 1000 + i;
                }
                Case {
                    nodes,
                    circuits,
                    node_mut,
                    circ_mut,
                    extra,
                    cfg,
                }
            },
        )
}

impl Case {
    fn before(&self) -> Network {
        build(&self.nodes, &vec![true; self.nodes.len()], &self.circuits)
    }

    fn after(&self) -> Network {
        let present: Vec<bool> = (0..self.nodes.len())
            .map(|i| self.node_mut[i] != 1)
            .collect();
        let nodes: Vec<NodeSpec> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let mut n = n.clone();
                if self.node_mut[i] == 2 {
                    n.down = (n.down + 3) % RATES.len();
                    n.up = (n.up + 5) % RATES.len();
                }
                n
            })
            .collect();
        let mut circuits = Vec::new();
        for (i, c) in self.circuits.iter().enumerate() {
            let mut c = c.clone();
            match self.circ_mut[i] {
                4 => continue,
                5 => {
                    c.dmax = (c.dmax + 1) % RATES.len();
                    c.umin = (c.umin + 2) % RATES.len();
                }
                6 => c.parent = c.parent.map(|p| p + 1).or(Some(0)),
                7 => c.sqm = (c.sqm + 1) % SQMS.len(),
                _ => {}
            }
            circuits.push(c);
        }
        circuits.extend(self.extra.iter().cloned());
        build(&nodes, &present, &circuits)
    }
}

fn check_plan(net: &Network, p: &Plan) -> Result<(), TestCaseError> {
    for ip in &p.interfaces {
        // Valid on the kernel model (parents first, unique handles, depth).
        let tree = ip
            .try_tree()
            .map_err(|(i, e)| TestCaseError::fail(format!("{}: op {i}: {e}", ip.dev)))?;
        prop_assert_eq!(&tree, &ip.tree());
        prop_assert!(!ip.ops.iter().any(|op| *op == TcOp::delete_root()));
        // Explicit, sane quantum everywhere.
        for c in tree.classes.values() {
            prop_assert!(
                (QUANTUM_MIN..=QUANTUM_MAX).contains(&c.htb.quantum),
                "{:?}",
                c
            );
            prop_assert!(c.htb.rate <= c.htb.ceil, "{:?}", c);
            prop_assert!(!c.htb.rate.is_zero());
        }
        // Every leaf qdisc has an explicit handle outside the HTB majors and 7fff:.
        let htbs = ip.htb_majors();
        for q in tree.qdiscs.values() {
            prop_assert!(q.handle != TcHandle::UNSPEC);
            if q.parent != TcHandle::ROOT && q.parent.major() != 0x7fff {
                prop_assert!(!htbs.contains(&q.handle.major()));
                prop_assert!(q.handle.major() != 0x7fff && q.handle.major() != 0xffff);
            }
        }
        // Per-queue counts add up.
        prop_assert_eq!(
            ip.queue_class_counts.iter().sum::<usize>(),
            tree.classes.len()
        );
        for (i, &m) in htbs.iter().enumerate() {
            prop_assert_eq!(tree.class_count_in(m), ip.queue_class_counts[i]);
        }
        // parse(render(x)) == x.
        let text = render_interface(ip, false);
        let parsed = parse_batch(&text).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert!(parsed.iter().all(|(d, _)| *d == ip.dev));
        let ops: Vec<TcOp> = parsed.into_iter().map(|(_, op)| op).collect();
        prop_assert_eq!(&ops, &ip.ops);
    }
    // Combined file: same ops per device, same relative order.
    let parsed =
        parse_batch(&render_combined(p, true)).map_err(|e| TestCaseError::fail(e.to_string()))?;
    for ip in &p.interfaces {
        let mine: Vec<&TcOp> = parsed
            .iter()
            .filter(|(d, _)| *d == ip.dev)
            .map(|(_, o)| o)
            .collect();
        prop_assert_eq!(mine[0], &TcOp::delete_root());
        prop_assert_eq!(mine.len() - 1, ip.ops.len());
        prop_assert!(mine[1..].iter().zip(&ip.ops).all(|(a, b)| *a == b));
    }
    // Download rates on the download side, upload on the upload side.
    let circuits: HashMap<&str, &lqos_model::Circuit> =
        net.circuits().iter().map(|c| (c.id.as_str(), c)).collect();
    let trees: Vec<(Direction, TcTree)> = match p.interfaces.as_slice() {
        [one] => vec![
            (Direction::Download, one.tree()),
            (Direction::Upload, one.tree()),
        ],
        [d, u] => vec![
            (Direction::Download, d.tree()),
            (Direction::Upload, u.tree()),
        ],
        _ => unreachable!(),
    };
    // Per node: its circuits' count and summed minimums (LibreQoS squashes
    // them all when the sums exceed what the node guarantees).
    let mut per_node: HashMap<u32, (u64, u64, u64)> = HashMap::new();
    for slot in &p.allocation.circuits {
        let c = circuits[slot.id.as_str()];
        let e = per_node.entry(slot.parent).or_default();
        *e = (
            e.0 + 1,
            e.1 + c.download_min.bps(),
            e.2 + c.upload_min.bps(),
        );
    }
    let mut flags: HashMap<u32, bool> = HashMap::new();
    for slot in &p.allocation.circuits {
        let c = circuits[slot.id.as_str()];
        let (n, sum_d, sum_u) = per_node[&slot.parent];
        let node = |dir: Direction, tree: &TcTree| {
            let id = TcHandle::new(p.major(dir, slot.queue), slot.minor);
            tree.classes[&tree.classes[&id].parent].htb.rate
        };
        let (nd, nu) = (
            node(Direction::Download, &trees[0].1),
            node(Direction::Upload, &trees[1].1),
        );
        let squashed =
            lqos_tc::rates::squashes(Rate::from_bps(sum_d), Rate::from_bps(sum_u), nd, nu);
        flags.insert(slot.parent, squashed);
        for (dir, tree) in &trees {
            let id = TcHandle::new(p.major(*dir, slot.queue), slot.minor);
            let class = &tree.classes[&id];
            let parent_ceil = tree.classes[&class.parent].htb.ceil;
            let (min, max) = match dir {
                Direction::Download => (c.download_min, c.download_max),
                _ => (c.upload_min, c.upload_max),
            };
            prop_assert_eq!(class.htb.ceil, max.min(parent_ceil), "{:?} {:?}", dir, slot);
            if squashed {
                let m = lqos_tc::rates::squashed_min(n, nd, nu);
                prop_assert_eq!(
                    class.htb.rate,
                    lqos_tc::rates::squashed_rate(m, class.htb.ceil)
                );
            } else if min < class.htb.ceil {
                prop_assert_eq!(class.htb.rate, min);
            }
            prop_assert!(class.htb.rate <= class.htb.ceil);
            prop_assert_eq!(class.htb.prio, 3);
        }
    }
    // The planner reports exactly the squashed nodes, with their numbers.
    let reported: HashMap<&str, &lqos_tc::rates::Squashed> =
        p.squashed.iter().map(|s| (s.node.as_str(), s)).collect();
    prop_assert_eq!(reported.len(), p.squashed.len());
    prop_assert_eq!(reported.len(), flags.values().filter(|&&f| f).count());
    for (parent, squashed) in flags {
        let (n, sum_d, sum_u) = per_node[&parent];
        match reported.get(parent_name(p, parent)) {
            Some(s) => {
                prop_assert!(squashed);
                prop_assert_eq!(u64::from(s.circuits), n);
                prop_assert_eq!((s.asked_down.bps(), s.asked_up.bps()), (sum_d, sum_u));
            }
            None => prop_assert!(!squashed),
        }
    }
    Ok(())
}

fn parent_name(p: &Plan, slot_parent: u32) -> &str {
    &p.allocation.nodes[slot_parent as usize].name
}

fn top_name(p: &Plan, mut i: u32) -> &str {
    while let Some(pi) = p.allocation.nodes[i as usize].parent {
        i = pi;
    }
    &p.allocation.nodes[i as usize].name
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn plans_are_valid_and_round_trip(c in case()) {
        let net = c.before();
        let p = plan(&net, &c.cfg, None).map_err(|e| TestCaseError::fail(e.to_string()))?;
        check_plan(&net, &p)?;
        // Serde round trip.
        let json = serde_json::to_string(&p).unwrap();
        let back: Plan = serde_json::from_str(&json).unwrap();
        prop_assert_eq!(&back, &p);
        // diff(a, a) is empty.
        for ip in &p.interfaces {
            prop_assert!(diff(&ip.tree(), &ip.tree()).is_empty());
        }
        // Re-planning with the allocation reproduces the plan exactly.
        let again = plan(&net, &c.cfg, Some(&p.allocation)).unwrap();
        prop_assert_eq!(&again, &p);
    }

    #[test]
    fn diffs_are_valid_and_reach_the_new_plan(c in case()) {
        let (n1, n2) = (c.before(), c.after());
        let p1 = plan(&n1, &c.cfg, None).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let p2 = plan(&n2, &c.cfg, Some(&p1.allocation)).map_err(|e| TestCaseError::fail(e.to_string()))?;
        check_plan(&n2, &p2)?;
        for (a, b) in p1.interfaces.iter().zip(&p2.interfaces) {
            let (ta, tb) = (a.tree(), b.tree());
            let ops = diff(&ta, &tb);
            let mut t = ta.clone();
            t.apply_all(&ops).map_err(|(i, e)| TestCaseError::fail(format!("diff op {i}: {e}")))?;
            prop_assert!(tree_satisfies(&t, &tb));
            prop_assert!(diff(&t, &tb).is_empty());
            // Same layout: never a rebuild.
            prop_assert!(!ops.iter().any(|o| *o == TcOp::delete_root() || matches!(o, TcOp::ReplaceQdisc(q) if q.parent == TcHandle::ROOT)));
            // A changed class is changed in place, never deleted and re-added
            // under the same parent.
            for op in &ops {
                if let TcOp::DeleteClass { classid, .. } = op {
                    let readded = ops.iter().any(|o| matches!(o, TcOp::AddClass(c) if c.classid == *classid && ta.classes[classid].parent == c.parent));
                    prop_assert!(!readded || moved_ancestor(&ta, &tb, *classid), "{classid} re-added without a move");
                }
            }
        }
        // Stable allocation: survivors under the same parent keep queue and classid.
        let old: HashMap<&str, _> = p1.allocation.circuits.iter().map(|s| (s.id.as_str(), s)).collect();
        for s in &p2.allocation.circuits {
            if let Some(o) = old.get(s.id.as_str()) {
                if parent_name(&p1, o.parent) == parent_name(&p2, s.parent) {
                    prop_assert_eq!((o.queue, o.minor), (s.queue, s.minor), "circuit {}", s.id);
                }
            }
        }
        let old_nodes: HashMap<&str, _> = p1.allocation.nodes.iter().enumerate().map(|(i, s)| (s.name.as_str(), (i, s))).collect();
        for (i, s) in p2.allocation.nodes.iter().enumerate() {
            if let Some((oi, o)) = old_nodes.get(s.name.as_str()) {
                if top_name(&p1, *oi as u32) == top_name(&p2, i as u32) {
                    prop_assert_eq!((o.queue, o.minor), (s.queue, s.minor), "node {}", s.name);
                }
            }
        }
    }

    #[test]
    fn diff_between_unrelated_plans(a in case(), b in case()) {
        let pa = plan(&a.before(), &a.cfg, None).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mut cfg_b = b.cfg.clone();
        cfg_b.interfaces = a.cfg.interfaces.clone();
        if matches!(cfg_b.interfaces, Interfaces::OnAStick { .. }) { cfg_b.queues = cfg_b.queues.max(2); }
        let pb = plan(&b.after(), &cfg_b, None).map_err(|e| TestCaseError::fail(e.to_string()))?;
        for (x, y) in pa.interfaces.iter().zip(&pb.interfaces) {
            let (tx, ty) = (x.tree(), y.tree());
            let ops = diff(&tx, &ty);
            let mut t = tx.clone();
            t.apply_all(&ops).map_err(|(i, e)| TestCaseError::fail(format!("diff op {i} {:?}: {e}", ops[i])))?;
            prop_assert!(tree_satisfies(&t, &ty));
            prop_assert!(diff(&t, &ty).is_empty());
            // From nothing: the full build.
            let mut fresh = TcTree::default();
            fresh.apply_all(&diff(&TcTree::default(), &ty)).map_err(|(i, e)| TestCaseError::fail(format!("{i}: {e}")))?;
            prop_assert_eq!(&fresh, &ty);
        }
    }

    #[test]
    fn kernel_readback_details_do_not_cause_ops(c in case(), burst in 1600u32..100_000) {
        let p = plan(&c.before(), &c.cfg, None).map_err(|e| TestCaseError::fail(e.to_string()))?;
        for ip in &p.interfaces {
            let want = ip.tree();
            let mut live = want.clone();
            for cl in live.classes.values_mut() {
                cl.htb.burst = Some(burst);
                cl.htb.cburst = Some(burst + 1);
                // The kernel keeps bytes/s: sub-byte differences vanish.
                cl.htb.rate = Rate::from_bps(cl.htb.rate.bytes_per_sec() * 8);
                cl.htb.ceil = Rate::from_bps(cl.htb.ceil.bytes_per_sec() * 8);
            }
            for q in live.qdiscs.values_mut() {
                match &mut q.kind {
                    lqos_tc::ops::QdiscKind::Pfifo { limit } if limit.is_none() => *limit = Some(1000),
                    lqos_tc::ops::QdiscKind::Htb(h) => { h.r2q = Some(10); h.direct_qlen = Some(1000); }
                    lqos_tc::ops::QdiscKind::Cake(cp) => { cp.flow_mode.get_or_insert(lqos_tc::options::CakeFlowMode::TripleIsolate); cp.rtt_us.get_or_insert(100_000); cp.bandwidth.get_or_insert(Rate::ZERO); }
                    lqos_tc::ops::QdiscKind::FqCodel(f) => { f.limit.get_or_insert(10240); f.ecn.get_or_insert(true); }
                    _ => {}
                }
            }
            // A kernel-created default qdisc (handle 0:).
            live.qdiscs.insert(TcHandle::UNSPEC, lqos_tc::ops::Qdisc { parent: TcHandle::new(1, 2), handle: TcHandle::UNSPEC, kind: lqos_tc::ops::QdiscKind::Pfifo { limit: Some(1000) } });
            prop_assert!(tree_satisfies(&live, &want));
            let ops = diff(&live, &want);
            prop_assert!(ops.is_empty(), "{:?}", &ops[..ops.len().min(5)]);
        }
    }
}

fn moved_ancestor(old: &TcTree, new: &TcTree, mut id: TcHandle) -> bool {
    loop {
        match (old.classes.get(&id), new.classes.get(&id)) {
            (Some(o), Some(n)) if o.parent != n.parent => return true,
            (Some(o), _) if o.parent == id.qdisc() => return false,
            (Some(o), Some(_)) => id = o.parent,
            _ => return true,
        }
    }
}

#[test]
fn default_sqm_specs_parse() {
    for s in [
        "cake diffserv4",
        "cake besteffort rtt 300ms",
        "fq_codel",
        "pfifo",
        "pfifo limit 1000",
        "none",
    ] {
        let spec: LeafSpec = s.parse().unwrap();
        assert_eq!(spec.to_string(), s);
    }
    assert!("sfq".parse::<LeafSpec>().is_err());
    assert!("cake turbo".parse::<LeafSpec>().is_err());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// `lqos gen`'s networks guarantee every circuit's minimum (no node is
    /// squashed, on any queue count) unless asked for oversubscribed ones.
    #[test]
    fn generated_networks_guarantee_every_minimum_unless_oversubscribed(
        circuits in 1usize..3000,
        seed in any::<u64>(),
        depth in 0usize..4,
        fanout in 1usize..5,
        skew in 0.0f64..2.0,
        queues in 1u32..17,
    ) {
        let params = { let mut p = lqos_model::GenParams::with_circuits(circuits); p.seed = seed; p.depth = depth; p.fanout = fanout; p.site_skew = skew; p };
        let g = lqos_model::generate(&params);
        let cfg = PlanConfig::from_lqos_config(&g.config, queues).unwrap();
        let p = plan(&g.network, &cfg, None).unwrap();
        prop_assert!(p.squashed.is_empty(), "{:?}", p.squashed);
    }
}

/// The default network asked oversubscribed: minimums of a quarter of
/// each maximum, more than the APs guarantee, squashed and reported.
#[test]
fn oversubscribed_generated_networks_are_squashed_and_reported() {
    let g = lqos_model::generate(&{
        let mut p = lqos_model::GenParams::with_circuits(10_000);
        p.oversubscribed = true;
        p
    });
    let cfg = PlanConfig::from_lqos_config(&g.config, 16).unwrap();
    let p = plan(&g.network, &cfg, None).unwrap();
    assert_eq!(p.squashed.len(), 64, "every AP");
    assert!(p.squashed.iter().all(|s| s.asked_down > s.fits_down));
    assert_eq!(p.squashed.iter().map(|s| s.circuits).sum::<u32>(), 10_000);
}
