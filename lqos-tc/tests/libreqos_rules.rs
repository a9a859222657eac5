//! LibreQoS's rules (HEAD 455bc13b: LibreQoS.py and its bakery, which is
//! what a HEAD box loads), one test each, from LibreQoS's own input files
//! through `lqos_model::load_with_config` and the planner to the classes.

use lqos_model::Rate;
use lqos_tc::config::QueueStrategy;
use lqos_tc::ops::{Class, QdiscKind};
use lqos_tc::rates::MIN_RATE;
use lqos_tc::tree::TcTree;
use lqos_tc::{plan, Plan, PlanConfig, TcHandle};

const HEADER: &str = "Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,Parent Node ID,Anchor Node ID,MAC,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,Comment,sqm";

/// `lqos.conf` with a 1 Gbit bridge ens19/ens20 and `extra` in [queues].
fn conf(extra: &str) -> String {
    format!(
        "[bridge]\nto_internet = \"ens20\"\nto_network = \"ens19\"\n[queues]\ndefault_sqm = \"cake diffserv4\"\nuplink_bandwidth_mbps = 1000\ndownlink_bandwidth_mbps = 1000\n{extra}\n"
    )
}

/// One CSV row: id, parent, min/max down, min/max up, sqm.
fn row(id: &str, parent: &str, down: (&str, &str), up: (&str, &str), sqm: &str) -> String {
    format!(
        "{id},{id},{id}-d,R,{parent},,,,,,{},{},{},{},,{sqm}",
        down.0, up.0, down.1, up.1
    )
}

/// Plans the three files (no problem but warnings allowed) for `queues`.
fn planned(network: &str, rows: &[String], conf: &str, queues: u32, rr: bool) -> Plan {
    let csv = format!("{HEADER}\n{}\n", rows.join("\n"));
    let l = lqos_model::load_with_config(
        ("network.json", network),
        ("ShapedDevices.csv", csv.as_bytes()),
        Some(("lqos.conf", conf)),
    );
    assert!(!l.report.has_errors(), "{}", l.report);
    let mut cfg = PlanConfig::from_lqos_config(&l.config, queues).unwrap();
    if rr {
        cfg.strategy = QueueStrategy::RoundRobin;
    }
    plan(&l.network, &cfg, None).unwrap()
}

/// A circuit's (download, upload) classes.
fn circuit<'t>(p: &Plan, down: &'t TcTree, up: &'t TcTree, id: &str) -> (&'t Class, &'t Class) {
    let s = p.allocation.circuits.iter().find(|c| c.id == id).unwrap();
    let m = s.queue as u16 + 1;
    (
        &down.classes[&TcHandle::new(m, s.minor)],
        &up.classes[&TcHandle::new(m, s.minor)],
    )
}

fn node<'t>(p: &Plan, t: &'t TcTree, name: &str) -> &'t Class {
    let n = p.allocation.nodes.iter().find(|n| n.name == name).unwrap();
    &t.classes[&TcHandle::new(n.queue as u16 + 1, n.minor)]
}

fn trees(p: &Plan) -> (TcTree, TcTree) {
    (p.interfaces[0].tree(), p.interfaces[1].tree())
}

fn mbps(s: &str) -> Rate {
    Rate::from_mbps_str(s).unwrap()
}

