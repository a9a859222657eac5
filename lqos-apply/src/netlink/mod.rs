//! rtnetlink backend: message encoding (pure), the socket, and readback.
//!
//! - [`encode_op`] turns one [`lqos_tc::TcOp`] into the exact request
//!   iproute2's `tc` sends for the same command (golden-byte tested), minus
//!   the 2 KiB HTB rate tables the kernel ignores for ethernet link layers,
//!   and with sane HTB bursts above ~12.8 Gbit where tc 6.1 sends 0 ticks.
//! - [`NetlinkSocket::send_ops`] sends op streams many-per-`sendmsg`,
//!   matches ACKs by sequence number and reports the first failure with the
//!   kernel's extended-ACK text ([`OpFailure`]). Batching, ACK matching,
//!   lost ACKs and mid-batch failures are decided by a pure state machine
//!   (`pipeline.rs`, unit-tested without a socket); the socket only moves
//!   bytes.
//! - [`NetlinkSocket::dump`] reads an interface's qdiscs and HTB classes
//!   back into a [`lqos_tc::TcTree`]; [`NetlinkSocket::class_stats`] reads
//!   every class's byte/packet counters in one dump ([`ClassStats`]).
//!
//! # What a dump contains (observed on kernel 6.18, veth in a netns)
//!
//! - Before any tc op, a veth's root is `noqueue` with handle `0:` (kind
//!   [`lqos_tc::QdiscKind::Other`]`("noqueue")`, parent `root`).
//! - `mq` creates one default qdisc per TX queue (`net.core.default_qdisc`,
//!   `pfifo_fast` here) with handle `0:` and parent `7fff:N`. Each one an
//!   HTB replaces disappears; queues a plan leaves unused keep theirs.
//!   Handle-0 qdiscs keep `handle == 0` and are kept apart from the
//!   explicit ones, by parent, in [`lqos_tc::TcTree::kernel_defaults`].
//! - The `pfifo` HTB attaches to every new leaf class is invisible and not
//!   dumped; an explicit leaf replaces it.
//! - Options come back complete: HTB qdiscs always report `r2q` (10 unless
//!   set) and `direct_qlen` (the device's txqueuelen, 1000), `pfifo`/`bfifo`
//!   their effective limit, classes their burst and cburst (converted from
//!   ticks, so up to ~1 µs worth of bytes smaller than sent because tc's
//!   tick formula, which lqos reproduces, truncates to whole µs: tc's
//!   default 1600 bytes read back as 1496 at 1 Gbit and 1200 at 10 Gbit).
//!   Compare with a plan modulo the fields the plan leaves `None`.
//! - `mq`'s per-queue classes (`7fff:N`) are skipped: only HTB classes are
//!   returned; a top class's parent (`TC_H_ROOT` on the wire) is its HTB
//!   qdisc (`1:`). Rates above 2^32 bytes/s come from
//!   `TCA_HTB_RATE64`/`CEIL64` and read back exactly.
//!
//! ```no_run
//! use lqos_apply::netlink::{NetlinkSocket, SendOptions};
//! use lqos_tc::{Qdisc, QdiscKind, TcHandle, TcOp};
//!
//! let mut nl = NetlinkSocket::open_in_netns("lqos-test")?;
//! let link = nl.link("ens19")?;
//! let ops = [TcOp::ReplaceQdisc(Qdisc {
//!     parent: TcHandle::ROOT,
//!     handle: TcHandle::new(0x7fff, 0),
//!     kind: QdiscKind::Mq,
//! })];
//! nl.send_ops(link.ifindex, &ops, &SendOptions::default(), &mut |_| {})?;
//! let live = nl.dump(link.ifindex)?;
//! assert!(live.qdiscs.contains_key(&TcHandle::new(0x7fff, 0)));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod consts;
mod decode;
mod encode;
mod filter;
mod pipeline;
mod socket;
mod stats;

pub use decode::DecodeError;
pub use encode::{
    class_dump_request, encode_op, encode_op_with, EncodeError, PschedClock, PschedParseError,
};
pub use filter::{
    decode_filter_msg, dump_request as filter_dump_request, RTM_DELTFILTER, RTM_GETTFILTER,
    RTM_NEWTFILTER,
};
pub use socket::{LinkInfo, NetlinkError, NetlinkSocket, OpFailure, SendOptions, SendStats};
pub use stats::{ClassStats, TCA_STATS2, TCA_STATS_BASIC};

/// Decodes one tc request (as `tc` or [`encode_op`] sends it) back into its
/// interface index and [`TcOp`](lqos_tc::TcOp): the inverse of [`encode_op_with`], used
/// to check the golden captures both ways. The verb comes from the message
/// type and flags (`NLM_F_REPLACE`: replace; `NLM_F_CREATE` on a class:
/// add, else change; a filter request is always lqos's one replace or
/// delete of an egress flower filter). HTB class bursts come back converted from ticks, as
/// in a dump (see above).
pub fn decode_request(
    msg: &[u8],
    clock: &PschedClock,
) -> Result<(i32, lqos_tc::TcOp), DecodeError> {
    use consts::*;
    use lqos_tc::{TcHandle, TcOp};
    let m = decode::msgs(msg)
        .next()
        .ok_or_else(|| DecodeError("no netlink message".into()))??;
    let hdr = |p: &[u8]| -> Result<(i32, TcHandle, TcHandle), DecodeError> {
        let word = |o: usize| p.get(o..o + 4).map(|b| [b[0], b[1], b[2], b[3]]);
        match (word(4), word(8), word(12)) {
            (Some(i), Some(h), Some(pa)) if p.len() >= TCMSG_LEN => Ok((
                i32::from_ne_bytes(i),
                TcHandle::from_raw(u32::from_ne_bytes(h)),
                TcHandle::from_raw(u32::from_ne_bytes(pa)),
            )),
            _ => Err(DecodeError(format!("tcmsg of {} bytes", p.len()))),
        }
    };
    match m.ty {
        RTM_NEWQDISC => {
            let (ifindex, q) = decode::decode_qdisc(m.payload)?;
            let op = if m.flags & NLM_F_REPLACE != 0 {
                TcOp::ReplaceQdisc(q)
            } else {
                TcOp::AddQdisc(q)
            };
            Ok((ifindex, op))
        }
        RTM_DELQDISC => {
            let (ifindex, handle, parent) = hdr(m.payload)?;
            Ok((ifindex, TcOp::delete_qdisc(parent, handle)))
        }
        RTM_NEWTCLASS => {
            let (ifindex, c) = decode::decode_class(m.payload, clock)?
                .ok_or_else(|| DecodeError("class request without kind htb".into()))?;
            let op = if m.flags & NLM_F_CREATE != 0 {
                TcOp::AddClass(c)
            } else {
                TcOp::ChangeClass(c)
            };
            Ok((ifindex, op))
        }
        RTM_DELTCLASS => {
            let (ifindex, classid, parent) = hdr(m.payload)?;
            Ok((ifindex, TcOp::DeleteClass { parent, classid }))
        }
        filter::RTM_NEWTFILTER => {
            let (ifindex, f) = filter::decode_filter(m.payload)?.ok_or_else(|| {
                DecodeError("filter request is not one of lqos's egress flower filters".into())
            })?;
            Ok((ifindex, TcOp::ReplaceFilter(f)))
        }
        filter::RTM_DELTFILTER => {
            let (ifindex, k) = filter::decode_filter_delete(m.payload)?;
            Ok((ifindex, TcOp::DeleteFilter(k)))
        }
        t => Err(DecodeError(format!("message type {t} is not a tc request"))),
    }
}
