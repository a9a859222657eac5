//! Stage 1: the HTB class hierarchy (nodes, parents, ceilings, each
//! circuit's rates and leaf kinds, generated parent nodes, the depth check).

use std::borrow::Cow;
use std::hash::BuildHasher;

use lqos_model::{Circuit, Network, Rate};

use super::leaf::{kind_index, LeafChooser};
use super::rates::{circuit_rates, just_below, squashed_min, squashed_rate, squashes};
use super::{CircuitSlot, PlanError, Previous, Squashed};
use crate::error::ConfigError;
use crate::ops::HTB_MAX_DEPTH;

/// [`HTB_MAX_DEPTH`] as a class level.
const HTB_LEVELS: u32 = HTB_MAX_DEPTH as u32;
use crate::config::QueueStrategy;
use crate::ops::QdiscKind;
use crate::plan_config::PlanConfig;
use hashbrown::{DefaultHashBuilder, HashMap, HashSet};

/// A planned HTB class level node (real or generated).
pub(super) struct Ent<'a> {
    pub(super) name: Cow<'a, str>,
    pub(super) parent: Option<u32>,
    pub(super) depth: u32,
    pub(super) generated: bool,
    /// Configured maxima (zero = inherit the parent's).
    pub(super) down: Rate,
    pub(super) up: Rate,
}

/// A circuit's rates and leaf kinds (stage 1), in input order.
#[derive(Clone, Copy)]
pub(super) struct CircRates {
    pub(super) rate_d: Rate,
    pub(super) ceil_d: Rate,
    pub(super) rate_u: Rate,
    pub(super) ceil_u: Rate,
    /// Index into [`Hierarchy::kinds`], or [`NO_LEAF`].
    pub(super) leaf_d: u16,
    pub(super) leaf_u: u16,
}

/// Stage 1: the HTB class hierarchy.
pub(super) struct Hierarchy<'n> {
    /// Real nodes in preorder (parents first), then the generated parent
    /// nodes (one per queue, from `first_gen`; none if every circuit has a
    /// parent).
    pub(super) ents: Vec<Ent<'n>>,
    /// Index of the first generated parent node.
    pub(super) first_gen: usize,
    /// Node ceilings: the node's own maximum capped by its parent's.
    pub(super) ceil_d: Vec<Rate>,
    pub(super) ceil_u: Vec<Rate>,
    /// The node each circuit hangs under (index into `ents`).
    pub(super) circ_ent: Vec<u32>,
    /// Circuits per node.
    pub(super) circ_count: Vec<u32>,
    /// Per circuit: rates and leaf kinds.
    pub(super) circ: Vec<CircRates>,
    /// Per circuit: its slot, with ID and name filled in.
    pub(super) slots: Vec<CircuitSlot>,
    /// The distinct leaf kinds.
    pub(super) kinds: Vec<QdiscKind>,
    /// The nodes whose circuits' minimums are squashed.
    pub(super) squashed: Vec<Squashed>,
}

