//! One test per validation rule, each message asserted; the full report of
//! `load` (parse problems + rules) grouped by file and line.

use lqos_model::{load, load_with_config, Network, Severity};

const MAX_NODE_DEPTH: usize = Network::MAX_NODE_DEPTH;

const H13: &str = "Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,MAC,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,Comment";

const H15: &str = "Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,Parent Node ID,Anchor Node ID,MAC,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,Comment";

const NET: &str = r#"{
  "Site": {"downloadBandwidthMbps": 1000, "uploadBandwidthMbps": 1000,
    "children": {
      "AP_A": {"downloadBandwidthMbps": 500, "uploadBandwidthMbps": 100}
    }}
}"#;

fn check(net: &str, rows: &str) -> Vec<String> {
    let csv = format!("{H13}\n{rows}");
    load(("network.json", net), ("SD.csv", csv.as_bytes()))
        .report
        .problems
        .iter()
        .map(|p| format!("{}: {p}", p.severity))
        .collect()
}

#[test]
fn a_clean_input_has_no_problem() {
    assert!(check(NET, "1,a,d1,R,AP_A,,10.0.0.1,,10,2,100,20,\n").is_empty());
}

#[test]
fn zero_rates_are_errors() {
    assert_eq!(
        check(NET, "10001,a,d1,R,AP_A,,10.0.0.1,,0,2,100,0,\n"),
        [
            "error: SD.csv:2: circuit \"10001\": download min 0 is zero",
            "error: SD.csv:2: circuit \"10001\": upload max 0 is zero",
            "error: SD.csv:2: circuit \"10001\": upload min 2 is above upload max 0",
        ]
    );
}

#[test]
fn min_above_max_is_an_error_and_equal_is_fine() {
    assert_eq!(
        check(NET, "1,a,d1,R,AP_A,,10.0.0.1,,200,20,100,20,\n"),
        ["error: SD.csv:2: circuit \"1\": download min 200 is above download max 100"]
    );
}

#[test]
fn absurd_rates_are_errors() {
    assert_eq!(
        check("{}", "1,a,d1,R,,,10.0.0.1,,1,1,400000.000001,2,\n"),
        ["error: SD.csv:2: circuit \"1\": download max 400000.000001 Mbps is absurdly large (above 400000 Mbps)"]
    );
}

const NOT_SHAPED: &str = "the circuit is not shaped (no class, no leaf, no IP mapping: its traffic goes to the default class), as LibreQoS does";

#[test]
fn unknown_parent_is_a_warning_and_the_circuit_is_not_shaped() {
    assert_eq!(
        check(NET, "1,a,d1,R,AP_Z,,10.0.0.1,,1,1,2,2,\n"),
        [format!("warning: SD.csv:2: circuit \"1\": parent node \"AP_Z\" does not exist in network.json; {NOT_SHAPED}")]
    );
    let csv = format!("{H13}\n1,a,d1,R,AP_Z,,10.0.0.1,,1,1,2,2,\n2,b,d2,R,AP_A,,10.0.0.2,,1,1,2,2,\n3,c,d3,R,AP_Z,,10.0.0.3,,1,1,2,2,\n");
    let l = load(("network.json", NET), ("SD.csv", csv.as_bytes()));
    assert!(l.require_valid().is_ok());
    let ids = |cs: &[lqos_model::Circuit]| cs.iter().map(|c| c.id.to_string()).collect::<Vec<_>>();
    assert_eq!(ids(l.network.circuits()), ["2"]);
    assert_eq!(ids(&l.unshaped), ["1", "3"]);
}

#[test]
fn unknown_parent_circuit_still_has_its_rates_checked() {
    assert_eq!(
        check(NET, "1,a,d1,R,AP_Z,,10.0.0.1,,0,1,2,2,\n"),
        [
            format!("warning: SD.csv:2: circuit \"1\": parent node \"AP_Z\" does not exist in network.json; {NOT_SHAPED}"),
            "error: SD.csv:2: circuit \"1\": download min 0 is zero".to_string(),
        ]
    );
}

#[test]
fn unknown_parent_with_a_known_parent_node_id_is_shaped_under_that_node() {
    let net =
        r#"{"Site": {"downloadBandwidthMbps": 1000, "uploadBandwidthMbps": 1000, "id": "s1"}}"#;
    let csv = format!("{H15}\n1,a,d1,R,Gone,s1,,,10.0.0.1,,1,1,2,2,\n");
    let l = load(("network.json", net), ("SD.csv", csv.as_bytes()));
    assert!(l.unshaped.is_empty());
    assert_eq!(l.network.circuits()[0].parent.as_deref(), Some("Site"));
}

