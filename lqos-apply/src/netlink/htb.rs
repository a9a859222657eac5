//! HTB: the qdisc's `TCA_HTB_INIT` (`struct tc_htb_glob`) and the class's
//! `TCA_HTB_PARMS` (`struct tc_htb_opt`) with 64-bit rates, encoded as tc
//! sends them and decoded from requests and dumps; the class dump request;
//! the class statistics (`struct tc_htb_xstats`); their goldens.

use lqos_model::Rate;
use lqos_tc::ops::{Class, HtbClass, HtbQdisc};
use lqos_tc::TcHandle;
use serde::{Deserialize, Serialize};

use super::attr::{attr, attr_str, attr_u32, attr_u64, attrs, get_u32, get_u64, kind_and_options};
use super::attr::{nest_begin, nest_end, u32_at};
use super::consts::*;
use super::error::{DecodeError, EncodeError};
use super::msg::{dump_request_parent, tcmsg, tcmsg_hdr, Msg};
use super::psched::PschedClock;

pub(crate) const TCA_HTB_PARMS: u16 = 1;
pub(crate) const TCA_HTB_INIT: u16 = 2;
pub(crate) const TCA_HTB_DIRECT_QLEN: u16 = 5;
pub(crate) const TCA_HTB_RATE64: u16 = 6;
pub(crate) const TCA_HTB_CEIL64: u16 = 7;
/// `TC_HTB_PROTOVER`.
const HTB_VERSION: u32 = 3;
/// `sizeof(struct tc_htb_opt)`: two 12-byte ratespecs + 5 u32.
const TC_HTB_OPT_LEN: usize = 44;
/// `sizeof(struct tc_htb_glob)`.
const TC_HTB_GLOB_LEN: usize = 20;
/// `TC_LINKLAYER_ETHERNET`: the kernel then computes transmit times from the
/// rate itself and ignores rate tables.
const LINKLAYER_ETHERNET: u8 = 1;

/// The qdisc's `TCA_OPTIONS` (`tc qdisc add ... htb default N [r2q R]
/// [direct_qlen Q]`).
pub(crate) fn encode_qdisc(buf: &mut Vec<u8>, h: &HtbQdisc) -> Result<(), EncodeError> {
    let nest = nest_begin(buf, TCA_OPTIONS);
    let mut glob = [0u8; TC_HTB_GLOB_LEN];
    glob[0..4].copy_from_slice(&HTB_VERSION.to_ne_bytes());
    glob[4..8].copy_from_slice(&h.r2q.unwrap_or(10).to_ne_bytes());
    glob[8..12].copy_from_slice(&h.default_minor.to_ne_bytes());
    // debug = 0, direct_pkts = 0
    attr(buf, TCA_HTB_INIT, &glob);
    if let Some(q) = h.direct_qlen {
        attr_u32(buf, TCA_HTB_DIRECT_QLEN, q);
    }
    nest_end(buf, nest)
}

/// A kernel rate in bytes/s as lqos's bits/s; one that does not fit (no
/// `tc` command sets it) is an error, never a saturated rate.
pub(crate) fn rate_from_bytes(bytes_per_sec: u64, handle: TcHandle) -> Result<Rate, DecodeError> {
    bytes_per_sec
        .checked_mul(8)
        .map(Rate::from_bps)
        .ok_or(DecodeError::RateTooLarge {
            handle,
            bytes_per_sec,
        })
}

/// The qdisc's options back from a request or a dump. Without a whole
/// `TCA_HTB_INIT` the message is no HTB qdisc (the kernel refuses to create
/// one, and always dumps it): an error, never a qdisc made up of defaults.
pub(crate) fn decode_qdisc(opts: &[u8], handle: TcHandle) -> Result<HtbQdisc, DecodeError> {
    let mut q = HtbQdisc {
        default_minor: 0,
        r2q: None,
        direct_qlen: None,
    };
    let mut init = false;
    for (ty, v) in attrs(opts) {
        match ty {
            TCA_HTB_INIT if v.len() >= TC_HTB_GLOB_LEN => {
                q.r2q = Some(u32_at(v, 4));
                q.default_minor = u32_at(v, 8);
                init = true;
            }
            TCA_HTB_DIRECT_QLEN => q.direct_qlen = get_u32(v),
            _ => {}
        }
    }
    if !init {
        return Err(DecodeError::MissingHtbInit { handle });
    }
    Ok(q)
}

