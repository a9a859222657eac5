//! Checks, before anything is changed, that this kernel and machine have
//! what the data path needs: the BPF syscall and verifier (the programs
//! are loaded for real into a throw-away namespace), LPM tries, a cpumap
//! of the possible CPUs, clsact and cls_bpf (attached to the throw-away
//! namespace's loopback), a bpffs for the pins, the interfaces. XDP is
//! optional: without it the report carries a warning and classification
//! works from tc alone.

use std::path::Path;

use crate::attach::{self, XdpChoice, XdpStatus};
use crate::error::{BpfError, Result};
use crate::loader::DataPath;
use crate::sys;

/// What preflight found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Preflight {
    /// Entries of the cpumap (the possible CPUs).
    pub cpumap_entries: u32,
    /// XDP can be attached (generic mode at least).
    pub xdp: bool,
    /// TX queues of each interface, in the order given.
    pub tx_queues: Vec<(String, u32)>,
    /// Things that work but not fully (e.g. no XDP: no CPU steering).
    pub warnings: Vec<String>,
}

fn fail(check: &'static str, message: impl Into<String>) -> BpfError {
    BpfError::Preflight {
        check,
        message: message.into(),
    }
}

/// Runs the checks for pinning under `pin_dir` and attaching to
/// `interfaces` in network namespace `netns` (None: the caller's). Changes
/// nothing: the trial load happens in a private network and mount
/// namespace on a helper thread and vanishes with it.
pub fn preflight(pin_dir: &Path, netns: Option<&str>, interfaces: &[&str]) -> Result<Preflight> {
    if !nix::unistd::geteuid().is_root() {
        return Err(fail(
            "privileges",
            "loading BPF programs and attaching them needs root (CAP_BPF, CAP_NET_ADMIN, CAP_SYS_ADMIN)",
        ));
    }
    let cpumap_entries = sys::possible_cpus()?;
    // bpffs: the pin directory is on one, or /sys/fs/bpf can have one.
    let sysbpf = Path::new("/sys/fs/bpf");
    if !sys::is_bpffs(pin_dir)
        && !(pin_dir.starts_with(sysbpf) && (sys::is_bpffs(sysbpf) || sysbpf.is_dir()))
    {
        let parent_ok = pin_dir.ancestors().skip(1).any(sys::is_bpffs);
        if !parent_ok {
            return Err(fail(
                "bpffs",
                format!(
                    "{} is not on a bpffs and none can be mounted there automatically (mount -t bpf bpffs DIR)",
                    pin_dir.display()
                ),
            ));
        }
    }
    let (xdp, mut warnings) = trial()?;
    let mut tx_queues = Vec::new();
    sys::in_netns(netns, || {
        for name in interfaces {
            attach::ifindex(name).map_err(|e| {
                fail(
                    "interfaces",
                    format!(
                        "{e} (network namespace {})",
                        netns.unwrap_or("of this process")
                    ),
                )
            })?;
            let q = tx_queue_count(name)?;
            if q < 2 {
                warnings.push(format!(
                    "{name} has one TX queue: every circuit is shaped by one HTB on one CPU"
                ));
            }
            tx_queues.push((name.to_string(), q));
        }
        Ok(())
    })?;
    if !xdp {
        warnings.push(
            "XDP cannot be attached: packets are classified from tc alone, without CPU steering"
                .into(),
        );
    }
    Ok(Preflight {
        cpumap_entries,
        xdp,
        tx_queues,
        warnings,
    })
}

/// TX queues of `name` in the calling thread's namespace.
fn tx_queue_count(name: &str) -> Result<u32> {
    let dir = sys::queues_dir(name)?;
    sys::with_private_sysfs(|| {
        let q = sys::tx_queues(&dir).map_err(BpfError::io(&dir, "listing TX queues"))?;
        Ok(q.len() as u32)
    })
}

/// Loads the programs and attaches them to the loopback of a private
/// network namespace with a private bpffs, on a helper thread. Returns
/// whether XDP attached, and warnings.
fn trial() -> Result<(bool, Vec<String>)> {
    std::thread::scope(|s| {
        s.spawn(|| {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET)
                .map_err(|e| fail("namespaces", format!("cannot create a scratch network namespace: {e}")))?;
            let bpffs = sys::PrivateBpffs::new("preflight").map_err(|e| fail("bpffs", e.to_string()))?;
            let mut dp = DataPath::load_trial(bpffs.path()).map_err(|e| match e {
                e @ BpfError::Load { .. } | e @ BpfError::Program { .. } => fail(
                    "BPF",
                    format!("the kernel refused lqos's programs or maps (BPF syscall, LPM trie, cpumap, verifier): {e}"),
                ),
                e => e,
            })?;
            dp.attach_tc("lo").map_err(|e| {
                fail(
                    "cls_bpf",
                    format!("attaching to a clsact egress hook failed (needs CONFIG_NET_SCH_INGRESS and CONFIG_NET_CLS_BPF): {e}"),
                )
            })?;
            let xdp = dp.attach_xdp("lo", XdpChoice::Generic)?;
            let warnings = match &xdp {
                XdpStatus::Unavailable(why) => vec![format!("XDP: {why}")],
                _ => Vec::new(),
            };
            Ok((matches!(xdp, XdpStatus::Generic(_)), warnings))
        })
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}
