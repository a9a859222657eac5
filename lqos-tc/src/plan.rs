//! The planner: `Network` + `PlanConfig` (+ previous allocation) -> `Plan`.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::hash::Hasher;

use crate::fx::{FxHasher, FxMap, FxSet};

use serde::{Deserialize, Serialize};

use crate::{
    Class, FqCodelParams, HtbClass, HtbQdisc, Interfaces, LeafSpec, PlanConfig, Qdisc, QdiscKind,
    QueueStrategy, TcHandle, TcOp, TcTree,
};
use lqos_model::{Circuit, Network, Rate};

/// Smallest quantum lqos sends (LibreQoS's `MIN_QUANTUM`, one MTU frame).
pub const QUANTUM_MIN: u32 = 1522;
/// Largest quantum lqos sends (HTB warns "quantum is big" above this).
pub const QUANTUM_MAX: u32 = 200_000;
/// LibreQoS's target for the link's quantum when choosing r2q.
const R2Q_TARGET_QUANTUM: u64 = 60_000;
/// Handle of the mq root on every interface.
pub const MQ_HANDLE: TcHandle = TcHandle::new(0x7fff, 0);
/// Class levels HTB allows (the link's top class counts as one).
pub const HTB_LEVELS: u32 = 8;

/// Why a plan cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// Bad or inconsistent configuration.
    #[error("config: {0}")]
    Config(String),
    /// A leaf qdisc spec (`default_sqm`) that lqos cannot use.
    #[error("sqm {spec:?}: {reason}")]
    Sqm {
        /// The spec as written.
        spec: String,
        /// Why.
        reason: String,
    },
    /// A circuit's `sqm` override that lqos cannot use.
    #[error("circuit {circuit:?}: sqm {spec:?}: {reason}")]
    CircuitSqm {
        /// Circuit ID.
        circuit: String,
        /// The spec as written.
        spec: String,
        /// Why.
        reason: String,
    },
    /// A circuit names a parent node that is not in the network.
    #[error("circuit {circuit:?}: parent node {parent:?} is not in network.json")]
    UnknownParent {
        /// Circuit ID.
        circuit: String,
        /// The missing node.
        parent: String,
    },
    /// Two circuits with one Circuit ID.
    #[error("circuit ID {0:?} appears twice")]
    DuplicateCircuit(String),
    /// A circuit with a zero maximum rate.
    #[error("circuit {circuit:?}: {direction} max rate is 0")]
    ZeroRate {
        /// Circuit ID.
        circuit: String,
        /// `download` or `upload`.
        direction: &'static str,
    },
    /// The hierarchy is deeper than HTB allows.
    #[error("{what} would be HTB class level {levels}; HTB allows {max} (the link class counts as one): flatten network.json", max = HTB_LEVELS)]
    TooDeep {
        /// `node "X"` or `circuit "Y" under node "X"`.
        what: String,
        /// The level it would need.
        levels: u32,
    },
    /// More classes in one queue than the 16-bit minor space holds.
    #[error("queue {queue} (HTB {major:x}:) needs more than 65533 classes; use more queues or split the largest top-level node")]
    MinorOverflow {
        /// 1-based queue number.
        queue: u32,
        /// The HTB major of that queue (download side).
        major: u16,
    },
    /// More leaf qdiscs on an interface than the 16-bit handle space holds.
    #[error("interface {interface}: {needed} circuit leaf qdiscs, but only {available} qdisc handles are available (16-bit majors); give some circuits sqm `none` or spread them over more interfaces")]
    LeafMajorOverflow {
        /// The interface.
        interface: String,
        /// Leaf qdiscs wanted on it.
        needed: usize,
        /// Handles available for leaves.
        available: usize,
    },
}

/// Which traffic an interface plan shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Direction {
    /// Download (towards subscribers): `to_network`.
    Download,
    /// Upload (towards the internet): `to_internet`.
    Upload,
    /// Both, on one interface (on-a-stick).
    Both,
}

/// The ops for one interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterfacePlan {
    /// Interface name.
    pub dev: String,
    /// What it shapes.
    pub direction: Direction,
    /// The full build, in order: `qdisc replace` of the mq root, per queue
    /// the HTB qdisc, top class `:1`, default class `:2` and its leaf; then
    /// every node class (parents first); then every circuit class, each
    /// followed by its leaf qdisc, in input order. No root delete.
    pub ops: Vec<TcOp>,
    /// How many leading ops build the queue layout (root, HTBs, `:1`, `:2`).
    pub setup_ops: usize,
    /// Classes per HTB qdisc (queue), in major order (including `:1`, `:2`).
    pub queue_class_counts: Vec<usize>,
}

impl InterfacePlan {
    /// The tree these ops build (built directly; plan ops are valid by
    /// construction, see [`InterfacePlan::try_tree`] to check).
    pub fn tree(&self) -> TcTree {
        let mut t = TcTree::default();
        for op in &self.ops {
            match op {
                TcOp::AddQdisc(q) | TcOp::ReplaceQdisc(q) => {
                    t.qdiscs.insert(q.handle, q.clone());
                }
                TcOp::AddClass(c) | TcOp::ChangeClass(c) => {
                    t.classes.insert(c.classid, c.clone());
                }
                _ => return self.try_tree().unwrap_or(t),
            }
        }
        t
    }

