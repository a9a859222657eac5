//! Rules over the whole model: hierarchy depth, circuit parents and rates,
//! overlapping addresses.
//!
//! # Depth limit
//!
//! LibreQoS shapes at most [`Network::MAX_NODE_DEPTH`] = 6 levels of `network.json`
//! nodes (virtual nodes get no class and do not count): reading the file,
//! it makes every deeper node a child of its level-5 ancestor, and so does
//! [`crate::network_json::parse_network_json`]. A network built otherwise (in code) that
//! is deeper is an error here. The kernel's own limit is 8 HTB class
//! levels (`TC_HTB_MAXDEPTH`): top-level nodes hang at an HTB's root, so 6
//! node levels and a circuit level fit with room to spare.

use std::collections::HashMap;

use crate::network::{Network, NodeIdx};
use crate::rate::Rate;
use crate::report::{Problem, Report};

/// Checks `network` (its nodes and circuits) and returns every problem.
///
/// `network_file` and `devices_file` label node and circuit problems.
/// Per-file parse problems are not repeated here: this looks at the
/// hierarchy and circuits as built.
pub fn validate(network: &Network, network_file: &str, devices_file: &str) -> Report {
    validate_with(network, network_file, devices_file, true, &[])
}

/// [`validate`]; `check_parents = false` skips the circuit-parent rules
/// (used when `network.json` could not be read at all).
pub(crate) fn validate_with(
    network: &Network,
    network_file: &str,
    devices_file: &str,
    check_parents: bool,
    node_lines: &[usize],
) -> Report {
    let mut report = Report::new();
    check_nodes(network, network_file, node_lines, &mut report);
    check_circuits(network, devices_file, check_parents, &mut report);
    check_overlaps(network, devices_file, &mut report);
    report
}

/// The nearest non-virtual node at or above `idx`.
fn shaping_ancestor(net: &Network, mut idx: NodeIdx) -> Option<NodeIdx> {
    loop {
        if !net.node(idx).virtual_node {
            return Some(idx);
        }
        idx = net.parent(idx)?;
    }
}

fn check_nodes(net: &Network, file: &str, node_lines: &[usize], report: &mut Report) {
    // Non-virtual depth of each node, computed parents first.
    let mut depth: HashMap<NodeIdx, usize> = HashMap::with_capacity(net.node_count());
    for idx in net.nodes_preorder() {
        let node = net.node(idx);
        let line = node_lines.get(idx.index()).copied().filter(|&l| l > 0);
        let parent = net.parent(idx);
        let above = parent.map(|p| depth[&p]).unwrap_or(0);
        let d = above + usize::from(!node.virtual_node);
        depth.insert(idx, d);
        if d == Network::MAX_NODE_DEPTH + 1 && !node.virtual_node {
            report.push(
                Problem::error(
                    file,
                    format!(
                        "node is at level {d} of the hierarchy (virtual nodes not counted); LibreQoS shapes at most {} node levels (reading network.json, it and lqos make deeper nodes children of their level-{} ancestor)", Network::MAX_NODE_DEPTH, Network::MAX_NODE_DEPTH - 1
                    ),
                )
                .at_opt(line)
                .node(&node.name),
            );
        }
        if let Some(pa) = parent.and_then(|p| shaping_ancestor(net, p)) {
            if node.virtual_node {
                continue;
            }
            let pn = net.node(pa);
            for (dir, mine, theirs) in [
                ("download", node.download, pn.download),
                ("upload", node.upload, pn.upload),
            ] {
                if mine > theirs && !theirs.is_zero() {
                    report.push(
                        Problem::warning(
                            file,
                            format!(
                                "{dir} {mine} Mbps is above parent node {:?}'s {theirs} Mbps; it will be clamped to {theirs}",
                                pn.name
                            ),
                        )
                        .at_opt(line)
                        .node(&node.name),
                    );
                }
            }
        }
    }
}

fn check_circuits(net: &Network, file: &str, check_parents: bool, report: &mut Report) {
    for c in net.circuits() {
        check_circuit(net, c, file, check_parents, report);
    }
}

/// A circuit's rates: none zero or absurd, no min above its max. The only
/// rules of a circuit left unshaped (its parent node is not in
/// network.json): it has no class for an address or a parent to matter to.
pub(crate) fn check_rates(c: &crate::types::Circuit, file: &str, report: &mut Report) {
    let line = c.devices.first().map(|d| d.line).filter(|&l| l > 0);
    let err = |m: String| Problem::error(file, m).at_opt(line).circuit(&c.id);
    let rates = [
        ("download min", c.download_min),
        ("upload min", c.upload_min),
        ("download max", c.download_max),
        ("upload max", c.upload_max),
    ];
    for (label, r) in rates {
        if r.is_zero() {
            report.push(err(format!("{label} {r} is zero")));
        } else if r > Rate::MAX_PLAUSIBLE {
            report.push(err(format!(
                "{label} {r} Mbps is absurdly large (above {} Mbps)",
                Rate::MAX_PLAUSIBLE
            )));
        }
    }
    for (dir, min, max) in [
        ("download", c.download_min, c.download_max),
        ("upload", c.upload_min, c.upload_max),
    ] {
        if min > max {
            report.push(err(format!("{dir} min {min} is above {dir} max {max}")));
        }
    }
}

