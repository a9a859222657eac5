//! The kernel-native classifier (`--classifier tc`): per interface a
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

use std::collections::BTreeMap;
use std::fmt;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use crate::{rules, Qdisc, QdiscKind, TcHandle, TcOp, TcTree};

/// Handle of the `clsact` qdisc (`ffff:`).
pub const CLSACT_HANDLE: TcHandle = TcHandle::new(0xffff, 0);
/// Parent of the `clsact` qdisc (`TC_H_CLSACT`, `ffff:fff1`).
pub const CLSACT_PARENT: TcHandle = TcHandle::from_raw(0xffff_fff1);
/// The egress hook of `clsact` (`ffff:fff3`), where lqos's filters live.
pub const EGRESS: TcHandle = TcHandle::from_raw(0xffff_fff3);
/// Lowest filter preference lqos uses; readback ignores filters outside
/// [`PREF_MIN`]..=[`PREF_MAX`] (another program's, e.g. LibreQoS's BPF).
pub const PREF_MIN: u16 = 1000;
/// Highest filter preference lqos uses.
pub const PREF_MAX: u16 = 2328;

/// Which classifier a plan includes (typed where lqos.conf is read).
pub use lqos_model::Classifier;

/// The filter's protocol (`tcm_info`'s low half, `TCA_FLOWER_KEY_ETH_TYPE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum FilterProto {
    /// `protocol ip` (`ETH_P_IP`, 0x0800).
    Ip,
    /// `protocol ipv6` (`ETH_P_IPV6`, 0x86dd).
    Ipv6,
}

impl FilterProto {
    /// The ethertype.
    pub const fn ethertype(self) -> u16 {
        match self {
            FilterProto::Ip => 0x0800,
            FilterProto::Ipv6 => 0x86dd,
        }
    }

    /// From an ethertype.
    pub const fn from_ethertype(t: u16) -> Option<FilterProto> {
        match t {
            0x0800 => Some(FilterProto::Ip),
            0x86dd => Some(FilterProto::Ipv6),
            _ => None,
        }
    }

    /// tc's name (`ip`, `ipv6`).
    pub const fn name(self) -> &'static str {
        match self {
            FilterProto::Ip => "ip",
            FilterProto::Ipv6 => "ipv6",
        }
    }

    /// The protocol of addresses in `net`.
    pub fn of(net: &IpNet) -> FilterProto {
        match net {
            IpNet::V4(_) => FilterProto::Ip,
            IpNet::V6(_) => FilterProto::Ipv6,
        }
    }
}

/// Which address a filter matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum MatchSide {
    /// `dst_ip`: traffic towards the subscriber (download interface).
    Dst,
    /// `src_ip`: traffic from the subscriber (upload interface).
    Src,
}

impl MatchSide {
    /// tc's flower keyword.
    pub const fn keyword(self) -> &'static str {
        match self {
            MatchSide::Dst => "dst_ip",
            MatchSide::Src => "src_ip",
        }
    }
}

impl fmt::Display for MatchSide {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.keyword())
    }
}

/// What identifies a filter in the kernel: preference, protocol and handle
/// under the egress hook (`tc filter del dev X egress pref P handle H
/// protocol ip flower`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct FilterKey {
    /// Filter preference (`pref`, the high half of `tcm_info`).
    pub pref: u16,
    /// Protocol.
    pub protocol: FilterProto,
    /// Filter handle (`tcm_handle`), never 0.
    pub handle: u32,
}

impl fmt::Display for FilterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "egress filter pref {} handle {} protocol {}",
            self.pref,
            self.handle,
            self.protocol.name()
        )
    }
}

/// One egress flower filter with one skbedit action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowerFilter {
    /// Identity.
    pub key: FilterKey,
    /// `dst_ip` or `src_ip`.
    pub side: MatchSide,
    /// The address or prefix (host bits zero; a single address is `/32` or
    /// `/128`).
    pub net: IpNet,
    /// `skbedit queue_mapping`: the 0-based TX queue.
    pub queue_mapping: u16,
    /// `skbedit priority`: the circuit's classid.
    pub priority: TcHandle,
}

