//! rtnetlink backend: message encoding (pure), the socket, and readback.
//!
//! # Layout (as netlink-packet-route's `tc/qdiscs/*.rs`)
//!
//! - `attr` (attributes and nests, written and read) and `msg` (the
//!   `nlmsghdr` framing, `tcmsg`, ACKs, dump requests) are the base every
//!   message is built from; `error` holds [`EncodeError`] and
//!   [`DecodeError`].
//! - One module per kind, each with its encode, its decode and their
//!   golden-byte tests (tc 6.1's requests captured with strace; each test
//!   names the `tc` command): `htb` (qdisc and class), `cake`, `fq_codel`,
//!   `fifo` (pfifo/bfifo), `mq`, `clsact`, `flower` (flower + skbedit).
//! - `op` maps a [`lqos_tc::TcOp`] to its kind's message and back
//!   ([`encode_op`], [`decode_request`]); `psched` is the kernel clock HTB
//!   bursts are counted in; `stats` the counters of dumps.
//! - `pipeline` (pure) and `socket` (I/O) send op streams; dumps go through
//!   the socket.
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
//!   back into a [`lqos_tc::tree::TcTree`]; [`NetlinkSocket::class_samples`]
//!   reads every HTB class's statistics ([`ClassSample`]).
//!
//! # What a dump contains (observed on kernel 6.18, veth in a netns)
//!
//! - Before any tc op, a veth's root is `noqueue` with handle `0:` (kind
//!   [`lqos_tc::ops::QdiscKind::Other`]`("noqueue")`, parent `root`).
//! - `mq` creates one default qdisc per TX queue (`net.core.default_qdisc`,
//!   `pfifo_fast` here) with handle `0:` and parent `7fff:N`. Each one an
//!   HTB replaces disappears; queues a plan leaves unused keep theirs.
//!   Handle-0 qdiscs keep `handle == 0` and are kept apart from the
//!   explicit ones, by parent, in [`lqos_tc::tree::TcTree::kernel_defaults`].
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
//! use lqos_tc::{TcHandle, TcOp};
//! use lqos_tc::ops::{Qdisc, QdiscKind};
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

mod attr;
mod cake;
mod clsact;
mod consts;
mod error;
mod fifo;
mod flower;
mod fq_codel;
#[doc(hidden)]
pub mod fuzzing;
#[cfg(any(test, feature = "test-util"))]
#[doc(hidden)]
pub mod golden;
mod htb;
mod mq;
mod msg;
mod op;
mod pipeline;
mod psched;
mod socket;
mod stats;

pub use cake::{CakeTin, CakeXstats};
pub use error::{DecodeError, EncodeError};
pub use flower::{
    decode_filter_msg, dump_request as filter_dump_request, RTM_DELTFILTER, RTM_GETTFILTER,
    RTM_NEWTFILTER,
};
pub use fq_codel::FqCodelXstats;
pub use htb::class_dump_request;
pub use htb::HtbXstats;
pub use op::{decode_request, encode_op, encode_op_with};
pub use pipeline::{OpFailure, SendOptions, SendStats};
pub use psched::{PschedClock, PschedParseError};
pub use socket::{DumpOf, LinkInfo, NetlinkError, NetlinkSocket, Request};
pub use stats::{
    decode_class_sample_msg, decode_qdisc_sample_msg, ClassSample, Counters, LeafXstats,
    QdiscSample, TCA_STATS2, TCA_STATS_BASIC,
};
