//! Typed tc operations: the one vocabulary shared by the planner, the
//! `tc -b` renderer/parser, the netlink encoder and the live-tree reader.

use serde::{Deserialize, Serialize};

use crate::classify::{FilterKey, FlowerFilter};
use crate::TcHandle;
use lqos_model::Rate;

/// One tc operation on one interface (the interface is held by the stream).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum TcOp {
    /// `tc qdisc add` (fails if it exists).
    AddQdisc(Qdisc),
    /// `tc qdisc replace` (create or replace).
    ReplaceQdisc(Qdisc),
    /// `tc qdisc del dev X parent P [handle H]`; `parent == ROOT` with
    /// `handle == UNSPEC` is `tc qdisc del dev X root`.
    DeleteQdisc {
        /// Parent of the qdisc to delete.
        parent: TcHandle,
        /// Its handle, or `UNSPEC`.
        handle: TcHandle,
    },
    /// `tc class add ... htb`.
    AddClass(Class),
    /// `tc class change ... htb` (in place, the class must exist).
    ChangeClass(Class),
    /// `tc class del dev X classid C`.
    DeleteClass {
        /// The class's parent (sent for completeness; the kernel keys on classid).
        parent: TcHandle,
        /// The class to delete.
        classid: TcHandle,
    },
    /// `tc filter replace dev X egress pref P handle H protocol ip flower
    /// dst_ip A/L action skbedit queue_mapping Q priority M:m` (creates or
    /// replaces in place; the classifier, see [`crate::classify`]).
    ReplaceFilter(FlowerFilter),
    /// `tc filter del dev X egress pref P handle H protocol ip flower`.
    DeleteFilter(FilterKey),
}

impl TcOp {
    /// The root delete: `tc qdisc del dev X root`.
    pub const fn delete_root() -> TcOp {
        TcOp::DeleteQdisc {
            parent: TcHandle::ROOT,
            handle: TcHandle::UNSPEC,
        }
    }

    /// True for ops that do not change anything in the kernel (none today;
    /// every op mutates). Kept so callers can assert "no mutating op".
    pub const fn is_mutating(&self) -> bool {
        true
    }
}

/// A qdisc: where it hangs, its handle, and its kind with options.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Qdisc {
    /// `ROOT` for the device root, else the class it is attached to.
    pub parent: TcHandle,
    /// Explicit handle (`major:`), never left to the kernel.
    pub handle: TcHandle,
    /// Kind and options.
    pub kind: QdiscKind,
}

/// An HTB class.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Class {
    /// Parent class, or the HTB qdisc (`major:`) for a top class.
    pub parent: TcHandle,
    /// This class's id (`major:minor`).
    pub classid: TcHandle,
    /// HTB parameters.
    pub htb: HtbClass,
}

/// HTB class parameters. Rates are exact; quantum is always explicit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HtbClass {
    /// Guaranteed rate.
    pub rate: Rate,
    /// Ceiling.
    pub ceil: Rate,
    /// Quantum in bytes (DRR share when borrowing).
    pub quantum: u32,
    /// Priority 0..=7 (lower is served first).
    pub prio: u32,
    /// Burst in bytes; `None` = tc's default (rate/HZ + MTU-ish).
    pub burst: Option<u32>,
    /// Ceil burst in bytes; `None` = tc's default.
    pub cburst: Option<u32>,
}

/// Qdisc kinds lqos emits (and reads back).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum QdiscKind {
    /// Multiqueue root: one child class per TX queue.
    Mq,
    /// HTB qdisc.
    Htb(HtbQdisc),
    /// CAKE leaf.
    Cake(CakeParams),
    /// fq_codel leaf.
    FqCodel(FqCodelParams),
    /// `clsact` (ingress and egress filter hooks; parent `ffff:fff1`,
    /// handle `ffff:`), holding the classifier's filters.
    Clsact,
    /// pfifo leaf (packet limit).
    Pfifo {
        /// Queue limit in packets; `None` = kernel default (txqueuelen).
        limit: Option<u32>,
    },
    /// bfifo leaf (byte limit).
    Bfifo {
        /// Queue limit in bytes; `None` = kernel default.
        limit: Option<u32>,
    },
    /// Any other kind seen on readback (kept by name so verify can report it).
    Other(String),
}

