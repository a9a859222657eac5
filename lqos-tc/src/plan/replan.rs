//! Re-planning a few circuits in place (the public face is
//! [`crate::replan`]).

use hashbrown::{HashMap, HashSet};

use ipnet::IpNet;
use lqos_model::{Circuit, Network, Rate, SmolStr};

use super::ip_map::push_circuit_entries;
use super::layout::devices;
use super::leaf::LeafChooser;
use super::rates::{circuit_rates, htb_class, r2q_for, squashed_min, squashed_rate, squashes};
use super::PlanError;
use crate::config::Interfaces;
use crate::handle::TcHandle;
use crate::ipmap::{sort_key, IpMap, IpMapEntry};
use crate::op::TcOp;
use crate::ops::Qdisc;
use crate::plan::{FilterSlot, Plan};
use lqos_model::config::Classifier;

/// Where the classes and leaf qdiscs are in a plan's op lists (per
/// interface: the op index of every `AddClass` by classid, of every leaf
/// `AddQdisc` by its parent class), and which circuits each node has.
/// Patching a plan with [`replan_circuits`] keeps it valid.
#[derive(Debug, Clone, Default)]
pub struct PlanIndex {
    classes: Vec<HashMap<TcHandle, usize>>,
    leaves: Vec<HashMap<TcHandle, usize>>,
    /// The allocation's circuits (indices) by parent node slot: an edit
    /// sums the minimums of its nodes' circuits without a walk over all
    /// of them.
    by_parent: HashMap<u32, Vec<u32>>,
}

impl PlanIndex {
    /// Indexes `plan`'s ops.
    pub fn new(plan: &Plan) -> PlanIndex {
        let mut classes = Vec::new();
        let mut leaves = Vec::new();
        for ip in &plan.interfaces {
            let mut c = HashMap::default();
            let mut l = HashMap::default();
            c.reserve(ip.ops.len() / 2);
            l.reserve(ip.ops.len() / 2);
            for (i, op) in ip.ops.iter().enumerate() {
                match op {
                    TcOp::AddClass(k) => {
                        c.insert(k.classid, i);
                    }
                    TcOp::AddQdisc(q) if q.parent.minor() != 0 && q.parent != TcHandle::ROOT => {
                        l.insert(q.parent, i);
                    }
                    _ => {}
                }
            }
            classes.push(c);
            leaves.push(l);
        }
        let mut by_parent: HashMap<u32, Vec<u32>> = HashMap::default();
        for (i, slot) in plan.allocation.circuits.iter().enumerate() {
            by_parent.entry(slot.parent).or_default().push(i as u32);
        }
        PlanIndex {
            classes,
            leaves,
            by_parent,
        }
    }
}

/// The outcome of [`replan_circuits`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Replan {
    /// The plan was patched: the ops that changed, as `(interface index,
    /// op index)` into `plan.interfaces[i].ops` (a circuit's class and
    /// leaf, also when they came out the same).
    Patched(Vec<(usize, usize)>),
    /// Not patched (the plan is unchanged): plan the whole network.
    Full(ReplanFallback),
}

/// Why [`replan_circuits`] refused an edit (the caller plans the whole
/// network). The daemon counts and logs these.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplanFallback {
    /// The changed circuits were not given by ascending index.
    #[error("the changed circuits are not in order")]
    NotInOrder,
    /// The plan was not made from this network (circuit or interface
    /// counts differ).
    #[error("the plan is not of this network")]
    OtherNetwork,
    /// A changed circuit's index is past the network's circuits.
    #[error("no such circuit")]
    NoSuchCircuit,
    /// A changed circuit's ID differs from the one at its slot.
    #[error("circuit {0:?} is not at its slot")]
    NotAtSlot(SmolStr),
    /// A class the circuit needs (its own or its parent's) is not in the
    /// plan.
    #[error("class {0} is not in the plan")]
    ClassNotInPlan(TcHandle),
    /// The [`PlanIndex`] points at an op that is not the class it names.
    #[error("the plan index is stale")]
    StaleIndex,
    /// The circuit's `sqm` override cannot be used.
    #[error("{0}")]
    Sqm(PlanError),
    /// The circuit gains or loses a leaf qdisc in a direction (its leaf
    /// handle would be allocated or freed).
    #[error("circuit {0:?} gains or loses a leaf qdisc")]
    LeafAddedOrRemoved(SmolStr),
    /// Device addresses changed while the `tc` classifier's filters are in
    /// the plan.
    #[error("addresses changed with the tc classifier")]
    AddressesWithTcClassifier,
    /// The edit changes whether the minimums of a node's circuits are
    /// squashed (LibreQoS's rule), which changes its other circuits too.
    #[error("the minimums of node {0:?}'s circuits become squashed or stop being squashed")]
    SquashChanges(String),
}

