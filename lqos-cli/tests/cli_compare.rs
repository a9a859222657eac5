//! `lqos compare --libreqos DIR` on the LibreQoS-shaped fixture
//! (`tests/fixtures/libreqos/`): the tree lqos plans for LibreQoS's inputs
//! against the ones LibreQoS's bakery and LibreQoS.py wrote, by name.

mod common;

use std::path::{Path, PathBuf};

use common::{code, lqos, text};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/libreqos")
}

#[test]
fn libreqos_tree_and_lqos_round_robin_plan_are_the_same() {
    let o = lqos(
        &fixture(),
        &[
            "compare",
            "--libreqos",
            "state",
            "--strategy",
            "round-robin",
        ],
    );
    let (out, err) = text(&o);
    assert_eq!(code(&o), 0, "{out}\n{err}");
    assert!(out.contains("6 circuits and 5 nodes in both; 0 classes only in LibreQoS (0 without a note), 0 only in lqos"), "{out}");
    assert!(out.contains("circuit directions that differ: 0 (0 without a note); node/queue class directions: 0 (0 without a note)"), "{out}");
}

#[test]
fn libreqos_pys_own_linux_tc_differs_only_in_its_rounded_default_class() {
    let o = lqos(
        &fixture(),
        &[
            "compare",
            "--libreqos",
            "state",
            "--tc",
            "state/debug/linux_tc.txt",
            "--strategy",
            "round-robin",
        ],
    );
    let (out, err) = text(&o);
    assert_eq!(code(&o), 0, "{out}\n{err}");
    assert!(out.contains("circuit directions that differ: 0 (0 without a note); node/queue class directions: 4 (0 without a note)"), "{out}");
    assert_eq!(
        out.matches("default class download rate: LibreQoS 250 Mbps, lqos 249 Mbps (LibreQoS.py's rounded default-class rate)").count()
            + out.matches("default class upload rate: LibreQoS 250 Mbps, lqos 249 Mbps (LibreQoS.py's rounded default-class rate)").count(),
        4,
        "{out}"
    );
}

#[test]
fn balanced_queues_are_a_noted_difference() {
    let o = lqos(&fixture(), &["compare", "--libreqos", "state", "--summary"]);
    let (out, err) = text(&o);
    assert_eq!(code(&o), 0, "{out}\n{err}");
    assert!(out.contains("(lqos's balanced queues)"), "{out}");
    assert!(out.contains("(0 without a note)"), "{out}");
}

#[test]
fn a_difference_is_named_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for f in [
        "network.json",
        "ShapedDevices.csv",
        "lqos.conf",
        "state/shaping/queuingStructure.json",
        "state/stats/statsByCircuit.json",
        "state/debug/linux_tc_rust.txt",
    ] {
        let mut t = std::fs::read_to_string(fixture().join(f)).unwrap();
        if f.ends_with("linux_tc_rust.txt") {
            // Circuit c1's download class (0x1:0x7) at 20 instead of 10 Mbit.
            t = t.replace(
                "classid 0x1:0x7 htb rate 10.0mbit ceil 100.0mbit",
                "classid 0x1:0x7 htb rate 20.0mbit ceil 100.0mbit",
            );
        }
        std::fs::create_dir_all(d.join(f).parent().unwrap()).unwrap();
        std::fs::write(d.join(f), t).unwrap();
    }
    let o = lqos(
        d,
        &[
            "compare",
            "--libreqos",
            "state",
            "--strategy",
            "round-robin",
        ],
    );
    let (out, err) = text(&o);
    assert_eq!(code(&o), 1, "{out}\n{err}");
    assert!(
        out.contains("circuit \"c1\" download rate: LibreQoS 20 Mbps, lqos 10 Mbps"),
        "{out}"
    );
}

/// Regression: a missing LibreQoS file was reported as `No such file or
/// directory (os error 2): No such file or directory (os error 2)`. The
/// path is named, and the OS's words come once.
#[test]
fn a_missing_file_is_named_once() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nowhere");
    let o = lqos(
        &fixture(),
        &["compare", "--libreqos", missing.to_str().unwrap()],
    );
    let (out, err) = text(&o);
    assert_eq!(code(&o), 2, "{out}\n{err}");
    let path = missing.join("shaping/queuingStructure.json");
    assert!(err.contains(&path.display().to_string()), "{err}");
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
    // Its --tc file too.
    let o = lqos(
        &fixture(),
        &["compare", "--libreqos", "state", "--tc", "nope.txt"],
    );
    let (_, err) = text(&o);
    assert!(err.contains("nope.txt"), "{err}");
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
}