    /// The tree, checking every op against the kernel's rules.
    pub fn try_tree(&self) -> Result<TcTree, (usize, crate::TreeError)> {
        TcTree::from_ops(&self.ops)
    }

    /// TX queues this interface's plan uses: the highest mq class minor an
    /// HTB of the setup prefix hangs from (0 when the root is not `mq`).
    /// Preflight compares it with the device's `num_tx_queues`.
    pub fn tx_queues(&self) -> usize {
        let setup = &self.ops[..self.setup_ops.min(self.ops.len())];
        let root = setup.iter().find_map(|op| match op {
            TcOp::AddQdisc(q) | TcOp::ReplaceQdisc(q) if q.parent == TcHandle::ROOT => Some(q),
            _ => None,
        });
        let Some(root) = root.filter(|r| r.kind == QdiscKind::Mq) else {
            return 0;
        };
        setup
            .iter()
            .filter_map(|op| match op {
                TcOp::AddQdisc(q) | TcOp::ReplaceQdisc(q)
                    if q.parent != TcHandle::ROOT && q.parent.qdisc() == root.handle =>
                {
                    Some(usize::from(q.parent.minor()))
                }
                _ => None,
            })
            .max()
            .unwrap_or(0)
    }

    /// HTB majors on this interface, in order.
    pub fn htb_majors(&self) -> Vec<u16> {
        self.ops[..self.setup_ops]
            .iter()
            .filter_map(|op| match op {
                TcOp::AddQdisc(Qdisc {
                    handle,
                    kind: QdiscKind::Htb(_),
                    ..
                }) => Some(handle.major()),
                _ => None,
            })
            .collect()
    }
}

/// A planned node's (site, AP, generated parent node) stable slot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeSlot {
    /// Node name.
    pub name: String,
    /// Index of the parent node slot (`None` for top-level nodes).
    pub parent: Option<u32>,
    /// 0-based queue (HTB major `queue + 1` for download).
    pub queue: u32,
    /// Class minor (same on both directions).
    pub minor: u16,
    /// A generated parent node (`Generated_PN_n`).
    pub generated: bool,
}

/// A planned circuit's stable slot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CircuitSlot {
    /// Circuit ID.
    pub id: String,
    /// Circuit name (display only, never rendered into tc text).
    pub name: String,
    /// Index of its parent node slot.
    pub parent: u32,
    /// 0-based queue.
    pub queue: u32,
    /// Class minor (same on both directions).
    pub minor: u16,
    /// Leaf qdisc major on the download side (`None`: no leaf).
    pub leaf_download: Option<u16>,
    /// Leaf qdisc major on the upload side.
    pub leaf_upload: Option<u16>,
}

/// Where every node and circuit went: queue, class minor, leaf majors.
/// Feed it back to [`plan`] to keep classids stable across reloads.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allocation {
    /// HTB queues per direction this allocation was made for (a previous
    /// allocation is only reused when this matches).
    pub queues: u32,
    /// Node slots, parents before children.
    pub nodes: Vec<NodeSlot>,
    /// Circuit slots, in input order.
    pub circuits: Vec<CircuitSlot>,
}

/// A complete plan: ops per interface plus the allocation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// The config it was made with.
    pub config: PlanConfig,
    /// One entry per interface (two on a bridge, one on a stick).
    pub interfaces: Vec<InterfacePlan>,
    /// The stable allocation.
    pub allocation: Allocation,
}

impl Plan {
    /// The plan for interface `dev`.
    pub fn interface(&self, dev: &str) -> Option<&InterfacePlan> {
        self.interfaces.iter().find(|i| i.dev == dev)
    }

    /// HTB major of 0-based `queue` for `direction` (`Both` = download).
    pub fn major(&self, direction: Direction, queue: u32) -> u16 {
        let per_dir = self.allocation.queues;
        let stick = matches!(self.config.interfaces, Interfaces::OnAStick { .. });
        match direction {
            Direction::Upload if stick => (queue + per_dir + 1) as u16,
            _ => (queue + 1) as u16,
        }
    }

    /// Names for the classids of interface `dev`: `link`, `default`,
    /// `node NAME`, `circuit ID NAME` (untrusted text, escape before
    /// printing).
    pub fn labels(&self, dev: &str) -> BTreeMap<TcHandle, String> {
        let mut m = BTreeMap::new();
        let Some(ip) = self.interface(dev) else {
            return m;
        };
        let dirs: &[Direction] = match ip.direction {
            Direction::Both => &[Direction::Download, Direction::Upload],
            Direction::Download => &[Direction::Download],
            Direction::Upload => &[Direction::Upload],
        };
        for &d in dirs {
            for q in 0..self.allocation.queues {
                let maj = self.major(d, q);
                m.insert(TcHandle::new(maj, 1), "link".to_string());
                m.insert(TcHandle::new(maj, 2), "default".to_string());
            }
            for n in &self.allocation.nodes {
                m.insert(
                    TcHandle::new(self.major(d, n.queue), n.minor),
                    format!("node {}", n.name),
                );
            }
            for c in &self.allocation.circuits {
                m.insert(
                    TcHandle::new(self.major(d, c.queue), c.minor),
                    format!("circuit {} {}", c.id, c.name),
                );
            }
        }
        m
    }
}

