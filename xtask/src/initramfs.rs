//! The guest's initramfs: busybox, the host's `ip`/`tc`/`ethtool` and the
//! `lqos` binary with their shared libraries, the kernel's qdisc,
//! classifier, action, veth, virtio-net and 8021q modules (with a load order
//! computed from their `depends=` fields: Debian ships no `modules.dep`),
//! the repository's test data at its host path, and `/init`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::cpio::{Archive, Entry};
use crate::fetch::{which, Fetched};

/// Where guest-only files live.
pub const LAB: &str = "lab";

/// What goes into one guest boot.
#[derive(Debug)]
pub struct Spec<'a> {
    /// The unpacked lab.
    pub fetched: &'a Fetched,
    /// The repository root (its test data is packed at the same path).
    pub repo: &'a Path,
    /// The `lqos` binary to put on PATH.
    pub lqos: &'a Path,
    /// Further executables: guest path -> host file (test binaries).
    pub executables: BTreeMap<String, PathBuf>,
    /// The command, run with `sh -c` in the guest.
    pub command: String,
    /// Rename the virtio NICs to ens19/ens20 and give each 16 TX queues.
    pub nics: bool,
    /// Printed by `/init` with the exit status when the command ends.
    pub marker: String,
    /// Further modules to pack and load (names, e.g. `dummy`), with their
    /// dependencies.
    pub modules: Vec<String>,
    /// Host directories packed at their own paths.
    pub trees: Vec<PathBuf>,
}

/// Builds the archive bytes.
pub fn build(spec: &Spec) -> Result<Vec<u8>> {
    let f = spec.fetched;
    let mut a = Archive::new();
    a.insert("dev/console", Entry::CharDev(5, 1, 0o600));
    for d in ["proc", "sys", "tmp", "run", "root", "etc", "mnt"] {
        a.insert(d, Entry::Dir(0o755));
    }
    a.insert("var/run", Entry::Symlink("/run".into()));
    a.insert(
        "etc/passwd",
        Entry::File(b"root:x:0:0:root:/root:/bin/sh\n".to_vec(), 0o644),
    );
    a.insert("etc/group", Entry::File(b"root:x:0:\n".to_vec(), 0o644));
    a.insert("bin/busybox", Entry::File(read(&f.busybox())?, 0o755));

    let mut libs = BTreeSet::new();
    // The command's shell is the host's `sh` (dash on Debian): busybox's
    // ash prefers its own applets (a tiny `ip` and `tc`) over PATH.
    let mut tools = vec![
        ("bin/sh".to_string(), host_shell()?),
        ("usr/sbin/ip".to_string(), host_tool("ip")?),
        ("usr/sbin/tc".to_string(), host_tool("tc")?),
    ];
    let ethtool = f
        .ethtool()
        .context("lab: no ethtool on the host nor in the fetched packages")?;
    tools.push(("usr/sbin/ethtool".into(), ethtool));
    tools.push((format!("{LAB}/bin/lqos"), spec.lqos.to_path_buf()));
    for (guest, host) in spec.executables.iter() {
        tools.push((guest.clone(), host.clone()));
    }
    for (guest, host) in &tools {
        a.insert(guest, Entry::File(stripped(host)?, 0o755));
        libs.extend(shared_libraries(host, f)?);
    }
    for lib in &libs {
        let guest = guest_lib_path(lib, f);
        if !a.contains(&guest) {
            a.insert(&guest, Entry::File(read(lib)?, 0o755));
        }
    }

    let order = module_order(&f.modules, &spec.modules)?;
    let mut list = String::new();
    for rel in &order {
        let host = f.modules.join(rel);
        a.insert(
            &format!("lib/modules/{}/{}", f.release, rel),
            Entry::File(read(&host)?, 0o644),
        );
        list.push_str(rel);
        list.push('\n');
    }
    a.insert(
        &format!("{LAB}/modules"),
        Entry::File(list.into_bytes(), 0o644),
    );

    for dir in test_data_dirs(spec.repo)?.iter().chain(&spec.trees) {
        add_tree(&mut a, dir)?;
    }

    a.insert(
        &format!("{LAB}/cmd"),
        Entry::File(spec.command.clone().into_bytes(), 0o644),
    );
    a.insert(
        "init",
        Entry::File(init_script(spec, &f.release).into_bytes(), 0o755),
    );
    Ok(a.finish())
}

fn read(p: &Path) -> Result<Vec<u8>> {
    fs::read(p).with_context(|| format!("lab: reading {}", p.display()))
}

fn host_tool(name: &str) -> Result<PathBuf> {
    which(name).with_context(|| format!("lab: the host has no `{name}` (install iproute2)"))
}

fn host_shell() -> Result<PathBuf> {
    fs::canonicalize("/bin/sh").context("lab: the host has no /bin/sh")
}

