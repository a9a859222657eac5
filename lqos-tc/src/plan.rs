//! The planner: `Network` + `PlanConfig` (+ previous allocation) -> `Plan`.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::hash::Hasher;

use crate::fx::{FxHasher, FxMap, FxSet};

use serde::{Deserialize, Serialize};

use crate::classify::{self, Classifier, FilterKey, FlowerFilter, MatchSide};
use crate::ipmap::{IpMap, IpMapEntry, Steer};
use crate::{
    CircuitSqm, Class, FqCodelParams, Interfaces, LeafSpec, PlanConfig, Qdisc, QdiscKind,
    QueueStrategy, SqmChoice, TcHandle, TcOp, TcTree,
};
use ipnet::IpNet;
use lqos_model::{Circuit, Network, Rate, SmolStr};

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
#[non_exhaustive]
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
    #[error("circuit {circuit:?}{}: sqm {spec:?}: {reason}", csv_line(*.line))]
    CircuitSqm {
        /// Circuit ID.
        circuit: String,
        /// 1-based CSV line of the override (0 if not from a file).
        line: usize,
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

/// ` (ShapedDevices line N)`, or nothing for line 0 (not from a file).
fn csv_line(line: usize) -> String {
    if line == 0 {
        String::new()
    } else {
        format!(" (ShapedDevices line {line})")
    }
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
    /// The full build, in order: `qdisc replace` of the mq root (an HTB
    /// root `1:` with one queue per direction), per queue the HTB qdisc, top
    /// class `:1`, default class `:2` and its leaf; then per HTB the class
    /// tree depth-first ([`crate::locality_order`]): a node's class, its
    /// circuits (each class followed by its leaf qdisc), then its child
    /// nodes. No root delete.
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
                TcOp::ReplaceFilter(f) => {
                    t.filters.insert(f.key, f.clone());
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
#[non_exhaustive]
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
#[non_exhaustive]
pub struct CircuitSlot {
    /// Circuit ID.
    pub id: SmolStr,
    /// Circuit name (display only, never rendered into tc text).
    pub name: SmolStr,
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
#[non_exhaustive]
pub struct Allocation {
    /// HTB queues per direction this allocation was made for (a previous
    /// allocation is only reused when this matches).
    pub queues: u32,
    /// Node slots, parents before children.
    pub nodes: Vec<NodeSlot>,
    /// Circuit slots, in input order.
    pub circuits: Vec<CircuitSlot>,
    /// Filter handle of every device prefix (the `tc` classifier's filters
    /// keep them across reloads; kept even with `--classifier none`).
    #[serde(default)]
    pub filters: Vec<FilterSlot>,
}

/// A device prefix's stable filter handle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilterSlot {
    /// The address or prefix.
    pub net: IpNet,
    /// Its filter handle (never 0).
    pub handle: u32,
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
    /// Every device address/prefix -> circuit, queue and classid per
    /// direction (`ip_map.csv`, `lqos show --ip`, the classifier's source).
    #[serde(default)]
    pub ip_map: IpMap,
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

/// Turns a circuit's parsed [`SqmChoice`] (or none) into its leaf kind.
pub(crate) struct LeafChooser<'c> {
    pub(crate) cfg: &'c PlanConfig,
    /// Overrides already parsed, by the text as written (most files repeat
    /// a few values).
    pub(crate) cache: HashMap<(String, String), CircuitSqm>,
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

    /// The leaf for `choice` on a class with ceiling `ceil`.
    fn leaf(&self, choice: &SqmChoice, ceil: Rate) -> Option<QdiscKind> {
        match choice {
            SqmChoice::Default => self.default_for(ceil),
            SqmChoice::Cake => {
                let base = if self.cfg.default_sqm.is_cake() {
                    self.cfg.default_sqm.clone()
                } else {
                    LeafSpec::cake_diffserv4()
                };
                match base {
                    LeafSpec::Qdisc(k) => Some(cake_rtt_fixup(k, ceil)),
                    LeafSpec::None => None,
                }
            }
            SqmChoice::Spec(LeafSpec::None) => None,
            SqmChoice::Spec(LeafSpec::Qdisc(k)) => Some(cake_rtt_fixup(k.clone(), ceil)),
        }
    }

    /// Circuit `c`'s leaves (download, upload), its override parsed once
    /// per distinct text; an unusable override is an error naming the
    /// circuit and its CSV line.
    pub(crate) fn choose(
        &mut self,
        c: &Circuit,
        ceil_d: Rate,
        ceil_u: Rate,
    ) -> Result<(Option<QdiscKind>, Option<QdiscKind>), PlanError> {
        let Some(o) = &c.sqm else {
            return Ok((self.default_for(ceil_d), self.default_for(ceil_u)));
        };
        let key = (o.download.clone(), o.upload.clone());
        let sqm = match self.cache.get(&key) {
            Some(s) => s.clone(),
            None => {
                let s = CircuitSqm::parse(o, &c.id)?;
                self.cache.insert(key, s.clone());
                s
            }
        };
        Ok((
            self.leaf(&sqm.download, ceil_d),
            self.leaf(&sqm.upload, ceil_u),
        ))
    }
}

/// A circuit's class rate and ceiling for one direction under a parent
/// whose ceiling is `parent_ceil`.
pub(crate) fn circuit_rates(min: Rate, max: Rate, parent_ceil: Rate) -> (Rate, Rate) {
    let ceil = max.min(parent_ceil);
    let rate = if min >= ceil { just_below(ceil) } else { min };
    (rate.max(Rate::from_bps(8)), ceil.max(Rate::from_bps(8)))
}

/// No leaf qdisc (index into the leaf kind table).
const NO_LEAF: u16 = u16::MAX;

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

pub(crate) fn htb_class(
    parent: TcHandle,
    classid: TcHandle,
    rate: Rate,
    ceil: Rate,
    prio: u32,
    r2q: u64,
) -> TcOp {
    TcOp::AddClass(Class::htb(
        parent,
        classid,
        rate,
        ceil,
        prio,
        quantum_for(ceil, r2q),
    ))
}

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
/// stable filter handles, and the classifier's ops with `--classifier tc`).
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
    classify_stage(&mut plan, net.circuits(), previous);
    Ok(plan)
}

/// The previous allocation, indexed by node name and circuit ID; empty
/// unless it was made for the same number of queues.
struct Previous<'a> {
    alloc: Option<&'a Allocation>,
    nodes: FxMap<&'a str, &'a NodeSlot>,
    circuits: FxMap<&'a str, &'a CircuitSlot>,
}

impl<'a> Previous<'a> {
    fn new(previous: Option<&'a Allocation>, queues: usize) -> Previous<'a> {
        let alloc = previous.filter(|p| p.queues as usize == queues);
        let mut nodes: FxMap<&str, &NodeSlot> = FxMap::default();
        let mut circuits: FxMap<&str, &CircuitSlot> = FxMap::default();
        if let Some(p) = alloc {
            nodes.reserve(p.nodes.len());
            nodes.extend(p.nodes.iter().map(|n| (n.name.as_str(), n)));
            circuits.reserve(p.circuits.len());
            circuits.extend(p.circuits.iter().map(|c| (c.id.as_str(), c)));
        }
        Previous {
            alloc,
            nodes,
            circuits,
        }
    }

    /// The previous circuit slot of a circuit that hung under a generated
    /// parent node of queue `< q`: its queue.
    fn generated_queue(&self, id: &str, q: usize) -> Option<usize> {
        self.circuits
            .get(id)
            .filter(|s| {
                (s.queue as usize) < q
                    && self
                        .alloc
                        .and_then(|p| p.nodes.get(s.parent as usize))
                        .is_some_and(|n| n.generated)
            })
            .map(|s| s.queue as usize)
    }
}

/// A circuit's rates and leaf kinds (stage 1), in input order.
#[derive(Clone, Copy)]
struct CircRates {
    rate_d: Rate,
    ceil_d: Rate,
    rate_u: Rate,
    ceil_u: Rate,
    /// Index into [`Hierarchy::kinds`], or [`NO_LEAF`].
    leaf_d: u16,
    leaf_u: u16,
}

/// Stage 1: the HTB class hierarchy.
struct Hierarchy<'n> {
    /// Real nodes in preorder (parents first), then the generated parent
    /// nodes (one per queue, from `first_gen`; none if every circuit has a
    /// parent).
    ents: Vec<Ent<'n>>,
    /// Index of the first generated parent node.
    first_gen: usize,
    /// Node ceilings: the node's own maximum capped by its parent's.
    ceil_d: Vec<Rate>,
    ceil_u: Vec<Rate>,
    /// The node each circuit hangs under (index into `ents`).
    circ_ent: Vec<u32>,
    /// Circuits per node.
    circ_count: Vec<u32>,
    /// Per circuit: rates and leaf kinds.
    circ: Vec<CircRates>,
    /// Per circuit: its slot, with ID and name filled in.
    slots: Vec<CircuitSlot>,
    /// The distinct leaf kinds.
    kinds: Vec<QdiscKind>,
}

/// Stage 1: nodes (virtual ones hand their children to the nearest real
/// ancestor), node ceilings, each circuit's parent, rates and leaf kinds,
/// the generated parent nodes for circuits without one, and the HTB depth
/// check. Errors name the circuit or node.
fn hierarchy<'n>(
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
    let mut by_name: FxMap<&str, Option<u32>> = FxMap::default();
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
        cache: HashMap::new(),
    };
    let mut id_hashes: FxSet<u64> = FxSet::default();
    id_hashes.reserve(circuits.len());
    let mut maybe_duplicate = false;
    for (ci, c) in circuits.iter().enumerate() {
        maybe_duplicate |= !id_hashes.insert(fx_hash(&c.id));
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

    // Generated parent nodes, one pinned to each queue; a circuit keeps
    // the one it had, new ones are spread by the queue strategy.
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
            match prev.generated_queue(slots[ci as usize].id.as_str(), q) {
                Some(k) => {
                    circ_ent[ci as usize] = (first_gen + k) as u32;
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
            circ_ent[ci as usize] = (first_gen + k) as u32;
            counts[k] += 1;
        }
    }
    let mut circ_count = vec![0u32; ents.len()];
    for &e in &circ_ent {
        circ_count[e as usize] += 1;
    }

    // HTB depth: the link class is level 1.
    for (e, ent) in ents.iter().enumerate() {
        let level = ent.depth + 1;
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
    })
}

