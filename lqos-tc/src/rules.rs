//! The one place that decides whether a live object satisfies the plan.
//!
//! Three callers ask the same questions and must get the same answers:
//! [`crate::diff()`] (which ops turn the live tree into the plan),
//! `lqos-apply`'s engine (incremental or full reload) and `lqos-apply`'s
//! verify (what drifted). So every rule lives here:
//!
//! - **Kernel defaults.** A live tree read back from the kernel has concrete
//!   values where a plan says "kernel default" (`None`): burst/cburst, pfifo
//!   limit, htb r2q/direct_qlen, cake/fq_codel options. A `None` in the plan
//!   means the kernel's default where lqos knows it (cake `rtt 100ms`,
//!   fq_codel `limit 10240`, ...), and anything where it depends on the
//!   device (pfifo's limit is the device's txqueuelen). An HTB class quantum
//!   of 0 means "let the kernel compute it from rate/r2q", so any live
//!   quantum satisfies it.
//! - **Kernel-created qdiscs.** Qdiscs with handle `0:` (`noqueue`, the
//!   default qdisc under an unused mq queue, the default `mq` root) are not
//!   part of any plan and never drift ([`Qdisc::is_kernel_default`]); a tree keeps
//!   them apart, in [`TcTree::kernel_defaults`].
//! - **Lazy leaves.** A missing leaf on an idle circuit is not drift, and
//!   an active circuit's leaf is not removed ([`lazy_plan`]: the plan
//!   without the idle circuits' leaves, which every rule above then
//!   compares against).
//! - **Layout.** The root qdisc and the qdiscs on its classes (the per-queue
//!   HTBs under `mq`) decide whether a change can be incremental
//!   ([`layout`]): the same layout is changed in place, any difference is a
//!   full rebuild, with the reason.
//!
//! Each object rule is written once, as a list of [`FieldDrift`]s; the
//! `*_satisfies` predicates are "that list is empty", so a difference that
//! verify reports is exactly one that diff repairs.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use lqos_model::Rate;
use serde::Serialize;

use crate::filter::{FilterKey, FlowerFilter};
use crate::handle::TcHandle;
use crate::op::TcOp;
use crate::ops::{CakeParams, Class, FqCodelParams, Qdisc, QdiscKind};
use crate::plan::{InterfacePlan, Plan};
use crate::tree::TcTree;

/// Kernel defaults of the cake options lqos sends (`sch_cake.c`
/// `cake_init`).
pub mod cake_default {
    use crate::options::{CakeAckFilter, CakeDiffserv, CakeFlowMode};
    /// `rtt 100ms`.
    pub const RTT_US: u32 = 100_000;
    /// `diffserv3`.
    pub const DIFFSERV: CakeDiffserv = CakeDiffserv::Diffserv3;
    /// `triple-isolate`.
    pub const FLOW_MODE: CakeFlowMode = CakeFlowMode::TripleIsolate;
    /// `no-ack-filter`.
    pub const ACK_FILTER: CakeAckFilter = CakeAckFilter::Off;
    /// `split-gso`.
    pub const SPLIT_GSO: bool = true;
    /// `nonat`.
    pub const NAT: bool = false;
    /// `nowash`.
    pub const WASH: bool = false;
    /// `memlimit` 0: computed from the rate.
    pub const MEMLIMIT: u32 = 0;
}

/// Kernel defaults of fq_codel's options (`sch_fq_codel.c`
/// `fq_codel_init`).
pub mod fq_codel_default {
    /// `limit 10240`.
    pub const LIMIT: u32 = 10_240;
    /// `flows 1024`.
    pub const FLOWS: u32 = 1024;
    /// `target 5ms`.
    pub const TARGET_US: u32 = 5_000;
    /// `interval 100ms`.
    pub const INTERVAL_US: u32 = 100_000;
    /// `ecn`.
    pub const ECN: bool = true;
    /// `memory_limit 32Mb`.
    pub const MEMORY_LIMIT: u32 = 32 << 20;
}

/// One field of one object whose live value does not satisfy the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct FieldDrift {
    /// Field name: `parent`, `kind`, `rate`, `ceil`, `quantum`, `prio`,
    /// `burst`, `cburst`, or an option name (`rtt_us`, `default_minor`...).
    pub field: &'static str,
    /// Planned value (`default (X)` where the plan leaves it to the kernel).
    pub planned: String,
    /// Live value.
    pub live: String,
}

impl fmt::Display for FieldDrift {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} is {}, plan says {}",
            self.field, self.live, self.planned
        )
    }
}

/// Collects field differences; formats values only for a difference.
struct Fields(Vec<FieldDrift>);

