//! cake: its `TCA_OPTIONS` (`TCA_CAKE_*`, in the order tc's
//! `cake_parse_opt` sends them) encoded and decoded; its goldens.

use lqos_model::Rate;
use lqos_tc::{CakeAckFilter, CakeDiffserv, CakeFlowMode, CakeParams};

use super::attr::{attr_u32, attr_u64, attrs, get_u32, get_u64, nest_begin, nest_end};
use super::consts::TCA_OPTIONS;
use super::error::EncodeError;

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

/// cake's options back from a request or a dump.
pub(crate) fn decode(opts: &[u8]) -> CakeParams {
    let mut c = CakeParams::default();
    for (ty, v) in attrs(opts) {
        let x = get_u32(v);
        match ty {
            TCA_CAKE_BASE_RATE64 => {
                c.bandwidth = get_u64(v)
                    .filter(|&b| b != 0)
                    .map(|b| Rate::from_bps(b.saturating_mul(8)))
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
    c
}

/// Golden bytes: `tc` 6.1's requests (captured with strace on a kernel
/// without sch_cake, see `super::golden`).
#[cfg(test)]
mod golden {
    use super::super::golden::*;
    use super::*;
    use lqos_tc::{QdiscKind, TcOp};

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
