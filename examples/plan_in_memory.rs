//! Plan a network in memory: LibreQoS inputs as strings -> validated
//! network -> planner config -> plan -> `tc -b` text. No files, no kernel.
//!
//! `cargo run -p lqos-apply --example plan_in_memory`

use lqos_apply::inputs::{plan_config, PlanOverrides, QueueCount};

const NETWORK: &str = r#"{
  "Site_1": {"downloadBandwidthMbps": 1000, "uploadBandwidthMbps": 500,
    "children": {"AP_A": {"downloadBandwidthMbps": 500, "uploadBandwidthMbps": 100}}},
  "Site_2": {"downloadBandwidthMbps": 200, "uploadBandwidthMbps": 200}
}"#;

const CONF: &str = r#"
[bridge]
to_internet = "ens20"
to_network = "ens19"
[queues]
default_sqm = "cake diffserv4"
"#;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let devices = format!(
        "{}\n\
         c1,Main St,d1,Router,AP_A,,100.64.0.1,,2.5,1,10.5,5.25,\n\
         c2,Shop,d2,Router,AP_A,,100.64.0.2,,25,10,600,50,\n\
         c3,Farm,d3,Router,Site_2,,100.64.0.3,,100,10,100,20,\n",
        lqos_model::shaped_devices::LEGACY_HEADER.join(",")
    );
    // Load + validate: every problem with its file, line and circuit.
    let loaded = lqos_model::load_with_config(
        ("network.json", NETWORK),
        ("ShapedDevices.csv", devices.as_bytes()),
        Some(("lqos.conf", CONF)),
    );
    eprint!("{}", loaded.report);
    if loaded.report.has_errors() {
        return Err("the inputs have errors".into());
    }
    // Config: lqos.conf + the operator's overrides + a queue count.
    let overrides = PlanOverrides::default();
    let cfg = plan_config(&loaded.config, None, &overrides, QueueCount::Default(2))?;
    // Plan: per interface an ordered stream of typed ops.
    let plan = lqos_tc::plan(&loaded.network, &cfg, None)?;
    for ip in &plan.interfaces {
        println!("# {} ({:?}): {} ops", ip.dev, ip.direction, ip.ops.len());
    }
    print!("{}", lqos_tc::render::render_combined(&plan, true));
    Ok(())
}
