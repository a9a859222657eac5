//! Stage 4: the ops per interface and the allocation.

use super::hierarchy::Hierarchy;
use super::ids::Ids;
use super::layout::{devices, layout_ops, single_queue};
use super::leaf::NO_LEAF;
use super::rates::{htb_class, just_below, r2q_for};
use super::{Allocation, Direction, InterfacePlan, NodeSlot, Plan, MQ_HANDLE};
use crate::config::Interfaces;
use crate::handle::TcHandle;
use crate::ipmap::IpMap;
use crate::op::TcOp;
use crate::ops::{Qdisc, QdiscKind};
use crate::plan_config::PlanConfig;

/// Stage 4: the ops per interface (the queue layout, then every node
/// parents first, top-level nodes at their HTB's root beside `:1` as in
/// LibreQoS, then every circuit: class, then its leaf) and the allocation
/// to feed back next time. Quantums use LibreQoS's bakery's r2q: the
/// larger link's for `:1` and `:2`, each direction's own link's for nodes
/// and circuits.
pub(super) fn build(h: Hierarchy, queue: &[u32], ids: &Ids, cfg: &PlanConfig) -> Plan {
    let q = cfg.queues_per_direction() as usize;
    let stick = matches!(cfg.interfaces, Interfaces::OnAStick { .. });
    let n = h.ents.len();
    let r2q = r2q_for(cfg.download_capacity.max(cfg.upload_capacity));
    let (r2q_d, r2q_u) = (r2q_for(cfg.download_capacity), r2q_for(cfg.upload_capacity));
    let up_off = if stick { q as u16 } else { 0 };
    let leaves_d = h.circ.iter().filter(|p| p.leaf_d != NO_LEAF).count();
    let leaves_u = h.circ.iter().filter(|p| p.leaf_u != NO_LEAF).count();
    let est_d = 1 + 4 * q + n + h.circ.len() + leaves_d;
    let est_u = 1 + 4 * q + n + h.circ.len() + leaves_u;
    let mut ops_d: Vec<TcOp> = Vec::with_capacity(if stick { est_d + est_u } else { est_d });
    let mut ops_u: Vec<TcOp> = Vec::with_capacity(if stick { 0 } else { est_u });
    let root = if single_queue(cfg) {
        TcOp::ReplaceQdisc(Qdisc::htb(TcHandle::ROOT, 1, 2))
    } else {
        TcOp::ReplaceQdisc(Qdisc::root(MQ_HANDLE, QdiscKind::Mq))
    };
    ops_d.push(root.clone());
    if !stick {
        ops_u.push(root);
    }
    layout_ops(&mut ops_d, cfg, cfg.download_capacity, 0, r2q);
    if stick {
        layout_ops(&mut ops_d, cfg, cfg.upload_capacity, up_off, r2q);
    } else {
        layout_ops(&mut ops_u, cfg, cfg.upload_capacity, 0, r2q);
    }
    let setup_d = ops_d.len();
    let setup_u = ops_u.len();
    let node_minor = &ids.node_minor;
    let mut counts_d = vec![2usize; q];
    for (e, ent) in h.ents.iter().enumerate() {
        let qe = queue[e] as u16;
        let (md, mu) = (qe + 1, qe + 1 + up_off);
        let (pd, pu) = match ent.parent {
            Some(p) => {
                let pm = node_minor[p as usize];
                (TcHandle::new(md, pm), TcHandle::new(mu, pm))
            }
            None => (TcHandle::new(md, 0), TcHandle::new(mu, 0)),
        };
        let minor = node_minor[e];
        let (cd, cu) = (h.ceil_d[e], h.ceil_u[e]);
        counts_d[qe as usize] += 1;
        ops_d.push(htb_class(
            pd,
            TcHandle::new(md, minor),
            just_below(cd),
            cd,
            3,
            r2q_d,
        ));
        let up_ops = if stick { &mut ops_d } else { &mut ops_u };
        up_ops.push(htb_class(
            pu,
            TcHandle::new(mu, minor),
            just_below(cu),
            cu,
            3,
            r2q_u,
        ));
    }
    for ((r, c), &e) in h.circ.iter().zip(&ids.circ).zip(&h.circ_ent) {
        let e = e as usize;
        let qe = queue[e] as u16;
        let (md, mu) = (qe + 1, qe + 1 + up_off);
        counts_d[qe as usize] += 1;
        let (nd, nu) = (
            TcHandle::new(md, node_minor[e]),
            TcHandle::new(mu, node_minor[e]),
        );
        let (cid_d, cid_u) = (TcHandle::new(md, c.minor), TcHandle::new(mu, c.minor));
        ops_d.push(htb_class(nd, cid_d, r.rate_d, r.ceil_d, 3, r2q_d));
        if r.leaf_d != NO_LEAF {
            ops_d.push(TcOp::AddQdisc(Qdisc::leaf(
                cid_d,
                c.major_d,
                h.kinds[r.leaf_d as usize].clone(),
            )));
        }
        let up_ops = if stick { &mut ops_d } else { &mut ops_u };
        up_ops.push(htb_class(nu, cid_u, r.rate_u, r.ceil_u, 3, r2q_u));
        if r.leaf_u != NO_LEAF {
            up_ops.push(TcOp::AddQdisc(Qdisc::leaf(
                cid_u,
                c.major_u,
                h.kinds[r.leaf_u as usize].clone(),
            )));
        }
    }

    let nodes: Vec<NodeSlot> = h
        .ents
        .iter()
        .enumerate()
        .map(|(e, ent)| NodeSlot {
            name: ent.name.to_string(),
            parent: ent.parent,
            queue: queue[e],
            minor: node_minor[e],
            generated: ent.generated,
        })
        .collect();
    let mut slots = h.slots;
    for (((slot, r), c), &e) in slots
        .iter_mut()
        .zip(&h.circ)
        .zip(&ids.circ)
        .zip(&h.circ_ent)
    {
        slot.parent = e;
        slot.queue = queue[e as usize];
        slot.minor = c.minor;
        slot.leaf_download = (r.leaf_d != NO_LEAF).then_some(c.major_d);
        slot.leaf_upload = (r.leaf_u != NO_LEAF).then_some(c.major_u);
    }

    // Locality: one HTB subtree at a time, a leaf right after its class.
    let ops_d = crate::order::into_locality_order(ops_d);
    let ops_u = crate::order::into_locality_order(ops_u);
    let (dev_d, dev_u) = devices(cfg);
    let interfaces = if stick {
        let mut counts = counts_d.clone();
        counts.extend_from_slice(&counts_d);
        vec![InterfacePlan {
            dev: dev_d,
            direction: Direction::Both,
            ops: ops_d,
            setup_ops: setup_d,
            queue_class_counts: counts,
        }]
    } else {
        vec![
            InterfacePlan {
                dev: dev_d,
                direction: Direction::Download,
                ops: ops_d,
                setup_ops: setup_d,
                queue_class_counts: counts_d.clone(),
            },
            InterfacePlan {
                dev: dev_u,
                direction: Direction::Upload,
                ops: ops_u,
                setup_ops: setup_u,
                queue_class_counts: counts_d,
            },
        ]
    };
    Plan {
        config: cfg.clone(),
        interfaces,
        allocation: Allocation {
            queues: q as u32,
            nodes,
            circuits: slots,
            filters: Vec::new(),
        },
        ip_map: IpMap::default(),
        squashed: h.squashed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::fixture::*;

    #[test]
    fn build_emits_layout_then_nodes_then_circuits() {
        let (net, c) = (net(), cfg(2));
        let none = Previous::new(None, 2);
        let h = hierarchy(&net, &c, &none).unwrap();
        let queue = queues(&h, &c, &none);
        let ids = ids(&h, &queue, &c, &none).unwrap();
        let p = build(h, &queue, &ids, &c);
        let down = &p.interfaces[0];
        // Root, then per queue: htb, :1, :2, default leaf.
        assert_eq!(down.setup_ops, 1 + 2 * 4);
        assert_eq!(
            down.ops[0],
            TcOp::ReplaceQdisc(Qdisc::root(MQ_HANDLE, QdiscKind::Mq))
        );
        // 5 node classes, then 4 circuits with a leaf each.
        assert_eq!(down.ops.len(), down.setup_ops + 5 + 4 * 2);
        let first_node = &down.ops[down.setup_ops];
        assert!(matches!(first_node, TcOp::AddClass(c) if c.classid == TcHandle::new(1, 3)));
        assert_eq!(down.queue_class_counts, [2 + 3 + 3, 2 + 2 + 1]);
        let slot = &p.allocation.circuits[3];
        assert_eq!(
            (slot.parent, slot.queue, slot.leaf_download),
            (3, 0, Some(8))
        );
        assert_eq!(p, plan(&net, &c, None).unwrap());
    }
}
