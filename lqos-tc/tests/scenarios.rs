//! Concrete planner, render and diff scenarios.

mod common;

use common::*;
use lqos_model::{Network, Rate};
use lqos_tc::config::{Interfaces, LeafSpec, QueueStrategy};
use lqos_tc::ops::QdiscKind;
use lqos_tc::parse::parse_batch;
use lqos_tc::render::{render_combined, render_interface};
use lqos_tc::tree::TcTree;
use lqos_tc::{diff, DiffSummary};
use lqos_tc::{plan, PlanConfig, PlanError, TcHandle, TcOp};

fn sites() -> Network {
    let mut net = Network::new();
    net.add_node(None, node("Site_1", 1000, 500)).unwrap();
    net.add_node(Some("Site_1"), node("AP_A", 500, 100))
        .unwrap();
    net.add_node(None, node("Site_2", 200, 200)).unwrap();
    net.add_circuit(circuit("c1", Some("AP_A"), "2.5", "10.5", "1", "5.25"));
    net.add_circuit(circuit("c2", Some("AP_A"), "25", "600", "10", "50"));
    net.add_circuit(circuit("c3", Some("Site_2"), "100", "100", "10", "20"));
    net
}

fn cfg(queues: u32) -> PlanConfig {
    PlanConfig::bridge("ens19", "ens20", queues)
}

fn class(t: &TcTree, maj: u16, min: u16) -> &lqos_tc::ops::Class {
    &t.classes[&TcHandle::new(maj, min)]
}

#[test]
fn tree_shape_matches_libreqos() {
    let p = plan(&sites(), &cfg(2), None).unwrap();
    let down = p.interface("ens19").unwrap();
    let up = p.interface("ens20").unwrap();
    let text = render_interface(down, false);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "qdisc replace dev ens19 root handle 7fff: mq");
    assert_eq!(
        lines[1],
        "qdisc add dev ens19 parent 7fff:1 handle 1: htb default 2"
    );
    assert_eq!(
        lines[2],
        "class add dev ens19 parent 1: classid 1:1 htb rate 1gbit ceil 1gbit prio 0 quantum 59980"
    );
    assert_eq!(
        lines[3],
        "class add dev ens19 parent 1:1 classid 1:2 htb rate 249mbit ceil 999mbit prio 5 quantum 59980"
    );
    assert_eq!(
        lines[4],
        "qdisc add dev ens19 parent 1:2 handle 2003: cake diffserv4"
    );
    assert_eq!(down.setup_ops, 1 + 2 * 4);
    let t = down.tree();
    let tu = up.tree();
    // Site_1 is the biggest subtree: queue 1 (balanced), minor 3.
    let s1 = p
        .allocation
        .nodes
        .iter()
        .find(|n| n.name == "Site_1")
        .unwrap();
    let ap = p
        .allocation
        .nodes
        .iter()
        .find(|n| n.name == "AP_A")
        .unwrap();
    assert_eq!((s1.queue, s1.minor), (0, 3));
    // Top-level nodes hang at the HTB's root, beside `:1`.
    assert_eq!(class(&t, 1, 3).parent, TcHandle::new(1, 0));
    assert_eq!(class(&t, 1, 3).htb.ceil, Rate::from_mbps(1000));
    assert_eq!(class(&t, 1, 3).htb.rate, Rate::from_mbps(999));
    assert_eq!(class(&tu, 1, 3).htb.ceil, Rate::from_mbps(500));
    let apc = class(&t, 1, ap.minor);
    assert_eq!(apc.parent, TcHandle::new(1, 3));
    // c1: download 2.5/10.5 on ens19, upload 1/5.25 on ens20.
    let c1 = p.allocation.circuits.iter().find(|c| c.id == "c1").unwrap();
    let k = class(&t, 1, c1.minor);
    assert_eq!(k.parent, TcHandle::new(1, ap.minor));
    assert_eq!(
        (k.htb.rate, k.htb.ceil, k.htb.prio),
        (Rate::from_bps(2_500_000), Rate::from_bps(10_500_000), 3)
    );
    let ku = class(&tu, 1, c1.minor);
    assert_eq!(
        (ku.htb.rate, ku.htb.ceil),
        (Rate::from_bps(1_000_000), Rate::from_bps(5_250_000))
    );
    // c2: ceil capped by AP_A (500 / 100); c3: min >= max -> just below.
    let c2 = p.allocation.circuits.iter().find(|c| c.id == "c2").unwrap();
    assert_eq!(class(&t, 1, c2.minor).htb.ceil, Rate::from_mbps(500));
    assert_eq!(class(&tu, 1, c2.minor).htb.ceil, Rate::from_mbps(50));
    let c3 = p.allocation.circuits.iter().find(|c| c.id == "c3").unwrap();
    assert_eq!(c3.queue, 1);
    assert_eq!(class(&t, 2, c3.minor).htb.rate, Rate::from_mbps(99));
    // Every leaf has an explicit handle; the first circuit leaf follows the
    // HTB majors (1-2) and twice as many (3-4, once the default classes'
    // leaves; those are LibreQoS's bakery's now, 2003: and 2005:).
    assert_eq!(c1.leaf_download, Some(5));
    assert_eq!(
        p.interfaces[0].queue_class_counts,
        vec![2 + 2 + 2, 2 + 1 + 1]
    );
    assert_eq!(
        p.labels("ens19")[&TcHandle::new(1, c1.minor)],
        "circuit c1 Circuit c1"
    );
}

