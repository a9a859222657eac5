//! The classifier's vocabulary: the `clsact` qdisc's handles, egress
//! `flower` filters with one `skbedit` action, their keys and
//! preferences. What the planner, the tree model, the text and the netlink
//! codecs share; the classifier's planning is in [`crate::classify`].

use std::collections::BTreeMap;
use std::fmt;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use crate::handle::TcHandle;

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

/// Filters of a tree by key (the type of [`crate::tree::TcTree::filters`]).
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
}
