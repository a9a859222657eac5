//! Semantic comparison of LibreQoS's tree with an lqos [`Plan`].
//!
//! Both trees are read by name, not by classid: LibreQoS's classes get
//! their names from its state files ([`LibreQosState`]), lqos's from the
//! plan's allocation. For every circuit, node, link class (`:1`) and
//! default class (`:2`) of both, per direction, the fields that make the
//! shaping are compared: where the class hangs (the HTB root, the link
//! class or a node, by name), which queue a top-level node is in, rate,
//! ceil (at the kernel's bytes/s), prio, quantum, and the leaf qdisc's kind
//! and options ([`crate::rules::kind_drift`], kernel defaults applied).
//!
//! Differences that are known and on purpose carry a [`Note`]: LibreQoS
//! prints rates with one decimal, its Python writer forgot cake's `rtt`
//! unit, lqos balances queues. Everything else is a real difference.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use lqos_model::Rate;

use super::state::LibreQosState;
use crate::config::{Interfaces, QueueStrategy};
use crate::handle::TcHandle;
use crate::op::TcOp;
use crate::ops::{Class, QdiscKind};
use crate::parse::{parse_batch, ParseError};
use crate::plan::Plan;
use crate::rules::kind_drift;
use crate::tree::{TcTree, TreeError};

/// Why LibreQoS's tc text cannot be read as a tree.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CompareError {
    /// A line that is not a tc command lqos reads.
    #[error("{file}: {source}")]
    Parse {
        /// The file.
        file: String,
        /// The line and what is wrong.
        source: ParseError,
    },
    /// A command the kernel would refuse at that point.
    #[error("{file}: {dev}: {source}")]
    Tree {
        /// The file.
        file: String,
        /// The interface.
        dev: String,
        /// The refused command.
        source: Box<TreeError>,
    },
}

/// Builds the per-interface trees that LibreQoS's `linux_tc.txt` (written
/// by LibreQoS.py) or `linux_tc_rust.txt` (the bakery's commands, which a
/// HEAD box loads) leave in the kernel. The bakery's `class replace` adds
/// a class on a fresh tree; leaves without a handle get the kernel's
/// automatic ones.
pub fn libreqos_trees(file: &str, text: &str) -> Result<BTreeMap<String, TcTree>, CompareError> {
    let text = text.replace("class replace ", "class add ");
    let ops = parse_batch(&text).map_err(|source| CompareError::Parse {
        file: file.to_string(),
        source,
    })?;
    let mut per_dev: BTreeMap<String, Vec<TcOp>> = BTreeMap::new();
    for (dev, op) in ops {
        per_dev.entry(dev).or_default().push(op);
    }
    per_dev
        .into_iter()
        .map(|(dev, ops)| {
            TcTree::from_ops(&ops)
                .map(|t| (dev.clone(), t))
                .map_err(|(_, source)| CompareError::Tree {
                    file: file.to_string(),
                    dev,
                    source: Box::new(source),
                })
        })
        .collect()
}

/// A shaping direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Dir {
    /// Towards the subscribers.
    Download,
    /// Towards the internet.
    Upload,
}

impl fmt::Display for Dir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Dir::Download => "download",
            Dir::Upload => "upload",
        })
    }
}

/// What a class is, by name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Entity {
    /// Queue `n`'s (0-based) top class `:1`.
    Link(u32),
    /// Queue `n`'s default class `:2`.
    Default(u32),
    /// A node (site, AP, generated parent node).
    Node(String),
    /// A circuit, by Circuit ID.
    Circuit(String),
}

impl fmt::Display for Entity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Entity::Link(q) => write!(f, "queue {} link class", q + 1),
            Entity::Default(q) => write!(f, "queue {} default class", q + 1),
            Entity::Node(n) => write!(f, "node {n:?}"),
            Entity::Circuit(c) => write!(f, "circuit {c:?}"),
        }
    }
}