/// The file's bytes without debug info (`strip --strip-debug`, when the
/// host has binutils): test binaries shrink several-fold, symbols stay.
fn stripped(p: &Path) -> Result<Vec<u8>> {
    let out = std::env::temp_dir().join(format!(
        "lqos-lab-strip-{}-{}",
        std::process::id(),
        p.file_name().and_then(|n| n.to_str()).unwrap_or("x")
    ));
    let ok = Command::new("strip")
        .arg("--strip-debug")
        .arg("-o")
        .arg(&out)
        .arg(p)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if ok {
        let data = read(&out);
        let _ = fs::remove_file(&out);
        data
    } else {
        read(p)
    }
}

/// Libraries `ldd` resolves for `exe` (the program interpreter included).
fn shared_libraries(exe: &Path, f: &Fetched) -> Result<Vec<PathBuf>> {
    let out = Command::new("ldd")
        .arg(exe)
        .env("LD_LIBRARY_PATH", f.ld_library_path())
        .output()
        .with_context(|| format!("lab: running ldd on {}", exe.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if text.contains("not a dynamic executable") {
        return Ok(vec![]);
    }
    let mut libs = vec![];
    for line in text.lines() {
        if line.contains("not found") {
            bail!(
                "lab: {} needs a library nobody has: {}",
                exe.display(),
                line.trim()
            );
        }
        let path = match line.split_once("=>") {
            Some((_, rhs)) => rhs.split_whitespace().next(),
            None => line.split_whitespace().next(),
        };
        if let Some(p) = path.filter(|p| p.starts_with('/')) {
            libs.push(PathBuf::from(p));
        }
    }
    Ok(libs)
}

/// A library's path in the guest: the host's path, or for one from the
/// unpacked packages the path it has inside them.
fn guest_lib_path(lib: &Path, f: &Fetched) -> String {
    match lib.strip_prefix(&f.root) {
        Ok(rel) => rel.display().to_string(),
        Err(_) => lib.display().to_string(),
    }
}

/// The repository's test data (`samples/`, `*/tests/{data,fixtures,golden}`)
/// and the lab's scripts (`lab/`).
fn test_data_dirs(repo: &Path) -> Result<Vec<PathBuf>> {
    let mut dirs = vec![];
    for top in ["lab", "samples"] {
        if repo.join(top).is_dir() {
            dirs.push(repo.join(top));
        }
    }
    for e in fs::read_dir(repo).with_context(|| format!("lab: listing {}", repo.display()))? {
        let crate_dir = e?.path();
        for sub in ["tests/data", "tests/fixtures", "tests/golden"] {
            let d = crate_dir.join(sub);
            if d.is_dir() {
                dirs.push(d);
            }
        }
    }
    dirs.sort();
    Ok(dirs)
}

fn add_tree(a: &mut Archive, dir: &Path) -> Result<()> {
    for e in fs::read_dir(dir)? {
        let p = e?.path();
        if p.is_dir() {
            add_tree(a, &p)?;
        } else if p.is_file() {
            a.insert(&p.display().to_string(), Entry::File(read(&p)?, 0o644));
        }
    }
    Ok(())
}

/// Which modules to load: every qdisc (`sch_`), classifier (`cls_`) and
/// action (`act_`) module, veth, virtio-pci, virtio-net and 8021q (VLAN
/// devices, 802.1Q and 802.1ad, for the tests of tagged traffic).
fn wanted_module(rel: &str) -> bool {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    // sch_teql would add a `teql0` link to every guest.
    if name == "sch_teql.ko" {
        return false;
    }
    (rel.starts_with("kernel/net/sched/")
        && ["sch_", "cls_", "act_"].iter().any(|p| name.starts_with(p)))
        || ["veth.ko", "virtio_net.ko", "virtio_pci.ko", "8021q.ko"].contains(&name)
}

/// Module paths (relative to the modules dir) of the lab's modules and
/// the `extra` ones (names), in an order in which each module's
/// `depends=` come before it.
pub fn module_order(modules: &Path, extra: &[String]) -> Result<Vec<String>> {
    let mut by_name: BTreeMap<String, String> = BTreeMap::new();
    collect_modules(modules, modules, &mut by_name)?;
    if by_name.is_empty() {
        bail!("lab: no kernel modules under {}", modules.display());
    }
    let mut order = vec![];
    let mut seen = BTreeSet::new();
    let mut roots: Vec<String> = by_name
        .iter()
        .filter(|(_, rel)| wanted_module(rel))
        .map(|(n, _)| n.clone())
        .collect();
    roots.extend(extra.iter().map(|n| n.replace('-', "_")));
    for name in roots {
        visit(&name, modules, &by_name, &mut seen, &mut order, 0)?;
    }
    Ok(order)
}

fn collect_modules(base: &Path, dir: &Path, out: &mut BTreeMap<String, String>) -> Result<()> {
    for e in fs::read_dir(dir)? {
        let p = e?.path();
        if p.is_dir() {
            collect_modules(base, &p, out)?;
        } else if let Some(stem) = p
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".ko"))
        {
            let rel = p.strip_prefix(base).unwrap_or(&p).display().to_string();
            out.insert(stem.replace('-', "_"), rel);
        }
    }
    Ok(())
}

