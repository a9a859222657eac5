//! Switching a LibreQoS box to lqos without rebuilding its tree.
//!
//! `tests/fixtures/libreqos/` holds a small network's inputs and what
//! LibreQoS (HEAD) leaves for them, written from its rules: the bakery's
//! tc commands (its shape and numbering: top-level nodes at the HTB root in
//! round robin over the sorted names with the generated parent nodes,
//! squashed minimums, its leaf handles) and its two state files. The test
//! loads that tree with `tc -b` into a private namespace, then:
//!
//! - `lqos apply --adopt-libreqos state --dry-run` lists no op, and
//!   `lqos apply --adopt-libreqos state` sends none;
//! - `lqos verify` is clean;
//! - the IP map holds LibreQoS's classids (statsByCircuit.json's);
//! - the next plain `lqos apply` (lqos's own stable allocation from the
//!   saved plan) sends none either.
//!
//! With cake and fq_codel in the kernel (the lab) the tree is LibreQoS's
//! default `cake diffserv4` with one `fq_codel` circuit; without (this
//! project's host kernel) every leaf is `pfifo` instead, in the tc file
//! and in lqos.conf alike, which LibreQoS accepts as a `default_sqm` too.

mod common;

use std::path::Path;

use common::{code, copy_libreqos_fixture, lqos, text};
use lqos_apply::netns::{require_netns, unique_name, ScratchNetns};
use lqos_apply::{KindProbe, LiveSource as _, NetlinkLive};
use lqos_tc::QdiscKind;

/// Does this kernel have cake and fq_codel? (Fails instead of skipping
/// when `LQOS_REQUIRE_CAKE=1`.)
fn cake_here() -> bool {
    let kinds = [
        QdiscKind::Cake(Default::default()),
        QdiscKind::FqCodel(Default::default()),
    ];
    let ok = KindProbe::new()
        .probe_many(&kinds)
        .map(|r| r.iter().all(|k| k.is_ok()))
        .unwrap_or(false);
    if !ok && std::env::var("LQOS_REQUIRE_CAKE").as_deref() == Ok("1") {
        panic!("LQOS_REQUIRE_CAKE=1 but this kernel lacks cake or fq_codel");
    }
    ok
}

/// The fixture copied into `dir`, with pfifo leaves where the kernel has
/// no cake: LibreQoS's `default_sqm = "pfifo"` and no `fq_codel` override.
fn copy_fixture(dir: &Path, cake: bool) {
    copy_libreqos_fixture(dir, |_, t| {
        if cake {
            t
        } else {
            t.replace("cake diffserv4", "pfifo")
                .replace(",fq_codel\n", ",\n")
                .replace(": fq_codel", ": pfifo")
        }
    });
}

fn run(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let o = lqos(dir, args);
    let (out, err) = text(&o);
    (code(&o), out, err)
}

#[test]
fn a_tree_libreqos_built_is_adopted_with_zero_ops() {
    if !require_netns("live_adopt_libreqos") {
        return;
    }
    let cake = cake_here();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    copy_fixture(d, cake);
    let ns =
        ScratchNetns::with_veth(&unique_name("lqos-cli", "adopt"), "ens19", "ens20", 16).unwrap();
    // LibreQoS's tree, as its bakery loads it.
    let batch = d.join("state/debug/linux_tc_rust.txt");
    let out = std::process::Command::new("tc")
        .args(["-n", ns.name(), "-b"])
        .arg(&batch)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "tc -b: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let before: Vec<lqos_tc::TcTree> = ["ens19", "ens20"]
        .iter()
        .map(|dev| {
            NetlinkLive::new(Some(ns.name().to_string()))
                .dump(dev)
                .unwrap()
        })
        .collect();

    let target = ["--netns", ns.name(), "--state-dir", "lqos-state"];
    let adopt = |extra: &[&str]| {
        let mut a = vec!["apply", "--adopt-libreqos", "state"];
        a.extend_from_slice(&target);
        a.extend_from_slice(extra);
        run(d, &a)
    };
    // The dry run lists nothing to change.
    let (c, out, err) = adopt(&["--dry-run"]);
    assert_eq!(c, 0, "{out}\n{err}");
    assert!(out.trim().is_empty(), "dry run lists ops:\n{out}\n{err}");
    assert!(
        err.contains("kept LibreQoS's classids for 6 of 6 circuits and 5 of 5 nodes"),
        "{err}"
    );
    // The adoption sends nothing.
    let (c, out, err) = adopt(&[]);
    assert_eq!(c, 0, "{out}\n{err}");
    for dev in ["ens19", "ens20"] {
        assert!(
            out.contains(&format!("{dev}: incremental, 0 ops")),
            "{dev} got ops:\n{out}\n{err}"
        );
    }
    // The kernel's trees are as LibreQoS left them, and verify is clean.
    let live = NetlinkLive::new(Some(ns.name().to_string()));
    for (dev, b) in ["ens19", "ens20"].iter().zip(&before) {
        assert_eq!(&live.dump(dev).unwrap(), b, "{dev} changed");
    }
    let mut v = vec!["verify"];
    v.extend_from_slice(&target);
    let (c, out, err) = run(d, &v);
    assert_eq!(c, 0, "verify:\n{out}\n{err}");

    // The IP map holds LibreQoS's classids: statsByCircuit.json's, per
    // circuit, both directions.
    let (c, out, err) = run(d, &["plan", "--adopt-libreqos", "state", "--out", "plan"]);
    assert_eq!(c, 0, "{out}\n{err}");
    let stats: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(d.join("state/stats/statsByCircuit.json")).unwrap(),
    )
    .unwrap();
    let libreqos: std::collections::BTreeMap<String, (String, String)> = stats
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let classid = |k: &str| {
                lqos_tc::libreqos::parse_classid(c[k].as_str().unwrap())
                    .unwrap()
                    .to_string()
            };
            (
                c["circuitID"].as_str().unwrap().to_string(),
                (classid("classid"), classid("up_classid")),
            )
        })
        .collect();
    let csv = std::fs::read_to_string(d.join("plan/ip_map.csv")).unwrap();
    let mut rows = 0;
    for line in csv.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let (id, down, up) = (f[2], f[6], f[9]);
        assert_eq!(
            libreqos[id],
            (down.to_string(), up.to_string()),
            "circuit {id} in ip_map.csv"
        );
        rows += 1;
    }
    assert_eq!(rows, 8, "{csv}");

    // lqos's own allocation (the saved plan) takes over: nothing to do.
    let mut a = vec!["apply"];
    a.extend_from_slice(&target);
    let (c, out, err) = run(d, &a);
    assert_eq!(c, 0, "{out}\n{err}");
    for dev in ["ens19", "ens20"] {
        assert!(
            out.contains(&format!("{dev}: incremental, 0 ops")),
            "{out}\n{err}"
        );
    }
}
