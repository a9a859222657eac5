//! rtnetlink backend: message encoding (pure), the socket, and readback.
//!
//! - [`encode_op`] turns one [`lqos_tc::TcOp`] into the exact request
//!   iproute2's `tc` sends for the same command (golden-byte tested), minus
//!   the 2 KiB HTB rate tables the kernel ignores for ethernet link layers,
//!   and with sane HTB bursts above ~12.8 Gbit where tc 6.1 sends 0 ticks.
//! - [`NetlinkSocket::send_ops`] sends op streams many-per-`sendmsg`,
//!   matches ACKs by sequence number and reports the first failure with the
//!   kernel's extended-ACK text ([`OpFailure`]).
//! - [`NetlinkSocket::dump`] reads an interface's qdiscs and HTB classes
//!   back into a [`lqos_tc::TcTree`].
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
mod socket;

pub use decode::{qdisc_tree_key, DecodeError};
pub use encode::{encode_op, encode_op_with, EncodeError, PschedClock, PschedParseError};
pub use socket::{LinkInfo, NetlinkError, NetlinkSocket, OpFailure, SendOptions, SendStats};