/// Stage 2: the 0-based queue of every node. Each top-level subtree lives
/// in one queue (HTB limits cannot cross HTB qdiscs): a generated parent
/// node in its own queue, a surviving top-level node in its previous one,
/// new ones by the queue strategy (round-robin in input order, or the
/// largest subtrees first onto the least loaded queue). Children inherit.
#[allow(clippy::needless_range_loop)] // parallel per-node arrays
fn queues(h: &Hierarchy, cfg: &PlanConfig, prev: &Previous) -> Vec<u32> {
    let q = cfg.queues_per_direction() as usize;
    let ents = &h.ents;
    let n = ents.len();
    // Subtree sizes (ents are in preorder: children after parents).
    let mut size = vec![0u64; n];
    for e in (0..n).rev() {
        size[e] += 1 + u64::from(h.circ_count[e]);
        if let Some(p) = ents[e].parent {
            size[p as usize] += size[e];
        }
    }
    let mut queue = vec![u32::MAX; n];
    let mut load = vec![0u64; q];
    let mut new_tops = Vec::new();
    let mut top_index = 0usize;
    for e in 0..n {
        if ents[e].parent.is_some() {
            continue;
        }
        if ents[e].generated {
            queue[e] = (e - h.first_gen) as u32;
        } else if let Some(s) = prev
            .nodes
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
    queue
}

/// A circuit's ids (stage 3), in input order.
#[derive(Clone, Copy, Default)]
struct CircIds {
    /// Class minor (both directions).
    minor: u16,
    /// Leaf qdisc majors (0 when the circuit has no leaf that side).
    major_d: u16,
    major_u: u16,
}

/// Stage 3 output: class minors and leaf majors.
struct Ids {
    node_minor: Vec<u16>,
    circ: Vec<CircIds>,
}

/// The download and upload device names.
pub(crate) fn devices(cfg: &PlanConfig) -> (String, String) {
    match &cfg.interfaces {
        Interfaces::Bridge { download, upload } => (download.clone(), upload.clone()),
        Interfaces::OnAStick { interface, .. } => (interface.clone(), interface.clone()),
    }
}

/// HTB qdiscs per device: one per queue, or two on a stick.
/// One queue per direction on a bridge: the HTB is the root (mq needs a
/// multiqueue device; a single-queue NIC refuses it).
fn single_queue(cfg: &PlanConfig) -> bool {
    !matches!(cfg.interfaces, Interfaces::OnAStick { .. }) && cfg.queues_per_direction() == 1
}

fn htbs_per_dev(cfg: &PlanConfig) -> u32 {
    let q = cfg.queues_per_direction();
    if matches!(cfg.interfaces, Interfaces::OnAStick { .. }) {
        2 * q
    } else {
        q
    }
}

/// Stage 3: class minors per queue (survivors of `prev` keep theirs, then
/// the lowest free ones from 3, nodes before circuits) and leaf qdisc
/// majors per device (after the HTB majors and the default-class leaves,
/// skipping `7fff:` and `ffff:`; survivors keep theirs).
fn ids(h: &Hierarchy, queue: &[u32], cfg: &PlanConfig, prev: &Previous) -> Result<Ids, PlanError> {
    let q = cfg.queues_per_direction() as usize;
    let stick = matches!(cfg.interfaces, Interfaces::OnAStick { .. });
    let n = h.ents.len();
    let mut minors: Vec<Bits> = (0..q).map(|_| Bits::new([0, 1, 2], 0xffff)).collect();
    let mut node_minor = vec![0u16; n];
    let mut circ = vec![CircIds::default(); h.circ.len()];
    if prev.alloc.is_some() {
        for (e, ent) in h.ents.iter().enumerate() {
            let qe = queue[e];
            if let Some(s) = prev.nodes.get(ent.name.as_ref()) {
                if s.queue == qe
                    && s.generated == ent.generated
                    && minors[qe as usize].take(u32::from(s.minor))
                {
                    node_minor[e] = s.minor;
                }
            }
        }
        for ((c, slot), &e) in circ.iter_mut().zip(&h.slots).zip(&h.circ_ent) {
            let qe = queue[e as usize];
            if let Some(s) = prev.circuits.get(slot.id.as_str()) {
                if s.queue == qe && minors[qe as usize].take(u32::from(s.minor)) {
                    c.minor = s.minor;
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
    for (c, &e) in circ.iter_mut().zip(&h.circ_ent) {
        let qe = queue[e as usize] as usize;
        if c.minor == 0 {
            c.minor = minors[qe].alloc().ok_or_else(|| overflow(qe))? as u16;
        }
    }

    let leaf_base = 2 * htbs_per_dev(cfg) + 1;
    let new_pool = || Bits::new((0..leaf_base).chain([0x7fff, 0xffff]), 0xffff);
    let mut pools = [new_pool(), new_pool()];
    let up_pool = if stick { 0 } else { 1 };
    if prev.alloc.is_some() {
        for ((c, r), slot) in circ.iter_mut().zip(&h.circ).zip(&h.slots) {
            if let Some(s) = prev.circuits.get(slot.id.as_str()) {
                if let (Some(m), true) = (s.leaf_download, r.leaf_d != NO_LEAF) {
                    if pools[0].take(u32::from(m)) {
                        c.major_d = m;
                    }
                }
                if let (Some(m), true) = (s.leaf_upload, r.leaf_u != NO_LEAF) {
                    if pools[up_pool].take(u32::from(m)) {
                        c.major_u = m;
                    }
                }
            }
        }
    }
    let leaf_overflow = |pool: usize| {
        let needed = h
            .circ
            .iter()
            .map(|r| {
                usize::from(pool == 0 && r.leaf_d != NO_LEAF)
                    + usize::from(pool == up_pool && r.leaf_u != NO_LEAF)
            })
            .sum::<usize>();
        let (dev_d, dev_u) = devices(cfg);
        PlanError::LeafMajorOverflow {
            interface: if pool == 0 { dev_d } else { dev_u },
            needed,
            available: 0x10000 - leaf_base as usize - 2,
        }
    };
    for (c, r) in circ.iter_mut().zip(&h.circ) {
        if r.leaf_d != NO_LEAF && c.major_d == 0 {
            match pools[0].alloc() {
                Some(m) => c.major_d = m as u16,
                None => return Err(leaf_overflow(0)),
            }
        }
        if r.leaf_u != NO_LEAF && c.major_u == 0 {
            match pools[up_pool].alloc() {
                Some(m) => c.major_u = m as u16,
                None => return Err(leaf_overflow(up_pool)),
            }
        }
    }
    Ok(Ids { node_minor, circ })
}

/// The queue layout of one device's direction: per queue the HTB qdisc
/// (major `queue + 1 + off`), top class `:1` at `cap`, default class `:2`
/// and its leaf.
fn layout_ops(ops: &mut Vec<TcOp>, cfg: &PlanConfig, cap: Rate, off: u16, r2q: u64) {
    let htbs = htbs_per_dev(cfg) as u16;
    for i in 0..cfg.queues_per_direction() as u16 {
        let m = i + 1 + off;
        if !single_queue(cfg) {
            ops.push(TcOp::AddQdisc(Qdisc::htb(TcHandle::new(0x7fff, m), m, 2)));
        }
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
        if let LeafSpec::Qdisc(k) = &cfg.default_sqm {
            ops.push(TcOp::AddQdisc(Qdisc::leaf(
                TcHandle::new(m, 2),
                htbs + m,
                k.clone(),
            )));
        }
    }
}

/// Stage 4: the ops per interface (the queue layout, then every node
/// parents first, then every circuit: class, then its leaf) and the
/// allocation to feed back next time.
fn build(h: Hierarchy, queue: &[u32], ids: &Ids, cfg: &PlanConfig) -> Plan {
    let q = cfg.queues_per_direction() as usize;
    let stick = matches!(cfg.interfaces, Interfaces::OnAStick { .. });
    let n = h.ents.len();
    let r2q = r2q_for(cfg.download_capacity.max(cfg.upload_capacity));
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
            None => (TcHandle::new(md, 1), TcHandle::new(mu, 1)),
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
        ops_d.push(htb_class(nd, cid_d, r.rate_d, r.ceil_d, 3, r2q));
        if r.leaf_d != NO_LEAF {
            ops_d.push(TcOp::AddQdisc(Qdisc::leaf(
                cid_d,
                c.major_d,
                h.kinds[r.leaf_d as usize].clone(),
            )));
        }
        let up_ops = if stick { &mut ops_d } else { &mut ops_u };
        up_ops.push(htb_class(nu, cid_u, r.rate_u, r.ceil_u, 3, r2q));
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
    }
}

/// Filter slots sorted by prefix, one per prefix (the allocation's
/// canonical form).
pub(crate) fn filter_slots(it: impl Iterator<Item = (IpNet, u32)>) -> Vec<FilterSlot> {
    let mut v: Vec<FilterSlot> = it
        .map(|(net, handle)| FilterSlot {
            net: net.trunc(),
            handle,
        })
        .collect();
    v.sort_by_key(|f| f.net);
    v.dedup_by_key(|f| f.net);
    v
}

/// Stage 5: the IP map with stable filter handles (from `previous`, which
/// need not have the same number of queues) and, with `--classifier tc`,
/// the classifier's ops appended after the tree (locality order is for
/// the HTB subtrees; filters come last so a packet is never steered to a
/// class that is not there yet).
fn classify_stage(plan: &mut Plan, circuits: &[Circuit], previous: Option<&Allocation>) {
    let stick = matches!(plan.config.interfaces, Interfaces::OnAStick { .. });
    let (dev_d, dev_u) = devices(&plan.config);
    let ip_map = ip_map(
        circuits,
        &plan.allocation.circuits,
        previous,
        plan.allocation.queues,
        stick,
        &dev_d,
        &dev_u,
    );
    if plan.config.classifier == Classifier::Tc {
        // dst_ip filters steer download, src_ip filters upload; on a stick
        // both sets are on the one interface.
        const DOWN: (MatchSide, bool) = (MatchSide::Dst, false);
        const UP: (MatchSide, bool) = (MatchSide::Src, true);
        match plan.interfaces.as_mut_slice() {
            [one] => push_filters(&mut one.ops, &ip_map, &[DOWN, UP]),
            [down, up] => {
                push_filters(&mut down.ops, &ip_map, &[DOWN]);
                push_filters(&mut up.ops, &ip_map, &[UP]);
            }
            _ => unreachable!("a plan has one interface (stick) or two (bridge)"),
        }
    }
    plan.allocation.filters =
        filter_slots(ip_map.entries().iter().map(|e| (e.net, e.filter_handle)));
    plan.ip_map = ip_map;
}

/// Appends the IP map entries of circuit `ci` (in `slot`) to `out`: one per
/// device address/prefix, devices in order, IPv4 then IPv6, filter handle
/// 0 (assigned afterwards). Shared by the planner and the incremental
/// re-plan, so both build identical entries.
#[allow(clippy::too_many_arguments)]
pub(crate) fn push_circuit_entries(
    out: &mut Vec<IpMapEntry>,
    ci: usize,
    c: &Circuit,
    slot: &CircuitSlot,
    per_dir: u32,
    stick: bool,
    dev_d: &SmolStr,
    dev_u: &SmolStr,
) {
    let qd = slot.queue;
    let qu = if stick {
        per_dir + slot.queue
    } else {
        slot.queue
    };
    let steer = |dev: &SmolStr, queue: u32| Steer {
        dev: dev.clone(),
        queue,
        classid: TcHandle::new(queue as u16 + 1, slot.minor),
    };
    for d in &c.devices {
        let nets = d.ipv4.iter().map(|n| IpNet::V4(*n));
        for net in nets.chain(d.ipv6.iter().map(|n| IpNet::V6(*n))) {
            out.push(IpMapEntry {
                net: net.trunc(),
                circuit: ci as u32,
                circuit_id: c.id.clone(),
                circuit_name: c.name.clone(),
                device_id: d.id.clone(),
                device_name: d.name.clone(),
                download: steer(dev_d, qd),
                upload: steer(dev_u, qu),
                filter_handle: 0,
            });
        }
    }
}

/// The IP map: one entry per device address/prefix, each prefix with the
/// filter handle it had in `previous` (or the lowest free one).
fn ip_map(
    circuits: &[Circuit],
    slots: &[CircuitSlot],
    previous: Option<&Allocation>,
    per_dir: u32,
    stick: bool,
    dev_d: &str,
    dev_u: &str,
) -> IpMap {
    let count: usize = circuits
        .iter()
        .flat_map(|c| &c.devices)
        .map(|d| d.ipv4.len() + d.ipv6.len())
        .sum();
    let mut entries = Vec::with_capacity(count);
    let (dev_d, dev_u) = (SmolStr::from(dev_d), SmolStr::from(dev_u));
    for (ci, (c, slot)) in circuits.iter().zip(slots).enumerate() {
        push_circuit_entries(&mut entries, ci, c, slot, per_dir, stick, &dev_d, &dev_u);
    }
    // Handles: survivors keep theirs; one handle per distinct prefix.
    let mut assigned: FxMap<IpNet, u32> = FxMap::default();
    let mut used: FxSet<u32> = FxSet::default();
    if let Some(p) = previous {
        let wanted: FxSet<IpNet> = entries.iter().map(|e| e.net).collect();
        for s in &p.filters {
            if s.handle != 0
                && wanted.contains(&s.net)
                && !assigned.contains_key(&s.net)
                && used.insert(s.handle)
            {
                assigned.insert(s.net, s.handle);
            }
        }
    }
    let mut next = 1u32;
    for e in &mut entries {
        e.filter_handle = *assigned.entry(e.net).or_insert_with(|| {
            while used.contains(&next) {
                next += 1;
            }
            used.insert(next);
            next
        });
    }
    IpMap::new(entries)
}

/// Appends the `clsact` replace and one filter per distinct prefix for each
/// `(side, upload)`: `dst_ip` filters steer to the download classids,
/// `src_ip` ones to the upload classids.
fn push_filters(ops: &mut Vec<TcOp>, map: &IpMap, sides: &[(MatchSide, bool)]) {
    ops.push(TcOp::ReplaceQdisc(classify::clsact()));
    let mut seen: FxSet<FilterKey> = FxSet::default();
    for &(side, upload) in sides {
        for e in map.entries() {
            let s = if upload { &e.upload } else { &e.download };
            let f = FlowerFilter::steer(side, e.net, e.filter_handle, s.queue as u16, s.classid);
            if seen.insert(f.key) {
                ops.push(TcOp::ReplaceFilter(f));
            }
        }
    }
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
            return Err(PlanError::DuplicateCircuit(c.id.to_string()));
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
    use lqos_model::Node;

    fn node(name: &str, mbps: u64, virtual_node: bool) -> Node {
        Node {
            name: name.into(),
            id: None,
            node_type: None,
            download: Rate::from_mbps(mbps),
            upload: Rate::from_mbps(mbps),
            virtual_node,
        }
    }

    fn circuit(id: &str, parent: Option<&str>, max: u64) -> Circuit {
        Circuit {
            id: id.into(),
            name: format!("name of {id}").into(),
            parent: parent.map(Into::into),
            download_min: Rate::from_mbps(1),
            upload_min: Rate::from_mbps(1),
            download_max: Rate::from_mbps(max),
            upload_max: Rate::from_mbps(max),
            comment: SmolStr::default(),
            sqm: None,
            devices: vec![],
        }
    }

    /// Site_A (800) > virtual V > AP (2000), Site_B (100); circuits under
    /// V, AP, Site_B and one without a parent.
    fn net() -> Network {
        let mut net = Network::new();
        net.add_node(None, node("Site_A", 800, false)).unwrap();
        net.add_node(Some("Site_A"), node("V", 50, true)).unwrap();
        net.add_node(Some("V"), node("AP", 2000, false)).unwrap();
        net.add_node(None, node("Site_B", 100, false)).unwrap();
        net.add_circuit(circuit("under_v", Some("V"), 900));
        net.add_circuit(circuit("under_ap", Some("AP"), 10));
        net.add_circuit(circuit("under_b", Some("Site_B"), 10));
        net.add_circuit(circuit("orphan", None, 10));
        net
    }

    fn cfg(queues: u32) -> PlanConfig {
        let mut c = PlanConfig::bridge("ens19", "ens20", queues);
        c.strategy = QueueStrategy::RoundRobin;
        c
    }

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
        for i in 0..HTB_LEVELS {
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
                what: "node \"N7\"".into(),
                levels: 9
            }
        );
    }

    #[test]
    fn queues_keep_survivors_and_spread_new_subtrees() {
        let net = net();
        let mut c = cfg(2);
        let none = Previous::new(None, 2);
        let h = hierarchy(&net, &c, &none).unwrap();
        // Round-robin in input order; children inherit; generated PNs pinned.
        assert_eq!(queues(&h, &c, &none), [0, 0, 1, 0, 1]);
        // Balanced: the larger subtree (Site_A: 2 nodes + 2 circuits) goes
        // to the less loaded queue (PN_1 holds the orphan on queue 0).
        c.strategy = QueueStrategy::Balanced;
        assert_eq!(queues(&h, &c, &none), [1, 1, 0, 0, 1]);
        // A surviving top-level node keeps its queue (Site_B keeps its
        // round-robin place, the second top-level node).
        let p = plan(&net, &cfg(2), None).unwrap();
        let mut alloc = p.allocation.clone();
        alloc.nodes[0].queue = 1;
        let prev = Previous::new(Some(&alloc), 2);
        assert_eq!(queues(&h, &cfg(2), &prev)[..3], [1, 1, 1]);
        // An allocation for another queue count is ignored.
        assert!(Previous::new(Some(&alloc), 3).alloc.is_none());
    }

    #[test]
    fn ids_keep_surviving_minors_and_majors_and_fill_the_lowest_free() {
        let (net, c) = (net(), cfg(2));
        let none = Previous::new(None, 2);
        let h = hierarchy(&net, &c, &none).unwrap();
        let queue = queues(&h, &c, &none);
        let fresh = ids(&h, &queue, &c, &none).unwrap();
        // Queue 0 holds Site_A, AP, PN_1 (minors 3, 4, 5), then circuits.
        assert_eq!(fresh.node_minor, [3, 4, 3, 5, 4]);
        let minors: Vec<u16> = fresh.circ.iter().map(|c| c.minor).collect();
        assert_eq!(minors, [6, 7, 5, 8]);
        // Leaf majors after 2 HTBs and 2 default leaves: from 5.
        let majors: Vec<u16> = fresh.circ.iter().map(|c| c.major_d).collect();
        assert_eq!(majors, [5, 6, 7, 8]);
        // Survivors keep their ids; a new circuit takes the lowest free
        // ones (6 and 5, which the moved survivor gave up).
        let mut alloc = plan(&net, &c, None).unwrap().allocation;
        alloc.circuits[0].minor = 40;
        alloc.circuits[0].leaf_download = Some(90);
        alloc.circuits.remove(1);
        let prev = Previous::new(Some(&alloc), 2);
        let again = ids(&h, &queue, &c, &prev).unwrap();
        assert_eq!((again.circ[0].minor, again.circ[0].major_d), (40, 90));
        assert_eq!((again.circ[1].minor, again.circ[1].major_d), (6, 5));
        assert_eq!((again.circ[3].minor, again.circ[3].major_d), (8, 8));
    }

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