#[test]
fn parent_in_a_flat_network_is_a_warning() {
    assert_eq!(
        check("{}", "1,a,d1,R,AP_Z,,10.0.0.1,,1,1,2,2,\n"),
        ["warning: SD.csv:2: circuit \"1\": parent node \"AP_Z\" is given but network.json is flat; the circuit goes under a generated parent node"]
    );
}

#[test]
fn circuit_ceiling_above_parent_is_a_warning() {
    assert_eq!(
        check(NET, "1,a,d1,R,AP_A,,10.0.0.1,,1,1,600,200,\n"),
        [
            "warning: SD.csv:2: circuit \"1\": download max 600 Mbps is above parent node \"AP_A\"'s 500 Mbps; it will be clamped to 500",
            "warning: SD.csv:2: circuit \"1\": upload max 200 Mbps is above parent node \"AP_A\"'s 100 Mbps; it will be clamped to 100",
        ]
    );
}

#[test]
fn virtual_parent_compares_with_nearest_real_ancestor() {
    let net = r#"{"Site": {"downloadBandwidthMbps": 100, "uploadBandwidthMbps": 100,
        "children": {"V": {"downloadBandwidthMbps": 1000, "uploadBandwidthMbps": 1000, "virtual": true}}}}"#;
    assert_eq!(
        check(net, "1,a,d1,R,V,,10.0.0.1,,1,1,200,20,\n"),
        ["warning: SD.csv:2: circuit \"1\": download max 200 Mbps is above parent node \"Site\"'s 100 Mbps; it will be clamped to 100"]
    );
}

#[test]
fn a_circuit_under_a_virtual_top_level_node_goes_under_a_generated_parent_as_in_libreqos() {
    // LibreQoS: "Circuit '1' is parented to virtual top-level node 'V'.
    // Attaching it as unparented for shaping."
    let net = r#"{"V": {"downloadBandwidthMbps": 1000, "uploadBandwidthMbps": 1000, "virtual": true,
        "children": {"AP": {"downloadBandwidthMbps": 100, "uploadBandwidthMbps": 100}}}}"#;
    assert_eq!(
        check(net, "1,a,d1,R,V,,10.0.0.1,,1,1,20,20,\n2,b,d2,R,AP,,10.0.0.2,,1,1,20,20,\n"),
        ["warning: SD.csv:2: circuit \"1\": parent node \"V\" is virtual with no shaped node above it; the circuit goes under a generated parent node, as LibreQoS does"]
    );
}

#[test]
fn node_above_its_parent_is_a_warning() {
    let net = r#"{"Site": {"downloadBandwidthMbps": 100, "uploadBandwidthMbps": 100,
        "children": {"AP": {"downloadBandwidthMbps": 1000, "uploadBandwidthMbps": 100}}}}"#;
    assert_eq!(
        check(net, ""),
        ["warning: network.json:2: node \"AP\": download 1000 Mbps is above parent node \"Site\"'s 100 Mbps; it will be clamped to 100"]
    );
}

#[test]
fn levels_below_six_are_flattened_into_level_six_as_libreqos_does() {
    // N1..N8 nested, N3 virtual: the real levels are N1, N2, N4.. (N8 is at
    // level 7). LibreQoS makes every descendant of a level-5 node its child.
    let nest = |levels: usize, virtual_at: Option<usize>| {
        let mut s = String::new();
        for i in 1..=levels {
            let v = if Some(i) == virtual_at {
                ", \"virtual\": true"
            } else {
                ""
            };
            s.push_str(&format!(
                "{{\"N{i}\": {{\"downloadBandwidthMbps\": {}, \"uploadBandwidthMbps\": 10{v}, \"children\": ",
                100 - i
            ));
        }
        s.push_str("{}");
        s.push_str(&"}}".repeat(levels));
        s
    };
    assert!(check(&nest(MAX_NODE_DEPTH, None), "").is_empty());
    assert!(check(&nest(MAX_NODE_DEPTH + 1, Some(3)), "").is_empty());
    assert_eq!(
        check(&nest(MAX_NODE_DEPTH + 2, Some(3)), ""),
        ["warning: network.json:1: node \"N8\": node is at level 7 (virtual nodes not counted); as LibreQoS does below 6 levels, it becomes a child of \"N6\" at level 6, with download 92 Mbps and upload 10 Mbps (capped by the parents it leaves)"]
    );
    let l = load(("network.json", &nest(9, None)), ("SD.csv", H13.as_bytes()));
    let net = &l.network;
    assert_eq!(net.depth(), MAX_NODE_DEPTH);
    let n5 = net.node_by_name("N5").unwrap();
    let under_n5: Vec<&str> = net
        .children(n5)
        .iter()
        .map(|&c| net.node(c).name.as_str())
        .collect();
    assert_eq!(under_n5, ["N6", "N7", "N8", "N9"]);
    // Each keeps the lowest rate of the levels it left (N6's 94).
    let n9 = net.node(net.node_by_name("N9").unwrap());
    assert_eq!(n9.download, lqos_model::Rate::from_mbps(91));
}