/// Appends the `RTM_NEWTCLASS` request of `tc class add|change ... htb`.
pub(crate) fn class_msg(
    buf: &mut Vec<u8>,
    c: &Class,
    flags: u16,
    ifindex: i32,
    seq: u32,
    clock: &PschedClock,
) -> Result<(), EncodeError> {
    let h = &c.htb;
    let rate = nonzero(c.classid, "rate", h.rate)?;
    let ceil = nonzero(c.classid, "ceil", h.ceil)?;
    if h.prio > 7 {
        return Err(EncodeError::Prio {
            classid: c.classid,
            prio: h.prio,
        });
    }
    let m = Msg::begin(buf, RTM_NEWTCLASS, flags, seq);
    tcmsg(m.buf, ifindex, c.classid, c.parent);
    attr_str(m.buf, TCA_KIND, "htb");
    let nest = nest_begin(m.buf, TCA_OPTIONS);
    if rate >= 1 << 32 {
        attr_u64(m.buf, TCA_HTB_RATE64, rate);
    }
    if ceil >= 1 << 32 {
        attr_u64(m.buf, TCA_HTB_CEIL64, ceil);
    }
    attr(m.buf, TCA_HTB_PARMS, &htb_opt(h, rate, ceil, clock));
    nest_end(m.buf, nest)?;
    m.finish()
}

fn nonzero(classid: TcHandle, what: &'static str, r: Rate) -> Result<u64, EncodeError> {
    match r.bytes_per_sec() {
        0 => Err(EncodeError::ZeroRate { classid, what }),
        b => Ok(b),
    }
}

/// `struct tc_htb_opt`, filled as tc does (ratespecs with tc's cell_log 3
/// for mtu 1600, cell_align -1, linklayer ethernet).
fn htb_opt(h: &HtbClass, rate: u64, ceil: u64, clock: &PschedClock) -> [u8; TC_HTB_OPT_LEN] {
    let mut o = [0u8; TC_HTB_OPT_LEN];
    ratespec(&mut o[0..12], rate);
    ratespec(&mut o[12..24], ceil);
    let burst = h.burst.unwrap_or_else(|| clock.default_burst(rate));
    let cburst = h.cburst.unwrap_or_else(|| clock.default_burst(ceil));
    o[24..28].copy_from_slice(&clock.xmit_ticks(rate, burst).to_ne_bytes());
    o[28..32].copy_from_slice(&clock.xmit_ticks(ceil, cburst).to_ne_bytes());
    o[32..36].copy_from_slice(&h.quantum.to_ne_bytes());
    // level (36..40) is output-only: 0.
    o[40..44].copy_from_slice(&h.prio.to_ne_bytes());
    o
}

/// `struct tc_ratespec { u8 cell_log; u8 linklayer; u16 overhead;
/// s16 cell_align; u16 mpu; u32 rate; }`.
fn ratespec(out: &mut [u8], bytes_per_sec: u64) {
    // tc_calc_rtable with mtu 1600: smallest cell_log with 1600 >> cell_log <= 255.
    out[0] = 3;
    out[1] = LINKLAYER_ETHERNET;
    out[2..4].copy_from_slice(&0u16.to_ne_bytes());
    out[4..6].copy_from_slice(&(-1i16).to_ne_bytes());
    out[6..8].copy_from_slice(&0u16.to_ne_bytes());
    let r32 = u32::try_from(bytes_per_sec).unwrap_or(u32::MAX);
    out[8..12].copy_from_slice(&r32.to_ne_bytes());
}

/// Decodes one `RTM_NEWTCLASS` payload. Returns `Ok(None)` for classes that
/// are not HTB classes (e.g. mq's per-queue pseudo-classes).
pub(crate) fn decode_class(
    payload: &[u8],
    clock: &PschedClock,
) -> Result<Option<(i32, Class)>, DecodeError> {
    let (h, rest) = tcmsg_hdr(payload)?;
    let (kind, opts) = kind_and_options(rest);
    if kind != "htb" {
        return Ok(None);
    }
    let mut parms: Option<&[u8]> = None;
    let (mut rate64, mut ceil64) = (None, None);
    for (ty, v) in attrs(opts) {
        match ty {
            TCA_HTB_PARMS if v.len() >= TC_HTB_OPT_LEN => parms = Some(v),
            TCA_HTB_RATE64 => rate64 = get_u64(v),
            TCA_HTB_CEIL64 => ceil64 = get_u64(v),
            _ => {}
        }
    }
    let classid = TcHandle::from_raw(h.handle);
    let p = parms.ok_or(DecodeError::MissingHtbParms { classid })?;
    let rate = rate64.unwrap_or(u64::from(u32_at(p, 8)));
    let ceil = ceil64.unwrap_or(u64::from(u32_at(p, 20)));
    // HTB reports a top class's parent as TC_H_ROOT; lqos names the qdisc.
    let parent = if h.parent == TcHandle::ROOT.raw() {
        classid.qdisc()
    } else {
        TcHandle::from_raw(h.parent)
    };
    let htb = HtbClass {
        rate: rate_from_bytes(rate, classid)?,
        ceil: rate_from_bytes(ceil, classid)?,
        burst: Some(clock.xmit_size(rate, u32_at(p, 24))),
        cburst: Some(clock.xmit_size(ceil, u32_at(p, 28))),
        quantum: u32_at(p, 32),
        prio: u32_at(p, 40),
    };
    Ok(Some((
        h.ifindex,
        Class {
            parent,
            classid,
            htb,
        },
    )))
}

