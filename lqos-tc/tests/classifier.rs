//! The IP map and the `tc` classifier (clsact + flower + skbedit) as planned,
//! rendered, parsed back and diffed.

mod common;

use common::{circuit, node};
use ipnet::IpNet;
use lqos_model::config::Classifier;
use lqos_model::{Device, Network};
use lqos_tc::classify::FilterProto;
use lqos_tc::classify::{FlowerFilter, MatchSide, CLSACT_HANDLE, EGRESS};
use lqos_tc::config::Interfaces;
use lqos_tc::tree::TcTree;
use lqos_tc::{diff, parse, plan, render, Plan, PlanConfig, TcHandle, TcOp};
use proptest::prelude::*;

fn dev(id: &str, nets: &[&str]) -> Device {
    let (mut ipv4, mut ipv6) = (Vec::new(), Vec::new());
    for n in nets {
        match n.parse::<IpNet>().unwrap() {
            IpNet::V4(v) => ipv4.push(v),
            IpNet::V6(v) => ipv6.push(v),
        }
    }
    Device {
        id: id.into(),
        name: format!("device {id}").into(),
        mac: Default::default(),
        ipv4,
        ipv6,
        line: 0,
    }
}

/// Two sites, three circuits with v4 hosts, a v4 prefix and a v6 prefix.
/// `move_b` moves 100.64.0.2 from circuit B to circuit C; `drop_c6` removes
/// C's IPv6 device.
fn network(move_b: bool, drop_c6: bool) -> Network {
    let mut net = Network::new();
    net.add_node(None, node("SiteA", 500, 100)).unwrap();
    net.add_node(None, node("SiteB", 500, 100)).unwrap();
    let mut a = circuit("A", Some("SiteA"), "2", "20", "1", "5");
    a.devices = vec![dev("a1", &["100.64.0.1/32", "100.64.1.0/24"])];
    let mut b = circuit("B", Some("SiteA"), "2", "30", "1", "6");
    let mut c = circuit("C", Some("SiteB"), "2", "40", "1", "7");
    let b_addrs: &[&str] = if move_b { &[] } else { &["100.64.0.2/32"] };
    b.devices = vec![dev("b1", b_addrs)];
    let mut c_addrs = vec!["100.64.0.3/32"];
    if move_b {
        c_addrs.push("100.64.0.2/32");
    }
    c.devices = vec![dev("c1", &c_addrs)];
    if !drop_c6 {
        c.devices.push(dev("c6", &["2001:db8:5::/48"]));
    }
    net.add_circuit(a);
    net.add_circuit(b);
    net.add_circuit(c);
    net
}

fn cfg(classifier: Classifier) -> PlanConfig {
    let mut c = PlanConfig::bridge("ens19", "ens20", 4);
    c.classifier = classifier;
    c
}