/// Why a difference is expected: what LibreQoS does that lqos does not
/// copy (docs/libreqos.md lists them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Note {
    /// LibreQoS prints rates with one decimal (`100.2mbit` for 100.25);
    /// lqos keeps them exact.
    OneDecimal,
    /// LibreQoS truncates node rates to whole Mbps; lqos keeps them exact.
    WholeMbps,
    /// lqos's balanced strategy puts top-level nodes in other queues than
    /// LibreQoS's round robin (the round-robin strategy is LibreQoS's).
    Balanced,
    /// LibreQoS creates every generated parent node (one per queue), used
    /// or not; lqos only when a circuit needs one.
    UnusedGenerated,
    /// On a stick LibreQoS's bakery gives upload circuits no leaf qdisc;
    /// lqos gives them their leaf.
    StickUploadLeaf,
    /// LibreQoS.py writes cake's `rtt 300` without a unit (300 µs) where
    /// it means milliseconds; its bakery and lqos write `300ms`.
    RttUnit,
    /// LibreQoS.py raises cake's rtt only at exactly 1, 2, 3 or 4 Mbit;
    /// its bakery and lqos for every ceil up to 4 Mbit.
    RttWholeMbit,
    /// LibreQoS.py writes `rate 0kbit` where 1 Mbit minus 1 Mbit leaves
    /// nothing; its bakery and lqos give 10 kbit.
    ZeroRate,
    /// LibreQoS.py rounds the default class's quarter of the link; its
    /// bakery (and lqos) round down.
    DefaultRounding,
    /// LibreQoS caps download classes at `uplink_bandwidth_mbps` (its
    /// download capacity reads the uplink setting); lqos uses
    /// `downlink_bandwidth_mbps`.
    UplinkAsDownlink,
    /// LibreQoS.py takes every class's quantum with the uplink's r2q; its
    /// bakery and lqos with each direction's own link's (the larger link's
    /// for `:1` and `:2`).
    PyR2q,
}

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Note::OneDecimal => "LibreQoS's one-decimal rate",
            Note::WholeMbps => "LibreQoS's whole-Mbps node rate",
            Note::Balanced => "lqos's balanced queues",
            Note::UnusedGenerated => "LibreQoS's unused generated parent node",
            Note::StickUploadLeaf => "LibreQoS's bakery gives no upload leaf on a stick",
            Note::RttUnit => "LibreQoS.py's rtt without unit",
            Note::RttWholeMbit => "LibreQoS.py's rtt raise only at whole 1-4 Mbit",
            Note::ZeroRate => "LibreQoS.py's rate 0kbit",
            Note::DefaultRounding => "LibreQoS.py's rounded default-class rate",
            Note::UplinkAsDownlink => "LibreQoS's download capacity from the uplink setting",
            Note::PyR2q => "LibreQoS.py's r2q from the uplink",
        })
    }
}

/// One field of one class that differs.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Difference {
    /// The class.
    pub entity: Entity,
    /// Its direction.
    pub dir: Dir,
    /// `parent`, `queue`, `rate`, `ceil`, `prio`, `quantum` or `leaf`.
    pub field: &'static str,
    /// LibreQoS's value.
    pub libreqos: String,
    /// lqos's value.
    pub lqos: String,
    /// Why it is expected, if it is.
    pub note: Option<Note>,
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {}: LibreQoS {}, lqos {}",
            self.entity, self.dir, self.field, self.libreqos, self.lqos
        )?;
        if let Some(n) = self.note {
            write!(f, " ({n})")?;
        }
        Ok(())
    }
}

/// The result of [`compare`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Comparison {
    /// Circuits in both trees.
    pub circuits: usize,
    /// Nodes in both trees.
    pub nodes: usize,
    /// Classes only LibreQoS has (per direction), with the note that
    /// explains it, if any.
    pub only_libreqos: Vec<(Entity, Dir, Option<Note>)>,
    /// Classes only lqos has.
    pub only_lqos: Vec<(Entity, Dir)>,
    /// Every field that differs, by class.
    pub differences: Vec<Difference>,
}

impl Comparison {
    /// Circuit directions with at least one difference, and with at least
    /// one difference that has no [`Note`].
    pub fn circuit_directions(&self) -> (usize, usize) {
        self.directions(|e| matches!(e, Entity::Circuit(_)))
    }

