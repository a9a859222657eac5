//! Parse everything, build the [`Network`], validate: one call, one report.

use std::io::Read;

use crate::config::{parse_config, LqosConfig};
use crate::error::ModelError;
use crate::network::Network;
use crate::network_json::parse_with_lines;
use crate::report::{ConfigKey, Problem, Report};
use crate::shaped_devices::parse_shaped_devices;

/// Everything read from a set of inputs, with every problem found.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Loaded {
    /// Nodes from `network.json` and circuits from `ShapedDevices.csv`
    /// (whatever could be read, even when the report has errors).
    pub network: Network,
    /// The config (defaults when none was given or it could not be read).
    pub config: LqosConfig,
    /// Parse and validation problems of all files.
    pub report: Report,
    /// Circuits of `ShapedDevices.csv` whose parent node is not in
    /// `network.json` (a warning each): not in [`Loaded::network`], so
    /// not shaped, as LibreQoS leaves them out of its tree. Their rates
    /// are still checked.
    pub unshaped: Vec<crate::types::Circuit>,
}

/// Counts for a person to read: the size of a set of inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
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
        Summary::of(&self.network)
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

impl Summary {
    /// Counts of nodes, circuits, devices and the depth of `network`.
    pub fn of(network: &Network) -> Summary {
        Summary {
            nodes: network.node_count(),
            circuits: network.circuits().len(),
            devices: network.circuits().iter().map(|c| c.devices.len()).sum(),
            depth: network.depth(),
        }
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
    let mut unshaped = Vec::new();
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
                unshaped = take_unknown_parents(&net, &mut sd.circuits, dfile, &mut report);
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
    for c in &unshaped {
        crate::validate::check_rates(c, dfile, &mut report);
    }
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
        unshaped,
    }
}

/// Takes the circuits whose parent node is not in `net` (a hierarchy, not
/// a flat network) out of `circuits`, with a warning each: LibreQoS (HEAD)
/// loads such a file, attaches those circuits nowhere (no class, no leaf,
/// no IP mapping: their traffic goes to the default class) and lists them
/// as "not shaped"; lqos does the same.
fn take_unknown_parents(
    net: &Network,
    circuits: &mut Vec<crate::types::Circuit>,
    file: &str,
    report: &mut Report,
) -> Vec<crate::types::Circuit> {
    if net.node_count() == 0 {
        return Vec::new();
    }
    let unknown = |c: &crate::types::Circuit| {
        c.parent
            .as_ref()
            .is_some_and(|p| net.node_by_name(p).is_none())
    };
    if !circuits.iter().any(unknown) {
        return Vec::new();
    }
    let (unshaped, shaped): (Vec<_>, Vec<_>) =
        std::mem::take(circuits).into_iter().partition(unknown);
    *circuits = shaped;
    for c in &unshaped {
        let line = c.devices.first().map(|d| d.line).filter(|&l| l > 0);
        let parent = c.parent.as_deref().unwrap_or_default();
        report.push(
            Problem::warning(
                file,
                format!(
                    "parent node {parent:?} does not exist in network.json; the circuit is not shaped (no class, no leaf, no IP mapping: its traffic goes to the default class), as LibreQoS does"
                ),
            )
            .at_opt(line)
            .circuit(&c.id),
        );
    }
    unshaped
}

