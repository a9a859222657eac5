//! `cargo xtask lab fetch`: a stock Debian cloud kernel, qemu and busybox
//! from the host's apt sources, downloaded once with `apt-get download`
//! and unpacked with `dpkg-deb -x` under `target/lab/` (nothing is
//! installed on the host).

use std::fs;
use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::{have_command, run_capture, Lab};

/// Packages always downloaded (the kernel's real package is added: the
/// metapackage only depends on it).
const WANTED: &[&str] = &[
    "linux-image-cloud-amd64",
    "qemu-system-x86",
    "qemu-system-common",
    "qemu-system-data",
    "seabios",
    "ipxe-qemu",
    "busybox-static",
];

/// Of the packages apt would newly install for `WANTED`, the ones qemu
/// needs at run time: shared libraries (and qemu's own pieces). Daemons,
/// initramfs-tools, udev and the like are left out.
fn is_runtime_dep(pkg: &str) -> bool {
    pkg.starts_with("lib") && pkg != "libklibc"
        || pkg.starts_with("qemu-")
        || pkg.starts_with("linux-image-")
}

/// The unpacked lab: what `run` needs.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// `target/lab/root`: every package unpacked.
    pub root: PathBuf,
    /// The kernel image.
    pub kernel: PathBuf,
    /// `root/lib/modules/VERSION`.
    pub modules: PathBuf,
    /// The kernel release (`6.1.0-48-cloud-amd64`).
    pub release: String,
}

impl Fetched {
    /// The qemu binary.
    pub fn qemu(&self) -> PathBuf {
        self.root.join("usr/bin/qemu-system-x86_64")
    }

    /// `LD_LIBRARY_PATH` for the unpacked qemu.
    pub fn ld_library_path(&self) -> String {
        let mut dirs = vec![
            self.root.join("usr/lib/x86_64-linux-gnu"),
            self.root.join("lib/x86_64-linux-gnu"),
        ];
        dirs.retain(|d| d.is_dir());
        let mut s = dirs
            .iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(":");
        if let Ok(old) = std::env::var("LD_LIBRARY_PATH") {
            if !old.is_empty() {
                s = format!("{s}:{old}");
            }
        }
        s
    }

    /// qemu's firmware search directories (`-L`).
    pub fn firmware_dirs(&self) -> Vec<PathBuf> {
        ["usr/share/qemu", "usr/share/seabios", "usr/lib/ipxe/qemu"]
            .iter()
            .map(|d| self.root.join(d))
            .filter(|d| d.is_dir())
            .collect()
    }

    /// The busybox binary (static).
    pub fn busybox(&self) -> PathBuf {
        self.root.join("bin/busybox")
    }

    /// ethtool: the host's if it has one, else the downloaded one.
    pub fn ethtool(&self) -> Option<PathBuf> {
        which("ethtool").or_else(|| {
            let p = self.root.join("sbin/ethtool");
            p.exists().then_some(p)
        })
    }

    /// Looks up an unpacked lab; `None` if `fetch` has not completed.
    pub fn existing(lab: &Lab) -> Option<Fetched> {
        if !lab.dir.join("fetched").exists() {
            return None;
        }
        let root = lab.dir.join("root");
        let boot = fs::read_dir(root.join("boot")).ok()?;
        let kernel = boot.filter_map(|e| e.ok()).map(|e| e.path()).find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("vmlinuz-"))
        })?;
        let release = kernel
            .file_name()?
            .to_str()?
            .trim_start_matches("vmlinuz-")
            .to_string();
        let modules = root.join("lib/modules").join(&release);
        let f = Fetched {
            root,
            kernel,
            modules,
            release,
        };
        (f.qemu().exists() && f.busybox().exists() && f.modules.is_dir()).then_some(f)
    }
}