#[test]
fn minimums_a_node_cannot_guarantee_are_squashed_to_one_mbit_or_ten_kbit() {
    // AP (100 Mbit, guarantees 99) with minimums of 100.2 download: every
    // one of its circuits gets 1 Mbit both ways (upload alone would fit).
    // Crowd (10 Mbit, guarantees 9) has 12 circuits: even 12 x 1 Mbit is
    // too much, so 10 kbit. Calm's circuits fit and keep their minimums.
    let net = r#"{"AP": {"downloadBandwidthMbps": 100, "uploadBandwidthMbps": 100},
                  "Crowd": {"downloadBandwidthMbps": 10, "uploadBandwidthMbps": 10},
                  "Calm": {"downloadBandwidthMbps": 100, "uploadBandwidthMbps": 100}}"#;
    let mut rows = vec![
        row("a1", "AP", ("50", "80"), ("2", "10"), ""),
        row("a2", "AP", ("50", "80"), ("2", "10"), ""),
        row("a3", "AP", ("0.2", "0.5"), ("0.2", "0.5"), ""),
        row("k1", "Calm", ("49", "80"), ("49", "80"), ""),
        row("k2", "Calm", ("50", "80"), ("50", "80"), ""),
    ];
    rows.extend((0..12).map(|i| row(&format!("c{i}"), "Crowd", ("1", "5"), ("1", "5"), "")));
    let p = planned(net, &rows, &conf(""), 2, false);
    let (d, u) = trees(&p);
    for id in ["a1", "a2"] {
        let (cd, cu) = circuit(&p, &d, &u, id);
        assert_eq!((cd.htb.rate, cu.htb.rate), (mbps("1"), mbps("1")), "{id}");
    }
    // Under 1 Mbit, 1 Mbit reaches the ceil: just below it.
    let (cd, _) = circuit(&p, &d, &u, "a3");
    assert_eq!(cd.htb.rate, mbps("0.49"));
    for i in 0..12 {
        let (cd, cu) = circuit(&p, &d, &u, &format!("c{i}"));
        assert_eq!((cd.htb.rate, cu.htb.rate), (MIN_RATE, MIN_RATE));
    }
    let (kd, ku) = circuit(&p, &d, &u, "k2");
    assert_eq!((kd.htb.rate, ku.htb.rate), (mbps("50"), mbps("50")));
    // The planner says so: per node, what was asked, what fits, how many
    // circuits, both directions (Calm's fit: not reported).
    let sq = &p.squashed;
    assert_eq!(sq.len(), 2, "{sq:?}");
    let s = &sq[0];
    assert_eq!((s.node.as_str(), s.circuits, s.each), ("AP", 3, mbps("1")));
    assert_eq!(
        (s.asked_down, s.asked_up, s.fits_down, s.fits_up),
        (mbps("100.2"), mbps("4.2"), mbps("99"), mbps("99"))
    );
    assert_eq!(
        (sq[1].node.as_str(), sq[1].circuits, sq[1].each),
        ("Crowd", 12, MIN_RATE)
    );
    assert_eq!((sq[1].asked_down, sq[1].fits_down), (mbps("12"), mbps("9")));
    assert_eq!(
        sq[0].to_string(),
        "node \"AP\": the minimums of its 3 circuit(s) add up to 100.2 / 4.2 Mbps (down / up), \
         more than the 99 / 99 Mbps it guarantees: each gets 1 Mbps"
    );
}

#[test]
fn top_level_nodes_hang_at_the_htb_root_beside_the_link_class() {
    let net = r#"{"Site": {"downloadBandwidthMbps": 500, "uploadBandwidthMbps": 500,
        "children": {"AP": {"downloadBandwidthMbps": 100, "uploadBandwidthMbps": 100}}}}"#;
    let p = planned(
        net,
        &[row("c", "AP", ("1", "10"), ("1", "10"), "")],
        &conf(""),
        2,
        false,
    );
    let (d, _) = trees(&p);
    let site = node(&p, &d, "Site");
    assert_eq!(site.parent, TcHandle::new(site.classid.major(), 0));
    assert_eq!(node(&p, &d, "AP").parent, site.classid);
    // `:1` holds only the default class `:2`.
    let under_link: Vec<TcHandle> = d
        .classes
        .values()
        .filter(|c| c.parent.minor() == 1)
        .map(|c| c.classid)
        .collect();
    assert_eq!(under_link, [TcHandle::new(1, 2), TcHandle::new(2, 2)]);
}

