//! flower + skbedit, the classifier on the wire: `flower` filters with one `skbedit` action
//! (`RTM_NEWTFILTER` / `RTM_DELTFILTER` / `RTM_GETTFILTER`), byte-compatible
//! with what iproute2 6.1's `tc filter replace ... flower ... action skbedit`
//! sends (golden-tested), and the decoding of the kernel's filter dump.
//!
//! Layout tc sends for `tc filter replace dev X egress pref P handle H
//! protocol ip flower dst_ip A/L action skbedit queue_mapping Q priority M:m`:
//! `tcmsg { handle H, parent ffff:fff3, info P << 16 | htons(ETH_P_IP) }`,
//! `TCA_KIND "flower"`, `TCA_OPTIONS { KEY_IPV4_DST, KEY_IPV4_DST_MASK,
//! ACT { 1 { ACT_KIND "skbedit", ACT_OPTIONS(nested flag) { SKBEDIT_PARMS
//! (tc_gen, action = TC_ACT_PIPE), SKBEDIT_QUEUE_MAPPING u16,
//! SKBEDIT_PRIORITY u32 } } }, FLAGS 0, KEY_ETH_TYPE }`. Flags are
//! `REQUEST|ACK|CREATE` (a filter replace is "create, or change in place";
//! `add` would add `EXCL`). Addresses and the ethertype are big-endian.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;
use lqos_tc::classify::{self, PREF_MAX, PREF_MIN};
use lqos_tc::classify::{FilterKey, FilterProto, FlowerFilter, MatchSide};
use lqos_tc::TcHandle;

use super::attr::{attr, attr_str, attrs, cstr, kind_and_options, nest_begin, nest_end, u32_at};
use super::consts::*;
use super::error::{DecodeError, EncodeError};
use super::msg::{first_msg, tcmsg_hdr, tcmsg_info, Msg};

/// `RTM_NEWTFILTER`.
pub const RTM_NEWTFILTER: u16 = 44;
/// `RTM_DELTFILTER`.
pub const RTM_DELTFILTER: u16 = 45;
/// `RTM_GETTFILTER`.
pub const RTM_GETTFILTER: u16 = 46;

// enum TCA_FLOWER_* (uapi pkt_cls.h)
const TCA_FLOWER_ACT: u16 = 3;
const TCA_FLOWER_KEY_ETH_TYPE: u16 = 8;
const TCA_FLOWER_KEY_IPV4_SRC: u16 = 10;
const TCA_FLOWER_KEY_IPV4_SRC_MASK: u16 = 11;
const TCA_FLOWER_KEY_IPV4_DST: u16 = 12;
const TCA_FLOWER_KEY_IPV4_DST_MASK: u16 = 13;
const TCA_FLOWER_KEY_IPV6_SRC: u16 = 14;
const TCA_FLOWER_KEY_IPV6_SRC_MASK: u16 = 15;
const TCA_FLOWER_KEY_IPV6_DST: u16 = 16;
const TCA_FLOWER_KEY_IPV6_DST_MASK: u16 = 17;
const TCA_FLOWER_FLAGS: u16 = 22;
// enum TCA_ACT_* (uapi act_api / pkt_cls.h)
const TCA_ACT_KIND: u16 = 1;
const TCA_ACT_OPTIONS: u16 = 2;
/// `NLA_F_NESTED`, which tc sets on `TCA_ACT_OPTIONS` only.
const NLA_F_NESTED: u16 = 0x8000;
// enum TCA_SKBEDIT_* (uapi tc_act/tc_skbedit.h)
const TCA_SKBEDIT_PARMS: u16 = 2;
const TCA_SKBEDIT_PRIORITY: u16 = 3;
const TCA_SKBEDIT_QUEUE_MAPPING: u16 = 4;
/// `sizeof(struct tc_skbedit)` = `tc_gen`: index, capab, action, refcnt,
/// bindcnt.
const TC_SKBEDIT_LEN: usize = 20;
/// `TC_ACT_PIPE`: tc's default control for skbedit.
const TC_ACT_PIPE: i32 = 3;

