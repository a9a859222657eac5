//! Parse everything, build the [`Network`], validate: one call, one report.

use std::io::Read;

use crate::network_json::parse_with_lines;
use crate::report::{Problem, Report};
use crate::{parse_config, parse_shaped_devices, LqosConfig, ModelError, Network};

/// Everything read from a set of inputs, with every problem found.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    /// Nodes from `network.json` and circuits from `ShapedDevices.csv`
    /// (whatever could be read, even when the report has errors).
    pub network: Network,
    /// The config (defaults when none was given or it could not be read).
    pub config: LqosConfig,
    /// Parse and validation problems of all files.
    pub report: Report,
}

/// Counts for a person to read (`lqos check`'s summary).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Summary {
    /// Nodes in the hierarchy.
    pub nodes: usize,
    /// Circuits.
    pub circuits: usize,
    /// Devices over all circuits.
    pub devices: usize,
    /// Depth of the node hierarchy (0 = flat).
    pub depth: usize,
}

impl Loaded {
    /// Counts of nodes, circuits, devices and the hierarchy depth.
    pub fn summary(&self) -> Summary {
        summarize(&self.network)
    }

    /// `Ok` if the report has no errors, else the first error (warnings
    /// never fail).
    pub fn require_valid(&self) -> Result<(), ModelError> {
        match self.report.errors().next() {
            None => Ok(()),
            Some(p) => Err(ModelError::Invalid(Box::new(p.clone()))),
        }
    }
}

/// Counts of nodes, circuits, devices and the depth of `network`.
pub fn summarize(network: &Network) -> Summary {
    Summary {
        nodes: network.node_count(),
        circuits: network.circuits().len(),
        devices: network.circuits().iter().map(|c| c.devices.len()).sum(),
        depth: network.depth(),
    }
}

fn error_problem(e: ModelError, file: &str) -> Problem {
    match e {
        ModelError::Invalid(p) => *p,
        ModelError::Json { line, .. } => {
            Problem::error(file, strip_file(&e.to_string(), file)).at(line)
        }
        ModelError::Csv { line, .. } | ModelError::Toml { line, .. } => {
            Problem::error(file, strip_file(&e.to_string(), file)).at_opt(line)
        }
        ModelError::MissingColumn { line, .. } => {
            Problem::error(file, strip_file(&e.to_string(), file)).at(line)
        }
        ModelError::NoHeader { .. } => Problem::error(file, strip_file(&e.to_string(), file)),
    }
}

/// Drops the `file:line:` / `file:` prefix of an error message (the Problem
/// prints its own).
fn strip_file(msg: &str, file: &str) -> String {
    let rest = msg.strip_prefix(file).unwrap_or(msg);
    let rest = rest.trim_start_matches(|c: char| c == ':' || c.is_ascii_digit());
    rest.trim_start().to_string()
}

/// Parses `network.json` and `ShapedDevices.csv` (each given as
/// `(file label, content)`), builds the network and validates it.
///
/// Never fails: a file that cannot be read at all becomes an error in the
/// report, and the other file is still checked.
///
/// ```
/// let net = r#"{"AP_A": {"downloadBandwidthMbps": 500, "uploadBandwidthMbps": 100}}"#;
/// let csv = "Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,MAC,IPv4,IPv6,\
/// Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,Comment\n\
/// 10001,Home,1,Router,AP_A,,100.64.0.1,,0,1,100,20,\n";
/// let loaded = lqos_model::load(("network.json", net), ("ShapedDevices.csv", csv.as_bytes()));
/// assert!(loaded.report.has_errors());
/// assert_eq!(
///     loaded.report.problems[0].to_string(),
///     "ShapedDevices.csv:2: circuit \"10001\": download min 0 is zero"
/// );
/// ```
pub fn load<R: Read>(network: (&str, &str), devices: (&str, R)) -> Loaded {
    load_with_config(network, devices, None)
}

