//! Helpers shared by the lqos-tc integration tests.
#![allow(dead_code)]

use lqos_model::{Circuit, Network, Node, Rate, SqmOverride};

/// A node with download/upload in Mbps.
pub fn node(name: &str, down: u64, up: u64) -> Node {
    Node {
        name: name.into(),
        id: None,
        node_type: None,
        download: Rate::from_mbps(down),
        upload: Rate::from_mbps(up),
        virtual_node: false,
    }
}

/// A circuit with rates as Mbps strings (`"2.5"`).
pub fn circuit(
    id: &str,
    parent: Option<&str>,
    dmin: &str,
    dmax: &str,
    umin: &str,
    umax: &str,
) -> Circuit {
    Circuit {
        id: id.into(),
        name: format!("Circuit {id}").into(),
        parent: parent.map(Into::into),
        download_min: dmin.parse().unwrap(),
        upload_min: umin.parse().unwrap(),
        download_max: dmax.parse().unwrap(),
        upload_max: umax.parse().unwrap(),
        comment: Default::default(),
        sqm: None,
        devices: vec![],
    }
}

/// With an sqm override.
pub fn with_sqm(mut c: Circuit, down: &str, up: &str) -> Circuit {
    c.sqm = Some(SqmOverride::new(down, up));
    c
}

/// Rates (Mbps strings) the random networks draw from.
pub const RATES: &[&str] = &[
    "0.5", "1", "2", "2.5", "3", "4", "10", "25.5", "100", "100.5", "155", "500", "1000", "1200",
    "2000",
];

/// Sqm overrides the random networks draw from (`None` = no override).
pub const SQMS: &[Option<(&str, &str)>] = &[
    None,
    None,
    None,
    Some(("none", "none")),
    Some(("cake", "cake")),
    Some(("fq_codel", "fq_codel")),
    Some(("cake", "fq_codel")),
    Some(("pfifo", "none")),
];

/// A random node: parent pick (index into earlier nodes, or top level),
/// virtual flag, rates.
#[derive(Debug, Clone)]
pub struct NodeSpec {
    pub parent: Option<usize>,
    pub virt: bool,
    pub down: usize,
    pub up: usize,
}

/// A random circuit.
#[derive(Debug, Clone)]
pub struct CircSpec {
    pub id: usize,
    pub parent: Option<usize>,
    pub dmin: usize,
    pub dmax: usize,
    pub umin: usize,
    pub umax: usize,
    pub sqm: usize,
}

/// Builds a network; nodes with `present[i] == false` are left out (their
/// children and circuits go to the nearest present ancestor). Node depth is
/// capped at 5 (deeper nodes are attached at top level).
pub fn build(nodes: &[NodeSpec], present: &[bool], circuits: &[CircSpec]) -> Network {
    let mut net = Network::new();
    let mut eff: Vec<Option<usize>> = Vec::new(); // nearest present ancestor-or-self
    let mut depth: Vec<usize> = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        let mut parent = n.parent.filter(|&p| p < i).and_then(|p| eff[p]);
        if parent.is_some_and(|p| depth[p] >= 5) {
            parent = None;
        }
        if present[i] {
            let mut nd = node(&format!("N{i}"), 0, 0);
            nd.download = RATES[n.down].parse().unwrap();
            nd.upload = RATES[n.up].parse().unwrap();
            nd.virtual_node = n.virt;
            net.add_node(parent.map(|p| format!("N{p}")).as_deref(), nd)
                .unwrap();
            eff.push(Some(i));
            depth.push(parent.map_or(1, |p| depth[p] + 1));
        } else {
            eff.push(parent);
            depth.push(parent.map_or(0, |p| depth[p]));
        }
    }
    for c in circuits {
        let parent = c.parent.filter(|&p| p < nodes.len()).and_then(|p| eff[p]);
        let mut ci = circuit(
            &format!("C{}", c.id),
            parent.map(|p| format!("N{p}")).as_deref(),
            RATES[c.dmin],
            RATES[c.dmax],
            RATES[c.umin],
            RATES[c.umax],
        );
        if let Some((d, u)) = SQMS[c.sqm] {
            ci = with_sqm(ci, d, u);
        }
        net.add_circuit(ci);
    }
    net
}
