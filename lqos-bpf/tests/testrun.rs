//! The programs run by the kernel (`BPF_PROG_TEST_RUN`) on crafted frames:
//! loading them here is the verifier check.

mod common;

use std::net::IpAddr;

use lqos_bpf::layout::{CircuitValue, DefaultQueues, IfaceConfig, Role, Steer};
use lqos_bpf::model::MapKey;
use lqos_bpf::packet::Frame;
use lqos_bpf::testrun::{run_tc, run_xdp, TC_ACT_OK, XDP_PASS};

/// The test run's device: this network namespace's loopback.
const LO: u32 = 1;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn circuit(n: u32, down_q: u16, up_q: u16) -> CircuitValue {
    CircuitValue {
        down: Steer {
            classid: (u32::from(down_q) + 1) << 16 | (0x10 + n),
            queue: down_q,
            cpu: down_q % 2,
        },
        up: Steer {
            classid: (u32::from(up_q) + 1) << 16 | (0x10 + n),
            queue: up_q,
            cpu: up_q % 2,
        },
        circuit: n,
        tag: n,
    }
}

fn bridge_side(role: Role) -> IfaceConfig {
    IfaceConfig::bridge(role, 4)
}

#[test]
fn tc_sets_the_circuits_classid_for_a_host() {
    if !common::require_root("tc_sets_the_circuits_classid_for_a_host") {
        return;
    }
    let mut l = common::load("tc-host");
    l.maps
        .set_iface(LO, &bridge_side(Role::Subscriber))
        .unwrap();
    let c = circuit(1, 2, 3);
    l.maps
        .write(&MapKey::from_net("100.64.0.7/32".parse().unwrap()), &c)
        .unwrap();
    let f = Frame::udp(ip("198.51.100.1"), ip("100.64.0.7")).build();
    let out = run_tc(l.dp.tc(), &f, LO, 1).unwrap();
    assert_eq!(out.action, TC_ACT_OK);
    assert_eq!(out.priority, c.down.classid);
    let x = run_xdp(l.dp.xdp(), &f, LO, 1).unwrap();
    // Arriving on the subscriber side: upload, keyed by the source (no circuit).
    assert_eq!(x.action, XDP_PASS);
}

/// Circuits of the tests below: a /32, a /29 with a /32 of another
/// circuit inside it, an IPv6 /56 and an IPv6 /128.
fn fill(l: &mut common::Loaded) {
    let w = |l: &mut common::Loaded, net: &str, c: CircuitValue| {
        l.maps
            .write(&MapKey::from_net(net.parse().unwrap()), &c)
            .unwrap()
    };
    w(l, "100.64.0.7/32", circuit(1, 2, 3));
    w(l, "100.64.1.0/29", circuit(2, 1, 1));
    w(l, "100.64.1.5/32", circuit(3, 3, 0));
    w(l, "2001:db8:1:ff00::/56", circuit(4, 0, 2));
    w(l, "2001:db8:2::9/128", circuit(5, 1, 3));
}

/// `(address, circuit)` pairs: what the longest prefix gives.
const CASES: [(&str, u32); 6] = [
    ("100.64.0.7", 1),
    ("100.64.1.1", 2),
    ("100.64.1.7", 2),
    ("100.64.1.5", 3),
    ("2001:db8:1:ff42::77", 4),
    ("2001:db8:2::9", 5),
];

fn internet_peer(sub: IpAddr) -> IpAddr {
    if sub.is_ipv6() {
        ip("2001:db8:ffff::1")
    } else {
        ip("198.51.100.1")
    }
}

fn is_default(priority: u32, queues: std::ops::Range<u32>) -> bool {
    priority & 0xffff == 2 && queues.contains(&((priority >> 16).wrapping_sub(1)))
}

