//! Runs every file of the cargo-fuzz seed corpus (`fuzz/corpus/<target>/`)
//! through the fuzz entry points on the stable toolchain, so CI covers the
//! fuzz targets without nightly. A crash input found by `cargo fuzz` goes
//! into the corpus and is then checked here for good.

use std::path::PathBuf;

use lqos_model::fuzzing::{fuzz_network_json, fuzz_shaped_devices};

fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "empty corpus {}", dir.display());
    files
        .into_iter()
        .map(|p| {
            let data = std::fs::read(&p).unwrap();
            (p, data)
        })
        .collect()
}

#[test]
fn shaped_devices_corpus_never_panics() {
    for (path, data) in corpus("shaped_devices") {
        eprintln!("{}", path.display());
        fuzz_shaped_devices(&data);
    }
}

#[test]
fn network_json_corpus_never_panics() {
    for (path, data) in corpus("network_json") {
        eprintln!("{}", path.display());
        fuzz_network_json(&data);
    }
}