#[test]
fn on_a_stick_splits_majors() {
    let mut c = cfg(4);
    c.interfaces = Interfaces::OnAStick {
        interface: "ens19".into(),
        internet_vlan: 2,
        network_vlan: 3,
    };
    let p = plan(&sites(), &c, None).unwrap();
    assert_eq!(p.interfaces.len(), 1);
    let ip = &p.interfaces[0];
    assert_eq!(ip.htb_majors(), vec![1, 2, 3, 4]);
    let t = ip.try_tree().unwrap();
    let c1 = p.allocation.circuits.iter().find(|c| c.id == "c1").unwrap();
    let d = class(
        &t,
        p.major(lqos_tc::allocation::Direction::Download, c1.queue),
        c1.minor,
    );
    let u = class(
        &t,
        p.major(lqos_tc::allocation::Direction::Upload, c1.queue),
        c1.minor,
    );
    assert_eq!(d.htb.ceil, Rate::from_bps(10_500_000));
    assert_eq!(u.htb.ceil, Rate::from_bps(5_250_000));
    assert_eq!(u.classid.major(), d.classid.major() + 2);
    assert_eq!(
        ip.ops
            .iter()
            .filter(|o| matches!(o, TcOp::ReplaceQdisc(_)))
            .count(),
        1
    );
    // Leaves of both directions share the interface's handle space.
    assert_ne!(c1.leaf_download, c1.leaf_upload);
    assert!(c1.leaf_download.unwrap() > 8 && c1.leaf_upload.unwrap() > 8);
    let mut one = c;
    one.queues = 1;
    assert!(plan(&sites(), &one, None).is_err());
}