impl Fields {
    fn push(&mut self, field: &'static str, planned: String, live: String) {
        self.0.push(FieldDrift {
            field,
            planned,
            live,
        });
    }

    /// A plain field: must be equal.
    fn eq<T: PartialEq + fmt::Display>(&mut self, field: &'static str, live: &T, planned: &T) {
        if live != planned {
            self.push(field, planned.to_string(), live.to_string());
        }
    }

    /// An option that the plan may leave unset: `None` planned accepts any
    /// live value (its default is unknown or irrelevant).
    fn opt<T: PartialEq + fmt::Display>(
        &mut self,
        field: &'static str,
        live: &Option<T>,
        planned: &Option<T>,
    ) {
        if let Some(p) = planned {
            if live.as_ref() != Some(p) {
                self.push(field, p.to_string(), show(live.as_ref()));
            }
        }
    }

    /// An option with a known kernel default: a `None` on either side
    /// means that default.
    fn def<T: PartialEq + Copy + fmt::Display>(
        &mut self,
        field: &'static str,
        live: Option<T>,
        planned: Option<T>,
        default: T,
    ) {
        if live.unwrap_or(default) != planned.unwrap_or(default) {
            let planned = match planned {
                Some(p) => p.to_string(),
                None => format!("default ({default})"),
            };
            self.push(field, planned, show(live.as_ref()));
        }
    }
}

fn show<T: fmt::Display>(v: Option<&T>) -> String {
    match v {
        Some(v) => v.to_string(),
        None => "unset".to_string(),
    }
}

fn mbps(r: Rate) -> String {
    format!("{} Mbps", r.to_mbps_string())
}

/// How HTB class `live` differs from `planned`: parent, rate and ceil at
/// the kernel's bytes/s granularity, prio, quantum (unless the plan says 0:
/// kernel-computed), burst/cburst where the plan gives them. The classid is
/// the key and is not compared.
///
/// Of an `inner` class (one with children) prio and quantum are not
/// compared: the kernel sets them only while a class is a leaf (a `class
/// change` of an inner class keeps the values it had as a leaf) and uses
/// them only there.
pub fn class_drift(live: &Class, planned: &Class, inner: bool) -> Vec<FieldDrift> {
    let (l, p) = (&live.htb, &planned.htb);
    let mut f = Fields(Vec::new());
    if live.parent != planned.parent {
        f.push(
            "parent",
            planned.parent.to_string(),
            live.parent.to_string(),
        );
    }
    // The kernel keeps rates in bytes/s.
    if l.rate.bytes_per_sec() != p.rate.bytes_per_sec() {
        f.push("rate", mbps(p.rate), mbps(l.rate));
    }
    if l.ceil.bytes_per_sec() != p.ceil.bytes_per_sec() {
        f.push("ceil", mbps(p.ceil), mbps(l.ceil));
    }
    if !inner {
        if p.quantum != 0 {
            f.eq("quantum", &l.quantum, &p.quantum);
        }
        f.eq("prio", &l.prio, &p.prio);
    }
    f.opt("burst", &l.burst, &p.burst);
    f.opt("cburst", &l.cburst, &p.cburst);
    f.0
}

/// Does class `live` satisfy `planned` (same classid, no [`class_drift`];
/// `inner`: it has children)?
pub fn class_satisfies(live: &Class, planned: &Class, inner: bool) -> bool {
    live.classid == planned.classid && class_drift(live, planned, inner).is_empty()
}

/// How qdisc kind `live` differs from `planned`: a different kind is one
/// `kind` drift; the same kind lists each option that does not satisfy the
/// plan (see the module doc for defaults).
pub fn kind_drift(live: &QdiscKind, planned: &QdiscKind) -> Vec<FieldDrift> {
    let mut f = Fields(Vec::new());
    match (live, planned) {
        (QdiscKind::Mq, QdiscKind::Mq) | (QdiscKind::Clsact, QdiscKind::Clsact) => {}
        (QdiscKind::Htb(l), QdiscKind::Htb(p)) => {
            f.eq("default_minor", &l.default_minor, &p.default_minor);
            f.opt("r2q", &l.r2q, &p.r2q);
            f.opt("direct_qlen", &l.direct_qlen, &p.direct_qlen);
        }
        (QdiscKind::Cake(l), QdiscKind::Cake(p)) => cake_drift(&mut f, l, p),
        (QdiscKind::FqCodel(l), QdiscKind::FqCodel(p)) => fq_codel_drift(&mut f, l, p),
        (QdiscKind::Pfifo { limit: l }, QdiscKind::Pfifo { limit: p })
        | (QdiscKind::Bfifo { limit: l }, QdiscKind::Bfifo { limit: p }) => f.opt("limit", l, p),
        (QdiscKind::Other(l), QdiscKind::Other(p)) if l == p => {}
        _ => f.push("kind", planned.name().to_string(), live.name().to_string()),
    }
    f.0
}

