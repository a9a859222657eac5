//! `cargo xtask lab kernel`: lab kernels built from Debian's own source
//! package of the stock lab kernel's version, so the stock kernel, the
//! same source built here ("unpatched") and that source with
//! `lab/kernel/*.patch` applied ("patched") can be compared in one lab.
//!
//! Everything lives under `target/lab/kernel/`:
//!
//! - `debs/`: `linux-source-X.Y_VERSION_all.deb` (`apt-get download`);
//! - `src/VERSION/linux-source-X.Y/`: the unpacked, untouched source;
//! - `build/lab/`: one build tree holding one variant at a time: the
//!   patches are applied or reverted and the release string set, and
//!   `make` rebuilds only what that touches (a few minutes instead of a
//!   whole kernel, and one tree's disk); `build/stock/`: the stock
//!   configuration prepared for building external modules;
//! - `install/unpatched/`, `install/patched/`: `boot/vmlinuz-RELEASE` and
//!   `lib/modules/RELEASE/`, which `lab run --kernel` boots.
//!
//! The configuration is the stock kernel's `/boot/config-*`, its modules
//! trimmed by `make localmodconfig` to those the lab loads, plus
//! `lab/kernel/lab.config`; the release gets `-lqos-unpatched` or
//! `-lqos-patched`. `make` always runs under `nice -n 19`; with a lock
//! file (`--lock`), in holds of at most 15 minutes (`flock LOCK timeout`),
//! so a build that saturates the machine lets measurements in between.
//! Every step is skipped when its inputs did not change.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use clap::ValueEnum;

use crate::fetch::Fetched;
use crate::{initramfs, run_capture, Lab};

/// Which kernel a lab guest boots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
pub enum Kernel {
    /// Debian's cloud kernel package (`lab fetch`).
    Stock,
    /// Debian's source of the same version built with the lab configuration.
    Unpatched,
    /// The same source and configuration with `lab/kernel/*.patch` applied.
    Patched,
}

impl Kernel {
    /// The name used in paths and messages.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Stock => "stock",
            Kernel::Unpatched => "unpatched",
            Kernel::Patched => "patched",
        }
    }
}

/// How `make` runs.
#[derive(Debug, Clone)]
pub struct BuildOpts {
    /// `make -j`.
    pub jobs: u32,
    /// Hold this lock file (flock) while `make` runs, 15 minutes at a time.
    pub lock: Option<PathBuf>,
}

/// One lock hold of a build at most (then the lock is released and taken again).
const LOCK_HOLD_SECS: u32 = 900;

/// `target/lab/kernel/...` paths.
struct Dirs {
    root: PathBuf,
}

impl Dirs {
    fn new(lab: &Lab) -> Dirs {
        Dirs {
            root: lab.dir.join("kernel"),
        }
    }
    fn debs(&self) -> PathBuf {
        self.root.join("debs")
    }
    fn tree(&self) -> PathBuf {
        self.root.join("build/lab")
    }
    fn stock_prepared(&self) -> PathBuf {
        self.root.join("build/stock")
    }
    fn install(&self, k: Kernel) -> PathBuf {
        self.root.join("install").join(k.name())
    }
}

/// The Debian package version of the stock kernel image (`6.1.172-1`).
fn stock_version(lab: &Lab, stock: &Fetched) -> Result<String> {
    let prefix = format!("linux-image-{}_", stock.release);
    let debs = lab.dir.join("debs");
    let deb = fs::read_dir(&debs)
        .with_context(|| format!("lab kernel: listing {}", debs.display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".deb"))
        })
        .with_context(|| {
            format!(
                "lab kernel: no {prefix}*.deb in {} (run `cargo xtask lab fetch`)",
                debs.display()
            )
        })?;
    let v = run_capture(Command::new("dpkg-deb").arg("-f").arg(&deb).arg("Version"))
        .with_context(|| format!("lab kernel: reading the version of {}", deb.display()))?;
    Ok(v.trim().to_string())
}

/// `6.1` of `6.1.172-1`: the source package is `linux-source-6.1`.
fn major_minor(version: &str) -> Result<String> {
    let mut parts = version.split('.');
    match (parts.next(), parts.next()) {
        (Some(a), Some(b)) if !a.is_empty() && b.chars().all(|c| c.is_ascii_digit()) => {
            Ok(format!("{a}.{b}"))
        }
        _ => bail!("lab kernel: cannot read a kernel version X.Y from `{version}`"),
    }
}