#[test]
fn virtual_nodes_get_no_class_and_unparented_circuits_get_generated_parents() {
    let mut net = Network::new();
    let mut v = node("Virtual", 100, 100);
    v.virtual_node = true;
    net.add_node(None, node("Real", 1000, 1000)).unwrap();
    net.add_node(Some("Real"), v.clone()).unwrap();
    net.add_node(Some("Virtual"), node("Child", 300, 300))
        .unwrap();
    let mut v2 = v;
    v2.name = "TopVirtual".into();
    net.add_node(None, v2).unwrap();
    net.add_node(Some("TopVirtual"), node("Promoted", 300, 300))
        .unwrap();
    net.add_circuit(circuit("a", Some("Virtual"), "1", "10", "1", "10"));
    net.add_circuit(circuit("b", Some("TopVirtual"), "1", "10", "1", "10"));
    net.add_circuit(circuit("c", None, "1", "10", "1", "10"));
    net.add_circuit(circuit("d", None, "1", "10", "1", "10"));
    net.add_circuit(circuit("e", None, "1", "10", "1", "10"));
    let p = plan(&net, &cfg(2), None).unwrap();
    let names: Vec<&str> = p.allocation.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "Real",
            "Child",
            "Promoted",
            "Generated_PN_1",
            "Generated_PN_2"
        ]
    );
    let child = &p.allocation.nodes[1];
    assert_eq!(child.parent, Some(0));
    assert_eq!(p.allocation.nodes[2].parent, None);
    let a = &p.allocation.circuits[0];
    assert_eq!(p.allocation.nodes[a.parent as usize].name, "Real");
    // b (under a top-level virtual node), c, d, e spread over the generated nodes.
    let gen: Vec<&str> = p.allocation.circuits[1..]
        .iter()
        .map(|c| p.allocation.nodes[c.parent as usize].name.as_str())
        .collect();
    assert_eq!(gen.iter().filter(|n| **n == "Generated_PN_1").count(), 2);
    assert_eq!(gen.iter().filter(|n| **n == "Generated_PN_2").count(), 2);
    // Generated parents use generated_pn rates capped by the link.
    let t = p.interfaces[0].tree();
    let g1 = &p.allocation.nodes[3];
    assert_eq!(
        class(&t, g1.queue as u16 + 1, g1.minor).htb.ceil,
        Rate::from_mbps(1000)
    );
    // A flat network: all circuits under generated parents.
    let mut flat = Network::new();
    flat.add_circuit(circuit("x", Some("Nowhere"), "1", "10", "1", "10"));
    let p = plan(&flat, &cfg(2), None).unwrap();
    assert_eq!(p.allocation.nodes.len(), 2);
    // Unknown parent in a real hierarchy is an error naming both.
    net.add_circuit(circuit("z", Some("Nowhere"), "1", "10", "1", "10"));
    let e = plan(&net, &cfg(2), None).unwrap_err();
    assert_eq!(
        e.to_string(),
        "circuit \"z\": parent node \"Nowhere\" is not in network.json"
    );
}

#[test]
fn htb_depth_limit_is_a_clear_error() {
    let mut net = Network::new();
    let mut parent: Option<String> = None;
    for i in 0..8 {
        let name = format!("L{i}");
        net.add_node(parent.as_deref(), node(&name, 100, 100))
            .unwrap();
        parent = Some(name);
    }
    // 8 node levels (top-level nodes at the HTB root are level 1): fine
    // without circuits.
    plan(&net, &cfg(1), None).unwrap();
    net.add_circuit(circuit("deep", Some("L7"), "1", "10", "1", "10"));
    let e = plan(&net, &cfg(1), None).unwrap_err();
    assert!(matches!(e, PlanError::TooDeep { levels: 9, .. }), "{e}");
    assert!(
        e.to_string().contains("circuit \"deep\" under node \"L7\""),
        "{e}"
    );
    net.set_circuits(vec![]);
    net.add_node(Some("L7"), node("L8", 100, 100)).unwrap();
    let e = plan(&net, &cfg(1), None).unwrap_err();
    assert!(e.to_string().contains("node \"L8\""), "{e}");
}

