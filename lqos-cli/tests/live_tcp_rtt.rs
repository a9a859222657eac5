//! Round trips on both sides of the shaper with netem (the lab's stock
//! kernel has it; many hosts do not, hence ignored there): 40 ms added
//! on the subscriber's side and 20 ms on the internet's, each reported on
//! its own side by `lqos stats --json`, +-10%. `cargo xtask lab test
//! --only live_tcp_rtt` runs it.

mod common;
#[path = "common/tcp.rs"]
mod tcp;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lqos_apply::netns::require_netns;
use tcp::Shaper;

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// A download from the internet namespace to circuit `near` with netem
/// delaying the subscriber's packets 40 ms (its uplink, `s0`) and the
/// server's 20 ms (`i0`): the subscriber side reads 40 ms and the
/// internet side 20 ms, p50 and mean each within 10%.
#[test]
#[ignore = "needs sch_netem, which many kernels lack: runs in the lab (cargo xtask lab test); cargo test -- --include-ignored where the kernel has it"]
fn netem_delays_are_reported_on_their_own_side() {
    if !require_netns("tcp round trips with netem") {
        return;
    }
    let sh = Shaper::new("netem");
    for (ns, dev, delay) in [(&sh.sub, "s0", "40ms"), (&sh.inet, "i0", "20ms")] {
        ns.tc(&[
            "qdisc", "add", "dev", dev, "root", "netem", "delay", delay, "limit", "10000",
        ])
        .unwrap_or_else(|e| panic!("netem on {dev} (needs sch_netem): {e}"));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let server = sh.server(u64::MAX, stop.clone());
    // A 64 KiB receive buffer: the download is window-limited (a few
    // Mbit/s at 60 ms), so each ACK releases the server's next segment at
    // once and the internet side is the path's, not the server's pacing.
    let (_, near) = sh.download("near", 64 << 10, u64::MAX, stop.clone());
    std::thread::sleep(Duration::from_secs(3));
    let stats = sh.stats(&["--interval", "4"]);
    stop.store(true, Ordering::Relaxed);
    assert!(
        near.join().unwrap().0 > 100_000,
        "the download moved no data"
    );
    server.join().unwrap();

    let near = Shaper::tcp(&stats, "near");
    for (side, want) in [("subscriber", 40.0), ("internet", 20.0)] {
        let r = &near["download"][side]["recent"];
        let (p50, mean) = (f(&r["p50_ms"]), f(&r["mean_ms"]));
        eprintln!("{side} side: p50 {p50:.2} ms, mean {mean:.2} ms (netem {want} ms): {r}");
        assert!(f(&r["samples"]) >= 20.0, "{side}: {r}");
        for (what, v) in [("p50", p50), ("mean", mean)] {
            assert!(
                (v - want).abs() <= 0.1 * want,
                "the {side} side's {what} {v:.2} ms is not within 10% of {want} ms: {r}"
            );
        }
    }
}