/// A node's circuits' minimums (bits/s) before and after an edit.
#[derive(Clone, Copy, Default)]
struct NodeMins {
    n: u64,
    old_d: u64,
    old_u: u64,
    new_d: u64,
    new_u: u64,
}

/// One direction's place of a circuit: interface, class op, leaf op.
struct Side {
    iface: usize,
    class_at: usize,
    leaf_at: Option<usize>,
    class: TcOp,
    leaf: Option<TcOp>,
}

/// Re-plans circuits in `plan`, which was planned from `old` (`index`
/// made from it): `new` holds `(index into old's circuits, its new
/// version)`, by ascending index. On [`Replan::Patched`] the plan equals a
/// full [`plan`](crate::plan) of `old` with those circuits replaced and the
/// old allocation as `previous`; on [`Replan::Full`] it is unchanged.
pub fn replan_circuits(
    plan: &mut Plan,
    index: &PlanIndex,
    old: &Network,
    new: &[(usize, Circuit)],
) -> Replan {
    match try_replan(plan, index, old, new) {
        Ok(at) => Replan::Patched(at),
        Err(why) => Replan::Full(why),
    }
}

fn try_replan(
    plan: &mut Plan,
    index: &PlanIndex,
    old: &Network,
    new: &[(usize, Circuit)],
) -> Result<Vec<(usize, usize)>, ReplanFallback> {
    if !new.windows(2).all(|w| w[0].0 < w[1].0) {
        return Err(ReplanFallback::NotInOrder);
    }
    let cfg = &plan.config;
    let olds = old.circuits();
    if olds.len() != plan.allocation.circuits.len() || index.classes.len() != plan.interfaces.len()
    {
        return Err(ReplanFallback::OtherNetwork);
    }
    let stick = matches!(cfg.interfaces, Interfaces::OnAStick { .. });
    let q = plan.allocation.queues;
    let (r2q_d, r2q_u) = (r2q_for(cfg.download_capacity), r2q_for(cfg.upload_capacity));
    // The minimums of the edited circuits' nodes, summed before and after
    // the edit (squashing depends on all of a node's circuits).
    let mut sums: HashMap<u32, NodeMins> = HashMap::default();
    for (ci, _) in new {
        if let Some(s) = plan.allocation.circuits.get(*ci) {
            sums.entry(s.parent).or_default();
        }
    }
    for (parent, m) in sums.iter_mut() {
        for &ci in index.by_parent.get(parent).into_iter().flatten() {
            let c = olds.get(ci as usize).ok_or(ReplanFallback::StaleIndex)?;
            m.n += 1;
            m.old_d += c.download_min.bps();
            m.old_u += c.upload_min.bps();
        }
    }
    for m in sums.values_mut() {
        (m.new_d, m.new_u) = (m.old_d, m.old_u);
    }
    for (ci, c) in new {
        if let (Some(slot), Some(old_c)) = (plan.allocation.circuits.get(*ci), olds.get(*ci)) {
            if let Some(m) = sums.get_mut(&slot.parent) {
                m.new_d = m.new_d - old_c.download_min.bps() + c.download_min.bps();
                m.new_u = m.new_u - old_c.upload_min.bps() + c.upload_min.bps();
            }
        }
    }
    let mut chooser = LeafChooser {
        cfg,
        cache: HashMap::default(),
    };
    let find_class =
        |iface: usize, id: TcHandle| -> Result<(usize, &crate::ops::Class), ReplanFallback> {
            let at = *index.classes[iface]
                .get(&id)
                .ok_or(ReplanFallback::ClassNotInPlan(id))?;
            match &plan.interfaces[iface].ops[at] {
                TcOp::AddClass(c) if c.classid == id => Ok((at, c)),
                _ => Err(ReplanFallback::StaleIndex),
            }
        };
    // Everything is computed before anything is changed.
    let mut sides: Vec<Side> = Vec::new();
    for (ci, c) in new {
        let ci = *ci;
        let old_c = olds.get(ci).ok_or(ReplanFallback::NoSuchCircuit)?;
        let slot = &plan.allocation.circuits[ci];
        if slot.id != c.id || old_c.id != c.id {
            return Err(ReplanFallback::NotAtSlot(c.id.clone()));
        }
        let md = slot.queue as u16 + 1;
        let mu = if stick { md + q as u16 } else { md };
        let (iface_d, iface_u) = if stick { (0, 0) } else { (0, 1) };
        let (at_d, old_d) = find_class(iface_d, TcHandle::new(md, slot.minor))?;
        let (at_u, old_u) = find_class(iface_u, TcHandle::new(mu, slot.minor))?;
        let (_, node_d) = find_class(iface_d, old_d.parent)?;
        let (_, node_u) = find_class(iface_u, old_u.parent)?;
        let (mut rate_d, ceil_d) = circuit_rates(c.download_min, c.download_max, node_d.htb.ceil);
        let (mut rate_u, ceil_u) = circuit_rates(c.upload_min, c.upload_max, node_u.htb.ceil);
        let m = sums.get(&slot.parent).copied().unwrap_or_default();
        let (nd, nu) = (node_d.htb.rate, node_u.htb.rate);
        let was = squashes(Rate::from_bps(m.old_d), Rate::from_bps(m.old_u), nd, nu);
        let is = squashes(Rate::from_bps(m.new_d), Rate::from_bps(m.new_u), nd, nu);
        if was != is {
            let node = plan.allocation.nodes.get(slot.parent as usize);
            return Err(ReplanFallback::SquashChanges(
                node.map(|n| n.name.clone()).unwrap_or_default(),
            ));
        }
        if is {
            let min = squashed_min(m.n, nd, nu);
            (rate_d, rate_u) = (squashed_rate(min, ceil_d), squashed_rate(min, ceil_u));
        }
        let (leaf_d, leaf_u) = chooser
            .choose(c, ceil_d, ceil_u)
            .map_err(ReplanFallback::Sqm)?;
        for (iface, at, old, rate, ceil, leaf, major, r2q) in [
            (
                iface_d,
                at_d,
                old_d,
                rate_d,
                ceil_d,
                leaf_d,
                slot.leaf_download,
                r2q_d,
            ),
            (
                iface_u,
                at_u,
                old_u,
                rate_u,
                ceil_u,
                leaf_u,
                slot.leaf_upload,
                r2q_u,
            ),
        ] {
            let leaf_at = index.leaves[iface].get(&old.classid).copied();
            let leaf = match (leaf, major, leaf_at) {
                (None, None, None) => None,
                (Some(k), Some(m), Some(_)) => Some(TcOp::AddQdisc(Qdisc::leaf(old.classid, m, k))),
                _ => return Err(ReplanFallback::LeafAddedOrRemoved(c.id.clone())),
            };
            sides.push(Side {
                iface,
                class_at: at,
                leaf_at,
                class: htb_class(old.parent, old.classid, rate, ceil, 3, r2q),
                leaf,
            });
        }
    }
    let ip = patch_ip_map(plan, olds, new)?;

    let mut at = Vec::with_capacity(sides.len() * 2);
    for s in sides {
        let ops = &mut plan.interfaces[s.iface].ops;
        ops[s.class_at] = s.class;
        at.push((s.iface, s.class_at));
        if let (Some(i), Some(op)) = (s.leaf_at, s.leaf) {
            ops[i] = op;
            at.push((s.iface, i));
        }
    }
    for (ci, c) in new {
        plan.allocation.circuits[*ci].name = c.name.clone();
    }
    // A node squashed before is squashed after (else the edit took the
    // full path): its circuits now ask for the new sums.
    for (parent, m) in &sums {
        let Some(node) = plan.allocation.nodes.get(*parent as usize) else {
            continue;
        };
        if let Some(sq) = plan.squashed.iter_mut().find(|s| s.node == node.name) {
            sq.asked_down = Rate::from_bps(m.new_d);
            sq.asked_up = Rate::from_bps(m.new_u);
        }
    }
    ip.apply(plan);
    Ok(at)
}