#[test]
fn a_network_built_deeper_than_six_levels_is_an_error() {
    let mut net = lqos_model::Network::new();
    let mut parent: Option<String> = None;
    for i in 1..=MAX_NODE_DEPTH + 1 {
        let name = format!("N{i}");
        net.add_node(
            parent.as_deref(),
            lqos_model::Node {
                name: name.clone(),
                id: None,
                node_type: None,
                download: lqos_model::Rate::from_mbps(10),
                upload: lqos_model::Rate::from_mbps(10),
                virtual_node: false,
            },
        )
        .unwrap();
        parent = Some(name);
    }
    let msgs: Vec<String> = lqos_model::validate(&net, "net", "sd")
        .problems
        .iter()
        .map(|p| p.to_string())
        .collect();
    assert_eq!(
        msgs,
        ["net: node \"N7\": node is at level 7 of the hierarchy (virtual nodes not counted); LibreQoS shapes at most 6 node levels (reading network.json, it and lqos make deeper nodes children of their level-5 ancestor)"]
    );
}

#[test]
fn overlapping_addresses_across_circuits_are_errors() {
    assert_eq!(
        check(
            "{}",
            "1,a,d1,R,,,10.0.0.0/24,fd00::/48,1,1,2,2,\n\
             2,b,d2,R,,,10.0.0.200,fd00:0:0:1::/64,1,1,2,2,\n\
             3,c,d3,R,,,10.0.1.0/24,fd00:1::/48,1,1,2,2,\n\
             1,a,d4,R,,,10.0.0.7,,1,1,2,2,\n"
        ),
        [
            "error: SD.csv:3: circuit \"2\": IPv4 10.0.0.200/32 overlaps 10.0.0.0/24 of circuit \"1\" (line 2)",
            "error: SD.csv:3: circuit \"2\": IPv6 fd00:0:0:1::/64 overlaps fd00::/48 of circuit \"1\" (line 2)",
            "warning: SD.csv:5: circuit \"1\": IPv4 10.0.0.7/32 overlaps 10.0.0.0/24 of the same circuit (line 2)",
        ]
    );
}

#[test]
fn circuit_without_addresses_is_a_warning() {
    assert_eq!(
        check("{}", "1,a,d1,R,,,,,1,1,2,2,\n"),
        ["warning: SD.csv:2: circuit \"1\": circuit has no IPv4 or IPv6 address; no traffic will reach its class"]
    );
}

/// Regression: an unshaped circuit (parent node not in network.json) with
/// no address was also warned that "no traffic will reach its class", but
/// it has no class.
#[test]
fn an_unshaped_circuit_without_addresses_is_not_told_about_a_class() {
    let problems = check(NET, "1,a,d1,R,NoSuchAP,,,,1,1,2,2,\n");
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].starts_with("warning: SD.csv:2: circuit \"1\": parent node \"NoSuchAP\" does not exist in network.json; the circuit is not shaped"),
        "{problems:?}"
    );
}

#[test]
fn all_problems_of_all_files_in_one_report_sorted_by_file_and_line() {
    let net = r#"{"AP_A": {"downloadBandwidthMbps": 0, "uploadBandwidthMbps": 100}}"#;
    let csv = format!(
        "{H13}\n1,a,d1,R,AP_A,,10.0.0.1,,0,1,2,2,\n2,b,d2,R,AP_B,,10.0.0.1,,1,1,x,2,\n3,c,d3,R,AP_B,,10.0.0.3,,1,1,2,2,\n"
    );
    let conf = "[bridge]\nto_internet = \"eth0\"\nto_network = \"eth0\"\n";
    let l = load_with_config(
        ("network.json", net),
        ("SD.csv", csv.as_bytes()),
        Some(("lqos.conf", conf)),
    );
    let got: Vec<String> = l
        .report
        .problems
        .iter()
        .map(|p| format!("{}: {p}", p.severity))
        .collect();
    assert_eq!(
        got,
        [
            "warning: network.json:1: node \"AP_A\": downloadBandwidthMbps is 0; it takes its parent node's rate (the link's at the top level), as LibreQoS does",
            "error: SD.csv:2: circuit \"1\": download min 0 is zero",
            "error: SD.csv:3: circuit \"2\": download max \"x\" is not a number",
            "error: SD.csv:3: circuit \"2\": row skipped because of its rates",
            &format!("warning: SD.csv:4: circuit \"3\": parent node \"AP_B\" does not exist in network.json; {NOT_SHAPED}"),
            "error: lqos.conf: [bridge] to_internet and to_network are the same interface \"eth0\"",
        ]
    );
    assert_eq!(l.report.error_count(), 4);
    assert_eq!(l.report.warnings().count(), 2);
    assert!(l.require_valid().is_err());
}

