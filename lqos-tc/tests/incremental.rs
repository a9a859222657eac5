//! The incremental edit path (`lqos watch` after a ShapedDevices.csv edit)
//! against the full one: random edits of rates, names, comments, MACs,
//! addresses, sqm, parents and IDs on random rows of generated networks.
//!
//! - Whatever [`DevicesIndex::edit`] accepts as a patch is valid for the
//!   full reader too, with the same circuits and the same problems on the
//!   changed circuits' lines; an edit the full reader rejects is never a
//!   patch (so invalid input always gets the full report).
//! - A patched plan ([`replan_circuits`]) equals the full plan of the new
//!   files with the old allocation, and [`known_diff`] sends what the full
//!   diff sends.
//! - The index after [`DevicesIndex::commit`] keeps working: edits are
//!   applied in rounds, each on top of the last good state.

use lqos_model::config::Classifier;
use lqos_model::devices_index::{DevicesEdit, DevicesIndex};
use lqos_model::write::{write_network_json, write_shaped_devices};
use lqos_model::{generate, load, GenParams, Network, Rate, SqmOverride};
use lqos_tc::config::{Interfaces, LeafSpec};
use lqos_tc::diff;
use lqos_tc::replan::{known_diff, PlanIndex, Replan};
use lqos_tc::{plan, Plan, PlanConfig, TcOp};
use proptest::prelude::*;

const FILE: &str = "ShapedDevices.csv";

fn config(variant: u8) -> PlanConfig {
    let mut cfg = PlanConfig::bridge("ens19", "ens20", 4);
    match variant {
        0 => {}
        1 => cfg.default_sqm = LeafSpec::None,
        2 => {
            cfg.interfaces = Interfaces::OnAStick {
                interface: "eth0".into(),
                internet_vlan: 2,
                network_vlan: 3,
            };
            cfg.default_sqm = "fq_codel".parse().unwrap();
        }
        _ => {
            cfg.classifier = Classifier::Tc;
            cfg.default_sqm = "pfifo".parse().unwrap();
        }
    }
    cfg
}

/// One edit: which circuit (modulo), what, a value.
#[derive(Debug, Clone)]
struct Edit {
    circuit: usize,
    kind: u8,
    val: u32,
}

fn edits() -> impl Strategy<Value = Vec<Edit>> {
    proptest::collection::vec(
        (0usize..1000, 0u8..16, 0u32..1000).prop_map(|(circuit, kind, val)| Edit {
            circuit,
            kind,
            val,
        }),
        1..4,
    )
}

const RATES: [u64; 6] = [5, 20, 50, 100, 250, 2000];

/// Applies `e` to the circuits of `net` (a copy with the edit).
fn apply(net: &Network, e: &Edit) -> Network {
    let mut circuits = net.circuits().to_vec();
    let n = circuits.len();
    let other = circuits[(e.circuit + 1 + e.val as usize) % n].clone();
    let c = &mut circuits[e.circuit % n];
    let v = e.val as usize;
    let dev = v % c.devices.len().max(1);
    match e.kind {
        0 => c.download_max = Rate::from_mbps(RATES[v % RATES.len()]).max(c.download_min),
        1 => {
            c.upload_max = Rate::from_mbps(RATES[v % RATES.len()]);
            c.upload_min = c.upload_max.min(c.upload_min);
        }
        2 => c.name = format!("Name {v}, \"quoted\" {}", "x".repeat(v % 7)).into(),
        3 => c.comment = format!("note {v}").into(),
        4 => {
            if let Some(d) = c.devices.get_mut(dev) {
                d.name = format!("dev{v}").into();
            }
        }
        5 => {
            if let Some(d) = c.devices.get_mut(dev) {
                d.ipv4 = vec![format!("10.200.{}.{}/32", v / 250, v % 250)
                    .parse()
                    .unwrap()];
            }
        }
        6 => {
            // Another circuit's address: an overlap error.
            if let (Some(d), Some(a)) = (
                c.devices.get_mut(dev),
                other.devices.first().and_then(|d| d.ipv4.first()),
            ) {
                if other.id != c.id {
                    d.ipv4.push(*a);
                }
            }
        }
        7 => {
            if let Some(d) = c.devices.get_mut(dev) {
                if d.ipv6.is_empty() {
                    d.ipv6 = vec![format!("fd00:99:{v:x}::/64").parse().unwrap()];
                } else {
                    d.ipv6.clear();
                }
            }
        }
        8 => c.download_min = Rate::ZERO,
        9 => c.upload_min = Rate::from_bps(c.upload_max.bps() + 1_000_000),
        10 => {
            c.sqm = Some(SqmOverride::new(
                ["fq_codel", "bogus", "none", "cake besteffort", "pfifo"][v % 5],
                "",
            ))
        }
        11 => c.parent = other.parent.clone(),
        12 => c.id = format!("{}x", c.id).into(),
        13 => {
            if let Some(d) = c.devices.get_mut(dev) {
                d.mac = format!("02:00:00:00:{:02x}:{:02x}", v / 256 % 256, v % 256).into();
            }
        }
        14 => {
            if let Some(d) = c.devices.get_mut(dev) {
                d.id = format!("{}-renamed", d.id).into();
            }
        }
        _ => c.download_min = Rate::from_mbps(1 + v as u64 % 10).min(c.download_max),
    }
    let mut out = net.clone();
    out.set_circuits(circuits);
    out
}

