//! Entry points shared by the cargo-fuzz targets (`fuzz/`) and the
//! stable-toolchain corpus test: any bytes in, no panic out.

/// Runs arbitrary bytes through the `ShapedDevices.csv` parser and, when it
/// reads, through validation too.
pub fn fuzz_shaped_devices(data: &[u8]) {
    if let Ok(sd) = crate::shaped_devices::parse_shaped_devices("fuzz.csv", data) {
        let mut net = crate::network::Network::new();
        net.set_circuits(sd.circuits);
        let report = crate::validate::validate(&net, "network.json", "fuzz.csv");
        for p in &report.problems {
            let _ = p.to_string();
        }
    }
}

/// Runs arbitrary bytes through the `network.json` parser and validation.
pub fn fuzz_network_json(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok((net, report)) =
        crate::network_json::parse_network_json_with_report("fuzz.json", &text)
    {
        let _ = net.nodes_preorder();
        let _ = report.to_string();
        let _ = crate::validate::validate(&net, "fuzz.json", "ShapedDevices.csv");
    }
}

/// Runs arbitrary bytes through the `lqos.conf` parser.
pub fn fuzz_config(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    match crate::config::parse_config("lqos.conf", &text) {
        Ok(conf) => {
            let _ = crate::write::write_config(&conf);
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
}

/// The network the incremental re-read target reads its files against.
const EDIT_NETWORK: &str = r#"{
  "Site_1": {"downloadBandwidthMbps": 1000, "uploadBandwidthMbps": 1000, "id": "s1",
    "children": {
      "AP_A": {"downloadBandwidthMbps": 500, "uploadBandwidthMbps": 500, "id": "a"},
      "AP_B": {"downloadBandwidthMbps": 200, "uploadBandwidthMbps": 200, "id": "b"}}},
  "Site_2": {"downloadBandwidthMbps": 100, "uploadBandwidthMbps": 100}
}"#;

/// The incremental re-read of `ShapedDevices.csv` against a full read, as
/// a differential: `data` is an old file, a NUL byte and a new file. When
/// the old file reads without errors and [`DevicesIndex::edit`] patches the
/// edit, the patched network equals a full read of the new file and the
/// patch's problems are the full read's problems on those circuits' lines;
/// `Same` only for equal bytes; `Full` is always allowed.
///
/// [`DevicesIndex::edit`]: crate::DevicesIndex::edit
pub fn fuzz_devices_edit(data: &[u8]) {
    let (old, new) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, data),
    };
    let full_old = crate::load::load(("network.json", EDIT_NETWORK), ("SD.csv", old));
    if full_old.report.has_errors() {
        return;
    }
    let Some(index) =
        crate::devices_index::DevicesIndex::new("SD.csv", old.to_vec(), &full_old.network)
    else {
        return;
    };
    match index.edit(&full_old.network, new) {
        crate::devices_index::DevicesEdit::Same => assert_eq!(old, new, "Same for different bytes"),
        crate::devices_index::DevicesEdit::Full(why) => {
            let _ = why.to_string();
        }
        crate::devices_index::DevicesEdit::Patch(patch) => {
            let full_new = crate::load::load(("network.json", EDIT_NETWORK), ("SD.csv", new));
            assert!(
                !full_new.report.has_errors(),
                "patched an edit whose full read has errors: {}",
                full_new.report
            );
            let lines: Vec<usize> = patch
                .circuits
                .iter()
                .flat_map(|(_, c)| c.devices.iter().map(|d| d.line))
                .collect();
            let on_lines: Vec<String> = full_new
                .report
                .problems
                .iter()
                .filter(|p| p.line.is_some_and(|l| lines.contains(&l)))
                .map(|p| p.to_string())
                .collect();
            let patched: Vec<String> = patch
                .report
                .problems
                .iter()
                .map(|p| p.to_string())
                .collect();
            assert_eq!(
                patched, on_lines,
                "the patch's problems differ from a full read's"
            );
            let mut index = index;
            let mut net = full_old.network.clone();
            index.commit(&mut net, patch, new.to_vec());
            assert_eq!(
                net, full_new.network,
                "patched network differs from a full read"
            );
        }
    }
}