/// The IP map and filter slots after the change, computed but not applied.
enum IpPatch {
    /// The same prefixes: entries replaced in place (sorted positions).
    InPlace(Vec<(usize, IpMapEntry)>),
    /// Prefixes changed: the new map and filter slots.
    Rebuilt(IpMap, Vec<FilterSlot>),
}

impl IpPatch {
    fn apply(self, plan: &mut Plan) {
        match self {
            IpPatch::InPlace(v) => {
                let entries = plan.ip_map.entries_mut();
                for (i, e) in v {
                    entries[i] = e;
                }
            }
            IpPatch::Rebuilt(map, filters) => {
                plan.ip_map = map;
                plan.allocation.filters = filters;
            }
        }
    }
}

/// The IP map entries of circuit `ci`, in the planner's order (devices,
/// IPv4 then IPv6), filter handles 0.
fn entries_of(plan: &Plan, c: &Circuit, ci: usize) -> Vec<IpMapEntry> {
    let stick = matches!(plan.config.interfaces, Interfaces::OnAStick { .. });
    let (dev_d, dev_u) = devices(&plan.config);
    let mut out = Vec::new();
    push_circuit_entries(
        &mut out,
        ci,
        c,
        &plan.allocation.circuits[ci],
        plan.allocation.queues,
        stick,
        &dev_d.into(),
        &dev_u.into(),
    );
    out
}

