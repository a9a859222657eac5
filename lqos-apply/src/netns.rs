//! Scratch network namespaces with veth pairs, for live tests, benches and
//! the kernel feature probe. Nothing here touches the host's interfaces.
//!
//! ```no_run
//! use lqos_apply::netns::ScratchNetns;
//! // `ip netns add lqos-demo-<pid>`, a veth pair ens19/ens20 with 16 TX queues, both up.
//! let ns = ScratchNetns::with_veth(&lqos_apply::netns::unique_name("lqos-demo", "x"),
//!                                  "ens19", "ens20", 16).unwrap();
//! assert!(ns.name().starts_with("lqos-demo-"));
//! // dropped here: `ip netns del`
//! ```

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use crate::error::{ApplyError, IoAction, Result};

/// A network namespace that exists for as long as this value does. `Drop`
/// deletes it (also while unwinding from a panic), which removes its veths.
#[derive(Debug)]
pub struct ScratchNetns {
    name: String,
}

/// `PREFIX-PID-SEQ-TAG`: unique per process and call (SEQ is a process-wide
/// counter); `tag` (e.g. the test name) makes leftovers recognisable.
pub fn unique_name(prefix: &str, tag: &str) -> String {
    let tag: String = tag
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    static SEQ: AtomicUsize = AtomicUsize::new(0);
    let n = SEQ.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}-{}-{n}-{tag}", std::process::id())
}