fn cake_drift(f: &mut Fields, l: &CakeParams, p: &CakeParams) {
    let bw = |r: Option<Rate>| r.map(Rate::bytes_per_sec);
    // bandwidth 0 = unlimited, the default; compared in bytes/s.
    f.def("bandwidth", bw(l.bandwidth), bw(p.bandwidth), 0);
    f.def("diffserv", l.diffserv, p.diffserv, cake_default::DIFFSERV);
    f.def("rtt_us", l.rtt_us, p.rtt_us, cake_default::RTT_US);
    f.def(
        "flow_mode",
        l.flow_mode,
        p.flow_mode,
        cake_default::FLOW_MODE,
    );
    f.def("nat", l.nat, p.nat, cake_default::NAT);
    f.def("wash", l.wash, p.wash, cake_default::WASH);
    f.def(
        "ack_filter",
        l.ack_filter,
        p.ack_filter,
        cake_default::ACK_FILTER,
    );
    f.def(
        "split_gso",
        l.split_gso,
        p.split_gso,
        cake_default::SPLIT_GSO,
    );
    f.def("memlimit", l.memlimit, p.memlimit, cake_default::MEMLIMIT);
}

fn fq_codel_drift(f: &mut Fields, l: &FqCodelParams, p: &FqCodelParams) {
    use fq_codel_default as d;
    f.def("limit", l.limit, p.limit, d::LIMIT);
    f.def("flows", l.flows, p.flows, d::FLOWS);
    f.def("target_us", l.target_us, p.target_us, d::TARGET_US);
    f.def("interval_us", l.interval_us, p.interval_us, d::INTERVAL_US);
    // fq_codel's default quantum is the device MTU: unknown here.
    f.opt("quantum", &l.quantum, &p.quantum);
    f.def("ecn", l.ecn, p.ecn, d::ECN);
    f.def(
        "memory_limit",
        l.memory_limit,
        p.memory_limit,
        d::MEMORY_LIMIT,
    );
}

/// Does qdisc kind `live` satisfy `planned` (no [`kind_drift`])?
pub fn kind_satisfies(live: &QdiscKind, planned: &QdiscKind) -> bool {
    kind_drift(live, planned).is_empty()
}

/// How qdisc `live` differs from `planned`: `parent`, then [`kind_drift`].
/// The handle is the key and is not compared.
pub fn qdisc_drift(live: &Qdisc, planned: &Qdisc) -> Vec<FieldDrift> {
    let mut v = Vec::new();
    if live.parent != planned.parent {
        v.push(FieldDrift {
            field: "parent",
            planned: planned.parent.to_string(),
            live: live.parent.to_string(),
        });
    }
    v.extend(kind_drift(&live.kind, &planned.kind));
    v
}

/// Does qdisc `live` satisfy `planned` (same handle, no [`qdisc_drift`])?
pub fn qdisc_satisfies(live: &Qdisc, planned: &Qdisc) -> bool {
    live.handle == planned.handle && qdisc_drift(live, planned).is_empty()
}

/// The kind to send so that a qdisc holding `live` ends up satisfying
/// `planned`: `planned` plus explicit defaults for options `live` has set to
/// something else (a `qdisc replace` of an existing handle only changes the
/// options it carries).
pub fn reset_kind(live: &QdiscKind, planned: &QdiscKind) -> QdiscKind {
    /// `planned`'s value, or the default when `live` holds another value.
    fn r<T: PartialEq + Copy>(live: Option<T>, planned: Option<T>, default: T) -> Option<T> {
        match (planned, live) {
            (None, Some(a)) if a != default => Some(default),
            _ => planned,
        }
    }
    use cake_default as c;
    use fq_codel_default as d;
    match (live, planned) {
        (QdiscKind::Cake(a), QdiscKind::Cake(w)) => QdiscKind::Cake(CakeParams {
            bandwidth: r(a.bandwidth, w.bandwidth, Rate::ZERO),
            diffserv: r(a.diffserv, w.diffserv, c::DIFFSERV),
            rtt_us: r(a.rtt_us, w.rtt_us, c::RTT_US),
            flow_mode: r(a.flow_mode, w.flow_mode, c::FLOW_MODE),
            nat: r(a.nat, w.nat, c::NAT),
            wash: r(a.wash, w.wash, c::WASH),
            ack_filter: r(a.ack_filter, w.ack_filter, c::ACK_FILTER),
            split_gso: r(a.split_gso, w.split_gso, c::SPLIT_GSO),
            memlimit: r(a.memlimit, w.memlimit, c::MEMLIMIT),
        }),
        (QdiscKind::FqCodel(a), QdiscKind::FqCodel(w)) => QdiscKind::FqCodel(FqCodelParams {
            limit: r(a.limit, w.limit, d::LIMIT),
            flows: r(a.flows, w.flows, d::FLOWS),
            target_us: r(a.target_us, w.target_us, d::TARGET_US),
            interval_us: r(a.interval_us, w.interval_us, d::INTERVAL_US),
            quantum: w.quantum,
            ecn: r(a.ecn, w.ecn, d::ECN),
            memory_limit: r(a.memory_limit, w.memory_limit, d::MEMORY_LIMIT),
        }),
        _ => planned.clone(),
    }
}

