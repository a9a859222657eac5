//! Generated networks validate clean and re-read equal.

use lqos_model::config::parse_config;
use lqos_model::network_json::parse_network_json;
use lqos_model::shaped_devices::parse_shaped_devices;
use lqos_model::write::{write_config, write_network_json, write_shaped_devices};
use lqos_model::{generate, load_with_config, GenParams, Network};
use proptest::prelude::*;

fn reread(
    g: &lqos_model::Generated,
) -> (Network, lqos_model::config::LqosConfig, lqos_model::Report) {
    let nj = write_network_json(&g.network);
    let sd = write_shaped_devices(&g.network);
    let conf = write_config(&g.config);
    let loaded = load_with_config(
        ("network.json", &nj),
        ("ShapedDevices.csv", sd.as_bytes()),
        Some(("lqos.conf", &conf)),
    );
    (loaded.network, loaded.config, loaded.report)
}

#[test]
fn default_generated_network_is_clean_and_rereads_equal() {
    let g = generate(&GenParams::default());
    let (net, config, report) = reread(&g);
    assert!(report.is_clean(), "{report}");
    assert_eq!(config, g.config);
    assert_eq!(net, g.network);
}

#[test]
fn generated_files_parse_individually() {
    let g = generate(&GenParams::with_circuits(200));
    let back = parse_network_json("network.json", &write_network_json(&g.network)).unwrap();
    assert_eq!(back.node_count(), g.network.node_count());
    let sd = parse_shaped_devices(
        "ShapedDevices.csv",
        write_shaped_devices(&g.network).as_bytes(),
    )
    .unwrap();
    assert!(sd.report.is_clean(), "{}", sd.report);
    assert_eq!(sd.circuits, g.network.circuits());
    assert_eq!(
        parse_config("lqos.conf", &write_config(&g.config)).unwrap(),
        g.config
    );
}

#[test]
fn flat_network_writes_empty_object() {
    let g = generate(&{
        let mut p = GenParams::with_circuits(20);
        p.depth = 0;
        p
    });
    assert_eq!(write_network_json(&g.network), "{}\n");
    let (net, _, report) = reread(&g);
    assert!(report.is_clean(), "{report}");
    assert_eq!(net, g.network);
}

#[test]
fn same_seed_same_bytes_other_seed_other_bytes() {
    let p = {
        let mut p = GenParams::with_circuits(300);
        p.seed = 7;
        p
    };
    let a = write_shaped_devices(&generate(&p).network);
    let b = write_shaped_devices(&generate(&p).network);
    assert_eq!(a, b);
    let c = write_shaped_devices(
        &generate(&{
            let mut p = p;
            p.seed = 8;
            p
        })
        .network,
    );
    assert_ne!(a, c);
}

#[test]
fn generated_network_has_multi_device_circuits_ipv6_and_fractional_rates() {
    let g = generate(&GenParams::with_circuits(2000));
    let c = g.network.circuits();
    let multi = c.iter().filter(|c| c.devices.len() > 1).count();
    assert!(multi > 40 && multi < 200, "{multi} multi-device circuits");
    assert!(c
        .iter()
        .any(|c| c.devices.iter().any(|d| !d.ipv6.is_empty())));
    assert!(c.iter().any(|c| c.download_max.bps() % 1_000_000 != 0));
    assert!(c
        .iter()
        .all(|c| c.download_min < c.download_max && c.upload_min < c.upload_max));
    assert_eq!(g.network.depth(), 3);
    assert_eq!(g.config.bridge.as_ref().unwrap().to_network, "ens19");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn any_generated_network_rereads_equal(
        circuits in 0usize..300,
        seed in any::<u64>(),
        sites in 1usize..5,
        site_fanout in 1usize..4,
        fanout in 1usize..5,
        depth in 0usize..8,
        multi in 0.0f64..0.5,
        v6 in 0.0f64..1.0,
        range in 0.0f64..0.3,
        skew in 0.0f64..2.0,
        oversubscribed in any::<bool>(),
    ) {
        let mut p = GenParams::with_circuits(circuits);
        (p.seed, p.sites, p.site_fanout, p.fanout, p.depth) = (seed, sites, site_fanout, fanout, depth);
        (p.multi_device_fraction, p.ipv6_fraction, p.ipv4_range_fraction) = (multi, v6, range);
        (p.site_skew, p.oversubscribed) = (skew, oversubscribed);
        let g = generate(&p);
        let (net, config, report) = reread(&g);
        prop_assert!(report.is_clean(), "{}", report);
        prop_assert_eq!(config, g.config);
        prop_assert_eq!(net, g.network);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Untrusted text (quotes, commas, newlines, `#`, control and non-ASCII
    /// characters) survives a write and a re-read unchanged.
    #[test]
    fn any_text_fields_survive_write_and_reread(
        id in "[#\"a-z0-9,;$`\n ]{0,8}[a-z0-9#\"]",
        name in any::<String>(),
        comment in any::<String>(),
        dev_name in any::<String>(),
        sqm in prop_oneof![Just(None), Just(Some(("cake".to_string(), "fq_codel".to_string())))],
    ) {
        let mut g = generate(&{ let mut p = GenParams::with_circuits(2); p.depth = 0; p });
        let mut circuits = g.network.circuits().to_vec();
        circuits[0].id = id.trim().into();
        prop_assume!(!circuits[0].id.is_empty() && circuits[0].id != circuits[1].id);
        circuits[0].name = name.into();
        circuits[0].comment = comment.into();
        circuits[0].devices[0].name = dev_name.into();
        circuits[0].sqm = sqm.map(|(d, u)| lqos_model::SqmOverride::new(d, u));
        g.network.set_circuits(circuits);
        let text = write_shaped_devices(&g.network);
        let sd = parse_shaped_devices("ShapedDevices.csv", text.as_bytes()).unwrap();
        prop_assert!(!sd.report.has_errors(), "{}", sd.report);
        // Line numbers follow embedded newlines; compare the rest.
        let without_lines = |cs: &[lqos_model::Circuit]| {
            let mut cs = cs.to_vec();
            for d in cs.iter_mut().flat_map(|c| c.devices.iter_mut()) {
                d.line = 0;
            }
            cs
        };
        prop_assert_eq!(without_lines(&sd.circuits), without_lines(g.network.circuits()));
    }
}
