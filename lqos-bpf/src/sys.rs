//! Small system helpers: possible CPUs, bpffs, entering a network
//! namespace, a private sysfs or bpffs for the calling thread.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use nix::mount::{mount, umount2, MntFlags, MsFlags};
use nix::sched::{setns, unshare, CloneFlags};
use nix::sys::statfs::statfs;

use crate::error::{BpfError, Result};

/// `BPF_FS_MAGIC` (statfs f_type of a bpffs).
const BPF_FS_MAGIC: i64 = 0xcafe_4a11;

/// Number of possible CPUs (`/sys/devices/system/cpu/possible`, e.g.
/// `0-255` -> 256): the most entries a cpumap may have (`nr_cpu_ids`).
pub fn possible_cpus() -> Result<u32> {
    let path = "/sys/devices/system/cpu/possible";
    let s = std::fs::read_to_string(path).map_err(BpfError::io(path, "reading"))?;
    parse_cpu_list_max(&s)
        .map(|m| m + 1)
        .ok_or_else(|| BpfError::Io {
            path: path.into(),
            what: "parsing",
            source: io::Error::new(io::ErrorKind::InvalidData, format!("{:?}", s.trim())),
        })
}

/// The highest CPU of a list such as `0-3,8-11` or `0`.
pub(crate) fn parse_cpu_list_max(s: &str) -> Option<u32> {
    s.trim()
        .split(',')
        .filter(|p| !p.is_empty())
        .map(|p| {
            p.rsplit('-')
                .next()
                .and_then(|n| n.trim().parse::<u32>().ok())
        })
        .try_fold(None::<u32>, |m, n| {
            n.map(|n| Some(m.map_or(n, |m| m.max(n))))
        })
        .flatten()
}

/// The online CPUs (`/sys/devices/system/cpu/online`), listed.
pub fn online_cpus() -> Result<Vec<u32>> {
    let path = "/sys/devices/system/cpu/online";
    let s = std::fs::read_to_string(path).map_err(BpfError::io(path, "reading"))?;
    let mut v = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        let mut it = part.splitn(2, '-');
        let a = it.next().and_then(|n| n.parse::<u32>().ok());
        let b = it.next().map(|n| n.parse::<u32>().ok()).unwrap_or(a);
        if let (Some(a), Some(b)) = (a, b) {
            v.extend(a..=b);
        }
    }
    Ok(v)
}

/// True when `dir` is on a bpffs.
pub fn is_bpffs(dir: &Path) -> bool {
    statfs(dir).is_ok_and(|s| s.filesystem_type().0 == BPF_FS_MAGIC)
}

/// Makes sure `pin_dir` exists on a bpffs: mounts a bpffs on
/// `/sys/fs/bpf` when the pin directory is under it and nothing is
/// mounted there yet, then creates the directory.
pub fn ensure_bpffs(pin_dir: &Path) -> Result<()> {
    let sys = Path::new("/sys/fs/bpf");
    if pin_dir.starts_with(sys) && !is_bpffs(sys) {
        mount(
            Some("bpffs"),
            sys,
            Some("bpf"),
            MsFlags::empty(),
            None::<&str>,
        )
        .map_err(|e| BpfError::Preflight {
            check: "bpffs",
            message: format!("/sys/fs/bpf is not a bpffs and mounting one failed: {e}"),
        })?;
    }
    std::fs::create_dir_all(pin_dir)
        .map_err(BpfError::io(pin_dir, "creating the pin directory"))?;
    if !is_bpffs(pin_dir) {
        return Err(BpfError::Preflight {
            check: "bpffs",
            message: format!(
                "{} is not on a bpffs (mount one: mount -t bpf bpffs {})",
                pin_dir.display(),
                pin_dir.display()
            ),
        });
    }
    Ok(())
}

/// Runs `f` in network namespace `netns` (`/run/netns/NAME`, as `ip netns`
/// makes them) on a thread of its own, or on this thread when `None`.
/// Interface names and indexes, netlink and aya's attach calls all act in
/// the calling thread's namespace.
pub fn in_netns<T: Send>(netns: Option<&str>, f: impl FnOnce() -> Result<T> + Send) -> Result<T> {
    let Some(name) = netns else {
        return f();
    };
    std::thread::scope(|s| {
        s.spawn(|| {
            enter_netns(name)?;
            f()
        })
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}

/// Moves the calling thread into network namespace `name`.
pub fn enter_netns(name: &str) -> Result<()> {
    let err = |what: &'static str| {
        let netns = name.to_string();
        move |source: io::Error| BpfError::Netns {
            netns,
            what,
            source,
        }
    };
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(err("invalid name")(io::Error::from_raw_os_error(
            libc::EINVAL,
        )));
    }
    let f = File::open(format!("/run/netns/{name}")).map_err(err("opening /run/netns entry"))?;
    setns(&f, CloneFlags::CLONE_NEWNET).map_err(|e| err("entering")(io::Error::from(e)))
}