const REPLACE_FILTER: u16 = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE;
const DELETE_FILTER: u16 = NLM_F_REQUEST | NLM_F_ACK;

/// `tcm_info` of a filter: preference in the high half, the protocol in
/// network byte order in the low half.
fn tcm_info(k: &FilterKey) -> u32 {
    let proto = u16::from_ne_bytes(k.protocol.ethertype().to_be_bytes());
    (u32::from(k.pref) << 16) | u32::from(proto)
}

fn filter_tcmsg(buf: &mut Vec<u8>, ifindex: i32, k: &FilterKey) {
    tcmsg_info(buf, ifindex, k.handle, classify::EGRESS, tcm_info(k));
}

/// `TCA_FLOWER_FLAGS 0` and `TCA_FLOWER_KEY_ETH_TYPE`, which tc appends to
/// every flower message (the delete too).
fn flags_and_eth_type(buf: &mut Vec<u8>, p: FilterProto) {
    attr(buf, TCA_FLOWER_FLAGS, &0u32.to_ne_bytes());
    attr(buf, TCA_FLOWER_KEY_ETH_TYPE, &p.ethertype().to_be_bytes());
}

fn key_attrs(side: MatchSide, net: &IpNet) -> (u16, u16) {
    match (net, side) {
        (IpNet::V4(_), MatchSide::Src) => (TCA_FLOWER_KEY_IPV4_SRC, TCA_FLOWER_KEY_IPV4_SRC_MASK),
        (IpNet::V4(_), MatchSide::Dst) => (TCA_FLOWER_KEY_IPV4_DST, TCA_FLOWER_KEY_IPV4_DST_MASK),
        (IpNet::V6(_), MatchSide::Src) => (TCA_FLOWER_KEY_IPV6_SRC, TCA_FLOWER_KEY_IPV6_SRC_MASK),
        (IpNet::V6(_), MatchSide::Dst) => (TCA_FLOWER_KEY_IPV6_DST, TCA_FLOWER_KEY_IPV6_DST_MASK),
    }
}

fn addr_bytes(a: IpAddr) -> Vec<u8> {
    match a {
        IpAddr::V4(v) => v.octets().to_vec(),
        IpAddr::V6(v) => v.octets().to_vec(),
    }
}

/// Appends the `RTM_NEWTFILTER` request for `tc filter replace ...`.
pub(crate) fn replace_msg(
    buf: &mut Vec<u8>,
    f: &FlowerFilter,
    ifindex: i32,
    seq: u32,
) -> Result<(), EncodeError> {
    if f.key.handle == 0 {
        return Err(EncodeError::FilterHandleZero { key: f.key });
    }
    if FilterProto::of(&f.net) != f.key.protocol {
        return Err(EncodeError::FilterFamily {
            key: f.key,
            net: f.net,
            protocol: f.key.protocol,
        });
    }
    let m = Msg::begin(buf, RTM_NEWTFILTER, REPLACE_FILTER, seq);
    filter_tcmsg(m.buf, ifindex, &f.key);
    attr_str(m.buf, TCA_KIND, "flower");
    let opts = nest_begin(m.buf, TCA_OPTIONS);
    let net = f.net.trunc();
    let (key, mask) = key_attrs(f.side, &net);
    attr(m.buf, key, &addr_bytes(net.network()));
    attr(m.buf, mask, &addr_bytes(net.netmask()));
    let act = nest_begin(m.buf, TCA_FLOWER_ACT);
    let first = nest_begin(m.buf, 1);
    attr_str(m.buf, TCA_ACT_KIND, "skbedit");
    let aopts = nest_begin(m.buf, TCA_ACT_OPTIONS | NLA_F_NESTED);
    let mut parms = [0u8; TC_SKBEDIT_LEN];
    parms[8..12].copy_from_slice(&TC_ACT_PIPE.to_ne_bytes());
    attr(m.buf, TCA_SKBEDIT_PARMS, &parms);
    attr(
        m.buf,
        TCA_SKBEDIT_QUEUE_MAPPING,
        &f.queue_mapping.to_ne_bytes(),
    );
    attr(m.buf, TCA_SKBEDIT_PRIORITY, &f.priority.raw().to_ne_bytes());
    nest_end(m.buf, aopts)?;
    nest_end(m.buf, first)?;
    nest_end(m.buf, act)?;
    flags_and_eth_type(m.buf, f.key.protocol);
    nest_end(m.buf, opts)?;
    m.finish()
}

