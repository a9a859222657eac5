//! `lqos gen`: write a synthetic network (network.json, ShapedDevices.csv,
//! lqos.conf) for tests and benchmarks.

use std::path::PathBuf;

use anyhow::Context;
use lqos_model::write::{write_config, write_network_json, write_shaped_devices};
use lqos_model::{generate, GenParams};

use super::{Done, Outcome};
use crate::out::outln;

/// Arguments of `lqos gen`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Number of circuits.
    #[arg(long, default_value_t = 1000)]
    pub circuits: usize,
    /// RNG seed (same seed, same files).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Top-level sites.
    #[arg(long, default_value_t = GenParams::default().sites)]
    pub sites: usize,
    /// Child sites per site above the last site level.
    #[arg(long, default_value_t = GenParams::default().site_fanout)]
    pub site_fanout: usize,
    /// APs per last-level site.
    #[arg(long, default_value_t = GenParams::default().fanout)]
    pub fanout: usize,
    /// Levels of sites (0 = flat network).
    #[arg(long, default_value_t = GenParams::default().depth)]
    pub depth: usize,
    /// Share of circuits with several devices (0..1).
    #[arg(long, default_value_t = GenParams::default().multi_device_fraction)]
    pub multi_device_fraction: f64,
    /// Minimums of a quarter of each circuit's maximum even where an AP's
    /// circuits then ask for more than the AP guarantees (the planner
    /// squashes them, as LibreQoS does). Without it each AP's circuits get
    /// a smaller fraction where needed, so every minimum is guaranteed.
    #[arg(long)]
    pub oversubscribed: bool,
    /// Output directory (created if missing).
    #[arg(long, default_value = ".")]
    pub out: PathBuf,
    /// Overwrite existing files (without it, gen refuses to replace a
    /// real network.json / ShapedDevices.csv / lqos.conf).
    #[arg(long)]
    pub force: bool,
}

const FILES: [&str; 3] = ["network.json", "ShapedDevices.csv", "lqos.conf"];

/// Runs `lqos gen`.
pub fn run(args: Args) -> Outcome {
    let params = {
        let mut p = GenParams::with_circuits(args.circuits);
        p.seed = args.seed;
        p.sites = args.sites;
        p.site_fanout = args.site_fanout;
        p.fanout = args.fanout;
        p.depth = args.depth;
        p.multi_device_fraction = args.multi_device_fraction;
        p.oversubscribed = args.oversubscribed;
        p
    };
    if !args.force {
        if let Some(f) = FILES.iter().map(|f| args.out.join(f)).find(|p| p.exists()) {
            anyhow::bail!(
                "{} already exists; not overwriting it (use --force, or another --out)",
                f.display()
            );
        }
    }
    let g = generate(&params);
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    for (name, text) in FILES.into_iter().zip([
        write_network_json(&g.network),
        write_shaped_devices(&g.network),
        write_config(&g.config),
    ]) {
        let path = args.out.join(name);
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    let s = lqos_model::Summary::of(&g.network);
    outln!(
        "wrote network.json ({} nodes, depth {}), ShapedDevices.csv ({} circuits, {} devices), lqos.conf to {}",
        s.nodes,
        s.depth,
        s.circuits,
        s.devices,
        args.out.display()
    )?;
    Ok(Done::Ok)
}