/// The last good state of the daemon.
struct State {
    bytes: Vec<u8>,
    net: Network,
    plan: Plan,
    index: DevicesIndex,
}

fn full(net_json: &str, bytes: &[u8]) -> lqos_model::Loaded {
    load(("network.json", net_json), (FILE, bytes))
}

fn sorted(mut ops: Vec<TcOp>) -> Vec<String> {
    let mut v: Vec<String> = ops.drain(..).map(|op| format!("{op:?}")).collect();
    v.sort();
    v
}

/// Runs one round; returns the new state, and whether the edit was patched.
fn round(s: State, net_json: &str, cfg: &PlanConfig, new: &Network) -> (State, &'static str) {
    let bytes = write_shaped_devices(new).into_bytes();
    let f = full(net_json, &bytes);
    let full_plan = (!f.report.has_errors())
        .then(|| plan(&f.network, cfg, Some(&s.plan.allocation)))
        .and_then(Result::ok);
    match s.index.edit(&s.net, &bytes) {
        DevicesEdit::Same => {
            assert_eq!(bytes, s.bytes);
            (s, "same")
        }
        DevicesEdit::Full(_) => match full_plan {
            Some(p) => {
                let index = DevicesIndex::new(FILE, bytes.clone(), &f.network).unwrap();
                (
                    State {
                        bytes,
                        net: f.network,
                        plan: p,
                        index,
                    },
                    "full",
                )
            }
            None => (s, "rejected"),
        },
        DevicesEdit::Patch(patch) => {
            assert!(
                !f.report.has_errors(),
                "a patch for input the full reader rejects: {}",
                f.report
            );
            // The same problems on the changed circuits' lines.
            let lines: Vec<usize> = patch
                .circuits
                .iter()
                .flat_map(|(_, c)| c.devices.iter().map(|d| d.line))
                .collect();
            let expect: Vec<String> = f
                .report
                .problems
                .iter()
                .filter(|p| p.line.is_some_and(|l| lines.contains(&l)))
                .map(|p| p.to_string())
                .collect();
            let got: Vec<String> = patch
                .report
                .problems
                .iter()
                .map(|p| p.to_string())
                .collect();
            assert_eq!(got, expect);
            let mut p = s.plan.clone();
            let replan = lqos_tc::replan::replan_circuits(
                &mut p,
                &PlanIndex::new(&s.plan),
                &s.net,
                &patch.circuits,
            );
            // (The daemon commits once the replan worked.)
            let mut index = s.index.clone();
            let mut net = s.net.clone();
            let old_bytes = index.commit(&mut net, patch, bytes.clone());
            assert_eq!(old_bytes, s.bytes);
            assert_eq!(net, f.network, "patched network != full read");
            assert_eq!(index.bytes(), bytes.as_slice());
            match replan {
                Replan::Patched(at) => {
                    let full_plan = full_plan.expect("the full plan fails where the patch did not");
                    assert_eq!(p, full_plan, "patched plan != full plan");
                    for (i, ip) in p.interfaces.iter().enumerate() {
                        let model = s.plan.interfaces[i].tree();
                        let ops = at.iter().filter(|(k, _)| *k == i).map(|&(_, o)| &ip.ops[o]);
                        // (An error: the daemon diffs the whole tree then.)
                        if let Ok(d) = known_diff(&model, ops) {
                            assert_eq!(sorted(d), sorted(diff(&model, &ip.tree())));
                        }
                    }
                    (
                        State {
                            bytes,
                            net,
                            plan: p,
                            index,
                        },
                        "patched",
                    )
                }
                Replan::Full(_) => {
                    assert_eq!(p, s.plan, "a refused replan changed the plan");
                    let Some(p) = full_plan else {
                        return (s, "rejected");
                    };
                    let index = DevicesIndex::new(FILE, bytes.clone(), &net).unwrap();
                    (
                        State {
                            bytes,
                            net,
                            plan: p,
                            index,
                        },
                        "replanned",
                    )
                }
            }
        }
    }
}