/// `command -v NAME` in the host's PATH.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin"].iter().map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Fetches and unpacks the lab unless it already is (idempotent).
pub fn fetch(lab: &Lab) -> Result<Fetched> {
    if let Some(f) = Fetched::existing(lab) {
        return Ok(f);
    }
    for tool in ["apt-get", "apt-cache", "dpkg-deb"] {
        if !have_command(tool) {
            bail!("lab fetch: `{tool}` not found: the lab downloads Debian packages with apt (Debian or Ubuntu host)");
        }
    }
    let debs = lab.dir.join("debs");
    let root = lab.dir.join("root");
    fs::create_dir_all(&debs).with_context(|| format!("lab fetch: creating {}", debs.display()))?;

    let mut wanted: Vec<String> = WANTED.iter().map(|s| s.to_string()).collect();
    if which("ethtool").is_none() {
        wanted.push("ethtool".into());
    }
    let kernel_pkg = match kernel_package() {
        Ok(p) => p,
        Err(first) => {
            // Package lists may be missing or stale on a fresh machine.
            eprintln!("lab fetch: {first:#}; running `apt-get update` once");
            run_capture(Command::new("apt-get").args(["update", "-q"]))
                .context("lab fetch: `apt-get update`")?;
            kernel_package()?
        }
    };
    wanted.push(kernel_pkg);
    let mut pkgs = wanted.clone();
    pkgs.extend(new_dependencies(&wanted)?);
    pkgs.sort();
    pkgs.dedup();

    eprintln!(
        "lab fetch: downloading {} packages into {}",
        pkgs.len(),
        debs.display()
    );
    let download = || {
        run_capture(
            Command::new("apt-get")
                .arg("download")
                .args(&pkgs)
                .current_dir(&debs),
        )
    };
    if let Err(first) = download() {
        // Stale lists name versions the mirror no longer has.
        eprintln!("lab fetch: {first:#}; running `apt-get update` once and retrying");
        run_capture(Command::new("apt-get").args(["update", "-q"]))
            .context("lab fetch: `apt-get update`")?;
        download().context("lab fetch: `apt-get download` (is a Debian mirror reachable?)")?;
    }

    if root.exists() {
        fs::remove_dir_all(&root)
            .with_context(|| format!("lab fetch: clearing {}", root.display()))?;
    }
    fs::create_dir_all(&root)?;
    let mut n = 0;
    for e in fs::read_dir(&debs)? {
        let p = e?.path();
        if p.extension().is_some_and(|x| x == "deb") {
            run_capture(Command::new("dpkg-deb").arg("-x").arg(&p).arg(&root))
                .with_context(|| format!("lab fetch: unpacking {}", p.display()))?;
            n += 1;
        }
    }
    eprintln!("lab fetch: unpacked {n} packages into {}", root.display());
    fs::write(lab.dir.join("fetched"), pkgs.join("\n") + "\n")?;
    let f = Fetched::existing(lab).context(
        "lab fetch: after unpacking there is no boot/vmlinuz-*, usr/bin/qemu-system-x86_64 or bin/busybox",
    )?;
    check_qemu(&f)?;
    Ok(f)
}

/// The real kernel package behind `linux-image-cloud-amd64`.
fn kernel_package() -> Result<String> {
    let out = run_capture(Command::new("apt-cache").args(["depends", "linux-image-cloud-amd64"]))
        .context("lab fetch: `apt-cache depends linux-image-cloud-amd64`")?;
    out.lines()
        .filter_map(|l| l.trim().strip_prefix("Depends: "))
        .find(|p| p.starts_with("linux-image-"))
        .map(str::to_string)
        .context("lab fetch: apt knows no linux-image-cloud-amd64 (Debian bookworm or newer sources needed)")
}

/// What `apt-get install --no-install-recommends` would newly install for
/// `wanted` (simulated: nothing is installed), restricted to run-time deps.
fn new_dependencies(wanted: &[String]) -> Result<Vec<String>> {
    let out = run_capture(
        Command::new("apt-get")
            .args(["install", "-s", "-q", "--no-install-recommends"])
            .args(wanted),
    )
    .context("lab fetch: simulating `apt-get install` to find qemu's libraries")?;
    Ok(parse_simulated_installs(&out)
        .into_iter()
        .filter(|p| is_runtime_dep(p))
        .collect())
}

/// Package names of `Inst NAME (VERSION ...)` lines that are new installs
/// (an upgrade prints the installed version in brackets first).
fn parse_simulated_installs(out: &str) -> Vec<String> {
    out.lines()
        .filter_map(|l| l.strip_prefix("Inst "))
        .filter(|rest| {
            !rest
                .split_whitespace()
                .nth(1)
                .is_some_and(|w| w.starts_with('['))
        })
        .filter_map(|rest| rest.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// qemu starts: every shared library resolves.
fn check_qemu(f: &Fetched) -> Result<()> {
    let out = Command::new("ldd")
        .arg(f.qemu())
        .env("LD_LIBRARY_PATH", f.ld_library_path())
        .output()
        .context("lab fetch: running ldd on qemu")?;
    let text = String::from_utf8_lossy(&out.stdout);
    let missing: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("not found"))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    if !missing.is_empty() {
        bail!(
            "lab fetch: qemu needs libraries neither the host nor the downloaded packages have: {}",
            missing.join(", ")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simulated_installs_skip_upgrades() {
        let out = "\
Remv qemu-utils [1:10.0.2]
Inst libsystemd0 [252.38-1~deb12u1] (252.39-1~deb12u2 Debian:12.14/oldstable [amd64])
Inst libfdt1 (1.6.1-4+b1 Debian:12.14/oldstable [amd64])
Conf libfdt1 (1.6.1-4+b1 Debian:12.14/oldstable [amd64])
Inst qemu-system-x86 (1:7.2+dfsg-7+deb12u18+b2 Debian:12.14/oldstable [amd64])
";
        assert_eq!(
            parse_simulated_installs(out),
            ["libfdt1", "qemu-system-x86"]
        );
    }

    #[test]
    fn only_runtime_deps_are_kept() {
        assert!(is_runtime_dep("libslirp0"));
        assert!(is_runtime_dep("qemu-system-common"));
        assert!(!is_runtime_dep("udev"));
        assert!(!is_runtime_dep("initramfs-tools"));
        assert!(!is_runtime_dep("libklibc"));
    }
}
