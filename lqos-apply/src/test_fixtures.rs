//! Plans for the crate's unit tests: a generated network on a bridge
//! `ens19`/`ens20` with 4 queues per direction.

/// The generated network of `circuits` circuits (seed `seed`) and its plan
/// with leaf qdisc `sqm` (`"pfifo"`, `"cake diffserv4"`, ...).
pub(crate) fn bridge_plan(
    circuits: usize,
    seed: u64,
    sqm: &str,
) -> (lqos_model::Network, lqos_tc::Plan) {
    let g = lqos_model::generate(&{
        let mut p = lqos_model::GenParams::with_circuits(circuits);
        p.seed = seed;
        p
    });
    let mut cfg = lqos_tc::PlanConfig::bridge("ens19", "ens20", 4);
    cfg.default_sqm = sqm.parse().expect("a valid sqm spec");
    let p = lqos_tc::plan(&g.network, &cfg, None).unwrap();
    (g.network, p)
}
