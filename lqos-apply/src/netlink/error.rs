//! The encoder's and decoder's errors: facts about one op or one message,
//! with typed fields.

use lqos_tc::classify::{FilterKey, FilterProto};
use lqos_tc::TcHandle;

/// Why an op cannot be encoded (checked before anything is sent).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// HTB needs a non-zero rate and ceil (the kernel rejects 0).
    #[error("class {classid}: {what} is 0 bytes/s (HTB needs a rate of at least 8 bit/s)")]
    ZeroRate {
        /// The class.
        classid: TcHandle,
        /// `rate` or `ceil`.
        what: &'static str,
    },
    /// HTB priorities are 0..=7.
    #[error("class {classid}: prio {prio} is out of range 0..=7")]
    Prio {
        /// The class.
        classid: TcHandle,
        /// The bad value.
        prio: u32,
    },
    /// A qdisc kind name the kernel cannot take as `TCA_KIND`.
    #[error("qdisc {handle}: invalid kind name {name:?} (1..=15 printable characters)")]
    KindName {
        /// The qdisc.
        handle: TcHandle,
        /// The bad name.
        name: String,
    },
    /// A filter with handle 0 (the kernel would pick one, and lqos could
    /// not find the filter again).
    #[error("{key}: handle 0")]
    FilterHandleZero {
        /// The filter.
        key: FilterKey,
    },
    /// A filter whose address family differs from its protocol.
    #[error("{key}: {net} is not protocol {}", .protocol.name())]
    FilterFamily {
        /// The filter.
        key: FilterKey,
        /// Its address or prefix.
        net: ipnet::IpNet,
        /// Its protocol.
        protocol: FilterProto,
    },
    /// A message grew past the 64 KiB a netlink attribute length can hold.
    #[error("message too large for netlink ({len} bytes)")]
    TooLarge {
        /// Its length.
        len: usize,
    },
}

/// A malformed message stream (a kernel/user-space mismatch, not a user
/// error), or a request that is not one of the kinds lqos sends.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// Fewer bytes than a `struct nlmsghdr` left in the datagram.
    #[error("malformed netlink message: truncated nlmsghdr ({left} bytes)")]
    TruncatedHeader {
        /// Bytes left.
        left: usize,
    },
    /// `nlmsg_len` shorter than the header or longer than the datagram.
    #[error("malformed netlink message: bad nlmsg_len {len}")]
    BadLength {
        /// The header's length field.
        len: usize,
    },
    /// An empty buffer where a message was expected.
    #[error("malformed netlink message: no netlink message")]
    Empty,
    /// A fixed-size struct (`tcmsg`, the `NLMSG_ERROR` body, a stats
    /// block) shorter than its layout.
    #[error("malformed netlink message: {what} of {len} bytes")]
    Short {
        /// The struct (`tcmsg`, `NLMSG_ERROR payload`, `TCA_STATS_BASIC`...).
        what: &'static str,
        /// Its length in the message.
        len: usize,
    },
    /// A stats block of one class or qdisc shorter than its layout.
    #[error("malformed netlink message: {handle}: {what} of {len} bytes")]
    ShortStats {
        /// The class or qdisc.
        handle: TcHandle,
        /// The block (`TCA_STATS_BASIC`, `TCA_STATS_QUEUE`, xstats...).
        what: &'static str,
        /// Its length.
        len: usize,
    },
    /// An HTB class message without `TCA_HTB_PARMS`.
    #[error("malformed netlink message: htb class {classid} without TCA_HTB_PARMS")]
    MissingHtbParms {
        /// The class.
        classid: TcHandle,
    },
    /// An HTB qdisc message without a whole `TCA_HTB_INIT`.
    #[error("malformed netlink message: htb qdisc {handle} without TCA_HTB_INIT")]
    MissingHtbInit {
        /// The qdisc.
        handle: TcHandle,
    },
    /// A qdisc delete on the clsact hook naming another handle than `ffff:`.
    #[error("malformed netlink message: qdisc delete on the clsact hook with handle {handle}")]
    ClsactHandle {
        /// The handle the request names.
        handle: TcHandle,
    },
    /// A rate in bytes/s too large for lqos's bits/s (`tc` cannot set one:
    /// it reads rates in bits/s).
    #[error("malformed netlink message: {handle}: rate of {bytes_per_sec} bytes/s")]
    RateTooLarge {
        /// The class or qdisc.
        handle: TcHandle,
        /// The rate the message gives.
        bytes_per_sec: u64,
    },
    /// A class request of another kind than `htb`.
    #[error("malformed netlink message: class request without kind htb")]
    NotHtbClass,
    /// A filter request that is not one of lqos's egress flower filters.
    #[error(
        "malformed netlink message: filter request is not one of lqos's egress flower filters"
    )]
    NotLqosFilter,
    /// A message type that is no tc request.
    #[error("malformed netlink message: message type {ty} is not a tc request")]
    NotTcRequest {
        /// `nlmsg_type`.
        ty: u16,
    },
    /// A filter protocol other than IPv4 and IPv6.
    #[error("malformed netlink message: filter protocol {ethertype:#06x}")]
    FilterProtocol {
        /// The ethertype.
        ethertype: u16,
    },
    /// A filter delete outside the egress hook, or of handle 0.
    #[error(
        "malformed netlink message: filter delete of parent {parent} handle {handle} \
         (not an egress filter)"
    )]
    NotEgressFilter {
        /// `tcm_parent`.
        parent: TcHandle,
        /// `tcm_handle`.
        handle: u32,
    },
}
