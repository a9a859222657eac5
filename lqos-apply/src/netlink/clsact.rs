//! clsact: the classifier's hook qdisc (no options). Its delete names the
//! slot (`ffff:fff1`, handle `ffff:`) and the kind, as `tc qdisc del dev X
//! clsact` does; its goldens.

use lqos_tc::classify::CLSACT_HANDLE;
use lqos_tc::TcHandle;

use super::attr::attr_str;
use super::consts::{RTM_DELQDISC, TCA_KIND};
use super::error::EncodeError;
use super::msg::{tcmsg, Msg};

/// Appends the `RTM_DELQDISC` of `tc qdisc del dev X clsact` (`parent` is
/// [`lqos_tc::classify::CLSACT_PARENT`]).
pub(crate) fn delete_msg(
    buf: &mut Vec<u8>,
    ifindex: i32,
    parent: TcHandle,
    flags: u16,
    seq: u32,
) -> Result<(), EncodeError> {
    let m = Msg::begin(buf, RTM_DELQDISC, flags, seq);
    tcmsg(m.buf, ifindex, CLSACT_HANDLE, parent);
    attr_str(m.buf, TCA_KIND, "clsact");
    m.finish()
}

/// Golden bytes: `tc` 6.1's requests (captured with strace by
/// `capture_filters.sh`, see `super::golden`).
#[cfg(test)]
mod golden {
    use super::super::golden::*;
    use lqos_tc::classify;
    use lqos_tc::TcOp;

    #[test]
    fn clsact_replace() {
        // tc qdisc replace dev ens19 clsact
        check_exact(
            "clsact_replace",
            TcOp::ReplaceQdisc(lqos_tc::ops::Qdisc::clsact()),
        );
    }

    #[test]
    fn clsact_del() {
        // tc qdisc del dev ens19 clsact
        check_exact(
            "clsact_del",
            TcOp::DeleteQdisc {
                parent: classify::CLSACT_PARENT,
                handle: classify::CLSACT_HANDLE,
            },
        );
    }
}
