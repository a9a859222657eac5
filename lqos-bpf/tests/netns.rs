//! Packets through namespaces: an internet namespace, a shaper that
//! forwards between two veths (mq root, an HTB per TX queue, a few circuit
//! classes, XPS off, lqos's programs attached) and a subscriber namespace.
//! UDP forwarded with no priority or mark set by the sender must land in
//! its circuit's class on its circuit's queue, in both directions; an
//! unknown address in a default class; a map update moves a flow.

mod common;

use std::net::IpAddr;

use common::{
    bridge_interfaces, class_packets, class_packets_when, default_delta, delta, send, shaping_tree,
    topology, Topo,
};
use lqos_bpf::attach::{AttachOptions, TcStatus, XdpChoice, XdpStatus};
use lqos_bpf::layout::{CircuitValue, IfaceConfig, Role, Steer};
use lqos_bpf::model::{Entries, MapKey};
use lqos_bpf::sys::in_netns;

const QUEUES: u16 = 4;

fn circuit(n: u32, q: u16, minor: u32) -> CircuitValue {
    let steer = Steer {
        classid: (u32::from(q) + 1) << 16 | minor,
        queue: q,
        cpu: q % 2,
    };
    CircuitValue {
        down: steer,
        up: steer,
        circuit: n,
        tag: n,
    }
}

fn class_of(s: &Steer) -> String {
    format!("{}:{:x}", s.classid >> 16, s.classid & 0xffff)
}