/// Frame variants of one packet: tags, PPPoE, options, fragments.
fn variants(src: IpAddr, dst: IpAddr) -> Vec<(&'static str, Frame)> {
    let f = || Frame::udp(src, dst);
    let mut v = vec![
        ("plain", f()),
        ("802.1Q", f().vlan(0x8100, 100)),
        ("QinQ", f().vlan(0x88a8, 300).vlan(0x8100, 100)),
        ("old QinQ", f().vlan(0x9100, 300).vlan(0x8100, 100)),
        ("PPPoE", f().pppoe()),
        ("802.1Q PPPoE", f().vlan(0x8100, 100).pppoe()),
        ("QinQ PPPoE", f().vlan(0x88a8, 7).vlan(0x8100, 8).pppoe()),
    ];
    if src.is_ipv6() {
        v.push(("IPv6 extension headers", f().ipv6_ext(&[0, 60, 43])));
        v.push(("IPv6 first fragment", f().ipv6_fragment(0)));
        v.push(("IPv6 later fragment", f().ipv6_fragment(185)));
        v.push((
            "IPv6 ext + fragment PPPoE",
            f().ipv6_ext(&[0]).ipv6_fragment(3).vlan(0x8100, 5).pppoe(),
        ));
    } else {
        v.push(("IPv4 options", f().ipv4_options(10)));
        v.push(("IPv4 first fragment", f().fragment(0, true)));
        v.push(("IPv4 later fragment", f().fragment(185, false)));
        v.push((
            "IPv4 options QinQ PPPoE fragment",
            f().ipv4_options(3)
                .fragment(9, true)
                .vlan(0x88a8, 1)
                .vlan(0x8100, 2)
                .pppoe(),
        ));
    }
    v
}

fn expected(l: &common::Loaded, net_circuit: u32) -> CircuitValue {
    let entries = l.maps.read().unwrap();
    let v = entries
        .iter()
        .find(|(_, v)| v.circuit == net_circuit)
        .map(|(_, v)| *v)
        .unwrap();
    v
}

#[test]
fn tc_classifies_both_directions_through_tags_pppoe_options_and_fragments() {
    if !common::require_root(
        "tc_classifies_both_directions_through_tags_pppoe_options_and_fragments",
    ) {
        return;
    }
    let mut l = common::load("tc-variants");
    fill(&mut l);
    for (addr, n) in CASES {
        let sub = ip(addr);
        let want = expected(&l, n);
        for (side, role, frame_src, frame_dst, classid) in [
            (
                "download",
                Role::Subscriber,
                internet_peer(sub),
                sub,
                want.down.classid,
            ),
            (
                "upload",
                Role::Internet,
                sub,
                internet_peer(sub),
                want.up.classid,
            ),
        ] {
            l.maps.set_iface(LO, &bridge_side(role)).unwrap();
            for (what, f) in variants(frame_src, frame_dst) {
                let out = run_tc(l.dp.tc(), &f.build(), LO, 1).unwrap();
                assert_eq!(
                    (out.action, out.priority),
                    (TC_ACT_OK, classid),
                    "{side} {what} {addr}: got {:#x}",
                    out.priority
                );
            }
        }
    }
}

#[test]
fn tc_sends_unknown_addresses_and_other_protocols_to_a_default_class_spread_by_flow() {
    if !common::require_root(
        "tc_sends_unknown_addresses_and_other_protocols_to_a_default_class_spread_by_flow",
    ) {
        return;
    }
    let mut l = common::load("tc-default");
    fill(&mut l);
    l.maps
        .set_iface(LO, &bridge_side(Role::Subscriber))
        .unwrap();
    let mut majors = std::collections::BTreeSet::new();
    for i in 0..64u8 {
        let f = Frame::udp(ip(&format!("198.51.100.{i}")), ip(&format!("100.65.0.{i}"))).build();
        let out = run_tc(l.dp.tc(), &f, LO, 1).unwrap();
        assert!(is_default(out.priority, 0..4), "{:#x}", out.priority);
        majors.insert(out.priority >> 16);
    }
    assert!(
        majors.len() >= 3,
        "default traffic spread over {majors:?} only"
    );
    for t in [0x0806u16, 0x88cc, 0x8847, 0x1234] {
        let f = Frame::udp(ip("198.51.100.1"), ip("100.64.0.7"))
            .ethertype(t)
            .build();
        let out = run_tc(l.dp.tc(), &f, LO, 1).unwrap();
        assert!(
            is_default(out.priority, 0..4),
            "ethertype {t:#x}: {:#x}",
            out.priority
        );
    }
    let s = l.maps.stats().unwrap();
    assert_eq!((s.tc_defaulted, s.tc_unparsed, s.tc_classified), (64, 4, 0));
}

