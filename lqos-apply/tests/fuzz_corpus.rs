//! Runs every file of every cargo-fuzz seed corpus (`fuzz/corpus/<target>/`)
//! through its target's entry point on the stable toolchain, so CI covers
//! the fuzz targets without nightly. A crash input found by `cargo fuzz`
//! goes into its target's corpus (named after what it found) and is then
//! checked here for good.

use std::path::{Path, PathBuf};

/// A fuzz target's entry point.
type Entry = fn(&[u8]);

/// Every fuzz target (`fuzz/fuzz_targets/<name>.rs`) and its entry point.
const TARGETS: &[(&str, Entry)] = &[
    ("shaped_devices", lqos_model::fuzzing::fuzz_shaped_devices),
    ("network_json", lqos_model::fuzzing::fuzz_network_json),
    ("lqos_conf", lqos_model::fuzzing::fuzz_config),
    ("devices_edit", lqos_model::fuzzing::fuzz_devices_edit),
    ("sqm", lqos_tc::fuzzing::fuzz_sqm),
    ("tc_batch", lqos_tc::fuzzing::fuzz_batch),
    ("netlink_dump", lqos_apply::fuzzing::fuzz_netlink_dump),
    ("netlink_request", lqos_apply::fuzzing::fuzz_netlink_request),
    ("saved_state", lqos_apply::fuzzing::fuzz_saved_state),
    ("plan_file", lqos_apply::fuzzing::fuzz_plan_file),
];

fn fuzz_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz")
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

#[test]
fn every_fuzz_target_has_an_entry_point_and_a_seed_corpus() {
    let mut names: Vec<String> = files(&fuzz_dir().join("fuzz_targets"))
        .iter()
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut known: Vec<String> = TARGETS.iter().map(|(n, _)| n.to_string()).collect();
    known.sort();
    assert_eq!(names, known, "fuzz/fuzz_targets and this table disagree");
    for (name, _) in TARGETS {
        let dir = fuzz_dir().join("corpus").join(name);
        assert!(!files(&dir).is_empty(), "empty corpus {}", dir.display());
    }
}

#[test]
fn every_corpus_replays_without_a_panic() {
    for (name, entry) in TARGETS {
        for path in files(&fuzz_dir().join("corpus").join(name)) {
            let data = std::fs::read(&path).unwrap();
            let r = std::panic::catch_unwind(|| entry(&data));
            assert!(r.is_ok(), "{name}: {} panicked", path.display());
        }
    }
}

/// A saved state of each format for a small generated plan: format 1 (the
/// whole plan) and format 2 (the compact record), as `lqos` writes them.
fn saved_states() -> Vec<(&'static str, Vec<u8>)> {
    let g = lqos_model::generate(&{
        let mut p = lqos_model::GenParams::with_circuits(12);
        p.seed = 3;
        p
    });
    let cfg = lqos_tc::PlanConfig::from_lqos_config(&g.config, 2).unwrap();
    let plan = lqos_tc::plan(&g.network, &cfg, None).unwrap();
    let v1 = lqos_apply::saved::SavedPlan {
        version: 1,
        netns: None,
        applied_at: 1,
        plan: plan.clone(),
    };
    let dir = tempfile::tempdir().unwrap();
    let state = lqos_apply::state::NetnsState::new(dir.path(), None);
    lqos_apply::saved::save_last_good(&state, &plan, Some(&g.network)).unwrap();
    let v2 = std::fs::read(state.file(lqos_apply::state::StateFile::LastPlan)).unwrap();
    vec![
        ("format1.json", serde_json::to_vec(&v1).unwrap()),
        ("format2.json", v2),
    ]
}

#[test]
fn both_saved_state_formats_are_in_the_corpus() {
    for (name, bytes) in saved_states() {
        let path = fuzz_dir().join("corpus/saved_state").join(name);
        let seed = std::fs::read(&path).unwrap_or_default();
        let v =
            |b: &[u8]| serde_json::from_slice::<serde_json::Value>(b).unwrap()["version"].clone();
        assert_eq!(v(&seed), v(&bytes), "{}", path.display());
        lqos_apply::fuzzing::fuzz_saved_state(&bytes);
    }
}

/// Writes the saved-state seeds (`cargo test --test fuzz_corpus -- --ignored`).
#[test]
#[ignore = "writes the seed corpus"]
fn write_saved_state_seeds() {
    for (name, bytes) in saved_states() {
        std::fs::write(fuzz_dir().join("corpus/saved_state").join(name), bytes).unwrap();
    }
}