/// The unpacked source tree of `version` (downloaded and unpacked once).
fn source(d: &Dirs, version: &str) -> Result<PathBuf> {
    let mm = major_minor(version)?;
    let dir = d.root.join("src").join(version);
    let tree = dir.join(format!("linux-source-{mm}"));
    let stamp = dir.join(".unpacked");
    if stamp.exists() && tree.join("Makefile").exists() {
        return Ok(tree);
    }
    let pkg = format!("linux-source-{mm}");
    let debs = d.debs();
    fs::create_dir_all(&debs)?;
    let find = || -> Option<PathBuf> {
        fs::read_dir(&debs)
            .ok()?
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .find(|p| {
                p.extension().is_some_and(|x| x == "deb")
                    && p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with(&format!("{pkg}_")))
                    && run_capture(Command::new("dpkg-deb").arg("-f").arg(p).arg("Version"))
                        .is_ok_and(|v| v.trim() == version)
            })
    };
    let deb = match find() {
        Some(p) => p,
        None => {
            eprintln!(
                "lab kernel: downloading {pkg}={version} into {}",
                debs.display()
            );
            run_capture(
                Command::new("apt-get")
                    .args(["download", "-q", &format!("{pkg}={version}")])
                    .current_dir(&debs),
            )
            .with_context(|| {
                format!(
                    "lab kernel: `apt-get download {pkg}={version}` (the stock lab kernel is \
                     {version}; if the mirror no longer has its source, fetch a current lab: \
                     rm -rf target/lab && cargo xtask lab fetch)"
                )
            })?;
            find().with_context(|| format!("lab kernel: apt-get downloaded no {pkg} {version}"))?
        }
    };
    eprintln!("lab kernel: unpacking {}", deb.display());
    if dir.exists() {
        fs::remove_dir_all(&dir)?;
    }
    let pkgroot = dir.join("deb");
    fs::create_dir_all(&pkgroot)?;
    run_capture(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&pkgroot))?;
    let tarball = pkgroot.join(format!("usr/src/linux-source-{mm}.tar.xz"));
    if !tarball.exists() {
        bail!("lab kernel: {} has no {}", deb.display(), tarball.display());
    }
    run_capture(
        Command::new("tar")
            .arg("-xJf")
            .arg(&tarball)
            .arg("-C")
            .arg(&dir),
    )
    .context("lab kernel: unpacking the source tarball")?;
    fs::remove_dir_all(&pkgroot)?;
    if !tree.join("Makefile").exists() {
        bail!("lab kernel: the tarball has no {}", tree.display());
    }
    fs::write(&stamp, version)?;
    Ok(tree)
}

/// The unpacked source of the stock kernel's version (downloaded once).
pub fn stock_source(lab: &Lab, stock: &Fetched) -> Result<PathBuf> {
    source(&Dirs::new(lab), &stock_version(lab, stock)?)
}

/// The patches, in order: `lab/kernel/*.patch`.
pub fn patches(lab: &Lab) -> Result<Vec<PathBuf>> {
    let dir = lab.repo.join("lab/kernel");
    let mut v: Vec<PathBuf> = fs::read_dir(&dir)
        .with_context(|| format!("lab kernel: listing {}", dir.display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "patch"))
        .collect();
    v.sort();
    if v.is_empty() {
        bail!("lab kernel: no patches in {}", dir.display());
    }
    Ok(v)
}

/// The diff of a patch file (from its first `diff `/`--- ` line): what
/// changes the source, without the commit message.
fn patch_diff(text: &str) -> &str {
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        if line.starts_with("diff ") || line.starts_with("--- ") {
            return &text[at..];
        }
        at += line.len();
    }
    text
}

/// Modules the built kernels keep besides those the lab always loads, so
/// `lab run --module NAME` finds them there too (`dummy`: the kernel's tc
/// selftests make dummy devices).
const OPTIONAL_MODULES: &[&str] = &["dummy"];

/// `Module Size Used by` lines (what `lsmod` prints) naming every module
/// the lab loads or may load, for `make localmodconfig`.
fn lsmod_text(stock: &Fetched) -> Result<String> {
    let optional: Vec<String> = OPTIONAL_MODULES.iter().map(|m| m.to_string()).collect();
    let mut names: Vec<String> = initramfs::module_order(&stock.modules, &optional)?
        .iter()
        .filter_map(|rel| rel.rsplit('/').next()?.strip_suffix(".ko"))
        .map(|n| n.replace('-', "_"))
        .collect();
    names.sort();
    let mut s = String::from("Module                  Size  Used by\n");
    for n in names {
        s.push_str(&format!("{n} 16384 0\n"));
    }
    Ok(s)
}

