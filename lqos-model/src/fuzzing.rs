//! Entry points shared by the cargo-fuzz targets (`fuzz/`) and the
//! stable-toolchain corpus test: any bytes in, no panic out.

/// Runs arbitrary bytes through the `ShapedDevices.csv` parser and, when it
/// reads, through validation too.
pub fn fuzz_shaped_devices(data: &[u8]) {
    if let Ok(sd) = crate::parse_shaped_devices("fuzz.csv", data) {
        let mut net = crate::Network::new();
        net.set_circuits(sd.circuits);
        let report = crate::validate(&net, "network.json", "fuzz.csv");
        for p in &report.problems {
            let _ = p.to_string();
        }
    }
}

/// Runs arbitrary bytes through the `network.json` parser and validation.
pub fn fuzz_network_json(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok((net, report)) = crate::parse_network_json_with_report("fuzz.json", &text) {
        let _ = net.nodes_preorder();
        let _ = report.to_string();
        let _ = crate::validate(&net, "fuzz.json", "ShapedDevices.csv");
    }
}
