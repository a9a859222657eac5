//! `lqos stats` against cake leaves, with real traffic: a live test (the
//! host has no sch_cake; `cargo xtask lab test` runs it in the lab's
//! kernel, which has). UDP datagrams sent out of the download interface
//! with `SO_PRIORITY` set to a circuit's classid and a DSCP in their TOS.

mod common;

use std::time::Duration;

use common::{lqos, netns_with_generated, ok, static_neighbour, udp_sender};
use lqos_apply::netns::require_netns;
use lqos_tc::allocation::Direction;
use lqos_tc::TcHandle;

/// Whether this kernel has cake (a skip message when not, a failure when
/// `LQOS_REQUIRE_CAKE=1`, as in the lab).
fn cake_available(test: &str) -> bool {
    let kind = lqos_tc::ops::QdiscKind::Cake(Default::default());
    match lqos_apply::live::KindProbe::new()
        .probe(&kind)
        .expect("probe")
    {
        Ok(()) => true,
        Err(r) if std::env::var("LQOS_REQUIRE_CAKE").as_deref() == Ok("1") => {
            panic!("{test}: LQOS_REQUIRE_CAKE=1 but this kernel has no cake: {r}")
        }
        Err(r) => {
            eprintln!(
                "skipping {test}: no sch_cake here ({r}); run it in the lab: cargo xtask lab test"
            );
            false
        }
    }
}

/// With `cake diffserv4` leaves, an EF-marked flow moves the Voice tin's
/// counters and not the Best Effort one's (tins as the kernel dumps them:
/// Bulk, Best Effort, Video, Voice).
#[test]
#[ignore = "needs sch_cake, which many kernels lack: runs in the lab (cargo xtask lab test); cargo test -- --include-ignored where the kernel has it"]
fn cake_counts_an_ef_flow_in_the_voice_tin() {
    if !require_netns("cli stats cake tins") || !cake_available("cli stats cake tins") {
        return;
    }
    let (ns, dir) = netns_with_generated("tins", 1, 10);
    let d = dir.path();
    static_neighbour(&ns);
    let target = ["--netns", ns.name(), "--state-dir", "st"];
    let mut apply = vec!["apply", "--queues", "1", "--sqm", "cake diffserv4"];
    apply.extend(target);
    ok(&lqos(d, &apply));
    let state = lqos_apply::state::NetnsState::new(d.join("st"), Some(ns.name()));
    let plan = lqos_apply::saved::load_saved_plan(&state)
        .unwrap()
        .unwrap()
        .plan;
    // A circuit whose download leaf is cake (LibreQoS's rules give the
    // fastest circuits fq_codel).
    let down = plan.interface("ens19").unwrap();
    let c = plan
        .allocation
        .circuits
        .iter()
        .find(|c| {
            down.ops.iter().any(|op| {
                matches!(op, lqos_tc::TcOp::AddQdisc(q)
                    if Some(q.handle.major()) == c.leaf_download
                        && matches!(q.kind, lqos_tc::ops::QdiscKind::Cake(_)))
            })
        })
        .expect("a circuit with a cake download leaf");
    let classid = TcHandle::new(plan.major(Direction::Download, c.queue), c.minor);
    // DSCP EF (46) << 2.
    let s = udp_sender(ns.name(), "ens19", classid.raw(), 0xb8);
    let mut sent = 0u64;
    for _ in 0..200 {
        if s.send(&[0u8; 200]).is_ok() {
            sent += 1;
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    let mut q = vec!["stats", "--json", "--interval", "0", "--circuit", &c.id];
    q.extend(target);
    let j: serde_json::Value = serde_json::from_str(&ok(&lqos(d, &q))).unwrap();
    let tins = j["circuits"][0]["download"]["tins"]
        .as_array()
        .unwrap_or_else(|| panic!("no cake tins: {j}"))
        .clone();
    assert_eq!(tins.len(), 4, "{j}");
    let pk = |i: usize| tins[i]["sent_packets"].as_u64().unwrap();
    assert!(pk(3) >= sent * 99 / 100, "Voice: {} of {sent}: {j}", pk(3));
    assert_eq!(pk(1), 0, "Best Effort moved: {j}");
}