#[test]
fn leaf_qdisc_choices() {
    let mut net = Network::new();
    net.add_node(None, node("S", 10_000, 10_000)).unwrap();
    net.add_circuit(circuit("slow", Some("S"), "0.5", "1", "0.5", "3"));
    net.add_circuit(circuit("fast", Some("S"), "100", "1200", "100", "1000"));
    net.add_circuit(with_sqm(
        circuit("none", Some("S"), "1", "50", "1", "50"),
        "none",
        "fq_codel",
    ));
    net.add_circuit(with_sqm(
        circuit("pair", Some("S"), "1", "50", "1", "50"),
        "cake",
        "pfifo limit 50",
    ));
    net.add_circuit(with_sqm(
        circuit("bad", Some("S"), "1", "50", "1", "50"),
        "sfq",
        "",
    ));
    let mut c = cfg(1);
    c.download_capacity = Rate::from_mbps(10_000);
    c.upload_capacity = Rate::from_mbps(10_000);
    let e = plan(&net, &c, None).unwrap_err();
    assert!(
        e.to_string().starts_with("circuit \"bad\": sqm \"sfq\""),
        "{e}"
    );
    // Read from a file, the error names the CSV line.
    let mut circuits = net.circuits().to_vec();
    circuits.last_mut().unwrap().sqm.as_mut().unwrap().line = 7;
    net.set_circuits(circuits);
    let e = plan(&net, &c, None).unwrap_err();
    assert_eq!(
        e.to_string(),
        "circuit \"bad\" (ShapedDevices line 7): sqm \"sfq\": unsupported qdisc kind \"sfq\" (cake, fq_codel, pfifo, bfifo, none)"
    );
    let mut circuits = net.circuits().to_vec();
    circuits.pop();
    net.set_circuits(circuits);
    let p = plan(&net, &c, None).unwrap();
    let text =
        render_interface(&p.interfaces[0], false) + &render_interface(&p.interfaces[1], false);
    let leaf = |dev: &str, id: &str| -> Option<String> {
        let slot = p.allocation.circuits.iter().find(|c| c.id == id).unwrap();
        let parent = format!("dev {dev} parent 1:{:x} handle", slot.minor);
        text.lines()
            .find(|l| l.contains(&parent))
            .map(|l| l.split(": ").nth(1).unwrap().to_string())
    };
    assert_eq!(
        leaf("ens19", "slow").as_deref(),
        Some("cake diffserv4 rtt 300ms")
    );
    assert_eq!(
        leaf("ens20", "slow").as_deref(),
        Some("cake diffserv4 rtt 140ms")
    );
    assert_eq!(leaf("ens19", "fast").as_deref(), Some("fq_codel"));
    assert_eq!(leaf("ens20", "fast").as_deref(), Some("fq_codel"));
    assert_eq!(leaf("ens19", "none"), None);
    assert_eq!(leaf("ens20", "none").as_deref(), Some("fq_codel"));
    assert_eq!(leaf("ens19", "pair").as_deref(), Some("cake diffserv4"));
    assert_eq!(leaf("ens20", "pair").as_deref(), Some("pfifo limit 50"));
    let slot = p
        .allocation
        .circuits
        .iter()
        .find(|c| c.id == "none")
        .unwrap();
    assert_eq!(slot.leaf_download, None);
    // default_sqm none: no leaves anywhere (not even on the default class).
    c.default_sqm = LeafSpec::None;
    let p = plan(&net, &c, None).unwrap();
    let t = p.interfaces[0].tree();
    assert!(t
        .qdiscs
        .values()
        .all(|q| !matches!(q.kind, QdiscKind::Cake(_)) || q.parent.minor() != 2));
    // pfifo default: no fq_codel switch above 1 Gbit (the threshold is a cake thing).
    c.default_sqm = "pfifo".parse().unwrap();
    let p = plan(&net, &c, None).unwrap();
    assert!(!render_interface(&p.interfaces[0], false).contains("fq_codel"));
    assert_eq!(
        render_interface(&p.interfaces[1], false)
            .lines()
            .filter(|l| l.contains("fq_codel"))
            .count(),
        1
    );
}

/// Regression: text from the CSV must never reach a batch file.
#[test]
fn regression_hostile_names_cannot_inject_commands() {
    let mut net = Network::new();
    let evil = "x\n qdisc del dev ens19 root # \\";
    net.add_node(None, node(evil, 100, 100)).unwrap();
    let mut c = circuit(
        "id\nqdisc del dev ens19 root",
        Some(evil),
        "1",
        "10",
        "1",
        "10",
    );
    c.name = "# \r\nqdisc del dev ens19 root\\".into();
    c.comment = "\nqdisc del dev ens19 root".into();
    net.add_circuit(c);
    let p = plan(&net, &cfg(1), None).unwrap();
    for text in [
        render_interface(&p.interfaces[0], true),
        render_combined(&p, false),
    ] {
        assert!(!text.contains('#'));
        assert!(!text.contains('\\'));
        assert!(!text.contains('\r'));
        let dels = text.lines().filter(|l| l.contains(" del ")).count();
        assert!(dels <= 1, "{text}");
        let parsed = parse_batch(&text).unwrap();
        assert_eq!(parsed.len(), text.lines().count());
    }
    // show/verify labels keep the raw text; printing escapes it.
    assert!(p.labels("ens19").values().any(|l| l.contains('\n')));
}

