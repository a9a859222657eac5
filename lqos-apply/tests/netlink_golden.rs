//! Golden bytes: `encode_op` must produce exactly what iproute2's `tc`
//! (6.1) sends for the same command, captured with strace by
//! `tests/fixtures/netlink/capture.sh` (one `.hex` file per command, the tc
//! command in its header). Seq and ifindex are taken from the capture.
//!
//! Normalisation, only where lqos deliberately differs, done explicitly on
//! tc's bytes before an exact comparison:
//! - HTB classes: tc appends `TCA_HTB_RTAB` and `TCA_HTB_CTAB` (1 KiB rate
//!   tables each). With linklayer ethernet the kernel ignores them, so lqos
//!   omits them: [`strip_htb_rate_tables`].
//! - HTB classes whose default burst is below 1 µs of transmit time (rates
//!   above ~12.8 Gbit): tc 6.1 truncates the time to whole µs and sends
//!   `buffer`/`cbuffer` = 0 ticks; lqos sends the untruncated tick count:
//!   [`set_htb_buffers`] patches tc's zeros with lqos's values after
//!   asserting they were zero.

use lqos_apply::netlink::{class_dump_request, encode_op, PschedClock};
use lqos_model::Rate;
use lqos_tc::{
    CakeAckFilter, CakeDiffserv, CakeFlowMode, CakeParams, Class, FqCodelParams, HtbClass,
    HtbQdisc, Qdisc, QdiscKind, TcHandle, TcOp,
};

const TCA_OPTIONS: u16 = 2;
const TCA_HTB_PARMS: u16 = 1;
const TCA_HTB_CTAB: u16 = 3;
const TCA_HTB_RTAB: u16 = 4;

mod golden_hex;

use golden_hex::{load, Golden};

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_ne_bytes([b[o], b[o + 1]])
}

/// Rewrites tc's message without the HTB rate tables inside TCA_OPTIONS,
/// fixing the nest and message lengths.
fn strip_htb_rate_tables(msg: &[u8]) -> Vec<u8> {
    let mut out = msg[..36].to_vec(); // nlmsghdr + tcmsg
    let mut off = 36;
    while off < msg.len() {
        let len = u16_at(msg, off) as usize;
        let ty = u16_at(msg, off + 2);
        let padded = (len + 3) & !3;
        if ty == TCA_OPTIONS {
            let nest_pos = out.len();
            out.extend_from_slice(&msg[off..off + 4]);
            let mut o = off + 4;
            while o < off + len {
                let l = u16_at(msg, o) as usize;
                let t = u16_at(msg, o + 2);
                let p = (l + 3) & !3;
                if t != TCA_HTB_RTAB && t != TCA_HTB_CTAB {
                    out.extend_from_slice(&msg[o..o + p]);
                }
                o += p;
            }
            let nest_len = (out.len() - nest_pos) as u16;
            out[nest_pos..nest_pos + 2].copy_from_slice(&nest_len.to_ne_bytes());
        } else {
            out.extend_from_slice(&msg[off..off + padded]);
        }
        off += padded;
    }
    let total = out.len() as u32;
    out[0..4].copy_from_slice(&total.to_ne_bytes());
    out
}

/// Offset of `struct tc_htb_opt` inside a (stripped) class message.
fn htb_parms_offset(msg: &[u8]) -> usize {
    let mut off = 36;
    while off < msg.len() {
        let len = u16_at(msg, off) as usize;
        if u16_at(msg, off + 2) == TCA_OPTIONS {
            let mut o = off + 4;
            while o < off + len {
                if u16_at(msg, o + 2) == TCA_HTB_PARMS {
                    return o + 4;
                }
                o += (u16_at(msg, o) as usize + 3) & !3;
            }
        }
        off += (len + 3) & !3;
    }
    panic!("no TCA_HTB_PARMS");
}

/// Replaces tc's truncated-to-zero buffer/cbuffer ticks.
fn set_htb_buffers(msg: &mut [u8], buffer: u32, cbuffer: u32) {
    let p = htb_parms_offset(msg);
    assert_eq!(
        &msg[p + 24..p + 32],
        &[0u8; 8],
        "tc's buffer/cbuffer expected 0"
    );
    msg[p + 24..p + 28].copy_from_slice(&buffer.to_ne_bytes());
    msg[p + 28..p + 32].copy_from_slice(&cbuffer.to_ne_bytes());
}

