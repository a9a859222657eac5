//! Apply a plan to a recording backend (a fake kernel that keeps a tree
//! per interface): a full build, then an incremental reload that sends
//! only the changed class.
//!
//! `cargo run -p lqos-apply --example apply_recording`

use lqos_apply::backend::{NoProgress, Recording};
use lqos_apply::inputs::{plan_config, PlanOverrides, QueueCount};
use lqos_apply::state::NetnsState;
use lqos_apply::{ApplyOptions, Session};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let g = lqos_model::generate(&lqos_model::GenParams::with_circuits(200));
    let overrides = PlanOverrides::default().sqm("pfifo".parse()?);
    let cfg = plan_config(&g.config, None, &overrides, QueueCount::Default(4))?;
    let plan = lqos_tc::plan(&g.network, &cfg, None)?;

    let kernel = Recording::new().with_link("ens19", 4).with_link("ens20", 4);
    let dir = tempfile::tempdir()?;
    let state = NetnsState::new(dir.path(), None);
    let session = Session {
        state: &state,
        live: &kernel,
        backend: &kernel,
    };
    let opts = {
        let mut p = ApplyOptions::default();
        p.verify_after = true;
        p
    };
    let first = session.apply(&plan, opts, &NoProgress)?;
    println!("first apply: {} ops", first.ops_total());

    // One circuit faster; classids stay stable through the allocation.
    let mut net = g.network.clone();
    let mut circuits = net.circuits().to_vec();
    circuits[7].download_max = lqos_model::Rate::from_bps(circuits[7].download_max.bps() * 2);
    net.set_circuits(circuits);
    let next = lqos_tc::plan(&net, &cfg, Some(&plan.allocation))?;
    let second = session.apply(&next, opts, &NoProgress)?;
    for c in &second.changes {
        println!("{}: {}, {}", c.stream.dev, c.kind, c.stream.summary());
    }
    let verify = second.verify.as_ref().expect("verified");
    println!("verify clean: {}", verify.is_clean());
    Ok(())
}
