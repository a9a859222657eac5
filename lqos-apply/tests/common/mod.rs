//! Shared fixtures for the live tests: a private namespace with a veth pair
//! ens19/ens20 (16 TX queues) and hand-built trees.
#![allow(dead_code)]

use lqos_apply::backend::IfaceOps;
use lqos_apply::netns::{require_netns, unique_name, ScratchNetns};
use lqos_model::Rate;
use lqos_tc::ops::{Class, Qdisc, QdiscKind};
use lqos_tc::{TcHandle, TcOp};

/// Interfaces of the fixture.
pub const DEVS: [&str; 2] = ["ens19", "ens20"];
/// TX queues per interface.
pub const QUEUES: u32 = 16;

/// A namespace `lqos-test-PID-TEST` with ens19/ens20, or `None` (skip).
pub fn fixture(test: &str) -> Option<ScratchNetns> {
    if !require_netns(test) {
        return None;
    }
    Some(
        ScratchNetns::with_veth(&unique_name("lqos-test", test), DEVS[0], DEVS[1], QUEUES)
            .expect("scratch netns"),
    )
}

fn class(parent: TcHandle, classid: TcHandle, rate: Rate, ceil: Rate, prio: u32) -> TcOp {
    TcOp::AddClass(Class::htb(parent, classid, rate, ceil, prio, 1522))
}

/// A LibreQoS-shaped full build by hand: mq, one htb per queue with top
/// class `:1` (10 Gbit) and default class `:2`, then `circuits` circuit
/// classes round-robin over the queues, each with a `leaf` qdisc of explicit
/// handle `0x100 + i`. `circuit(i)` gives circuit i's (rate, ceil).
pub fn tree_ops(
    queues: u16,
    circuits: usize,
    circuit: impl Fn(usize) -> (Rate, Rate),
    leaf: QdiscKind,
) -> Vec<TcOp> {
    let mut ops = vec![TcOp::ReplaceQdisc(Qdisc::root(
        TcHandle::new(0x7fff, 0),
        QdiscKind::Mq,
    ))];
    for q in 1..=queues {
        ops.push(TcOp::AddQdisc(Qdisc::htb(TcHandle::new(0x7fff, q), q, 2)));
        let top = TcHandle::new(q, 1);
        let link = Rate::from_mbps(10_000);
        ops.push(class(TcHandle::new(q, 0), top, link, link, 3));
        ops.push(class(
            top,
            TcHandle::new(q, 2),
            Rate::from_bps(2_499_750_000),
            Rate::from_mbps(9_999),
            5,
        ));
    }
    for i in 0..circuits {
        let q = (i % queues as usize) as u16 + 1;
        let id = TcHandle::new(q, (i / queues as usize) as u16 + 3);
        let (rate, ceil) = circuit(i);
        ops.push(class(TcHandle::new(q, 1), id, rate, ceil, 3));
        ops.push(TcOp::AddQdisc(Qdisc::leaf(
            id,
            0x100 + i as u16,
            leaf.clone(),
        )));
    }
    ops
}

/// [`tree_ops`] with pfifo leaves and circuit i at `rate(i)` Mbit, ceil
/// twice that.
pub fn hand_built(circuits: usize, queues: u16, rate: impl Fn(usize) -> u64) -> Vec<TcOp> {
    tree_ops(
        queues,
        circuits,
        |i| (Rate::from_mbps(rate(i)), Rate::from_mbps(2 * rate(i))),
        QdiscKind::Pfifo { limit: None },
    )
}

/// Varied, fractional circuit rates (0.5 to 24.5 Mbit), ceil 4x: circuit
/// `i`'s (rate, ceil) for [`tree_ops`].
pub fn varied_rates(i: usize) -> (Rate, Rate) {
    let rate = Rate::from_bps(500_000 + (i as u64 % 97) * 250_000);
    (rate, Rate::from_bps(rate.bps() * 4))
}

/// The same hand-built stream on both interfaces.
pub fn both(ops: &[TcOp]) -> Vec<IfaceOps<'static>> {
    DEVS.iter()
        .map(|d| IfaceOps::new(*d, ops.to_vec()))
        .collect()
}

/// One line of `tc class show` (tc 6.1 prints classes as text even with `-j`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcClassLine {
    /// `htb`, `mq`, ...
    pub kind: String,
    /// `1:3`.
    pub classid: String,
    /// `rate` as tc prints it (`100Mbit`), if any.
    pub rate: Option<String>,
    /// `ceil` as tc prints it, if any.
    pub ceil: Option<String>,
}

/// HTB classes of `tc -n NS class show dev DEV`, parsed from tc's text.
pub fn tc_classes(ns: &ScratchNetns, dev: &str) -> Vec<TcClassLine> {
    let out = ns.tc(&["class", "show", "dev", dev]).unwrap();
    out.lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            if w.first() != Some(&"class") || w.len() < 3 {
                return None;
            }
            let after = |k: &str| {
                w.iter()
                    .position(|x| *x == k)
                    .and_then(|i| w.get(i + 1))
                    .map(|s| s.to_string())
            };
            Some(TcClassLine {
                kind: w[1].to_string(),
                classid: w[2].to_string(),
                rate: after("rate"),
                ceil: after("ceil"),
            })
        })
        .filter(|c| c.kind == "htb")
        .collect()
}

/// `tc -j qdisc show dev DEV` in the namespace.
pub fn tc_qdiscs(ns: &ScratchNetns, dev: &str) -> Vec<serde_json::Value> {
    ns.tc_json(&["qdisc", "show", "dev", dev])
        .unwrap()
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// A generated network of `circuits` circuits (bridge ens19/ens20).
pub fn generated(circuits: usize, seed: u64) -> lqos_model::Generated {
    lqos_model::generate(&{
        let mut p = lqos_model::GenParams::with_circuits(circuits);
        p.seed = seed;
        p
    })
}

/// The plan of `net` for 16 queues with pfifo leaves (this kernel has no
/// cake), reusing `prev`'s classids.
pub fn plan_for(
    g: &lqos_model::Generated,
    net: &lqos_model::Network,
    prev: Option<&lqos_tc::Allocation>,
) -> lqos_tc::Plan {
    let mut cfg =
        lqos_tc::PlanConfig::from_lqos_config(&g.config, QUEUES).expect("generated config");
    cfg.default_sqm = "pfifo".parse().expect("pfifo spec");
    lqos_tc::plan(net, &cfg, prev).expect("plan")
}

/// `net` with 1% of the circuits at a new rate, `add` circuits added
/// (copies with new IDs) and `remove` removed (from the end).
pub fn mutate(net: &lqos_model::Network, add: usize, remove: usize) -> lqos_model::Network {
    let mut net = net.clone();
    let mut circuits = net.circuits().to_vec();
    let n = circuits.len();
    for c in circuits.iter_mut().step_by(100) {
        c.download_max = Rate::from_bps(c.download_max.bps() / 2 + 8_000_000);
        c.download_min = c.download_min.min(c.download_max);
        c.upload_max = Rate::from_bps(c.upload_max.bps() / 2 + 8_000_000);
        c.upload_min = c.upload_min.min(c.upload_max);
    }
    let extra: Vec<_> = circuits[..add]
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let mut c = c.clone();
            c.id = format!("added-{i}").into();
            c.name = format!("Added {i}").into();
            c.devices.clear();
            c
        })
        .collect();
    circuits.truncate(n - remove);
    circuits.extend(extra);
    net.set_circuits(circuits);
    net
}