/// One line of a configuration fragment: `CONFIG_X=value` or
/// `# CONFIG_X is not set` (value `None`).
fn fragment_options(text: &str) -> Vec<(String, Option<String>)> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim();
            if let Some(rest) = l.strip_prefix("# ") {
                let name = rest.strip_suffix(" is not set")?;
                name.starts_with("CONFIG_")
                    .then(|| (name.to_string(), None))
            } else if l.starts_with("CONFIG_") {
                let (k, v) = l.split_once('=')?;
                Some((k.to_string(), Some(v.to_string())))
            } else {
                None
            }
        })
        .collect()
}

/// The options of `fragment` that `config` does not have as asked.
fn unmet_options(fragment: &str, config: &str) -> Vec<String> {
    let lines: Vec<&str> = config.lines().collect();
    fragment_options(fragment)
        .into_iter()
        .filter(|(name, value)| match value {
            Some(v) => !lines.contains(&format!("{name}={v}").as_str()),
            None => lines.iter().any(|l| l.starts_with(&format!("{name}="))),
        })
        .map(|(name, value)| format!("{name}={}", value.as_deref().unwrap_or("n")))
        .collect()
}

/// Options set differently in `b` than in `a` (`NAME=value`, or
/// `NAME=n` for unset), besides those that only describe the build host
/// (compiler and pahole versions, build salt, signing keys).
fn changed_options(a: &str, b: &str) -> Vec<String> {
    let parse = |text: &str| -> std::collections::BTreeMap<String, String> {
        text.lines()
            .filter_map(|l| l.split_once('='))
            .filter(|(k, _)| k.starts_with("CONFIG_"))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let informational = |k: &str| {
        k.ends_with("_VERSION_TEXT")
            || k == "CONFIG_PAHOLE_VERSION"
            || k == "CONFIG_BUILD_SALT"
            || k.starts_with("CONFIG_MODULE_SIG_")
            || k.ends_with("_TRUSTED_KEYS")
            || k.ends_with("_REVOCATION_KEYS")
    };
    let (a, b) = (parse(a), parse(b));
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| !informational(k) && a.get(*k) != b.get(*k))
        .map(|k| format!("{k}={}", b.get(k).map_or("n", String::as_str)))
        .collect()
}

/// `make ARGS` in `dir`, niced, under the lock in holds (see module docs).
fn make(dir: &Path, args: &[String], opts: &BuildOpts) -> Result<()> {
    loop {
        let mut cmd = match &opts.lock {
            Some(lock) => {
                let mut c = Command::new("flock");
                c.arg(lock)
                    .arg("timeout")
                    .arg(LOCK_HOLD_SECS.to_string())
                    .args(["nice", "-n", "19", "make"]);
                c
            }
            None => {
                let mut c = Command::new("nice");
                c.args(["-n", "19", "make"]);
                c
            }
        };
        cmd.arg(format!("-j{}", opts.jobs))
            .args(args)
            .current_dir(dir);
        let st = cmd
            .status()
            .with_context(|| format!("lab kernel: running make in {}", dir.display()))?;
        if st.success() {
            return Ok(());
        }
        if opts.lock.is_some() && st.code() == Some(124) {
            eprintln!("lab kernel: lock held {LOCK_HOLD_SECS} s; releasing it and continuing");
            continue;
        }
        bail!(
            "lab kernel: `make {}` in {} failed ({st})",
            args.join(" "),
            dir.display()
        );
    }
}

fn run_in(dir: &Path, program: &str, args: &[&str]) -> Result<String> {
    run_capture(Command::new(program).args(args).current_dir(dir)).with_context(|| {
        format!(
            "lab kernel: `{program} {}` in {}",
            args.join(" "),
            dir.display()
        )
    })
}