#[test]
fn forwarded_flows_land_in_their_circuits_class_and_queue_both_ways() {
    if !common::require_netns("forwarded_flows_land_in_their_circuits_class_and_queue_both_ways") {
        return;
    }
    let Topo { inet, shaper, sub } = topology(
        QUEUES,
        &["100.64.0.254/16", "2001:db8:1::fe/48"],
        &[
            "100.64.0.7/16",
            "100.64.1.3/16",
            "100.64.9.9/16",
            "2001:db8:1:ff00::5/48",
        ],
        &["100.64.0.0/16", "2001:db8:1::/48"],
    );
    shaping_tree(&shaper, "ens19", QUEUES, 4, "1gbit");
    shaping_tree(&shaper, "ens20", QUEUES, 4, "1gbit");

    // The data path, pinned in a bpffs private to this thread.
    let mut l = common::load("netns");
    let a = circuit(1, 2, 0x10); // 100.64.0.7/32
    let b = circuit(2, 1, 0x11); // 100.64.1.0/29
    let c = circuit(3, 3, 0x12); // 2001:db8:1:ff00::/56
    let mut want = Entries::default();
    for (net, v) in [
        ("100.64.0.7/32", a),
        ("100.64.1.0/29", b),
        ("2001:db8:1:ff00::/56", c),
    ] {
        want.insert(MapKey::from_net(net.parse().unwrap()), v);
    }
    l.maps.sync(&want).unwrap();
    let ifs = bridge_interfaces(QUEUES);
    let mut opts = AttachOptions::default();
    opts.xdp = XdpChoice::Auto;
    opts.disable_xps = true;
    opts.cpus = lqos_bpf::sys::online_cpus().unwrap();
    let dp = &mut l.dp;
    let report = in_netns(Some(&shaper.name), || dp.attach(&ifs, &opts)).unwrap();
    for r in &report {
        assert_eq!(r.tc, TcStatus::Attached, "{r:?}");
        assert_eq!(r.xdp, XdpStatus::Native, "veth has native XDP: {r:?}");
        assert_eq!(r.xps_off, u32::from(QUEUES));
    }
    let xps = in_netns(Some(&shaper.name), || {
        lqos_bpf::xps::xps_enabled_here("ens19")
    })
    .unwrap();
    assert!(xps.is_empty(), "XPS still on: {xps:?}");
    // tc shows lqos's filter at its pref.
    let filters = shaper.tc(&["filter", "show", "dev", "ens19", "egress"]);
    assert!(
        filters.contains("pref 900")
            && filters.contains("lqos_tc")
            && filters.contains("direct-action"),
        "{filters}"
    );
    // The kernel's own account: lqos's programs in the XDP slot and first
    // on the egress hook.
    let pins = l.bpffs.path().to_path_buf();
    let seen = in_netns(Some(&shaper.name), || {
        lqos_bpf::inspect::attached("ens19", &pins)
    })
    .unwrap();
    assert!(
        seen.xdp.is_lqos() && seen.xdp.mode == Some("native"),
        "{seen:?}"
    );
    assert!(seen.lqos_decides_first(), "{seen:?}");

    // Warm up neighbours, then measure.
    send(&inet, "198.51.100.1", "100.64.0.7", 3);
    send(&sub, "100.64.0.7", "198.51.100.1", 3);
    send(&inet, "2001:db8:ffff::1", "2001:db8:1:ff00::5", 3);
    send(&sub, "2001:db8:1:ff00::5", "2001:db8:ffff::1", 3);

    const N: usize = 100;
    for (what, from_ns, src, dst, dev, class) in [
        (
            "download to a /32",
            &inet,
            "198.51.100.1",
            "100.64.0.7",
            "ens19",
            class_of(&a.down),
        ),
        (
            "download into a /29",
            &inet,
            "198.51.100.1",
            "100.64.1.3",
            "ens19",
            class_of(&b.down),
        ),
        (
            "download into an IPv6 /56",
            &inet,
            "2001:db8:ffff::1",
            "2001:db8:1:ff00::5",
            "ens19",
            class_of(&c.down),
        ),
        (
            "upload from a /32",
            &sub,
            "100.64.0.7",
            "198.51.100.1",
            "ens20",
            class_of(&a.up),
        ),
        (
            "upload from a /29",
            &sub,
            "100.64.1.3",
            "198.51.100.1",
            "ens20",
            class_of(&b.up),
        ),
        (
            "upload from an IPv6 /56",
            &sub,
            "2001:db8:1:ff00::5",
            "2001:db8:ffff::1",
            "ens20",
            class_of(&c.up),
        ),
    ] {
        let before = class_packets(&shaper, dev);
        send(from_ns, src, dst, N);
        let after = class_packets_when(&shaper, dev, |a| delta(&before, a, &class) >= N as u64);
        let got = delta(&before, &after, &class);
        assert!(
            got >= N as u64,
            "{what}: class {class} on {dev} got {got} of {N} packets; {after:?}"
        );
    }

    // An unknown address: a default class.
    let before = class_packets(&shaper, "ens19");
    send(&inet, "198.51.100.1", "100.64.9.9", N);
    let after = class_packets_when(&shaper, "ens19", |a| default_delta(&before, a) >= N as u64);
    assert!(default_delta(&before, &after) >= N as u64, "{after:?}");
    for k in [class_of(&a.down), class_of(&b.down)] {
        assert_eq!(delta(&before, &after, &k), 0, "unknown traffic in {k}");
    }

    // Steering: the circuit queues' packets were classified on their CPUs.
    let stats = l.maps.stats().unwrap();
    assert!(stats.tc_classified >= 6 * N as u64, "{stats:?}");
    assert!(
        stats.xdp_redirected + stats.xdp_local >= 6 * N as u64,
        "{stats:?}"
    );
    for (q, cpu) in [(a.down.queue, a.down.cpu), (b.down.queue, b.down.cpu)] {
        let per_cpu = l.maps.queue_packets(false, u32::from(q)).unwrap();
        assert!(
            per_cpu[usize::from(cpu)] >= N as u64,
            "queue {q}: {per_cpu:?}"
        );
    }

    // A map update moves 100.64.0.7 to another circuit on another queue.
    let d = circuit(4, 0, 0x13);
    l.maps
        .write(&MapKey::from_net("100.64.0.7/32".parse().unwrap()), &d)
        .unwrap();
    let before = class_packets(&shaper, "ens19");
    send(&inet, "198.51.100.1", "100.64.0.7", N);
    let after = class_packets_when(&shaper, "ens19", |a| {
        delta(&before, a, &class_of(&d.down)) >= N as u64
    });
    assert!(
        delta(&before, &after, &class_of(&d.down)) >= N as u64,
        "{after:?}"
    );
    assert_eq!(delta(&before, &after, &class_of(&a.down)), 0);

    // Removing the /32 leaves the address unknown: a default class.
    l.maps
        .remove(&MapKey::from_net("100.64.0.7/32".parse().unwrap()))
        .unwrap();
    let before = class_packets(&shaper, "ens19");
    send(&inet, "198.51.100.1", "100.64.0.7", N);
    let after = class_packets_when(&shaper, "ens19", |a| default_delta(&before, a) >= N as u64);
    assert!(default_delta(&before, &after) >= N as u64, "{after:?}");

    // Attaching again replaces both programs in place. The new loader
    // stays alive through the removal below: it must hold no handle that
    // keeps the XDP link alive once unpinned.
    let mut dp2 = lqos_bpf::loader::DataPath::load(l.bpffs.path()).unwrap();
    let report = in_netns(Some(&shaper.name), || dp2.attach(&ifs, &opts)).unwrap();
    for r in &report {
        assert_eq!(
            (r.tc, &r.xdp),
            (TcStatus::Replaced, &XdpStatus::Replaced),
            "{r:?}"
        );
    }
    let filters = shaper.tc(&["filter", "show", "dev", "ens19", "egress"]);
    assert_eq!(
        filters.matches("handle 0x1 lqos_tc").count(),
        1,
        "{filters}"
    );

    // Removing everything leaves no filter, no link, no pins.
    let removed = in_netns(Some(&shaper.name), || {
        lqos_bpf::attach::remove_all(l.bpffs.path())
    })
    .unwrap();
    assert_eq!(removed, ["ens19", "ens20"]);
    let filters = shaper.tc(&["filter", "show", "dev", "ens19", "egress"]);
    assert!(!filters.contains("lqos_tc"), "{filters}");
    let link = shaper.ip(&["link", "show", "dev", "ens19"]);
    assert!(!link.contains("xdp"), "{link}");
    // (A fresh bpffs shows the kernel's own maps.debug and progs.debug.)
    let left: Vec<String> = std::fs::read_dir(l.bpffs.path())
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| !n.ends_with(".debug"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// A planned network end to end: lqos-tc plans 40 generated circuits on
/// a 4-queue bridge, `tc -b` loads the plan's tree, [`lqos_bpf::install`]
/// loads the data path for the plan in the shaper's namespace; forwarded
/// traffic to and from circuit addresses lands in the classes the plan's
/// IP map names; `check` finds the maps in sync; `remove` takes it all away.
#[test]
fn install_classifies_a_planned_network_in_a_namespace() {
    if !common::require_netns("install_classifies_a_planned_network_in_a_namespace") {
        return;
    }
    let mut g = lqos_model::generate(&{
        let mut p = lqos_model::GenParams::with_circuits(40);
        p.ipv6_fraction = 1.0;
        p.ipv4_range_fraction = 0.0;
        p
    });
    g.config.queues.downlink_bandwidth_mbps = 1000;
    let mut cfg = lqos_tc::PlanConfig::bridge("ens19", "ens20", u32::from(QUEUES));
    cfg.default_sqm = lqos_tc::config::LeafSpec::None;
    cfg.fq_codel_threshold = None;
    let plan = lqos_tc::plan(&g.network, &cfg, None).unwrap();
    // Two circuits' addresses: a /32 and an address inside a /56.
    let v4 = plan
        .ip_map
        .entries()
        .iter()
        .find(|e| e.net.prefix_len() == 32)
        .unwrap()
        .clone();
    let v6 = plan
        .ip_map
        .entries()
        .iter()
        .find(|e| e.net.prefix_len() == 56 && e.circuit != v4.circuit)
        .unwrap()
        .clone();
    let v4_addr = v4.net.network().to_string();
    let v6_addr = match v6.net.network() {
        IpAddr::V6(a) => std::net::Ipv6Addr::from(u128::from(a) | 0x42).to_string(),
        a => a.to_string(),
    };
    let Topo { inet, shaper, sub } = topology(
        QUEUES,
        &["100.127.255.254/10", "fdd7:b724:ffff::fe/32"],
        &[
            &format!("{v4_addr}/10"),
            &format!("{v6_addr}/32"),
            "100.127.0.9/10",
        ],
        &["100.64.0.0/10", "fdd7:b724::/32"],
    );
    let batch = std::env::temp_dir().join(format!("{}.tc", shaper.name));
    std::fs::write(&batch, lqos_tc::render::render_combined(&plan, false)).unwrap();
    shaper.tc(&["-b", batch.to_str().unwrap()]);
    let _ = std::fs::remove_file(&batch);

    let bpffs = lqos_bpf::sys::PrivateBpffs::new("install").unwrap();
    let pin_dir = bpffs.path().join("lqos");
    let opts = {
        let mut p = lqos_bpf::InstallOptions::default();
        p.pin_dir = pin_dir.clone();
        p.netns = Some(shaper.name.clone());
        p
    };
    let done = lqos_bpf::install(&plan, &opts).unwrap();
    assert_eq!(done.entries.written, plan.ip_map.len());
    assert_eq!(done.interfaces.len(), 2);
    let cpus = lqos_bpf::plan::CpuPolicy::online().unwrap();
    assert!(lqos_bpf::check(&pin_dir, &plan, &cpus).unwrap().is_empty());
    let hit = lqos_bpf::lookup(&pin_dir, v6_addr.parse().unwrap())
        .unwrap()
        .unwrap();
    assert_eq!(hit.down.classid, v6.download.classid.raw());

    let class = |h: lqos_tc::TcHandle| format!("{:x}:{:x}", h.major(), h.minor());
    // The subscriber speaks first, so the shaper learns its neighbours (a
    // neighbour solicitation from the shaper to the subscriber's veth
    // goes unanswered in these namespaces, with or without lqos).
    send(&sub, &v4_addr, "198.51.100.1", 3);
    send(&sub, &v6_addr, "2001:db8:ffff::1", 3);
    const N: usize = 50;
    for (what, from, src, dst, dev, want) in [
        (
            "download to a /32",
            &inet,
            "198.51.100.1",
            v4_addr.as_str(),
            "ens19",
            class(v4.download.classid),
        ),
        (
            "download into a /56",
            &inet,
            "2001:db8:ffff::1",
            v6_addr.as_str(),
            "ens19",
            class(v6.download.classid),
        ),
        (
            "upload from a /32",
            &sub,
            v4_addr.as_str(),
            "198.51.100.1",
            "ens20",
            class(v4.upload.classid),
        ),
        (
            "upload from a /56",
            &sub,
            v6_addr.as_str(),
            "2001:db8:ffff::1",
            "ens20",
            class(v6.upload.classid),
        ),
    ] {
        send(from, src, dst, 3);
        let before = class_packets(&shaper, dev);
        send(from, src, dst, N);
        let after = class_packets_when(&shaper, dev, |a| delta(&before, a, &want) >= N as u64);
        let got = delta(&before, &after, &want);
        assert!(
            got >= N as u64,
            "{what}: class {want} on {dev} got {got}; {after:?}"
        );
    }
    // Installing again upgrades in place: nothing to write.
    let again = lqos_bpf::install(&plan, &opts).unwrap();
    assert_eq!((again.entries.written, again.entries.removed), (0, 0));

    let removed = lqos_bpf::remove(&pin_dir, Some(&shaper.name)).unwrap();
    assert_eq!(removed, ["ens19", "ens20"]);
    assert!(!pin_dir.exists());
    let filters = shaper.tc(&["filter", "show", "dev", "ens20", "egress"]);
    assert!(!filters.contains("lqos_tc"), "{filters}");
}

/// On a stick the tc program reads the VLAN from `skb->vlan_tci` when the
/// stack carries the tag outside the frame (a VLAN device or a bridge with
/// tag offload does). This host has no 8021q, VLAN-filtering bridge or
/// `act_vlan`, so a test fixture (`bpf/test/vlan_push.bpf.c`, a cls_bpf
/// filter before lqos's) puts the tag there with `bpf_skb_vlan_push`.
/// Both shaper interfaces are configured as a stick (VLAN 100 faces the
/// internet, 200 the subscribers; download on queues 0-1, upload on 2-3):
/// the direction comes from the tag alone.
#[test]
fn a_stick_classifies_by_the_vlan_tag_outside_the_frame() {
    if !common::require_netns("a_stick_classifies_by_the_vlan_tag_outside_the_frame") {
        return;
    }
    let Topo { inet, shaper, sub } = topology(
        QUEUES,
        &["100.64.0.254/16"],
        &["100.64.0.7/16", "100.64.9.9/16"],
        &["100.64.0.0/16"],
    );
    shaping_tree(&shaper, "ens19", QUEUES, 4, "1gbit");
    shaping_tree(&shaper, "ens20", QUEUES, 4, "1gbit");
    // Neighbours first, while nothing is tagged (the peers have no VLANs).
    send(&sub, "100.64.0.7", "198.51.100.1", 3);
    send(&sub, "100.64.9.9", "198.51.100.1", 3);
    send(&inet, "198.51.100.1", "100.64.0.7", 3);
    send(&inet, "198.51.100.1", "100.64.9.9", 3);

    let mut l = common::load("stick-vlan");
    let c = CircuitValue {
        down: Steer {
            classid: 1 << 16 | 0x10,
            queue: 0,
            cpu: 0,
        },
        up: Steer {
            classid: 3 << 16 | 0x11,
            queue: 2,
            cpu: 0,
        },
        circuit: 1,
        tag: 1,
    };
    l.maps
        .write(&MapKey::from_net("100.64.0.7/32".parse().unwrap()), &c)
        .unwrap();
    let mut cfg = IfaceConfig::bridge(
        Role::Stick {
            internet_vlan: 100,
            network_vlan: 200,
        },
        QUEUES / 2,
    );
    cfg.up.queue_base = QUEUES / 2;
    let ifs: Vec<lqos_bpf::attach::Interface> = ["ens19", "ens20"]
        .into_iter()
        .map(|name| lqos_bpf::attach::Interface {
            name: name.into(),
            config: cfg,
        })
        .collect();
    let mut opts = AttachOptions::default();
    opts.xdp = XdpChoice::Off;
    opts.disable_xps = true;
    opts.cpus = vec![];
    let dp = &mut l.dp;
    in_netns(Some(&shaper.name), || dp.attach(&ifs, &opts)).unwrap();

    // The tagger, at a pref before lqos's 900.
    let mut fixture =
        aya::Ebpf::load(aya::include_bytes_aligned!("../bpf/test/vlan_push.bpf.o")).unwrap();
    let prog: &mut aya::programs::SchedClassifier = fixture
        .program_mut("lqos_test_vlan_push")
        .unwrap()
        .try_into()
        .unwrap();
    prog.load().unwrap();
    in_netns(Some(&shaper.name), || {
        for dev in ["ens19", "ens20"] {
            prog.attach_with_options(
                dev,
                aya::programs::TcAttachType::Egress,
                aya::programs::tc::TcAttachOptions::Netlink(aya::programs::tc::NlOptions {
                    priority: 800,
                    handle: aya::programs::tc::TcHandle::from(1),
                    classid: None,
                }),
            )
            .unwrap();
        }
        Ok(())
    })
    .unwrap();
    let mut vid: aya::maps::Array<_, u32> =
        aya::maps::Array::try_from(fixture.map_mut("lqos_test_vid").unwrap()).unwrap();

    const N: usize = 50;
    // Tagged 200 (the subscribers' side): download, keyed by the destination.
    vid.set(0, 200, 0).unwrap();
    let before = class_packets(&shaper, "ens19");
    send(&inet, "198.51.100.1", "100.64.0.7", N);
    let after = class_packets_when(&shaper, "ens19", |a| delta(&before, a, "1:10") >= N as u64);
    assert!(
        delta(&before, &after, "1:10") >= N as u64,
        "download: {after:?}"
    );
    // Unknown address on VLAN 200: a default class of the download half.
    let before = class_packets(&shaper, "ens19");
    send(&inet, "198.51.100.1", "100.64.9.9", N);
    let after = class_packets_when(&shaper, "ens19", |a| {
        delta(&before, a, "1:2") + delta(&before, a, "2:2") >= N as u64
    });
    let dflt = delta(&before, &after, "1:2") + delta(&before, &after, "2:2");
    assert!(dflt >= N as u64, "unknown download: {after:?}");
    // Tagged 100 (the internet's side): upload, keyed by the source, on
    // the upload half.
    vid.set(0, 100, 0).unwrap();
    let before = class_packets(&shaper, "ens20");
    send(&sub, "100.64.0.7", "198.51.100.1", N);
    let after = class_packets_when(&shaper, "ens20", |a| delta(&before, a, "3:11") >= N as u64);
    assert!(
        delta(&before, &after, "3:11") >= N as u64,
        "upload: {after:?}"
    );
    let before = class_packets(&shaper, "ens20");
    send(&sub, "100.64.9.9", "198.51.100.1", N);
    let after = class_packets_when(&shaper, "ens20", |a| {
        delta(&before, a, "3:2") + delta(&before, a, "4:2") >= N as u64
    });
    let dflt = delta(&before, &after, "3:2") + delta(&before, &after, "4:2");
    assert!(dflt >= N as u64, "unknown upload: {after:?}");
}

/// An interface deleted and created again under the same name: the pinned
/// XDP link of the old one is dead, and attaching again makes a new one.
#[test]
fn attaching_again_after_the_interface_was_recreated_makes_a_new_xdp_link() {
    if !common::require_netns(
        "attaching_again_after_the_interface_was_recreated_makes_a_new_xdp_link",
    ) {
        return;
    }
    let ns = common::Ns::new("recreate");
    let veth = |ns: &common::Ns| {
        ns.ip(&[
            "link",
            "add",
            "ens19",
            "numtxqueues",
            "2",
            "numrxqueues",
            "2",
            "type",
            "veth",
            "peer",
            "name",
            "p19",
            "numtxqueues",
            "2",
            "numrxqueues",
            "2",
        ]);
        ns.ip(&["link", "set", "ens19", "up"]);
        ns.ip(&["link", "set", "p19", "up"]);
    };
    veth(&ns);
    let mut l = common::load("recreate");
    let ifs = [lqos_bpf::attach::Interface {
        name: "ens19".into(),
        config: IfaceConfig::bridge(Role::Subscriber, 2),
    }];
    let opts = AttachOptions::default();
    let dp = &mut l.dp;
    let first = in_netns(Some(&ns.name), || dp.attach(&ifs, &opts)).unwrap();
    assert_eq!(first[0].xdp, XdpStatus::Native);
    ns.ip(&["link", "del", "ens19"]);
    veth(&ns);
    let again = in_netns(Some(&ns.name), || dp.attach(&ifs, &opts)).unwrap();
    assert_eq!(again[0].xdp, XdpStatus::Native, "{again:?}");
    assert_eq!(again[0].tc, TcStatus::Attached);
    let link = ns.ip(&["link", "show", "dev", "ens19"]);
    assert!(link.contains("xdp"), "{link}");
}
