//! The planner: `Network` + `PlanConfig` (+ previous allocation) -> `Plan`.
//!
//! [`plan`] runs five stages, one file each, each a function of the ones
//! before: [`hierarchy`] (nodes, parents, rates, leaf kinds), [`queues`] (a
//! queue per top-level subtree), [`ids`] (class minors and leaf majors),
//! [`build`] (the ops and the allocation) and [`classifier`] (the IP map
//! with its stable filter handles, and the classifier's ops). Around them:
//! the plan's types ([`types`]), its errors ([`error`]), the rate and
//! quantum math ([`rates`]), the leaf choice ([`leaf`]), the per-queue
//! layout ([`layout`]), the bit allocator ([`bits`]), the previous
//! allocation's index ([`previous`]), the IP map entries ([`ip_map`]) and
//! the incremental re-plan of a few circuits ([`replan`]), which reuses the
//! stages' helpers.

mod bits;
mod build;
mod classifier;
#[cfg(test)]
mod fixture;
mod hierarchy;
mod ids;
mod ip_map;
mod layout;
mod leaf;
mod previous;
mod queues;
mod rates;
pub mod replan;
mod types;

pub use crate::error::PlanError;
pub(crate) use ip_map::filter_slots;
pub use layout::default_leaf_major;
pub use rates::{
    default_class_rate, just_below, quantum_for, r2q_for, squashed_min, squashed_rate, squashes,
    MIN_RATE, QUANTUM_MAX, QUANTUM_MIN,
};
pub use types::{
    Allocation, CircuitSlot, Direction, FilterSlot, InterfacePlan, NodeSlot, Plan, Squashed,
};

use crate::handle::TcHandle;
use crate::plan_config::PlanConfig;
use lqos_model::Network;

use build::build;
use classifier::classify_stage;
use hierarchy::hierarchy;
use ids::ids;
use previous::Previous;
use queues::queues;

/// Handle of the mq root on every interface.
pub const MQ_HANDLE: TcHandle = TcHandle::new(0x7fff, 0);

/// Plans the trees for `net`.
///
/// With `previous` (the allocation of the last plan, made for the same
/// number of queues), nodes and circuits that still exist keep their queue,
/// classid and leaf handle; new ones take the lowest free minors; removed
/// ones free theirs.
///
/// The work is five stages, each a function of the ones before:
/// `hierarchy` (nodes, parents, rates, leaf kinds), `queues` (a queue per
/// top-level subtree), `ids` (class minors and leaf majors), `build`
/// (the ops and the allocation) and `classify_stage` (the IP map with its
/// stable filter handles, and the classifier's ops with the tc classifier).
///
/// ```
/// use lqos_model::{Circuit, Network, Node, Rate};
/// use lqos_tc::{plan, PlanConfig};
/// let mut net = Network::new();
/// net.add_node(None, Node { name: "Site".into(), id: None, node_type: None,
///     download: Rate::from_mbps(500), upload: Rate::from_mbps(100), virtual_node: false }).unwrap();
/// net.add_circuit(Circuit { id: "c1".into(), name: "One".into(), parent: Some("Site".into()),
///     download_min: Rate::from_mbps(10), upload_min: Rate::from_mbps(2),
///     download_max: Rate::from_mbps(100), upload_max: Rate::from_mbps(20),
///     comment: Default::default(), sqm: None, devices: vec![] });
/// let p = plan(&net, &PlanConfig::bridge("ens19", "ens20", 2), None).unwrap();
/// assert_eq!(p.interfaces.len(), 2);
/// assert_eq!(p.interfaces[0].queue_class_counts.iter().sum::<usize>(), 2 * 2 + 2);
/// ```
pub fn plan(
    net: &Network,
    cfg: &PlanConfig,
    previous: Option<&Allocation>,
) -> Result<Plan, PlanError> {
    cfg.validate()?;
    let prev = Previous::new(previous, cfg.queues_per_direction() as usize);
    let h = hierarchy(net, cfg, &prev)?;
    let queue = queues(&h, cfg, &prev);
    let ids = ids(&h, &queue, cfg, &prev)?;
    let mut plan = build(h, &queue, &ids, cfg);
    if cfg.observe {
        observe_only(&mut plan);
        return Ok(plan);
    }
    classify_stage(&mut plan, net.circuits(), previous);
    Ok(plan)
}

/// LibreQoS's `queue_mode = "observe"`: each interface keeps only its
/// `mq` root (nothing when the root would be an HTB: an interface with one
/// TX queue keeps the kernel's default), no classifier, an empty IP map.
/// The allocation stays, so shaping again keeps the classids.
fn observe_only(plan: &mut Plan) {
    for ip in &mut plan.interfaces {
        ip.ops.truncate(1);
        ip.ops.retain(
            |op| matches!(op, crate::op::TcOp::ReplaceQdisc(q) if q.kind == crate::ops::QdiscKind::Mq),
        );
        ip.setup_ops = ip.ops.len();
        ip.queue_class_counts.clear();
    }
}