/// The rules of one circuit alone (rates, addresses present, parent node):
/// what [`validate`] reports for `c` apart from address overlaps.
pub(crate) fn check_circuit(
    net: &Network,
    c: &crate::types::Circuit,
    file: &str,
    check_parents: bool,
    report: &mut Report,
) {
    let flat = net.node_count() == 0;
    check_rates(c, file, report);
    {
        let line = c.devices.first().map(|d| d.line).filter(|&l| l > 0);
        let err = |m: String| Problem::error(file, m).at_opt(line).circuit(&c.id);
        let warn = |m: String| Problem::warning(file, m).at_opt(line).circuit(&c.id);
        if c.devices
            .iter()
            .all(|d| d.ipv4.is_empty() && d.ipv6.is_empty())
        {
            report.push(warn(
                "circuit has no IPv4 or IPv6 address; no traffic will reach its class".to_string(),
            ));
        }
        let Some(parent) = c.parent.as_ref().filter(|_| check_parents) else {
            return;
        };
        match net.node_by_name(parent) {
            None if flat => report.push(warn(format!(
                "parent node {parent:?} is given but network.json is flat; the circuit goes under a generated parent node"
            ))),
            None => report.push(err(format!(
                "parent node {parent:?} does not exist in network.json"
            ))),
            Some(idx) => {
                if shaping_ancestor(net, idx).is_none() {
                    report.push(warn(format!(
                        "parent node {parent:?} is virtual with no shaped node above it; the circuit goes under a generated parent node, as LibreQoS does"
                    )));
                }
                if let Some(pa) = shaping_ancestor(net, idx) {
                    let pn = net.node(pa);
                    for (dir, max, cap) in [
                        ("download", c.download_max, pn.download),
                        ("upload", c.upload_max, pn.upload),
                    ] {
                        if max > cap && !cap.is_zero() {
                            report.push(warn(format!(
                                "{dir} max {max} Mbps is above parent node {:?}'s {cap} Mbps; it will be clamped to {cap}",
                                pn.name
                            )));
                        }
                    }
                }
            }
        }
    }
}

/// One address range owned by a device of a circuit.
struct Span<T, N> {
    start: T,
    end: T,
    circuit: usize,
    line: usize,
    net: N,
}

fn check_overlaps(net: &Network, file: &str, report: &mut Report) {
    check_overlaps_of(net.circuits(), file, report);
}

/// The address overlaps among `circuits` (as [`validate`] reports them
/// when these are all the circuits).
pub(crate) fn check_overlaps_of(
    circuits: &[crate::types::Circuit],
    file: &str,
    report: &mut Report,
) {
    let mut v4: Vec<Span<u32, ipnet::Ipv4Net>> = Vec::new();
    let mut v6: Vec<Span<u128, ipnet::Ipv6Net>> = Vec::new();
    for (ci, c) in circuits.iter().enumerate() {
        for d in &c.devices {
            for n in &d.ipv4 {
                v4.push(Span {
                    start: u32::from(n.network()),
                    end: u32::from(n.broadcast()),
                    circuit: ci,
                    line: d.line,
                    net: *n,
                });
            }
            for n in &d.ipv6 {
                v6.push(Span {
                    start: u128::from(n.network()),
                    end: u128::from(n.broadcast()),
                    circuit: ci,
                    line: d.line,
                    net: *n,
                });
            }
        }
    }
    sweep(circuits, file, "IPv4", v4, report);
    sweep(circuits, file, "IPv6", v6, report);
}

/// Sorted-interval sweep: O(n log n). Each range that starts inside the
/// widest range seen so far is reported against that range's owner.
fn sweep<T: Ord + Copy, N: std::fmt::Display>(
    circuits: &[crate::types::Circuit],
    file: &str,
    label: &str,
    mut spans: Vec<Span<T, N>>,
    report: &mut Report,
) {
    spans.sort_by(|a, b| {
        a.start
            .cmp(&b.start)
            .then(b.end.cmp(&a.end))
            .then(a.line.cmp(&b.line))
    });
    let mut widest: Option<usize> = None;
    for i in 0..spans.len() {
        if let Some(w) = widest {
            let (a, b) = (&spans[w], &spans[i]);
            if b.start <= a.end {
                let (ca, cb) = (&circuits[a.circuit], &circuits[b.circuit]);
                let at = if a.line > 0 {
                    format!(" (line {})", a.line)
                } else {
                    String::new()
                };
                let msg = if a.circuit == b.circuit {
                    format!(
                        "{label} {} overlaps {} of the same circuit{at}",
                        b.net, a.net
                    )
                } else {
                    format!(
                        "{label} {} overlaps {} of circuit {:?}{at}",
                        b.net, a.net, ca.id
                    )
                };
                let p = if a.circuit == b.circuit {
                    Problem::warning(file, msg)
                } else {
                    Problem::error(file, msg)
                };
                report.push(p.at_opt((b.line > 0).then_some(b.line)).circuit(&cb.id));
            }
            if spans[i].end > spans[w].end {
                widest = Some(i);
            }
        } else {
            widest = Some(i);
        }
    }
}
