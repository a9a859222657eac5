//! Rate and quantum math: LibreQoS's r2q and quantum, "just below" a
//! ceiling, a circuit's rate and ceil under its parent, the HTB class op.

use lqos_model::Rate;

use crate::{Class, TcHandle, TcOp};

/// Smallest quantum lqos sends (LibreQoS's `MIN_QUANTUM`, one MTU frame).
pub const QUANTUM_MIN: u32 = 1522;

/// Largest quantum lqos sends (HTB warns "quantum is big" above this).
pub const QUANTUM_MAX: u32 = 200_000;

/// LibreQoS's target for the link's quantum when choosing r2q.
const R2Q_TARGET_QUANTUM: u64 = 60_000;

/// "Just below" `max` for a guaranteed rate that must stay under its ceil:
/// 1 Mbit below (LibreQoS), 10 kbit below small rates, half of tiny ones.
pub fn just_below(max: Rate) -> Rate {
    let b = max.bps();
    let r = if b >= 2_000_000 {
        b - 1_000_000
    } else if b > 20_000 {
        b - 10_000
    } else {
        b / 2
    };
    Rate::from_bps(r.max(8))
}

/// LibreQoS's r2q for the link: the smallest integer >= 10 such that the
/// link's quantum (bytes/s / r2q) is at most 60000.
pub fn r2q_for(link: Rate) -> u64 {
    let bytes = link.bytes_per_sec();
    bytes.div_ceil(R2Q_TARGET_QUANTUM).max(10)
}

/// LibreQoS's quantum for a class with ceiling `ceil`, clamped to
/// [`QUANTUM_MIN`]..=[`QUANTUM_MAX`].
pub fn quantum_for(ceil: Rate, r2q: u64) -> u32 {
    let q = ceil.bytes_per_sec() / r2q.max(1);
    q.clamp(u64::from(QUANTUM_MIN), u64::from(QUANTUM_MAX)) as u32
}

/// A circuit's class rate and ceiling for one direction under a parent
/// whose ceiling is `parent_ceil`.
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
    fn just_below_stays_positive() {
        assert_eq!(just_below(Rate::from_mbps(100)), Rate::from_mbps(99));
        assert_eq!(just_below(Rate::from_mbps(1)), Rate::from_bps(990_000));
        assert_eq!(just_below(Rate::from_bps(10_000)), Rate::from_bps(5_000));
        assert_eq!(just_below(Rate::from_bps(1)), Rate::from_bps(8));
    }
}