#[test]
fn truncated_frames_get_their_class_or_a_default_one_never_a_wrong_one() {
    if !common::require_root("truncated_frames_get_their_class_or_a_default_one_never_a_wrong_one")
    {
        return;
    }
    let mut l = common::load("truncated");
    fill(&mut l);
    l.maps
        .set_iface(LO, &bridge_side(Role::Subscriber))
        .unwrap();
    let (mut runs, mut tc_runs) = (0, 0);
    for (addr, n) in CASES {
        let sub = ip(addr);
        let want = expected(&l, n).down.classid;
        for (what, f) in variants(internet_peer(sub), sub) {
            let full = f.build();
            for len in 14..=full.len() {
                let x = run_xdp(l.dp.xdp(), &full[..len], LO, 1).unwrap();
                assert!(
                    matches!(x.action, 2 | 4),
                    "{what} {addr} cut to {len}: XDP {}",
                    x.action
                );
                // The kernel's skb test run refuses a 14-byte frame and an
                // IP ethertype whose fixed header is cut (EINVAL).
                let ip_min = match u16::from_be_bytes([full[12], full[13]]) {
                    0x0800 => 34,
                    0x86dd => 54,
                    _ => 15,
                };
                let out = match run_tc(l.dp.tc(), &full[..len], LO, 1) {
                    Ok(out) => out,
                    Err(e) if len < ip_min => {
                        assert!(e.to_string().contains("test run"), "{e}");
                        continue;
                    }
                    Err(e) => panic!("{what} {addr} cut to {len}: {e}"),
                };
                tc_runs += 1;
                assert!(
                    out.priority == want || is_default(out.priority, 0..4),
                    "{what} {addr} cut to {len} of {}: {:#x}",
                    full.len(),
                    out.priority
                );
                runs += 1;
            }
        }
    }
    assert!(runs > 1000 && tc_runs > 700, "{runs} {tc_runs}");
}

#[test]
fn a_stick_tells_the_direction_by_the_outermost_vlan() {
    if !common::require_root("a_stick_tells_the_direction_by_the_outermost_vlan") {
        return;
    }
    let mut l = common::load("stick");
    fill(&mut l);
    let stick = IfaceConfig {
        role: Role::Stick {
            internet_vlan: 100,
            network_vlan: 200,
        },
        xdp_redirect: true,
        default_minor: 2,
        track_tcp: true,
        down: DefaultQueues {
            queue_base: 0,
            queue_count: 2,
        },
        up: DefaultQueues {
            queue_base: 2,
            queue_count: 2,
        },
    };
    l.maps.set_iface(LO, &stick).unwrap();
    let sub = ip("100.64.0.7");
    let c = expected(&l, 1);
    let inet = internet_peer(sub);
    // Leaving on the internet VLAN: upload, keyed by the source.
    let up = Frame::udp(sub, inet).vlan(0x8100, 100).build();
    assert_eq!(
        run_tc(l.dp.tc(), &up, LO, 1).unwrap().priority,
        c.up.classid
    );
    // Leaving on the subscriber VLAN (or a QinQ inside it): download.
    let down = Frame::udp(inet, sub).vlan(0x8100, 200).build();
    assert_eq!(
        run_tc(l.dp.tc(), &down, LO, 1).unwrap().priority,
        c.down.classid
    );
    let down = Frame::udp(inet, sub)
        .vlan(0x88a8, 200)
        .vlan(0x8100, 100)
        .build();
    assert_eq!(
        run_tc(l.dp.tc(), &down, LO, 1).unwrap().priority,
        c.down.classid
    );
    // Unknown addresses: the default class of that direction's half.
    let up = Frame::udp(ip("100.99.0.1"), inet).vlan(0x8100, 100).build();
    assert!(is_default(
        run_tc(l.dp.tc(), &up, LO, 1).unwrap().priority,
        2..4
    ));
    let down = Frame::udp(inet, ip("100.99.0.1")).vlan(0x8100, 200).build();
    assert!(is_default(
        run_tc(l.dp.tc(), &down, LO, 1).unwrap().priority,
        0..2
    ));
    // XDP, arriving: from the internet VLAN is download (keyed by the
    // destination), from the subscriber VLAN upload (keyed by the source).
    // A frame to the subscriber arriving tagged 100 finds its circuit;
    // the same frame tagged 200 looks up the internet peer: unknown.
    let before = l.maps.stats().unwrap();
    for (vid, src, dst) in [
        (100, inet, sub),
        (200, sub, inet),
        (200, inet, sub),
        (100, sub, inet),
    ] {
        let f = Frame::udp(src, dst)
            .vlan(0x88a8, vid)
            .vlan(0x8100, 7)
            .build();
        run_xdp(l.dp.xdp(), &f, LO, 1).unwrap();
    }
    let after = l.maps.stats().unwrap();
    let found = (after.xdp_local + after.xdp_redirected + after.xdp_nocpu)
        - (before.xdp_local + before.xdp_redirected + before.xdp_nocpu);
    assert_eq!(
        (found, after.xdp_unknown - before.xdp_unknown),
        (2, 2),
        "{after:?}"
    );
}