    /// Node directions (links and default classes included) with at least
    /// one difference, and with at least one without a [`Note`].
    pub fn node_directions(&self) -> (usize, usize) {
        self.directions(|e| !matches!(e, Entity::Circuit(_)))
    }

    fn directions(&self, which: impl Fn(&Entity) -> bool) -> (usize, usize) {
        let mut any = BTreeSet::new();
        let mut real = BTreeSet::new();
        for d in self.differences.iter().filter(|d| which(&d.entity)) {
            any.insert((&d.entity, d.dir));
            if d.note.is_none() {
                real.insert((&d.entity, d.dir));
            }
        }
        (any.len(), real.len())
    }

    /// True when nothing differs (notes included).
    pub fn is_identical(&self) -> bool {
        self.only_libreqos.is_empty() && self.only_lqos.is_empty() && self.differences.is_empty()
    }

    /// True when every difference has a [`Note`] (and no class is missing
    /// on one side without one).
    pub fn only_expected(&self) -> bool {
        self.only_lqos.is_empty()
            && self.only_libreqos.iter().all(|o| o.2.is_some())
            && self.differences.iter().all(|d| d.note.is_some())
    }

    /// Differences per (circuit or not, field, note).
    pub fn counts(&self) -> BTreeMap<(bool, &'static str, Option<Note>), usize> {
        let mut m = BTreeMap::new();
        for d in &self.differences {
            *m.entry((matches!(d.entity, Entity::Circuit(_)), d.field, d.note))
                .or_default() += 1;
        }
        m
    }
}

impl fmt::Display for Comparison {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (cd, cr) = self.circuit_directions();
        let (nd, nr) = self.node_directions();
        let unexplained = self.only_libreqos.iter().filter(|o| o.2.is_none()).count();
        writeln!(
            f,
            "{} circuits and {} nodes in both; {} classes only in LibreQoS ({unexplained} without a note), {} only in lqos",
            self.circuits,
            self.nodes,
            self.only_libreqos.len(),
            self.only_lqos.len()
        )?;
        writeln!(
            f,
            "circuit directions that differ: {cd} ({cr} without a note); node/queue class directions: {nd} ({nr} without a note)"
        )?;
        for ((circuit, field, note), n) in self.counts() {
            let what = if circuit { "circuit" } else { "node/queue" };
            match note {
                Some(note) => writeln!(f, "  {what} {field}: {n} ({note})")?,
                None => writeln!(f, "  {what} {field}: {n}")?,
            }
        }
        for (e, d, note) in &self.only_libreqos {
            match note {
                Some(n) => writeln!(f, "only in LibreQoS: {e} {d} ({n})")?,
                None => writeln!(f, "only in LibreQoS: {e} {d}")?,
            }
        }
        for (e, d) in &self.only_lqos {
            writeln!(f, "only in lqos: {e} {d}")?;
        }
        for d in &self.differences {
            writeln!(f, "{d}")?;
        }
        Ok(())
    }
}

/// A class seen by name.
struct View<'a> {
    queue: u32,
    parent: String,
    class: &'a Class,
    leaf: Option<&'a QdiscKind>,
}

type Views<'a> = BTreeMap<(Entity, Dir), View<'a>>;

/// A class's direction and 0-based queue from its interface and major.
type DirOf<'f> = &'f dyn Fn(&str, u16) -> Option<(Dir, u32)>;

/// The classes of `trees` by name: `name_of(classid)` names nodes and
/// circuits (`:1` and `:2` are the queue's own), `dir_of(dev, major)` gives
/// a class's direction and 0-based queue.
fn views<'a>(
    trees: &'a BTreeMap<String, TcTree>,
    dir_of: DirOf<'_>,
    name_of: &dyn Fn(TcHandle) -> Option<Entity>,
) -> Views<'a> {
    let mut out = Views::new();
    for (dev, t) in trees {
        let leaves = t.qdisc_by_parent();
        for c in t.classes.values() {
            let Some((dir, queue)) = dir_of(dev, c.classid.major()) else {
                continue;
            };
            let entity = match c.classid.minor() {
                1 => Some(Entity::Link(queue)),
                2 => Some(Entity::Default(queue)),
                _ => name_of(c.classid),
            };
            let Some(entity) = entity else { continue };
            let parent = if c.parent.minor() == 0 {
                "the HTB root".to_string()
            } else if c.parent.minor() == 1 {
                "the link class".to_string()
            } else {
                match name_of(c.parent) {
                    Some(e) => e.to_string(),
                    None => format!("unnamed class {}", c.parent),
                }
            };
            out.insert(
                (entity, dir),
                View {
                    queue,
                    parent,
                    class: c,
                    leaf: leaves.get(&c.classid).map(|q| &q.kind),
                },
            );
        }
    }
    out
}