/// A 65536-bit set of used numbers with a "lowest free from here" cursor.
struct Bits {
    words: Vec<u64>,
    cursor: u32,
    max: u32,
}

impl Bits {
    fn new(reserved: impl IntoIterator<Item = u32>, max: u32) -> Bits {
        let mut b = Bits {
            words: vec![0; 1024],
            cursor: 0,
            max,
        };
        for r in reserved {
            b.take(r);
        }
        b
    }

    /// Marks `v` used; false if it already was (or is out of range).
    fn take(&mut self, v: u32) -> bool {
        if v > self.max {
            return false;
        }
        let (w, bit) = ((v / 64) as usize, v % 64);
        if self.words[w] & (1 << bit) != 0 {
            return false;
        }
        self.words[w] |= 1 << bit;
        true
    }

    /// The lowest free number at or after the cursor.
    fn alloc(&mut self) -> Option<u32> {
        let mut w = (self.cursor / 64) as usize;
        while w < self.words.len() {
            let free = !self.words[w];
            if free != 0 {
                let v = w as u32 * 64 + free.trailing_zeros();
                if v > self.max {
                    return None;
                }
                self.words[w] |= 1 << (v % 64);
                self.cursor = v;
                return Some(v);
            }
            w += 1;
        }
        None
    }
}

/// A planned HTB class level node (real or generated).
struct Ent<'a> {
    name: Cow<'a, str>,
    parent: Option<u32>,
    depth: u32,
    circuits: Vec<u32>,
    generated: bool,
    /// Configured maxima (zero = inherit the parent's).
    down: Rate,
    up: Rate,
}

/// "Just below" `max` for a guaranteed rate that must stay under its ceil:
/// 1 Mbit below (LibreQoS), 10 kbit below small rates, half of tiny ones.
pub fn just_below(max: Rate) -> Rate {
    let b = max.bps();
    let r = if b >= 2_000_000 {
        b - 1_000_000
    } else if b > 20_000 {
        b - 10_000
    } else {
        b / 2
    };
    Rate::from_bps(r.max(8))
}

/// LibreQoS's r2q for the link: the smallest integer >= 10 such that the
/// link's quantum (bytes/s / r2q) is at most 60000.
pub fn r2q_for(link: Rate) -> u64 {
    let bytes = link.bytes_per_sec();
    bytes.div_ceil(R2Q_TARGET_QUANTUM).max(10)
}

/// LibreQoS's quantum for a class with ceiling `ceil`, clamped to
/// [`QUANTUM_MIN`]..=[`QUANTUM_MAX`].
pub fn quantum_for(ceil: Rate, r2q: u64) -> u32 {
    let q = ceil.bytes_per_sec() / r2q.max(1);
    q.clamp(u64::from(QUANTUM_MIN), u64::from(QUANTUM_MAX)) as u32
}

/// cake's rtt raise for slow circuits (LibreQoS `sqmFixupRate`, which meant
/// milliseconds): at most 1/2/3/4 Mbit -> 300/180/140/120 ms.
fn cake_rtt_fixup(kind: QdiscKind, ceil: Rate) -> QdiscKind {
    match kind {
        QdiscKind::Cake(mut p) if p.rtt_us.is_none() => {
            let b = ceil.bps();
            p.rtt_us = match b {
                0..=1_000_000 => Some(300_000),
                1_000_001..=2_000_000 => Some(180_000),
                2_000_001..=3_000_000 => Some(140_000),
                3_000_001..=4_000_000 => Some(120_000),
                _ => None,
            };
            QdiscKind::Cake(p)
        }
        other => other,
    }
}

struct LeafChooser<'c> {
    cfg: &'c PlanConfig,
    cache: HashMap<String, LeafSpec>,
}

