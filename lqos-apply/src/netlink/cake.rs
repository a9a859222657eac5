//! cake: its `TCA_OPTIONS` (`TCA_CAKE_*`, in the order tc's
//! `cake_parse_opt` sends them) encoded and decoded; its statistics
//! (`TCA_CAKE_STATS_*`, per tin `TCA_CAKE_TIN_STATS_*`) decoded; its goldens.

use lqos_tc::ops::CakeParams;
use lqos_tc::options::{CakeAckFilter, CakeDiffserv, CakeFlowMode};
use lqos_tc::TcHandle;
use serde::{Deserialize, Serialize};

use super::attr::{attr_u32, attr_u64, attrs, get_u32, get_u64, nest_begin, nest_end};
use super::consts::TCA_OPTIONS;
use super::error::{DecodeError, EncodeError};

const TCA_CAKE_BASE_RATE64: u16 = 2;
const TCA_CAKE_DIFFSERV_MODE: u16 = 3;
const TCA_CAKE_FLOW_MODE: u16 = 5;
const TCA_CAKE_RTT: u16 = 7;
const TCA_CAKE_TARGET: u16 = 8;
const TCA_CAKE_AUTORATE: u16 = 9;
const TCA_CAKE_MEMORY: u16 = 10;
const TCA_CAKE_NAT: u16 = 11;
const TCA_CAKE_WASH: u16 = 13;
const TCA_CAKE_ACK_FILTER: u16 = 16;
const TCA_CAKE_SPLIT_GSO: u16 = 17;

/// Appends cake's `TCA_OPTIONS`.
pub(crate) fn encode(buf: &mut Vec<u8>, c: &CakeParams) -> Result<(), EncodeError> {
    // Same attributes, same order as tc's cake_parse_opt.
    let nest = nest_begin(buf, TCA_OPTIONS);
    if let Some(bw) = c.bandwidth {
        attr_u64(buf, TCA_CAKE_BASE_RATE64, bw.bytes_per_sec());
    }
    if let Some(d) = c.diffserv {
        attr_u32(buf, TCA_CAKE_DIFFSERV_MODE, d.kernel());
    }
    if let Some(f) = c.flow_mode {
        attr_u32(buf, TCA_CAKE_FLOW_MODE, f.kernel());
    }
    if let Some(rtt) = c.rtt_us {
        attr_u32(buf, TCA_CAKE_RTT, rtt);
        // tc derives the target from the rtt and always sends both.
        attr_u32(buf, TCA_CAKE_TARGET, (rtt / 20).max(1));
    }
    if c.bandwidth.is_some() {
        // tc: an explicit bandwidth switches autorate-ingress off.
        attr_u32(buf, TCA_CAKE_AUTORATE, 0);
    }
    if let Some(m) = c.memlimit {
        attr_u32(buf, TCA_CAKE_MEMORY, m);
    }
    if let Some(nat) = c.nat {
        attr_u32(buf, TCA_CAKE_NAT, u32::from(nat));
    }
    if let Some(wash) = c.wash {
        attr_u32(buf, TCA_CAKE_WASH, u32::from(wash));
    }
    if let Some(s) = c.split_gso {
        attr_u32(buf, TCA_CAKE_SPLIT_GSO, u32::from(s));
    }
    if let Some(a) = c.ack_filter {
        attr_u32(buf, TCA_CAKE_ACK_FILTER, a.kernel());
    }
    nest_end(buf, nest)
}

