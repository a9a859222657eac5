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

/// A network namespace deleted on drop.
pub struct Ns {
    pub name: String,
}

impl Ns {
    pub fn new(tag: &str) -> Ns {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static SEQ: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "lqos-bpf-{}-{}-{tag}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        sh("ip", &["netns", "add", &name]);
        let ns = Ns { name };
        ns.ip(&["link", "set", "lo", "up"]);
        ns
    }

    pub fn ip(&self, args: &[&str]) -> String {
        let mut a = vec!["-n", self.name.as_str()];
        a.extend_from_slice(args);
        sh("ip", &a)
    }

    pub fn tc(&self, args: &[&str]) -> String {
        let mut a = vec!["-n", self.name.as_str()];
        a.extend_from_slice(args);
        sh("tc", &a)
    }

    pub fn sysctl(&self, kv: &str) {
        sh("ip", &["netns", "exec", &self.name, "sysctl", "-qw", kv]);
    }
}

impl Drop for Ns {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// Runs a command, panicking with its stderr when it fails.
pub fn sh(cmd: &str, args: &[&str]) -> String {
    let out = std::process::Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{cmd}: {e}"));
    assert!(
        out.status.success(),
        "{cmd} {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// True when namespaces and `ip`/`tc` are usable (root); prints a skip
/// message otherwise, or panics under `LQOS_REQUIRE_NETNS=1`.
pub fn require_netns(test: &str) -> bool {
    if !require_root(test) {
        return false;
    }
    let ok = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .is_ok_and(|o| o.status.success())
        && std::process::Command::new("tc").arg("-V").output().is_ok();
    if ok {
        return true;
    }
    if std::env::var("LQOS_REQUIRE_NETNS").as_deref() == Ok("1") {
        panic!("{test}: needs ip and tc (iproute2) (LQOS_REQUIRE_NETNS=1)");
    }
    eprintln!("skipping {test}: needs ip and tc (iproute2)");
    false
}