/// Stage 1: nodes (virtual ones hand their children to the nearest real
/// ancestor), node ceilings, each circuit's parent, rates and leaf kinds,
/// the generated parent nodes for circuits without one, and the HTB depth
/// check. Errors name the circuit or node.
pub(super) fn hierarchy<'n>(
    net: &'n Network,
    cfg: &PlanConfig,
    prev: &Previous,
) -> Result<Hierarchy<'n>, PlanError> {
    let q = cfg.queues_per_direction() as usize;
    let circuits = net.circuits();
    let mut ents: Vec<Ent> = Vec::with_capacity(net.node_count() + q);
    let mut eff: Vec<Option<u32>> = vec![None; net.graph().node_count()];
    let preorder = net.nodes_preorder();
    for &n in &preorder {
        let parent_eff = net.parent(n).and_then(|p| eff[p.index()]);
        let node = net.node(n);
        if node.virtual_node {
            eff[n.index()] = parent_eff;
            continue;
        }
        let depth = parent_eff.map_or(1, |p| ents[p as usize].depth + 1);
        ents.push(Ent {
            name: Cow::Borrowed(node.name.as_str()),
            parent: parent_eff,
            depth,
            generated: false,
            down: node.download,
            up: node.upload,
        });
        eff[n.index()] = Some((ents.len() - 1) as u32);
    }

    let cap = |own: Rate, parent: Rate| {
        if own.is_zero() {
            parent
        } else {
            own.min(parent)
        }
    };
    let mut ceil_d: Vec<Rate> = Vec::with_capacity(ents.len() + q);
    let mut ceil_u: Vec<Rate> = Vec::with_capacity(ents.len() + q);
    for ent in &ents {
        let (pd, pu) = match ent.parent {
            Some(p) => (ceil_d[p as usize], ceil_u[p as usize]),
            None => (cfg.download_capacity, cfg.upload_capacity),
        };
        ceil_d.push(cap(ent.down, pd));
        ceil_u.push(cap(ent.up, pu));
    }
    let gen_ceil_d = cap(cfg.generated_pn_download, cfg.download_capacity);
    let gen_ceil_u = cap(cfg.generated_pn_upload, cfg.upload_capacity);

    // One sequential pass over the circuits: parent node, rates, leaf
    // kinds, slot (the only pass that reads the circuits' memory).
    let mut by_name: HashMap<&str, Option<u32>> = HashMap::default();
    by_name.reserve(preorder.len());
    for &n in &preorder {
        by_name.insert(net.node(n).name.as_str(), eff[n.index()]);
    }
    let flat = net.node_count() == 0;
    let mut unparented: Vec<u32> = Vec::new();
    let mut circ_ent: Vec<u32> = vec![0; circuits.len()];
    let mut circ: Vec<CircRates> = Vec::with_capacity(circuits.len());
    let mut slots: Vec<CircuitSlot> = Vec::with_capacity(circuits.len());
    let mut kinds: Vec<QdiscKind> = Vec::new();
    let mut chooser = LeafChooser {
        cfg,
        cache: HashMap::default(),
    };
    // IDs are checked by hash; only a collision runs the exact check.
    let id_hasher = DefaultHashBuilder::default();
    let mut id_hashes: HashSet<u64> = HashSet::default();
    id_hashes.reserve(circuits.len());
    let mut maybe_duplicate = false;
    for (ci, c) in circuits.iter().enumerate() {
        maybe_duplicate |= !id_hashes.insert(id_hasher.hash_one(c.id.as_str()));
        if c.download_max.is_zero() || c.upload_max.is_zero() {
            return Err(PlanError::ZeroRate {
                circuit: c.id.to_string(),
                direction: if c.download_max.is_zero() {
                    "download"
                } else {
                    "upload"
                },
            });
        }
        let parent = match (&c.parent, flat) {
            (Some(p), false) => match by_name.get(p.as_str()) {
                None => {
                    return Err(PlanError::UnknownParent {
                        circuit: c.id.to_string(),
                        parent: p.to_string(),
                    })
                }
                Some(&e) => e,
            },
            _ => None,
        };
        let (pd, pu) = match parent {
            Some(e) => {
                circ_ent[ci] = e;
                (ceil_d[e as usize], ceil_u[e as usize])
            }
            None => {
                unparented.push(ci as u32);
                (gen_ceil_d, gen_ceil_u)
            }
        };
        let (rate_d, ceil_cd) = circuit_rates(c.download_min, c.download_max, pd);
        let (rate_u, ceil_cu) = circuit_rates(c.upload_min, c.upload_max, pu);
        let (leaf_d, leaf_u) = chooser.choose(c, ceil_cd, ceil_cu)?;
        circ.push(CircRates {
            rate_d,
            ceil_d: ceil_cd,
            rate_u,
            ceil_u: ceil_cu,
            leaf_d: kind_index(&mut kinds, leaf_d),
            leaf_u: kind_index(&mut kinds, leaf_u),
        });
        slots.push(CircuitSlot {
            id: c.id.clone(),
            name: c.name.clone(),
            parent: 0,
            queue: 0,
            minor: 0,
            leaf_download: None,
            leaf_upload: None,
        });
    }
    if maybe_duplicate {
        check_unique_ids(circuits)?;
    }

    // Generated parent nodes, one per queue (their queues are stage 2's);
    // a circuit keeps the one it had, new ones are spread by the queue
    // strategy.
    let first_gen = ents.len();
    if !unparented.is_empty() {
        for i in 0..q {
            let name = format!("Generated_PN_{}", i + 1);
            if net.node_by_name(&name).is_some() {
                return Err(ConfigError::ReservedNodeName(name).into());
            }
            ents.push(Ent {
                name: Cow::Owned(name),
                parent: None,
                depth: 1,
                generated: true,
                down: cfg.generated_pn_download,
                up: cfg.generated_pn_upload,
            });
            ceil_d.push(gen_ceil_d);
            ceil_u.push(gen_ceil_u);
        }
        let mut counts = vec![0usize; q];
        let mut pending = Vec::new();
        for &ci in &unparented {
            match prev.generated_parent(slots[ci as usize].id.as_str(), q) {
                Some(k) => {
                    circ_ent[ci as usize] = (first_gen + k) as u32;
                    counts[k] += 1;
                }
                None => pending.push(ci),
            }
        }
        // LibreQoS: the i-th circuit without a parent (file order) goes
        // under Generated_PN_(i mod queues + 1).
        for (i, ci) in pending.into_iter().enumerate() {
            let k = match cfg.strategy {
                QueueStrategy::RoundRobin => i % q,
                QueueStrategy::Balanced => argmin(&counts),
            };
            circ_ent[ci as usize] = (first_gen + k) as u32;
            counts[k] += 1;
        }
    }
    let mut circ_count = vec![0u32; ents.len()];
    for &e in &circ_ent {
        circ_count[e as usize] += 1;
    }
    let squashed = squash(
        circuits,
        &ents,
        &circ_ent,
        &circ_count,
        (&ceil_d, &ceil_u),
        &mut circ,
    );

    // HTB depth: top-level nodes are classes at the HTB's root (level 1).
    for (e, ent) in ents.iter().enumerate() {
        let level = ent.depth;
        if level > HTB_LEVELS {
            return Err(PlanError::TooDeep {
                what: format!("node {:?}", ent.name),
                levels: level,
            });
        }
        if circ_count[e] > 0 && level + 1 > HTB_LEVELS {
            let ci = circ_ent.iter().position(|&x| x as usize == e).unwrap_or(0);
            return Err(PlanError::TooDeep {
                what: format!("circuit {:?} under node {:?}", circuits[ci].id, ent.name),
                levels: level + 1,
            });
        }
    }
    Ok(Hierarchy {
        ents,
        first_gen,
        ceil_d,
        ceil_u,
        circ_ent,
        circ_count,
        circ,
        slots,
        kinds,
        squashed,
    })
}