/// Appends the `RTM_DELTFILTER` request for `tc filter del ... flower`.
pub(crate) fn delete_msg(
    buf: &mut Vec<u8>,
    k: &FilterKey,
    ifindex: i32,
    seq: u32,
) -> Result<(), EncodeError> {
    let m = Msg::begin(buf, RTM_DELTFILTER, DELETE_FILTER, seq);
    filter_tcmsg(m.buf, ifindex, k);
    attr_str(m.buf, TCA_KIND, "flower");
    let opts = nest_begin(m.buf, TCA_OPTIONS);
    flags_and_eth_type(m.buf, k.protocol);
    nest_end(m.buf, opts)?;
    m.finish()
}

/// Appends the `RTM_GETTFILTER` dump request of the egress hook
/// (`tc filter show dev X egress`).
pub fn dump_request(buf: &mut Vec<u8>, ifindex: i32, seq: u32) {
    let m = Msg::begin(buf, RTM_GETTFILTER, NLM_F_REQUEST | NLM_F_DUMP, seq);
    tcmsg_info(m.buf, ifindex, 0, classify::EGRESS, 0);
    m.finish().expect("dump request is small");
}

/// Decodes one whole netlink message (header included) of a filter dump:
/// `Ok(None)` for anything that is not one of lqos's egress flower filters
/// (the header message of a preference, other hooks, kinds, preferences
/// or protocols); a flower filter in lqos's range that lqos would not have
/// written decodes as one that never satisfies a plan.
///
/// ```
/// use lqos_apply::netlink::{decode_filter_msg, encode_op};
/// use lqos_tc::classify::{FlowerFilter, MatchSide};
/// use lqos_tc::{TcHandle, TcOp};
/// let f = FlowerFilter::steer(MatchSide::Dst, "100.64.0.0/24".parse().unwrap(), 7, 3,
///     TcHandle::new(4, 0x1a));
/// let mut buf = Vec::new();
/// encode_op(&TcOp::ReplaceFilter(f.clone()), 3, 1, &mut buf).unwrap();
/// assert_eq!(decode_filter_msg(&buf).unwrap(), Some((3, f)));
/// ```
pub fn decode_filter_msg(msg: &[u8]) -> Result<Option<(i32, FlowerFilter)>, DecodeError> {
    let m = first_msg(msg)?;
    if m.ty != RTM_NEWTFILTER {
        return Ok(None);
    }
    decode_filter(m.payload)
}

/// The key of an `RTM_DELTFILTER` request (`tc filter del dev X egress
/// pref P handle H protocol ip flower`): interface index and
/// [`FilterKey`]. Errors for anything that is not a delete of one of
/// lqos's egress filters.
pub(crate) fn decode_filter_delete(payload: &[u8]) -> Result<(i32, FilterKey), DecodeError> {
    let (h, _) = tcmsg_hdr(payload)?;
    let pref = (h.info >> 16) as u16;
    let ethertype = u16::from_be_bytes((h.info as u16).to_ne_bytes());
    let protocol =
        FilterProto::from_ethertype(ethertype).ok_or(DecodeError::FilterProtocol { ethertype })?;
    if h.parent != classify::EGRESS.raw() || h.handle == 0 {
        return Err(DecodeError::NotEgressFilter {
            parent: TcHandle::from_raw(h.parent),
            handle: h.handle,
        });
    }
    Ok((
        h.ifindex,
        FilterKey {
            pref,
            protocol,
            handle: h.handle,
        },
    ))
}