#[test]
fn unreadable_files_are_reported_and_the_rest_still_checked() {
    let csv = format!("{H13}\n1,a,d1,R,AP_A,,10.0.0.1,,0,1,2,2,\n");
    let l = load_with_config(
        ("network.json", "{\"A\": "),
        ("SD.csv", csv.as_bytes()),
        Some((
            "lqos.conf",
            "[queues]\ndownlink_bandwidth_mbps = \"lots\"\n",
        )),
    );
    let got: Vec<String> = l.report.problems.iter().map(|p| p.to_string()).collect();
    assert_eq!(
        got,
        [
            "network.json:1: invalid JSON: EOF while parsing a value",
            "SD.csv:2: circuit \"1\": download min 0 is zero",
            "lqos.conf:2: invalid config: invalid type: string \"lots\", expected u64",
        ]
    );
    assert!(l
        .report
        .problems
        .iter()
        .all(|p| p.severity == Severity::Error));
}

#[test]
fn config_rules() {
    let conf = "[bridge]\nto_internet = \"a\"\nto_network = \"b\"\n[single_interface]\ninterface = \"c\"\n[queues]\nuplink_bandwidth_mbps = 0\n";
    let l = load_with_config(
        ("network.json", "{}"),
        ("SD.csv", H13.as_bytes()),
        Some(("lqos.conf", conf)),
    );
    let got: Vec<String> = l
        .report
        .problems
        .iter()
        .map(|p| format!("{}: {p}", p.severity))
        .collect();
    assert_eq!(
        got,
        [
            "warning: lqos.conf: both [bridge] and [single_interface] are set; [bridge] is used, as LibreQoS does",
            "error: lqos.conf: [queues] uplink_bandwidth_mbps is zero",
        ]
    );
}

#[test]
fn parent_node_id_wins_over_the_name_and_is_ignored_without_one_as_in_libreqos() {
    let net = r#"{"Site": {"downloadBandwidthMbps": 1000, "uploadBandwidthMbps": 1000, "id": "s-1",
        "children": {"AP_A": {"downloadBandwidthMbps": 500, "uploadBandwidthMbps": 100, "id": "ap-a"}}}}"#;
    let csv = "Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,Parent Node ID,MAC,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps\n\
        1,a,d1,R,,ap-a,,10.0.0.1,,1,1,2,2\n\
        2,b,d2,R,Site,ap-a,,10.0.0.2,,1,1,2,2\n\
        3,c,d3,R,AP_A,nope,,10.0.0.3,,1,1,2,2\n";
    let l = load(("network.json", net), ("SD.csv", csv.as_bytes()));
    // LibreQoS HEAD: an empty Parent Node means a generated parent node,
    // whatever the ID; a known ID beats the name.
    assert_eq!(l.network.circuits()[0].parent.as_deref(), None);
    assert_eq!(l.network.circuits()[1].parent.as_deref(), Some("AP_A"));
    assert_eq!(l.network.circuits()[2].parent.as_deref(), Some("AP_A"));
    let got: Vec<String> = l
        .report
        .problems
        .iter()
        .map(|p| format!("{}: {p}", p.severity))
        .collect();
    assert_eq!(
        got,
        [
            "warning: SD.csv:2: circuit \"1\": Parent Node is empty, so Parent Node ID \"ap-a\" (node \"AP_A\") is ignored, as LibreQoS does: the circuit goes under a generated parent node",
            "warning: SD.csv:3: circuit \"2\": Parent Node ID \"ap-a\" is node \"AP_A\" but Parent Node is \"Site\"; using node \"AP_A\", as LibreQoS does (the ID wins)",
            "warning: SD.csv:4: circuit \"3\": Parent Node ID \"nope\" matches no node id in network.json; using Parent Node \"AP_A\"",
        ]
    );
}

