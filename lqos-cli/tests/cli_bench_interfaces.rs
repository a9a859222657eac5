//! `lqos bench --interfaces`: benches existing interfaces (here a veth pair
//! in a private namespace, entered with `ip netns exec`), refuses a root
//! qdisc that is not the kernel's default unless `--replace-existing`, and
//! leaves the kernel's default root behind. Skipped without root unless
//! LQOS_REQUIRE_NETNS=1.

use std::process::{Command, Output};

use lqos_apply::netns::{require_netns, unique_name, ScratchNetns};

fn bench_in(ns: &ScratchNetns, extra: &[&str]) -> Output {
    Command::new("ip")
        .args([
            "netns",
            "exec",
            ns.name(),
            env!("CARGO_BIN_EXE_lqos"),
            "bench",
        ])
        .args([
            "--interfaces",
            "ens19,ens20",
            "--circuits",
            "40",
            "--runs",
            "1",
        ])
        .args(["--methods", "2,7", "--sqm", "pfifo"])
        .args(extra)
        .output()
        .expect("run lqos bench")
}

fn root_kinds(ns: &ScratchNetns, dev: &str) -> String {
    ns.tc(&["qdisc", "show", "dev", dev, "root"]).unwrap()
}

#[test]
fn bench_on_existing_interfaces_refuses_a_foreign_root_unless_told() {
    if !require_netns("cli bench --interfaces") {
        return;
    }
    let ns = ScratchNetns::with_veth(
        &unique_name("lqos-cli", "bench-ifaces"),
        "ens19",
        "ens20",
        16,
    )
    .unwrap();

    // Kernel defaults only: runs, and leaves no tree behind.
    let o = bench_in(&ns, &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("existing interfaces (ens19/ens20"), "{err}");
    assert!(String::from_utf8_lossy(&o.stdout).contains("tc -b, combined file"));
    for dev in ["ens19", "ens20"] {
        let roots = root_kinds(&ns, dev);
        assert!(
            !roots.contains("mq 7fff:"),
            "{dev}: tree left behind: {roots}"
        );
    }

    // Someone else's root qdisc: refused, untouched.
    ns.tc(&[
        "qdisc", "add", "dev", "ens20", "root", "handle", "1:", "htb",
    ])
    .unwrap();
    let o = bench_in(&ns, &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("ens20 already has a root qdisc (htb 1:)")
            && err.contains("--replace-existing"),
        "{err}"
    );
    assert!(root_kinds(&ns, "ens20").contains("htb 1:"));

    // Told to replace it: runs, and deletes it at the end.
    let o = bench_in(&ns, &["--replace-existing"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        !root_kinds(&ns, "ens20").contains("htb"),
        "{}",
        root_kinds(&ns, "ens20")
    );

    // Too few TX queues for the bench's 16.
    let o = bench_in(&ns, &["--queues", "32"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("ens19 has 16 TX queues"), "{err}");
}