/// LibreQoS's minimum squashing: where the minimums of a node's circuits
/// add up to more than the node guarantees (its rate, [`just_below`] its
/// ceil) in either direction, each of them gets [`squashed_min`] instead
/// ([`squashed_rate`] under its ceil), both directions. Returns those
/// nodes, in node order.
fn squash(
    circuits: &[Circuit],
    ents: &[Ent<'_>],
    circ_ent: &[u32],
    circ_count: &[u32],
    (ceil_d, ceil_u): (&[Rate], &[Rate]),
    circ: &mut [CircRates],
) -> Vec<Squashed> {
    let n = circ_count.len();
    let (mut sum_d, mut sum_u) = (vec![0u64; n], vec![0u64; n]);
    for (c, &e) in circuits.iter().zip(circ_ent) {
        sum_d[e as usize] = sum_d[e as usize].saturating_add(c.download_min.bps());
        sum_u[e as usize] = sum_u[e as usize].saturating_add(c.upload_min.bps());
    }
    let min: Vec<Option<Rate>> = (0..n)
        .map(|e| {
            let (nd, nu) = (just_below(ceil_d[e]), just_below(ceil_u[e]));
            squashes(Rate::from_bps(sum_d[e]), Rate::from_bps(sum_u[e]), nd, nu)
                .then(|| squashed_min(u64::from(circ_count[e]), nd, nu))
        })
        .collect();
    for (r, &e) in circ.iter_mut().zip(circ_ent) {
        if let Some(m) = min[e as usize] {
            r.rate_d = squashed_rate(m, r.ceil_d);
            r.rate_u = squashed_rate(m, r.ceil_u);
        }
    }
    min.iter()
        .enumerate()
        .filter_map(|(e, m)| {
            Some(Squashed {
                node: ents[e].name.to_string(),
                circuits: circ_count[e],
                asked_down: Rate::from_bps(sum_d[e]),
                asked_up: Rate::from_bps(sum_u[e]),
                fits_down: just_below(ceil_d[e]),
                fits_up: just_below(ceil_u[e]),
                each: (*m)?,
            })
        })
        .collect()
}

/// Rejects two circuits with one ID (the exact check, run when the hashes
/// of two IDs collide).
fn check_unique_ids(circuits: &[Circuit]) -> Result<(), PlanError> {
    let mut exact: HashMap<&str, ()> = HashMap::default();
    for c in circuits {
        if exact.insert(c.id.as_str(), ()).is_some() {
            return Err(PlanError::DuplicateCircuit(c.id.to_string()));
        }
    }
    Ok(())
}

/// The index of the first least element of `v`.
pub(super) fn argmin(v: &[impl Ord + Copy]) -> usize {
    let mut best = 0;
    for (i, x) in v.iter().enumerate() {
        if *x < v[best] {
            best = i;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::fixture::*;

    #[test]
    fn hierarchy_skips_virtual_nodes_caps_ceilings_and_generates_parents() {
        let (net, cfg) = (net(), cfg(2));
        let h = hierarchy(&net, &cfg, &Previous::new(None, 2)).unwrap();
        let names: Vec<&str> = h.ents.iter().map(|e| e.name.as_ref()).collect();
        assert_eq!(
            names,
            ["Site_A", "AP", "Site_B", "Generated_PN_1", "Generated_PN_2"]
        );
        assert_eq!(h.first_gen, 3);
        // AP's parent is Site_A (V is virtual) and its ceiling Site_A's.
        assert_eq!(h.ents[1].parent, Some(0));
        assert_eq!(h.ceil_d[1], Rate::from_mbps(800));
        // The circuit under V hangs under Site_A, its ceil capped there.
        assert_eq!(h.circ_ent, [0, 1, 2, 3]);
        assert_eq!(h.circ[0].ceil_d, Rate::from_mbps(800));
        assert_eq!(h.circ_count, [1, 1, 1, 1, 0]);
        assert_eq!(h.slots[3].id, "orphan");
        // One leaf kind (the default cake) shared by all.
        assert_eq!(h.kinds.len(), 1);
    }

    #[test]
    fn hierarchy_names_the_node_that_is_too_deep() {
        let mut net = Network::new();
        let mut parent: Option<String> = None;
        for i in 0..=HTB_LEVELS {
            let name = format!("N{i}");
            net.add_node(parent.as_deref(), node(&name, 100, false))
                .unwrap();
            parent = Some(name);
        }
        let e = hierarchy(&net, &cfg(1), &Previous::new(None, 1))
            .err()
            .expect("too deep");
        assert_eq!(
            e,
            PlanError::TooDeep {
                what: "node \"N8\"".into(),
                levels: 9
            }
        );
    }
}
