//! Golden tests: LibreQoS's sample inputs render to checked-in tc text.
//! Regenerate with `LQOS_BLESS=1 cargo test -p lqos-tc --test golden`.

use std::path::Path;

use lqos_tc::parse::parse_batch;
use lqos_tc::render::render_combined;
use lqos_tc::tree::TcTree;
use lqos_tc::{plan, PlanConfig};

fn check(name: &str, network: &str, devices: &str) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let samples = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/samples");
    let net_text = std::fs::read_to_string(samples.join(network)).unwrap();
    let dev_bytes = std::fs::read(samples.join(devices)).unwrap();
    let loaded = lqos_model::load((network, &net_text), (devices, dev_bytes.as_slice()));
    assert_eq!(loaded.report.error_count(), 0, "{}", loaded.report);
    let cfg = PlanConfig::bridge("ens19", "ens20", 4);
    let p = plan(&loaded.network, &cfg, None).unwrap();
    let text = render_combined(&p, false);
    // The text is valid: it parses back and builds both trees on the model.
    let parsed = parse_batch(&text).unwrap();
    for ip in &p.interfaces {
        let ops: Vec<_> = parsed
            .iter()
            .filter(|(d, _)| *d == ip.dev)
            .map(|(_, o)| o.clone())
            .collect();
        assert_eq!(TcTree::from_ops(&ops).unwrap(), ip.tree());
    }
    let golden = dir.join("golden").join(format!("{name}.txt"));
    if std::env::var_os("LQOS_BLESS").is_some() {
        std::fs::write(&golden, &text).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&golden).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with LQOS_BLESS=1 to create it)",
            golden.display()
        )
    });
    if want != text {
        let first = want
            .lines()
            .zip(text.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(want.lines().count().min(text.lines().count()));
        panic!(
            "{name}: output differs from {} at line {}:\n want: {:?}\n  got: {:?}\n(LQOS_BLESS=1 to accept)",
            golden.display(),
            first + 1,
            want.lines().nth(first),
            text.lines().nth(first)
        );
    }
}

#[test]
fn libreqos_example() {
    check(
        "example",
        "network.example.json",
        "ShapedDevices.example.csv",
    );
}

#[test]
fn libreqos_v14_legacy() {
    check(
        "v14-legacy",
        "network.v14.example.json",
        "ShapedDevices.v14-legacy.example.csv",
    );
}

#[test]
fn libreqos_radius() {
    check("radius", "radius-network.json", "radius-ShapedDevices.csv");
}

#[test]
fn config_from_libreqos_example_toml() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/samples");
    let text = std::fs::read_to_string(dir.join("lqos.example.toml")).unwrap();
    let conf = lqos_model::config::parse_config("lqos.example.toml", &text).unwrap();
    let cfg = PlanConfig::from_lqos_config(&conf, 8).unwrap();
    assert_eq!(
        cfg.interfaces,
        lqos_tc::config::Interfaces::Bridge {
            download: "eth1".into(),
            upload: "eth0".into()
        }
    );
    assert_eq!(cfg.queues, 8);
    assert_eq!(cfg.default_sqm, lqos_tc::config::LeafSpec::cake_diffserv4());
    assert_eq!(cfg.download_capacity, lqos_model::Rate::from_mbps(1000));
    // On a stick: the queues split in half.
    let stick = text.replace("[bridge]", "[old_bridge]").replace(
        "#[single_interface]\n#interface = \"eth0\"",
        "[single_interface]\ninterface = \"eth0\"",
    );
    let conf = lqos_model::config::parse_config("lqos.toml", &stick).unwrap();
    let cfg = PlanConfig::from_lqos_config(&conf, 8).unwrap();
    assert_eq!(cfg.queues_per_direction(), 4);
    // Neither section: a clear error.
    let none = text.replace("[bridge]", "[old_bridge]");
    let conf = lqos_model::config::parse_config("lqos.toml", &none).unwrap();
    let e = PlanConfig::from_lqos_config(&conf, 8).unwrap_err();
    assert!(
        e.to_string()
            .contains("neither [bridge] nor [single_interface]"),
        "{e}"
    );
}