/// The prefix length of a contiguous netmask, `None` if it has holes.
fn mask_len(mask: &[u8]) -> Option<u8> {
    let ones: u32 = mask.iter().map(|b| b.count_ones()).sum();
    let full = ones as usize / 8;
    let contiguous = mask.iter().enumerate().all(|(i, &b)| match i.cmp(&full) {
        std::cmp::Ordering::Less => b == 0xff,
        std::cmp::Ordering::Equal => b == (0xffu16 << (8 - ones % 8)) as u8,
        std::cmp::Ordering::Greater => b == 0,
    });
    contiguous.then_some(ones as u8)
}

fn to_addr(b: &[u8]) -> Option<IpAddr> {
    match b.len() {
        4 => Some(IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(b).ok()?))),
        16 => Some(IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(b).ok()?))),
        _ => None,
    }
}

/// Decodes one `RTM_NEWTFILTER` payload of an egress dump into its
/// interface and filter. `None` for what is not one of lqos's filters: the
/// per-preference header message the kernel sends before a preference's
/// filters (handle 0), other hooks, other kinds (e.g. LibreQoS's `bpf`),
/// preferences outside lqos's range, other protocols. A flower filter in
/// lqos's range decodes leniently: what lqos would not have written (no
/// address key, a netmask with holes, no skbedit action) is left as the
/// family's `/0`, queue 0 and priority `none` (`0:`), which never satisfy
/// a plan, so the filter shows as drift and is replaced. The kernel dumps
/// the key as it was sent and matches on key & mask, so address bits past
/// the prefix length are cleared: the filter reads as the prefix it matches.
pub(crate) fn decode_filter(payload: &[u8]) -> Result<Option<(i32, FlowerFilter)>, DecodeError> {
    let (h, rest) = tcmsg_hdr(payload)?;
    let pref = (h.info >> 16) as u16;
    let proto = FilterProto::from_ethertype(u16::from_be_bytes((h.info as u16).to_ne_bytes()));
    let Some(protocol) = proto else {
        return Ok(None);
    };
    if h.handle == 0 || h.parent != classify::EGRESS.raw() || !(PREF_MIN..=PREF_MAX).contains(&pref)
    {
        return Ok(None);
    }
    let (kind, opts) = kind_and_options(rest);
    if kind != "flower" {
        return Ok(None);
    }
    let (mut side, mut addr, mut mask) = (MatchSide::Dst, None, None);
    let (mut queue, mut prio) = (0u16, TcHandle::UNSPEC);
    for (ty, v) in attrs(opts) {
        match ty {
            TCA_FLOWER_KEY_IPV4_DST | TCA_FLOWER_KEY_IPV6_DST => {
                side = MatchSide::Dst;
                addr = to_addr(v);
            }
            TCA_FLOWER_KEY_IPV4_SRC | TCA_FLOWER_KEY_IPV6_SRC => {
                side = MatchSide::Src;
                addr = to_addr(v);
            }
            TCA_FLOWER_KEY_IPV4_DST_MASK
            | TCA_FLOWER_KEY_IPV6_DST_MASK
            | TCA_FLOWER_KEY_IPV4_SRC_MASK
            | TCA_FLOWER_KEY_IPV6_SRC_MASK => mask = mask_len(v),
            TCA_FLOWER_ACT => {
                if let Some((q, p)) = decode_skbedit(v) {
                    (queue, prio) = (q, p);
                }
            }
            _ => {}
        }
    }
    let any = match protocol {
        FilterProto::Ip => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        FilterProto::Ipv6 => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    };
    let net = match (addr, mask) {
        (Some(a), Some(l)) if a.is_ipv6() == any.is_ipv6() => {
            IpNet::new(a, l).ok().map(|n| n.trunc())
        }
        (Some(a), None) if a.is_ipv6() == any.is_ipv6() => Some(IpNet::from(a)),
        _ => None,
    }
    .unwrap_or_else(|| IpNet::new(any, 0).expect("/0"));
    Ok(Some((
        h.ifindex,
        FlowerFilter {
            key: FilterKey {
                pref,
                protocol,
                handle: h.handle,
            },
            side,
            net,
            queue_mapping: queue,
            priority: prio,
        },
    )))
}

