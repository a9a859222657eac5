//! `cargo xtask`: repository tasks.
//!
//! `cargo xtask lab ...` is the stock-kernel lab: a Debian cloud kernel
//! (cake, fq_codel, flower, skbedit, virtio-net) booted under qemu with
//! TCG from an initramfs built on the fly, so live tests and benchmarks can
//! run against the kernel lqos's users have, on any Linux host with apt.
//!
//! - `lab fetch`: download and unpack the kernel, qemu and busybox once
//!   into `target/lab/` (idempotent).
//! - `lab run [--nics] [--mem MIB] [--cpus N] -- CMD...`: boot, run CMD
//!   as root with `sh -c` (words joined by spaces, as ssh does), stream its
//!   output, exit with its status. The release `lqos` is on PATH, the
//!   repository's test data at its host path (also the working directory).
//! - `lab test`: build the live test binaries, run them all in the guest
//!   (with `--nics`) with cake, the classifier and netns required.
//!
//! `cargo xtask soak --minutes M --circuits N` is the daemon's soak run on
//! the host (root; `soak.rs`).
//!
//! Exit status: the guest command's, or 125 when the lab itself fails
//! (no qemu, download failed, guest panicked, timeout); the message names
//! the step.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};

mod cpio;
mod fetch;
mod initramfs;
mod soak;
mod vm;

/// Exit status when the lab itself fails (as `git bisect run` and
/// `docker run` use it: not a status the guest command could mean).
const LAB_FAILED: u8 = 125;

#[derive(Parser)]
#[command(name = "cargo xtask", about = "lqos repository tasks")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// The stock-kernel lab (Debian cloud kernel under qemu/TCG).
    Lab {
        #[command(subcommand)]
        cmd: LabCmd,
    },
    /// The daemon's soak run on the host (root): `lqos watch` in a scratch
    /// netns under random edits for M minutes, `lqos verify` after each.
    Soak(soak::SoakArgs),
}

#[derive(Subcommand)]
enum LabCmd {
    /// Download and unpack kernel, qemu, busybox into target/lab (once).
    Fetch,
    /// Boot the guest and run a command in it (as `ssh host CMD...` would).
    Run {
        #[command(flatten)]
        vm: VmArgs,
        /// Don't build the release `lqos` first (use the one in target/release).
        #[arg(long)]
        no_build: bool,
        /// Also pack this host executable (with its shared libraries) as
        /// /lab/bin/NAME, on the guest's PATH (e.g. a release example:
        /// `--exe target/release/examples/lab_traffic`). Repeatable.
        #[arg(long, value_name = "PATH")]
        exe: Vec<PathBuf>,
        /// The command: its words are joined by spaces and run by `sh -c`.
        #[arg(last = true, required = true)]
        cmd: Vec<String>,
    },
    /// Build every live test binary and run them all in the guest (with --nics).
    Test {
        #[command(flatten)]
        vm: VmArgs,
        /// Only test binaries whose name contains this.
        #[arg(long)]
        only: Option<String>,
        /// Extra arguments for every test binary (e.g. a test name filter).
        #[arg(last = true)]
        test_args: Vec<String>,
    },
}

#[derive(Args, Clone)]
struct VmArgs {
    /// Two virtio-net NICs ens19/ens20 with 16 queue pairs (taps in a private host netns).
    #[arg(long)]
    nics: bool,
    /// Guest RAM in MiB (cake needs ~1.1 MiB per leaf; see docs/lab.md).
    #[arg(long, default_value_t = 2048)]
    mem: u32,
    /// Guest vCPUs.
    #[arg(long, default_value_t = 2)]
    cpus: u32,
    /// Kill the guest after this many seconds.
    #[arg(long, default_value_t = 3600)]
    timeout: u64,
    /// qemu accelerator: `tcg` works everywhere; `kvm` only where /dev/kvm
    /// is real hardware virtualisation (not this project's PVM machines).
    #[arg(long, default_value = "tcg", value_parser = ["tcg", "kvm"])]
    accel: String,
}

/// Paths of the lab.
#[derive(Debug, Clone)]
pub struct Lab {
    /// The repository (workspace) root.
    pub repo: PathBuf,
    /// `target/lab`.
    pub dir: PathBuf,
}

impl Lab {
    fn new() -> Result<Lab> {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .context("xtask has no parent directory")?
            .to_path_buf();
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| repo.join("target"));
        let dir = target.join("lab");
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(Lab { repo, dir })
    }

    fn target(&self) -> PathBuf {
        self.dir.parent().expect("target/lab").to_path_buf()
    }
}