#[test]
fn combined_file_interleaves_like_libreqos() {
    let p = plan(&sites(), &cfg(1), None).unwrap();
    let text = render_combined(&p, false);
    let devs: Vec<&str> = text
        .lines()
        .map(|l| l.split(" dev ").nth(1).unwrap().split(' ').next().unwrap())
        .collect();
    let setup = p.interfaces[0].setup_ops;
    assert!(devs[..setup].iter().all(|d| *d == "ens19"));
    assert!(devs[setup..2 * setup].iter().all(|d| *d == "ens20"));
    // Then LibreQoS.py's walk: per node depth-first its class on both
    // interfaces, then its circuits (class + leaf on one, then the other),
    // then its child nodes.
    let lines: Vec<&str> = text.lines().collect();
    let tail: Vec<String> = lines[2 * setup..]
        .iter()
        .map(|l| {
            let w: Vec<&str> = l.split(' ').collect();
            let id = if w[0] == "class" { w[7] } else { w[5] };
            format!("{} {} {}", w[0], w[3], id)
        })
        .collect();
    assert_eq!(
        tail,
        [
            "class ens19 1:3", // Site_1
            "class ens20 1:3",
            "class ens19 1:4", // AP_A
            "class ens20 1:4",
            "class ens19 1:6", // c1
            "qdisc ens19 1:6",
            "class ens20 1:6",
            "qdisc ens20 1:6",
            "class ens19 1:7", // c2
            "qdisc ens19 1:7",
            "class ens20 1:7",
            "qdisc ens20 1:7",
            "class ens19 1:5", // Site_2
            "class ens20 1:5",
            "class ens19 1:8", // c3
            "qdisc ens19 1:8",
            "class ens20 1:8",
            "qdisc ens20 1:8",
        ],
        "{text}"
    );
}

#[test]
fn balanced_beats_round_robin_on_uneven_sites() {
    let mut net = Network::new();
    for (i, n) in [
        (0, 40),
        (1, 1),
        (2, 1),
        (3, 1),
        (4, 30),
        (5, 20),
        (6, 2),
        (7, 2),
    ] {
        let name = format!("S{i}");
        net.add_node(None, node(&name, 1000, 1000)).unwrap();
        for k in 0..n {
            net.add_circuit(circuit(
                &format!("{i}-{k}"),
                Some(&name),
                "1",
                "10",
                "1",
                "10",
            ));
        }
    }
    let cost = |s: QueueStrategy| {
        let mut c = cfg(4);
        c.strategy = s;
        let p = plan(&net, &c, None).unwrap();
        p.interfaces[0]
            .queue_class_counts
            .iter()
            .map(|&n| n * n)
            .sum::<usize>()
    };
    let (b, rr) = (
        cost(QueueStrategy::Balanced),
        cost(QueueStrategy::RoundRobin),
    );
    assert!(b < rr, "balanced {b} round-robin {rr}");
    // Round robin is LibreQoS's: top-level node i goes to queue i % n.
    let mut rr = cfg(4);
    rr.strategy = QueueStrategy::RoundRobin;
    let p = plan(&net, &rr, None).unwrap();
    let queues: Vec<u32> = p.allocation.nodes.iter().map(|n| n.queue).collect();
    assert_eq!(queues, [0, 1, 2, 3, 0, 1, 2, 3]);
}

