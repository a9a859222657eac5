//! Rate and quantum math, as LibreQoS (HEAD, its bakery) computes it: r2q
//! and quantum, "just below" a ceiling, a circuit's rate and ceil under its
//! parent, the squashing of minimums a node cannot guarantee, the default
//! class's rate, the HTB class op.

use lqos_model::Rate;

use crate::handle::TcHandle;
use crate::op::TcOp;
use crate::ops::Class;

/// Smallest quantum lqos sends (LibreQoS's `MIN_QUANTUM`, one MTU frame).
pub const QUANTUM_MIN: u32 = 1522;

/// Largest quantum lqos sends (HTB warns "quantum is big" above this).
pub const QUANTUM_MAX: u32 = 200_000;

/// LibreQoS's target for the link's quantum when choosing r2q.
const R2Q_TARGET_QUANTUM: u64 = 60_000;

/// "Just below" `max`, for a guaranteed rate that must stay under its
/// ceil (LibreQoS's rule for nodes, and for circuits whose minimum reaches
/// their maximum): 1 Mbit below from 1 Mbit up, 10 kbit below under 1
/// Mbit, never below 10 kbit (LibreQoS's bakery lifts a 0 to 10 kbit;
/// LibreQoS.py wrote `rate 0kbit`); half of rates of 20 kbit or less
/// (which LibreQoS refuses as inputs).
pub fn just_below(max: Rate) -> Rate {
    let b = max.bps();
    let r = if b >= 1_000_000 {
        (b - 1_000_000).max(MIN_RATE.bps())
    } else if b > 2 * MIN_RATE.bps() {
        b - MIN_RATE.bps()
    } else {
        b / 2
    };
    Rate::from_bps(r.max(8))
}

/// The smallest guaranteed rate LibreQoS gives (10 kbit: its bakery's
/// floor, and its squashed minimum).
pub const MIN_RATE: Rate = Rate::from_bps(10_000);

/// Whether the minimums of a node's circuits (summed per direction) are
/// more than the node guarantees (its own rate), in either direction:
/// then LibreQoS squashes every one of those circuits' minimums
/// ([`squashed_min`]).
pub fn squashes(sum_down: Rate, sum_up: Rate, node_down: Rate, node_up: Rate) -> bool {
    sum_down > node_down || sum_up > node_up
}

/// The minimum LibreQoS gives each of a squashed node's `n` circuits (both
/// directions): 1 Mbit, or 10 kbit when even `n` x 1 Mbit is more than
/// the node guarantees in either direction. `circuit_rates` then keeps
/// it under the circuit's ceil.
pub fn squashed_min(n: u64, node_down: Rate, node_up: Rate) -> Rate {
    let one = Rate::from_mbps(1);
    let all = Rate::from_bps(one.bps().saturating_mul(n));
    if all > node_down || all > node_up {
        MIN_RATE
    } else {
        one
    }
}

/// LibreQoS's r2q for the link: the smallest integer >= 10 such that the
/// link's quantum (bytes/s / r2q) is at most 60000.
pub fn r2q_for(link: Rate) -> u64 {
    let bytes = link.bytes_per_sec();
    bytes.div_ceil(R2Q_TARGET_QUANTUM).max(10)
}

/// LibreQoS's quantum for a class with ceiling `ceil`: its whole Mbps
/// (LibreQoS's bakery truncates) in bytes/s over r2q, clamped to
/// [`QUANTUM_MIN`]..=[`QUANTUM_MAX`].
pub fn quantum_for(ceil: Rate, r2q: u64) -> u32 {
    let q = ceil.mbps_floor().saturating_mul(125_000) / r2q.max(1);
    q.clamp(u64::from(QUANTUM_MIN), u64::from(QUANTUM_MAX)) as u32
}

/// A squashed circuit's guaranteed rate under `ceil`, given its node's
/// [`squashed_min`]: 1 Mbit (10 kbit in a node that cannot give even that),
/// first capped at the ceil as LibreQoS does (a circuit under 1 Mbit keeps
/// its ceil, then goes [`just_below`] it).
pub fn squashed_rate(squash_min: Rate, ceil: Rate) -> Rate {
    let one = Rate::from_mbps(1);
    let base = one.min(ceil);
    let min = if squash_min < one && base == one {
        squash_min
    } else {
        base
    };
    if min >= ceil { just_below(ceil) } else { min }.max(Rate::from_bps(8))
}