/// Whether `name` is on PATH.
pub fn have_command(name: &str) -> bool {
    fetch::which(name).is_some()
}

/// Runs a command; its stdout, or an error with its stderr.
pub fn run_capture(cmd: &mut Command) -> Result<String> {
    let out = cmd
        .output()
        .with_context(|| format!("running {:?}", cmd.get_program()))?;
    if !out.status.success() {
        bail!(
            "{:?} {}: {}",
            cmd.get_program(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// `cargo build --release -p lqos-cli`; the binary's path.
fn build_lqos(lab: &Lab) -> Result<PathBuf> {
    let st = cargo()
        .args(["build", "--release", "-p", "lqos-cli"])
        .current_dir(&lab.repo)
        .status()
        .context("lab: running cargo build")?;
    if !st.success() {
        bail!("lab: `cargo build --release -p lqos-cli` failed");
    }
    Ok(lab.target().join("release/lqos"))
}

/// Builds the initramfs for `command` and boots it; the command's status.
fn run_in_guest(
    lab: &Lab,
    vm: &VmArgs,
    lqos: &Path,
    executables: BTreeMap<String, PathBuf>,
    command: String,
) -> Result<i32> {
    let fetched = fetch::fetch(lab)?;
    let marker = format!(
        "@@lqos-lab-exit-{}-{}@@",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    );
    let spec = initramfs::Spec {
        fetched: &fetched,
        repo: &lab.repo,
        lqos,
        executables,
        command,
        nics: vm.nics,
        marker: marker.clone(),
    };
    let bytes = initramfs::build(&spec).context("lab run: building the initramfs")?;
    let dir = vm::run_dir(&lab.dir)?;
    let initrd = dir.join("initrd.cpio");
    std::fs::write(&initrd, &bytes)
        .with_context(|| format!("lab run: writing {}", initrd.display()))?;
    let console = dir.join("console.log");
    eprintln!(
        "lab: booting {} ({}, {} MiB, {} vCPUs{}; initramfs {} MiB; kernel log {})",
        fetched.release,
        vm.accel.to_uppercase(),
        vm.mem,
        vm.cpus,
        if vm.nics {
            ", virtio NICs ens19/ens20"
        } else {
            ""
        },
        bytes.len() >> 20,
        console.display()
    );
    let boot = vm::Boot {
        accel: vm.accel.clone(),
        mem_mib: vm.mem,
        cpus: vm.cpus,
        nics: vm.nics,
        timeout: Duration::from_secs(vm.timeout),
    };
    let rc = vm::boot(&fetched, &initrd, &console, &boot, &marker);
    let _ = std::fs::remove_file(&initrd);
    // The kernel log stays on lab failures (the error names it).
    if rc.is_ok() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    rc
}

/// `--exe` paths as guest path (`lab/bin/NAME`) -> host file.
fn extra_executables(paths: &[PathBuf]) -> Result<BTreeMap<String, PathBuf>> {
    let mut out = BTreeMap::new();
    for p in paths {
        let name = p
            .file_name()
            .and_then(|n| n.to_str())
            .with_context(|| format!("lab run: --exe {}: no file name", p.display()))?;
        if !p.is_file() {
            bail!(
                "lab run: --exe {}: no such file (build it first)",
                p.display()
            );
        }
        if name == "lqos" {
            bail!(
                "lab run: --exe {}: the guest's lqos is the release build",
                p.display()
            );
        }
        out.insert(format!("{}/bin/{name}", initramfs::LAB), p.clone());
    }
    Ok(out)
}

/// Test binaries whose name marks them live (`live_*`, `*_live`).
fn is_live_test(name: &str) -> bool {
    name.starts_with("live_") || name.ends_with("_live")
}

/// `cargo test --no-run --message-format=json` for the workspace; the live
/// test executables by target name, with their crate directories.
fn build_live_tests(lab: &Lab) -> Result<Vec<(String, PathBuf, PathBuf)>> {
    let out = cargo()
        .args([
            "test",
            "--workspace",
            "--tests",
            "--no-run",
            "--message-format=json",
        ])
        .current_dir(&lab.repo)
        .stderr(std::process::Stdio::inherit())
        .output()
        .context("lab test: running cargo test --no-run")?;
    if !out.status.success() {
        bail!("lab test: building the test binaries failed");
    }
    let mut found = vec![];
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if v["reason"] != "compiler-artifact" {
            continue;
        }
        let (Some(name), Some(exe), Some(manifest)) = (
            v["target"]["name"].as_str(),
            v["executable"].as_str(),
            v["manifest_path"].as_str(),
        ) else {
            continue;
        };
        let is_test = v["target"]["kind"]
            .as_array()
            .is_some_and(|k| k.iter().any(|x| x == "test"));
        if is_test && is_live_test(name) {
            let dir = Path::new(manifest)
                .parent()
                .unwrap_or(&lab.repo)
                .to_path_buf();
            found.push((name.to_string(), PathBuf::from(exe), dir));
        }
    }
    found.sort();
    if found.is_empty() {
        bail!("lab test: cargo built no live test binaries (live_*, *_live)");
    }
    Ok(found)
}

/// Shell-quotes one word.
fn quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// The guest script of `lab test`: every binary in turn, a summary, and
/// failure if any failed.
fn test_script(tests: &[(String, String, PathBuf)], test_args: &[String]) -> String {
    let args: Vec<String> = test_args.iter().map(|a| quote(a)).collect();
    let mut s = String::from(
        "export LQOS_REQUIRE_NETNS=1 LQOS_REQUIRE_CAKE=1 LQOS_REQUIRE_CLASSIFIER=1 RUST_BACKTRACE=1\n\
         export LQOS_LIVE_IFACES=ens19,ens20\n\
         failed=''\n\
         echo \"lab test: $(uname -r), $(nproc) vCPUs, $(grep MemTotal /proc/meminfo)\"\n",
    );
    for (name, guest, dir) in tests {
        s.push_str(&format!(
            "echo '== {name}'\ncd {}\nstart=$(date +%s)\nif {guest} --test-threads=1 {}; then echo \"== {name}: ok in $(( $(date +%s) - start )) s\"; else failed=\"$failed {name}\"; echo '== {name}: FAILED'; fi\n",
            quote(&dir.display().to_string()),
            args.join(" ")
        ));
    }
    s.push_str(
        "if [ -n \"$failed\" ]; then echo \"lab test: failed:$failed\"; exit 1; fi\necho 'lab test: all live tests passed'\n",
    );
    s
}

fn lab(cmd: LabCmd) -> Result<i32> {
    let lab = Lab::new()?;
    match cmd {
        LabCmd::Fetch => {
            let f = fetch::fetch(&lab)?;
            println!(
                "lab: kernel {} and qemu ready under {}",
                f.release,
                f.root.display()
            );
            Ok(0)
        }
        LabCmd::Run {
            vm,
            no_build,
            exe,
            cmd,
        } => {
            fetch::fetch(&lab)?;
            let lqos = if no_build {
                lab.target().join("release/lqos")
            } else {
                build_lqos(&lab)?
            };
            if !lqos.exists() {
                bail!(
                    "lab run: {} does not exist (build it or drop --no-build)",
                    lqos.display()
                );
            }
            run_in_guest(&lab, &vm, &lqos, extra_executables(&exe)?, cmd.join(" "))
        }
        LabCmd::Test {
            mut vm,
            only,
            test_args,
        } => {
            vm.nics = true;
            fetch::fetch(&lab)?;
            let lqos = build_lqos(&lab)?;
            let tests: Vec<_> = build_live_tests(&lab)?
                .into_iter()
                .filter(|(n, _, _)| only.as_deref().is_none_or(|o| n.contains(o)))
                .collect();
            let mut exes = BTreeMap::new();
            let mut script_tests = vec![];
            for (name, exe, dir) in tests {
                let guest = format!("/{}/tests/{name}", initramfs::LAB);
                exes.insert(guest.trim_start_matches('/').to_string(), exe);
                script_tests.push((name, guest, dir));
            }
            eprintln!(
                "lab test: {} live test binaries: {}",
                script_tests.len(),
                script_tests
                    .iter()
                    .map(|t| t.0.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            run_in_guest(
                &lab,
                &vm,
                &lqos,
                exes,
                test_script(&script_tests, &test_args),
            )
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.task {
        Task::Lab { cmd } => lab(cmd),
        Task::Soak(a) => Lab::new().and_then(|l| soak::soak(&l, &a)),
    };
    match result {
        Ok(rc) => ExitCode::from(rc.clamp(0, 255) as u8),
        Err(e) => {
            eprintln!("xtask: error: {e:#}");
            ExitCode::from(LAB_FAILED)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_test_names() {
        assert!(is_live_test("live_leaves"));
        assert!(is_live_test("netlink_live"));
        assert!(!is_live_test("netlink_golden"));
    }

    #[test]
    fn quoting() {
        assert_eq!(quote("--exact"), "--exact");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), "'it'\\''s'");
    }
}