impl LeafChooser<'_> {
    /// The leaf for a circuit without an override.
    fn default_for(&self, ceil: Rate) -> Option<QdiscKind> {
        match &self.cfg.default_sqm {
            LeafSpec::None => None,
            LeafSpec::Qdisc(k @ QdiscKind::Cake(_)) => {
                if self.cfg.fq_codel_threshold.is_some_and(|t| ceil >= t) {
                    Some(QdiscKind::FqCodel(FqCodelParams::default()))
                } else {
                    Some(cake_rtt_fixup(k.clone(), ceil))
                }
            }
            LeafSpec::Qdisc(k) => Some(k.clone()),
        }
    }

    fn choose(
        &mut self,
        circuit: &Circuit,
        ov: Option<&str>,
        ceil: Rate,
    ) -> Result<Option<QdiscKind>, PlanError> {
        let ov = ov.map(str::trim).filter(|s| !s.is_empty());
        let Some(ov) = ov else {
            return Ok(self.default_for(ceil));
        };
        let lower = ov.to_ascii_lowercase();
        match lower.as_str() {
            "none" => return Ok(None),
            "fq_codel" => return Ok(Some(QdiscKind::FqCodel(FqCodelParams::default()))),
            "cake" => {
                let base = if self.cfg.default_sqm.is_cake() {
                    self.cfg.default_sqm.clone()
                } else {
                    LeafSpec::cake_diffserv4()
                };
                return Ok(match base {
                    LeafSpec::Qdisc(k) => Some(cake_rtt_fixup(k, ceil)),
                    LeafSpec::None => None,
                });
            }
            _ => {}
        }
        if !self.cache.contains_key(&lower) {
            let spec: LeafSpec = lower.parse().map_err(|e| match e {
                PlanError::Sqm { spec, reason } => PlanError::CircuitSqm {
                    circuit: circuit.id.clone(),
                    spec,
                    reason,
                },
                other => other,
            })?;
            self.cache.insert(lower.clone(), spec);
        }
        Ok(match &self.cache[&lower] {
            LeafSpec::None => None,
            LeafSpec::Qdisc(k) => Some(cake_rtt_fixup(k.clone(), ceil)),
        })
    }
}

/// No leaf qdisc (index into the leaf kind table).
const NO_LEAF: u16 = u16::MAX;

/// Per-circuit planned values, in input order.
#[derive(Default, Clone, Copy)]
struct CircPlan {
    rate_d: Rate,
    ceil_d: Rate,
    rate_u: Rate,
    ceil_u: Rate,
    minor: u16,
    /// Index into the leaf kind table, or [`NO_LEAF`].
    leaf_d: u16,
    leaf_u: u16,
    major_d: u16,
    major_u: u16,
}

/// Index of `kind` in the (small) table of distinct leaf kinds.
fn kind_index(kinds: &mut Vec<QdiscKind>, kind: Option<QdiscKind>) -> u16 {
    match kind {
        None => NO_LEAF,
        Some(k) => match kinds.iter().position(|x| *x == k) {
            Some(i) => i as u16,
            None => {
                kinds.push(k);
                (kinds.len() - 1) as u16
            }
        },
    }
}

fn htb_class(
    parent: TcHandle,
    classid: TcHandle,
    rate: Rate,
    ceil: Rate,
    prio: u32,
    r2q: u64,
) -> TcOp {
    TcOp::AddClass(Class {
        parent,
        classid,
        htb: HtbClass {
            rate,
            ceil,
            quantum: quantum_for(ceil, r2q),
            prio,
            burst: None,
            cburst: None,
        },
    })
}