impl FlowerFilter {
    /// The filter that steers `net` (matched on `side`) to `classid` on TX
    /// queue `queue`, with the preference for its family, side and length.
    ///
    /// ```
    /// use lqos_tc::classify::{FlowerFilter, MatchSide};
    /// use lqos_tc::TcHandle;
    /// let f = FlowerFilter::steer(MatchSide::Dst, "100.64.0.0/24".parse().unwrap(), 7, 3,
    ///     TcHandle::new(4, 0x1a));
    /// assert_eq!(f.key.pref, 1008);
    /// ```
    pub fn steer(
        side: MatchSide,
        net: IpNet,
        handle: u32,
        queue: u16,
        classid: TcHandle,
    ) -> FlowerFilter {
        let net = net.trunc();
        FlowerFilter {
            key: FilterKey {
                pref: pref_for(side, &net),
                protocol: FilterProto::of(&net),
                handle,
            },
            side,
            net,
            queue_mapping: queue,
            priority: classid,
        }
    }
}

/// The preference lqos gives filters matching `net` on `side`.
pub fn pref_for(side: MatchSide, net: &IpNet) -> u16 {
    let unmatched = u16::from(net.max_prefix_len() - net.prefix_len());
    let base = match (net, side) {
        (IpNet::V4(_), MatchSide::Dst) => 1000,
        (IpNet::V4(_), MatchSide::Src) => 1100,
        (IpNet::V6(_), MatchSide::Dst) => 2000,
        (IpNet::V6(_), MatchSide::Src) => 2200,
    };
    base + unmatched
}

/// The `clsact` qdisc (`tc qdisc replace dev X clsact`).
pub fn clsact() -> Qdisc {
    Qdisc {
        parent: CLSACT_PARENT,
        handle: CLSACT_HANDLE,
        kind: QdiscKind::Clsact,
    }
}

/// Does `t` hold a `clsact` qdisc?
pub fn has_clsact(t: &TcTree) -> bool {
    t.qdiscs
        .get(&CLSACT_HANDLE)
        .is_some_and(|q| q.kind == QdiscKind::Clsact)
}

/// The ops that turn `old`'s classifier into `new`'s: a `clsact` replace if
/// `new` has one and `old` not; deletes of `old`'s filters that `new` does
/// not have (first, so a prefix that changed handle can be re-added); then
/// one replace per filter that is new or differs
/// ([`rules::filter_satisfies`]). A `clsact` is never deleted (with
/// `--classifier none` it may be another program's, e.g. LibreQoS's BPF).
pub fn diff_filters(old: &TcTree, new: &TcTree) -> Vec<TcOp> {
    let mut ops = Vec::new();
    let fresh = has_clsact(new) && !has_clsact(old);
    if fresh {
        ops.push(TcOp::ReplaceQdisc(clsact()));
    }
    for k in old.filters.keys() {
        if !new.filters.contains_key(k) {
            ops.push(TcOp::DeleteFilter(*k));
        }
    }
    if !has_clsact(new) {
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

/// Filters of a tree by key (the type of [`TcTree::filters`]).
pub type Filters = BTreeMap<FilterKey, FlowerFilter>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefs_order_longest_prefix_first() {
        let p = |s: &str, side| pref_for(side, &s.parse().unwrap());
        assert_eq!(p("10.0.0.1/32", MatchSide::Dst), 1000);
        assert!(p("10.0.0.0/24", MatchSide::Dst) > p("10.0.0.1/32", MatchSide::Dst));
        assert_eq!(p("0.0.0.0/0", MatchSide::Src), 1132);
        assert_eq!(p("2001:db8::/48", MatchSide::Dst), 2080);
        assert_eq!(p("::/0", MatchSide::Src), PREF_MAX);
    }

    #[test]
    fn steer_truncates_host_bits() {
        let f = FlowerFilter::steer(
            MatchSide::Src,
            "100.64.0.9/24".parse().unwrap(),
            1,
            0,
            TcHandle::new(1, 3),
        );
        assert_eq!(f.net.to_string(), "100.64.0.0/24");
        assert_eq!(f.key.protocol, FilterProto::Ip);
    }

    #[test]
    fn classifier_names() {
        assert_eq!("TC".parse::<Classifier>().unwrap(), Classifier::Tc);
        assert_eq!("none".parse::<Classifier>().unwrap(), Classifier::None);
        assert_eq!(" Bpf".parse::<Classifier>().unwrap(), Classifier::Bpf);
        assert_eq!(Classifier::Bpf.to_string(), "bpf");
        assert!("xdp".parse::<Classifier>().is_err());
    }
}