fn filters(p: &Plan, dev: &str) -> Vec<FlowerFilter> {
    p.interface(dev)
        .unwrap()
        .ops
        .iter()
        .filter_map(|op| match op {
            TcOp::ReplaceFilter(f) => Some(f.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn ip_map_rows_and_lookup() {
    let p = plan(&network(false, false), &cfg(Classifier::None), None).unwrap();
    assert_eq!(p.ip_map.len(), 5);
    let b = p.ip_map.lookup("100.64.0.2".parse().unwrap()).unwrap();
    let slot = &p.allocation.circuits[b.circuit as usize];
    assert_eq!(slot.id, "B");
    assert_eq!(b.download.dev, "ens19");
    assert_eq!(b.upload.dev, "ens20");
    assert_eq!(b.download.queue, slot.queue);
    assert_eq!(
        b.download.classid,
        TcHandle::new(slot.queue as u16 + 1, slot.minor)
    );
    // The classid really is B's class on the download interface.
    let tree = p.interface("ens19").unwrap().tree();
    let class = &tree.classes[&b.download.classid];
    assert_eq!(class.htb.ceil.bps(), 30_000_000);
    // Longest prefix: 100.64.1.9 is in A's /24; 2001:db8:5::1 in C's /48.
    let id = |a: &str| {
        p.ip_map
            .lookup(a.parse().unwrap())
            .map(|e| e.circuit_id.clone())
    };
    assert_eq!(id("100.64.1.9").as_deref(), Some("A"));
    assert_eq!(id("2001:db8:5::1").as_deref(), Some("C"));
    assert_eq!(id("100.64.9.9"), None);
    // Classifier none: no classifier ops at all.
    assert!(filters(&p, "ens19").is_empty());
    let csv = p.ip_map.to_csv();
    let header = csv.lines().next().unwrap();
    assert_eq!(header, "ip,prefix_len,circuit_id,circuit_name,download_dev,download_queue,download_classid,upload_dev,upload_queue,upload_classid");
    assert!(csv.contains(&format!(
        "100.64.0.2,32,B,Circuit B,ens19,{},{},ens20,{},{}",
        b.download.queue, b.download.classid, b.upload.queue, b.upload.classid
    )));
}

#[test]
fn classifier_tc_plans_one_filter_per_prefix_and_direction() {
    let p = plan(&network(false, false), &cfg(Classifier::Tc), None).unwrap();
    for (dev, side, upload) in [
        ("ens19", MatchSide::Dst, false),
        ("ens20", MatchSide::Src, true),
    ] {
        let ops = &p.interface(dev).unwrap().ops;
        let at = ops
            .iter()
            .position(|op| matches!(op, TcOp::ReplaceQdisc(q) if q.handle == CLSACT_HANDLE))
            .expect("clsact replace");
        // Every class exists before any filter steers to it.
        assert!(ops[..at]
            .iter()
            .all(|op| !matches!(op, TcOp::ReplaceFilter(_))));
        let fs = filters(&p, dev);
        assert_eq!(fs.len(), 5);
        for f in &fs {
            assert_eq!(f.side, side);
            let e = p.ip_map.lookup(f.net.network()).unwrap();
            let s = if upload { &e.upload } else { &e.download };
            assert_eq!(f.priority, s.classid);
            assert_eq!(u32::from(f.queue_mapping), s.queue);
            assert_eq!(f.key.handle, e.filter_handle);
        }
        let v6 = fs
            .iter()
            .find(|f| f.key.protocol == FilterProto::Ipv6)
            .unwrap();
        assert_eq!(v6.net.prefix_len(), 48);
        // The plan's tree model accepts the ops (clsact before filters).
        p.interface(dev).unwrap().try_tree().unwrap();
    }
}

#[test]
fn on_a_stick_puts_both_directions_on_the_one_interface() {
    let mut c = cfg(Classifier::Tc);
    c.interfaces = Interfaces::OnAStick {
        interface: "ens19".into(),
        internet_vlan: 0,
        network_vlan: 0,
    };
    c.queues = 8;
    let p = plan(&network(false, false), &c, None).unwrap();
    let fs = filters(&p, "ens19");
    assert_eq!(fs.len(), 10);
    let e = p.ip_map.lookup("100.64.0.3".parse().unwrap()).unwrap();
    assert_eq!(
        (e.download.dev.as_str(), e.upload.dev.as_str()),
        ("ens19", "ens19")
    );
    assert_eq!(e.upload.queue, e.download.queue + 4);
    let up = fs
        .iter()
        .find(|f| f.side == MatchSide::Src && f.net == e.net)
        .unwrap();
    assert_eq!(up.priority, e.upload.classid);
    assert_eq!(u32::from(up.queue_mapping), e.upload.queue);
    p.interfaces[0].try_tree().unwrap();
}

#[test]
fn no_op_reload_sends_nothing() {
    let a = plan(&network(false, false), &cfg(Classifier::Tc), None).unwrap();
    let b = plan(
        &network(false, false),
        &cfg(Classifier::Tc),
        Some(&a.allocation),
    )
    .unwrap();
    for (_, ops) in lqos_tc::diff_plans(&a, &b) {
        assert!(ops.is_empty(), "{ops:?}");
    }
}

#[test]
fn moved_address_is_one_filter_replaced_per_interface() {
    let a = plan(&network(false, false), &cfg(Classifier::Tc), None).unwrap();
    let b = plan(
        &network(true, false),
        &cfg(Classifier::Tc),
        Some(&a.allocation),
    )
    .unwrap();
    let old = a.ip_map.lookup("100.64.0.2".parse().unwrap()).unwrap();
    let new = b.ip_map.lookup("100.64.0.2".parse().unwrap()).unwrap();
    assert_eq!(new.circuit_id, "C");
    assert_eq!(old.filter_handle, new.filter_handle);
    for (dev, ops) in lqos_tc::diff_plans(&a, &b) {
        assert_eq!(ops.len(), 1, "{dev}: {ops:?}");
        let TcOp::ReplaceFilter(f) = &ops[0] else {
            panic!("{dev}: {ops:?}")
        };
        assert_eq!(f.net.to_string(), "100.64.0.2/32");
        let want = if dev == "ens19" {
            &new.download
        } else {
            &new.upload
        };
        assert_eq!(f.priority, want.classid);
    }
}

#[test]
fn removed_device_is_one_filter_deleted_per_interface() {
    let a = plan(&network(false, false), &cfg(Classifier::Tc), None).unwrap();
    let b = plan(
        &network(false, true),
        &cfg(Classifier::Tc),
        Some(&a.allocation),
    )
    .unwrap();
    let gone = a.ip_map.lookup("2001:db8:5::".parse().unwrap()).unwrap();
    for (dev, ops) in lqos_tc::diff_plans(&a, &b) {
        assert_eq!(ops.len(), 1, "{dev}: {ops:?}");
        let TcOp::DeleteFilter(k) = &ops[0] else {
            panic!("{dev}: {ops:?}")
        };
        assert_eq!(k.handle, gone.filter_handle);
        assert_eq!(k.protocol, FilterProto::Ipv6);
    }
}

#[test]
fn switching_the_classifier_off_deletes_filters_but_keeps_clsact() {
    let a = plan(&network(false, false), &cfg(Classifier::Tc), None).unwrap();
    let b = plan(
        &network(false, false),
        &cfg(Classifier::None),
        Some(&a.allocation),
    )
    .unwrap();
    for (dev, ops) in lqos_tc::diff_plans(&a, &b) {
        assert_eq!(ops.len(), 5, "{dev}: {ops:?}");
        assert!(ops.iter().all(|op| matches!(op, TcOp::DeleteFilter(_))));
        let mut t = a.interface(&dev).unwrap().tree();
        t.apply_all(&ops).unwrap();
        assert!(t.filters.is_empty());
        assert!(t.qdiscs.contains_key(&CLSACT_HANDLE));
    }
}

#[test]
fn root_delete_keeps_clsact_and_filters() {
    let p = plan(&network(false, false), &cfg(Classifier::Tc), None).unwrap();
    let mut t = p.interfaces[0].tree();
    t.apply(&TcOp::delete_root()).unwrap();
    assert!(t.classes.is_empty());
    assert_eq!(t.filters.len(), 5);
    // And the full rebuild from there only rebuilds the classes.
    let ops = diff(&t, &p.interfaces[0].tree());
    assert!(ops.iter().all(|op| !matches!(op, TcOp::ReplaceFilter(_))));
}

#[test]
fn filter_rules_of_the_kernel() {
    let f = |pref_net: &str, handle| {
        FlowerFilter::steer(
            MatchSide::Dst,
            pref_net.parse().unwrap(),
            handle,
            0,
            TcHandle::new(1, 3),
        )
    };
    let mut t = TcTree::default();
    // No clsact yet: the egress hook does not exist.
    assert!(t.apply(&TcOp::ReplaceFilter(f("10.0.0.1/32", 1))).is_err());
    t.apply(&TcOp::ReplaceQdisc(lqos_tc::ops::Qdisc::clsact()))
        .unwrap();
    t.apply(&TcOp::ReplaceFilter(f("10.0.0.1/32", 1))).unwrap();
    // Same key and mask under another handle: flower refuses it.
    assert!(t.apply(&TcOp::ReplaceFilter(f("10.0.0.1/32", 2))).is_err());
    // A pref taken by IPv4 cannot hold IPv6.
    let mut v6 = f("2001:db8::1/128", 3);
    v6.key.pref = 1000;
    assert!(t.apply(&TcOp::ReplaceFilter(v6)).is_err());
    // Delete of a missing filter is refused; of a present one works.
    let mut k = f("10.0.0.1/32", 1).key;
    k.handle = 9;
    assert!(t.apply(&TcOp::DeleteFilter(k)).is_err());
    t.apply(&TcOp::DeleteFilter(f("10.0.0.1/32", 1).key))
        .unwrap();
    assert!(t.filters.is_empty());
}

#[test]
fn render_and_parse_filter_lines() {
    let f = FlowerFilter::steer(
        MatchSide::Dst,
        "100.64.0.0/24".parse().unwrap(),
        7,
        3,
        TcHandle::new(4, 0x1a),
    );
    let line = render::render_line("ens19", &TcOp::ReplaceFilter(f.clone()));
    assert_eq!(line, "filter replace dev ens19 egress pref 1008 handle 7 protocol ip flower dst_ip 100.64.0.0/24 action skbedit queue_mapping 3 priority 4:1a");
    assert_eq!(
        parse::parse_line(&line).unwrap(),
        ("ens19".into(), TcOp::ReplaceFilter(f.clone()))
    );
    let del = render::render_line("ens19", &TcOp::DeleteFilter(f.key));
    assert_eq!(
        del,
        "filter del dev ens19 egress pref 1008 handle 7 protocol ip flower"
    );
    let cls = render::render_line("ens19", &TcOp::ReplaceQdisc(lqos_tc::ops::Qdisc::clsact()));
    assert_eq!(cls, "qdisc replace dev ens19 clsact");
    assert_eq!(
        parse::parse_line(&cls).unwrap().1,
        TcOp::ReplaceQdisc(lqos_tc::ops::Qdisc::clsact())
    );
    // tc's own spellings parse too: parent instead of egress, hex handle,
    // a bare address.
    let (_, op) = parse::parse_line("tc filter replace dev ens19 parent ffff:fff3 prio 1000 handle 0x7 protocol ip flower dst_ip 100.64.0.5 action skbedit queue_mapping 3 priority 4:1a").unwrap();
    let TcOp::ReplaceFilter(g) = op else { panic!() };
    assert_eq!((g.key.handle, g.net.prefix_len()), (7, 32));
    assert_eq!(EGRESS.raw(), 0xffff_fff3);
    // Host bits and family mismatches are errors naming the problem.
    let e = parse::parse_line("filter replace dev ens19 egress pref 1008 handle 7 protocol ip flower dst_ip 100.64.0.9/24 action skbedit queue_mapping 3 priority 4:1a").unwrap_err();
    assert!(
        matches!(e.error, parse::SyntaxError::HostBits { .. }),
        "{e}"
    );
    let e = parse::parse_line("filter replace dev ens19 egress pref 1008 handle 7 protocol ipv6 flower dst_ip 100.64.0.0/24 action skbedit queue_mapping 3 priority 4:1a").unwrap_err();
    assert!(
        matches!(e.error, parse::SyntaxError::WrongFamily { .. }),
        "{e}"
    );
}

fn any_filter() -> impl Strategy<Value = FlowerFilter> {
    let v4 = (any::<u32>(), 0u8..=32).prop_map(|(a, l)| {
        IpNet::new(std::net::Ipv4Addr::from(a).into(), l)
            .unwrap()
            .trunc()
    });
    let v6 = (any::<u128>(), 0u8..=128).prop_map(|(a, l)| {
        IpNet::new(std::net::Ipv6Addr::from(a).into(), l)
            .unwrap()
            .trunc()
    });
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

/// A network whose circuits own random addresses drawn from a small pool
/// (so that plans share, move and drop addresses).
fn addr_network(owner: &[Option<u8>]) -> Network {
    let mut net = network(false, true);
    let mut extra: Vec<lqos_model::Circuit> = (0..4)
        .map(|i| circuit(&format!("X{i}"), Some("SiteB"), "1", "9", "1", "3"))
        .collect();
    for (a, o) in owner.iter().enumerate() {
        if let Some(c) = o {
            let n = if a % 3 == 0 {
                format!("2001:db8:{a:x}::/64")
            } else {
                format!("10.9.{a}.0/{}", 24 + a % 9)
            };
            extra[usize::from(*c) % 4]
                .devices
                .push(dev(&format!("d{a}"), &[&n]));
        }
    }
    for c in extra {
        net.add_circuit(c);
    }
    net
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn filter_ops_render_parse_round_trip(f in any_filter()) {
        for op in [TcOp::ReplaceFilter(f.clone()), TcOp::DeleteFilter(f.key)] {
            let line = render::render_line("ens19", &op);
            prop_assert_eq!(parse::parse_line(&line).unwrap(), ("ens19".to_string(), op));
        }
    }

    #[test]
    fn diff_invariants_hold_with_filters(
        a in proptest::collection::vec(proptest::option::of(0u8..4), 0..12),
        b in proptest::collection::vec(proptest::option::of(0u8..4), 0..12),
        tc_a in any::<bool>(),
    ) {
        let ca = cfg(if tc_a { Classifier::Tc } else { Classifier::None });
        let pa = plan(&addr_network(&a), &ca, None).unwrap();
        let pb = plan(&addr_network(&b), &cfg(Classifier::Tc), Some(&pa.allocation)).unwrap();
        for ia in &pa.interfaces {
            let ta = ia.try_tree().unwrap();
            prop_assert!(diff(&ta, &ta).is_empty());
            let tb = pb.interface(&ia.dev).unwrap().try_tree().unwrap();
            let ops = diff(&ta, &tb);
            let mut t = ta.clone();
            t.apply_all(&ops).map_err(|(i, e)| TestCaseError::fail(format!("op {i}: {e}")))?;
            prop_assert!(lqos_tc::rules::tree_satisfies(&t, &tb));
            prop_assert_eq!(&t.filters, &tb.filters);
            prop_assert!(diff(&t, &tb).is_empty());
            // Filter ops touch only prefixes that changed.
            let changed = ops.iter().filter(|op| matches!(op, TcOp::ReplaceFilter(_) | TcOp::DeleteFilter(_))).count();
            let differing = tb.filters.iter().filter(|(k, f)| ta.filters.get(k) != Some(f)).count()
                + ta.filters.keys().filter(|k| !tb.filters.contains_key(k)).count();
            prop_assert_eq!(changed, differing);
        }
    }
}

/// Regression (merge of PlanRecord): a plan record keeps every device
/// prefix and its filter handle, so it re-plans to the identical plan with
/// the classifier, IP map included.
#[test]
fn plan_record_replans_the_classifier_and_ip_map() {
    let net = network(false, false);
    let a = plan(&net, &cfg(Classifier::Tc), None).unwrap();
    // A second plan with a removed device: handles are not the dense 1..n.
    let b = plan(
        &network(false, true),
        &cfg(Classifier::Tc),
        Some(&a.allocation),
    )
    .unwrap();
    for (n, p) in [(&net, &a), (&network(false, true), &b)] {
        let rec = lqos_tc::record::PlanRecord::new(p, Some(n), false).unwrap();
        let json = serde_json::to_string(&rec).unwrap();
        let back: lqos_tc::record::PlanRecord = serde_json::from_str(&json).unwrap();
        assert_eq!(&back.replan().unwrap(), p);
    }
}