#[test]
fn stable_allocation_and_incremental_diff() {
    let net = sites();
    let c = cfg(2);
    let p1 = plan(&net, &c, None).unwrap();
    let slot = |p: &lqos_tc::Plan, id: &str| {
        p.allocation
            .circuits
            .iter()
            .find(|c| c.id == id)
            .unwrap()
            .clone()
    };
    let lines = |ops: &[TcOp]| -> Vec<String> {
        ops.iter()
            .map(|o| lqos_tc::render::render_line("ens19", o))
            .collect()
    };
    // Change c1's rate, remove c2, add c4 under AP_A.
    let mut net2 = Network::new();
    net2.add_node(None, node("Site_1", 1000, 500)).unwrap();
    net2.add_node(Some("Site_1"), node("AP_A", 500, 100))
        .unwrap();
    net2.add_node(None, node("Site_2", 200, 200)).unwrap();
    net2.add_circuit(circuit("c1", Some("AP_A"), "2.5", "20", "1", "5.25"));
    net2.add_circuit(circuit("c3", Some("Site_2"), "100", "100", "10", "20"));
    net2.add_circuit(circuit("c4", Some("AP_A"), "1", "10", "1", "10"));
    let p2 = plan(&net2, &c, Some(&p1.allocation)).unwrap();
    assert_eq!(slot(&p1, "c1"), slot(&p2, "c1"));
    assert_eq!(slot(&p1, "c3"), slot(&p2, "c3"));
    // c4 takes the minor and leaf handle c2 freed: the kernel just sees a change.
    assert_eq!(slot(&p2, "c4").minor, slot(&p1, "c2").minor);
    assert_eq!(slot(&p2, "c4").leaf_download, slot(&p1, "c2").leaf_download);
    let (t1, t2) = (p1.interfaces[0].tree(), p2.interfaces[0].tree());
    let ops = diff(&t1, &t2);
    let c1 = slot(&p1, "c1");
    let ap = p1
        .allocation
        .nodes
        .iter()
        .find(|n| n.name == "AP_A")
        .unwrap();
    assert_eq!(
        lines(&ops),
        [
            format!("class change dev ens19 parent 1:{:x} classid 1:{:x} htb rate 2500kbit ceil 20mbit prio 3 quantum 1522", ap.minor, c1.minor),
            format!("class change dev ens19 parent 1:{:x} classid 1:{:x} htb rate 1mbit ceil 10mbit prio 3 quantum 1522", ap.minor, slot(&p1, "c2").minor),
        ]
    );
    assert_eq!(
        DiffSummary::of(&ops).to_string(),
        "0 added, 2 changed, 0 removed"
    );
    let mut t = t1.clone();
    t.apply_all(&ops).unwrap();
    assert_eq!(t, t2);

    // Move c3 from Site_2 (queue 2) to AP_A (queue 1): delete (leaf first) + add (class first).
    let mut net3 = sites();
    let mut circuits = net3.circuits().to_vec();
    circuits[2].parent = Some("AP_A".into());
    net3.set_circuits(circuits);
    let p3 = plan(&net3, &c, Some(&p1.allocation)).unwrap();
    let c3 = slot(&p1, "c3");
    let n3 = slot(&p3, "c3");
    assert_eq!(n3.leaf_download, c3.leaf_download);
    let ops = diff(&t1, &p3.interfaces[0].tree());
    assert_eq!(
        lines(&ops),
        [
            format!("qdisc del dev ens19 parent 2:{:x} handle {:x}:", c3.minor, c3.leaf_download.unwrap()),
            format!("class del dev ens19 parent 2:3 classid 2:{:x}", c3.minor),
            format!("class add dev ens19 parent 1:{:x} classid 1:{:x} htb rate 99mbit ceil 100mbit prio 3 quantum 5998", ap.minor, n3.minor),
            format!("qdisc add dev ens19 parent 1:{:x} handle {:x}: cake diffserv4", n3.minor, c3.leaf_download.unwrap()),
        ]
    );
    let s = DiffSummary::of(&ops);
    assert_eq!((s.added, s.changed, s.removed), (2, 0, 2));
}