/// [`load`] plus an optional `lqos.conf` as `(file label, content)`.
pub fn load_with_config<R: Read>(
    network: (&str, &str),
    devices: (&str, R),
    config: Option<(&str, &str)>,
) -> Loaded {
    let mut report = Report::new();
    let (nfile, ntext) = network;
    let (dfile, dreader) = devices;
    let (mut net, network_ok, node_lines) = match parse_with_lines(nfile, ntext) {
        Ok((net, r, lines)) => {
            report.extend(r);
            (net, true, lines)
        }
        Err(e) => {
            report.push(error_problem(e, nfile));
            (Network::new(), false, Vec::new())
        }
    };
    match parse_shaped_devices(dfile, dreader) {
        Ok(mut sd) => {
            report.extend(sd.report);
            if network_ok {
                resolve_parent_ids(
                    &net,
                    &mut sd.circuits,
                    &sd.parent_node_ids,
                    dfile,
                    &mut report,
                );
            }
            net.set_circuits(sd.circuits);
        }
        Err(e) => report.push(error_problem(e, dfile)),
    }
    let config = match config {
        None => LqosConfig::default(),
        Some((cfile, ctext)) => match parse_config(cfile, ctext) {
            Ok(c) => {
                check_config(&c, cfile, &mut report);
                c
            }
            Err(e) => {
                report.push(error_problem(e, cfile));
                LqosConfig::default()
            }
        },
    };
    let v = crate::validate::validate_with(&net, nfile, dfile, network_ok, &node_lines);
    report.extend(v);
    // Group by file (network, devices, config), then by line; stable, so
    // problems of one line keep the order they were found in.
    let rank = |f: &str| {
        if f == nfile {
            0
        } else if f == dfile {
            1
        } else {
            2
        }
    };
    report
        .problems
        .sort_by_key(|p| (rank(&p.file), p.line.unwrap_or(0)));
    Loaded {
        network: net,
        config,
        report,
    }
}

fn check_config(c: &LqosConfig, file: &str, report: &mut Report) {
    if c.bridge.is_some() && c.single_interface.is_some() {
        report.push(Problem::warning(
            file,
            "both [bridge] and [single_interface] are set; [single_interface] is used",
        ));
    }
    if let Some(b) = &c.bridge {
        if b.to_internet == b.to_network {
            report.push(Problem::error(
                file,
                format!(
                    "[bridge] to_internet and to_network are the same interface {:?}",
                    b.to_network
                ),
            ));
        }
    }
    let q = &c.queues;
    for (k, v) in [
        ("uplink_bandwidth_mbps", q.uplink_bandwidth_mbps),
        ("downlink_bandwidth_mbps", q.downlink_bandwidth_mbps),
        ("generated_pn_download_mbps", q.generated_pn_download_mbps),
        ("generated_pn_upload_mbps", q.generated_pn_upload_mbps),
    ] {
        if v == 0 {
            report.push(Problem::error(file, format!("[queues] {k} is zero")));
        }
    }
}

/// Uses the `Parent Node ID` column as LibreQoS (HEAD) does: an ID that
/// names a node's `id` wins over the `Parent Node` name (a mismatch is a
/// warning); an unknown ID is a warning and the name is used; with an empty
/// `Parent Node` the ID is ignored and the circuit goes under a generated
/// parent node (a warning says so).
pub(crate) fn resolve_parent_ids(
    net: &Network,
    circuits: &mut [crate::Circuit],
    ids: &[Option<String>],
    file: &str,
    report: &mut Report,
) {
    if ids.iter().all(Option::is_none) || net.node_count() == 0 {
        return;
    }
    let by_id: std::collections::HashMap<&str, &str> = net
        .nodes_preorder()
        .into_iter()
        .filter_map(|i| {
            let n = net.node(i);
            n.id.as_deref().map(|id| (id, n.name.as_str()))
        })
        .collect();
    for (c, id) in circuits.iter_mut().zip(ids) {
        let Some(id) = id else { continue };
        let line = c.devices.first().map(|d| d.line).filter(|&l| l > 0);
        let warn = |m: String| Problem::warning(file, m).at_opt(line).circuit(&c.id);
        let found = by_id.get(id.as_str()).copied();
        match (found, &c.parent) {
            (found, None) => report.push(warn(format!(
                "Parent Node is empty, so Parent Node ID {id:?}{} is ignored, as LibreQoS does: the circuit goes under a generated parent node",
                found.map(|n| format!(" (node {n:?})")).unwrap_or_default()
            ))),
            (Some(name), Some(p)) if p != name => {
                report.push(warn(format!(
                    "Parent Node ID {id:?} is node {name:?} but Parent Node is {p:?}; using node {name:?}, as LibreQoS does (the ID wins)"
                )));
                c.parent = Some(name.into());
            }
            (Some(_), Some(_)) => {}
            (None, Some(p)) => report.push(warn(format!(
                "Parent Node ID {id:?} matches no node id in network.json; using Parent Node {p:?}"
            ))),
        }
    }
}