/// The rate LibreQoS's writers print for `r` (Mbps as f32, one decimal
/// in `gbit` from 1000 Mbps and in `mbit` from 1 Mbps, whole `kbit`
/// below), read back.
pub fn libreqos_printed(r: Rate) -> Rate {
    let mbps = (r.bps() as f64 / 1e6) as f32 as f64;
    let text = if mbps >= 1000.0 {
        format!("{:.1}", mbps / 1000.0)
    } else if mbps >= 1.0 {
        format!("{mbps:.1}")
    } else {
        format!("{:.0}", mbps * 1000.0)
    };
    let scale = if mbps >= 1000.0 {
        1e9
    } else if mbps >= 1.0 {
        1e6
    } else {
        1e3
    };
    let v: f64 = text.parse().unwrap_or(0.0);
    Rate::from_bps((v * scale).round() as u64)
}

/// LibreQoS.py's default-class rate for a default class of ceil `ceil`
/// (`cap - 1`): Python's `round((cap - 1) / 4)`, halves to even.
fn python_round_quarter(ceil: Rate) -> u64 {
    let quarters = ceil.mbps_floor();
    let (whole, rest) = (quarters / 4, quarters % 4);
    match rest {
        0 | 1 => whole,
        2 if whole % 2 == 0 => whole,
        _ => whole + 1,
    }
}

fn show_rate(r: Rate) -> String {
    format!("{} Mbps", r.to_mbps_string())
}

fn show_leaf(k: Option<&QdiscKind>) -> String {
    match k {
        None => "none".to_string(),
        Some(k) => {
            let mut s = String::new();
            crate::render::write_kind(&mut s, k);
            s
        }
    }
}