/// One difference between a live tree and a planned tree of one interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Drift {
    /// Planned qdisc not live.
    MissingQdisc(Qdisc),
    /// Live qdisc (explicit handle) the plan does not have.
    ExtraQdisc(Qdisc),
    /// Qdisc on both sides whose live fields do not satisfy the plan.
    QdiscDiffers {
        /// Handle.
        handle: TcHandle,
        /// The fields ([`qdisc_drift`]).
        fields: Vec<FieldDrift>,
    },
    /// Planned class not live.
    MissingClass(TcHandle),
    /// Live class the plan does not have.
    ExtraClass(TcHandle),
    /// Class on both sides whose live fields do not satisfy the plan.
    ClassDiffers {
        /// Classid.
        classid: TcHandle,
        /// The fields ([`class_drift`]).
        fields: Vec<FieldDrift>,
    },
    /// Planned classifier filter not live.
    MissingFilter(FilterKey),
    /// Live lqos filter (flower, lqos's preference range) the plan lacks.
    ExtraFilter(FilterKey),
    /// Filter on both sides that matches or steers differently.
    FilterDiffers {
        /// Pref, protocol, handle.
        key: FilterKey,
        /// The fields ([`filter_drift`]).
        fields: Vec<FieldDrift>,
    },
}

/// How filter `live` differs from `planned` (same key): `side` (dst/src),
/// `net`, `queue_mapping`, `priority`. All must be equal.
pub fn filter_drift(live: &FlowerFilter, planned: &FlowerFilter) -> Vec<FieldDrift> {
    let mut f = Fields(Vec::new());
    f.eq("side", &live.side, &planned.side);
    if live.net != planned.net {
        f.push("net", planned.net.to_string(), live.net.to_string());
    }
    f.eq("queue_mapping", &live.queue_mapping, &planned.queue_mapping);
    if live.priority != planned.priority {
        f.push(
            "priority",
            planned.priority.to_string(),
            live.priority.to_string(),
        );
    }
    f.0
}

/// Does filter `live` satisfy `planned` (no [`filter_drift`])?
pub fn filter_satisfies(live: &FlowerFilter, planned: &FlowerFilter) -> bool {
    live.key == planned.key && filter_drift(live, planned).is_empty()
}

/// A `clsact` the plan does not have may be another program's (LibreQoS's
/// BPF hooks): lqos never deletes it and it is not drift.
fn foreign_clsact(q: &Qdisc, planned: &TcTree) -> bool {
    q.kind == QdiscKind::Clsact && !planned.qdiscs.contains_key(&q.handle)
}

/// Every difference between `live` and `planned`: qdiscs by handle (missing
/// or differing, then extra), then classes by classid, then classifier
/// filters by key. Kernel-created qdiscs ([`Qdisc::is_kernel_default`]) on either
/// side, and a live `clsact` the plan lacks, are ignored. Empty exactly
/// when [`crate::diff()`] of the two trees is empty.
pub fn tree_drift(live: &TcTree, planned: &TcTree) -> Vec<Drift> {
    let mut out = Vec::new();
    for (h, p) in planned
        .qdiscs
        .iter()
        .filter(|(_, q)| !q.is_kernel_default())
    {
        match explicit_qdisc(live, *h) {
            None => out.push(Drift::MissingQdisc(p.clone())),
            Some(l) => {
                let fields = qdisc_drift(l, p);
                if !fields.is_empty() {
                    out.push(Drift::QdiscDiffers { handle: *h, fields });
                }
            }
        }
    }
    for (h, l) in live.qdiscs.iter().filter(|(_, q)| !q.is_kernel_default()) {
        if explicit_qdisc(planned, *h).is_none() && !foreign_clsact(l, planned) {
            out.push(Drift::ExtraQdisc(l.clone()));
        }
    }
    let inner = parents(planned);
    for (id, p) in &planned.classes {
        match live.classes.get(id) {
            None => out.push(Drift::MissingClass(*id)),
            Some(l) => {
                let fields = class_drift(l, p, inner.contains(id));
                if !fields.is_empty() {
                    out.push(Drift::ClassDiffers {
                        classid: *id,
                        fields,
                    });
                }
            }
        }
    }
    for id in live.classes.keys() {
        if !planned.classes.contains_key(id) {
            out.push(Drift::ExtraClass(*id));
        }
    }
    for (k, p) in &planned.filters {
        match live.filters.get(k) {
            None => out.push(Drift::MissingFilter(*k)),
            Some(l) => {
                let fields = filter_drift(l, p);
                if !fields.is_empty() {
                    out.push(Drift::FilterDiffers { key: *k, fields });
                }
            }
        }
    }
    for k in live.filters.keys() {
        if !planned.filters.contains_key(k) {
            out.push(Drift::ExtraFilter(*k));
        }
    }
    out
}

