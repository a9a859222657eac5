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
//! - [`tcp`]: per-circuit TCP round-trip times and retransmits from the
//!   eBPF data path's maps ([`Samples::tcp`], read by the same poll when
//!   [`PollRequest::tcp`] names the data path's pin directory), kept
//!   monotonic, with each interval's percentiles; nodes merge their
//!   circuits' histograms.
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
pub mod tcp;

pub use crate::sample::{IfaceSamples, PollRequest, PollTarget, Polled, Samples};
pub use poll::{Snapshot, StatsPoll};
use tcp::{TcpDataPath, TcpStats};

use std::collections::HashMap;
use std::sync::Arc;
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
    /// The key of each circuit's TCP statistics in the data path (its
    /// download classid and the hash of its ID) -> the circuit.
    tcp_keys: HashMap<lqos_bpf::layout::TcpKey, u32>,
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
        let tcp_keys = a
            .circuits
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let down = TcHandle::new(plan.major(Direction::Download, c.queue), c.minor);
                let key = lqos_bpf::layout::TcpKey {
                    classid: down.raw(),
                    tag: lqos_bpf::layout::circuit_tag(&c.id),
                };
                (key, i as u32)
            })
            .collect();
        StatsIndex {
            ifaces,
            circuits,
            nodes,
            queues: a.queues,
            default_ceil_bps,
            tcp_keys,
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

/// The class and leaf part of [`StatsTracker::observe`]: each circuit's,
/// node's and default class's counters kept monotonic in `acc_*` and their
/// rates over `dt` seconds.
fn observe_classes(
    index: &StatsIndex,
    raw: &Samples,
    dt: Option<f64>,
    acc_circuits: &mut [[DirAcc; 2]],
    acc_nodes: &mut [[DirAcc; 2]],
    acc_defaults: &mut [[DirAcc; 2]],
) -> (Vec<CircuitStats>, Vec<NodeStats>, Unclassified) {
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
                tcp: None,
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
                tcp: None,
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
                let Some(acc) = acc_defaults.get_mut(q as usize) else {
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
                        &mut acc_circuits[i as usize][d.i()],
                        circuits[i as usize].dir_mut(d),
                    )
                }
                Owner::Node(i) => {
                    node_seen[i as usize][d.i()] = true;
                    (
                        &mut acc_nodes[i as usize][d.i()],
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
            let acc = &mut acc_circuits[i][di];
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
    for (i, acc) in acc_circuits.iter_mut().enumerate() {
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
    for (i, acc) in acc_nodes.iter_mut().enumerate() {
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
    for (q, acc) in acc_defaults.iter_mut().enumerate() {
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
    (circuits, nodes, unclassified)
}

/// Entries at which [`StatsTracker::observe`] maps circuits' TCP
/// statistics on more than one thread.
const PARALLEL_TCP_CIRCUITS: usize = 2048;
/// Threads it maps them on at most.
const MAX_TCP_THREADS: usize = 4;

/// A circuit's TCP entry as read: the circuit's index, the entry's key
/// and its values.
type TcpEntry<'a> = (
    usize,
    &'a lqos_bpf::layout::TcpKey,
    &'a lqos_bpf::layout::TcpCircuit,
);

/// Takes the entries `order` (in circuit order) into the accumulators
/// `accs` and the outputs `circuits`, in up to `parts` runs of circuits
/// side by side. Returns each run's interval per node (its circuits'
/// growth, added to each one's parent only).
fn map_tcp_parts(
    index: &StatsIndex,
    accs: &mut [Option<Box<tcp::TcpAcc>>],
    circuits: &mut [Option<Arc<TcpStats>>],
    order: &[TcpEntry<'_>],
    dt: Option<f64>,
    parts: usize,
) -> Vec<Vec<Option<Box<tcp::Totals>>>> {
    let run = |accs: &mut [Option<Box<tcp::TcpAcc>>],
               outs: &mut [Option<Arc<TcpStats>>],
               first: usize,
               entries: &[TcpEntry<'_>]| {
        let mut node_recent: Vec<Option<Box<tcp::Totals>>> = vec![None; index.nodes.len()];
        let mut delta = tcp::Delta::default();
        for &(i, key, c) in entries {
            let acc = accs[i - first].get_or_insert_with(Default::default);
            let any = acc.update(*key, c, &mut delta);
            if any {
                // Into its parent's interval; rolled up the tree later.
                node_recent[index.circuits[i].parent as usize]
                    .get_or_insert_with(Default::default)
                    .add_delta(&delta);
            }
            let recent = dt.is_some().then_some(&delta);
            outs[i - first] = Some(acc.output(any, recent, dt));
        }
        node_recent
    };
    if parts <= 1 || order.len() < 2 {
        return vec![run(accs, circuits, 0, order)];
    }
    // Split at circuit indices so each run owns its circuits' slices.
    let mut runs = Vec::with_capacity(parts);
    let (mut accs, mut outs, mut entries, mut first) = (accs, circuits, order, 0);
    for k in (1..parts).rev() {
        let at = entries.len() - entries.len() * k / (k + 1);
        let (head, tail) = entries.split_at(at.min(entries.len()));
        let cut = tail.first().map_or(first + accs.len(), |e| e.0);
        let (a, a_rest) = std::mem::take(&mut accs).split_at_mut(cut - first);
        let (o, o_rest) = std::mem::take(&mut outs).split_at_mut(cut - first);
        runs.push((a, o, first, head));
        (accs, outs, entries, first) = (a_rest, o_rest, tail, cut);
    }
    runs.push((accs, outs, first, entries));
    std::thread::scope(|s| {
        let mut runs = runs.into_iter();
        let mine = runs.next().expect("one run at least");
        let handles: Vec<_> = runs
            .map(|(a, o, f, e)| s.spawn(move || run(a, o, f, e)))
            .collect();
        let mut out = vec![run(mine.0, mine.1, mine.2, mine.3)];
        for h in handles {
            out.push(h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
        }
        out
    })
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
    /// TCP round trips and retransmits (with lqos's eBPF data path; `None`
    /// before the circuit's first TCP flow). Shared with the next poll's
    /// when nothing changed.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "shared")]
    pub tcp: Option<Arc<TcpStats>>,
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
    /// TCP round trips and retransmits of the circuits below it, their
    /// histograms merged.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "shared")]
    pub tcp: Option<Arc<TcpStats>>,
}

fn shared<S: serde::Serializer>(t: &Option<Arc<TcpStats>>, s: S) -> Result<S::Ok, S::Error> {
    t.as_deref().serialize(s)
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
    /// The eBPF data path's TCP tracking (`None`: not read).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpDataPath>,
}

/// Keeps counters monotonic and turns deltas into rates, poll after poll
/// (pure: the caller passes the dumps and a monotonic time).
#[derive(Debug, Clone)]
pub struct StatsTracker {
    circuits: Vec<[DirAcc; 2]>,
    nodes: Vec<[DirAcc; 2]>,
    /// Per queue: its default class.
    defaults: Vec<[DirAcc; 2]>,
    /// The circuits' and nodes' TCP statistics.
    tcp: TcpTracker,
    last: Option<Duration>,
}

impl StatsTracker {
    /// A tracker for `index`'s circuits and nodes.
    pub fn new(index: &StatsIndex) -> StatsTracker {
        StatsTracker {
            circuits: vec![Default::default(); index.circuits.len()],
            nodes: vec![Default::default(); index.nodes.len()],
            defaults: vec![Default::default(); index.queues as usize],
            tcp: TcpTracker {
                accs: vec![None; index.circuits.len()],
                nodes: vec![None; index.nodes.len()],
                samples: Mono::default(),
                threads: 0,
            },
            last: None,
        }
    }

    /// A tracker for `new` (the plan after a reload) that keeps what this
    /// one counted for the circuits and nodes both plans have (by circuit
    /// ID and node name), so counters stay monotonic across reloads.
    pub fn rebase(&self, old: &StatsIndex, new: &StatsIndex) -> StatsTracker {
        let circuits: HashMap<&str, usize> = old
            .circuits
            .iter()
            .enumerate()
            .map(|(i, c)| (c.id.as_str(), i))
            .collect();
        let nodes: HashMap<&str, usize> = old
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.as_str(), i))
            .collect();
        let circuit = |id: &str| circuits.get(id).copied();
        let node = |name: &str| nodes.get(name).copied();
        StatsTracker {
            circuits: new
                .circuits
                .iter()
                .map(|c| circuit(&c.id).map_or_else(Default::default, |i| self.circuits[i]))
                .collect(),
            nodes: new
                .nodes
                .iter()
                .map(|n| node(&n.name).map_or_else(Default::default, |i| self.nodes[i]))
                .collect(),
            tcp: TcpTracker {
                accs: new
                    .circuits
                    .iter()
                    .map(|c| circuit(&c.id).and_then(|i| self.tcp.accs[i].clone()))
                    .collect(),
                nodes: new
                    .nodes
                    .iter()
                    .map(|n| node(&n.name).and_then(|i| self.tcp.nodes[i].clone()))
                    .collect(),
                samples: self.tcp.samples,
                threads: self.tcp.threads,
            },
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
        let (acc_c, acc_n, acc_d) = (&mut self.circuits, &mut self.nodes, &mut self.defaults);
        let tcp = &mut self.tcp;
        let read = raw.tcp.as_ref();
        // Many circuits' TCP statistics are mapped on threads of their own
        // while this one maps the classes: the two share nothing.
        let ((mut circuits, mut nodes, unclassified), out) = match read {
            Some(t) if t.circuits.len() >= PARALLEL_TCP_CIRCUITS => std::thread::scope(|s| {
                let h = s.spawn(|| tcp.observe(index, read, dt));
                let c = observe_classes(index, raw, dt, acc_c, acc_n, acc_d);
                (c, h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            }),
            _ => (
                observe_classes(index, raw, dt, acc_c, acc_n, acc_d),
                tcp.observe(index, read, dt),
            ),
        };
        for (c, t) in circuits.iter_mut().zip(out.circuits) {
            c.tcp = t;
        }
        for (n, t) in nodes.iter_mut().zip(out.nodes) {
            n.tcp = t;
        }
        Stats {
            interval_secs: dt,
            circuits,
            nodes,
            unclassified,
            tcp: out.health,
        }
    }
}

/// The TCP part of a [`StatsTracker`]: per circuit its entry's
/// accumulator, per node its circuits' totals.
#[derive(Debug, Clone)]
struct TcpTracker {
    /// Per circuit: its TCP statistics' entry (`None`: never seen).
    accs: Vec<Option<Box<tcp::TcpAcc>>>,
    /// Per node: its circuits' TCP totals, added up poll by poll (so they
    /// stay monotonic when a circuit leaves).
    nodes: Vec<Option<Box<tcp::Totals>>>,
    /// The data path's RTT samples (for their rate).
    samples: Mono,
    /// Threads the circuits are mapped on at most (0: as many as the
    /// machine has, up to [`MAX_TCP_THREADS`]).
    threads: usize,
}

/// What [`TcpTracker::observe`] gives each circuit and node, and the data
/// path's health.
struct TcpObserved {
    circuits: Vec<Option<Arc<TcpStats>>>,
    nodes: Vec<Option<Arc<TcpStats>>>,
    health: Option<TcpDataPath>,
}

impl TcpTracker {
    /// The TCP part of [`StatsTracker::observe`]: each circuit's entry
    /// (by key) taken, its interval's difference added to its nodes', the
    /// outputs made. Without a read (`tcp` `None`), the totals stand.
    fn observe(
        &mut self,
        index: &StatsIndex,
        tcp: Option<&lqos_bpf::tcp::TcpRead>,
        dt: Option<f64>,
    ) -> TcpObserved {
        let mut circuits: Vec<Option<Arc<TcpStats>>> = vec![None; index.circuits.len()];
        // The first poll has no interval: no percentiles or rates of one.
        let mut node_recent: Vec<Option<Box<tcp::Totals>>> = vec![None; index.nodes.len()];
        let health = tcp.map(|t| {
            // The entries of planned circuits, in circuit order (each
            // circuit has one key), so the work splits into runs of
            // circuits mapped side by side.
            let mut order: Vec<TcpEntry<'_>> = t
                .circuits
                .iter()
                .filter_map(|(k, c)| index.tcp_keys.get(k).map(|&i| (i as usize, k, c)))
                .collect();
            order.sort_unstable_by_key(|e| e.0);
            let mut seen = vec![false; index.circuits.len()];
            for e in &order {
                seen[e.0] = true;
            }
            let parts = match self.threads {
                _ if order.len() < PARALLEL_TCP_CIRCUITS => 1,
                0 => {
                    std::thread::available_parallelism().map_or(1, |n| n.get().min(MAX_TCP_THREADS))
                }
                n => n,
            };
            for part in map_tcp_parts(index, &mut self.accs, &mut circuits, &order, dt, parts) {
                for (n, r) in node_recent.iter_mut().zip(part) {
                    match (n, r) {
                        (Some(n), Some(r)) => n.add(&r),
                        (n @ None, r) => *n = r,
                        (Some(_), None) => {}
                    }
                }
            }
            // Entries gone (pruned, the map made anew): what they counted
            // stays; a next one is counted whole.
            for (i, (acc, seen)) in self.accs.iter_mut().zip(seen).enumerate() {
                if let (Some(a), false) = (acc, seen) {
                    let was = a.present();
                    a.retire();
                    if a.seen() {
                        circuits[i] = Some(a.output(was, None, dt));
                    }
                }
            }
            // Each node's interval to its parent (children come after
            // their parents in the index) and to its own totals: once per
            // node, not once per circuit and level.
            for p in (0..index.nodes.len()).rev() {
                let Some(r) = node_recent[p].take() else {
                    continue;
                };
                if let Some(q) = index.nodes[p].parent {
                    node_recent[q as usize]
                        .get_or_insert_with(Default::default)
                        .add(&r);
                }
                self.nodes[p].get_or_insert_with(Default::default).add(&r);
                node_recent[p] = Some(r);
            }
            let d_samples = self.samples.update(t.health.samples);
            TcpDataPath::of(&t.health, dt.map_or(0.0, |d| d_samples as f64 / d))
        });
        if tcp.is_none() {
            // Not read: the totals stand.
            for (i, acc) in self.accs.iter_mut().enumerate() {
                if let Some(a) = acc.as_deref_mut().filter(|a| a.seen()) {
                    circuits[i] = Some(a.output(false, None, dt));
                }
            }
        }
        let nodes = self
            .nodes
            .iter()
            .zip(node_recent)
            .map(|(t, r)| {
                let r = r.filter(|_| dt.is_some());
                t.as_ref().map(|t| Arc::new(t.stats(r.as_deref(), dt)))
            })
            .collect();
        TcpObserved {
            circuits,
            nodes,
            health,
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

    pub(super) fn raw(plan: &Plan, per_circuit: &[(u64, u32)], leaf_drops: Option<u32>) -> Samples {
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

    /// The TCP statistics mapped on several threads (runs of circuits)
    /// are those mapped on one: circuits, nodes' merged histograms, entries
    /// that go, come back or restart.
    #[test]
    fn tcp_statistics_mapped_on_threads_equal_those_mapped_on_one() {
        let n = PARALLEL_TCP_CIRCUITS + 700;
        let (plan, index) = setup(n);
        let entries = |round: u32| {
            (0..n)
                // Some circuits have no entry in some rounds (pruned).
                .filter(|i| (i + round as usize) % 11 != 0)
                .map(|i| {
                    let mut c = lqos_bpf::layout::TcpCircuit::default();
                    for (j, h) in c.rtt.iter_mut().flatten().enumerate() {
                        // Round 2 restarts every 5th entry (counts go down).
                        let r = if round == 2 && i % 5 == 0 { 0 } else { round };
                        for b in (i + j) % 40..(i + j) % 40 + 1 + i % 9 {
                            h.buckets[b] = (r + 1) * (b as u32 + 1);
                            h.count += u64::from(h.buckets[b]);
                        }
                        h.sum_ns = h.count * 1_000_000 * (1 + (i as u64 % 30));
                    }
                    c.retransmits = [u64::from(round) * (i as u64 % 3), u64::from(round)];
                    c.flows = u64::from(round) + 1;
                    (tcp_key(&plan, i), c)
                })
                // Not in circuit order, as the kernel's hash gives them.
                .rev()
                .collect::<Vec<_>>()
        };
        let runs: Vec<Vec<Stats>> = [1, 2, 3, 4]
            .iter()
            .map(|&threads| {
                let mut t = StatsTracker::new(&index);
                t.tcp.threads = threads;
                (0..4)
                    .map(|round| {
                        let raw = with_tcp(raw(&plan, &[], None), entries(round));
                        t.observe(&index, &raw, Duration::from_secs(u64::from(round)))
                    })
                    .collect()
            })
            .collect();
        let last = &runs[0][3];
        assert!(last.circuits.iter().all(|c| c.tcp.is_some()));
        assert!(last
            .nodes
            .iter()
            .any(|n| n.tcp.as_ref().is_some_and(|t| t.flows > 0)));
        for (threads, run) in runs.iter().enumerate().skip(1) {
            for (round, (a, b)) in runs[0].iter().zip(run).enumerate() {
                assert!(a == b, "{} threads, round {round}", threads + 1);
            }
        }
    }

    fn tcp_key(plan: &Plan, i: usize) -> lqos_bpf::layout::TcpKey {
        let c = &plan.allocation.circuits[i];
        lqos_bpf::layout::TcpKey {
            classid: circuit_classid(plan, i, Direction::Download).raw(),
            tag: lqos_bpf::layout::circuit_tag(&c.id),
        }
    }

    /// A kernel entry with `n` download subscriber-side samples of `ms`
    /// milliseconds and `rtx` download retransmits.
    fn tcp_entry(n: u32, ms: u64, rtx: u64) -> lqos_bpf::layout::TcpCircuit {
        let mut c = lqos_bpf::layout::TcpCircuit::default();
        let h = &mut c.rtt[0][0];
        h.count = u64::from(n);
        h.sum_ns = u64::from(n) * ms * 1_000_000;
        h.buckets[lqos_bpf::layout::rtt_bucket_of(ms * 1_000_000)] = n;
        c.retransmits = [rtx, 0];
        c.flows = 2;
        c.unmeasured = 1;
        c
    }

    fn with_tcp(
        mut raw: Samples,
        entries: Vec<(lqos_bpf::layout::TcpKey, lqos_bpf::layout::TcpCircuit)>,
    ) -> Samples {
        let mut health = lqos_bpf::tcp::TcpHealth::default();
        health.flow_table_size = 1024;
        health.flows_new = 10;
        health.samples = 7;
        health.circuits = 2;
        raw.tcp = Some(lqos_bpf::tcp::TcpRead::new(entries, health));
        raw
    }

    #[test]
    fn tcp_round_trips_per_circuit_with_interval_percentiles_and_node_rollups() {
        let (plan, index) = setup(4);
        let mut t = StatsTracker::new(&index);
        let base = || raw(&plan, &[(0, 0)], None);
        let unknown = lqos_bpf::layout::TcpKey { classid: 1, tag: 2 };
        let s = t.observe(
            &index,
            &with_tcp(
                base(),
                vec![
                    (tcp_key(&plan, 0), tcp_entry(100, 40, 3)),
                    (tcp_key(&plan, 1), tcp_entry(10, 2, 0)),
                    (unknown, tcp_entry(5, 1, 0)),
                ],
            ),
            Duration::ZERO,
        );
        let c0 = s.circuits[0].tcp.as_deref().unwrap();
        let sub = &c0.download.subscriber;
        assert_eq!((sub.samples, c0.download.retransmits), (100, 3));
        assert_eq!((c0.flows, c0.unmeasured_flows), (2, 1));
        // The first poll has no interval: percentiles of all samples only.
        assert!(sub.recent.is_none());
        let all = sub.all().unwrap();
        assert!((all.mean_ms - 40.0).abs() < 1e-9);
        assert!((all.p50_ms - 40.0).abs() / 40.0 < 0.1, "{all:?}");
        assert!(s.circuits[2].tcp.is_none());
        let dp = s.tcp.unwrap();
        assert_eq!(
            (dp.flow_table_size, dp.flows_tracked, dp.circuits),
            (1024, 10, 2)
        );
        // A second: 100 more samples of 80 ms on circuit 0, 6 retransmits.
        let mut e0 = tcp_entry(100, 40, 9);
        e0.rtt[0][0].count += 100;
        e0.rtt[0][0].sum_ns += 100 * 80_000_000;
        e0.rtt[0][0].buckets[lqos_bpf::layout::rtt_bucket_of(80_000_000)] = 100;
        let s = t.observe(
            &index,
            &with_tcp(
                base(),
                vec![
                    (tcp_key(&plan, 0), e0.clone()),
                    (tcp_key(&plan, 1), tcp_entry(10, 2, 0)),
                ],
            ),
            Duration::from_secs(2),
        );
        let c0 = s.circuits[0].tcp.as_deref().unwrap();
        let recent = c0.download.subscriber.recent.unwrap();
        assert_eq!(recent.samples, 100);
        assert!((recent.mean_ms - 80.0).abs() < 1e-9);
        assert_eq!(c0.download.retransmit_rate, 3.0);
        assert_eq!(c0.download.subscriber.samples, 200);
        // The parent node merged both circuits' samples: 200 + 10 in all,
        // 100 in the interval (circuit 1 took none).
        let parent = |i: usize| plan.allocation.circuits[i].parent as usize;
        let n = s.nodes[parent(0)].tcp.as_deref().unwrap();
        if parent(0) == parent(1) {
            assert_eq!(n.download.subscriber.samples, 210);
        }
        assert_eq!(n.download.subscriber.recent.unwrap().samples, 100);
        let sub_samples = |s: &Stats, i: usize| {
            s.circuits[i]
                .tcp
                .as_deref()
                .unwrap()
                .download
                .subscriber
                .samples
        };
        // Circuit 1's entry is gone (pruned): its totals stay; a new one
        // is counted whole.
        let s = t.observe(
            &index,
            &with_tcp(base(), vec![(tcp_key(&plan, 0), e0.clone())]),
            Duration::from_secs(3),
        );
        assert_eq!(sub_samples(&s, 1), 10);
        let s = t.observe(
            &index,
            &with_tcp(
                base(),
                vec![
                    (tcp_key(&plan, 0), e0.clone()),
                    (tcp_key(&plan, 1), tcp_entry(4, 2, 0)),
                ],
            ),
            Duration::from_secs(4),
        );
        assert_eq!(sub_samples(&s, 1), 14);
        // A poll without TCP statistics keeps the totals.
        let s = t.observe(&index, &base(), Duration::from_secs(5));
        assert_eq!(sub_samples(&s, 0), 200);
        assert!(s.tcp.is_none());
        // A reload keeps them by circuit ID.
        let (plan2, index2) = setup(6);
        let mut t2 = t.rebase(&index, &index2);
        let s = t2.observe(
            &index2,
            &with_tcp(raw(&plan2, &[(0, 0)], None), vec![(tcp_key(&plan2, 0), e0)]),
            Duration::from_secs(6),
        );
        let c0 = s.circuits[0].tcp.as_deref().unwrap();
        assert_eq!(c0.download.subscriber.samples, 200);
        assert_eq!(c0.download.subscriber.recent, None);
    }

    #[test]
    fn a_poll_reads_the_tcp_statistics_when_asked_and_says_when_it_cannot() {
        use crate::backend::{NoProgress, Recording};
        use crate::live::LiveSource;
        let (plan, _) = setup(3);
        let kernel = Recording::new().with_link("ens19", 4).with_link("ens20", 4);
        crate::apply_plan(&plan, &kernel, &kernel, Default::default(), &NoProgress).unwrap();
        let mut poll = StatsPoll::new(&plan);
        assert_eq!(poll.request(true).tcp, None);
        let s = poll.poll(&kernel, true, Duration::ZERO).unwrap();
        assert!(s.stats.tcp.is_none());
        let mut poll = StatsPoll::new(&plan).with_tcp(Some("/sys/fs/bpf/lqos".into()));
        let polled = kernel.poll(&poll.request(true));
        assert!(polled.tcp_failed.is_some());
        let e = poll.poll(&kernel, true, Duration::ZERO).unwrap_err();
        assert!(e.to_string().contains("reading the TCP statistics"), "{e}");
        kernel.set_tcp(
            with_tcp(
                Samples::default(),
                vec![(tcp_key(&plan, 2), tcp_entry(3, 5, 1))],
            )
            .tcp,
        );
        let s = poll.poll(&kernel, true, Duration::ZERO).unwrap();
        let c = s.stats.circuits[2].tcp.as_deref().unwrap();
        assert_eq!(c.download.subscriber.samples, 3);
        assert_eq!(s.stats.tcp.unwrap().samples, 7);
    }
}