#[test]
fn leaf_changes_replace_in_place_or_delete_and_add() {
    let mut net = Network::new();
    net.add_node(None, node("S", 1000, 1000)).unwrap();
    net.add_circuit(circuit("a", Some("S"), "1", "3", "1", "50"));
    let c = cfg(1);
    let p1 = plan(&net, &c, None).unwrap();
    // Rate up: cake rtt 140ms goes back to the default (sent explicitly).
    net.set_circuits(vec![circuit("a", Some("S"), "1", "50", "1", "50")]);
    let p2 = plan(&net, &c, Some(&p1.allocation)).unwrap();
    let ops = diff(&p1.interfaces[0].tree(), &p2.interfaces[0].tree());
    let text: Vec<String> = ops
        .iter()
        .map(|o| lqos_tc::render::render_line("ens19", o))
        .collect();
    assert_eq!(text.len(), 2, "{text:?}");
    assert!(text.iter().any(|l| l.starts_with("class change")));
    assert!(
        text.iter()
            .any(|l| l == "qdisc replace dev ens19 parent 1:4 handle 3: cake diffserv4 rtt 100ms"),
        "{text:?}"
    );
    // Kind change (cake -> fq_codel): delete + add (the kernel cannot change a kind in place).
    net.set_circuits(vec![with_sqm(
        circuit("a", Some("S"), "1", "50", "1", "50"),
        "fq_codel",
        "",
    )]);
    let p3 = plan(&net, &c, Some(&p2.allocation)).unwrap();
    let ops = diff(&p2.interfaces[0].tree(), &p3.interfaces[0].tree());
    let text: Vec<String> = ops
        .iter()
        .map(|o| lqos_tc::render::render_line("ens19", o))
        .collect();
    assert_eq!(
        text,
        [
            "qdisc del dev ens19 parent 1:4 handle 3:",
            "qdisc add dev ens19 parent 1:4 handle 3: fq_codel"
        ]
    );
    assert!(diff(&p3.interfaces[1].tree(), &p2.interfaces[1].tree()).is_empty());
}

#[test]
fn queue_count_change_rebuilds() {
    let p1 = plan(&sites(), &cfg(2), None).unwrap();
    let p2 = plan(&sites(), &cfg(3), Some(&p1.allocation)).unwrap();
    let (t1, t2) = (p1.interfaces[0].tree(), p2.interfaces[0].tree());
    let ops = diff(&t1, &t2);
    assert_eq!(ops[0], TcOp::delete_root());
    assert_eq!(ops.len(), p2.interfaces[0].ops.len() + 1);
    let mut t = t1;
    t.apply_all(&ops).unwrap();
    assert_eq!(t, t2);
    // Against an empty interface: a full build, no root delete.
    let fresh = diff(&TcTree::default(), &t2);
    assert_eq!(fresh.len(), p2.interfaces[0].ops.len());
    assert_eq!(TcTree::from_ops(&fresh).unwrap(), t2);
    assert_eq!(diff(&t2, &TcTree::default()), vec![TcOp::delete_root()]);
}

/// Regression: `diff` rebuilt over a live root with another handle (an
/// `htb 1:` root, say) without deleting it first, relying on the root
/// replace, while `lqos apply` deleted it; the multi-interface load hoists
/// that delete so every old tree is gone before any build. Both now follow
/// `rules::rebuild_deletes_root`.
#[test]
fn regression_rebuild_over_another_root_handle_deletes_it_first() {
    let p = plan(&sites(), &cfg(2), None).unwrap();
    let planned = p.interfaces[0].tree();
    let other = TcTree::from_ops(
        &parse_batch("qdisc replace dev ens19 root handle 1: htb default 2\n")
            .unwrap()
            .into_iter()
            .map(|(_, op)| op)
            .collect::<Vec<_>>(),
    )
    .unwrap();
    let ops = diff(&other, &planned);
    assert_eq!(ops[0], TcOp::delete_root());
    assert_eq!(ops.len(), p.interfaces[0].ops.len() + 1);
    let mut t = other;
    t.apply_all(&ops).unwrap();
    assert_eq!(t, planned);
}

#[test]
fn overflow_errors_name_the_queue_and_interface() {
    let mut net = Network::new();
    for i in 0..65_534 {
        net.add_circuit(circuit(&format!("c{i}"), None, "1", "10", "1", "10"));
    }
    let mut c = cfg(1);
    c.default_sqm = LeafSpec::None;
    let e = plan(&net, &c, None).unwrap_err();
    assert_eq!(e, PlanError::MinorOverflow { queue: 1, major: 1 });
    assert!(e.to_string().starts_with("queue 1 (HTB 1:)"), "{e}");
    c.queues = 4;
    c.default_sqm = "pfifo".parse().unwrap();
    let e = plan(&net, &c, None).unwrap_err();
    assert!(
        matches!(&e, PlanError::LeafMajorOverflow { interface, .. } if interface == "ens19"),
        "{e}"
    );
    c.default_sqm = LeafSpec::None;
    plan(&net, &c, None).unwrap();
}

