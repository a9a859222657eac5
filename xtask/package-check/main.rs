//! The scratch crate of `cargo xtask package`, built outside the lqos
//! workspace against the unpacked `.crate` files: it reads the files `lqos
//! gen` wrote (DIR/network.json, ShapedDevices.csv, lqos.conf), plans them
//! with lqos-tc as `lqos plan` does (16 queues unless lqos.conf overrides
//! them), writes LibreQoS's linux_tc.txt to OUT, and loads the plan into
//! lqos-apply's recording kernel, verified.
//!
//! Usage: lqos-package-check DIR OUT

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args_os().skip(1).map(PathBuf::from);
    let (Some(dir), Some(out)) = (args.next(), args.next()) else {
        return Err("usage: lqos-package-check DIR OUT".into());
    };
    let network = std::fs::read_to_string(dir.join("network.json"))?;
    let devices = std::fs::read(dir.join("ShapedDevices.csv"))?;
    let conf = std::fs::read_to_string(dir.join("lqos.conf"))?;
    let loaded = lqos_model::load_with_config(
        ("network.json", &network),
        ("ShapedDevices.csv", devices.as_slice()),
        Some(("lqos.conf", &conf)),
    );
    loaded.require_valid()?;
    let queues = loaded.config.queues.override_available_queues.unwrap_or(16);
    let cfg = lqos_tc::PlanConfig::from_lqos_config(&loaded.config, queues)?;
    let plan = lqos_tc::plan(&loaded.network, &cfg, None)?;
    std::fs::write(&out, lqos_tc::render::render_combined(&plan, false))?;

    let mut kernel = lqos_apply::backend::Recording::new();
    for ip in &plan.interfaces {
        kernel = kernel.with_link(&ip.dev, queues);
    }
    let opts = lqos_apply::ApplyOptions::default()
        .verify_after(true)
        .skip_memory_check(true);
    let report = lqos_apply::apply_plan(&plan, &kernel, &kernel, opts, &lqos_apply::backend::NoProgress)?;
    report.load.ok_or("no load")?.into_result()?;
    let verify = report.verify.ok_or("not verified")?;
    if !verify.is_clean() {
        return Err(format!("the recording kernel differs from the plan: {verify:?}").into());
    }
    println!(
        "{} circuits planned on {} interfaces, {} ops loaded into the recording kernel and verified",
        loaded.network.circuits().len(),
        plan.interfaces.len(),
        report.changes.iter().map(|c| c.stream.len()).sum::<usize>()
    );
    Ok(())
}
