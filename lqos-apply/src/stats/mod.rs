//! Per-circuit statistics: one poll of the kernel's counters, mapped
//! through the plan to circuits, nodes and directions, with rates from the
//! counters' deltas.
//!
//! - [`StatsIndex::new`] (pure, once per plan): which classid is which
//!   circuit or node in which direction, which leaf qdisc is whose, and
//!   every class's planned rate and ceil.
//! - [`LiveSource::poll`](crate::live::LiveSource::poll) of a [`PollRequest`]:
//!   the I/O, per interface one class dump per planned HTB (counters,
//!   64-bit packets, HTB's statistics) and, where asked, one qdisc dump
//!   (the leaves' counters, cake's per-tin and fq_codel's statistics)
//!   where a planned leaf keeps statistics of its own: an interface whose
//!   leaves are all pfifo or bfifo, or that has none, is not dumped
//!   ([`StatsIndex::leaf_dump_needed`]). The same class samples
//!   ([`IfaceSamples::classes`]) go to lazy leaves
//!   ([`crate::lazy::LeafTracker::observe`]), so one set of dumps serves
//!   both; the daemon makes one poll for both.
//! - [`StatsPoll`]: the index and the tracker of one plan, kept poll after
//!   poll and across reloads, each poll giving a [`Snapshot`].
//! - [`StatsTracker::observe`] (pure: values and a monotonic time in): the
//!   [`Stats`] of one poll. Counters are kept monotonic across a class or
//!   leaf that was recreated (its kernel counters restart from 0, or it was
//!   missing from a poll: a lazy leaf taken away and given back): the
//!   recreated object's counters are added to what its predecessor had
//!   counted. Rates are the deltas over the time since the previous poll.
//!
//! - [`openmetrics::render`]: the [`Stats`] as OpenMetrics text.
//!
//! Drops of a circuit: its class's (a packet its leaf refused, and, with no
//! explicit leaf, HTB's own fifo) plus those cake and fq_codel count inside
//! (a packet they drop after taking it, which HTB never sees). pfifo and
//! bfifo leaves only refuse, so their drops are already the class's.
//!
//! ```
//! use lqos_apply::stats::{IfaceSamples, Samples, StatsIndex, StatsTracker};
//! use std::time::Duration;
//!
//! let g = lqos_model::generate(&lqos_model::GenParams::with_circuits(5));
//! let cfg = lqos_apply::inputs::plan_config(&g.config, None, &Default::default(),
//!     lqos_apply::inputs::QueueCount::Default(2)).unwrap();
//! let plan = lqos_tc::plan(&g.network, &cfg, None).unwrap();
//! let index = StatsIndex::new(&plan);
//! let mut tracker = StatsTracker::new(&index);
//! // No traffic yet: counters at zero, no rate before a second poll.
//! let raw = Samples::from(index.devs().map(|d| IfaceSamples::empty(d)).collect::<Vec<_>>());
//! let s = tracker.observe(&index, &raw, Duration::from_secs(1));
//! assert_eq!(s.circuits.len(), 5);
//! assert_eq!(s.interval_secs, None);
//! ```

pub mod openmetrics;
mod poll;

pub use crate::sample::{IfaceSamples, PollRequest, PollTarget, Polled, Samples};
pub use poll::{Snapshot, StatsPoll};

use std::collections::HashMap;
use std::time::Duration;

use lqos_tc::allocation::Direction;
use lqos_tc::ops::QdiscKind;
use lqos_tc::{Plan, TcHandle, TcOp};
use serde::Serialize;
use smol_str::SmolStr;

use crate::netlink::{CakeTin, FqCodelXstats, LeafXstats};

/// Download or upload (the two halves of every circuit and node).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Dir {
    /// Towards the subscribers.
    Download,
    /// Towards the internet.
    Upload,
}

impl Dir {
    /// Both, download first.
    pub const BOTH: [Dir; 2] = [Dir::Download, Dir::Upload];

    fn i(self) -> usize {
        self as usize
    }

    /// `download` or `upload`.
    pub fn name(self) -> &'static str {
        match self {
            Dir::Download => "download",
            Dir::Upload => "upload",
        }
    }
}

/// What a planned class is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owner {
    Circuit(u32),
    Node(u32),
    /// The default class `:2` of 0-based queue N: traffic no circuit's
    /// class took (an address no device has).
    Default(u32),
}

/// A planned circuit, as the statistics name it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CircuitInfo {
    /// Circuit ID.
    pub id: SmolStr,
    /// Circuit name.
    pub name: SmolStr,
    /// Index of its parent node in [`StatsIndex::nodes`].
    pub parent: u32,
    /// Planned rate (HTB `rate`) per direction, bits/s (0: not planned).
    pub min_bps: [u64; 2],
    /// Planned ceil per direction, bits/s.
    pub ceil_bps: [u64; 2],
}

