//! Golden bytes of the classifier: the `clsact` qdisc and `flower` +
//! `skbedit` filters must encode exactly as iproute2's `tc` (6.1) sends
//! them, captured with strace by `tests/fixtures/netlink/capture_filters.sh`
//! (the tc command is in each `.hex` file's header; this host's kernel
//! rejects flower, strace records the request anyway). Seq and ifindex are
//! taken from the capture. The other direction: tc's replace messages
//! decode back into the same filter (a dump reply has the same layout plus
//! attributes lqos ignores, checked by appending some).

use lqos_apply::netlink::{decode_filter_msg, encode_op, filter_dump_request};
use lqos_tc::classify::{self, FlowerFilter, MatchSide};
use lqos_tc::{FilterKey, FilterProto, TcOp};

mod golden_hex;

use golden_hex::{load, Golden};

fn seq(b: &[u8]) -> u32 {
    u32::from_ne_bytes(b[8..12].try_into().unwrap())
}

fn ifindex(b: &[u8]) -> i32 {
    i32::from_ne_bytes(b[20..24].try_into().unwrap())
}

fn check(name: &str, op: &TcOp) -> Golden {
    let g = load(name);
    let mut ours = Vec::new();
    encode_op(op, ifindex(&g.bytes), seq(&g.bytes), &mut ours).unwrap();
    assert_eq!(
        ours, g.bytes,
        "{name}: `{}`\n ours {ours:02x?}\n tc's {:02x?}",
        g.command, g.bytes
    );
    g
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
fn clsact_replace() {
    // tc qdisc replace dev ens19 clsact
    check("clsact_replace", &TcOp::ReplaceQdisc(classify::clsact()));
}

#[test]
fn clsact_del() {
    // tc qdisc del dev ens19 clsact
    check(
        "clsact_del",
        &TcOp::DeleteQdisc {
            parent: classify::CLSACT_PARENT,
            handle: classify::CLSACT_HANDLE,
        },
    );
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
    filter_dump_request(&mut ours, ifindex(&g.bytes), seq(&g.bytes));
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
    b[4..6].copy_from_slice(&lqos_apply::netlink::RTM_NEWTFILTER.to_ne_bytes());
    assert_eq!(
        decode_filter_msg(&b).unwrap(),
        Some((
            ifindex(&b),
            steer(MatchSide::Src, "2001:db8:1::/48", 9, 15, "10:3")
        ))
    );
}