fn patch_ip_map(
    plan: &Plan,
    olds: &[Circuit],
    new: &[(usize, Circuit)],
) -> Result<IpPatch, ReplanFallback> {
    let wanted: HashSet<u32> = new.iter().map(|(c, _)| *c as u32).collect();
    let entries = plan.ip_map.entries();
    // The changed circuits' entries, in map (sorted) order: found by their
    // old prefixes (no other circuit has one of them in a valid file).
    let mut old_at: Vec<usize> = Vec::new();
    for (ci, _) in new {
        for e in entries_of(plan, &olds[*ci], *ci) {
            let key = sort_key(&e);
            let lo = entries.partition_point(|x| sort_key(x) < key);
            let hi = lo + entries[lo..].partition_point(|x| sort_key(x) <= key);
            old_at.extend((lo..hi).filter(|&i| entries[i].circuit == *ci as u32));
        }
    }
    old_at.sort_unstable();
    old_at.dedup();
    let mut fresh: Vec<IpMapEntry> = Vec::new();
    for (ci, c) in new {
        fresh.extend(entries_of(plan, c, *ci));
    }
    // Same prefixes in the same places: only names may differ.
    let mut sorted = fresh.clone();
    sorted.sort_by(|a, b| {
        sort_key(a)
            .cmp(&sort_key(b))
            .then(a.circuit.cmp(&b.circuit))
    });
    let same = sorted.len() == old_at.len()
        && sorted
            .iter()
            .zip(&old_at)
            .all(|(n, &i)| n.net == entries[i].net && n.circuit == entries[i].circuit);
    if same {
        return Ok(IpPatch::InPlace(
            sorted
                .into_iter()
                .zip(&old_at)
                .map(|(mut n, &i)| {
                    n.filter_handle = entries[i].filter_handle;
                    (i, n)
                })
                .collect(),
        ));
    }
    if plan.config.classifier == Classifier::Tc {
        return Err(ReplanFallback::AddressesWithTcClassifier);
    }
    // Handles: a prefix still wanted keeps its handle; new ones take the
    // lowest free ones in the planner's entry order (as `ip_map` does).
    let old_nets: HashSet<IpNet> = old_at.iter().map(|&i| entries[i].net).collect();
    let new_nets: HashSet<IpNet> = fresh.iter().map(|e| e.net).collect();
    let mut filters = plan.allocation.filters.clone();
    let mut handle_of: HashMap<IpNet, u32> = HashMap::default();
    filters.retain(|f| {
        if old_nets.contains(&f.net) {
            if new_nets.contains(&f.net) {
                handle_of.insert(f.net, f.handle);
                true
            } else {
                false
            }
        } else {
            true
        }
    });
    let mut used: HashSet<u32> = filters.iter().map(|f| f.handle).collect();
    let mut next = 1u32;
    for e in &mut fresh {
        e.filter_handle = *handle_of.entry(e.net).or_insert_with(|| {
            while used.contains(&next) {
                next += 1;
            }
            used.insert(next);
            match filters.binary_search_by(|f| f.net.cmp(&e.net)) {
                Ok(_) => {}
                Err(pos) => filters.insert(
                    pos,
                    FilterSlot {
                        net: e.net,
                        handle: next,
                    },
                ),
            }
            next
        });
    }
    // The map: unchanged circuits' entries plus the new ones, in the
    // planner's order (by circuit, then as generated), sorted once more.
    let mut all: Vec<IpMapEntry> = Vec::with_capacity(entries.len() - old_at.len() + fresh.len());
    all.extend(
        entries
            .iter()
            .filter(|e| !wanted.contains(&e.circuit))
            .cloned(),
    );
    all.extend(fresh);
    // `IpMap::new` sorts stably by prefix; the planner's input order is by
    // circuit, so restore that order among entries of one prefix (only a
    // circuit's own entries can share one in a valid file).
    all.sort_by(|a, b| {
        sort_key(a)
            .cmp(&sort_key(b))
            .then(a.circuit.cmp(&b.circuit))
    });
    Ok(IpPatch::Rebuilt(IpMap::new(all), filters))
}