/// A planned node (site, AP, generated parent node).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeInfo {
    /// Node name.
    pub name: String,
    /// Index of its parent node.
    pub parent: Option<u32>,
    /// Planned ceil per direction, bits/s.
    pub ceil_bps: [u64; 2],
}

#[derive(Debug, Clone)]
struct IfaceIndex {
    dev: String,
    direction: Direction,
    htbs: Vec<TcHandle>,
    /// Raw classid -> what it is, in which direction.
    classes: HashMap<u32, (Owner, Dir)>,
    /// Leaf qdisc major -> circuit, direction.
    leaves: HashMap<u16, (u32, Dir)>,
    /// The planned leaves' kinds when every one is pfifo or bfifo (or
    /// there is none): such leaves count nothing their class does not
    /// (they only refuse, and a refusal is the class's drop), so the poll
    /// leaves out the interface's qdisc dump. `None`: some leaf keeps
    /// statistics of its own (cake, fq_codel, another kind).
    fifo_leaves: Option<HashMap<u16, &'static str>>,
}

/// Which classid and leaf is which circuit or node, per interface (built
/// once per plan; pure).
#[derive(Debug, Clone)]
pub struct StatsIndex {
    ifaces: Vec<IfaceIndex>,
    /// Every planned circuit, in allocation order.
    pub circuits: Vec<CircuitInfo>,
    /// Every planned node, parents before children.
    pub nodes: Vec<NodeInfo>,
    /// HTB queues per direction (each has a default class `:2`).
    queues: u32,
    /// The default classes' planned ceil per direction, bits/s.
    default_ceil_bps: [u64; 2],
}

fn dirs(d: Direction) -> &'static [(Direction, Dir)] {
    match d {
        Direction::Download => &[(Direction::Download, Dir::Download)],
        Direction::Upload => &[(Direction::Upload, Dir::Upload)],
        Direction::Both => &[
            (Direction::Download, Dir::Download),
            (Direction::Upload, Dir::Upload),
        ],
    }
}

impl StatsIndex {
    /// The index of `plan`.
    pub fn new(plan: &Plan) -> StatsIndex {
        let a = &plan.allocation;
        let mut circuits: Vec<CircuitInfo> = a
            .circuits
            .iter()
            .map(|c| CircuitInfo {
                id: c.id.clone(),
                name: c.name.clone(),
                parent: c.parent,
                min_bps: [0; 2],
                ceil_bps: [0; 2],
            })
            .collect();
        let mut nodes: Vec<NodeInfo> = a
            .nodes
            .iter()
            .map(|n| NodeInfo {
                name: n.name.clone(),
                parent: n.parent,
                ceil_bps: [0; 2],
            })
            .collect();
        let mut ifaces = Vec::new();
        let mut default_ceil_bps = [0; 2];
        for ip in &plan.interfaces {
            let mut classes = HashMap::new();
            let mut leaves = HashMap::new();
            for &(pd, d) in dirs(ip.direction) {
                for (i, c) in a.circuits.iter().enumerate() {
                    let id = TcHandle::new(plan.major(pd, c.queue), c.minor);
                    classes.insert(id.raw(), (Owner::Circuit(i as u32), d));
                    let leaf = match d {
                        Dir::Download => c.leaf_download,
                        Dir::Upload => c.leaf_upload,
                    };
                    if let Some(m) = leaf {
                        leaves.insert(m, (i as u32, d));
                    }
                }
                for (i, n) in a.nodes.iter().enumerate() {
                    let id = TcHandle::new(plan.major(pd, n.queue), n.minor);
                    classes.insert(id.raw(), (Owner::Node(i as u32), d));
                }
                for q in 0..a.queues {
                    let id = TcHandle::new(plan.major(pd, q), DEFAULT_MINOR);
                    classes.insert(id.raw(), (Owner::Default(q), d));
                }
            }
            let mut fifo_leaves = Some(HashMap::new());
            for op in &ip.ops {
                if let TcOp::AddQdisc(q) | TcOp::ReplaceQdisc(q) = op {
                    if leaves.contains_key(&q.handle.major()) {
                        let fifo = match q.kind {
                            QdiscKind::Pfifo { .. } => Some("pfifo"),
                            QdiscKind::Bfifo { .. } => Some("bfifo"),
                            _ => None,
                        };
                        fifo_leaves = fifo_leaves.zip(fifo).map(|(mut m, k)| {
                            m.insert(q.handle.major(), k);
                            m
                        });
                    }
                }
                let (TcOp::AddClass(c) | TcOp::ChangeClass(c)) = op else {
                    continue;
                };
                match classes.get(&c.classid.raw()) {
                    Some(&(Owner::Circuit(i), d)) => {
                        let ci = &mut circuits[i as usize];
                        ci.min_bps[d.i()] = c.htb.rate.bps();
                        ci.ceil_bps[d.i()] = c.htb.ceil.bps();
                    }
                    Some(&(Owner::Node(i), d)) => {
                        nodes[i as usize].ceil_bps[d.i()] = c.htb.ceil.bps();
                    }
                    Some(&(Owner::Default(_), d)) => {
                        let ceil = &mut default_ceil_bps[d.i()];
                        *ceil = (*ceil).max(c.htb.ceil.bps());
                    }
                    None => {}
                }
            }
            // Every HTB qdisc of the setup: the per-queue ones under mq, or
            // the HTB root of a single-queue interface.
            let htbs = ip
                .htb_majors()
                .into_iter()
                .map(|m| TcHandle::new(m, 0))
                .collect();
            ifaces.push(IfaceIndex {
                dev: ip.dev.clone(),
                direction: ip.direction,
                htbs,
                classes,
                leaves,
                fifo_leaves,
            });
        }
        StatsIndex {
            ifaces,
            circuits,
            nodes,
            queues: a.queues,
            default_ceil_bps,
        }
    }

