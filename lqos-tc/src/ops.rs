//! The objects a [`TcOp`](crate::TcOp) names: qdiscs and HTB classes,
//! their kinds and options. The one vocabulary shared by the planner, the
//! `tc -b` renderer and parser, the netlink encoder and the live-tree
//! reader.

use serde::{Deserialize, Serialize};

use crate::filter::{CLSACT_HANDLE, CLSACT_PARENT};
use crate::handle::TcHandle;
use crate::options::{CakeAckFilter, CakeDiffserv, CakeFlowMode};
use lqos_model::Rate;

/// HTB's maximum class depth (`TC_HTB_MAXDEPTH`): top-level nodes, at an
/// HTB's root, are level 1, their circuits at most level 8.
pub const HTB_MAX_DEPTH: usize = 8;

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

impl Qdisc {
    /// A qdisc `handle` of `kind` under `parent`.
    pub fn new(parent: TcHandle, handle: TcHandle, kind: QdiscKind) -> Qdisc {
        Qdisc {
            parent,
            handle,
            kind,
        }
    }

    /// The device's root qdisc (`qdisc replace dev X root handle H: kind`).
    pub fn root(handle: TcHandle, kind: QdiscKind) -> Qdisc {
        Qdisc::new(TcHandle::ROOT, handle, kind)
    }

    /// A leaf qdisc `major:` of `kind` on HTB class `class`.
    pub fn leaf(class: TcHandle, major: u16, kind: QdiscKind) -> Qdisc {
        Qdisc::new(class, TcHandle::new(major, 0), kind)
    }

    /// True for a qdisc the kernel created itself (handle `0:`): never part
    /// of a plan, never drift, never deleted by a diff.
    pub const fn is_kernel_default(&self) -> bool {
        self.handle.raw() == TcHandle::UNSPEC.raw()
    }

    /// The `clsact` qdisc (`tc qdisc replace dev X clsact`), which holds
    /// the classifier's egress filters.
    pub const fn clsact() -> Qdisc {
        Qdisc {
            parent: CLSACT_PARENT,
            handle: CLSACT_HANDLE,
            kind: QdiscKind::Clsact,
        }
    }

    /// An HTB qdisc `major:` under `parent` (an mq class, or the root) with
    /// `default default_minor` and the kernel's r2q and direct_qlen.
    pub fn htb(parent: TcHandle, major: u16, default_minor: u32) -> Qdisc {
        Qdisc::new(
            parent,
            TcHandle::new(major, 0),
            QdiscKind::Htb(HtbQdisc::with_default(default_minor)),
        )
    }
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

impl Class {
    /// An HTB class `classid` under `parent` (a class, or the HTB qdisc for
    /// a top class) with an explicit quantum and tc's default bursts.
    pub fn htb(
        parent: TcHandle,
        classid: TcHandle,
        rate: Rate,
        ceil: Rate,
        prio: u32,
        quantum: u32,
    ) -> Class {
        Class {
            parent,
            classid,
            htb: HtbClass {
                rate,
                ceil,
                quantum,
                prio,
                burst: None,
                cburst: None,
            },
        }
    }
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

impl HtbQdisc {
    /// `htb default M` with the kernel's r2q and direct_qlen.
    pub const fn with_default(default_minor: u32) -> HtbQdisc {
        HtbQdisc {
            default_minor,
            r2q: None,
            direct_qlen: None,
        }
    }
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
