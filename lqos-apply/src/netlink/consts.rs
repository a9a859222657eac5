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

pub const TCA_HTB_PARMS: u16 = 1;
pub const TCA_HTB_INIT: u16 = 2;
pub const TCA_HTB_DIRECT_QLEN: u16 = 5;
pub const TCA_HTB_RATE64: u16 = 6;
pub const TCA_HTB_CEIL64: u16 = 7;
/// `TC_HTB_PROTOVER`.
pub const HTB_VERSION: u32 = 3;
/// `sizeof(struct tc_htb_opt)`: two 12-byte ratespecs + 5 u32.
pub const TC_HTB_OPT_LEN: usize = 44;
/// `sizeof(struct tc_htb_glob)`.
pub const TC_HTB_GLOB_LEN: usize = 20;

pub const TCA_CAKE_BASE_RATE64: u16 = 2;
pub const TCA_CAKE_DIFFSERV_MODE: u16 = 3;
pub const TCA_CAKE_FLOW_MODE: u16 = 5;
pub const TCA_CAKE_RTT: u16 = 7;
pub const TCA_CAKE_TARGET: u16 = 8;
pub const TCA_CAKE_AUTORATE: u16 = 9;
pub const TCA_CAKE_MEMORY: u16 = 10;
pub const TCA_CAKE_NAT: u16 = 11;
pub const TCA_CAKE_WASH: u16 = 13;
pub const TCA_CAKE_ACK_FILTER: u16 = 16;
pub const TCA_CAKE_SPLIT_GSO: u16 = 17;

pub const TCA_FQ_CODEL_TARGET: u16 = 1;
pub const TCA_FQ_CODEL_LIMIT: u16 = 2;
pub const TCA_FQ_CODEL_INTERVAL: u16 = 3;
pub const TCA_FQ_CODEL_ECN: u16 = 4;
pub const TCA_FQ_CODEL_FLOWS: u16 = 5;
pub const TCA_FQ_CODEL_QUANTUM: u16 = 6;
pub const TCA_FQ_CODEL_MEMORY_LIMIT: u16 = 9;

/// `TC_LINKLAYER_ETHERNET`: the kernel then computes transmit times from the
/// rate itself and ignores rate tables.
pub const LINKLAYER_ETHERNET: u8 = 1;
/// tc's default `mtu` for HTB classes (also added to the default burst).
pub const TC_DEFAULT_MTU: u32 = 1600;