/// The default class's guaranteed rate on a link of `cap`: a quarter of
/// `cap - 1 Mbit`, in whole Mbit rounded down as LibreQoS's bakery sends it
/// (the exact quarter on links under 5 Mbit, where that is 0).
pub fn default_class_rate(cap: Rate) -> Rate {
    let quarter = cap.saturating_sub(Rate::from_mbps(1)).bps() / 4;
    match quarter / 1_000_000 {
        0 => Rate::from_bps(quarter.max(8)),
        whole => Rate::from_mbps(whole),
    }
}

/// A circuit's class rate and ceiling for one direction under a parent
/// whose ceiling is `parent_ceil`: ceil = min(max, parent's ceil), rate =
/// min, or [`just_below`] the ceil when min reaches it.
pub(crate) fn circuit_rates(min: Rate, max: Rate, parent_ceil: Rate) -> (Rate, Rate) {
    let ceil = max.min(parent_ceil);
    let rate = if min >= ceil { just_below(ceil) } else { min };
    (rate.max(Rate::from_bps(8)), ceil.max(Rate::from_bps(8)))
}

pub(crate) fn htb_class(
    parent: TcHandle,
    classid: TcHandle,
    rate: Rate,
    ceil: Rate,
    prio: u32,
    r2q: u64,
) -> TcOp {
    TcOp::AddClass(Class::htb(
        parent,
        classid,
        rate,
        ceil,
        prio,
        quantum_for(ceil, r2q),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn r2q_and_quantum_follow_libreqos() {
        // 1 Gbit: 125e6 bytes / 60000 = 2083.3 -> 2084.
        assert_eq!(r2q_for(Rate::from_mbps(1000)), 2084);
        assert_eq!(r2q_for(Rate::from_mbps(10_000)), 20834);
        assert_eq!(r2q_for(Rate::from_mbps(4)), 10);
        assert_eq!(quantum_for(Rate::from_mbps(1000), 2084), 59980);
        assert_eq!(quantum_for(Rate::from_mbps(100), 2084), 5998);
        assert_eq!(quantum_for(Rate::from_mbps(10), 2084), QUANTUM_MIN);
        assert_eq!(
            quantum_for(Rate::from_mbps(100), 10),
            1_250_000.min(QUANTUM_MAX)
        );
    }

    #[test]
    fn just_below_is_libreqos_minus_one_mbit_or_ten_kbit() {
        assert_eq!(just_below(Rate::from_mbps(100)), Rate::from_mbps(99));
        assert_eq!(
            just_below(Rate::from_bps(1_500_000)),
            Rate::from_bps(500_000)
        );
        // 1 Mbit - 1 Mbit = 0: LibreQoS's bakery sends 10 kbit.
        assert_eq!(just_below(Rate::from_mbps(1)), MIN_RATE);
        assert_eq!(just_below(Rate::from_bps(750_000)), Rate::from_bps(740_000));
        assert_eq!(just_below(Rate::from_bps(10_000)), Rate::from_bps(5_000));
        assert_eq!(just_below(Rate::from_bps(1)), Rate::from_bps(8));
    }

    #[test]
    fn quantum_takes_whole_mbps_and_the_default_class_rate_is_floored() {
        // 300.25 Mbit counts as 300 (LibreQoS 8999 with r2q 4167).
        assert_eq!(
            quantum_for(Rate::from_mbps_str("300.25").unwrap(), 4167),
            8999
        );
        assert_eq!(
            quantum_for(Rate::from_mbps_str("0.5").unwrap(), 2084),
            QUANTUM_MIN
        );
        // (1000 - 1) / 4 = 249.75 -> 249 Mbit.
        assert_eq!(
            default_class_rate(Rate::from_mbps(1000)),
            Rate::from_mbps(249)
        );
        assert_eq!(
            default_class_rate(Rate::from_mbps(2)),
            Rate::from_bps(250_000)
        );
    }

    #[test]
    fn squashing_follows_libreqos() {
        let (d, u) = (Rate::from_mbps(99), Rate::from_mbps(19));
        assert!(!squashes(Rate::from_mbps(99), Rate::from_mbps(19), d, u));
        assert!(squashes(Rate::from_mbps(100), Rate::from_mbps(1), d, u));
        assert!(squashes(Rate::from_mbps(1), Rate::from_mbps(20), d, u));
        assert_eq!(squashed_min(19, d, u), Rate::from_mbps(1));
        assert_eq!(squashed_min(20, d, u), MIN_RATE);
    }
}
