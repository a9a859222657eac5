//! pfifo and bfifo: `TCA_OPTIONS` holds a raw `struct tc_fifo_qopt { u32
//! limit; }`, not nested attributes; their goldens.

use super::attr::{attr_u32, get_u32};
use super::consts::TCA_OPTIONS;

/// Appends the options of `pfifo|bfifo [limit N]` (nothing without a limit).
pub(crate) fn encode(buf: &mut Vec<u8>, limit: Option<u32>) {
    if let Some(l) = limit {
        attr_u32(buf, TCA_OPTIONS, l);
    }
}

/// The limit back from `TCA_OPTIONS` (dumps always carry it).
pub(crate) fn decode(opts: &[u8]) -> Option<u32> {
    get_u32(opts)
}

/// Golden bytes: `tc` 6.1's requests (captured with strace, see
/// `super::golden`).
#[cfg(test)]
mod golden {
    use super::super::golden::*;
    use lqos_tc::ops::QdiscKind;
    use lqos_tc::TcOp;

    /// tc qdisc add dev ens19 parent 1:3 handle 3: pfifo
    #[test]
    fn pfifo_default() {
        check_exact(
            "pfifo_default",
            TcOp::AddQdisc(qdisc("1:3", "3:", QdiscKind::Pfifo { limit: None })),
        );
    }

    /// tc qdisc add dev ens19 parent 1:3 handle 3: pfifo limit 100
    #[test]
    fn pfifo_limit() {
        check_exact(
            "pfifo_limit",
            TcOp::AddQdisc(qdisc("1:3", "3:", QdiscKind::Pfifo { limit: Some(100) })),
        );
    }

    /// tc qdisc replace dev ens19 parent 1:3 handle 3: pfifo limit 50
    #[test]
    fn pfifo_replace_limit() {
        check_exact(
            "pfifo_replace_limit",
            TcOp::ReplaceQdisc(qdisc("1:3", "3:", QdiscKind::Pfifo { limit: Some(50) })),
        );
    }

    /// tc qdisc add dev ens19 parent 1:3 handle 3: bfifo limit 30000
    #[test]
    fn bfifo_limit() {
        check_exact(
            "bfifo_limit",
            TcOp::AddQdisc(qdisc("1:3", "3:", QdiscKind::Bfifo { limit: Some(30000) })),
        );
    }
}