/// Gives the calling thread a mount namespace of its own whose mounts do
/// not propagate back (for a private sysfs or bpffs).
pub fn private_mounts() -> io::Result<()> {
    unshare(CloneFlags::CLONE_NEWNS).map_err(io::Error::from)?;
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(io::Error::from)
}

/// Mounts a sysfs of the calling thread's network namespace on `/sys`, in
/// a private mount namespace (sysfs shows the interfaces of the namespace
/// that mounted it).
pub fn private_sysfs() -> io::Result<()> {
    private_mounts()?;
    match mount(
        Some("sysfs"),
        "/sys",
        Some("sysfs"),
        MsFlags::empty(),
        None::<&str>,
    ) {
        // EBUSY: this namespace's sysfs is already the one on /sys.
        Ok(()) | Err(nix::errno::Errno::EBUSY) => Ok(()),
        Err(e) => Err(io::Error::from(e)),
    }
}

/// Runs `f` on a helper thread that sees a sysfs of the calling thread's
/// network namespace on `/sys` ([`private_sysfs`]); the mount vanishes with
/// the thread.
pub fn with_private_sysfs<T: Send>(f: impl FnOnce() -> Result<T> + Send) -> Result<T> {
    std::thread::scope(|s| {
        s.spawn(|| {
            private_sysfs().map_err(BpfError::io("/sys", "mounting a private sysfs"))?;
            f()
        })
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}

/// The queue directory of interface `name` in sysfs
/// (`/sys/class/net/NAME/queues`), refusing names that are not one path
/// component.
pub fn queues_dir(name: &str) -> Result<PathBuf> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(BpfError::Interface {
            interface: name.to_string(),
            what: "reading its queues".into(),
            message: "invalid interface name".into(),
        });
    }
    Ok(PathBuf::from(format!("/sys/class/net/{name}/queues")))
}

/// The TX queues in a queue directory, as `(index, path)`.
pub(crate) fn tx_queues(dir: &Path) -> io::Result<Vec<(u32, PathBuf)>> {
    let mut v: Vec<(u32, PathBuf)> = std::fs::read_dir(dir)?
        .flatten()
        .filter_map(|e| {
            let n = e.file_name();
            let q = n.to_str()?.strip_prefix("tx-")?.parse::<u32>().ok()?;
            Some((q, e.path()))
        })
        .collect();
    v.sort();
    Ok(v)
}

/// A bpffs mounted on a fresh directory in the calling thread's private
/// mount namespace (for tests and benchmarks: pins vanish with it). Drop
/// unmounts it and removes the directory.
#[derive(Debug)]
pub struct PrivateBpffs {
    dir: PathBuf,
}

impl PrivateBpffs {
    /// Unshares the thread's mount namespace and mounts a bpffs on a new
    /// directory under the temporary directory.
    pub fn new(tag: &str) -> Result<PrivateBpffs> {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static SEQ: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "lqos-bpffs-{}-{}-{tag}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).map_err(BpfError::io(&dir, "creating"))?;
        private_mounts().map_err(BpfError::io(&dir, "unsharing the mount namespace"))?;
        mount(
            Some("bpffs"),
            &dir,
            Some("bpf"),
            MsFlags::empty(),
            None::<&str>,
        )
        .map_err(|e| BpfError::io(&dir, "mounting a bpffs")(io::Error::from(e)))?;
        Ok(PrivateBpffs { dir })
    }

    /// The mount point.
    pub fn path(&self) -> &Path {
        &self.dir
    }
}

impl Drop for PrivateBpffs {
    fn drop(&mut self) {
        let _ = umount2(&self.dir, MntFlags::MNT_DETACH);
        let _ = std::fs::remove_dir(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list_max("0-255\n"), Some(255));
        assert_eq!(parse_cpu_list_max("0"), Some(0));
        assert_eq!(parse_cpu_list_max("0-3,8-11"), Some(11));
        assert_eq!(parse_cpu_list_max(""), None);
        assert_eq!(parse_cpu_list_max("x"), None);
    }
}