    /// The planned interfaces, in plan order.
    pub fn devs(&self) -> impl Iterator<Item = &str> {
        self.ifaces.iter().map(|i| i.dev.as_str())
    }

    /// Whether a poll of `dev` needs its qdisc dump for the leaves'
    /// statistics: `false` when every planned leaf is a pfifo or bfifo
    /// (their counts are their class's) or there is none. `true` for a
    /// device not in the index.
    pub fn leaf_dump_needed(&self, dev: &str) -> bool {
        self.ifaces
            .iter()
            .find(|i| i.dev == dev)
            .is_none_or(|i| i.fifo_leaves.is_none())
    }

    /// The HTB qdiscs of `dev` whose class dumps the poll reads.
    pub fn htbs_of(&self, dev: &str) -> Option<&[TcHandle]> {
        self.ifaces
            .iter()
            .find(|i| i.dev == dev)
            .map(|i| i.htbs.as_slice())
    }

    /// The planned interfaces with the HTB qdiscs whose class dumps the
    /// poll reads.
    pub fn htbs(&self) -> impl Iterator<Item = (&str, &[TcHandle])> {
        self.ifaces
            .iter()
            .map(|i| (i.dev.as_str(), i.htbs.as_slice()))
    }
}

/// A counter kept monotonic across restarts of the kernel's.
#[derive(Debug, Clone, Copy, Default)]
struct Mono {
    raw: u64,
    total: u64,
    seen: bool,
}

impl Mono {
    /// Takes the kernel's value; returns what it added. A value below the
    /// last one, or the first after a poll that did not see the object, is
    /// a new object's: all of it is new.
    fn update(&mut self, raw: u64) -> u64 {
        let delta = if self.seen && raw >= self.raw {
            raw - self.raw
        } else {
            raw
        };
        self.raw = raw;
        self.total += delta;
        self.seen = true;
        delta
    }

    fn missing(&mut self) {
        self.seen = false;
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct DirAcc {
    bytes: Mono,
    packets: Mono,
    drops: Mono,
    overlimits: Mono,
    leaf_drops: Mono,
    ecn: Mono,
}

impl DirAcc {
    /// The class was not in a poll: its next sample is a new class's.
    fn class_missing(&mut self) {
        for m in [
            &mut self.bytes,
            &mut self.packets,
            &mut self.drops,
            &mut self.overlimits,
        ] {
            m.missing();
        }
    }
}

/// One direction of a circuit or node in one poll.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct DirStats {
    /// Bytes sent (monotonic: across recreated classes).
    pub bytes: u64,
    /// Packets sent.
    pub packets: u64,
    /// Packets dropped (the class's and its leaf's, see the module docs).
    pub drops: u64,
    /// HTB overlimit events (the class waited for tokens).
    pub overlimits: u64,
    /// Packets ECN-marked (cake's tins, fq_codel).
    pub ecn_marks: u64,
    /// Bytes queued now.
    pub backlog_bytes: u64,
    /// Packets queued now.
    pub qlen: u64,
    /// Send rate over the last interval, bits/s (0 on the first poll).
    pub rate_bps: f64,
    /// Packets/s over the last interval.
    pub packet_rate: f64,
    /// Drops/s over the last interval.
    pub drop_rate: f64,
    /// ECN marks/s over the last interval.
    pub ecn_rate: f64,
    /// Planned rate, bits/s.
    pub min_bps: u64,
    /// Planned ceil, bits/s.
    pub ceil_bps: u64,
    /// The leaf qdisc's kind, when it has one now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leaf: Option<String>,
    /// cake's tins (counters since the leaf was created), diffserv4:
    /// Bulk, Best Effort, Video, Voice.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tins: Vec<CakeTin>,
    /// fq_codel's statistics.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fq_codel: Option<FqCodelXstats>,
    /// HTB's lends and borrows of the class (since it was created).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub htb: Option<crate::netlink::HtbXstats>,
}

impl DirStats {
    /// The worst (highest) peak delay of cake's tins, µs.
    pub fn worst_delay_us(&self) -> Option<u32> {
        self.tins.iter().map(|t| t.peak_delay_us).max()
    }

