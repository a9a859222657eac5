//! Apply a plan to a real kernel, inside a private network namespace with
//! a veth pair (`ens19`/`ens20`, 4 TX queues): plan, apply over rtnetlink,
//! verify, reload incrementally. Needs root (and skips without it); never
//! touches the host's interfaces.
//!
//! `sudo cargo run -p lqos-apply --example apply_netns`

use lqos_apply::backend::{NetlinkBackend, NoProgress, Parallelism};
use lqos_apply::inputs::{plan_config, PlanOverrides, QueueCount};
use lqos_apply::live::NetlinkLive;
use lqos_apply::netns::{netns_available, unique_name, ScratchNetns};
use lqos_apply::state::NetnsState;
use lqos_apply::{verify_plan, ApplyOptions, Session};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if let Err(why) = netns_available() {
        eprintln!("skipped: {why}");
        return Ok(());
    }
    let ns = ScratchNetns::with_veth(&unique_name("lqos-example", "apply"), "ens19", "ens20", 4)?;
    let netns = Some(ns.name().to_string());

    let g = lqos_model::generate(&lqos_model::GenParams::with_circuits(500));
    let live = NetlinkLive::new(netns.clone());
    // This kernel may lack sch_cake: pfifo leaves work everywhere.
    let overrides = PlanOverrides::default().sqm("pfifo".parse()?);
    // The queue count comes from the interfaces themselves.
    let cfg = plan_config(
        &g.config,
        None,
        &overrides,
        QueueCount::FromInterfaces(&live),
    )?;
    let plan = lqos_tc::plan(&g.network, &cfg, None)?;

    let dir = tempfile::tempdir()?;
    let state = NetnsState::new(dir.path(), netns.as_deref());
    let backend = NetlinkBackend::new(netns.clone(), Parallelism::Serial);
    let session = Session {
        state: &state,
        live: &live,
        backend: &backend,
    };
    let report = session.apply(&plan, ApplyOptions::default(), &NoProgress)?;
    let load = report.load.as_ref().expect("not a dry run");
    println!(
        "loaded {} ops in {:.3} s",
        load.ops_applied(),
        load.total.wall.as_secs_f64()
    );
    let v = verify_plan(&plan, &live)?;
    println!("verify: {} drift(s)", v.drift_count());
    let again = session.apply(&plan, ApplyOptions::default(), &NoProgress)?;
    println!("reload with nothing changed: {} ops", again.ops_total());
    Ok(())
}
