//! Switching a LibreQoS box to lqos without rebuilding its tree.
//!
//! `tests/fixtures/libreqos/` holds a small network's inputs and what
//! LibreQoS 455bc13b wrote for them (LibreQoS.py run on them, its
//! non-tree side effects stubbed; `tools/libreqos-reference/`): its two
//! state files, LibreQoS.py's own `linux_tc.txt` and the commands its
//! bakery loads (`linux_tc_rust.txt`). A test loads one of those files,
//! in LibreQoS's line order, with `tc -b` into a private namespace, then:
//!
//! - `lqos apply --adopt-libreqos state --dry-run` lists what adoption
//!   changes (nothing for the bakery's tree; for LibreQoS.py's the four
//!   default classes' rate, which it rounds where the bakery rounds down,
//!   and their leaves, which it leaves to the kernel's automatic handles),
//!   and `lqos apply --adopt-libreqos state` sends exactly that;
//! - `lqos verify` is clean;
//! - the IP map holds LibreQoS's classids (statsByCircuit.json's);
//! - the next plain `lqos apply` (lqos's own stable allocation from the
//!   saved plan) sends nothing, and an edit of one circuit's rate is one
//!   `class change` of LibreQoS's class.
//!
//! With cake and fq_codel in the kernel (the lab) the tree is LibreQoS's
//! default `cake diffserv4` with one `fq_codel` circuit; without (this
//! project's host kernel) the fixture's `pfifo/` variant: LibreQoS's output
//! for the same network with `default_sqm = "pfifo"`.

mod common;

use std::path::Path;

use common::{code, copy_libreqos_fixture, lqos, text};
use lqos_apply::live::{KindProbe, LiveSource as _, NetlinkLive};
use lqos_apply::netns::{require_netns, unique_name, ScratchNetns};
use lqos_tc::ops::QdiscKind;

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

fn run(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let o = lqos(dir, args);
    let (out, err) = text(&o);
    (code(&o), out, err)
}

/// `lqos apply --adopt-libreqos state` (and `extra`) on the tree in `ns`.
fn adopt(d: &Path, ns: &ScratchNetns, extra: &[&str]) -> (i32, String, String) {
    let mut a = vec!["apply", "--adopt-libreqos", "state"];
    a.extend_from_slice(&["--netns", ns.name(), "--state-dir", "lqos-state"]);
    a.extend_from_slice(extra);
    run(d, &a)
}

/// `lqos CMD` (`apply` or `verify`) on the tree in `ns` with lqos's state.
fn on_tree(d: &Path, ns: &ScratchNetns, cmd: &str, extra: &[&str]) -> (i32, String, String) {
    let mut a = vec![cmd, "--netns", ns.name(), "--state-dir", "lqos-state"];
    a.extend_from_slice(extra);
    run(d, &a)
}

/// The fixture in a temporary directory and LibreQoS's `file` (under
/// `state/debug/`) loaded with `tc -b` into a new namespace's `ens19` and
/// `ens20`; the kernel's trees as loaded.
fn libreqos_box(file: &str) -> (tempfile::TempDir, ScratchNetns, Vec<lqos_tc::tree::TcTree>) {
    let cake = cake_here();
    let dir = tempfile::tempdir().unwrap();
    copy_libreqos_fixture(dir.path(), !cake);
    let ns =
        ScratchNetns::with_veth(&unique_name("lqos-cli", "adopt"), "ens19", "ens20", 16).unwrap();
    let out = std::process::Command::new("tc")
        .args(["-n", ns.name(), "-b"])
        .arg(dir.path().join("state/debug").join(file))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "tc -b {file}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let before = dump(&ns);
    (dir, ns, before)
}

fn dump(ns: &ScratchNetns) -> Vec<lqos_tc::tree::TcTree> {
    let live = NetlinkLive::new(Some(ns.name().to_string()));
    ["ens19", "ens20"]
        .iter()
        .map(|dev| live.dump(dev).unwrap())
        .collect()
}

/// `lqos apply` output says `dev: incremental, N ops` for both interfaces.
fn assert_ops(out: &str, err: &str, ens19: usize, ens20: usize) {
    for (dev, n) in [("ens19", ens19), ("ens20", ens20)] {
        assert!(
            out.contains(&format!("{dev}: incremental, {n} ops")),
            "{dev}: expected {n} ops:\n{out}\n{err}"
        );
    }
}

/// The IP map of `lqos plan --adopt-libreqos` holds statsByCircuit.json's
/// classids, per circuit and direction.
fn assert_ip_map_is_libreqos(d: &Path) {
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
}