    /// Rate as a fraction of the ceil (0 without a ceil).
    pub fn utilisation(&self) -> f64 {
        if self.ceil_bps == 0 {
            0.0
        } else {
            self.rate_bps / self.ceil_bps as f64
        }
    }
}

/// One circuit in one poll.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct CircuitStats {
    /// Circuit ID.
    pub id: SmolStr,
    /// Circuit name.
    pub name: SmolStr,
    /// Parent node name.
    pub parent: String,
    /// Towards the subscriber.
    pub download: DirStats,
    /// Towards the internet.
    pub upload: DirStats,
}

/// One node in one poll: its class's counters; drops, ECN marks and
/// backlog summed over the circuits below it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct NodeStats {
    /// Node name.
    pub name: String,
    /// Parent node name.
    pub parent: Option<String>,
    /// Towards the subscribers.
    pub download: DirStats,
    /// Towards the internet.
    pub upload: DirStats,
}

/// `dir` and `dir_mut` of the types with a `download` and an `upload`
/// [`DirStats`].
macro_rules! by_direction {
    ($($t:ty),*) => {$(
        impl $t {
            /// The direction `d`.
            pub fn dir(&self, d: Dir) -> &DirStats {
                match d {
                    Dir::Download => &self.download,
                    Dir::Upload => &self.upload,
                }
            }

            fn dir_mut(&mut self, d: Dir) -> &mut DirStats {
                match d {
                    Dir::Download => &mut self.download,
                    Dir::Upload => &mut self.upload,
                }
            }
        }
    )*};
}

by_direction!(CircuitStats, NodeStats, Unclassified);

/// The default class of each queue (`:2`).
const DEFAULT_MINOR: u16 = 2;

/// Traffic no circuit's class took: the default classes (`:2`) of every
/// queue, summed, per direction. Addresses no device has (or that a
/// classifier does not map) land there, unshaped by any circuit.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Unclassified {
    /// Towards the subscribers.
    pub download: DirStats,
    /// Towards the internet.
    pub upload: DirStats,
}

/// The statistics of one poll.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Stats {
    /// Seconds since the previous poll (`None`: the first; rates are 0).
    pub interval_secs: Option<f64>,
    /// Every planned circuit, in allocation order.
    pub circuits: Vec<CircuitStats>,
    /// Every planned node, parents before children.
    pub nodes: Vec<NodeStats>,
    /// Traffic in the default classes (no circuit's).
    pub unclassified: Unclassified,
}

/// Keeps counters monotonic and turns deltas into rates, poll after poll
/// (pure: the caller passes the dumps and a monotonic time).
#[derive(Debug, Clone)]
pub struct StatsTracker {
    circuits: Vec<[DirAcc; 2]>,
    nodes: Vec<[DirAcc; 2]>,
    /// Per queue: its default class.
    defaults: Vec<[DirAcc; 2]>,
    last: Option<Duration>,
}

impl StatsTracker {
    /// A tracker for `index`'s circuits and nodes.
    pub fn new(index: &StatsIndex) -> StatsTracker {
        StatsTracker {
            circuits: vec![Default::default(); index.circuits.len()],
            nodes: vec![Default::default(); index.nodes.len()],
            defaults: vec![Default::default(); index.queues as usize],
            last: None,
        }
    }

    /// A tracker for `new` (the plan after a reload) that keeps what this
    /// one counted for the circuits and nodes both plans have (by circuit
    /// ID and node name), so counters stay monotonic across reloads.
    pub fn rebase(&self, old: &StatsIndex, new: &StatsIndex) -> StatsTracker {
        let circuits: HashMap<&str, &[DirAcc; 2]> = old
            .circuits
            .iter()
            .zip(&self.circuits)
            .map(|(c, a)| (c.id.as_str(), a))
            .collect();
        let nodes: HashMap<&str, &[DirAcc; 2]> = old
            .nodes
            .iter()
            .zip(&self.nodes)
            .map(|(n, a)| (n.name.as_str(), a))
            .collect();
        StatsTracker {
            circuits: new
                .circuits
                .iter()
                .map(|c| {
                    circuits
                        .get(c.id.as_str())
                        .map_or_else(Default::default, |a| **a)
                })
                .collect(),
            nodes: new
                .nodes
                .iter()
                .map(|n| {
                    nodes
                        .get(n.name.as_str())
                        .map_or_else(Default::default, |a| **a)
                })
                .collect(),
            // The queues' default classes stay when the queues do.
            defaults: if old.queues == new.queues {
                self.defaults.clone()
            } else {
                vec![Default::default(); new.queues as usize]
            },
            last: self.last,
        }
    }

