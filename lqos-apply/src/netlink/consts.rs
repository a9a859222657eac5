//! Wire constants (uapi `linux/netlink.h`, `rtnetlink.h`, `pkt_sched.h`).
//!
//! Spelled out here rather than taken from `libc` so the encoder is
//! self-describing and identical on every target.

// nlmsghdr
pub const NLMSG_HDRLEN: usize = 16;
pub const NLMSG_ERROR: u16 = 2;
pub const NLMSG_DONE: u16 = 3;
pub const NLMSG_OVERRUN: u16 = 4;

pub const NLM_F_REQUEST: u16 = 0x01;
/// On a dump reply: the dump was interrupted by a concurrent change.
pub const NLM_F_DUMP_INTR: u16 = 0x10;
pub const NLM_F_ACK: u16 = 0x04;
pub const NLM_F_ROOT: u16 = 0x100;
pub const NLM_F_MATCH: u16 = 0x200;
pub const NLM_F_DUMP: u16 = NLM_F_ROOT | NLM_F_MATCH;
pub const NLM_F_REPLACE: u16 = 0x100;
pub const NLM_F_EXCL: u16 = 0x200;
pub const NLM_F_CREATE: u16 = 0x400;
/// On an `NLMSG_ERROR`: the echoed request is only its header.
pub const NLM_F_CAPPED: u16 = 0x100;
/// On an `NLMSG_ERROR`: extended-ACK TLVs follow the echoed request.
pub const NLM_F_ACK_TLVS: u16 = 0x200;

/// `enum nlmsgerr_attrs`: the ext-ack error/warning text.
pub const NLMSGERR_ATTR_MSG: u16 = 1;

pub const NLA_TYPE_MASK: u16 = 0x3fff;

// rtnetlink message types
pub const RTM_NEWLINK: u16 = 16;
pub const RTM_GETLINK: u16 = 18;
pub const RTM_NEWQDISC: u16 = 36;
pub const RTM_DELQDISC: u16 = 37;
pub const RTM_GETQDISC: u16 = 38;
pub const RTM_NEWTCLASS: u16 = 40;
pub const RTM_DELTCLASS: u16 = 41;
pub const RTM_GETTCLASS: u16 = 42;

/// `struct tcmsg`: family u8, 3 pad, ifindex i32, handle, parent, info.
pub const TCMSG_LEN: usize = 20;
/// `struct ifinfomsg`: family u8, pad, type u16, index i32, flags, change.
pub const IFINFOMSG_LEN: usize = 16;

// link attributes
pub const IFLA_IFNAME: u16 = 3;
pub const IFLA_MTU: u16 = 4;
pub const IFLA_NUM_TX_QUEUES: u16 = 31;

// tc attributes
pub const TCA_KIND: u16 = 1;
pub const TCA_OPTIONS: u16 = 2;

/// tc's default `mtu` for HTB classes (also added to the default burst).
pub const TC_DEFAULT_MTU: u32 = 1600;