/// cake's options back from a request or a dump (of qdisc `handle`).
pub(crate) fn decode(opts: &[u8], handle: TcHandle) -> Result<CakeParams, DecodeError> {
    let mut c = CakeParams::default();
    for (ty, v) in attrs(opts) {
        let x = get_u32(v);
        match ty {
            TCA_CAKE_BASE_RATE64 => {
                c.bandwidth = match get_u64(v).filter(|&b| b != 0) {
                    Some(b) => Some(super::htb::rate_from_bytes(b, handle)?),
                    None => None,
                }
            }
            // Unnamed numbers are kept as `Unknown(n)`: a newer kernel's mode
            // must not read back as "unset", which would satisfy the default.
            TCA_CAKE_DIFFSERV_MODE => c.diffserv = x.map(CakeDiffserv::from_kernel),
            TCA_CAKE_FLOW_MODE => c.flow_mode = x.map(CakeFlowMode::from_kernel),
            TCA_CAKE_RTT => c.rtt_us = x,
            TCA_CAKE_NAT => c.nat = x.map(|v| v != 0),
            TCA_CAKE_WASH => c.wash = x.map(|v| v != 0),
            TCA_CAKE_SPLIT_GSO => c.split_gso = x.map(|v| v != 0),
            TCA_CAKE_ACK_FILTER => c.ack_filter = x.map(CakeAckFilter::from_kernel),
            TCA_CAKE_MEMORY => c.memlimit = x.filter(|&m| m != 0),
            _ => {}
        }
    }
    Ok(c)
}

// enum TCA_CAKE_STATS_* and TCA_CAKE_TIN_STATS_* (uapi pkt_sched.h): the
// nested attributes of cake's TCA_STATS_APP.
const TCA_CAKE_STATS_CAPACITY_ESTIMATE64: u16 = 2;
const TCA_CAKE_STATS_MEMORY_LIMIT: u16 = 3;
const TCA_CAKE_STATS_MEMORY_USED: u16 = 4;
const TCA_CAKE_STATS_TIN_STATS: u16 = 10;
const TIN_SENT_PACKETS: u16 = 2;
const TIN_SENT_BYTES64: u16 = 3;
const TIN_DROPPED_PACKETS: u16 = 4;
const TIN_DROPPED_BYTES64: u16 = 5;
const TIN_ACKS_DROPPED_PACKETS: u16 = 6;
const TIN_ECN_MARKED_PACKETS: u16 = 8;
const TIN_BACKLOG_PACKETS: u16 = 10;
const TIN_BACKLOG_BYTES: u16 = 11;
const TIN_THRESHOLD_RATE64: u16 = 12;
const TIN_TARGET_US: u16 = 13;
const TIN_INTERVAL_US: u16 = 14;
const TIN_WAY_INDIRECT_HITS: u16 = 15;
const TIN_WAY_MISSES: u16 = 16;
const TIN_WAY_COLLISIONS: u16 = 17;
const TIN_PEAK_DELAY_US: u16 = 18;
const TIN_AVG_DELAY_US: u16 = 19;
const TIN_BASE_DELAY_US: u16 = 20;
const TIN_SPARSE_FLOWS: u16 = 21;
const TIN_BULK_FLOWS: u16 = 22;
const TIN_UNRESPONSIVE_FLOWS: u16 = 23;

/// cake's statistics (`tc -s qdisc show`: "memory used: M of L, capacity
/// estimate", then one column per tin).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CakeXstats {
    /// Bytes of memory its queues use now.
    pub memory_used: u32,
    /// Its memory limit in bytes.
    pub memory_limit: u32,
    /// Its capacity estimate in bytes/s.
    pub capacity_estimate: u64,
    /// Per tin, in the kernel's order (diffserv4: Bulk, Best Effort,
    /// Video, Voice).
    pub tins: Vec<CakeTin>,
}

/// One cake tin's statistics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CakeTin {
    /// The tin's threshold rate in bytes/s ("thresh").
    pub threshold_rate: u64,
    /// Target and interval in µs.
    pub target_us: u32,
    /// Codel interval in µs.
    pub interval_us: u32,
    /// Bytes sent.
    pub sent_bytes: u64,
    /// Packets sent.
    pub sent_packets: u32,
    /// Packets dropped.
    pub dropped_packets: u32,
    /// Bytes dropped.
    pub dropped_bytes: u64,
    /// Packets ECN-marked instead of dropped.
    pub ecn_marked_packets: u32,
    /// Pure ACKs dropped by the ACK filter.
    pub ack_drops: u32,
    /// Bytes queued now.
    pub backlog_bytes: u32,
    /// Packets queued now.
    pub backlog_packets: u32,
    /// Peak queueing delay in µs ("pk_delay").
    pub peak_delay_us: u32,
    /// Average queueing delay in µs ("av_delay").
    pub avg_delay_us: u32,
    /// Base (minimum) queueing delay in µs ("sp_delay").
    pub base_delay_us: u32,
    /// Sparse flows now.
    pub sparse_flows: u32,
    /// Bulk flows now.
    pub bulk_flows: u32,
    /// Unresponsive flows now.
    pub unresponsive_flows: u32,
    /// Set-associative hash: indirect hits.
    pub way_indirect_hits: u32,
    /// Set-associative hash: misses.
    pub way_misses: u32,
    /// Set-associative hash: collisions.
    pub way_collisions: u32,
}