    /// The statistics of the dumps `raw` taken at `now` (any monotonic
    /// clock: `Instant` minus a start).
    pub fn observe(&mut self, index: &StatsIndex, raw: &Samples, now: Duration) -> Stats {
        let dt = self
            .last
            .map(|l| now.saturating_sub(l).as_secs_f64())
            .filter(|&d| d > 0.0);
        self.last = Some(now);
        let per_sec = |x: u64| dt.map_or(0.0, |d| x as f64 / d);
        let mut circuits: Vec<CircuitStats> = index
            .circuits
            .iter()
            .map(|c| {
                let mk = |d: Dir| DirStats {
                    min_bps: c.min_bps[d.i()],
                    ceil_bps: c.ceil_bps[d.i()],
                    ..DirStats::default()
                };
                CircuitStats {
                    id: c.id.clone(),
                    name: c.name.clone(),
                    parent: index.nodes[c.parent as usize].name.clone(),
                    download: mk(Dir::Download),
                    upload: mk(Dir::Upload),
                }
            })
            .collect();
        let mut nodes: Vec<NodeStats> = index
            .nodes
            .iter()
            .map(|n| {
                let mk = |d: Dir| DirStats {
                    ceil_bps: n.ceil_bps[d.i()],
                    ..DirStats::default()
                };
                NodeStats {
                    name: n.name.clone(),
                    parent: n.parent.map(|p| index.nodes[p as usize].name.clone()),
                    download: mk(Dir::Download),
                    upload: mk(Dir::Upload),
                }
            })
            .collect();
        // Which (circuit, dir) got a class / leaf sample this poll.
        let mut class_seen = vec![[false; 2]; index.circuits.len()];
        let mut node_seen = vec![[false; 2]; index.nodes.len()];
        let mut leaf_seen = vec![[false; 2]; index.circuits.len()];
        let mut default_seen = vec![[false; 2]; index.queues as usize];
        let mut unclassified = Unclassified::default();
        for d in Dir::BOTH {
            unclassified.dir_mut(d).ceil_bps = index.default_ceil_bps[d.i()];
        }
        let mut drop_deltas = vec![[0u64; 2]; index.circuits.len()];
        let mut ecn_deltas = vec![[0u64; 2]; index.circuits.len()];
        // Directions whose interface was polled: only their objects can be
        // missing (an interface that failed to answer keeps its counters,
        // and its next answer continues them).
        let mut polled = [false; 2];
        for ii in &index.ifaces {
            let Some(r) = raw.interface(&ii.dev) else {
                continue;
            };
            for &(_, d) in dirs(ii.direction) {
                polled[d.i()] = true;
            }
            for s in &r.classes {
                let Some(&(owner, d)) = ii.classes.get(&s.classid.raw()) else {
                    continue;
                };
                if let Owner::Default(q) = owner {
                    let Some(acc) = self.defaults.get_mut(q as usize) else {
                        continue;
                    };
                    default_seen[q as usize][d.i()] = true;
                    let (acc, out) = (&mut acc[d.i()], unclassified.dir_mut(d));
                    let c = &s.counters;
                    out.rate_bps += per_sec(acc.bytes.update(c.bytes)) * 8.0;
                    out.packet_rate += per_sec(acc.packets.update(c.packets));
                    out.drop_rate += per_sec(acc.drops.update(c.drops.into()));
                    acc.overlimits.update(c.overlimits.into());
                    out.backlog_bytes += u64::from(c.backlog);
                    out.qlen += u64::from(c.qlen);
                    continue;
                }
                let (acc, out) = match owner {
                    Owner::Circuit(i) => {
                        class_seen[i as usize][d.i()] = true;
                        (
                            &mut self.circuits[i as usize][d.i()],
                            circuits[i as usize].dir_mut(d),
                        )
                    }
                    Owner::Node(i) => {
                        node_seen[i as usize][d.i()] = true;
                        (
                            &mut self.nodes[i as usize][d.i()],
                            nodes[i as usize].dir_mut(d),
                        )
                    }
                    // Taken above.
                    Owner::Default(_) => continue,
                };
                let c = &s.counters;
                let db = acc.bytes.update(c.bytes);
                let dp = acc.packets.update(c.packets);
                let dd = acc.drops.update(c.drops.into());
                acc.overlimits.update(c.overlimits.into());
                out.rate_bps = per_sec(db) * 8.0;
                out.packet_rate = per_sec(dp);
                out.backlog_bytes = c.backlog.into();
                out.qlen = c.qlen.into();
                out.htb = s.htb;
                if let Owner::Circuit(i) = owner {
                    drop_deltas[i as usize][d.i()] += dd;
                }
            }
            if let (Some(fifo), true) = (&ii.fifo_leaves, r.qdiscs.is_empty()) {
                // No dump taken (fifo leaves only): the kind is the plan's.
                for (m, kind) in fifo {
                    if let Some(&(i, d)) = ii.leaves.get(m) {
                        circuits[i as usize].dir_mut(d).leaf = Some((*kind).to_string());
                    }
                }
            }
            for q in &r.qdiscs {
                if q.handle.minor() != 0 {
                    continue;
                }
                let Some(&(i, d)) = ii.leaves.get(&q.handle.major()) else {
                    continue;
                };
                let (i, di) = (i as usize, d.i());
                leaf_seen[i][di] = true;
                let acc = &mut self.circuits[i][di];
                let out = circuits[i].dir_mut(d);
                out.leaf = Some(q.kind.clone());
                match &q.xstats {
                    LeafXstats::Cake(x) => {
                        drop_deltas[i][di] += acc.leaf_drops.update(q.counters.drops.into());
                        let ecn: u64 = x.tins.iter().map(|t| u64::from(t.ecn_marked_packets)).sum();
                        ecn_deltas[i][di] += acc.ecn.update(ecn);
                        out.tins = x.tins.clone();
                    }
                    LeafXstats::FqCodel(x) => {
                        drop_deltas[i][di] += acc.leaf_drops.update(q.counters.drops.into());
                        ecn_deltas[i][di] += acc.ecn.update(x.ecn_mark.into());
                        out.fq_codel = Some(*x);
                    }
                    _ => {}
                }
            }
        }
        // Objects not seen this poll: their next sample is a new object's.
        for (i, acc) in self.circuits.iter_mut().enumerate() {
            for d in Dir::BOTH {
                let a = &mut acc[d.i()];
                if polled[d.i()] && !class_seen[i][d.i()] {
                    a.class_missing();
                }
                if polled[d.i()] && !leaf_seen[i][d.i()] {
                    a.leaf_drops.missing();
                    a.ecn.missing();
                }
                let out = circuits[i].dir_mut(d);
                out.bytes = a.bytes.total;
                out.packets = a.packets.total;
                out.overlimits = a.overlimits.total;
                out.drops = a.drops.total + a.leaf_drops.total;
                out.ecn_marks = a.ecn.total;
                out.drop_rate = per_sec(drop_deltas[i][d.i()]);
                out.ecn_rate = per_sec(ecn_deltas[i][d.i()]);
            }
        }
        for (i, acc) in self.nodes.iter_mut().enumerate() {
            for d in Dir::BOTH {
                let a = &mut acc[d.i()];
                if polled[d.i()] && !node_seen[i][d.i()] {
                    a.class_missing();
                }
                let out = nodes[i].dir_mut(d);
                out.bytes = a.bytes.total;
                out.packets = a.packets.total;
                out.overlimits = a.overlimits.total;
            }
        }
        for (q, acc) in self.defaults.iter_mut().enumerate() {
            for d in Dir::BOTH {
                let a = &mut acc[d.i()];
                if polled[d.i()] && !default_seen[q][d.i()] {
                    a.class_missing();
                }
                let out = unclassified.dir_mut(d);
                out.bytes += a.bytes.total;
                out.packets += a.packets.total;
                out.drops += a.drops.total;
                out.overlimits += a.overlimits.total;
            }
        }
        // Drops, ECN marks and backlog of the circuits, summed up their
        // node chains.
        for (i, c) in index.circuits.iter().enumerate() {
            let mut n = Some(c.parent);
            while let Some(p) = n {
                let p = p as usize;
                for d in Dir::BOTH {
                    let cs = circuits[i].dir(d).clone_counts();
                    let out = nodes[p].dir_mut(d);
                    out.drops += cs.0;
                    out.ecn_marks += cs.1;
                    out.backlog_bytes += cs.2;
                    out.qlen += cs.3;
                    out.drop_rate += cs.4;
                    out.ecn_rate += cs.5;
                }
                n = index.nodes[p].parent;
            }
        }
        Stats {
            interval_secs: dt,
            circuits,
            nodes,
            unclassified,
        }
    }
}