fn check_config(c: &LqosConfig, file: &str, report: &mut Report) {
    if c.bridge.is_some() && c.single_interface.is_some() {
        report.push(Problem::warning(
            file,
            "both [bridge] and [single_interface] are set; [bridge] is used, as LibreQoS does",
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
    libreqos_keys(c, file, report);
}

/// Warnings for the keys of LibreQoS's lqos.conf that change what it
/// shapes and that lqos honours differently or not at all (each says what
/// LibreQoS does and what lqos does instead).
fn libreqos_keys(c: &LqosConfig, file: &str, report: &mut Report) {
    let q = &c.queues;
    let mut warn = |key: ConfigKey, m: String| report.push(Problem::warning(file, m).about(key));
    if q.observe() {
        warn(ConfigKey::QueueMode, "[queues] queue_mode = \"observe\": no shaping tree, only the mq roots (as LibreQoS builds in observe mode); nothing is shaped".into());
    }
    if q.use_binpacking {
        warn(ConfigKey::UseBinpacking, "[queues] use_binpacking = true: LibreQoS's binpacking (one CpueQueueN class per queue above its top-level nodes, placed by live traffic weights) is not reproduced; lqos places top-level nodes by size (balanced) or in LibreQoS's round robin, without the CpueQueueN classes".into());
    }
    if let Some(lazy) = q
        .lazy_queues
        .as_deref()
        .filter(|l| !l.eq_ignore_ascii_case("no"))
    {
        warn(ConfigKey::LazyQueues, format!(
            "[queues] lazy_queues = {lazy:?}: LibreQoS creates {} on traffic; lqos builds every class and leaf, and with lazy leaves ([lqos] lazy_leaves = true) the reload daemon gives circuits their leaf only while they carry traffic{}",
            if lazy.eq_ignore_ascii_case("full") { "classes and leaves" } else { "leaves" },
            if lazy.eq_ignore_ascii_case("full") { " (lazy classes are not supported)" } else { "" },
        ));
    }
    if q.dry_run {
        warn(ConfigKey::DryRun, "[queues] dry_run = true: LibreQoS would only log its commands; lqos ignores this key and applies".into());
    }
    if let Some(t) = &c.treeguard {
        let (links, circuits) = t.active();
        if links || circuits {
            let what = match (links, circuits) {
                (true, true) => {
                    "virtualizes idle nodes and switches idle circuits between cake and fq_codel"
                }
                (true, false) => "virtualizes idle nodes",
                _ => "switches idle circuits between cake and fq_codel",
            };
            warn(ConfigKey::TreeGuard, format!("[treeguard] is on: LibreQoS's TreeGuard {what} at runtime (and keeps the overrides); lqos does not, its tree follows network.json and ShapedDevices.csv alone"));
        }
    }
    if c.stormguard.is_some_and(|s| s.on(false)) {
        warn(ConfigKey::StormGuard, "[stormguard] is on: LibreQoS's StormGuard changes site rates at runtime; lqos does not".into());
    }
    if c.dynamic_circuits.is_some_and(|s| s.on(false)) {
        warn(ConfigKey::DynamicCircuits, "[dynamic_circuits] is on: LibreQoS shapes runtime dynamic circuits; lqos shapes only the circuits of ShapedDevices.csv".into());
    }
    if c.long_term_stats.is_some_and(|l| l.enable_insight_topology) {
        warn(ConfigKey::InsightTopology, "[long_term_stats] enable_insight_topology = true: LibreQoS prefers ShapedDevices.insight.csv and network.insight.json where they exist; lqos reads the files it is given".into());
    }
    let on = c.integrations_on();
    if !on.is_empty() {
        warn(ConfigKey::Integration, format!(
            "integration {} is on: LibreQoS then shapes from the integration's runtime files (its state directory's shaping_inputs.json), not network.json and ShapedDevices.csv; lqos reads the network.json and ShapedDevices.csv it is given (the integration exports them)",
            on.join(", ")
        ));
    }
    if c.exclude_efficiency_cores {
        warn(ConfigKey::ExcludeEfficiencyCores, "exclude_efficiency_cores = true: LibreQoS uses at most one queue per performance core; lqos uses every TX queue of the interfaces (set [queues] override_available_queues to LibreQoS's count to match)".into());
    }
}

/// Uses the `Parent Node ID` column as LibreQoS (HEAD) does: an ID that
/// names a node's `id` wins over the `Parent Node` name (a mismatch is a
/// warning); an unknown ID is a warning and the name is used; with an empty
/// `Parent Node` the ID is ignored and the circuit goes under a generated
/// parent node (a warning says so).
pub(crate) fn resolve_parent_ids(
    net: &Network,
    circuits: &mut [crate::types::Circuit],
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
