//! Typed tc operations: the one vocabulary shared by the planner, the
//! `tc -b` renderer/parser, the netlink encoder and the live-tree reader.

use serde::{Deserialize, Serialize};

use crate::filter::{FilterKey, FlowerFilter, CLSACT_HANDLE, CLSACT_PARENT};
use crate::handle::TcHandle;
use crate::options::{CakeAckFilter, CakeDiffserv, CakeFlowMode};
use lqos_model::Rate;

/// HTB's maximum class depth (`TC_HTB_MAXDEPTH`): top-level nodes, at an
/// HTB's root, are level 1, their circuits at most level 8.
pub const HTB_MAX_DEPTH: usize = 8;

/// One tc operation on one interface (the interface is held by the stream).
///
/// Deserializing also accepts the older spelling of the root delete,
/// `DeleteQdisc { parent: ROOT, handle: UNSPEC }`, and reads it as
/// [`TcOp::DeleteRoot`], so plans and diffs saved by earlier versions load.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "wire::TcOpWire")]
pub enum TcOp {
    /// `tc qdisc del dev X root`: delete the device's root qdisc and all
    /// below it (the kernel answers `ENOENT` when the root is its own
    /// handle-0 default, i.e. there is nothing to delete).
    DeleteRoot,
    /// `tc qdisc add` (fails if it exists).
    AddQdisc(Qdisc),
    /// `tc qdisc replace` (create or replace).
    ReplaceQdisc(Qdisc),
    /// `tc qdisc del dev X parent P [handle H]` (a qdisc below the root;
    /// the root delete is [`TcOp::DeleteRoot`]).
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
    /// The root delete: `tc qdisc del dev X root` ([`TcOp::DeleteRoot`]).
    pub const fn delete_root() -> TcOp {
        TcOp::DeleteRoot
    }

    /// `qdisc del dev X parent P handle H` as the typed op: the root delete
    /// (`parent root`, no handle) is [`TcOp::DeleteRoot`], anything else
    /// [`TcOp::DeleteQdisc`]. For readers of text, bytes and old JSON.
    pub const fn delete_qdisc(parent: TcHandle, handle: TcHandle) -> TcOp {
        if parent.raw() == TcHandle::ROOT.raw() && handle.raw() == TcHandle::UNSPEC.raw() {
            TcOp::DeleteRoot
        } else {
            TcOp::DeleteQdisc { parent, handle }
        }
    }

    /// True for [`TcOp::DeleteRoot`].
    pub const fn is_root_delete(&self) -> bool {
        matches!(self, TcOp::DeleteRoot)
    }

    /// True for ops that do not change anything in the kernel (none today;
    /// every op mutates). Kept so callers can assert "no mutating op".
    pub const fn is_mutating(&self) -> bool {
        true
    }
}

/// The serde form that [`TcOp`] is read from (old sentinel included).
mod wire {
    use super::{Class, FilterKey, FlowerFilter, Qdisc, TcHandle, TcOp};
    use serde::Deserialize;

    #[derive(Deserialize)]
    pub(super) enum TcOpWire {
        DeleteRoot,
        AddQdisc(Qdisc),
        ReplaceQdisc(Qdisc),
        DeleteQdisc { parent: TcHandle, handle: TcHandle },
        AddClass(Class),
        ChangeClass(Class),
        DeleteClass { parent: TcHandle, classid: TcHandle },
        ReplaceFilter(FlowerFilter),
        DeleteFilter(FilterKey),
    }

    impl From<TcOpWire> for TcOp {
        fn from(w: TcOpWire) -> TcOp {
            match w {
                TcOpWire::DeleteRoot => TcOp::DeleteRoot,
                TcOpWire::AddQdisc(q) => TcOp::AddQdisc(q),
                TcOpWire::ReplaceQdisc(q) => TcOp::ReplaceQdisc(q),
                TcOpWire::DeleteQdisc { parent, handle } => TcOp::delete_qdisc(parent, handle),
                TcOpWire::AddClass(c) => TcOp::AddClass(c),
                TcOpWire::ChangeClass(c) => TcOp::ChangeClass(c),
                TcOpWire::DeleteClass { parent, classid } => TcOp::DeleteClass { parent, classid },
                TcOpWire::ReplaceFilter(f) => TcOp::ReplaceFilter(f),
                TcOpWire::DeleteFilter(k) => TcOp::DeleteFilter(k),
            }
        }
    }