/// The classes of `t` with children (the parents of its classes).
pub fn parents(t: &TcTree) -> hashbrown::HashSet<TcHandle> {
    t.classes.values().map(|c| c.parent).collect()
}

/// Does tree `live` satisfy `planned` (no [`tree_drift`])?
pub fn tree_satisfies(live: &TcTree, planned: &TcTree) -> bool {
    tree_drift(live, planned).is_empty()
}

/// The qdiscs that make up a tree's queue layout: the root (explicit
/// handle) and the explicit-handle qdiscs on its classes (the per-queue
/// HTBs under `mq`), root first. An HTB root (a single-queue interface) is
/// the whole layout.
pub fn layout_qdiscs(t: &TcTree) -> Vec<&Qdisc> {
    let Some(root) = t.root() else {
        return Vec::new();
    };
    let major = root.handle.major();
    let mut v = vec![root];
    if root.kind != QdiscKind::Mq {
        return v;
    }
    v.extend(t.qdiscs.values().filter(|q| {
        !q.is_kernel_default() && q.parent != TcHandle::ROOT && q.parent.major() == major
    }));
    v
}

/// The HTB qdiscs whose class trees hold the sites and circuits: the
/// per-queue HTBs under an mq root, or an HTB root itself.
pub fn htb_qdiscs(t: &TcTree) -> Vec<&Qdisc> {
    match t.root() {
        Some(r) if r.kind != QdiscKind::Mq => vec![r],
        _ => layout_qdiscs(t).into_iter().skip(1).collect(),
    }
}

/// Whether a live tree can be changed into the plan in place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Layout {
    /// Same root and queue qdiscs (each satisfying the plan): change only
    /// what differs below them.
    Same,
    /// Delete the live tree (if any) and build the plan from scratch.
    Rebuild(RebuildReason),
}

/// Why a live tree must be rebuilt rather than changed in place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub enum RebuildReason {
    /// No tree of ours is loaded (no root qdisc with an explicit handle).
    NoTree,
    /// The plan has no tree: the live one is deleted.
    PlanEmpty,
    /// The live root is another qdisc than the plan's.
    RootDiffers {
        /// The live root.
        live: Qdisc,
        /// The planned root.
        planned: Qdisc,
    },
    /// A planned queue qdisc is not live.
    QueueMissing(Qdisc),
    /// A queue qdisc is live but does not satisfy the plan (HTB qdiscs
    /// cannot be changed in place).
    QueueDiffers {
        /// Its handle.
        handle: TcHandle,
        /// What differs ([`qdisc_drift`]).
        fields: Vec<FieldDrift>,
    },
    /// A live queue qdisc is not in the plan (the queue count changed).
    QueueExtra(Qdisc),
}

impl fmt::Display for RebuildReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RebuildReason::NoTree => f.write_str("no tree loaded yet"),
            RebuildReason::PlanEmpty => f.write_str("the plan has no tree"),
            RebuildReason::RootDiffers { live, planned } => write!(
                f,
                "live root is {} {}, plan has {} {}",
                live.kind.name(),
                live.handle,
                planned.kind.name(),
                planned.handle
            ),
            RebuildReason::QueueMissing(q) => {
                write!(f, "queue qdisc {} is missing", q.handle)
            }
            RebuildReason::QueueDiffers { handle, fields } => {
                write!(f, "queue qdisc {handle}")?;
                for (i, d) in fields.iter().enumerate() {
                    write!(f, "{} {d}", if i == 0 { "" } else { ";" })?;
                }
                Ok(())
            }
            RebuildReason::QueueExtra(q) => write!(
                f,
                "live queue qdisc {} ({}) is not in the plan (queue count changed)",
                q.handle,
                q.kind.name()
            ),
        }
    }
}