/// Plans the trees for `net`.
///
/// With `previous` (the allocation of the last plan, made for the same
/// number of queues), nodes and circuits that still exist keep their queue,
/// classid and leaf handle; new ones take the lowest free minors; removed
/// ones free theirs.
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
///     comment: String::new(), sqm: None, devices: vec![] });
/// let p = plan(&net, &PlanConfig::bridge("ens19", "ens20", 2), None).unwrap();
/// assert_eq!(p.interfaces.len(), 2);
/// assert_eq!(p.interfaces[0].queue_class_counts.iter().sum::<usize>(), 2 * 2 + 2);
/// ```
#[allow(clippy::needless_range_loop)] // parallel per-entity arrays
pub fn plan(
    net: &Network,
    cfg: &PlanConfig,
    previous: Option<&Allocation>,
) -> Result<Plan, PlanError> {
    cfg.validate()?;
    let q = cfg.queues_per_direction() as usize;
    let stick = matches!(cfg.interfaces, Interfaces::OnAStick { .. });
    let prev = previous.filter(|p| p.queues as usize == q);
    let circuits = net.circuits();

    // Previous slots by name / id.
    let mut prev_nodes: FxMap<&str, &NodeSlot> = FxMap::default();
    let mut prev_circuits: FxMap<&str, &CircuitSlot> = FxMap::default();
    if let Some(p) = prev {
        prev_nodes.reserve(p.nodes.len());
        prev_nodes.extend(p.nodes.iter().map(|n| (n.name.as_str(), n)));
        prev_circuits.reserve(p.circuits.len());
        prev_circuits.extend(p.circuits.iter().map(|c| (c.id.as_str(), c)));
    }
    // 1. Real nodes; virtual ones hand their children to the nearest real
    //    ancestor (or promote them to top level).
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
            circuits: Vec::new(),
            generated: false,
            down: node.download,
            up: node.upload,
        });
        eff[n.index()] = Some((ents.len() - 1) as u32);
    }

    // Node ceilings: the node's own maximum capped by its parent's.
    let cap = |own: Rate, parent: Rate| {
        if own.is_zero() {
            parent
        } else {
            own.min(parent)
        }
    };
    let mut node_ceil_d: Vec<Rate> = Vec::with_capacity(ents.len() + q);
    let mut node_ceil_u: Vec<Rate> = Vec::with_capacity(ents.len() + q);
    for ent in &ents {
        let (pd, pu) = match ent.parent {
            Some(p) => (node_ceil_d[p as usize], node_ceil_u[p as usize]),
            None => (cfg.download_capacity, cfg.upload_capacity),
        };
        node_ceil_d.push(cap(ent.down, pd));
        node_ceil_u.push(cap(ent.up, pu));
    }
    let gen_ceil_d = cap(cfg.generated_pn_download, cfg.download_capacity);
    let gen_ceil_u = cap(cfg.generated_pn_upload, cfg.upload_capacity);

    // 2. One sequential pass over the circuits: parent node, rates, leaf
    //    kinds, slot (the only pass that reads the circuits' memory).
    let mut by_name: FxMap<&str, Option<u32>> = FxMap::default();
    by_name.reserve(preorder.len());
    for &n in &preorder {
        by_name.insert(net.node(n).name.as_str(), eff[n.index()]);
    }
    let flat = net.node_count() == 0;
    let mut unparented: Vec<u32> = Vec::new();
    let mut cp: Vec<CircPlan> = Vec::with_capacity(circuits.len());
    let mut slots: Vec<CircuitSlot> = Vec::with_capacity(circuits.len());
    let mut kinds: Vec<QdiscKind> = Vec::new();
    let mut chooser = LeafChooser {
        cfg,
        cache: HashMap::new(),
    };
    let circuit_rates = |min: Rate, max: Rate, parent_ceil: Rate| {
        let ceil = max.min(parent_ceil);
        let rate = if min >= ceil { just_below(ceil) } else { min };
        (rate.max(Rate::from_bps(8)), ceil.max(Rate::from_bps(8)))
    };
    let mut id_hashes: FxSet<u64> = FxSet::default();
    id_hashes.reserve(circuits.len());
    let mut maybe_duplicate = false;
    for (ci, c) in circuits.iter().enumerate() {
        maybe_duplicate |= !id_hashes.insert(fx_hash(&c.id));
        if c.download_max.is_zero() || c.upload_max.is_zero() {
            return Err(PlanError::ZeroRate {
                circuit: c.id.clone(),
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
                        circuit: c.id.clone(),
                        parent: p.clone(),
                    })
                }
                Some(&e) => e,
            },
            _ => None,
        };
        let (pd, pu) = match parent {
            Some(e) => {
                ents[e as usize].circuits.push(ci as u32);
                (node_ceil_d[e as usize], node_ceil_u[e as usize])
            }
            None => {
                unparented.push(ci as u32);
                (gen_ceil_d, gen_ceil_u)
            }
        };
        let (rate_d, ceil_d) = circuit_rates(c.download_min, c.download_max, pd);
        let (rate_u, ceil_u) = circuit_rates(c.upload_min, c.upload_max, pu);
        let (leaf_d, leaf_u) = match &c.sqm {
            Some(s) => (
                chooser.choose(c, Some(&s.download), ceil_d)?,
                chooser.choose(c, Some(&s.upload), ceil_u)?,
            ),
            None => (chooser.default_for(ceil_d), chooser.default_for(ceil_u)),
        };
        cp.push(CircPlan {
            rate_d,
            ceil_d,
            rate_u,
            ceil_u,
            minor: 0,
            leaf_d: kind_index(&mut kinds, leaf_d),
            leaf_u: kind_index(&mut kinds, leaf_u),
            major_d: 0,
            major_u: 0,
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

    // 3. Generated parent nodes, one pinned to each queue.
    let first_gen = ents.len();
    if !unparented.is_empty() {
        for i in 0..q {
            let name = format!("Generated_PN_{}", i + 1);
            if net.node_by_name(&name).is_some() {
                return Err(PlanError::Config(format!(
                    "network.json has a node named {name:?}, which lqos needs for circuits without a parent node"
                )));
            }
            ents.push(Ent {
                name: Cow::Owned(name),
                parent: None,
                depth: 1,
                circuits: Vec::new(),
                generated: true,
                down: cfg.generated_pn_download,
                up: cfg.generated_pn_upload,
            });
            node_ceil_d.push(gen_ceil_d);
            node_ceil_u.push(gen_ceil_u);
        }
        let mut counts = vec![0usize; q];
        let mut pending = Vec::new();
        for &ci in &unparented {
            let hint = prev_circuits
                .get(slots[ci as usize].id.as_str())
                .filter(|s| {
                    (s.queue as usize) < q
                        && prev
                            .and_then(|p| p.nodes.get(s.parent as usize))
                            .is_some_and(|n| n.generated)
                })
                .map(|s| s.queue as usize);
            match hint {
                Some(k) => {
                    ents[first_gen + k].circuits.push(ci);
                    counts[k] += 1;
                }
                None => pending.push(ci),
            }
        }
        for (i, ci) in pending.into_iter().enumerate() {
            let k = match cfg.strategy {
                QueueStrategy::RoundRobin => i % q,
                QueueStrategy::Balanced => argmin(&counts),
            };
            ents[first_gen + k].circuits.push(ci);
            counts[k] += 1;
        }
        for e in &mut ents[first_gen..] {
            e.circuits.sort_unstable();
        }
    }
    let n = ents.len();

    // 4. Subtree sizes (ents are in preorder: children after parents).
    let mut size = vec![0u64; n];
    for e in (0..n).rev() {
        size[e] += 1 + ents[e].circuits.len() as u64;
        if let Some(p) = ents[e].parent {
            size[p as usize] += size[e];
        }
    }

    // 5. Queue per top-level subtree.
    let mut queue = vec![u32::MAX; n];
    let mut load = vec![0u64; q];
    let mut new_tops = Vec::new();
    let mut top_index = 0usize;
    for e in 0..n {
        if ents[e].parent.is_some() {
            continue;
        }
        if ents[e].generated {
            queue[e] = (e - first_gen) as u32;
        } else if let Some(s) = prev_nodes
            .get(ents[e].name.as_ref())
            .filter(|s| (s.queue as usize) < q)
        {
            queue[e] = s.queue;
        } else {
            new_tops.push((top_index, e));
        }
        if queue[e] != u32::MAX {
            load[queue[e] as usize] += size[e];
        }
        top_index += 1;
    }
    match cfg.strategy {
        QueueStrategy::RoundRobin => {
            for (i, e) in new_tops {
                queue[e] = (i % q) as u32;
            }
        }
        QueueStrategy::Balanced => {
            new_tops.sort_by(|a, b| size[b.1].cmp(&size[a.1]).then(a.0.cmp(&b.0)));
            for (_, e) in new_tops {
                let k = argmin(&load);
                queue[e] = k as u32;
                load[k] += size[e];
            }
        }
    }
    for e in 0..n {
        if let Some(p) = ents[e].parent {
            queue[e] = queue[p as usize];
        }
    }

    // From here on circuits are visited in input order (sequential memory
    // access); `circ_ent` says which node each hangs under.
    let mut circ_ent: Vec<u32> = vec![0; circuits.len()];
    let mut has_circuits = vec![false; n];
    for (e, ent) in ents.iter_mut().enumerate() {
        has_circuits[e] = !ent.circuits.is_empty();
        for &ci in &ent.circuits {
            circ_ent[ci as usize] = e as u32;
        }
        ent.circuits = Vec::new();
    }

    // 6. HTB depth.
    for (e, ent) in ents.iter().enumerate() {
        let level = ent.depth + 1;
        if level > HTB_LEVELS {
            return Err(PlanError::TooDeep {
                what: format!("node {:?}", ent.name),
                levels: level,
            });
        }
        if has_circuits[e] && level + 1 > HTB_LEVELS {
            let ci = circ_ent.iter().position(|&x| x as usize == e).unwrap_or(0);
            return Err(PlanError::TooDeep {
                what: format!("circuit {:?} under node {:?}", circuits[ci].id, ent.name),
                levels: level + 1,
            });
        }
    }

    // 8. Class minors: survivors first, then the lowest free ones (nodes
    //    before circuits).
    let mut minors: Vec<Bits> = (0..q).map(|_| Bits::new([0, 1, 2], 0xffff)).collect();
    let mut node_minor = vec![0u16; n];
    if prev.is_some() {
        for e in 0..n {
            let qe = queue[e];
            if let Some(s) = prev_nodes.get(ents[e].name.as_ref()) {
                if s.queue == qe
                    && s.generated == ents[e].generated
                    && minors[qe as usize].take(u32::from(s.minor))
                {
                    node_minor[e] = s.minor;
                }
            }
        }
        for ((p, slot), &e) in cp.iter_mut().zip(&slots).zip(&circ_ent) {
            let qe = queue[e as usize];
            if let Some(s) = prev_circuits.get(slot.id.as_str()) {
                if s.queue == qe && minors[qe as usize].take(u32::from(s.minor)) {
                    p.minor = s.minor;
                }
            }
        }
    }
    let overflow = |qe: usize| PlanError::MinorOverflow {
        queue: qe as u32 + 1,
        major: qe as u16 + 1,
    };
    for e in 0..n {
        let qe = queue[e] as usize;
        if node_minor[e] == 0 {
            node_minor[e] = minors[qe].alloc().ok_or_else(|| overflow(qe))? as u16;
        }
    }
    for (p, &e) in cp.iter_mut().zip(&circ_ent) {
        let qe = queue[e as usize] as usize;
        if p.minor == 0 {
            p.minor = minors[qe].alloc().ok_or_else(|| overflow(qe))? as u16;
        }
    }

    // 9. Leaf qdisc majors, per interface: after the HTB majors and the
    //    default-class leaves, skipping 7fff: and ffff:.
    let htbs_per_dev = if stick { 2 * q } else { q } as u32;
    let leaf_base = 2 * htbs_per_dev + 1;
    let new_pool = || Bits::new((0..leaf_base).chain([0x7fff, 0xffff]), 0xffff);
    let mut pools = [new_pool(), new_pool()];
    let up_pool = if stick { 0 } else { 1 };
    if prev.is_some() {
        for (p, slot) in cp.iter_mut().zip(&slots) {
            if let Some(s) = prev_circuits.get(slot.id.as_str()) {
                if let (Some(m), true) = (s.leaf_download, p.leaf_d != NO_LEAF) {
                    if pools[0].take(u32::from(m)) {
                        p.major_d = m;
                    }
                }
                if let (Some(m), true) = (s.leaf_upload, p.leaf_u != NO_LEAF) {
                    if pools[up_pool].take(u32::from(m)) {
                        p.major_u = m;
                    }
                }
            }
        }
    }
    let (dev_d, dev_u) = match &cfg.interfaces {
        Interfaces::Bridge { download, upload } => (download.clone(), upload.clone()),
        Interfaces::OnAStick { interface, .. } => (interface.clone(), interface.clone()),
    };
    let leaf_overflow = |pool: usize, cp: &[CircPlan]| {
        let needed = cp
            .iter()
            .map(|p| {
                usize::from(pool == 0 && p.leaf_d != NO_LEAF)
                    + usize::from(pool == up_pool && p.leaf_u != NO_LEAF)
            })
            .sum::<usize>();
        PlanError::LeafMajorOverflow {
            interface: if pool == 0 {
                dev_d.clone()
            } else {
                dev_u.clone()
            },
            needed,
            available: 0x10000 - leaf_base as usize - 2,
        }
    };
    for i in 0..cp.len() {
        if cp[i].leaf_d != NO_LEAF && cp[i].major_d == 0 {
            match pools[0].alloc() {
                Some(m) => cp[i].major_d = m as u16,
                None => return Err(leaf_overflow(0, &cp)),
            }
        }
        if cp[i].leaf_u != NO_LEAF && cp[i].major_u == 0 {
            match pools[up_pool].alloc() {
                Some(m) => cp[i].major_u = m as u16,
                None => return Err(leaf_overflow(up_pool, &cp)),
            }
        }
    }

    // 10. Ops: the queue layout, then every node (parents first), then
    //     every circuit (class, then its leaf).
    let r2q = r2q_for(cfg.download_capacity.max(cfg.upload_capacity));
    let up_off = if stick { q as u16 } else { 0 };
    let default_leaf = match &cfg.default_sqm {
        LeafSpec::None => None,
        LeafSpec::Qdisc(k) => Some(k.clone()),
    };
    let leaves_d = cp.iter().filter(|p| p.leaf_d != NO_LEAF).count();
    let leaves_u = cp.iter().filter(|p| p.leaf_u != NO_LEAF).count();
    let est_d = 1 + 4 * q + n + cp.len() + leaves_d;
    let est_u = 1 + 4 * q + n + cp.len() + leaves_u;
    let mut ops_d: Vec<TcOp> = Vec::with_capacity(if stick { est_d + est_u } else { est_d });
    let mut ops_u: Vec<TcOp> = Vec::with_capacity(if stick { 0 } else { est_u });
    let root = TcOp::ReplaceQdisc(Qdisc {
        parent: TcHandle::ROOT,
        handle: MQ_HANDLE,
        kind: QdiscKind::Mq,
    });
    ops_d.push(root.clone());
    if !stick {
        ops_u.push(root);
    }
    let header = |ops: &mut Vec<TcOp>, cap: Rate, off: u16| {
        for i in 0..q as u16 {
            let m = i + 1 + off;
            ops.push(TcOp::AddQdisc(Qdisc {
                parent: TcHandle::new(0x7fff, m),
                handle: TcHandle::new(m, 0),
                kind: QdiscKind::Htb(HtbQdisc {
                    default_minor: 2,
                    r2q: None,
                    direct_qlen: None,
                }),
            }));
            ops.push(htb_class(
                TcHandle::new(m, 0),
                TcHandle::new(m, 1),
                cap,
                cap,
                0,
                r2q,
            ));
            let dceil = cap.saturating_sub(Rate::from_mbps(1));
            let drate = Rate::from_bps(dceil.bps() / 4);
            ops.push(htb_class(
                TcHandle::new(m, 1),
                TcHandle::new(m, 2),
                drate,
                dceil,
                5,
                r2q,
            ));
            if let Some(k) = &default_leaf {
                ops.push(TcOp::AddQdisc(Qdisc {
                    parent: TcHandle::new(m, 2),
                    handle: TcHandle::new(htbs_per_dev as u16 + m, 0),
                    kind: k.clone(),
                }));
            }
        }
    };
    header(&mut ops_d, cfg.download_capacity, 0);
    if stick {
        header(&mut ops_d, cfg.upload_capacity, up_off);
    } else {
        header(&mut ops_u, cfg.upload_capacity, 0);
    }
    let setup_d = ops_d.len();
    let setup_u = ops_u.len();
    let mut counts_d = vec![2usize; q];
    for e in 0..n {
        let qe = queue[e] as u16;
        let (md, mu) = (qe + 1, qe + 1 + up_off);
        let (pd, pu) = match ents[e].parent {
            Some(p) => {
                let pm = node_minor[p as usize];
                (TcHandle::new(md, pm), TcHandle::new(mu, pm))
            }
            None => (TcHandle::new(md, 1), TcHandle::new(mu, 1)),
        };
        let minor = node_minor[e];
        let (cd, cu) = (node_ceil_d[e], node_ceil_u[e]);
        counts_d[qe as usize] += 1;
        ops_d.push(htb_class(
            pd,
            TcHandle::new(md, minor),
            just_below(cd),
            cd,
            3,
            r2q,
        ));
        let up_ops = if stick { &mut ops_d } else { &mut ops_u };
        up_ops.push(htb_class(
            pu,
            TcHandle::new(mu, minor),
            just_below(cu),
            cu,
            3,
            r2q,
        ));
    }
    for (p, &e) in cp.iter().zip(&circ_ent) {
        let e = e as usize;
        let qe = queue[e] as u16;
        let (md, mu) = (qe + 1, qe + 1 + up_off);
        counts_d[qe as usize] += 1;
        let (nd, nu) = (
            TcHandle::new(md, node_minor[e]),
            TcHandle::new(mu, node_minor[e]),
        );
        let (cid_d, cid_u) = (TcHandle::new(md, p.minor), TcHandle::new(mu, p.minor));
        ops_d.push(htb_class(nd, cid_d, p.rate_d, p.ceil_d, 3, r2q));
        if p.leaf_d != NO_LEAF {
            ops_d.push(TcOp::AddQdisc(Qdisc {
                parent: cid_d,
                handle: TcHandle::new(p.major_d, 0),
                kind: kinds[p.leaf_d as usize].clone(),
            }));
        }
        let up_ops = if stick { &mut ops_d } else { &mut ops_u };
        up_ops.push(htb_class(nu, cid_u, p.rate_u, p.ceil_u, 3, r2q));
        if p.leaf_u != NO_LEAF {
            up_ops.push(TcOp::AddQdisc(Qdisc {
                parent: cid_u,
                handle: TcHandle::new(p.major_u, 0),
                kind: kinds[p.leaf_u as usize].clone(),
            }));
        }
    }

    // 11. Allocation.
    let nodes: Vec<NodeSlot> = ents
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
    for ((slot, p), &e) in slots.iter_mut().zip(&cp).zip(&circ_ent) {
        slot.parent = e;
        slot.queue = queue[e as usize];
        slot.minor = p.minor;
        slot.leaf_download = (p.leaf_d != NO_LEAF).then_some(p.major_d);
        slot.leaf_upload = (p.leaf_u != NO_LEAF).then_some(p.major_u);
    }

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
    Ok(Plan {
        config: cfg.clone(),
        interfaces,
        allocation: Allocation {
            queues: q as u32,
            nodes,
            circuits: slots,
        },
    })
}

fn fx_hash(s: &str) -> u64 {
    let mut h = FxHasher::default();
    h.write(s.as_bytes());
    h.finish()
}

/// Rejects two circuits with one ID (the exact check, run when the hashes
/// of two IDs collide).
fn check_unique_ids(circuits: &[Circuit]) -> Result<(), PlanError> {
    let mut exact: FxMap<&str, ()> = FxMap::default();
    for c in circuits {
        if exact.insert(c.id.as_str(), ()).is_some() {
            return Err(PlanError::DuplicateCircuit(c.id.clone()));
        }
    }
    Ok(())
}

fn argmin(v: &[impl Ord + Copy]) -> usize {
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

    #[test]
    fn r2q_and_quantum_follow_libreqos() {
        // 1 Gbit: 125e6 bytes / 60000 = 2083.3 -> 2084.
        assert_eq!(r2q_for(Rate::from_mbps(1000)), 2084);
        assert_eq!(r2q_for(Rate::from_mbps(10_000)), 20834);
        assert_eq!(r2q_for(Rate::from_mbps(4)), 10);
        assert_eq!(quantum_for(Rate::from_mbps(1000), 2084), 59980);
        assert_eq!(quantum_for(Rate::from_mbps(100), 2084), 5998);
        assert_eq!(quantum_for(Rate::from_mbps(10), 2084), QUANTUM_MIN);
        assert_eq!(
            quantum_for(Rate::from_mbps(100), 10),
            1_250_000.min(QUANTUM_MAX)
        );
    }

    #[test]
    fn just_below_stays_positive() {
        assert_eq!(just_below(Rate::from_mbps(100)), Rate::from_mbps(99));
        assert_eq!(just_below(Rate::from_mbps(1)), Rate::from_bps(990_000));
        assert_eq!(just_below(Rate::from_bps(10_000)), Rate::from_bps(5_000));
        assert_eq!(just_below(Rate::from_bps(1)), Rate::from_bps(8));
    }
}