#[test]
fn duplicate_circuit_ids_are_rejected() {
    let mut net = sites();
    net.add_circuit(circuit("c1", Some("Site_2"), "1", "10", "1", "10"));
    assert_eq!(
        plan(&net, &cfg(1), None).unwrap_err(),
        PlanError::DuplicateCircuit("c1".into())
    );
}

#[test]
fn tree_model_enforces_kernel_rules() {
    let p = plan(&sites(), &cfg(1), None).unwrap();
    let t = p.interfaces[0].tree();
    let ops = parse_batch(
        "qdisc add dev x parent 1:3 handle 50: pfifo\n\
         class del dev x classid 1:3\n\
         class add dev x parent 1:99 classid 1:77 htb rate 1mbit\n\
         class add dev x parent 1:1 classid 1:3 htb rate 1mbit\n\
         class change dev x parent 1:1 classid 1:77 htb rate 1mbit\n\
         qdisc add dev x parent 1:2 handle 60: pfifo\n\
         qdisc replace dev x parent 1:2 handle 3: fq_codel\n\
         qdisc replace dev x parent 7fff:1 handle 1: htb default 2\n\
         qdisc del dev x parent 1:2 handle 99:\n",
    )
    .unwrap();
    for (_, op) in &ops {
        let mut tt = t.clone();
        assert!(tt.apply(op).is_err(), "{op:?} should fail");
        assert_eq!(tt, t, "a failed op leaves the tree alone");
    }
    // Adding a child under a leaf class destroys its leaf qdisc (as the kernel does).
    let mut tt = t.clone();
    let c1 = &p.allocation.circuits[0];
    let leaf = TcHandle::new(c1.leaf_download.unwrap(), 0);
    assert!(tt.qdiscs.contains_key(&leaf));
    tt.apply(
        &parse_batch(&format!(
            "class add dev x parent 1:{:x} classid 1:999 htb rate 1mbit",
            c1.minor
        ))
        .unwrap()[0]
            .1,
    )
    .unwrap();
    assert!(!tt.qdiscs.contains_key(&leaf));
    // Root delete clears everything.
    tt.apply(&TcOp::delete_root()).unwrap();
    assert_eq!(tt, TcTree::default());
    assert!(tt.apply(&TcOp::delete_root()).is_err());
}

/// A bad `sqm` cell read from ShapedDevices.csv: the loader warns about
/// the unknown qdisc, and the plan refuses it naming the circuit and the
/// CSV line (comments and the header count).
#[test]
fn sqm_error_names_the_csv_line() {
    let csv = "Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,Parent Node ID,Anchor Node ID,MAC,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,Comment,sqm\n\
               # a comment line\n\
               c1,One,d1,R1,,,,,100.64.0.1,,1,1,10,10,,cake\n\
               c2,Two,d2,R2,,,,,100.64.0.2,,1,1,10,10,,fq_codel/sfq\n";
    let loaded = lqos_model::load(
        ("network.json", "{}"),
        ("ShapedDevices.csv", csv.as_bytes()),
    );
    assert!(!loaded.report.has_errors(), "{}", loaded.report);
    let e = plan(&loaded.network, &cfg(2), None).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("circuit \"c2\" (ShapedDevices line 4): sqm \"sfq\": "),
        "{e}"
    );
}

/// Regression: on a single-queue interface the HTB is the root, created by
/// `qdisc replace`; `htb_majors` (whose classes the lazy-leaf poll dumps)
/// missed it, so that poll saw no classes there.
#[test]
fn htb_majors_include_a_single_queue_htb_root() {
    let p = plan(&sites(), &cfg(1), None).unwrap();
    for ip in &p.interfaces {
        assert!(ip.ops[..ip.setup_ops]
            .iter()
            .any(|op| matches!(op, lqos_tc::TcOp::ReplaceQdisc(_))));
        assert_eq!(ip.htb_majors().len(), 1, "{}", ip.dev);
    }
    let p = plan(&sites(), &cfg(4), None).unwrap();
    for ip in &p.interfaces {
        assert_eq!(ip.htb_majors().len(), 4, "{}", ip.dev);
    }
}
