//! Stage 5: the IP map with stable filter handles and, with the tc
//! classifier, the classifier's ops.

use lqos_model::Circuit;

use super::ip_map::{filter_slots, ip_map};
use super::layout::devices;
use super::{Allocation, Plan};
use crate::config::Interfaces;
use crate::filter::{FilterKey, FlowerFilter, MatchSide};
use crate::ipmap::IpMap;
use crate::op::TcOp;
use hashbrown::HashSet;
use lqos_model::config::Classifier;

/// Stage 5: the IP map with stable filter handles (from `previous`, which
/// need not have the same number of queues) and, with the tc classifier,
/// the classifier's ops appended after the tree (locality order is for
/// the HTB subtrees; filters come last so a packet is never steered to a
/// class that is not there yet).
pub(super) fn classify_stage(plan: &mut Plan, circuits: &[Circuit], previous: Option<&Allocation>) {
    let stick = matches!(plan.config.interfaces, Interfaces::OnAStick { .. });
    let (dev_d, dev_u) = devices(&plan.config);
    let ip_map = ip_map(
        circuits,
        &plan.allocation.circuits,
        previous,
        plan.allocation.queues,
        stick,
        &dev_d,
        &dev_u,
    );
    if plan.config.classifier == Classifier::Tc {
        // dst_ip filters steer download, src_ip filters upload; on a stick
        // both sets are on the one interface.
        const DOWN: (MatchSide, bool) = (MatchSide::Dst, false);
        const UP: (MatchSide, bool) = (MatchSide::Src, true);
        match plan.interfaces.as_mut_slice() {
            [one] => push_filters(&mut one.ops, &ip_map, &[DOWN, UP]),
            [down, up] => {
                push_filters(&mut down.ops, &ip_map, &[DOWN]);
                push_filters(&mut up.ops, &ip_map, &[UP]);
            }
            _ => unreachable!("a plan has one interface (stick) or two (bridge)"),
        }
    }
    plan.allocation.filters =
        filter_slots(ip_map.entries().iter().map(|e| (e.net, e.filter_handle)));
    plan.ip_map = ip_map;
}

/// Appends the `clsact` replace and one filter per distinct prefix for each
/// `(side, upload)`: `dst_ip` filters steer to the download classids,
/// `src_ip` ones to the upload classids.
fn push_filters(ops: &mut Vec<TcOp>, map: &IpMap, sides: &[(MatchSide, bool)]) {
    ops.push(TcOp::ReplaceQdisc(crate::ops::Qdisc::clsact()));
    let mut seen: HashSet<FilterKey> = HashSet::default();
    for &(side, upload) in sides {
        for e in map.entries() {
            let s = if upload { &e.upload } else { &e.download };
            let f = FlowerFilter::steer(side, e.net, e.filter_handle, s.queue as u16, s.classid);
            if seen.insert(f.key) {
                ops.push(TcOp::ReplaceFilter(f));
            }
        }
    }
}
