//! Shared by the integration tests: skipping without root, a data path
//! loaded into a private bpffs.
#![allow(dead_code)]

use lqos_bpf::sys::PrivateBpffs;
use lqos_bpf::{DataPath, Maps};

/// True when the test can load BPF programs (root). Otherwise prints why
/// it skips, or panics under `LQOS_REQUIRE_NETNS=1` (CI).
pub fn require_root(test: &str) -> bool {
    if nix::unistd::geteuid().is_root() {
        return true;
    }
    if std::env::var("LQOS_REQUIRE_NETNS").as_deref() == Ok("1") {
        panic!("{test}: needs root (LQOS_REQUIRE_NETNS=1)");
    }
    eprintln!("skipping {test}: loading BPF programs needs root");
    false
}

/// A data path loaded into a bpffs private to this test's thread.
pub struct Loaded {
    pub dp: DataPath,
    pub maps: Maps,
    pub bpffs: PrivateBpffs,
}

pub fn load(tag: &str) -> Loaded {
    let bpffs = PrivateBpffs::new(tag).expect("private bpffs");
    let dp = DataPath::load(bpffs.path()).unwrap_or_else(|e| panic!("{e}\n{e:?}"));
    let maps = dp.maps().expect("maps");
    Loaded { dp, maps, bpffs }
}
