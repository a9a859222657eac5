//! fq_codel: its `TCA_OPTIONS` (`TCA_FQ_CODEL_*`, in the order tc's
//! `fq_codel_parse_opt` sends them) encoded and decoded, with the kernel's
//! codel time units undone for dumps; its statistics (`struct
//! tc_fq_codel_xstats`) decoded; its goldens.

use lqos_tc::ops::FqCodelParams;
use serde::{Deserialize, Serialize};

use super::attr::{attr_u32, attrs, get_u32, nest_begin, nest_end, u32_at};
use super::consts::TCA_OPTIONS;
use super::error::{DecodeError, EncodeError};

const TCA_FQ_CODEL_TARGET: u16 = 1;
const TCA_FQ_CODEL_LIMIT: u16 = 2;
const TCA_FQ_CODEL_INTERVAL: u16 = 3;
const TCA_FQ_CODEL_ECN: u16 = 4;
const TCA_FQ_CODEL_FLOWS: u16 = 5;
const TCA_FQ_CODEL_QUANTUM: u16 = 6;
const TCA_FQ_CODEL_MEMORY_LIMIT: u16 = 9;

/// Appends fq_codel's `TCA_OPTIONS`.
pub(crate) fn encode(buf: &mut Vec<u8>, f: &FqCodelParams) -> Result<(), EncodeError> {
    // Same attributes, same order as tc's fq_codel_parse_opt.
    let nest = nest_begin(buf, TCA_OPTIONS);
    let put = |buf: &mut Vec<u8>, ty, v: Option<u32>| {
        if let Some(v) = v {
            attr_u32(buf, ty, v);
        }
    };
    put(buf, TCA_FQ_CODEL_LIMIT, f.limit);
    put(buf, TCA_FQ_CODEL_FLOWS, f.flows);
    put(buf, TCA_FQ_CODEL_QUANTUM, f.quantum);
    put(buf, TCA_FQ_CODEL_INTERVAL, f.interval_us);
    put(buf, TCA_FQ_CODEL_TARGET, f.target_us);
    put(buf, TCA_FQ_CODEL_ECN, f.ecn.map(u32::from));
    put(buf, TCA_FQ_CODEL_MEMORY_LIMIT, f.memory_limit);
    nest_end(buf, nest)
}

/// fq_codel's options exactly as in a request.
pub(crate) fn decode(opts: &[u8]) -> FqCodelParams {
    let mut f = FqCodelParams::default();
    for (ty, v) in attrs(opts) {
        let x = get_u32(v);
        match ty {
            TCA_FQ_CODEL_LIMIT => f.limit = x,
            TCA_FQ_CODEL_FLOWS => f.flows = x,
            TCA_FQ_CODEL_TARGET => f.target_us = x,
            TCA_FQ_CODEL_INTERVAL => f.interval_us = x,
            TCA_FQ_CODEL_QUANTUM => f.quantum = x,
            TCA_FQ_CODEL_ECN => f.ecn = x.map(|v| v != 0),
            TCA_FQ_CODEL_MEMORY_LIMIT => f.memory_limit = x,
            _ => {}
        }
    }
    f
}

/// A dump's options: [`decode`] with the codel times taken back from the
/// kernel's 1024 ns units to the microseconds lqos sends ([`codel_us`]).
pub(crate) fn from_dump(f: &mut FqCodelParams) {
    f.target_us = f.target_us.map(codel_us);
    f.interval_us = f.interval_us.map(codel_us);
}

/// A codel time as fq_codel dumps it, back to the microseconds lqos sends
/// (only for dump replies: a request's value is exact, and this is not the
/// identity on values that are not dumps, e.g. 5000 -> 5001).
/// The kernel keeps codel times in 1024 ns units (`us * 1000 >> 10`) and
/// dumps `units * 1024 / 1000`, so `target 5ms` reads back as 4999 us. The
/// dumped value identifies the kernel's units exactly (`ceil(r * 1000 /
/// 1024)`); return the smallest microsecond value with those units, which
/// is the value sent for every round number (5 ms -> 5000).
fn codel_us(dumped: u32) -> u32 {
    let units = (u64::from(dumped) * 1000).div_ceil(1024);
    u32::try_from((units * 1024).div_ceil(1000)).unwrap_or(dumped)
}

/// `TCA_FQ_CODEL_XSTATS_QDISC`: the `type` of a qdisc's xstats.
const TCA_FQ_CODEL_XSTATS_QDISC: u32 = 0;

/// fq_codel's qdisc statistics (`struct tc_fq_codel_qd_stats`; `tc -s
/// qdisc show`: "maxpacket M drop_overlimit D new_flow_count N ecn_mark E
/// ... new_flows_len F old_flows_len O").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FqCodelXstats {
    /// Largest packet seen.
    pub maxpacket: u32,
    /// Times the packet limit was hit.
    pub drop_overlimit: u32,
    /// Packets ECN-marked instead of dropped.
    pub ecn_mark: u32,
    /// Times a packet created a new flow.
    pub new_flow_count: u32,
    /// Flows in the new list now.
    pub new_flows_len: u32,
    /// Flows in the old list now.
    pub old_flows_len: u32,
    /// Packets above the CE threshold.
    pub ce_mark: u32,
    /// Bytes of memory used now.
    pub memory_usage: u32,
    /// Drops because the memory limit was hit.
    pub drop_overmemory: u32,
}