fn visit(
    name: &str,
    base: &Path,
    by_name: &BTreeMap<String, String>,
    seen: &mut BTreeSet<String>,
    order: &mut Vec<String>,
    depth: usize,
) -> Result<()> {
    if !seen.insert(name.to_string()) {
        return Ok(());
    }
    if depth > 64 {
        bail!("lab: module dependency chain too deep at {name}");
    }
    let rel = by_name
        .get(name)
        .with_context(|| format!("lab: module {name} is needed but not in the kernel package"))?;
    for dep in depends(&base.join(rel))? {
        visit(&dep, base, by_name, seen, order, depth + 1)?;
    }
    order.push(rel.clone());
    Ok(())
}

/// The `depends=` field of a module's `.modinfo` (comma-separated names).
pub fn depends(ko: &Path) -> Result<Vec<String>> {
    let data = fs::read(ko).with_context(|| format!("lab: reading {}", ko.display()))?;
    Ok(parse_depends(&data))
}

fn parse_depends(data: &[u8]) -> Vec<String> {
    let key = b"\0depends=";
    let Some(at) = data.windows(key.len()).position(|w| w == key) else {
        return vec![];
    };
    let rest = &data[at + key.len()..];
    let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
    String::from_utf8_lossy(&rest[..end])
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|s| s.replace('-', "_"))
        .collect()
}

/// `/init`: mounts, busybox applets, modules, NICs, then the command with
/// its output on the second serial port and the marker with its status.
fn init_script(spec: &Spec, release: &str) -> String {
    let nics = if spec.nics {
        r#"
# virtio NICs: name them after their PCI slot as udev would (0x13 -> ens19)
for d in /sys/class/net/*; do
    n=${d##*/}
    [ -e "$d/device" ] || continue
    pci=$(basename "$(dirname "$(readlink -f "$d/device")")")
    slot=${pci#*:*:}; slot=${slot%.*}
    /usr/sbin/ip link set "$n" name "ens$((0x$slot))"
done
for i in ens19 ens20; do
    if ! [ -e /sys/class/net/$i ]; then
        echo "lab: no $i in the guest ($(ls /sys/class/net | tr '\n' ' '))" >$OUT
        lab_exit 125
    fi
    /usr/sbin/ethtool -L $i combined 16 >/dev/null 2>&1
    /usr/sbin/ip link set $i up
    tx=$(ls -d /sys/class/net/$i/queues/tx-* | wc -l)
    if [ "$tx" != 16 ]; then
        echo "lab: $i has $tx TX queues, not 16 (ethtool -L $i combined 16 failed)" >$OUT
        lab_exit 125
    fi
done
"#
    } else {
        ""
    };
    format!(
        r#"#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/{LAB}/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TMPDIR=/tmp
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs run /run
# /tmp stays on the (writable) initramfs: a tmpfs there would hide a
# repository packed under /tmp (a checkout in /tmp is common, e.g. CI's).
mkdir -p /tmp && chmod 1777 /tmp
OUT=/dev/ttyS1
stty -F $OUT raw -echo 2>/dev/null
lab_exit() {{
    echo "{marker} $1" >$OUT
    sync
    poweroff -f
    sleep 60
}}
while read -r m; do
    insmod /lib/modules/{release}/$m 2>/tmp/insmod.err || echo "lab: insmod $m: $(cat /tmp/insmod.err)"
done </{LAB}/modules
ip link set lo up
hostname lqos-lab
{nics}
cd {repo}
/bin/sh -c "$(cat /{LAB}/cmd)" </dev/null >$OUT 2>&1
lab_exit $?
"#,
        marker = spec.marker,
        repo = spec.repo.display(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depends_field_is_read_from_modinfo() {
        let data = b"\x7fELF...\0license=GPL\0depends=sch_htb,nf-conntrack\0retpoline=Y\0";
        assert_eq!(parse_depends(data), ["sch_htb", "nf_conntrack"]);
        assert!(parse_depends(b"\0depends=\0name=x\0").is_empty());
        assert!(parse_depends(b"no modinfo").is_empty());
    }

    #[test]
    fn module_selection() {
        assert!(wanted_module("kernel/net/sched/sch_cake.ko"));
        assert!(wanted_module("kernel/net/sched/cls_flower.ko"));
        assert!(wanted_module("kernel/net/sched/act_skbedit.ko"));
        assert!(wanted_module("kernel/drivers/net/virtio_net.ko"));
        assert!(wanted_module("kernel/net/8021q/8021q.ko"));
        assert!(!wanted_module("kernel/net/sched/em_meta.ko"));
        assert!(!wanted_module("kernel/net/sched/sch_teql.ko"));
        assert!(!wanted_module("kernel/drivers/net/tun.ko"));
    }
}
