//! Fuzz entry points for the decoders of kernel replies and requests
//! (used by `crate::fuzzing`): any bytes in, no panic out.

use lqos_tc::tree::TcTree;
use lqos_tc::TcOp;

use super::consts::NLMSG_ERROR;
use super::{flower, htb, msg, op, stats, PschedClock};

/// Every message of `data` (a reply buffer as `recv` returns it) through
/// every dump decoder (qdisc, HTB class, class statistics, flower filter)
/// and, for `NLMSG_ERROR`, the ACK parser; what decodes goes into a tree
/// as the dump does.
pub fn dump(data: &[u8]) {
    let clock = PschedClock::default();
    let mut tree = TcTree::default();
    for m in msg::msgs(data) {
        let Ok(m) = m else { break };
        if m.ty == NLMSG_ERROR {
            let _ = msg::parse_ack(&m);
        }
        if let Ok((_, q)) = op::decode_qdisc_dump(m.payload) {
            tree.insert_qdisc(q);
        }
        if let Ok(Some((_, c))) = htb::decode_class(m.payload, &clock) {
            tree.classes.insert(c.classid, c);
        }
        if let Ok(Some((_, s))) = stats::decode_class_sample(m.payload) {
            let _ = s.counters.bytes;
        }
        if let Ok(Some((_, f))) = flower::decode_filter(m.payload) {
            tree.filters.insert(f.key, f);
        }
    }
    let _ = tree.root();
}

/// One request (as `tc` or lqos sends it) through [`op::decode_request`];
/// an op that decodes and encodes again decodes to the same op, except for
/// HTB bursts: they travel as scheduler ticks, and bytes -> ticks -> bytes
/// is not exact (a 1368-byte burst at 1 Gbit comes back as 1496).
pub fn request(data: &[u8]) {
    let clock = PschedClock::default();
    let Ok((ifindex, first)) = op::decode_request(data, &clock) else {
        return;
    };
    let mut buf = Vec::new();
    if op::encode_op_with(&first, ifindex, 1, &clock, &mut buf).is_ok() {
        let again = op::decode_request(&buf, &clock).map(|(_, o)| without_bursts(o));
        assert_eq!(again, Ok(without_bursts(first)), "encoded as {buf:02x?}");
    }
}

/// `op` with its HTB class bursts cleared.
fn without_bursts(mut op: TcOp) -> TcOp {
    if let TcOp::AddClass(c) | TcOp::ChangeClass(c) = &mut op {
        c.htb.burst = None;
        c.htb.cburst = None;
    }
    op
}