#[test]
fn fast_queues_fq_codel_is_where_fq_codel_replaces_cake() {
    let net = r#"{"Site": {"downloadBandwidthMbps": 1000, "uploadBandwidthMbps": 1000}}"#;
    let rows = [
        row("fast", "Site", ("1", "300"), ("1", "50"), ""),
        row("slow", "Site", ("1", "200"), ("1", "50"), ""),
        row("asked", "Site", ("1", "300"), ("1", "50"), "cake"),
    ];
    let leaf = |p: &Plan, ip: usize, id: &str| {
        let s = p.allocation.circuits.iter().find(|c| c.id == id).unwrap();
        let t = p.interfaces[ip].tree();
        t.qdisc_by_parent()[&TcHandle::new(s.queue as u16 + 1, s.minor)]
            .kind
            .clone()
    };
    let p = planned(net, &rows, &conf("fast_queues_fq_codel = 250"), 1, false);
    assert!(matches!(leaf(&p, 0, "fast"), QdiscKind::FqCodel(_)));
    assert!(matches!(leaf(&p, 0, "slow"), QdiscKind::Cake(_)));
    // An sqm override wins over the threshold; upload is below it.
    assert!(matches!(leaf(&p, 0, "asked"), QdiscKind::Cake(_)));
    assert!(matches!(leaf(&p, 1, "fast"), QdiscKind::Cake(_)));
    // Without the key: 1000 Mbit, LibreQoS's default.
    let p = planned(net, &rows, &conf(""), 1, false);
    assert!(matches!(leaf(&p, 0, "fast"), QdiscKind::Cake(_)));
}

#[test]
fn a_node_of_zero_mbps_takes_its_parents_rate() {
    let net = r#"{"Site": {"downloadBandwidthMbps": 0, "uploadBandwidthMbps": 300,
        "children": {"AP": {"downloadBandwidthMbps": 0, "uploadBandwidthMbps": 0}}}}"#;
    let p = planned(
        net,
        &[row("c", "AP", ("1", "10"), ("1", "10"), "")],
        &conf(""),
        1,
        false,
    );
    let (d, u) = trees(&p);
    // Site: the link's 1000 download; AP: Site's 1000 and 300.
    assert_eq!(node(&p, &d, "Site").htb.ceil, mbps("1000"));
    assert_eq!(node(&p, &d, "AP").htb.ceil, mbps("1000"));
    assert_eq!(node(&p, &u, "AP").htb.ceil, mbps("300"));
}

#[test]
fn nodes_below_level_six_become_children_of_their_level_five_ancestor() {
    // N1 > N2 > ... > N8, N6 at 40 Mbit; the circuit under N8 keeps N6's cap.
    let mut net = String::new();
    for i in 1..=8 {
        let rate = if i == 6 { 40 } else { 1000 - i * 10 };
        net.push_str(&format!(
            "{{\"N{i}\": {{\"downloadBandwidthMbps\": {rate}, \"uploadBandwidthMbps\": {rate}, \"children\": "
        ));
    }
    net.push_str("{}");
    net.push_str(&"}}".repeat(8));
    let p = planned(
        &net,
        &[row("deep", "N8", ("1", "100"), ("1", "100"), "")],
        &conf(""),
        1,
        false,
    );
    let (d, u) = trees(&p);
    let n5 = node(&p, &d, "N5").classid;
    for n in ["N6", "N7", "N8"] {
        assert_eq!(node(&p, &d, n).parent, n5, "{n}");
    }
    assert_eq!(node(&p, &d, "N8").htb.ceil, mbps("40"));
    assert_eq!(circuit(&p, &d, &u, "deep").0.htb.ceil, mbps("40"));
}