#[test]
fn xdp_redirects_to_the_circuits_cpu_unless_already_there() {
    if !common::require_root("xdp_redirects_to_the_circuits_cpu_unless_already_there") {
        return;
    }
    let cpus = lqos_bpf::sys::online_cpus().unwrap();
    if cpus.len() < 2 {
        eprintln!("skipping: one CPU online");
        return;
    }
    let mut set = nix::sched::CpuSet::new();
    set.set(cpus[0] as usize).unwrap();
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set).unwrap();
    let mut l = common::load("xdp-cpu");
    let here = cpus[0] as u16;
    let there = cpus[1] as u16;
    let mut c = circuit(1, 0, 0);
    c.down.cpu = there;
    c.up.cpu = here;
    l.maps
        .write(&MapKey::from_net("100.64.0.7/32".parse().unwrap()), &c)
        .unwrap();
    // Arriving on the internet side: download, keyed by the destination.
    l.maps.set_iface(LO, &bridge_side(Role::Internet)).unwrap();
    let down = Frame::udp(ip("198.51.100.1"), ip("100.64.0.7")).build();
    // Not yet in the cpumap: passed here.
    assert_eq!(run_xdp(l.dp.xdp(), &down, LO, 1).unwrap().action, XDP_PASS);
    assert_eq!(l.maps.stats().unwrap().xdp_nocpu, 1);
    l.maps.enable_cpu(u32::from(there), 256).unwrap();
    assert_eq!(
        run_xdp(l.dp.xdp(), &down, LO, 1).unwrap().action,
        lqos_bpf::testrun::XDP_REDIRECT
    );
    let to_there: u64 = l.maps.redirects_to(u32::from(there)).unwrap().iter().sum();
    assert_eq!(to_there, 1);
    // Arriving on the subscriber side: upload, whose CPU is this one.
    l.maps
        .set_iface(LO, &bridge_side(Role::Subscriber))
        .unwrap();
    let up = Frame::udp(ip("100.64.0.7"), ip("198.51.100.1")).build();
    assert_eq!(run_xdp(l.dp.xdp(), &up, LO, 1).unwrap().action, XDP_PASS);
    // Unknown: passed.
    let unknown = Frame::udp(ip("100.99.0.1"), ip("198.51.100.1")).build();
    assert_eq!(
        run_xdp(l.dp.xdp(), &unknown, LO, 1).unwrap().action,
        XDP_PASS
    );
    let s = l.maps.stats().unwrap();
    assert_eq!((s.xdp_redirected, s.xdp_local, s.xdp_unknown), (1, 1, 1));
    // Redirection off for the interface: passed.
    let mut cfg = bridge_side(Role::Internet);
    cfg.xdp_redirect = false;
    l.maps.set_iface(LO, &cfg).unwrap();
    assert_eq!(run_xdp(l.dp.xdp(), &down, LO, 1).unwrap().action, XDP_PASS);
}

#[test]
fn tc_counts_each_packet_on_its_queue() {
    if !common::require_root("tc_counts_each_packet_on_its_queue") {
        return;
    }
    let mut l = common::load("queues");
    fill(&mut l);
    l.maps
        .set_iface(LO, &bridge_side(Role::Subscriber))
        .unwrap();
    let f = Frame::udp(ip("198.51.100.1"), ip("100.64.0.7")).build();
    run_tc(l.dp.tc(), &f, LO, 5).unwrap();
    let on_q2: u64 = l.maps.queue_packets(false, 2).unwrap().iter().sum();
    assert_eq!(on_q2, 5);
    assert_eq!(
        l.maps.queue_packets(true, 2).unwrap().iter().sum::<u64>(),
        0
    );
}

#[test]
fn unconfigured_interfaces_are_left_alone() {
    if !common::require_root("unconfigured_interfaces_are_left_alone") {
        return;
    }
    let mut l = common::load("unconfigured");
    fill(&mut l);
    let f = Frame::udp(ip("198.51.100.1"), ip("100.64.0.7")).build();
    assert_eq!(run_tc(l.dp.tc(), &f, LO, 1).unwrap().priority, 0);
    assert_eq!(run_xdp(l.dp.xdp(), &f, LO, 1).unwrap().action, XDP_PASS);
    let s = l.maps.stats().unwrap();
    assert_eq!((s.tc_unconfigured, s.xdp_unconfigured), (1, 1));
}