/// Every key of LibreQoS's lqos.conf that changes what it shapes is either
/// honoured (fast_queues_fq_codel, queue_mode: the planner reads them) or
/// named by `lqos check` with what lqos does instead.
#[test]
fn libreqos_keys_that_change_the_tree_are_honoured_or_reported() {
    let conf = r#"
[bridge]
to_internet = "eth0"
to_network = "eth1"
[single_interface]
interface = "eth2"
[queues]
monitor_only = true
fast_queues_fq_codel = 2500.5
use_binpacking = true
lazy_queues = "Htb"
dry_run = true
[treeguard]
enabled = true
[treeguard.links]
enabled = true
[stormguard]
enabled = true
[dynamic_circuits]
enabled = true
[long_term_stats]
enable_insight_topology = true
[uisp_integration]
enable_uisp = true
[splynx_integration]
enable_splynx = false
"#;
    let l = load_with_config(
        ("network.json", NET),
        ("SD.csv", H13.as_bytes()),
        Some(("lqos.conf", conf)),
    );
    assert!(l.config.queues.observe());
    assert_eq!(
        l.config.queues.fast_queues_fq_codel,
        Some(lqos_model::Rate::from_mbps_str("2500.5").unwrap())
    );
    let got: Vec<String> = l.report.problems.iter().map(|p| p.to_string()).collect();
    assert_eq!(
        got,
        [
            "lqos.conf: both [bridge] and [single_interface] are set; [bridge] is used, as LibreQoS does",
            "lqos.conf: [queues] queue_mode = \"observe\": no shaping tree, only the mq roots (as LibreQoS builds in observe mode); nothing is shaped",
            "lqos.conf: [queues] use_binpacking = true: LibreQoS's binpacking (one CpueQueueN class per queue above its top-level nodes, placed by live traffic weights) is not reproduced; lqos places top-level nodes by size (balanced) or in LibreQoS's round robin, without the CpueQueueN classes",
            "lqos.conf: [queues] lazy_queues = \"Htb\": LibreQoS creates leaves on traffic; lqos builds every class and leaf, and with lazy leaves ([lqos] lazy_leaves = true) the reload daemon gives circuits their leaf only while they carry traffic",
            "lqos.conf: [queues] dry_run = true: LibreQoS would only log its commands; lqos ignores this key and applies",
            "lqos.conf: [treeguard] is on: LibreQoS's TreeGuard virtualizes idle nodes and switches idle circuits between cake and fq_codel at runtime (and keeps the overrides); lqos does not, its tree follows network.json and ShapedDevices.csv alone",
            "lqos.conf: [stormguard] is on: LibreQoS's StormGuard changes site rates at runtime; lqos does not",
            "lqos.conf: [dynamic_circuits] is on: LibreQoS shapes runtime dynamic circuits; lqos shapes only the circuits of ShapedDevices.csv",
            "lqos.conf: [long_term_stats] enable_insight_topology = true: LibreQoS prefers ShapedDevices.insight.csv and network.insight.json where they exist; lqos reads the files it is given",
            "lqos.conf: integration uisp is on: LibreQoS then shapes from the integration's runtime files (its state directory's shaping_inputs.json), not network.json and ShapedDevices.csv; lqos reads the network.json and ShapedDevices.csv it is given (the integration exports them)",
        ]
    );
    // Each names its key, for a front end's own advice.
    use lqos_model::config::ConfigKey;
    let keys: Vec<_> = l.report.problems.iter().filter_map(|p| p.key).collect();
    assert_eq!(
        keys[..3],
        [
            ConfigKey::QueueMode,
            ConfigKey::UseBinpacking,
            ConfigKey::LazyQueues
        ]
    );
    assert_eq!(keys.len(), 9);
    // queue_mode wins over the legacy monitor_only; LibreQoS's defaults
    // (TreeGuard's circuits on, its links off) apply to what is not written.
    let l = load_with_config(
        ("network.json", NET),
        ("SD.csv", H13.as_bytes()),
        Some((
            "lqos.conf",
            "[bridge]\nto_internet = \"a\"\nto_network = \"b\"\n[queues]\nqueue_mode = \"shape\"\nmonitor_only = true\n[treeguard]\n[treeguard.links]\n",
        )),
    );
    assert!(!l.config.queues.observe());
    assert_eq!(l.config.treeguard.unwrap().active(), (false, true));
}