/// Runs a command, returning stdout, or an error with its stderr.
pub(crate) fn run(cmd: &str, args: &[&str]) -> Result<String> {
    let line = format!("{cmd} {}", args.join(" "));
    let out = Command::new(cmd)
        .args(args)
        .output()
        .map_err(|e| ApplyError::io(IoAction::Run(line.clone()), None, e))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
        return Err(ApplyError::Command {
            cmd: line,
            message: if err.is_empty() {
                out.status.to_string()
            } else {
                err
            },
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

impl ScratchNetns {
    /// `ip netns add NAME` (fails if it exists). Deleted on drop.
    pub fn create(name: &str) -> Result<ScratchNetns> {
        if name.is_empty() || name.contains('/') || name.contains(char::is_whitespace) {
            return Err(ApplyError::Command {
                cmd: format!("ip netns add {name:?}"),
                message: "invalid namespace name".into(),
            });
        }
        run("ip", &["netns", "add", name])?;
        let ns = ScratchNetns {
            name: name.to_string(),
        };
        // Loopback up, as a fresh host would have it.
        ns.ip(&["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// A namespace with one veth pair `a`/`b`, each with `queues` TX and RX
    /// queues, both up.
    pub fn with_veth(name: &str, a: &str, b: &str, queues: u32) -> Result<ScratchNetns> {
        let ns = ScratchNetns::create(name)?;
        ns.add_veth(a, b, queues)?;
        Ok(ns)
    }

    /// Adds a veth pair `a`/`b` with `queues` TX/RX queues and sets both up.
    pub fn add_veth(&self, a: &str, b: &str, queues: u32) -> Result<()> {
        let q = queues.max(1).to_string();
        self.ip(&[
            "link",
            "add",
            a,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
            "type",
            "veth",
            "peer",
            "name",
            b,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
        ])?;
        self.ip(&["link", "set", a, "up"])?;
        self.ip(&["link", "set", b, "up"])?;
        Ok(())
    }

    /// The namespace's name (for `tc -n`, `ip -n`, [`crate::live::NetlinkLive::new`]).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `ip -n NAME ARGS...`; returns stdout.
    pub fn ip(&self, args: &[&str]) -> Result<String> {
        let mut all = vec!["-n", &self.name];
        all.extend_from_slice(args);
        run("ip", &all)
    }

    /// `tc -n NAME ARGS...`; returns stdout.
    pub fn tc(&self, args: &[&str]) -> Result<String> {
        let mut all = vec!["-n", &self.name];
        all.extend_from_slice(args);
        run("tc", &all)
    }

    /// `tc -n NAME -j ARGS...` parsed as JSON (e.g. `["class", "show", "dev", "ens19"]`).
    pub fn tc_json(&self, args: &[&str]) -> Result<serde_json::Value> {
        let mut all = vec!["-j"];
        all.extend_from_slice(args);
        let out = self.tc(&all)?;
        serde_json::from_str(if out.trim().is_empty() { "[]" } else { &out }).map_err(|e| {
            ApplyError::Command {
                cmd: format!("tc -n {} -j {}", self.name, args.join(" ")),
                message: format!("unparsable JSON: {e}"),
            }
        })
    }
}

impl Drop for ScratchNetns {
    fn drop(&mut self) {
        if let Err(e) = run("ip", &["netns", "del", &self.name]) {
            eprintln!("lqos: warning: could not delete network namespace: {e}");
        }
    }
}

/// Deletes namespaces named `PREFIX-PID-...` whose PID is not a running
/// process (left behind by a killed run). Returns the names deleted.
pub fn cleanup_stale(prefix: &str) -> Result<Vec<String>> {
    let list = run("ip", &["netns", "list"])?;
    let mut deleted = Vec::new();
    for line in list.lines() {
        let Some(name) = line.split_whitespace().next() else {
            continue;
        };
        let Some(rest) = name.strip_prefix(prefix).and_then(|r| r.strip_prefix('-')) else {
            continue;
        };
        let pid: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
        let Ok(pid) = pid.parse::<u32>() else {
            continue;
        };
        if std::path::Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        if run("ip", &["netns", "del", name]).is_ok() {
            deleted.push(name.to_string());
        }
    }
    Ok(deleted)
}

/// True when this process can create network namespaces (root, `ip`
/// present, namespaces usable): creates and deletes a probe namespace, once
/// per process.
pub fn netns_available() -> std::result::Result<(), String> {
    static AVAILABLE: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    AVAILABLE
        .get_or_init(|| {
            if !nix::unistd::geteuid().is_root() {
                return Err("not running as root".into());
            }
            let name = unique_name("lqos-probe", "avail");
            ScratchNetns::create(&name)
                .map(drop)
                .map_err(|e| e.to_string())
        })
        .clone()
}

/// For tests that need root and namespaces: returns `true` when they can
/// run. Otherwise prints a skip message naming `test` and returns `false`,
/// or panics when `LQOS_REQUIRE_NETNS=1` (CI).
pub fn require_netns(test: &str) -> bool {
    match netns_available() {
        Ok(()) => true,
        Err(why) => {
            if std::env::var("LQOS_REQUIRE_NETNS").as_deref() == Ok("1") {
                panic!("{test}: network namespaces required (LQOS_REQUIRE_NETNS=1) but unavailable: {why}");
            }
            eprintln!("skipping {test}: needs root and network namespaces ({why})");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_names_are_safe() {
        let n = unique_name("lqos-test", "a b/c");
        assert!(n.starts_with(&format!("lqos-test-{}-", std::process::id())));
        assert!(n.ends_with("a-b-c"));
    }

    #[test]
    fn scratch_netns_is_removed_on_drop() {
        if !require_netns("scratch_netns_is_removed_on_drop") {
            return;
        }
        let name = unique_name("lqos-unit", "drop");
        {
            let ns = ScratchNetns::with_veth(&name, "ens19", "ens20", 4).unwrap();
            let links = ns
                .ip(&["-d", "-j", "link", "show", "dev", "ens19"])
                .unwrap();
            assert!(links.contains("\"num_tx_queues\":4"), "{links}");
        }
        let list = run("ip", &["netns", "list"]).unwrap();
        assert!(!list.contains(&name), "{list}");
    }

    #[test]
    fn cleanup_stale_removes_only_dead_owners() {
        if !require_netns("cleanup_stale_removes_only_dead_owners") {
            return;
        }
        // pid 0x7ffffff0 is above pid_max: certainly not running.
        let prefix = format!("lqos-stale{}", std::process::id());
        let dead = format!("{prefix}-2147483632-x");
        run("ip", &["netns", "add", &dead]).unwrap();
        let alive = ScratchNetns::create(&unique_name(&prefix, "alive")).unwrap();
        let deleted = cleanup_stale(&prefix).unwrap();
        assert_eq!(deleted, vec![dead.clone()]);
        let list = run("ip", &["netns", "list"]).unwrap();
        assert!(
            !list.contains(&dead) && list.contains(alive.name()),
            "{list}"
        );
    }

    #[test]
    fn scratch_netns_is_removed_on_panic() {
        if !require_netns("scratch_netns_is_removed_on_panic") {
            return;
        }
        let name = unique_name("lqos-unit", "panic");
        let n2 = name.clone();
        let r = std::panic::catch_unwind(move || {
            let _ns = ScratchNetns::create(&n2).unwrap();
            panic!("boom");
        });
        assert!(r.is_err());
        let list = run("ip", &["netns", "list"]).unwrap();
        assert!(!list.contains(&name), "{list}");
    }
}