/// The `RTM_GETTCLASS` dump request for the classes of qdisc `parent`
/// (`major:`) on interface `ifindex`, as `tc class show dev IF parent
/// MAJOR:` sends it. lqos reads classes back one HTB qdisc at a time: see
/// [`NetlinkSocket::dump`](super::NetlinkSocket::dump).
pub fn class_dump_request(buf: &mut Vec<u8>, ifindex: i32, parent: TcHandle, seq: u32) {
    dump_request_parent(buf, RTM_GETTCLASS, ifindex, parent, seq);
}

/// `struct tc_htb_xstats` of a class (`tc -s class show`: "lended: L
/// borrowed: B giants: G tokens: T ctokens: C").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HtbXstats {
    /// Packets this class sent with its own rate (lent to itself).
    pub lends: u32,
    /// Packets it sent with tokens borrowed from an ancestor.
    pub borrows: u32,
    /// Packets larger than the class's mtu.
    pub giants: u32,
    /// Rate tokens left, in scheduler ticks (negative: in debt).
    pub tokens: i32,
    /// Ceil tokens left, in scheduler ticks.
    pub ctokens: i32,
}

/// `sizeof(struct tc_htb_xstats)`.
const TC_HTB_XSTATS_LEN: usize = 20;

/// A class's `TCA_STATS_APP`.
pub(crate) fn decode_xstats(v: &[u8], classid: TcHandle) -> Result<HtbXstats, DecodeError> {
    if v.len() < TC_HTB_XSTATS_LEN {
        return Err(DecodeError::ShortStats {
            handle: classid,
            what: "tc_htb_xstats",
            len: v.len(),
        });
    }
    Ok(HtbXstats {
        lends: u32_at(v, 0),
        borrows: u32_at(v, 4),
        giants: u32_at(v, 8),
        tokens: u32_at(v, 12) as i32,
        ctokens: u32_at(v, 16) as i32,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netlink::op::encode_op;
    use lqos_tc::TcOp;

    #[test]
    fn zero_rate_appends_nothing() {
        let c = Class {
            parent: TcHandle::new(1, 0),
            classid: TcHandle::new(1, 1),
            htb: HtbClass {
                rate: Rate::from_bps(7),
                ceil: Rate::from_mbps(1),
                quantum: 1522,
                prio: 0,
                burst: None,
                cburst: None,
            },
        };
        let mut buf = vec![1, 2, 3];
        let e = encode_op(&TcOp::AddClass(c), 1, 1, &mut buf).unwrap_err();
        assert!(matches!(e, EncodeError::ZeroRate { what: "rate", .. }));
        assert_eq!(buf, [1, 2, 3]);
    }

    /// Found by the `netlink_request` fuzz target: an HTB qdisc whose
    /// `TCA_HTB_INIT` runs past its `TCA_OPTIONS` (so there is none) decoded
    /// as `default 0` with the kernel's r2q, and encoded back with an
    /// `r2q 10` it never had. The kernel refuses such a qdisc and never
    /// dumps one: it is a decode error.
    #[test]
    fn an_htb_qdisc_without_a_whole_tca_htb_init_is_a_decode_error() {
        let q = lqos_tc::ops::Qdisc::htb(TcHandle::new(0x7fff, 1), 1, 2);
        let mut buf = Vec::new();
        encode_op(&TcOp::AddQdisc(q), 3, 1, &mut buf).unwrap();
        let (_, good) = crate::netlink::op::decode_qdisc(&buf[16..]).unwrap();
        assert!(matches!(good.kind, lqos_tc::ops::QdiscKind::Htb(_)));
        // TCA_OPTIONS' first attribute (after nlmsghdr, tcmsg and TCA_KIND
        // "htb") is TCA_HTB_INIT: make it claim more than is there.
        let init = 16 + 20 + 8 + 4;
        assert_eq!(
            u16::from_ne_bytes([buf[init + 2], buf[init + 3]]),
            TCA_HTB_INIT
        );
        buf[init..init + 2].copy_from_slice(&0xe8u16.to_ne_bytes());
        assert_eq!(
            crate::netlink::op::decode_qdisc(&buf[16..]).unwrap_err(),
            DecodeError::MissingHtbInit {
                handle: TcHandle::new(1, 0)
            }
        );
    }

    proptest::proptest! {
        #[test]
        fn class_encode_decode(rate in 8u64..800_000_000_000, ceil in 8u64..800_000_000_000, quantum in proptest::prelude::any::<u32>(), prio in 0u32..8, minor in 1u16.., burst in proptest::option::of(1600u32..1_000_000)) {
            let c = Class {
                parent: TcHandle::new(1, 1),
                classid: TcHandle::new(1, minor),
                htb: HtbClass { rate: Rate::from_bps(rate / 8 * 8), ceil: Rate::from_bps(ceil / 8 * 8), quantum, prio, burst, cburst: None },
            };
            let mut buf = Vec::new();
            let clock = PschedClock::default();
            encode_op(&TcOp::AddClass(c.clone()), 3, 1, &mut buf).unwrap();
            let (_, back) = decode_class(&buf[16..], &clock).unwrap().unwrap();
            proptest::prop_assert_eq!(back.classid, c.classid);
            proptest::prop_assert_eq!(back.parent, c.parent);
            proptest::prop_assert_eq!(back.htb.rate, c.htb.rate);
            proptest::prop_assert_eq!(back.htb.ceil, c.htb.ceil);
            proptest::prop_assert_eq!(back.htb.quantum, quantum);
            proptest::prop_assert_eq!(back.htb.prio, prio);
            if let Some(b) = burst {
                // Lossy only by tc's whole-microsecond truncation plus one tick.
                let slack = (c.htb.rate.bytes_per_sec() * 11 / 10_000_000) as u32 + 1;
                proptest::prop_assert!(back.htb.burst.unwrap().abs_diff(b) <= slack, "{:?} vs {}", back.htb.burst, b);
            }
        }
    }
}

/// Golden bytes: `tc` 6.1's requests (captured with strace, see
/// `super::golden`), encoded exactly and, in `tests/netlink_golden.rs`'s
/// `every_capture_both_ways`, decoded back.
#[cfg(test)]
mod golden {
    use super::super::golden::*;
    use super::*;
    use lqos_tc::ops::QdiscKind;
    use lqos_tc::TcOp;

    /// tc qdisc add dev ens19 parent 7fff:1 handle 1: htb default 2
    #[test]
    fn htb_qdisc_add_default2() {
        check_exact(
            "htb_qdisc_add_default2",
            TcOp::AddQdisc(qdisc("7fff:1", "1:", htb(2))),
        );
    }

    /// tc qdisc add dev ens19 parent 7fff:2 handle 2: htb default 2 r2q 13 direct_qlen 1000
    #[test]
    fn htb_qdisc_add_r2q_qlen() {
        let kind = QdiscKind::Htb(HtbQdisc {
            default_minor: 2,
            r2q: Some(13),
            direct_qlen: Some(1000),
        });
        check_exact(
            "htb_qdisc_add_r2q_qlen",
            TcOp::AddQdisc(qdisc("7fff:2", "2:", kind)),
        );
    }

    /// tc class add dev ens19 parent 1: classid 1:1 htb rate 1gbit ceil 1gbit prio 3 quantum 60000
    #[test]
    fn htb_class_add_top() {
        check_class(
            "htb_class_add_top",
            TcOp::AddClass(class("1:", "1:1", "1000", "1000", 3, 60000)),
        );
    }

    /// tc class add dev ens19 parent 1:1 classid 1:3 htb rate 10mbit ceil 25mbit prio 3 quantum 1522
    #[test]
    fn htb_class_add_small() {
        check_class(
            "htb_class_add_small",
            TcOp::AddClass(class("1:1", "1:3", "10", "25", 3, 1522)),
        );
    }

    /// tc class add dev ens19 parent 1:1 classid 1:4 htb rate 0.7mbit ceil 2.5mbit prio 3 quantum 1522
    /// (0.7mbit: tc truncates 18285.7 us to 18285 us before converting to ticks)
    #[test]
    fn htb_class_add_fractional() {
        check_class(
            "htb_class_add_fractional",
            TcOp::AddClass(class("1:1", "1:4", "0.7", "2.5", 3, 1522)),
        );
    }

    /// tc class add dev ens19 parent 1:1 classid 1:5 htb rate 0.0028mbit ceil 0.5mbit prio 5 quantum 1522
    #[test]
    fn htb_class_add_tiny() {
        check_class(
            "htb_class_add_tiny",
            TcOp::AddClass(class("1:1", "1:5", "0.0028", "0.5", 5, 1522)),
        );
    }

    /// tc class add dev ens19 parent 1:1 classid 1:6 htb rate 100mbit ceil 200mbit burst 15000 cburst 30000 prio 3 quantum 8000
    #[test]
    fn htb_class_add_burst() {
        let mut c = class("1:1", "1:6", "100", "200", 3, 8000);
        c.htb.burst = Some(15000);
        c.htb.cburst = Some(30000);
        check_class("htb_class_add_burst", TcOp::AddClass(c));
    }

    /// tc class add dev ens19 parent 1: classid 1:7 htb rate 10gbit ceil 10gbit prio 3 quantum 60000
    /// (1.28 us truncated to 1 us = 15 ticks by tc, and by lqos alike)
    #[test]
    fn htb_class_add_10gbit() {
        check_class(
            "htb_class_add_10gbit",
            TcOp::AddClass(class("1:", "1:7", "10000", "10000", 3, 60000)),
        );
    }

    /// tc class add dev ens19 parent 1: classid 1:8 htb rate 50gbit ceil 50gbit prio 3 quantum 60000
    /// (rate64/ceil64 attributes; tc's buffer/cbuffer are 0 ticks, lqos's are not)
    #[test]
    fn htb_class_add_50gbit() {
        let g = load("htb_class_add_50gbit");
        let mut tc = strip_htb_rate_tables(&g.bytes);
        let clock = PschedClock::default();
        let bps = 50_000_000_000u64 / 8;
        let ticks = clock.xmit_ticks(bps, clock.default_burst(bps));
        assert_eq!(ticks, 4);
        set_htb_buffers(&mut tc, ticks, ticks);
        let op = TcOp::AddClass(class("1:", "1:8", "50000", "50000", 3, 60000));
        assert_same("htb_class_add_50gbit", &tc, &ours(&g, &op));
    }

    /// tc class add dev ens19 parent 1: classid 1:9 htb rate 40gbit ceil 100gbit prio 3 quantum 60000
    #[test]
    fn htb_class_add_40g_100g() {
        let g = load("htb_class_add_40g_100g");
        let mut tc = strip_htb_rate_tables(&g.bytes);
        let clock = PschedClock::default();
        let (r, c) = (40_000_000_000u64 / 8, 100_000_000_000u64 / 8);
        set_htb_buffers(
            &mut tc,
            clock.xmit_ticks(r, clock.default_burst(r)),
            clock.xmit_ticks(c, clock.default_burst(c)),
        );
        let op = TcOp::AddClass(class("1:", "1:9", "40000", "100000", 3, 60000));
        assert_same("htb_class_add_40g_100g", &tc, &ours(&g, &op));
    }

    /// tc class change dev ens19 parent 1:1 classid 1:3 htb rate 5mbit ceil 20mbit prio 3 quantum 1522
    #[test]
    fn htb_class_change() {
        check_class(
            "htb_class_change",
            TcOp::ChangeClass(class("1:1", "1:3", "5", "20", 3, 1522)),
        );
    }

    /// tc class del dev ens19 parent 1:1 classid 1:3
    #[test]
    fn htb_class_del() {
        check_exact(
            "htb_class_del",
            TcOp::DeleteClass {
                parent: h("1:1"),
                classid: h("1:3"),
            },
        );
    }

    /// tc class show dev ens19 parent 1:
    /// (lqos reads classes back one HTB qdisc at a time; see
    /// NetlinkSocket::dump.)
    #[test]
    fn htb_class_dump_parent() {
        let g = load("htb_class_dump_parent");
        let mut ours = Vec::new();
        class_dump_request(&mut ours, ifindex(&g.bytes), h("1:"), seq(&g.bytes));
        assert_eq!(ours, g.bytes, "`{}`", g.command);
    }
}