#[test]
fn round_robin_is_libreqos_order_over_sorted_names_with_the_generated_parents() {
    // Sorted with Generated_PN_1..2: Alpha, Generated_PN_1, Generated_PN_2,
    // Mid, Zeta -> queues 1, 2, 1, 2, 1.
    let net = r#"{"Zeta": {"downloadBandwidthMbps": 100, "uploadBandwidthMbps": 100},
                  "Alpha": {"downloadBandwidthMbps": 100, "uploadBandwidthMbps": 100},
                  "Mid": {"downloadBandwidthMbps": 100, "uploadBandwidthMbps": 100}}"#;
    // Circuits without a parent, in file order: Generated_PN_1, _2, _1.
    let rows = [
        row("o1", "", ("1", "10"), ("1", "10"), ""),
        row("z", "Zeta", ("1", "10"), ("1", "10"), ""),
        row("o2", "", ("1", "10"), ("1", "10"), ""),
        row("o3", "", ("1", "10"), ("1", "10"), ""),
    ];
    let p = planned(net, &rows, &conf(""), 2, true);
    let queue = |name: &str| {
        p.allocation
            .nodes
            .iter()
            .find(|n| n.name == name)
            .unwrap()
            .queue
            + 1
    };
    assert_eq!(
        ["Alpha", "Generated_PN_1", "Generated_PN_2", "Mid", "Zeta"].map(queue),
        [1, 2, 1, 2, 1]
    );
    let parent = |id: &str| {
        let c = p.allocation.circuits.iter().find(|c| c.id == id).unwrap();
        p.allocation.nodes[c.parent as usize].name.clone()
    };
    assert_eq!(
        ["o1", "o2", "o3"].map(parent),
        ["Generated_PN_1", "Generated_PN_2", "Generated_PN_1"]
    );
}

#[test]
fn capitalised_sqm_values_are_read_case_insensitively() {
    let net = r#"{"Site": {"downloadBandwidthMbps": 100, "uploadBandwidthMbps": 100}}"#;
    let p = planned(
        net,
        &[row("c", "Site", ("1", "3"), ("1", "10"), "Cake / None")],
        &conf(""),
        1,
        false,
    );
    let (d, u) = trees(&p);
    let at = TcHandle::new(1, p.allocation.circuits[0].minor);
    // Download cake (rtt raised to 140 ms at 3 Mbit), upload no leaf.
    match &d.qdisc_by_parent()[&at].kind {
        QdiscKind::Cake(c) => assert_eq!(c.rtt_us, Some(140_000)),
        k => panic!("{k:?}"),
    }
    assert!(!u.qdisc_by_parent().contains_key(&at));
}

#[test]
fn default_class_rate_quantum_and_leaf_handle_are_libreqos_bakerys() {
    let net = r#"{"Site": {"downloadBandwidthMbps": 100, "uploadBandwidthMbps": 100}}"#;
    let p = planned(
        net,
        &[row("c", "Site", ("1", "10"), ("1", "10"), "")],
        &conf(""),
        2,
        false,
    );
    let (d, _) = trees(&p);
    let def = &d.classes[&TcHandle::new(2, 2)];
    // (1000 - 1) / 4 rounded down, ceil 999, prio 5, the link's quantum.
    assert_eq!(
        (def.htb.rate, def.htb.ceil, def.htb.prio, def.htb.quantum),
        (mbps("249"), mbps("999"), 5, 59980)
    );
    assert_eq!(
        d.qdisc_by_parent()[&def.classid].handle,
        TcHandle::new(0x2005, 0)
    );
}

#[test]
fn guaranteed_rates_go_one_mbit_below_the_ceil_and_never_below_ten_kbit() {
    let net = r#"{"Site": {"downloadBandwidthMbps": 100, "uploadBandwidthMbps": 100}}"#;
    let rows = [
        row("one", "Site", ("1", "1"), ("1.5", "1.5"), ""),
        row("fifty", "Site", ("50", "50"), ("0.5", "0.5"), ""),
    ];
    let p = planned(net, &rows, &conf(""), 1, false);
    let (d, u) = trees(&p);
    let (od, ou) = circuit(&p, &d, &u, "one");
    assert_eq!((od.htb.rate, ou.htb.rate), (MIN_RATE, mbps("0.5")));
    let (fd, fu) = circuit(&p, &d, &u, "fifty");
    assert_eq!((fd.htb.rate, fu.htb.rate), (mbps("49"), mbps("0.49")));
    assert_eq!(node(&p, &d, "Site").htb.rate, mbps("99"));
}