/// A qdisc's `TCA_STATS_APP` (`struct tc_fq_codel_xstats`); `Ok(None)` for
/// a class's statistics. Fields newer kernels append are read when there.
pub(crate) fn decode_xstats(
    v: &[u8],
    handle: lqos_tc::TcHandle,
) -> Result<Option<FqCodelXstats>, DecodeError> {
    // type + the six fields every kernel with fq_codel sends.
    if v.len() < 4 + 24 {
        return Err(DecodeError::ShortStats {
            handle,
            what: "tc_fq_codel_xstats",
            len: v.len(),
        });
    }
    if u32_at(v, 0) != TCA_FQ_CODEL_XSTATS_QDISC {
        return Ok(None);
    }
    let f = |i: usize| {
        let o = 4 + 4 * i;
        if v.len() >= o + 4 {
            u32_at(v, o)
        } else {
            0
        }
    };
    Ok(Some(FqCodelXstats {
        maxpacket: f(0),
        drop_overlimit: f(1),
        ecn_mark: f(2),
        new_flow_count: f(3),
        new_flows_len: f(4),
        old_flows_len: f(5),
        ce_mark: f(6),
        memory_usage: f(7),
        drop_overmemory: f(8),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netlink::op::{decode_qdisc, decode_qdisc_dump, encode_op};
    use lqos_tc::ops::{Qdisc, QdiscKind};
    use lqos_tc::{TcHandle, TcOp};

    /// Regression (proptest `qdisc_encode_decode` after the lab merge:
    /// `interval 9453697us` decoded as 9453698): the codel-units
    /// conversion is for dump replies only; a request decodes exactly.
    #[test]
    fn codel_conversion_is_for_dumps_not_requests() {
        let fq = |target: u32, interval: u32| Qdisc {
            parent: TcHandle::new(1, 3),
            handle: TcHandle::new(3, 0),
            kind: QdiscKind::FqCodel(FqCodelParams {
                target_us: Some(target),
                interval_us: Some(interval),
                ..FqCodelParams::default()
            }),
        };
        let bytes = |q: &Qdisc| {
            let mut buf = Vec::new();
            encode_op(&TcOp::AddQdisc(q.clone()), 3, 1, &mut buf).unwrap();
            buf
        };
        // A request: exact, whatever the value.
        let sent = fq(5000, 9_453_697);
        assert_eq!(decode_qdisc(&bytes(&sent)[16..]).unwrap().1, sent);
        // A dump of `target 5ms interval 100ms` (the kernel reports 4999 /
        // 99999): back to what was sent.
        let dumped = bytes(&fq(4999, 99_999));
        assert_eq!(
            decode_qdisc_dump(&dumped[16..]).unwrap().1,
            fq(5000, 100_000)
        );
    }

    /// Regression (found in the stock-kernel lab): fq_codel's default
    /// `target 5ms` / `interval 100ms` dumped as 4999 / 99999 us, so every
    /// fq_codel leaf with an explicit target looked drifted.
    #[test]
    fn fq_codel_codel_times_read_back_as_sent() {
        // What fq_codel_change stores and fq_codel_dump returns (kernel 6.1).
        let kernel = |us: u32| (((u64::from(us) * 1000) >> 10) * 1024 / 1000) as u32;
        assert_eq!(kernel(5000), 4999);
        assert_eq!(codel_us(4999), 5000);
        assert_eq!(codel_us(kernel(100_000)), 100_000);
        for us in (0..3_000_000u32).step_by(7) {
            let back = codel_us(kernel(us));
            // The same kernel value, and exact for whole milliseconds.
            assert_eq!(kernel(back), kernel(us), "{us}");
            assert_eq!(
                (u64::from(back) * 1000) >> 10,
                (u64::from(us) * 1000) >> 10,
                "{us}"
            );
            if us % 1000 == 0 {
                assert_eq!(back, us);
            }
        }
    }
}

/// Golden bytes: `tc` 6.1's requests (captured with strace on a kernel
/// without sch_fq_codel, see `super::golden`).
#[cfg(test)]
mod golden {
    use super::super::golden::*;
    use super::*;
    use lqos_tc::ops::QdiscKind;
    use lqos_tc::TcOp;

    /// tc qdisc add dev ens19 parent 1:3 handle 3: fq_codel
    #[test]
    fn fq_codel_default() {
        check_exact(
            "fq_codel_default",
            TcOp::AddQdisc(qdisc(
                "1:3",
                "3:",
                QdiscKind::FqCodel(FqCodelParams::default()),
            )),
        );
    }

    /// tc qdisc add dev ens19 parent 1:3 handle 3: fq_codel limit 1000 flows 2048 target 5ms interval 100ms quantum 1514 ecn memory_limit 32mb
    #[test]
    fn fq_codel_options() {
        let f = FqCodelParams {
            limit: Some(1000),
            flows: Some(2048),
            target_us: Some(5000),
            interval_us: Some(100_000),
            quantum: Some(1514),
            ecn: Some(true),
            memory_limit: Some(32 << 20),
        };
        check_exact(
            "fq_codel_options",
            TcOp::AddQdisc(qdisc("1:3", "3:", QdiscKind::FqCodel(f))),
        );
    }

    /// tc qdisc add dev ens19 parent 1:3 handle 3: fq_codel noecn
    #[test]
    fn fq_codel_noecn() {
        let f = FqCodelParams {
            ecn: Some(false),
            ..Default::default()
        };
        check_exact(
            "fq_codel_noecn",
            TcOp::AddQdisc(qdisc("1:3", "3:", QdiscKind::FqCodel(f))),
        );
    }
}
