//! The kernel-native classifier (`classifier = "tc"`): per interface a
//! `clsact` qdisc and, per circuit address or prefix, one egress `flower`
//! filter with one `skbedit queue_mapping Q priority MAJ:MIN` action.
//!
//! HTB looks at `skb->priority` before any filter: when it is a classid of
//! that HTB the packet goes to that class. With `mq` at the root the packet
//! must also leave on the circuit's TX queue (the queue that holds its HTB),
//! which is what `queue_mapping` does (honoured on egress since Linux 6.0).
//! Addresses no filter matches keep their queue and priority and end in the
//! queue's default class (`:2`).
//!
//! Filter preferences encode family, direction and prefix length so that
//! longer prefixes are tried first (the kernel walks filter preferences in
//! ascending order, and inside one preference every filter has the same
//! mask): IPv4 `dst_ip` 1000 + (32 - len), IPv4 `src_ip` 1100 + (32 - len),
//! IPv6 `dst_ip` 2000 + (128 - len), IPv6 `src_ip` 2200 + (128 - len).
//! Handles are allocated per prefix and kept in the plan's
//! [`crate::Allocation`], so a reload that moves an address to another
//! circuit replaces exactly one filter in place.

pub use crate::filter::{
    pref_for, FilterKey, FilterProto, Filters, FlowerFilter, MatchSide, CLSACT_HANDLE,
    CLSACT_PARENT, EGRESS, PREF_MAX, PREF_MIN,
};
use crate::op::TcOp;
use crate::ops::Qdisc;
use crate::rules;
use crate::tree::TcTree;

/// Which classifier a plan includes (typed where lqos.conf is read).
pub use lqos_model::config::Classifier;

/// The ops that turn `old`'s classifier into `new`'s: a `clsact` replace if
/// `new` has one and `old` not; deletes of `old`'s filters that `new` does
/// not have (first, so a prefix that changed handle can be re-added); then
/// one replace per filter that is new or differs
/// ([`rules::filter_satisfies`]). A `clsact` is never deleted (with
/// no classifier planned it may be another program's, e.g. LibreQoS's BPF).
pub fn diff_filters(old: &TcTree, new: &TcTree) -> Vec<TcOp> {
    let mut ops = Vec::new();
    let fresh = new.has_clsact() && !old.has_clsact();
    if fresh {
        ops.push(TcOp::ReplaceQdisc(Qdisc::clsact()));
    }
    for k in old.filters.keys() {
        if !new.filters.contains_key(k) {
            ops.push(TcOp::DeleteFilter(*k));
        }
    }
    if !new.has_clsact() {
        return ops;
    }
    for (k, f) in &new.filters {
        if fresh
            || !old
                .filters
                .get(k)
                .is_some_and(|o| rules::filter_satisfies(o, f))
        {
            ops.push(TcOp::ReplaceFilter(f.clone()));
        }
    }
    ops
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifier_names() {
        assert_eq!("TC".parse::<Classifier>().unwrap(), Classifier::Tc);
        assert_eq!("none".parse::<Classifier>().unwrap(), Classifier::None);
        assert!("xdp".parse::<Classifier>().is_err());
    }
}