/// Writes the lab configuration into `tree/.config` unless it already is
/// the one made from the same inputs.
fn configure(lab: &Lab, stock: &Fetched, tree: &Path, k: Kernel) -> Result<()> {
    let stock_config = stock.root.join(format!("boot/config-{}", stock.release));
    let base = fs::read_to_string(&stock_config)
        .with_context(|| format!("lab kernel: reading {}", stock_config.display()))?;
    let fragment_path = lab.repo.join("lab/kernel/lab.config");
    let fragment = format!(
        "{}\nCONFIG_LOCALVERSION=\"-lqos-{}\"\n",
        fs::read_to_string(&fragment_path)
            .with_context(|| format!("lab kernel: reading {}", fragment_path.display()))?,
        k.name()
    );
    let lsmod = lsmod_text(stock)?;
    let inputs = format!("{base}\n--\n{fragment}\n--\n{lsmod}");
    let stamp = tree.join(".lab-config-inputs");
    if fs::read_to_string(&stamp).is_ok_and(|s| s == inputs) && tree.join(".config").exists() {
        return Ok(());
    }
    eprintln!("lab kernel: configuring {}", tree.display());
    // A configuration that comes out the same keeps its file (and mtime:
    // make then rebuilds nothing).
    let old = tree.join(".config.lab-old");
    let had_config = tree.join(".config").exists();
    if had_config {
        fs::rename(tree.join(".config"), &old)?;
    }
    fs::write(tree.join(".config"), &base)?;
    fs::write(tree.join(".lab.config"), &fragment)?;
    fs::write(tree.join(".lab.lsmod"), &lsmod)?;
    let merge = || {
        run_in(
            tree,
            "sh",
            &[
                "scripts/kconfig/merge_config.sh",
                "-m",
                ".config",
                ".lab.config",
            ],
        )
    };
    merge()?;
    run_in(tree, "make", &["olddefconfig"])?;
    run_in(tree, "make", &["LSMOD=.lab.lsmod", "localmodconfig"])?;
    merge()?;
    run_in(tree, "make", &["olddefconfig"])?;
    let config = fs::read_to_string(tree.join(".config"))?;
    if had_config && fs::read_to_string(&old).is_ok_and(|o| o == config) {
        fs::rename(&old, tree.join(".config"))?;
    }
    let unmet = unmet_options(&fragment, &config);
    if !unmet.is_empty() {
        bail!(
            "lab kernel: the configuration of {} does not have {} (a dependency overrides lab/kernel/lab.config)",
            tree.display(),
            unmet.join(", ")
        );
    }
    fs::write(&stamp, inputs)?;
    Ok(())
}

/// Installs the built tree's image and modules under `install/K/`.
fn install(d: &Dirs, tree: &Path, k: Kernel, opts: &BuildOpts) -> Result<()> {
    let release = run_in(tree, "make", &["-s", "kernelrelease"])?
        .trim()
        .to_string();
    let out = d.install(k);
    if out.exists() {
        fs::remove_dir_all(&out)?;
    }
    fs::create_dir_all(out.join("boot"))?;
    make(
        tree,
        &[
            "modules_install".into(),
            format!("INSTALL_MOD_PATH={}", out.display()),
            "INSTALL_MOD_STRIP=1".into(),
            "DEPMOD=true".into(),
        ],
        opts,
    )?;
    // The build/source links point back into the tree (the initramfs
    // builder would walk it for modules).
    let modules = out.join("lib/modules").join(&release);
    for link in ["build", "source"] {
        let _ = fs::remove_file(modules.join(link));
    }
    fs::copy(
        tree.join("arch/x86/boot/bzImage"),
        out.join(format!("boot/vmlinuz-{release}")),
    )
    .context("lab kernel: copying bzImage")?;
    fs::write(out.join(".installed"), &release)?;
    eprintln!(
        "lab kernel: {} kernel {release} in {}",
        k.name(),
        out.display()
    );
    Ok(())
}

/// Copies a tree (`cp -a`), replacing `to`.
fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    if to.exists() {
        fs::remove_dir_all(to)?;
    }
    fs::create_dir_all(to.parent().expect("build/"))?;
    run_capture(Command::new("cp").arg("-a").arg(from).arg(to))
        .with_context(|| format!("lab kernel: copying {} to {}", from.display(), to.display()))?;
    Ok(())
}