    /// The way back, exhaustive over [`TcOp`]: a new op variant does not
    /// compile until the wire enum (and so deserialization) has it too.
    #[cfg(test)]
    impl From<TcOp> for TcOpWire {
        fn from(op: TcOp) -> TcOpWire {
            match op {
                TcOp::DeleteRoot => TcOpWire::DeleteRoot,
                TcOp::AddQdisc(q) => TcOpWire::AddQdisc(q),
                TcOp::ReplaceQdisc(q) => TcOpWire::ReplaceQdisc(q),
                TcOp::DeleteQdisc { parent, handle } => TcOpWire::DeleteQdisc { parent, handle },
                TcOp::AddClass(c) => TcOpWire::AddClass(c),
                TcOp::ChangeClass(c) => TcOpWire::ChangeClass(c),
                TcOp::DeleteClass { parent, classid } => TcOpWire::DeleteClass { parent, classid },
                TcOp::ReplaceFilter(f) => TcOpWire::ReplaceFilter(f),
                TcOp::DeleteFilter(k) => TcOpWire::DeleteFilter(k),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_root_delete_sentinel_still_deserializes_as_delete_root() {
        // What serde wrote for `TcOp::delete_root()` before `DeleteRoot`.
        let old = r#"{"DeleteQdisc":{"parent":"root","handle":"none"}}"#;
        let op: TcOp = serde_json::from_str(old).unwrap();
        assert_eq!(op, TcOp::DeleteRoot);
        let new = serde_json::to_string(&TcOp::DeleteRoot).unwrap();
        assert_eq!(new, r#""DeleteRoot""#);
        assert_eq!(
            serde_json::from_str::<TcOp>(&new).unwrap(),
            TcOp::DeleteRoot
        );
        // Every op survives the wire form (see `From<TcOp> for TcOpWire`).
        let f = FlowerFilter::steer(
            crate::filter::MatchSide::Dst,
            "2001:db8::/48".parse().unwrap(),
            7,
            3,
            TcHandle::new(4, 0x1a),
        );
        let q = Qdisc::leaf(TcHandle::new(1, 3), 3, QdiscKind::Pfifo { limit: None });
        let c = Class::htb(
            TcHandle::new(1, 1),
            TcHandle::new(1, 3),
            Rate::from_mbps(1),
            Rate::from_mbps(2),
            3,
            1522,
        );
        for op in [
            TcOp::DeleteRoot,
            TcOp::AddQdisc(q.clone()),
            TcOp::ReplaceQdisc(q),
            TcOp::AddClass(c.clone()),
            TcOp::ChangeClass(c),
            TcOp::DeleteClass {
                parent: TcHandle::new(1, 1),
                classid: TcHandle::new(1, 3),
            },
            TcOp::ReplaceFilter(f.clone()),
            TcOp::DeleteFilter(f.key),
        ] {
            let back: TcOp = wire::TcOpWire::from(op.clone()).into();
            assert_eq!(back, op);
            let json = serde_json::to_string(&op).unwrap();
            assert_eq!(serde_json::from_str::<TcOp>(&json).unwrap(), op);
        }
        // Other qdisc deletes are untouched.
        let leaf = r#"{"DeleteQdisc":{"parent":"1:3","handle":"3:"}}"#;
        assert_eq!(
            serde_json::from_str::<TcOp>(leaf).unwrap(),
            TcOp::DeleteQdisc {
                parent: TcHandle::new(1, 3),
                handle: TcHandle::new(3, 0)
            }
        );
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