#[test]
fn quantum_takes_whole_mbps_and_each_directions_own_link() {
    let net = r#"{"Site": {"downloadBandwidthMbps": 300.25, "uploadBandwidthMbps": 300.25}}"#;
    let c = "[bridge]\nto_internet = \"ens20\"\nto_network = \"ens19\"\n[queues]\ndownlink_bandwidth_mbps = 2000\nuplink_bandwidth_mbps = 500\n";
    let p = planned(
        net,
        &[row("c", "Site", ("1", "10"), ("1", "10"), "")],
        c,
        1,
        false,
    );
    let (d, u) = trees(&p);
    // 300 (not 300.25) x 125000 / r2q(2000 Mbit: 4167) = 8999; upload
    // with r2q(500 Mbit: 1042): 35988.
    assert_eq!(node(&p, &d, "Site").htb.quantum, 8999);
    assert_eq!(node(&p, &u, "Site").htb.quantum, 35988);
    // `:1` and `:2` take the larger link's r2q (4167) on both sides.
    assert_eq!(d.classes[&TcHandle::new(1, 1)].htb.quantum, 59995);
    assert_eq!(u.classes[&TcHandle::new(1, 1)].htb.quantum, 14998);
}

#[test]
fn observe_mode_keeps_only_the_mq_roots() {
    let net = r#"{"Site": {"downloadBandwidthMbps": 100, "uploadBandwidthMbps": 100}}"#;
    let p = planned(
        net,
        &[row("c", "Site", ("1", "10"), ("1", "10"), "")],
        &conf("queue_mode = \"observe\""),
        2,
        false,
    );
    for ip in &p.interfaces {
        assert_eq!(ip.ops.len(), 1, "{}", ip.dev);
        assert!(ip.tree().classes.is_empty());
    }
    assert!(p.ip_map.is_empty());
    // Shaping again keeps the classids the observe plan allocated.
    assert_eq!(p.allocation.circuits.len(), 1);
}

#[test]
fn a_circuit_whose_parent_node_is_not_in_network_json_is_not_shaped() {
    // LibreQoS HEAD loads the file, attaches the circuit nowhere (no
    // class, no leaf, no IP mapping) and lists it as not shaped; the
    // other circuits are planned as if its row were not there.
    let net = r#"{"Site": {"downloadBandwidthMbps": 500, "uploadBandwidthMbps": 500,
        "children": {"AP": {"downloadBandwidthMbps": 100, "uploadBandwidthMbps": 100}}}}"#;
    let row_ip = |id: &str, parent: &str, ip: &str| {
        format!("{id},{id},{id}-d,R,{parent},,,,{ip},,1,1,10,10,,")
    };
    let shaped = [
        row_ip("a", "AP", "100.64.0.1"),
        row_ip("b", "Site", "100.64.0.2"),
        row_ip("c", "", "100.64.0.3"),
    ];
    let orphan = row_ip("o", "Gone", "100.64.0.9");
    let mut rows = shaped.to_vec();
    rows.insert(1, orphan);
    let p = planned(net, &rows, &conf(""), 2, true);
    let without = planned(net, &shaped, &conf(""), 2, true);
    assert!(p.allocation.circuits.iter().all(|c| c.id != "o"));
    assert_eq!(p.allocation, without.allocation);
    assert_eq!(trees(&p), trees(&without));
    assert!(p.ip_map.lookup("100.64.0.9".parse().unwrap()).is_none());
    for (ip, id) in [("100.64.0.1", "a"), ("100.64.0.3", "c")] {
        assert_eq!(p.ip_map.lookup(ip.parse().unwrap()).unwrap().circuit_id, id);
    }
    // The circuit without a parent still goes under a generated parent
    // node: only an unknown name leaves a circuit out.
    let c = p.allocation.circuits.iter().find(|c| c.id == "c").unwrap();
    assert!(p.allocation.nodes[c.parent as usize].generated);
}
