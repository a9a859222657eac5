//! The queue layout of a device: the HTB qdiscs, their top and default
//! classes and the default class's leaf; which devices carry which
//! direction.

use lqos_model::Rate;

use super::rates::htb_class;
use crate::{Interfaces, LeafSpec, PlanConfig, Qdisc, TcHandle, TcOp};

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
/// and its leaf.
pub(super) fn layout_ops(ops: &mut Vec<TcOp>, cfg: &PlanConfig, cap: Rate, off: u16, r2q: u64) {
    let htbs = htbs_per_dev(cfg) as u16;
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
        let dceil = cap.saturating_sub(Rate::from_mbps(1));
        let drate = Rate::from_bps(dceil.bps() / 4);
        ops.push(htb_class(
            TcHandle::new(m, 1),
            TcHandle::new(m, 2),
            drate,
            dceil,
            5,
            r2q,
        ));
        if let LeafSpec::Qdisc(k) = &cfg.default_sqm {
            ops.push(TcOp::AddQdisc(Qdisc::leaf(
                TcHandle::new(m, 2),
                htbs + m,
                k.clone(),
            )));
        }
    }
}