/// Compares LibreQoS's tree (`trees` from [`libreqos_trees`], named by
/// `state`) with `plan`'s, field by field. The interfaces are the plan's
/// (LibreQoS reads the same lqos.conf).
pub fn compare(trees: &BTreeMap<String, TcTree>, state: &LibreQosState, plan: &Plan) -> Comparison {
    let q = plan.allocation.queues;
    let (dev_d, dev_u, stick) = match &plan.config.interfaces {
        Interfaces::Bridge { download, upload } => (download.clone(), upload.clone(), false),
        Interfaces::OnAStick { interface, .. } => (interface.clone(), interface.clone(), true),
    };
    let dir_of = |dev: &str, major: u16| -> Option<(Dir, u32)> {
        let m = u32::from(major).checked_sub(1)?;
        if stick {
            (dev == dev_d).then(|| {
                if m < q {
                    (Dir::Download, m)
                } else {
                    (Dir::Upload, m - q)
                }
            })
        } else if dev == dev_d {
            Some((Dir::Download, m))
        } else if dev == dev_u {
            Some((Dir::Upload, m))
        } else {
            None
        }
    };

    // LibreQoS's names: its state's classids.
    let mut lq_names: BTreeMap<TcHandle, Entity> = BTreeMap::new();
    for n in &state.nodes {
        lq_names.insert(n.classid, Entity::Node(n.name.clone()));
        lq_names.insert(n.up_classid, Entity::Node(n.name.clone()));
    }
    for c in &state.circuits {
        lq_names.insert(c.classid, Entity::Circuit(c.id.clone()));
        lq_names.insert(c.up_classid, Entity::Circuit(c.id.clone()));
    }
    // lqos's names: its allocation.
    let mut lqos_names: BTreeMap<TcHandle, Entity> = BTreeMap::new();
    for d in [Dir::Download, Dir::Upload] {
        let pd = match d {
            Dir::Download => crate::plan::Direction::Download,
            Dir::Upload => crate::plan::Direction::Upload,
        };
        for n in &plan.allocation.nodes {
            lqos_names.insert(
                TcHandle::new(plan.major(pd, n.queue), n.minor),
                Entity::Node(n.name.clone()),
            );
        }
        for c in &plan.allocation.circuits {
            lqos_names.insert(
                TcHandle::new(plan.major(pd, c.queue), c.minor),
                Entity::Circuit(c.id.to_string()),
            );
        }
    }
    let lqos_trees: BTreeMap<String, TcTree> = plan
        .interfaces
        .iter()
        .map(|i| (i.dev.clone(), i.tree()))
        .collect();
    let lq = views(trees, &dir_of, &|h| lq_names.get(&h).cloned());
    let lo = views(&lqos_trees, &dir_of, &|h| lqos_names.get(&h).cloned());

    let top_level: BTreeSet<&str> = plan
        .allocation
        .nodes
        .iter()
        .filter(|n| n.parent.is_none())
        .map(|n| n.name.as_str())
        .collect();
    let balanced = plan.config.strategy == QueueStrategy::Balanced;
    let (cap_d, cap_u) = (plan.config.download_capacity, plan.config.upload_capacity);
    let r2q_d = crate::plan::r2q_for(cap_d);
    let r2q_max = crate::plan::r2q_for(cap_d.max(cap_u));
    // A download class as LibreQoS builds it when it reads the uplink
    // setting as the download capacity: (rate, ceil) by entity.
    let with_uplink = |e: &Entity, lqos_ceil: Rate| -> (Rate, Rate) {
        match e {
            Entity::Link(_) => (cap_u, cap_u),
            Entity::Default(_) => (
                crate::plan::default_class_rate(cap_u),
                cap_u.saturating_sub(Rate::from_mbps(1)),
            ),
            _ => {
                let c = lqos_ceil.min(cap_u);
                (crate::plan::just_below(c), c)
            }
        }
    };
    let mut cmp = Comparison::default();
    let mut nodes = BTreeSet::new();
    let mut circuits = BTreeSet::new();
    let generated: BTreeSet<&str> = state
        .nodes
        .iter()
        .filter(|n| n.generated)
        .map(|n| n.name.as_str())
        .collect();
    let used: BTreeSet<&str> = state.circuits.iter().map(|c| c.parent.as_str()).collect();
    for ((entity, dir), a) in &lq {
        let Some(b) = lo.get(&(entity.clone(), *dir)) else {
            let note = matches!(entity, Entity::Node(n)
                if generated.contains(n.as_str()) && !used.contains(n.as_str()))
            .then_some(Note::UnusedGenerated);
            cmp.only_libreqos.push((entity.clone(), *dir, note));
            continue;
        };
        match entity {
            Entity::Node(n) => {
                nodes.insert(n.clone());
            }
            Entity::Circuit(c) => {
                circuits.insert(c.clone());
            }
            _ => {}
        }
        let mut push = |field: &'static str, l: String, o: String, note: Option<Note>| {
            cmp.differences.push(Difference {
                entity: entity.clone(),
                dir: *dir,
                field,
                libreqos: l,
                lqos: o,
                note,
            })
        };
        if let Entity::Node(n) = entity {
            if top_level.contains(n.as_str()) && a.queue != b.queue {
                push(
                    "queue",
                    (a.queue + 1).to_string(),
                    (b.queue + 1).to_string(),
                    balanced.then_some(Note::Balanced),
                );
            }
        }
        if a.parent != b.parent {
            // Balanced spreads circuits without a parent over the generated
            // parent nodes by load, LibreQoS in turn.
            let generated_both = [&a.parent, &b.parent]
                .iter()
                .all(|p| p.starts_with("node \"Generated_PN_"));
            let note = (balanced && generated_both).then_some(Note::Balanced);
            push("parent", a.parent.clone(), b.parent.clone(), note);
        }
        let (ah, bh) = (&a.class.htb, &b.class.htb);
        for (field, l, o) in [("rate", ah.rate, bh.rate), ("ceil", ah.ceil, bh.ceil)] {
            if l.bytes_per_sec() != o.bytes_per_sec() {
                let same = |r: Rate| r.bytes_per_sec() == l.bytes_per_sec();
                let whole = Rate::from_mbps(o.mbps_floor());
                let (ur, uc) = with_uplink(entity, bh.ceil);
                let uplink = if field == "rate" { ur } else { uc };
                let note = if same(libreqos_printed(o)) {
                    Some(Note::OneDecimal)
                } else if *dir == Dir::Download
                    && cap_d != cap_u
                    && (same(uplink) || same(libreqos_printed(uplink)))
                {
                    Some(Note::UplinkAsDownlink)
                } else if matches!(entity, Entity::Node(_))
                    && (same(whole) || same(libreqos_printed(whole)))
                {
                    Some(Note::WholeMbps)
                } else if l.is_zero() {
                    Some(Note::ZeroRate)
                } else if matches!(entity, Entity::Default(_))
                    && field == "rate"
                    && same(Rate::from_mbps(python_round_quarter(bh.ceil)))
                {
                    Some(Note::DefaultRounding)
                } else {
                    None
                };
                push(field, show_rate(l), show_rate(o), note);
            }
        }
        if ah.prio != bh.prio {
            push("prio", ah.prio.to_string(), bh.prio.to_string(), None);
        }
        if ah.quantum != bh.quantum {
            let ceil_or_link = match entity {
                Entity::Link(_) | Entity::Default(_) => {
                    if *dir == Dir::Download {
                        cap_d
                    } else {
                        cap_u
                    }
                }
                _ => bh.ceil,
            };
            let r2q = if matches!(entity, Entity::Link(_) | Entity::Default(_)) {
                r2q_max
            } else {
                r2q_d
            };
            let uplink_ceil = match entity {
                Entity::Link(_) | Entity::Default(_) => cap_u,
                _ => bh.ceil.min(cap_u),
            };
            let note = if *dir == Dir::Download
                && cap_d != cap_u
                && ah.quantum == crate::plan::quantum_for(uplink_ceil, r2q)
            {
                Some(Note::UplinkAsDownlink)
            } else if ah.quantum
                == crate::plan::quantum_for(ceil_or_link, crate::plan::r2q_for(cap_u))
            {
                Some(Note::PyR2q)
            } else {
                None
            };
            push(
                "quantum",
                ah.quantum.to_string(),
                bh.quantum.to_string(),
                note,
            );
        }
        let leaf_differs = match (a.leaf, b.leaf) {
            (None, None) => None,
            (Some(l), Some(o)) => {
                let drift = kind_drift(l, o);
                (!drift.is_empty()).then(|| match (l, o) {
                    (QdiscKind::Cake(x), QdiscKind::Cake(y))
                        if drift.iter().all(|d| d.field == "rtt_us") =>
                    {
                        match (x.rtt_us, y.rtt_us) {
                            (Some(x), Some(y)) if x * 1000 == y => Some(Note::RttUnit),
                            (None, Some(_)) => Some(Note::RttWholeMbit),
                            _ => None,
                        }
                    }
                    _ => None,
                })
            }
            (None, Some(_)) if stick && *dir == Dir::Upload => Some(Some(Note::StickUploadLeaf)),
            _ => Some(None),
        };
        if let Some(note) = leaf_differs {
            push("leaf", show_leaf(a.leaf), show_leaf(b.leaf), note);
        }
    }
    for key in lo.keys() {
        if !lq.contains_key(key) {
            cmp.only_lqos.push(key.clone());
        }
    }
    cmp.nodes = nodes.len();
    cmp.circuits = circuits.len();
    cmp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libreqos_prints_one_decimal() {
        let p = |s: &str| libreqos_printed(Rate::from_mbps_str(s).unwrap());
        assert_eq!(p("100.25"), Rate::from_mbps_str("100.2").unwrap());
        assert_eq!(p("2.5"), Rate::from_mbps_str("2.5").unwrap());
        assert_eq!(p("0.5"), Rate::from_mbps_str("0.5").unwrap());
        assert_eq!(p("1234.5"), Rate::from_mbps(1200));
        assert_eq!(p("1000"), Rate::from_mbps(1000));
    }
}