/// After adoption: plain applies keep the tree, and raising circuit c1's
/// download max (LibreQoS's class `0x1:0x7` on ens19) is one class change.
fn assert_lqos_takes_over(d: &Path, ns: &ScratchNetns) {
    let (c, out, err) = on_tree(d, ns, "apply", &[]);
    assert_eq!(c, 0, "{out}\n{err}");
    assert_ops(&out, &err, 0, 0);
    let csv = d.join("ShapedDevices.csv");
    let t = std::fs::read_to_string(&csv).unwrap();
    let edited = t.replace(
        "100.64.0.1,fd00:0:0:1::/64,10,2,100,20",
        "100.64.0.1,fd00:0:0:1::/64,10,2,120,20",
    );
    assert_ne!(t, edited);
    std::fs::write(&csv, edited).unwrap();
    let (c, out, err) = on_tree(d, ns, "apply", &["--dry-run"]);
    assert_eq!(c, 0, "{out}\n{err}");
    let ops: Vec<&str> = out.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(ops.len(), 1, "{out}\n{err}");
    assert!(
        ops[0].starts_with(
            "class change dev ens19 parent 1:5 classid 1:7 htb rate 10mbit ceil 120mbit"
        ),
        "{out}"
    );
    let (c, out, err) = on_tree(d, ns, "apply", &[]);
    assert_eq!(c, 0, "{out}\n{err}");
    assert_ops(&out, &err, 1, 0);
    let (c, out, err) = on_tree(d, ns, "verify", &[]);
    assert_eq!(c, 0, "verify after the edit:\n{out}\n{err}");
}

#[test]
fn the_tree_libreqos_bakery_built_is_adopted_with_zero_ops() {
    if !require_netns("live_adopt_libreqos") {
        return;
    }
    let (dir, ns, before) = libreqos_box("linux_tc_rust.txt");
    let d = dir.path();
    // The dry run lists nothing to change.
    let (c, out, err) = adopt(d, &ns, &["--dry-run"]);
    assert_eq!(c, 0, "{out}\n{err}");
    assert!(out.trim().is_empty(), "dry run lists ops:\n{out}\n{err}");
    assert!(
        err.contains("kept LibreQoS's classids for 6 of 6 circuits and 5 of 5 nodes"),
        "{err}"
    );
    // The adoption sends nothing; the kernel's trees are as LibreQoS left
    // them, and verify is clean.
    let (c, out, err) = adopt(d, &ns, &[]);
    assert_eq!(c, 0, "{out}\n{err}");
    assert_ops(&out, &err, 0, 0);
    assert_eq!(dump(&ns), before, "the trees changed");
    let (c, out, err) = on_tree(d, &ns, "verify", &[]);
    assert_eq!(c, 0, "verify:\n{out}\n{err}");
    assert_ip_map_is_libreqos(d);
    assert_lqos_takes_over(d, &ns);
}

#[test]
fn libreqos_py_linux_tc_is_adopted_changing_only_the_default_class_rate() {
    if !require_netns("live_adopt_libreqos") {
        return;
    }
    let (dir, ns, before) = libreqos_box("linux_tc.txt");
    let d = dir.path();
    // LibreQoS.py gives the default classes round((1000 - 1) / 4) = 250
    // Mbit, its bakery (and lqos) 249, and their leaves the kernel's
    // automatic handles, the bakery (and lqos) `0x2000 + 2 major + 1`:
    // adoption changes the four default classes and their leaves, nothing
    // else.
    let (c, out, err) = adopt(d, &ns, &["--dry-run"]);
    assert_eq!(c, 0, "{out}\n{err}");
    assert!(
        err.contains("kept LibreQoS's classids for 6 of 6 circuits and 5 of 5 nodes"),
        "{err}"
    );
    let ops: Vec<&str> = out.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(ops.len(), 8, "{out}\n{err}");
    for op in &ops {
        let class = op.starts_with("class change dev ens")
            && (op.contains(" classid 1:2 ") || op.contains(" classid 2:2 "))
            && op.contains(" rate 249mbit ceil 999mbit ");
        let leaf = op.starts_with("qdisc replace dev ens")
            && (op.contains(" parent 1:2 handle 2003: ")
                || op.contains(" parent 2:2 handle 2005: "));
        assert!(
            class || leaf,
            "not a default class or its leaf: {op}\n{out}"
        );
    }
    let (c, out, err) = adopt(d, &ns, &[]);
    assert_eq!(c, 0, "{out}\n{err}");
    assert_ops(&out, &err, 4, 4);
    // Nothing else changed: the same classes, a leaf at the same places,
    // and every circuit's leaf kept its handle.
    let after = dump(&ns);
    let leaves = |t: &lqos_tc::tree::TcTree| -> std::collections::BTreeMap<_, _> {
        t.qdisc_by_parent()
            .into_iter()
            .map(|(p, q)| (p, q.handle))
            .collect()
    };
    for (b, a) in before.iter().zip(&after) {
        assert!(b.classes.keys().eq(a.classes.keys()), "classes changed");
        let (lb, la) = (leaves(b), leaves(a));
        assert!(lb.keys().eq(la.keys()), "leaves added or removed");
        for (parent, handle) in &lb {
            if parent.minor() > 2 {
                assert_eq!(la[parent], *handle, "circuit leaf at {parent} replaced");
            }
        }
    }
    let (c, out, err) = on_tree(d, &ns, "verify", &[]);
    assert_eq!(c, 0, "verify:\n{out}\n{err}");
    assert_ip_map_is_libreqos(d);
    assert_lqos_takes_over(d, &ns);
}