/// Decides whether `live` can be changed into `planned` in place: the root
/// and every queue qdisc of the plan must be live and satisfy the plan
/// ([`qdisc_satisfies`]), and no other queue qdisc may be live.
pub fn layout(live: &TcTree, planned: &TcTree) -> Layout {
    let (lo, pl) = (layout_qdiscs(live), layout_qdiscs(planned));
    let (Some(&p_root), Some(&l_root)) = (pl.first(), lo.first()) else {
        return match (pl.is_empty(), lo.is_empty()) {
            (true, true) => Layout::Same,
            (true, false) => Layout::Rebuild(RebuildReason::PlanEmpty),
            _ => Layout::Rebuild(RebuildReason::NoTree),
        };
    };
    if !qdisc_satisfies(l_root, p_root) {
        return Layout::Rebuild(RebuildReason::RootDiffers {
            live: l_root.clone(),
            planned: p_root.clone(),
        });
    }
    for &p in &pl[1..] {
        match explicit_qdisc(live, p.handle) {
            None => return Layout::Rebuild(RebuildReason::QueueMissing(p.clone())),
            Some(l) => {
                let fields = qdisc_drift(l, p);
                if !fields.is_empty() {
                    return Layout::Rebuild(RebuildReason::QueueDiffers {
                        handle: p.handle,
                        fields,
                    });
                }
            }
        }
    }
    for &l in &lo[1..] {
        if explicit_qdisc(planned, l.handle).is_none_or(|p| p.parent != l.parent) {
            return Layout::Rebuild(RebuildReason::QueueExtra(l.clone()));
        }
    }
    Layout::Same
}

fn explicit_qdisc(t: &TcTree, h: TcHandle) -> Option<&Qdisc> {
    t.qdiscs.get(&h).filter(|q| !q.is_kernel_default())
}

/// Whether a rebuild of `live` starts with `tc qdisc del dev X root`: when
/// a tree of ours (an explicit-handle root) is loaded. Deleting it
/// explicitly, rather than letting a root replace discard it, lets a
/// multi-interface load delete every old tree before building any (the
/// kernel's per-class cost counts classes on all interfaces).
pub fn rebuild_deletes_root(live: &TcTree) -> bool {
    live.root().is_some()
}

/// A circuit on one interface, for lazy leaves: `(interface, circuit
/// classid)`.
pub type LeafKey = (String, TcHandle);

/// The circuits whose leaf qdisc is (to be) loaded, for lazy leaves.
pub type ActiveLeaves = BTreeSet<LeafKey>;

/// True for a circuit leaf: a qdisc whose parent is a class (not the root,
/// not a qdisc such as `mq`'s queues).
fn is_class_leaf(q: &Qdisc) -> bool {
    q.parent != TcHandle::ROOT && q.parent.minor() != 0
}

/// The circuit leaves of an interface plan: the qdiscs after the setup
/// prefix whose parent is a class (the circuit's), in plan order. The
/// leaves of the queues' default classes are part of the setup and are
/// not circuit leaves.
pub fn circuit_leaves(ip: &InterfacePlan) -> impl Iterator<Item = &Qdisc> + '_ {
    ip.ops[ip.setup_ops.min(ip.ops.len())..]
        .iter()
        .filter_map(|op| match op {
            TcOp::AddQdisc(q) | TcOp::ReplaceQdisc(q) if is_class_leaf(q) => Some(q),
            _ => None,
        })
}

/// The lazy-leaf rule: **a missing leaf on an idle circuit is not drift**.
/// A circuit not in `active` may be without its planned leaf (HTB's own
/// default queue serves it); a leaf that is there must still satisfy the
/// plan. Expressed as the plan with the circuit leaves of every circuit not
/// in `active` left out (their handles stay in the allocation), so
/// [`crate::diff()`], [`layout`] and [`tree_drift`] apply it unchanged: a
/// diff against it neither adds an idle circuit's leaf nor removes an
/// active one's, and verify does not report either.
pub fn lazy_plan(plan: &Plan, active: &ActiveLeaves) -> Plan {
    let interfaces = plan
        .interfaces
        .iter()
        .map(|ip| {
            let setup = ip.setup_ops.min(ip.ops.len());
            let mut ops = Vec::with_capacity(ip.ops.len());
            ops.extend_from_slice(&ip.ops[..setup]);
            // One lookup key per interface; the set is small next to the plan.
            let mut key: LeafKey = (ip.dev.clone(), TcHandle::UNSPEC);
            ops.extend(
                ip.ops[setup..]
                    .iter()
                    .filter(|op| match op {
                        TcOp::AddQdisc(q) | TcOp::ReplaceQdisc(q) if is_class_leaf(q) => {
                            key.1 = q.parent;
                            active.contains(&key)
                        }
                        _ => true,
                    })
                    .cloned(),
            );
            InterfacePlan {
                dev: ip.dev.clone(),
                direction: ip.direction,
                ops,
                setup_ops: ip.setup_ops,
                queue_class_counts: ip.queue_class_counts.clone(),
            }
        })
        .collect();
    Plan {
        config: plan.config.clone(),
        interfaces,
        allocation: plan.allocation.clone(),
        ip_map: plan.ip_map.clone(),
        squashed: plan.squashed.clone(),
    }
}

