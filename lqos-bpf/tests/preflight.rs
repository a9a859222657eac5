//! Preflight on this kernel: it passes, sizes the cpumap, finds XDP, and
//! refuses a missing interface with its name, before changing anything.

mod common;

use lqos_bpf::preflight::preflight;
use lqos_bpf::sys::{possible_cpus, PrivateBpffs};

#[test]
fn preflight_passes_here_and_names_a_missing_interface() {
    if !common::require_root("preflight_passes_here_and_names_a_missing_interface") {
        return;
    }
    let bpffs = PrivateBpffs::new("preflight-test").unwrap();
    let pin = bpffs.path().join("lqos");
    let p = preflight(&pin, None, &["lo"]).unwrap();
    assert_eq!(p.cpumap_entries, possible_cpus().unwrap());
    assert!(p.xdp, "{p:?}");
    assert_eq!(p.tx_queues, [("lo".to_string(), 1)]);
    assert!(
        p.warnings.iter().any(|w| w.contains("one TX queue")),
        "{p:?}"
    );
    let e = preflight(&pin, None, &["lqos-no-such-if"])
        .unwrap_err()
        .to_string();
    assert!(e.contains("lqos-no-such-if"), "{e}");
    // Nothing was pinned or created.
    assert!(!pin.exists());
}