/// cake's `TCA_STATS_APP` (nested; unknown attributes are skipped).
pub(crate) fn decode_xstats(app: &[u8]) -> CakeXstats {
    let mut x = CakeXstats::default();
    for (ty, v) in attrs(app) {
        match ty {
            TCA_CAKE_STATS_CAPACITY_ESTIMATE64 => x.capacity_estimate = get_u64(v).unwrap_or(0),
            TCA_CAKE_STATS_MEMORY_LIMIT => x.memory_limit = get_u32(v).unwrap_or(0),
            TCA_CAKE_STATS_MEMORY_USED => x.memory_used = get_u32(v).unwrap_or(0),
            TCA_CAKE_STATS_TIN_STATS => {
                x.tins = attrs(v).map(|(_, tin)| decode_tin(tin)).collect();
            }
            _ => {}
        }
    }
    x
}

fn decode_tin(v: &[u8]) -> CakeTin {
    let mut t = CakeTin::default();
    for (ty, a) in attrs(v) {
        let x = get_u32(a).unwrap_or(0);
        let x64 = get_u64(a).unwrap_or(0);
        match ty {
            TIN_SENT_PACKETS => t.sent_packets = x,
            TIN_SENT_BYTES64 => t.sent_bytes = x64,
            TIN_DROPPED_PACKETS => t.dropped_packets = x,
            TIN_DROPPED_BYTES64 => t.dropped_bytes = x64,
            TIN_ACKS_DROPPED_PACKETS => t.ack_drops = x,
            TIN_ECN_MARKED_PACKETS => t.ecn_marked_packets = x,
            TIN_BACKLOG_PACKETS => t.backlog_packets = x,
            TIN_BACKLOG_BYTES => t.backlog_bytes = x,
            TIN_THRESHOLD_RATE64 => t.threshold_rate = x64,
            TIN_TARGET_US => t.target_us = x,
            TIN_INTERVAL_US => t.interval_us = x,
            TIN_WAY_INDIRECT_HITS => t.way_indirect_hits = x,
            TIN_WAY_MISSES => t.way_misses = x,
            TIN_WAY_COLLISIONS => t.way_collisions = x,
            TIN_PEAK_DELAY_US => t.peak_delay_us = x,
            TIN_AVG_DELAY_US => t.avg_delay_us = x,
            TIN_BASE_DELAY_US => t.base_delay_us = x,
            TIN_SPARSE_FLOWS => t.sparse_flows = x,
            TIN_BULK_FLOWS => t.bulk_flows = x,
            TIN_UNRESPONSIVE_FLOWS => t.unresponsive_flows = x,
            _ => {}
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use lqos_model::Rate;
    use lqos_tc::ops::{Qdisc, QdiscKind};
    use lqos_tc::TcOp;

    /// Found by the `netlink_request` fuzz target: a cake base rate above
    /// `u64::MAX / 8` bytes/s saturated to `u64::MAX` bits/s, which encodes
    /// to another rate. No `tc` command sets such a rate (tc reads bits/s):
    /// it is a decode error, for cake and for HTB classes alike.
    #[test]
    fn a_rate_beyond_u64_bits_per_second_is_a_decode_error() {
        let clock = crate::netlink::PschedClock::default();
        let cake = CakeParams {
            bandwidth: Some(Rate::from_bps(8 * 0x0102_0304_0506)),
            ..Default::default()
        };
        let q = Qdisc {
            parent: TcHandle::new(1, 3),
            handle: TcHandle::new(3, 0),
            kind: QdiscKind::Cake(cake),
        };
        let mut buf = Vec::new();
        crate::netlink::op::encode_op_with(&TcOp::AddQdisc(q), 2, 1, &clock, &mut buf).unwrap();
        assert!(crate::netlink::op::decode_request(&buf, &clock).is_ok());
        let at = buf
            .windows(8)
            .position(|w| w == 0x0102_0304_0506u64.to_ne_bytes())
            .unwrap();
        let huge = u64::MAX / 8 + 1;
        buf[at..at + 8].copy_from_slice(&huge.to_ne_bytes());
        assert_eq!(
            crate::netlink::op::decode_request(&buf, &clock),
            Err(DecodeError::RateTooLarge {
                handle: TcHandle::new(3, 0),
                bytes_per_sec: huge
            })
        );
        assert_eq!(
            crate::netlink::htb::rate_from_bytes(huge, TcHandle::new(1, 5)),
            Err(DecodeError::RateTooLarge {
                handle: TcHandle::new(1, 5),
                bytes_per_sec: huge
            })
        );
        assert_eq!(
            crate::netlink::htb::rate_from_bytes(u64::MAX / 8, TcHandle::new(1, 5)),
            Ok(Rate::from_bps(u64::MAX / 8 * 8))
        );
    }
}

/// Golden bytes: `tc` 6.1's requests (captured with strace on a kernel
/// without sch_cake, see `super::golden`).
#[cfg(test)]
mod golden {
    use super::super::golden::*;
    use super::*;
    use lqos_tc::ops::QdiscKind;
    use lqos_tc::TcOp;

    /// tc qdisc add dev ens19 parent 1:3 handle 3: cake diffserv4
    #[test]
    fn cake_diffserv4() {
        let cake = CakeParams {
            diffserv: Some(CakeDiffserv::Diffserv4),
            ..Default::default()
        };
        check_exact(
            "cake_diffserv4",
            TcOp::AddQdisc(qdisc("1:3", "3:", QdiscKind::Cake(cake))),
        );
    }

    /// tc qdisc add dev ens19 parent 1:3 handle 3: cake besteffort rtt 200ms bandwidth 100mbit
    #[test]
    fn cake_besteffort_rtt_bw() {
        let cake = CakeParams {
            bandwidth: Some(mbps("100")),
            diffserv: Some(CakeDiffserv::Besteffort),
            rtt_us: Some(200_000),
            ..Default::default()
        };
        check_exact(
            "cake_besteffort_rtt_bw",
            TcOp::AddQdisc(qdisc("1:3", "3:", QdiscKind::Cake(cake))),
        );
    }

    /// tc qdisc add dev ens19 parent 1:3 handle 3: cake bandwidth 50mbit diffserv8 rtt 100ms triple-isolate nat wash ack-filter split-gso memlimit 32mb
    #[test]
    fn cake_all_options() {
        let cake = CakeParams {
            bandwidth: Some(mbps("50")),
            diffserv: Some(CakeDiffserv::Diffserv8),
            rtt_us: Some(100_000),
            flow_mode: Some(CakeFlowMode::TripleIsolate),
            nat: Some(true),
            wash: Some(true),
            ack_filter: Some(CakeAckFilter::On),
            split_gso: Some(true),
            memlimit: Some(32 << 20),
        };
        check_exact(
            "cake_all_options",
            TcOp::AddQdisc(qdisc("1:3", "3:", QdiscKind::Cake(cake))),
        );
    }

    /// tc qdisc replace dev ens19 parent 1:3 handle 3: cake diffserv3 dual-dsthost nonat nowash ack-filter-aggressive no-split-gso
    #[test]
    fn cake_diffserv3_nonat() {
        let cake = CakeParams {
            diffserv: Some(CakeDiffserv::Diffserv3),
            flow_mode: Some(CakeFlowMode::DualDsthost),
            nat: Some(false),
            wash: Some(false),
            ack_filter: Some(CakeAckFilter::Aggressive),
            split_gso: Some(false),
            ..Default::default()
        };
        check_exact(
            "cake_diffserv3_nonat",
            TcOp::ReplaceQdisc(qdisc("1:3", "3:", QdiscKind::Cake(cake))),
        );
    }
}