/// The circuits of `plan` whose planned leaf is in the live trees (same
/// handle under the same class; its options are for verify to judge): the
/// active set when no daemon keeps one (a verify of lazy leaves).
pub fn present_leaves(plan: &Plan, live: &BTreeMap<String, TcTree>) -> ActiveLeaves {
    let mut out = ActiveLeaves::new();
    for ip in &plan.interfaces {
        let Some(tree) = live.get(&ip.dev) else {
            continue;
        };
        for q in circuit_leaves(ip) {
            if tree
                .qdiscs
                .get(&q.handle)
                .is_some_and(|l| l.parent == q.parent)
            {
                out.insert((ip.dev.clone(), q.parent));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::CakeDiffserv;

    fn class(minor: u16, quantum: u32) -> Class {
        let r = Rate::from_mbps(10);
        Class::htb(
            TcHandle::new(1, 1),
            TcHandle::new(1, minor),
            r,
            r,
            3,
            quantum,
        )
    }

    #[test]
    fn quantum_zero_means_kernel_computed() {
        let live = class(3, 1250);
        assert!(class_satisfies(&live, &class(3, 0), false));
        let d = class_drift(&live, &class(3, 1522), false);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].to_string(), "quantum is 1250, plan says 1522");
    }

    /// Found by the daemon's soak run: an AP's rate edit changed its
    /// planned quantum; the kernel ignores a quantum (and prio) change of a
    /// class with children, so verify reported drift after every such edit
    /// and a repair could never clear it.
    #[test]
    fn an_inner_class_quantum_and_prio_are_not_drift() {
        let mut live = class(3, 2999);
        live.htb.prio = 5;
        assert!(class_satisfies(&live, &class(3, 1522), true));
        let fields: Vec<_> = class_drift(&live, &class(3, 1522), false)
            .iter()
            .map(|d| d.field)
            .collect();
        assert_eq!(fields, ["quantum", "prio"]);
        live.htb.ceil = Rate::from_mbps(20);
        assert_eq!(class_drift(&live, &class(3, 1522), true)[0].field, "ceil");
    }

    #[test]
    fn rates_compare_at_bytes_per_second() {
        let mut live = class(3, 1522);
        live.htb.rate = Rate::from_bps(10_000_007);
        assert!(class_satisfies(&live, &class(3, 1522), false));
        live.htb.rate = Rate::from_bps(10_000_008);
        assert_eq!(class_drift(&live, &class(3, 1522), false)[0].field, "rate");
    }

    #[test]
    fn cake_none_means_the_kernel_default_both_ways() {
        let planned = QdiscKind::Cake(CakeParams::default());
        let mut live = CakeParams {
            rtt_us: Some(cake_default::RTT_US),
            diffserv: Some(CakeDiffserv::Diffserv3),
            ..Default::default()
        };
        assert!(kind_satisfies(&QdiscKind::Cake(live.clone()), &planned));
        live.rtt_us = Some(300_000);
        let d = kind_drift(&QdiscKind::Cake(live.clone()), &planned);
        assert_eq!(
            d[0].to_string(),
            "rtt_us is 300000, plan says default (100000)"
        );
        // The replace carries the default explicitly.
        let QdiscKind::Cake(reset) = reset_kind(&QdiscKind::Cake(live), &planned) else {
            panic!()
        };
        assert_eq!(reset.rtt_us, Some(cake_default::RTT_US));
        // Planned explicit default vs live unset (readback left it out).
        let planned = QdiscKind::Cake(CakeParams {
            diffserv: Some(CakeDiffserv::Diffserv3),
            ..Default::default()
        });
        assert!(kind_satisfies(
            &QdiscKind::Cake(CakeParams::default()),
            &planned
        ));
    }

    #[test]
    fn pfifo_limit_unset_accepts_any_live_limit() {
        let planned = QdiscKind::Pfifo { limit: None };
        assert!(kind_satisfies(
            &QdiscKind::Pfifo { limit: Some(1000) },
            &planned
        ));
        let d = kind_drift(&QdiscKind::Bfifo { limit: None }, &planned);
        assert_eq!(d[0].to_string(), "kind is bfifo, plan says pfifo");
    }

    fn mq_tree(queues: u16, default_minor: u32) -> TcTree {
        let mut t = TcTree::default();
        let root = Qdisc::root(TcHandle::new(0x7fff, 0), QdiscKind::Mq);
        t.qdiscs.insert(root.handle, root);
        for q in 1..=queues {
            let h = Qdisc::htb(TcHandle::new(0x7fff, q), q, default_minor);
            t.qdiscs.insert(h.handle, h);
        }
        t
    }

    #[test]
    fn layout_reasons() {
        assert_eq!(layout(&mq_tree(2, 2), &mq_tree(2, 2)), Layout::Same);
        assert_eq!(layout(&TcTree::default(), &TcTree::default()), Layout::Same);
        let reason = |l: &TcTree, p: &TcTree| match layout(l, p) {
            Layout::Rebuild(r) => r.to_string(),
            Layout::Same => "same".into(),
        };
        assert_eq!(
            reason(&TcTree::default(), &mq_tree(2, 2)),
            "no tree loaded yet"
        );
        assert_eq!(
            reason(&mq_tree(2, 2), &TcTree::default()),
            "the plan has no tree"
        );
        assert_eq!(
            reason(&mq_tree(1, 2), &mq_tree(2, 2)),
            "queue qdisc 2: is missing"
        );
        assert_eq!(
            reason(&mq_tree(3, 2), &mq_tree(2, 2)),
            "live queue qdisc 3: (htb) is not in the plan (queue count changed)"
        );
        assert_eq!(
            reason(&mq_tree(2, 3), &mq_tree(2, 2)),
            "queue qdisc 1: default_minor is 3, plan says 2"
        );
        let mut htb_root = TcTree::default();
        let h = Qdisc::htb(TcHandle::ROOT, 1, 2);
        htb_root.qdiscs.insert(h.handle, h);
        assert_eq!(
            reason(&htb_root, &mq_tree(2, 2)),
            "live root is htb 1:, plan has mq 7fff:"
        );
    }

    #[test]
    fn kernel_default_qdiscs_never_drift() {
        let planned = mq_tree(1, 2);
        let mut live = planned.clone();
        live.insert_qdisc(Qdisc::new(
            TcHandle::new(0x7fff, 2),
            TcHandle::UNSPEC,
            QdiscKind::Other("pfifo_fast".into()),
        ));
        assert_eq!(live.kernel_defaults.len(), 1);
        assert!(tree_satisfies(&live, &planned));
        assert_eq!(layout(&live, &planned), Layout::Same);
    }

    fn pfifo_plan(circuits: usize) -> Plan {
        let g = lqos_model::generate(&lqos_model::GenParams::with_circuits(circuits));
        let mut cfg = crate::plan_config::PlanConfig::bridge("ens19", "ens20", 4);
        cfg.default_sqm = crate::config::LeafSpec::Qdisc(QdiscKind::Pfifo { limit: None });
        crate::plan::plan(&g.network, &cfg, None).unwrap()
    }

    #[test]
    fn lazy_plan_keeps_everything_but_idle_leaves() {
        let p = pfifo_plan(30);
        let ip = &p.interfaces[0];
        let leaves: Vec<&Qdisc> = circuit_leaves(ip).collect();
        assert_eq!(leaves.len(), 30);
        let one: ActiveLeaves = [(ip.dev.clone(), leaves[4].parent)].into();
        let lp = lazy_plan(&p, &one);
        assert_eq!(lp.interfaces[0].ops.len(), ip.ops.len() - 29);
        assert_eq!(lp.interfaces[1].ops.len(), p.interfaces[1].ops.len() - 30);
        assert_eq!(lp.allocation, p.allocation);
        // Every class and the setup stay; the one active leaf stays.
        let t = lp.interfaces[0].tree();
        assert_eq!(t.classes, ip.tree().classes);
        assert!(t.qdiscs.contains_key(&leaves[4].handle));
        assert!(!t.qdiscs.contains_key(&leaves[5].handle));
        // Everything active: the plan itself.
        let all: ActiveLeaves = p
            .interfaces
            .iter()
            .flat_map(|ip| circuit_leaves(ip).map(|q| (ip.dev.clone(), q.parent)))
            .collect();
        assert_eq!(lazy_plan(&p, &all), p);
        // present_leaves reads the active set back from the trees.
        let live: BTreeMap<String, TcTree> = lp
            .interfaces
            .iter()
            .map(|ip| (ip.dev.clone(), ip.tree()))
            .collect();
        assert_eq!(present_leaves(&p, &live), one);
    }
}
