//! mq: the multiqueue root (no options: `TCA_KIND "mq"` alone; the kernel
//! creates one class per TX queue, `7fff:N`, which readback skips); its
//! goldens.

/// Golden bytes: `tc` 6.1's requests (captured with strace, see
/// `super::golden`).
#[cfg(test)]
mod golden {
    use super::super::golden::*;
    use lqos_tc::ops::QdiscKind;
    use lqos_tc::TcOp;

    /// tc qdisc replace dev ens19 root handle 7fff: mq
    #[test]
    fn mq_replace_root() {
        check_exact(
            "mq_replace_root",
            TcOp::ReplaceQdisc(qdisc("root", "7fff:", QdiscKind::Mq)),
        );
    }

    /// tc qdisc add dev ens19 root handle 7fff: mq
    #[test]
    fn mq_add_root() {
        check_exact(
            "mq_add_root",
            TcOp::AddQdisc(qdisc("root", "7fff:", QdiscKind::Mq)),
        );
    }
}