fn start(seed: u64, circuits: usize, cfg: &PlanConfig) -> (String, State) {
    let g = generate(&{
        let mut p = GenParams::with_circuits(circuits);
        p.seed = seed;
        p.multi_device_fraction = 0.3;
        p
    });
    let net_json = write_network_json(&g.network);
    let bytes = write_shaped_devices(&g.network).into_bytes();
    let f = full(&net_json, &bytes);
    assert!(!f.report.has_errors(), "{}", f.report);
    let p = plan(&f.network, cfg, None).unwrap();
    let index = DevicesIndex::new(FILE, bytes.clone(), &f.network).unwrap();
    (
        net_json,
        State {
            bytes,
            net: f.network,
            plan: p,
            index,
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn incremental_equals_full(
        seed in 0u64..500,
        circuits in 10usize..60,
        variant in 0u8..4,
        rounds in proptest::collection::vec(edits(), 1..4),
    ) {
        let cfg = config(variant);
        let (net_json, mut s) = start(seed, circuits, &cfg);
        for edits in &rounds {
            let mut new = s.net.clone();
            for e in edits {
                new = apply(&new, e);
            }
            s = round(s, &net_json, &cfg, &new).0;
        }
    }
}

#[test]
fn a_rate_edit_is_patched_and_sends_one_class_change() {
    let cfg = config(0);
    let (net_json, s) = start(7, 200, &cfg);
    let new = apply(
        &s.net,
        &Edit {
            circuit: 42,
            kind: 0,
            val: 2,
        },
    );
    let old_plan = s.plan.clone();
    let (s, how) = round(s, &net_json, &cfg, &new);
    assert_eq!(how, "patched");
    let changes: Vec<TcOp> = diff(&old_plan.interfaces[0].tree(), &s.plan.interfaces[0].tree());
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert!(matches!(changes[0], TcOp::ChangeClass(_)));
}

#[test]
fn names_comments_and_addresses_are_patched_moves_and_new_ids_are_not() {
    let cfg = config(0);
    let (net_json, mut s) = start(3, 100, &cfg);
    for (kind, expect) in [
        (2, "patched"),
        (3, "patched"),
        (5, "patched"),
        (7, "patched"),
        (13, "patched"),
        (12, "full"),
        (14, "full"),
        (8, "rejected"),
        (6, "rejected"),
    ] {
        let new = apply(
            &s.net,
            &Edit {
                circuit: 10,
                kind,
                val: 17,
            },
        );
        let (next, how) = round(s, &net_json, &cfg, &new);
        assert_eq!(how, expect, "edit kind {kind}");
        s = next;
    }
}

/// Squashing (LibreQoS's rule) depends on all of a node's circuits: an
/// edit that makes a node's minimums squash, or stop squashing, is planned
/// in full; an edit inside a squashed node is patched with the squashed
/// rate.
#[test]
fn an_edit_that_changes_a_nodes_squashing_is_planned_in_full() {
    use lqos_model::{Circuit, Node};
    let node = Node {
        name: "Site".into(),
        id: None,
        node_type: None,
        download: Rate::from_mbps(100),
        upload: Rate::from_mbps(100),
        virtual_node: false,
    };
    let circuit = |id: &str, min: u64, max: u64| Circuit {
        id: id.into(),
        name: id.into(),
        parent: Some("Site".into()),
        download_min: Rate::from_mbps(min),
        upload_min: Rate::from_mbps(1),
        download_max: Rate::from_mbps(max),
        upload_max: Rate::from_mbps(10),
        comment: Default::default(),
        sqm: None,
        devices: vec![],
    };
    let net = |mins: [u64; 2], max: u64| {
        let mut n = Network::new();
        n.add_node(None, node.clone()).unwrap();
        n.add_circuit(circuit("a", mins[0], max));
        n.add_circuit(circuit("b", mins[1], 80));
        n
    };
    let cfg = PlanConfig::bridge("ens19", "ens20", 1);
    // 40 + 40 fit in the 99 the node guarantees; 40 + 70 do not.
    let old = net([40, 40], 80);
    let mut p = lqos_tc::plan(&old, &cfg, None).unwrap();
    let edit = vec![(1, circuit("b", 70, 80))];
    let index = PlanIndex::new(&p);
    assert_eq!(
        lqos_tc::replan::replan_circuits(&mut p, &index, &old, &edit),
        Replan::Full(lqos_tc::replan::ReplanFallback::SquashChanges(
            "Site".into()
        ))
    );
    // Squashed before and after: patched, and equal to the full plan.
    let old = net([60, 60], 80);
    let mut p = lqos_tc::plan(&old, &cfg, None).unwrap();
    let edit = vec![(0, circuit("a", 70, 90))];
    assert_eq!(p.squashed[0].asked_down, Rate::from_mbps(120));
    let index = PlanIndex::new(&p);
    assert!(matches!(
        lqos_tc::replan::replan_circuits(&mut p, &index, &old, &edit),
        Replan::Patched(_)
    ));
    let full = lqos_tc::plan(&net([70, 60], 90), &cfg, Some(&p.allocation)).unwrap();
    assert_eq!(p.interfaces, full.interfaces);
    // The squashed node's report follows the edit.
    assert_eq!(p.squashed, full.squashed);
    assert_eq!(p.squashed[0].asked_down, Rate::from_mbps(130));
    let a = p.interfaces[0].tree().classes
        [&lqos_tc::TcHandle::new(1, p.allocation.circuits[0].minor)]
        .clone();
    assert_eq!(
        (a.htb.rate, a.htb.ceil),
        (Rate::from_mbps(1), Rate::from_mbps(90))
    );
}
