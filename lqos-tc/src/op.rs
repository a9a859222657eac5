//! [`TcOp`]: one typed tc operation.

use serde::{Deserialize, Serialize};

use crate::filter::{FilterKey, FlowerFilter};
use crate::handle::TcHandle;
use crate::ops::{Class, Qdisc};

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
    use crate::ops::QdiscKind;
    use lqos_model::Rate;

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
