//! Every LibreQoS sample file (copied once from LibreQoS into
//! `samples/libreqos/`, linked here as `tests/samples` so the packaged
//! crate has them; the fuzz seed corpus links to them too) loads the way
//! LibreQoS loads it.

use std::path::PathBuf;

use lqos_model::config::parse_config;
use lqos_model::network_json::parse_network_json;
use lqos_model::shaped_devices::parse_shaped_devices;
use lqos_model::{load_with_config, Rate, Severity};

fn read(rel: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn csv(name: &str) -> String {
    read(&format!("tests/samples/{name}"))
}

fn json(name: &str) -> String {
    read(&format!("tests/samples/{name}"))
}

#[test]
fn example_csv_13_field_rows_under_15_column_header_read_like_libreqos() {
    let sd = parse_shaped_devices(
        "ShapedDevices.csv",
        csv("ShapedDevices.example.csv").as_bytes(),
    )
    .unwrap();
    assert_eq!(sd.circuits.len(), 10);
    let c = &sd.circuits[0];
    assert_eq!(c.id, "10001");
    assert_eq!(c.name, "968 Circle St., Gurnee, IL 60031");
    assert_eq!(c.parent.as_deref(), Some("AP_A"));
    assert_eq!(c.devices[0].id, "1");
    assert_eq!(c.devices[0].mac, "");
    assert_eq!(
        c.devices[0].ipv4,
        vec![
            "100.64.0.1/32".parse().unwrap(),
            "100.64.0.2/32".parse().unwrap()
        ]
    );
    assert_eq!(
        c.devices[0].ipv6,
        vec!["fdd7:b724:0:100::/56".parse().unwrap()]
    );
    assert_eq!(
        (c.download_min, c.download_max),
        (Rate::from_mbps(1), Rate::from_mbps(155))
    );
    let c2 = &sd.circuits[1];
    assert_eq!(c2.download_min.to_string(), "0.5");
    assert_eq!(c2.download_max.to_string(), "2.5");
    assert_eq!(sd.circuits[3].upload_max.to_string(), "50.25");
    // One warning for the whole file, at the first such row.
    let msgs: Vec<String> = sd.report.problems.iter().map(|p| p.to_string()).collect();
    assert_eq!(msgs.len(), 1, "{msgs:?}");
    assert!(msgs[0].starts_with(
        "ShapedDevices.csv:2: 10 row(s) have 13 fields but the header has 15 columns; read them in the legacy 13-column order"
    ));
    assert_eq!(sd.report.problems[0].severity, Severity::Warning);
}

#[test]
fn legacy_csv_with_comment_lines_and_multi_device_circuit() {
    let sd = parse_shaped_devices(
        "ShapedDevices.csv",
        csv("ShapedDevices.v14-legacy.example.csv").as_bytes(),
    )
    .unwrap();
    assert!(sd.report.is_clean(), "{}", sd.report);
    assert_eq!(sd.circuits.len(), 10);
    assert_eq!(sd.device_count(), 11);
    let c = sd.circuits.iter().find(|c| c.id == "2794").unwrap();
    assert_eq!(c.devices.len(), 2);
    assert_eq!((c.devices[0].line, c.devices[1].line), (7, 8));
}

#[test]
fn every_sample_pair_loads_without_errors() {
    // The example lqos.conf has TreeGuard on: one warning in each.
    let conf = read("tests/samples/lqos.example.toml");
    for (n, d, warnings) in [
        ("network.example.json", "ShapedDevices.example.csv", 4),
        (
            "network.v14.example.json",
            "ShapedDevices.v14-legacy.example.csv",
            5,
        ),
        ("radius-network.json", "radius-ShapedDevices.csv", 3),
    ] {
        let (nt, dt) = (json(n), csv(d));
        parse_network_json(n, &nt).unwrap();
        let l = load_with_config((n, &nt), (d, dt.as_bytes()), Some(("lqos.conf", &conf)));
        assert!(!l.report.has_errors(), "{n} {d}:\n{}", l.report);
        assert_eq!(l.report.warning_count(), warnings, "{n} {d}:\n{}", l.report);
    }
}

#[test]
fn example_network_json_keeps_file_order_and_types() {
    let net = parse_network_json("network.json", &json("network.example.json")).unwrap();
    assert_eq!(net.node_count(), 11);
    assert_eq!(net.depth(), 5);
    let names: Vec<&str> = net
        .nodes_preorder()
        .into_iter()
        .map(|i| net.node(i).name.as_str())
        .collect();
    assert_eq!(&names[..4], ["Site_1", "AP_A", "Site_3", "PoP_5"]);
    let ap = net.node(net.node_by_name("AP_A").unwrap());
    assert_eq!(ap.node_type.as_deref(), Some("ap"));
    assert_eq!(ap.download, Rate::from_mbps(500));
}

#[test]
fn radius_sample_keeps_ids_and_non_mac_text() {
    let net = parse_network_json("network.json", &json("radius-network.json")).unwrap();
    let n = net.node(net.node_by_name("PPPoE Access").unwrap());
    assert_eq!(n.id.as_deref(), Some("lab-pppoe-access"));
    let sd = parse_shaped_devices(
        "ShapedDevices.csv",
        csv("radius-ShapedDevices.csv").as_bytes(),
    )
    .unwrap();
    assert_eq!(sd.circuits[0].devices[0].mac, "pppoe-known");
    assert_eq!(
        sd.report.problems[0].to_string(),
        "ShapedDevices.csv:2: circuit \"radius-known-circuit\": MAC \"pppoe-known\" is not a MAC address (kept as written)"
    );
}

#[test]
fn example_lqos_conf_loads() {
    let c = parse_config("lqos.conf", &read("tests/samples/lqos.example.toml")).unwrap();
    let b = c.bridge.unwrap();
    assert_eq!(
        (b.to_internet.as_str(), b.to_network.as_str()),
        ("eth0", "eth1")
    );
    assert!(c.single_interface.is_none());
    assert_eq!(c.queues.default_sqm, "cake diffserv4");
    assert_eq!(c.queues.downlink_bandwidth_mbps, 1000);
    assert_eq!(c.queues.override_available_queues, None);
}