impl QdiscKind {
    /// The kernel's name for the kind (`TCA_KIND`).
    pub fn name(&self) -> &str {
        match self {
            QdiscKind::Mq => "mq",
            QdiscKind::Htb(_) => "htb",
            QdiscKind::Cake(_) => "cake",
            QdiscKind::FqCodel(_) => "fq_codel",
            QdiscKind::Clsact => "clsact",
            QdiscKind::Pfifo { .. } => "pfifo",
            QdiscKind::Bfifo { .. } => "bfifo",
            QdiscKind::Other(name) => name,
        }
    }
}

/// HTB qdisc options (`tc qdisc add ... htb default 2`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HtbQdisc {
    /// Minor of the default class (`default 2`; tc parses it as hex).
    pub default_minor: u32,
    /// rate-to-quantum divisor; `None` = 10, tc's default. Only used for
    /// classes without an explicit quantum (lqos always sends one).
    pub r2q: Option<u32>,
    /// Direct queue length; `None` = kernel default.
    pub direct_qlen: Option<u32>,
}

/// CAKE `diffserv` modes (`TCA_CAKE_DIFFSERV_MODE` values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CakeDiffserv {
    /// `diffserv3` (0).
    Diffserv3,
    /// `diffserv4` (1).
    Diffserv4,
    /// `diffserv8` (2).
    Diffserv8,
    /// `besteffort` (3).
    Besteffort,
    /// `precedence` (4).
    Precedence,
}

/// CAKE flow isolation modes (`TCA_CAKE_FLOW_MODE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CakeFlowMode {
    /// `flowblind` (0).
    Flowblind,
    /// `srchost` (1).
    Srchost,
    /// `dsthost` (2).
    Dsthost,
    /// `hosts` (3).
    Hosts,
    /// `flows` (4).
    Flows,
    /// `dual-srchost` (5).
    DualSrchost,
    /// `dual-dsthost` (6).
    DualDsthost,
    /// `triple-isolate` (7).
    TripleIsolate,
}

/// CAKE ACK filter (`TCA_CAKE_ACK_FILTER`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CakeAckFilter {
    /// `no-ack-filter` (0).
    Off,
    /// `ack-filter` (1).
    On,
    /// `ack-filter-aggressive` (2).
    Aggressive,
}

/// CAKE options; `None` fields are not sent (kernel default).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CakeParams {
    /// `bandwidth` (shaper rate); `None` = unlimited.
    pub bandwidth: Option<Rate>,
    /// `diffserv3/4/8`, `besteffort`, `precedence`.
    pub diffserv: Option<CakeDiffserv>,
    /// `rtt` in microseconds.
    pub rtt_us: Option<u32>,
    /// Flow isolation mode.
    pub flow_mode: Option<CakeFlowMode>,
    /// `nat` / `nonat`.
    pub nat: Option<bool>,
    /// `wash` / `nowash`.
    pub wash: Option<bool>,
    /// `ack-filter`, `ack-filter-aggressive`, `no-ack-filter`.
    pub ack_filter: Option<CakeAckFilter>,
    /// `split-gso` / `no-split-gso`.
    pub split_gso: Option<bool>,
    /// `memlimit` in bytes.
    pub memlimit: Option<u32>,
}

/// fq_codel options; `None` fields are not sent (kernel default).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FqCodelParams {
    /// `limit` in packets.
    pub limit: Option<u32>,
    /// `flows`.
    pub flows: Option<u32>,
    /// `target` in microseconds.
    pub target_us: Option<u32>,
    /// `interval` in microseconds.
    pub interval_us: Option<u32>,
    /// `quantum` in bytes.
    pub quantum: Option<u32>,
    /// `ecn` / `noecn`.
    pub ecn: Option<bool>,
    /// `memory_limit` in bytes.
    pub memory_limit: Option<u32>,
}
