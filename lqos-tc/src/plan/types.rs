//! The plan's types: per-interface ops, the stable allocation of queues,
//! classids, leaf and filter handles, and the plan itself.

use std::collections::BTreeMap;

use ipnet::IpNet;
use lqos_model::{Rate, SmolStr};
use serde::{Deserialize, Serialize};

use crate::config::Interfaces;
use crate::handle::TcHandle;
use crate::ipmap::{IpDetails, IpMap, Steer, SteerDetails};
use crate::op::TcOp;
use crate::ops::{Qdisc, QdiscKind};
use crate::plan_config::PlanConfig;
use crate::tree::TcTree;
use core::net::IpAddr;

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
    /// tree depth-first ([`crate::order::locality_order`]): a node's class, its
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
    pub fn try_tree(&self) -> Result<TcTree, (usize, crate::tree::TreeError)> {
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

    /// HTB majors on this interface, in order: the HTB under each mq
    /// queue, or the HTB root of a single-queue interface (a replace).
    pub fn htb_majors(&self) -> Vec<u16> {
        self.ops[..self.setup_ops]
            .iter()
            .filter_map(|op| match op {
                TcOp::AddQdisc(Qdisc {
                    handle,
                    kind: QdiscKind::Htb(_),
                    ..
                })
                | TcOp::ReplaceQdisc(Qdisc {
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
/// Feed it back to [`plan`](crate::plan()) to keep classids stable across reloads.
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
    /// keep them across reloads; kept even without a classifier).
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

/// A node whose circuits' guaranteed minimums add up to more than it
/// guarantees itself (its rate, just below its ceil), in either
/// direction: as in LibreQoS, each of those circuits gets a squashed
/// minimum instead of its own ([`crate::rates::squashed_min`]), so what the
/// input files promise is not what the tree guarantees. The planner
/// reports every such node ([`Plan::squashed`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Squashed {
    /// The node (`Generated_PN_N` for circuits without a parent node).
    pub node: String,
    /// Its circuits: every one of them is squashed.
    pub circuits: u32,
    /// The sum of their download minimums.
    pub asked_down: Rate,
    /// The sum of their upload minimums.
    pub asked_up: Rate,
    /// What the node guarantees for download.
    pub fits_down: Rate,
    /// What the node guarantees for upload.
    pub fits_up: Rate,
    /// The minimum each of them gets instead (1 Mbit, or 10 kbit where
    /// even that is too much; below a circuit's ceil).
    pub each: Rate,
}

impl std::fmt::Display for Squashed {
    /// `node "AP_1": the minimums of its 40 circuits add up to 1500 / 250
    /// Mbps (down / up), more than the 999 / 999 Mbps it guarantees: each
    /// gets 1 Mbps`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "node {:?}: the minimums of its {} circuit(s) add up to {} / {} Mbps (down / up), \
             more than the {} / {} Mbps it guarantees: each gets {} Mbps",
            self.node,
            self.circuits,
            self.asked_down,
            self.asked_up,
            self.fits_down,
            self.fits_up,
            self.each
        )
    }
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
    /// direction (`ip_map.csv`, [`Plan::explain_ip`], the classifier's source).
    #[serde(default)]
    pub ip_map: IpMap,
    /// The nodes whose circuits' minimums are squashed, in plan order
    /// (empty when every node can guarantee its circuits' minimums, and
    /// for a plan read from ops alone).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub squashed: Vec<Squashed>,
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

impl Plan {
    /// Longest-prefix lookup of `addr` with the circuit's node path, rates
    /// and leaves; `None` when the address is not shaped (its traffic goes
    /// to the default class `:2` of whatever queue it leaves on).
    /// Scans the interface's ops (O(ops)), meant for one-off questions.
    pub fn explain_ip(&self, addr: IpAddr) -> Option<IpDetails> {
        let e = self.ip_map.lookup(addr)?;
        let mut node_path = Vec::new();
        let mut n = self
            .allocation
            .circuits
            .get(e.circuit as usize)
            .map(|c| c.parent);
        while let Some(i) = n {
            let Some(node) = self.allocation.nodes.get(i as usize) else {
                break;
            };
            node_path.push(node.name.clone());
            n = node.parent;
        }
        node_path.reverse();
        let details = |s: &Steer| {
            let ops = self
                .interface(&s.dev)
                .map(|i| i.ops.as_slice())
                .unwrap_or(&[]);
            let class = ops.iter().find_map(|op| match op {
                TcOp::AddClass(c) if c.classid == s.classid => Some(c),
                _ => None,
            });
            let leaf = ops.iter().find_map(|op| match op {
                TcOp::AddQdisc(q) | TcOp::ReplaceQdisc(q) if q.parent == s.classid => {
                    Some(q.clone())
                }
                _ => None,
            });
            SteerDetails {
                steer: s.clone(),
                rate: class.map(|c| c.htb.rate),
                ceil: class.map(|c| c.htb.ceil),
                leaf,
            }
        };
        Some(IpDetails {
            entry: e.clone(),
            node_path,
            download: details(&e.download),
            upload: details(&e.upload),
        })
    }
}
