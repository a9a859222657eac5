//! network.json parsing: accepted forms and node problems, messages
//! asserted.

use lqos_model::network_json::{parse_network_json, parse_network_json_with_report};
use lqos_model::{ModelError, Rate};

fn messages(text: &str) -> Vec<String> {
    let (_, r) = parse_network_json_with_report("net.json", text).unwrap();
    r.problems
        .iter()
        .map(|p| format!("{}: {p}", p.severity))
        .collect()
}

#[test]
fn empty_object_is_a_flat_network() {
    let net = parse_network_json("net.json", "{}").unwrap();
    assert_eq!(net.node_count(), 0);
    assert_eq!(net.depth(), 0);
    let net = parse_network_json("net.json", " \u{feff}{}\n").unwrap_err();
    assert!(matches!(net, ModelError::Json { .. }));
}

#[test]
fn nested_nodes_keep_file_order_and_all_fields() {
    let text = r#"{
  "Z": {"downloadBandwidthMbps": 100, "uploadBandwidthMbps": 50, "id": "z-1", "type": "site",
        "children": {
           "M": {"downloadBandwidthMbps": 10, "uploadBandwidthMbps": 5, "virtual": true},
           "A": {"downloadBandwidthMbps": 10, "uploadBandwidthMbps": 5, "id": 42, "extra": [1, 2]}
        }},
  "B": {"downloadBandwidthMbps": 0.0028, "uploadBandwidthMbps": 1.5e3, "children": {}}
}"#;
    let net = parse_network_json("net.json", text).unwrap();
    let names: Vec<&str> = net
        .nodes_preorder()
        .into_iter()
        .map(|i| net.node(i).name.as_str())
        .collect();
    assert_eq!(names, ["Z", "M", "A", "B"]);
    let z = net.node(net.node_by_name("Z").unwrap());
    assert_eq!(
        (z.id.as_deref(), z.node_type.as_deref()),
        (Some("z-1"), Some("site"))
    );
    let m = net.node(net.node_by_name("M").unwrap());
    assert!(m.virtual_node);
    let a = net.node(net.node_by_name("A").unwrap());
    assert_eq!(a.id.as_deref(), Some("42"));
    let b = net.node(net.node_by_name("B").unwrap());
    assert_eq!(b.download.bps(), 2800);
    assert_eq!(b.upload, Rate::from_mbps(1500));
}

#[test]
fn invalid_json_names_line_and_column() {
    let e =
        parse_network_json("net.json", "{\n  \"A\": {\"downloadBandwidthMbps\": 1,\n").unwrap_err();
    assert_eq!(
        e.to_string(),
        "net.json:3:0: invalid JSON: EOF while parsing an object"
    );
    let e = parse_network_json("net.json", "[1, 2]").unwrap_err();
    assert_eq!(
        e.to_string(),
        "net.json:1:0: invalid JSON: invalid type: sequence, expected an object"
    );
}

#[test]
fn node_problems_are_collected_with_lines() {
    let text = r#"{
  "A": {"downloadBandwidthMbps": 0, "uploadBandwidthMbps": 500000},
  "B": 5,
  "C": {"uploadBandwidthMbps": -1, "virtual": "yes", "type": 3},
  "D": {"downloadBandwidthMbps": "fast", "uploadBandwidthMbps": null, "children": []},
  "A": {"downloadBandwidthMbps": 1, "uploadBandwidthMbps": 1}
}"#;
    assert_eq!(
        messages(text),
        [
            "warning: net.json:2: node \"A\": downloadBandwidthMbps is 0; it takes its parent node's rate (the link's at the top level), as LibreQoS does",
            "error: net.json:2: node \"A\": uploadBandwidthMbps 500000 is absurdly large (above 400000 Mbps)",
            "error: net.json:3: node \"B\": node is a number, not an object; skipped",
            "warning: net.json:4: node \"C\": uploadBandwidthMbps -1 is negative; it takes its parent node's rate (the link's at the top level), as LibreQoS does",
            "error: net.json:4: node \"C\": virtual is a string, not true or false",
            "error: net.json:4: node \"C\": type is a number, not a string",
            "warning: net.json:4: node \"C\": downloadBandwidthMbps is missing; it takes its parent node's rate (the link's at the top level), as LibreQoS does",
            "error: net.json:5: node \"D\": downloadBandwidthMbps \"fast\" is not a number",
            "error: net.json:5: node \"D\": uploadBandwidthMbps \"null\" is not a number",
            "error: net.json:5: node \"D\": children is an array, not an object",
            "error: net.json:6: node \"A\": node name is used twice; this one is skipped with its children",
        ]
    );
    // The plain parser returns the first error.
    assert_eq!(
        parse_network_json("net.json", text)
            .unwrap_err()
            .to_string(),
        "net.json:2: node \"A\": uploadBandwidthMbps 500000 is absurdly large (above 400000 Mbps)"
    );
}

#[test]
fn duplicate_name_in_another_subtree_is_an_error() {
    let text = r#"{"S": {"downloadBandwidthMbps": 10, "uploadBandwidthMbps": 10,
        "children": {"S": {"downloadBandwidthMbps": 1, "uploadBandwidthMbps": 1}}}}"#;
    assert_eq!(
        messages(text),
        ["error: net.json:2: node \"S\": node name is used twice; this one is skipped with its children"]
    );
}

#[test]
fn hostile_node_names_are_quoted_in_messages() {
    let text =
        "{\"x\\nerror: forged\": {\"downloadBandwidthMbps\": 0, \"uploadBandwidthMbps\": 1}}";
    assert_eq!(
        messages(text),
        ["warning: net.json:1: node \"x\\nerror: forged\": downloadBandwidthMbps is 0; it takes its parent node's rate (the link's at the top level), as LibreQoS does"]
    );
}

#[test]
fn very_deep_nesting_is_cut_not_a_stack_overflow() {
    let depth = 5000;
    let mut text = String::new();
    for i in 0..depth {
        text.push_str(&format!(
            "{{\"n{i}\":{{\"downloadBandwidthMbps\":1,\"uploadBandwidthMbps\":1,\"children\":"
        ));
    }
    text.push_str("{}");
    text.push_str(&"}}".repeat(depth));
    let (net, report) = parse_network_json_with_report("net.json", &text).unwrap();
    assert_eq!(net.node_count(), 32);
    // Levels 7..=32 are LibreQoS's flattening (warnings); deeper is not read.
    assert_eq!(net.depth(), lqos_model::Network::MAX_NODE_DEPTH);
    assert_eq!(
        report.warning_count(),
        32 - lqos_model::Network::MAX_NODE_DEPTH
    );
    assert_eq!(
        report.errors().next().unwrap().to_string(),
        "net.json:1: node \"n32\": node is nested more than 32 levels deep; skipped with its children"
    );
}

#[test]
fn duplicate_node_ids_are_errors() {
    let text = r#"{"A": {"downloadBandwidthMbps": 10, "uploadBandwidthMbps": 10, "id": "x"},
 "B": {"downloadBandwidthMbps": 10, "uploadBandwidthMbps": 10, "id": "x"}}"#;
    assert_eq!(
        messages(text),
        ["error: net.json:2: node \"B\": node id \"x\" is already used by node \"A\" (line 1)"]
    );
}