/// The build tree (a copy of the source) with the source and
/// configuration of kernel `k`: the patches applied or reverted (the
/// applied diff is kept in `.lab-applied.patch` to revert it exactly),
/// then configured. `make` then rebuilds only what changed (the patched
/// files, the release string).
fn prepare_tree(lab: &Lab, stock: &Fetched, k: Kernel) -> Result<PathBuf> {
    let d = Dirs::new(lab);
    let version = stock_version(lab, stock)?;
    let src = source(&d, &version)?;
    let tree = d.tree();
    let stamp = tree.join(".lab-source");
    if !fs::read_to_string(&stamp).is_ok_and(|s| s == version) {
        eprintln!("lab kernel: copying the source to {}", tree.display());
        copy_tree(&src, &tree)?;
        fs::write(&stamp, &version)?;
    }
    let applied_file = tree.join(".lab-applied.patch");
    let applied = fs::read_to_string(&applied_file).unwrap_or_default();
    let wanted = match k {
        Kernel::Patched => {
            let mut diff = String::new();
            for p in patches(lab)? {
                diff.push_str(patch_diff(&fs::read_to_string(&p)?));
            }
            diff
        }
        _ => String::new(),
    };
    if applied != wanted {
        if !applied.is_empty() {
            eprintln!(
                "lab kernel: reverting the applied patches in {}",
                tree.display()
            );
            run_patch(&tree, &applied_file, true)?;
            fs::remove_file(&applied_file)?;
        }
        if !wanted.is_empty() {
            eprintln!(
                "lab kernel: applying lab/kernel/*.patch in {}",
                tree.display()
            );
            let next = tree.join(".lab-applying.patch");
            fs::write(&next, &wanted)?;
            run_patch(&tree, &next, false)?;
            fs::rename(&next, &applied_file)?;
        }
    }
    configure(lab, stock, &tree, k)?;
    Ok(tree)
}

/// `patch -p1` (or `-R`) of `file` in `tree`.
fn run_patch(tree: &Path, file: &Path, reverse: bool) -> Result<()> {
    let file = file.display().to_string();
    let mut args = vec!["-p1", "--batch", "-i", &file];
    args.push(if reverse { "--reverse" } else { "--forward" });
    run_in(tree, "patch", &args).map(|_| ())
}

/// Builds and installs the unpatched and the patched kernel, in one tree
/// (the second build recompiles only what the patches and the release
/// string touch).
pub fn build(lab: &Lab, stock: &Fetched, opts: &BuildOpts) -> Result<()> {
    for tool in [
        "make", "gcc", "flex", "bison", "bc", "perl", "patch", "flock", "xz",
    ] {
        if !crate::have_command(tool) {
            bail!(
                "lab kernel: `{tool}` not found (Debian: apt-get install build-essential flex bison bc libelf-dev libssl-dev xz-utils)"
            );
        }
    }
    let d = Dirs::new(lab);
    for k in [Kernel::Unpatched, Kernel::Patched] {
        let tree = prepare_tree(lab, stock, k)?;
        eprintln!(
            "lab kernel: building the {} kernel in {} (niced)",
            k.name(),
            tree.display()
        );
        make(&tree, &["bzImage".into(), "modules".into()], opts)?;
        install(&d, &tree, k, opts)?;
    }
    Ok(())
}

/// The lab with kernel `k` in place of the stock one (its image, modules
/// and release); an error naming the command to build it if it is not.
pub fn select(lab: &Lab, stock: Fetched, k: Kernel) -> Result<Fetched> {
    if k == Kernel::Stock {
        return Ok(stock);
    }
    let out = Dirs::new(lab).install(k);
    let release = fs::read_to_string(out.join(".installed")).map_err(|_| {
        anyhow::anyhow!(
            "lab: the {} kernel is not built (run `cargo xtask lab kernel`)",
            k.name()
        )
    })?;
    Ok(Fetched {
        kernel: out.join(format!("boot/vmlinuz-{release}")),
        modules: out.join("lib/modules").join(&release),
        release,
        ..stock
    })
}

