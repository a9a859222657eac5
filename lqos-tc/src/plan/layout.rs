//! The queue layout of a device: the HTB qdiscs, their top and default
//! classes and the default class's leaf; which devices carry which
//! direction.

use lqos_model::Rate;

use super::rates::{default_class_rate, htb_class, quantum_for};
use crate::config::{Interfaces, LeafSpec};
use crate::handle::TcHandle;
use crate::op::TcOp;
use crate::ops::{Class, Qdisc};
use crate::plan_config::PlanConfig;

/// The leaf qdisc handle of HTB `major:`'s default class `:2`: LibreQoS's
/// bakery's (`0x2000 + 2 major + 1`), so a tree LibreQoS built keeps it.
pub const fn default_leaf_major(major: u16) -> u16 {
    0x2000 + 2 * major + 1
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
pub(super) fn single_queue(cfg: &PlanConfig) -> bool {
    !matches!(cfg.interfaces, Interfaces::OnAStick { .. }) && cfg.queues_per_direction() == 1
}

pub(super) fn htbs_per_dev(cfg: &PlanConfig) -> u32 {
    let q = cfg.queues_per_direction();
    if matches!(cfg.interfaces, Interfaces::OnAStick { .. }) {
        2 * q
    } else {
        q
    }
}

/// The queue layout of one device's direction: per queue the HTB qdisc
/// (major `queue + 1 + off`), top class `:1` at `cap`, default class `:2`
/// (rate [`default_class_rate`], ceil `cap - 1 Mbit`, prio 5, the link's
/// quantum, as LibreQoS) and its leaf ([`default_leaf_major`]).
pub(super) fn layout_ops(ops: &mut Vec<TcOp>, cfg: &PlanConfig, cap: Rate, off: u16, r2q: u64) {
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
        ops.push(TcOp::AddClass(Class::htb(
            TcHandle::new(m, 1),
            TcHandle::new(m, 2),
            default_class_rate(cap),
            cap.saturating_sub(Rate::from_mbps(1)),
            5,
            quantum_for(cap, r2q),
        )));
        if let LeafSpec::Qdisc(k) = &cfg.default_sqm {
            ops.push(TcOp::AddQdisc(Qdisc::leaf(
                TcHandle::new(m, 2),
                default_leaf_major(m),
                k.clone(),
            )));
        }
    }
}
