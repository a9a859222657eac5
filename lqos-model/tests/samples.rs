//! Every LibreQoS sample file in ../shared/data/libreqos/ loads.

use std::path::PathBuf;

use lqos_model::{load_with_config, parse_config, parse_network_json, parse_shaped_devices};

fn data(name: &str) -> Option<String> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/libreqos");
    let alt = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/libreqos");
    std::fs::read_to_string(dir.join(name))
        .or_else(|_| std::fs::read_to_string(alt.join(name)))
        .ok()
}

#[test]
fn print_samples() {
    for (n, d) in [
        ("network.example.json", "ShapedDevices.example.csv"),
        (
            "network.v14.example.json",
            "ShapedDevices.v14-legacy.example.csv",
        ),
        ("radius-network.json", "radius-ShapedDevices.csv"),
    ] {
        let nt = data(n).unwrap();
        let dt = data(d).unwrap();
        let ct = data("lqos.example.toml").unwrap();
        let l = load_with_config((n, &nt), (d, dt.as_bytes()), Some(("lqos.conf", &ct)));
        println!("{n} {d}: {:?}\n{}", l.summary(), l.report);
        parse_network_json(n, &nt).unwrap();
        parse_shaped_devices(d, dt.as_bytes()).unwrap();
        parse_config("lqos.conf", &ct).unwrap();
    }
}