/// Builds the external module in `lab/kernel/NAME/` against kernel `k`;
/// the `.ko`. For the stock kernel, whose build tree (the headers
/// package) the archive may no longer have, the same source is prepared
/// with the stock configuration and release (`modules_prepare`; the
/// kernel checks that `struct module` has its size); without the stock
/// symbol CRCs the module carries no symbol versions, which the stock
/// kernel accepts with a taint (CONFIG_MODULE_FORCE_LOAD).
pub fn external_module(
    lab: &Lab,
    stock: &Fetched,
    k: Kernel,
    name: &str,
    opts: &BuildOpts,
) -> Result<PathBuf> {
    let d = Dirs::new(lab);
    let src_dir = lab.repo.join("lab/kernel").join(name);
    let dir = d.root.join("modules").join(k.name()).join(name);
    copy_tree(&src_dir, &dir)?;
    let mut args = vec![format!("M={}", dir.display()), "modules".to_string()];
    let tree = match k {
        Kernel::Stock => {
            let version = stock_version(lab, stock)?;
            let src = source(&d, &version)?;
            let out = d.stock_prepared();
            let release = format!("KERNELRELEASE={}", stock.release);
            if !fs::read_to_string(out.join(".lab-prepared")).is_ok_and(|s| s == stock.release) {
                fs::create_dir_all(&out)?;
                fs::copy(
                    stock.root.join(format!("boot/config-{}", stock.release)),
                    out.join(".config"),
                )?;
                let o = format!("O={}", out.display());
                run_in(&src, "make", &[&o, "olddefconfig"])?;
                let stock_config =
                    fs::read_to_string(stock.root.join(format!("boot/config-{}", stock.release)))?;
                let changed =
                    changed_options(&stock_config, &fs::read_to_string(out.join(".config"))?);
                if !changed.is_empty() {
                    bail!(
                        "lab: this host's tools change the stock configuration ({}), so a module \
                         built here would not fit the stock kernel (pahole missing? Debian: \
                         apt-get install dwarves)",
                        changed.join(", ")
                    );
                }
                make(&src, &[o, release.clone(), "modules_prepare".into()], opts)?;
                fs::write(out.join(".lab-prepared"), &stock.release)?;
            }
            args.push(release);
            // Without the stock Module.symvers the module's __versions
            // would be empty, which 6.1 refuses ("no symbol version");
            // with no such section at all it is force-loaded.
            args.push("CONFIG_MODVERSIONS=".into());
            out
        }
        _ => {
            if !d.install(k).join(".installed").exists() {
                bail!(
                    "lab: the {} kernel is not built (run `cargo xtask lab kernel`)",
                    k.name()
                );
            }
            // The tree holds one variant at a time: switch it (an
            // incremental build) so the module gets this kernel's release.
            let tree = prepare_tree(lab, stock, k)?;
            make(&tree, &["bzImage".into(), "modules".into()], opts)?;
            tree
        }
    };
    make(&tree, &args, opts)?;
    let ko = dir.join(format!("{name}.ko"));
    if !ko.exists() {
        bail!(
            "lab: building {name} against the {} kernel made no {}",
            k.name(),
            ko.display()
        );
    }
    Ok(ko)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_to_source_package() {
        assert_eq!(major_minor("6.1.172-1").unwrap(), "6.1");
        assert_eq!(major_minor("6.12.9-1~bpo12+1").unwrap(), "6.12");
        assert!(major_minor("six").is_err());
    }

    #[test]
    fn host_only_options_are_not_changes() {
        let stock = "CONFIG_CC_VERSION_TEXT=\"gcc-12\"\nCONFIG_PAHOLE_VERSION=124\nCONFIG_A=y\nCONFIG_BTF=y\n";
        let here = "CONFIG_CC_VERSION_TEXT=\"gcc\"\nCONFIG_PAHOLE_VERSION=0\nCONFIG_A=y\nCONFIG_BUILD_SALT=\"\"\n";
        assert_eq!(changed_options(stock, here), ["CONFIG_BTF=n"]);
        assert!(changed_options(stock, stock).is_empty());
    }

    #[test]
    fn patch_diff_skips_the_message() {
        let p =
            "From 1\nSubject: x\n\nbody\n---\n a | 1 +\n\ndiff --git a/a b/a\n--- a/a\n+++ b/a\n";
        assert_eq!(patch_diff(p), "diff --git a/a b/a\n--- a/a\n+++ b/a\n");
        assert_eq!(patch_diff("--- a/a\n+++ b/a\n"), "--- a/a\n+++ b/a\n");
    }

    #[test]
    fn fragment_checks() {
        let fragment = "# a comment\nCONFIG_A=y\n# CONFIG_B is not set\nCONFIG_C=\"\"\n";
        assert_eq!(
            fragment_options(fragment),
            [
                ("CONFIG_A".to_string(), Some("y".to_string())),
                ("CONFIG_B".to_string(), None),
                ("CONFIG_C".to_string(), Some("\"\"".to_string())),
            ]
        );
        let config = "CONFIG_A=y\n# CONFIG_B is not set\nCONFIG_C=\"\"\n";
        assert!(unmet_options(fragment, config).is_empty());
        let config = "CONFIG_A=m\nCONFIG_B=y\nCONFIG_C=\"\"\n";
        assert_eq!(
            unmet_options(fragment, config),
            ["CONFIG_A=y", "CONFIG_B=n"]
        );
        // Absent counts as not set.
        assert!(unmet_options("# CONFIG_Z is not set\n", "CONFIG_A=y\n").is_empty());
    }
}