impl DirStats {
    /// What a node sums over its circuits.
    fn clone_counts(&self) -> (u64, u64, u64, u64, f64, f64) {
        (
            self.drops,
            self.ecn_marks,
            self.backlog_bytes,
            self.qlen,
            self.drop_rate,
            self.ecn_rate,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netlink::{CakeXstats, ClassSample, Counters, QdiscSample};

    fn setup(circuits: usize) -> (Plan, StatsIndex) {
        let (_, plan) = crate::test_fixtures::bridge_plan(circuits, 2, "cake diffserv4");
        let index = StatsIndex::new(&plan);
        (plan, index)
    }

    fn class(classid: TcHandle, bytes: u64, drops: u32) -> ClassSample {
        ClassSample {
            classid,
            counters: Counters {
                bytes,
                packets: bytes / 100,
                drops,
                ..Counters::default()
            },
            htb: None,
        }
    }

    fn circuit_classid(plan: &Plan, i: usize, d: Direction) -> TcHandle {
        let c = &plan.allocation.circuits[i];
        TcHandle::new(plan.major(d, c.queue), c.minor)
    }

    fn raw(plan: &Plan, per_circuit: &[(u64, u32)], leaf_drops: Option<u32>) -> Samples {
        let mut out = Samples::default();
        for ip in &plan.interfaces {
            let d = ip.direction;
            let mut r = IfaceSamples::empty(&ip.dev);
            for (i, &(b, dr)) in per_circuit.iter().enumerate() {
                r.classes.push(class(circuit_classid(plan, i, d), b, dr));
                if let Some(ld) = leaf_drops {
                    let c = &plan.allocation.circuits[i];
                    let major = match d {
                        Direction::Upload => c.leaf_upload,
                        _ => c.leaf_download,
                    }
                    .unwrap();
                    r.qdiscs.push(QdiscSample {
                        handle: TcHandle::new(major, 0),
                        parent: circuit_classid(plan, i, d),
                        kind: "cake".into(),
                        counters: Counters {
                            drops: ld,
                            ..Counters::default()
                        },
                        xstats: LeafXstats::Cake(CakeXstats {
                            tins: vec![CakeTin {
                                ecn_marked_packets: ld / 2,
                                peak_delay_us: 1234,
                                ..CakeTin::default()
                            }],
                            ..CakeXstats::default()
                        }),
                    });
                }
            }
            out.interfaces.push(r);
        }
        out
    }

    #[test]
    fn classes_and_leaves_map_to_circuits_nodes_and_directions() {
        let (plan, index) = setup(10);
        assert_eq!(index.circuits.len(), 10);
        let mut t = StatsTracker::new(&index);
        let s = t.observe(
            &index,
            &raw(&plan, &[(1000, 1), (0, 0)], Some(4)),
            Duration::ZERO,
        );
        assert_eq!(s.interval_secs, None);
        let c0 = &s.circuits[0];
        assert_eq!((c0.download.bytes, c0.upload.bytes), (1000, 1000));
        assert_eq!(c0.download.drops, 1 + 4);
        assert_eq!(c0.download.ecn_marks, 2);
        assert_eq!(c0.download.worst_delay_us(), Some(1234));
        assert_eq!(c0.download.leaf.as_deref(), Some("cake"));
        assert!(c0.download.ceil_bps > 0 && c0.download.min_bps > 0);
        assert_eq!(c0.download.rate_bps, 0.0);
        // The parent node sums its circuits' drops.
        let parent = &s.nodes[plan.allocation.circuits[0].parent as usize];
        assert!(parent.download.drops >= 5, "{parent:?}");
        // One second later, 1000 more bytes: 8000 bit/s.
        let s = t.observe(
            &index,
            &raw(&plan, &[(2000, 1), (0, 0)], Some(4)),
            Duration::from_secs(1),
        );
        assert_eq!(s.interval_secs, Some(1.0));
        assert_eq!(s.circuits[0].download.rate_bps, 8000.0);
        assert_eq!(s.circuits[0].download.bytes, 2000);
        assert_eq!(s.circuits[0].download.drop_rate, 0.0);
    }

    /// Regression: traffic of addresses no device has (the default
    /// classes `:2`) appeared nowhere. It is summed over the queues per
    /// direction, kept monotonic per queue, with a rate.
    #[test]
    fn default_class_traffic_is_counted_as_unclassified() {
        let (plan, index) = setup(4);
        let mut t = StatsTracker::new(&index);
        let with_defaults = |bytes: [u64; 2]| {
            let mut r = raw(&plan, &[(100, 0)], None);
            for ip in &plan.interfaces {
                let iface = r.interfaces.iter_mut().find(|i| i.dev == ip.dev).unwrap();
                for (q, b) in bytes.iter().enumerate() {
                    let id = TcHandle::new(plan.major(ip.direction, q as u32), 2);
                    iface.classes.push(class(id, *b, 1));
                }
            }
            r
        };
        let s = t.observe(&index, &with_defaults([500, 700]), Duration::ZERO);
        for d in Dir::BOTH {
            let u = s.unclassified.dir(d);
            assert_eq!((u.bytes, u.packets, u.drops), (1200, 12, 2), "{d:?}");
            assert!(u.ceil_bps > 0);
        }
        // Circuits are not touched by it.
        assert_eq!(s.circuits[0].download.bytes, 100);
        // A second poll: the deltas of both queues, as a rate; a class
        // recreated (its counter back below) adds all it counted.
        let s = t.observe(&index, &with_defaults([1500, 300]), Duration::from_secs(2));
        let u = &s.unclassified.download;
        assert_eq!(u.bytes, 1200 + 1000 + 300);
        assert_eq!(u.rate_bps, (1000.0 + 300.0) * 8.0 / 2.0);
        assert_eq!(
            serde_json::to_value(&s).unwrap()["unclassified"]["download"]["bytes"],
            2500
        );
    }

    #[test]
    fn fifo_leaves_need_no_qdisc_dump_and_report_their_planned_kind() {
        for (sqm, needed, kind) in [
            ("pfifo", false, Some("pfifo")),
            ("bfifo limit 100000", false, Some("bfifo")),
            ("none", false, None),
            ("fq_codel", true, None),
            ("cake diffserv4", true, None),
        ] {
            let (_, plan) = crate::test_fixtures::bridge_plan(3, 2, sqm);
            let index = StatsIndex::new(&plan);
            for dev in index.devs() {
                assert_eq!(index.leaf_dump_needed(dev), needed, "{sqm} {dev}");
            }
            assert!(index.leaf_dump_needed("not-planned"));
            if needed {
                continue;
            }
            // Without a qdisc dump, each circuit's drops are its class's
            // and its leaf is the planned one.
            let s = StatsTracker::new(&index).observe(
                &index,
                &raw(&plan, &[(1000, 3), (10, 0), (0, 0)], None),
                Duration::ZERO,
            );
            let c0 = &s.circuits[0];
            assert_eq!((c0.download.drops, c0.upload.drops), (3, 3), "{sqm}");
            assert_eq!(c0.download.leaf.as_deref(), kind, "{sqm}");
            assert_eq!(s.circuits[2].upload.leaf.as_deref(), kind, "{sqm}");
        }
    }

    /// Regression guard: a class or leaf recreated (full reload, lazy leaf
    /// given back) restarts its kernel counters; lqos's stay monotonic and
    /// the rate counts the new object's traffic only.
    #[test]
    fn recreated_classes_and_leaves_keep_counters_monotonic() {
        let (plan, index) = setup(3);
        let mut t = StatsTracker::new(&index);
        t.observe(&index, &raw(&plan, &[(5000, 0)], Some(10)), Duration::ZERO);
        // Recreated: the kernel's counters restart below the last value.
        let s = t.observe(
            &index,
            &raw(&plan, &[(300, 0)], Some(1)),
            Duration::from_secs(1),
        );
        let d = &s.circuits[0].download;
        assert_eq!(d.bytes, 5300);
        assert_eq!(d.rate_bps, 2400.0);
        assert_eq!(d.drops, 11);
        // The leaf taken away for a poll, then back with more than before:
        // still a new leaf (counted whole).
        let s = t.observe(
            &index,
            &raw(&plan, &[(400, 0)], None),
            Duration::from_secs(2),
        );
        assert_eq!(s.circuits[0].download.drops, 11);
        assert_eq!(s.circuits[0].download.leaf, None);
        let s = t.observe(
            &index,
            &raw(&plan, &[(500, 0)], Some(20)),
            Duration::from_secs(3),
        );
        assert_eq!(s.circuits[0].download.drops, 31);
        assert_eq!(s.circuits[0].download.bytes, 5500);
    }

    /// Regression: a single-queue interface's HTB is its root (a `qdisc
    /// replace`), whose classes the poll must dump too.
    #[test]
    fn an_htb_root_is_polled() {
        let g = lqos_model::generate(&lqos_model::GenParams::with_circuits(4));
        let cfg = lqos_tc::PlanConfig::bridge("ens19", "ens20", 1);
        let plan = lqos_tc::plan(&g.network, &cfg, None).unwrap();
        let index = StatsIndex::new(&plan);
        for (_, htbs) in index.htbs() {
            assert_eq!(htbs, [TcHandle::new(1, 0)]);
        }
    }

    #[test]
    fn a_reload_keeps_the_counters_of_the_circuits_it_keeps() {
        let (plan, index) = setup(4);
        let mut t = StatsTracker::new(&index);
        t.observe(
            &index,
            &raw(&plan, &[(100, 0), (200, 0)], None),
            Duration::ZERO,
        );
        let (plan2, index2) = setup(6);
        let mut t2 = t.rebase(&index, &index2);
        let s = t2.observe(
            &index2,
            &raw(&plan2, &[(150, 0), (200, 0)], None),
            Duration::from_secs(1),
        );
        assert_eq!(s.circuits[0].download.bytes, 150);
        assert_eq!(s.circuits[0].download.rate_bps, 400.0);
    }
}