fn ours(g: &Golden, op: &TcOp) -> Vec<u8> {
    let seq = u32::from_ne_bytes(g.bytes[8..12].try_into().unwrap());
    let ifindex = i32::from_ne_bytes(g.bytes[20..24].try_into().unwrap());
    let mut buf = Vec::new();
    encode_op(op, ifindex, seq, &mut buf).unwrap();
    buf
}

fn hex(b: &[u8]) -> String {
    b.chunks(16)
        .map(|c| {
            c.iter()
                .map(|x| format!("{x:02x}"))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn assert_same(name: &str, expected: &[u8], actual: &[u8]) {
    let g = load(name);
    assert!(
        expected == actual,
        "{name} ({}):\n tc:\n{}\n lqos:\n{}",
        g.command,
        hex(expected),
        hex(actual)
    );
}

/// Compares a qdisc/delete op exactly with tc's bytes.
fn check_exact(name: &str, op: TcOp) {
    let g = load(name);
    assert_same(name, &g.bytes, &ours(&g, &op));
}

/// Compares an HTB class op with tc's bytes minus the rate tables.
fn check_class(name: &str, op: TcOp) {
    let g = load(name);
    let tc = strip_htb_rate_tables(&g.bytes);
    assert!(tc.len() < g.bytes.len(), "{name}: tc sent rate tables");
    assert_same(name, &tc, &ours(&g, &op));
}

fn h(s: &str) -> TcHandle {
    s.parse().unwrap()
}

fn mbps(s: &str) -> Rate {
    Rate::from_mbps_str(s).unwrap()
}

fn qdisc(parent: &str, handle: &str, kind: QdiscKind) -> Qdisc {
    Qdisc {
        parent: h(parent),
        handle: h(handle),
        kind,
    }
}

fn class(parent: &str, classid: &str, rate: &str, ceil: &str, prio: u32, quantum: u32) -> Class {
    Class {
        parent: h(parent),
        classid: h(classid),
        htb: HtbClass {
            rate: mbps(rate),
            ceil: mbps(ceil),
            quantum,
            prio,
            burst: None,
            cburst: None,
        },
    }
}

fn htb(default_minor: u32) -> QdiscKind {
    QdiscKind::Htb(HtbQdisc {
        default_minor,
        r2q: None,
        direct_qlen: None,
    })
}

/// tc qdisc replace dev ens19 root handle 7fff: mq
#[test]
fn mq_replace_root() {
    check_exact(
        "mq_replace_root",
        TcOp::ReplaceQdisc(qdisc("root", "7fff:", QdiscKind::Mq)),
    );
}

/// tc qdisc add dev ens19 root handle 7fff: mq
#[test]
fn mq_add_root() {
    check_exact(
        "mq_add_root",
        TcOp::AddQdisc(qdisc("root", "7fff:", QdiscKind::Mq)),
    );
}

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

/// tc qdisc add dev ens19 parent 1:3 handle 3: pfifo
#[test]
fn pfifo_default() {
    check_exact(
        "pfifo_default",
        TcOp::AddQdisc(qdisc("1:3", "3:", QdiscKind::Pfifo { limit: None })),
    );
}

/// tc qdisc add dev ens19 parent 1:3 handle 3: pfifo limit 100
#[test]
fn pfifo_limit() {
    check_exact(
        "pfifo_limit",
        TcOp::AddQdisc(qdisc("1:3", "3:", QdiscKind::Pfifo { limit: Some(100) })),
    );
}

/// tc qdisc replace dev ens19 parent 1:3 handle 3: pfifo limit 50
#[test]
fn pfifo_replace_limit() {
    check_exact(
        "pfifo_replace_limit",
        TcOp::ReplaceQdisc(qdisc("1:3", "3:", QdiscKind::Pfifo { limit: Some(50) })),
    );
}

/// tc qdisc add dev ens19 parent 1:3 handle 3: bfifo limit 30000
#[test]
fn bfifo_limit() {
    check_exact(
        "bfifo_limit",
        TcOp::AddQdisc(qdisc("1:3", "3:", QdiscKind::Bfifo { limit: Some(30000) })),
    );
}

/// tc qdisc add dev ens19 parent 1:3 handle 3: cake diffserv4
#[test]
fn cake_diffserv4() {
    let cake = CakeParams {
        diffserv: Some(CakeDiffserv::Diffserv4),
        ..Default::default()
    };
    check_exact(
        "cake_diffserv4",
        TcOp::AddQdisc(qdisc("1:3", "3:", QdiscKind::Cake(cake))),
    );
}

/// tc qdisc add dev ens19 parent 1:3 handle 3: cake besteffort rtt 200ms bandwidth 100mbit
#[test]
fn cake_besteffort_rtt_bw() {
    let cake = CakeParams {
        bandwidth: Some(mbps("100")),
        diffserv: Some(CakeDiffserv::Besteffort),
        rtt_us: Some(200_000),
        ..Default::default()
    };
    check_exact(
        "cake_besteffort_rtt_bw",
        TcOp::AddQdisc(qdisc("1:3", "3:", QdiscKind::Cake(cake))),
    );
}

/// tc qdisc add dev ens19 parent 1:3 handle 3: cake bandwidth 50mbit diffserv8 rtt 100ms triple-isolate nat wash ack-filter split-gso memlimit 32mb
#[test]
fn cake_all_options() {
    let cake = CakeParams {
        bandwidth: Some(mbps("50")),
        diffserv: Some(CakeDiffserv::Diffserv8),
        rtt_us: Some(100_000),
        flow_mode: Some(CakeFlowMode::TripleIsolate),
        nat: Some(true),
        wash: Some(true),
        ack_filter: Some(CakeAckFilter::On),
        split_gso: Some(true),
        memlimit: Some(32 << 20),
    };
    check_exact(
        "cake_all_options",
        TcOp::AddQdisc(qdisc("1:3", "3:", QdiscKind::Cake(cake))),
    );
}

/// tc qdisc replace dev ens19 parent 1:3 handle 3: cake diffserv3 dual-dsthost nonat nowash ack-filter-aggressive no-split-gso
#[test]
fn cake_diffserv3_nonat() {
    let cake = CakeParams {
        diffserv: Some(CakeDiffserv::Diffserv3),
        flow_mode: Some(CakeFlowMode::DualDsthost),
        nat: Some(false),
        wash: Some(false),
        ack_filter: Some(CakeAckFilter::Aggressive),
        split_gso: Some(false),
        ..Default::default()
    };
    check_exact(
        "cake_diffserv3_nonat",
        TcOp::ReplaceQdisc(qdisc("1:3", "3:", QdiscKind::Cake(cake))),
    );
}

/// tc qdisc add dev ens19 parent 1:3 handle 3: fq_codel
#[test]
fn fq_codel_default() {
    check_exact(
        "fq_codel_default",
        TcOp::AddQdisc(qdisc(
            "1:3",
            "3:",
            QdiscKind::FqCodel(FqCodelParams::default()),
        )),
    );
}

/// tc qdisc add dev ens19 parent 1:3 handle 3: fq_codel limit 1000 flows 2048 target 5ms interval 100ms quantum 1514 ecn memory_limit 32mb
#[test]
fn fq_codel_options() {
    let f = FqCodelParams {
        limit: Some(1000),
        flows: Some(2048),
        target_us: Some(5000),
        interval_us: Some(100_000),
        quantum: Some(1514),
        ecn: Some(true),
        memory_limit: Some(32 << 20),
    };
    check_exact(
        "fq_codel_options",
        TcOp::AddQdisc(qdisc("1:3", "3:", QdiscKind::FqCodel(f))),
    );
}

/// tc qdisc add dev ens19 parent 1:3 handle 3: fq_codel noecn
#[test]
fn fq_codel_noecn() {
    let f = FqCodelParams {
        ecn: Some(false),
        ..Default::default()
    };
    check_exact(
        "fq_codel_noecn",
        TcOp::AddQdisc(qdisc("1:3", "3:", QdiscKind::FqCodel(f))),
    );
}

/// tc qdisc del dev ens19 root
#[test]
fn qdisc_del_root() {
    check_exact("qdisc_del_root", TcOp::delete_root());
}

/// tc qdisc del dev ens19 parent 1:3 handle 3:
#[test]
fn qdisc_del_parent_handle() {
    check_exact(
        "qdisc_del_parent_handle",
        TcOp::DeleteQdisc {
            parent: h("1:3"),
            handle: h("3:"),
        },
    );
}

/// Every fixture file is exercised by a test above.
#[test]
fn every_fixture_is_tested() {
    // The classifier's fixtures are tested in netlink_filter_golden.rs.
    let src = [
        include_str!("netlink_golden.rs"),
        include_str!("netlink_filter_golden.rs"),
    ]
    .concat();
    let dir = golden_hex::fixtures_dir();
    for e in std::fs::read_dir(dir).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        if let Some(stem) = name.strip_suffix(".hex") {
            assert!(
                src.contains(&format!("\"{stem}\"")),
                "fixture {name} has no test"
            );
        }
    }
}

/// Every capture, both ways, driven by the `tc` command in its header (no
/// hand-written op; the classifier's `clsact` and flower captures
/// included, the egress filter dump request excepted as it is no op): the command parsed by `lqos_tc::parse` and encoded is
/// tc's message (normalised as described at the top); and tc's own bytes
/// decoded are the parsed op, where a burst the command leaves to tc's
/// default (`None`) decodes to that default to within the 1 µs tick
/// truncation of tc's formula.
#[test]
fn every_capture_both_ways() {
    let dir = golden_hex::fixtures_dir();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".hex").map(str::to_string)
        })
        .collect();
    names.sort();
    assert!(names.len() >= 25, "captures: {names:?}");
    let clock = PschedClock::default();
    for name in &names {
        let g = load(name);
        if g.command.contains(" show ") {
            // Dump requests, not ops: no TcOp to parse or decode into; their
            // bytes are checked against `class_dump_request` (below,
            // htb_class_dump_parent) and `filter_dump_request`
            // (netlink_filter_golden.rs, flower_dump_request).
            continue;
        }
        let line = g.command.strip_prefix("tc ").unwrap_or(&g.command);
        let (dev, op) = lqos_tc::parse::parse_line(line)
            .unwrap_or_else(|e| panic!("{name}: `{}`: {e}", g.command));
        assert_eq!(dev, "ens19", "{name}");

        // Parsed -> encoded == tc's bytes (normalised).
        let lqos = ours(&g, &op);
        let mut tc = g.bytes.clone();
        if matches!(op, TcOp::AddClass(_) | TcOp::ChangeClass(_)) {
            tc = strip_htb_rate_tables(&tc);
            let p = htb_parms_offset(&tc);
            if tc[p + 24..p + 32] == [0u8; 8] {
                // tc 6.1's zero ticks above ~12.8 Gbit (see the top).
                let q = htb_parms_offset(&lqos);
                tc[p + 24..p + 32].copy_from_slice(&lqos[q + 24..q + 32]);
            }
        }
        assert_same(name, &tc, &lqos);

        // tc's bytes -> decoded == parsed.
        let (ifindex, mut decoded) = lqos_apply::netlink::decode_request(&g.bytes, &clock)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            ifindex,
            i32::from_ne_bytes(g.bytes[20..24].try_into().unwrap())
        );
        let mut wanted = op.clone();
        match (&mut decoded, &mut wanted) {
            (TcOp::AddClass(d), TcOp::AddClass(w))
            | (TcOp::ChangeClass(d), TcOp::ChangeClass(w)) => {
                for (got, want, rate) in [
                    (&mut d.htb.burst, &mut w.htb.burst, w.htb.rate),
                    (&mut d.htb.cburst, &mut w.htb.cburst, w.htb.ceil),
                ] {
                    let got_v = got.expect("decoded burst");
                    let want_v = want.unwrap_or_else(|| clock.default_burst(rate.bytes_per_sec()));
                    let one_us = (rate.bytes_per_sec() / 1_000_000 + 1) as u32;
                    assert!(
                        got_v <= want_v && want_v - got_v <= one_us.max(2),
                        "{name}: burst {got_v} vs {want_v} (1 us = {one_us} bytes)"
                    );
                    *got = *want;
                }
            }
            (TcOp::AddQdisc(d), TcOp::AddQdisc(w))
            | (TcOp::ReplaceQdisc(d), TcOp::ReplaceQdisc(w)) => {
                // tc always sends HTB's rate2quantum (10 unless given).
                if let (lqos_tc::QdiscKind::Htb(dh), lqos_tc::QdiscKind::Htb(wh)) =
                    (&mut d.kind, &w.kind)
                {
                    assert_eq!(dh.r2q, Some(wh.r2q.unwrap_or(10)), "{name}");
                    dh.r2q = wh.r2q;
                }
            }
            _ => {}
        }
        assert_eq!(decoded, wanted, "{name} ({}): decoded tc bytes", g.command);
    }
}

#[test]
fn htb_class_dump_parent() {
    // tc class show dev ens19 parent 1:
    // (lqos reads classes back one HTB qdisc at a time; see
    // NetlinkSocket::dump.)
    let g = load("htb_class_dump_parent");
    let seq = u32::from_ne_bytes(g.bytes[8..12].try_into().unwrap());
    let ifindex = i32::from_ne_bytes(g.bytes[20..24].try_into().unwrap());
    let mut ours = Vec::new();
    class_dump_request(&mut ours, ifindex, h("1:"), seq);
    assert_eq!(ours, g.bytes, "`{}`", g.command);
}