/// `queue_mapping` and `priority` of the first action if it is skbedit
/// with both set.
fn decode_skbedit(acts: &[u8]) -> Option<(u16, TcHandle)> {
    let (_, first) = attrs(acts).next()?;
    let mut kind = "";
    let mut opts: &[u8] = &[];
    for (ty, v) in attrs(first) {
        match ty {
            TCA_ACT_KIND => kind = cstr(v),
            TCA_ACT_OPTIONS => opts = v,
            _ => {}
        }
    }
    if kind != "skbedit" {
        return None;
    }
    let (mut q, mut p) = (None, None);
    for (ty, v) in attrs(opts) {
        match ty {
            TCA_SKBEDIT_QUEUE_MAPPING if v.len() >= 2 => q = Some(u16::from_ne_bytes([v[0], v[1]])),
            TCA_SKBEDIT_PRIORITY if v.len() >= 4 => p = Some(TcHandle::from_raw(u32_at(v, 0))),
            _ => {}
        }
    }
    Some((q?, p?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn masks() {
        assert_eq!(mask_len(&[255, 255, 255, 0]), Some(24));
        assert_eq!(mask_len(&[255, 255, 255, 255]), Some(32));
        assert_eq!(mask_len(&[0, 0, 0, 0]), Some(0));
        assert_eq!(mask_len(&[255, 0xfe, 0, 0]), Some(15));
        assert_eq!(mask_len(&[255, 0, 255, 0]), None);
        assert_eq!(mask_len(&[0xf0, 0x0f, 0, 0]), None);
    }

    fn any_filter() -> impl Strategy<Value = FlowerFilter> {
        let v4 = (any::<u32>(), 0u8..=32)
            .prop_map(|(a, l)| IpNet::new(Ipv4Addr::from(a).into(), l).unwrap().trunc());
        let v6 = (any::<u128>(), 0u8..=128)
            .prop_map(|(a, l)| IpNet::new(Ipv6Addr::from(a).into(), l).unwrap().trunc());
        (
            prop_oneof![v4, v6],
            any::<bool>(),
            1u32..,
            any::<u16>(),
            1u16..,
            any::<u16>(),
        )
            .prop_map(|(net, dst, handle, q, maj, min)| {
                let side = if dst { MatchSide::Dst } else { MatchSide::Src };
                FlowerFilter::steer(side, net, handle, q, TcHandle::new(maj, min))
            })
    }

    proptest! {
        #[test]
        fn filter_encode_decode(f in any_filter(), ifindex in 1i32..) {
            let mut buf = Vec::new();
            replace_msg(&mut buf, &f, ifindex, 7).unwrap();
            let m = super::super::msg::first_msg(&buf).unwrap();
            prop_assert_eq!(m.ty, RTM_NEWTFILTER);
            prop_assert_eq!(decode_filter(m.payload).unwrap(), Some((ifindex, f)));
        }

        #[test]
        fn truncated_filters_never_panic(f in any_filter(), cut in 0usize..200) {
            let mut buf = Vec::new();
            replace_msg(&mut buf, &f, 3, 7).unwrap();
            let cut = cut.min(buf.len() - 16);
            let _ = decode_filter(&buf[16..16 + cut]);
        }
    }

    /// Found by the `netlink_request` fuzz target: a flower key with address
    /// bits past its prefix (`2001:db8:1::f6ff:0:0` with a /48 mask, as
    /// `tc` sends for `src_ip 2001:db8:1::f6ff:0:0/48` and the kernel dumps
    /// back) decoded with those bits kept, so it never equalled the planned
    /// `2001:db8:1::/48` it matches and showed as drift forever.
    #[test]
    fn flower_key_with_host_bits_past_the_prefix_decodes_as_its_prefix() {
        let planned = FlowerFilter::steer(
            MatchSide::Src,
            "2001:db8:1::/48".parse().unwrap(),
            9,
            15,
            TcHandle::new(0x10, 3),
        );
        let mut buf = Vec::new();
        replace_msg(&mut buf, &planned, 3, 7).unwrap();
        let key = 16 + 20 + 12 + 4 + 4; // nlmsghdr, tcmsg, TCA_KIND "flower", TCA_OPTIONS, key header
        assert_eq!(
            u16::from_ne_bytes([buf[key - 2], buf[key - 1]]),
            TCA_FLOWER_KEY_IPV6_SRC
        );
        buf[key + 10..key + 12].copy_from_slice(&[0xf6, 0xff]);
        let sent: IpAddr = "2001:db8:1::f6ff:0:0".parse().unwrap();
        assert_eq!(to_addr(&buf[key..key + 16]), Some(sent));
        assert_eq!(decode_filter(&buf[16..]).unwrap(), Some((3, planned)));
    }

    #[test]
    fn foreign_filters_are_skipped() {
        let f = FlowerFilter::steer(
            MatchSide::Dst,
            "10.0.0.0/8".parse().unwrap(),
            5,
            1,
            TcHandle::new(2, 3),
        );
        let mut buf = Vec::new();
        replace_msg(&mut buf, &f, 3, 1).unwrap();
        // Pref outside lqos's range (LibreQoS's bpf filter uses 49152).
        let mut other = buf.clone();
        other[16 + 16 + 2..16 + 16 + 4].copy_from_slice(&49152u16.to_ne_bytes());
        assert_eq!(decode_filter(&other[16..]).unwrap(), None);
        // The per-preference header (handle 0).
        let mut hdr = buf.clone();
        hdr[16 + 8..16 + 12].copy_from_slice(&0u32.to_ne_bytes());
        assert_eq!(decode_filter(&hdr[16..]).unwrap(), None);
    }
}

/// Golden bytes: `tc` 6.1's requests (captured with strace by
/// `capture_filters.sh`; this host's kernel rejects flower, strace records
/// the request anyway; see `super::golden`). The other direction: tc's
/// replace messages decode back into the same filter (a dump reply has the
/// same layout plus attributes lqos ignores, checked by appending some).
#[cfg(test)]
mod golden {
    use super::super::golden::{check_exact, ifindex, load, seq, Golden};
    use super::*;
    use lqos_tc::TcOp;

    fn check(name: &str, op: &TcOp) -> Golden {
        check_exact(name, op.clone())
    }

    /// Encodes exactly like tc, and tc's bytes decode back into the filter.
    fn check_filter(name: &str, f: FlowerFilter) {
        let g = check(name, &TcOp::ReplaceFilter(f.clone()));
        assert_eq!(
            decode_filter_msg(&g.bytes).unwrap(),
            Some((ifindex(&g.bytes), f)),
            "{name}: decoding `{}`",
            g.command
        );
    }

    fn steer(side: MatchSide, net: &str, handle: u32, q: u16, prio: &str) -> FlowerFilter {
        FlowerFilter::steer(side, net.parse().unwrap(), handle, q, prio.parse().unwrap())
    }

    #[test]
    fn flower_v4_dst_prefix() {
        // tc filter replace dev ens19 egress pref 1008 handle 7 protocol ip flower
        //   dst_ip 100.64.0.0/24 action skbedit queue_mapping 3 priority 4:1a
        let f = steer(MatchSide::Dst, "100.64.0.0/24", 7, 3, "4:1a");
        assert_eq!(f.key.pref, 1008);
        check_filter("flower_v4_dst_prefix", f);
    }

    #[test]
    fn flower_v4_dst_host() {
        // tc filter replace dev ens19 egress pref 1000 handle 8 protocol ip flower
        //   dst_ip 100.64.0.5/32 action skbedit queue_mapping 0 priority 1:3
        check_filter(
            "flower_v4_dst_host",
            steer(MatchSide::Dst, "100.64.0.5/32", 8, 0, "1:3"),
        );
    }

    #[test]
    fn flower_v4_src_host() {
        // tc filter replace dev ens19 egress pref 1100 handle 8 protocol ip flower
        //   src_ip 100.64.0.5/32 action skbedit queue_mapping 15 priority 10:ffff
        check_filter(
            "flower_v4_src_host",
            steer(MatchSide::Src, "100.64.0.5/32", 8, 15, "10:ffff"),
        );
    }

    #[test]
    fn flower_v6_src_prefix() {
        // tc filter replace dev ens19 egress pref 2280 handle 9 protocol ipv6 flower
        //   src_ip 2001:db8:1::/48 action skbedit queue_mapping 15 priority 10:3
        let f = steer(MatchSide::Src, "2001:db8:1::/48", 9, 15, "10:3");
        assert_eq!(f.key.pref, 2280);
        check_filter("flower_v6_src_prefix", f);
    }

    #[test]
    fn flower_v6_dst_host() {
        // tc filter replace dev ens19 egress pref 2000 handle 65536 protocol ipv6
        //   flower dst_ip 2001:db8::1/128 action skbedit queue_mapping 1 priority 2:4
        check_filter(
            "flower_v6_dst_host",
            steer(MatchSide::Dst, "2001:db8::1/128", 65536, 1, "2:4"),
        );
    }

    #[test]
    fn flower_del_v4() {
        // tc filter del dev ens19 egress pref 1000 handle 8 protocol ip flower
        let k = FilterKey {
            pref: 1000,
            protocol: FilterProto::Ip,
            handle: 8,
        };
        let g = check("flower_del_v4", &TcOp::DeleteFilter(k));
        // A delete carries no key or action: not a filter of a dump.
        assert_eq!(decode_filter_msg(&g.bytes).unwrap(), None);
    }

    #[test]
    fn flower_del_v6() {
        // tc filter del dev ens19 egress pref 2280 handle 9 protocol ipv6 flower
        let k = FilterKey {
            pref: 2280,
            protocol: FilterProto::Ipv6,
            handle: 9,
        };
        check("flower_del_v6", &TcOp::DeleteFilter(k));
    }

    #[test]
    fn flower_dump_request() {
        // tc filter show dev ens19 egress
        let g = load("flower_dump_request");
        let mut ours = Vec::new();
        dump_request(&mut ours, ifindex(&g.bytes), seq(&g.bytes));
        assert_eq!(ours, g.bytes, "`{}`", g.command);
    }

    fn put_u16(b: &mut [u8], o: usize, v: u16) {
        b[o..o + 2].copy_from_slice(&v.to_ne_bytes());
    }

    fn u16_at(b: &[u8], o: usize) -> u16 {
        u16::from_ne_bytes([b[o], b[o + 1]])
    }

    /// tc's replace message as a dump reply looks: `NLM_F_MULTI`-style extra
    /// attributes the kernel adds (here `TCA_CHAIN` at the top, and unknown
    /// attributes inside `TCA_OPTIONS` standing for `TCA_FLOWER_IN_HW_COUNT`
    /// and friends) must not change the decoded filter.
    #[test]
    fn dump_reply_extra_attributes_are_ignored() {
        let g = load("flower_v6_src_prefix");
        let mut b = g.bytes.clone();
        // TCA_OPTIONS is the last top-level attribute; append 8 bytes to it.
        let mut off = 36;
        let mut opts = 0;
        while off < b.len() {
            if u16_at(&b, off + 2) == 2 {
                opts = off;
            }
            off += (u16_at(&b, off) as usize + 3) & !3;
        }
        assert!(opts > 0);
        let extra = [8u8, 0, 99, 0, 1, 0, 0, 0]; // type 99, u32 1
        b.extend_from_slice(&extra);
        let olen = u16_at(&b, opts) + 8;
        put_u16(&mut b, opts, olen);
        // TCA_CHAIN (11) = 0 at the top level.
        b.extend_from_slice(&[8, 0, 11, 0, 0, 0, 0, 0]);
        let len = b.len() as u32;
        b[0..4].copy_from_slice(&len.to_ne_bytes());
        b[4..6].copy_from_slice(&RTM_NEWTFILTER.to_ne_bytes());
        assert_eq!(
            decode_filter_msg(&b).unwrap(),
            Some((
                ifindex(&b),
                steer(MatchSide::Src, "2001:db8:1::/48", 9, 15, "10:3")
            ))
        );
    }
}
