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
//! - `lab kernel`: build the lab kernel from Debian's source of the stock
//!   kernel's version, unpatched and with `lab/kernel/*.patch`, for
//!   `run`/`test --kernel unpatched|patched` (the default stays `stock`).
//! - `lab indr-replay`: build the `lab/kernel/indr_replay` test module
//!   against each kernel and check, in the guest, that an indirect block
//!   callback registered late is replayed every bound block.
//! - `lab tdc`: the kernel's tc selftests (tdc) for HTB, flower, ingress,
//!   fq_codel and skbedit on each kernel.
//!
//! `cargo xtask soak --minutes M --circuits N` is the daemon's soak run on
//! the host (root; `soak.rs`).
//!
//! `cargo xtask api` records the public API of every library crate in
//! `api/<crate>.txt`; `cargo xtask api --check` fails when it differs
//! (`api.rs`).
//!
//! `cargo xtask package` packages every published crate and builds a
//! scratch crate outside the workspace against the `.crate` files
//! (`package.rs`); `cargo xtask deb` builds the Debian package and checks
//! what it holds (`deb.rs`).
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

mod api;
mod cpio;
mod deb;
mod fetch;
mod initramfs;
mod kernel;
#[cfg(test)]
mod modules;
mod package;
mod soak;
mod vm;

use kernel::Kernel;

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
    /// Package every published crate (`cargo package`), then build a
    /// scratch crate outside the workspace against the unpacked `.crate`
    /// files and run their packaged tests.
    Package(package::PackageArgs),
    /// Record the public API of every library crate in `api/<crate>.txt`
    /// (from rustdoc's JSON); with --check, fail when it differs from the
    /// committed listing.
    Api(api::ApiArgs),
    /// Build the Debian package (cargo-deb) from the release build and
    /// check what it holds: a stripped binary, its -dbgsym package, man
    /// pages, completions, the unit.
    Deb(deb::DebArgs),
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
    /// Build the unpatched and the patched lab kernel from Debian's source
    /// (into target/lab/kernel; takes long: both cores, niced).
    Kernel {
        #[command(flatten)]
        build: BuildArgs,
    },
    /// Check the replay of indirect block callbacks with the indr_replay
    /// test module on each kernel (built against each), and that all
    /// kernels replay the same blocks.
    IndrReplay {
        /// Kernels to check (repeatable; default: stock, unpatched, patched).
        #[arg(long = "kernel", value_enum)]
        kernels: Vec<Kernel>,
        /// HTB classes per TX queue in the test tree.
        #[arg(long, default_value_t = 40)]
        classes: u32,
        #[command(flatten)]
        build: BuildArgs,
    },
    /// Run the kernel's own tc selftests (tdc, from the lab kernel's
    /// source) for HTB, flower, ingress, fq_codel and skbedit on each
    /// kernel (needs the host's bash and Debian's /usr/bin/python3).
    Tdc {
        /// Kernels to run them on (repeatable; default: stock, unpatched, patched).
        #[arg(long = "kernel", value_enum)]
        kernels: Vec<Kernel>,
    },
}

#[derive(Args, Clone)]
struct BuildArgs {
    /// make -j (default: the number of CPUs).
    #[arg(long)]
    jobs: Option<u32>,
    /// Hold this lock file (flock) while make runs, in holds of at most 15
    /// minutes (e.g. a machine-wide measurement lock).
    #[arg(long)]
    lock: Option<PathBuf>,
}

impl BuildArgs {
    fn opts(&self) -> kernel::BuildOpts {
        kernel::BuildOpts {
            jobs: self.jobs.unwrap_or_else(|| {
                std::thread::available_parallelism().map_or(2, |n| n.get() as u32)
            }),
            lock: self.lock.clone(),
        }
    }
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
    /// The guest kernel: Debian's (`stock`), or one built by `lab kernel`.
    #[arg(long, value_enum, default_value_t = Kernel::Stock)]
    kernel: Kernel,
    /// Also pack and load this kernel module (e.g. `dummy`), with its
    /// dependencies. Repeatable.
    #[arg(long = "module", value_name = "NAME")]
    modules: Vec<String>,
    /// Also pack this host directory, at its own path (e.g. a Python's
    /// library for a script that needs one). Repeatable.
    #[arg(long = "tree", value_name = "DIR")]
    trees: Vec<PathBuf>,
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
/// With `tee`, the command's output is also written there.
fn run_in_guest(
    lab: &Lab,
    vm: &VmArgs,
    lqos: &Path,
    executables: BTreeMap<String, PathBuf>,
    command: String,
    tee: Option<PathBuf>,
) -> Result<i32> {
    let fetched = kernel::select(lab, fetch::fetch(lab)?, vm.kernel)?;
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
        modules: vm.modules.clone(),
        trees: vm
            .trees
            .iter()
            .map(|t| {
                std::fs::canonicalize(t).with_context(|| format!("lab run: --tree {}", t.display()))
            })
            .collect::<Result<_>>()?,
    };
    let bytes = initramfs::build(&spec).context("lab run: building the initramfs")?;
    let dir = vm::run_dir(&lab.dir)?;
    let initrd = dir.join("initrd.cpio");
    std::fs::write(&initrd, &bytes)
        .with_context(|| format!("lab run: writing {}", initrd.display()))?;
    let console = dir.join("console.log");
    eprintln!(
        "lab: booting {} {} ({}, {} MiB, {} vCPUs{}; initramfs {} MiB; kernel log {})",
        vm.kernel.name(),
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
        tee,
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

/// The guest script of `lab test`: every binary in turn (its ignored
/// tests too: those are the ones that need what the lab's kernel has and
/// most hosts' lack), a summary, and failure if any failed.
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
            "echo '== {name}'\ncd {}\nstart=$(date +%s)\nif {guest} --test-threads=1 --include-ignored {}; then echo \"== {name}: ok in $(( $(date +%s) - start )) s\"; else failed=\"$failed {name}\"; echo '== {name}: FAILED'; fi\n",
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
            run_in_guest(
                &lab,
                &vm,
                &lqos,
                extra_executables(&exe)?,
                cmd.join(" "),
                None,
            )
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
                None,
            )
        }
        LabCmd::Kernel { build } => {
            let stock = fetch::fetch(&lab)?;
            kernel::build(&lab, &stock, &build.opts())?;
            Ok(0)
        }
        LabCmd::IndrReplay {
            mut kernels,
            classes,
            build,
        } => {
            if kernels.is_empty() {
                kernels = vec![Kernel::Stock, Kernel::Unpatched, Kernel::Patched];
            }
            indr_replay(&lab, &kernels, classes, &build.opts())
        }
        LabCmd::Tdc { mut kernels } => {
            if kernels.is_empty() {
                kernels = vec![Kernel::Stock, Kernel::Unpatched, Kernel::Patched];
            }
            tdc(&lab, &kernels)
        }
    }
}

/// `lab tdc`: lab/kernel/tdc.sh on each kernel; 0 when all passed.
fn tdc(lab: &Lab, kernels: &[Kernel]) -> Result<i32> {
    let stock = fetch::fetch(lab)?;
    let lqos = build_lqos(lab)?;
    let tests = kernel::stock_source(lab, &stock)?.join("tools/testing/selftests/tc-testing");
    // Debian's python (not a pyenv shim): the binary and its library.
    let python = std::fs::canonicalize("/usr/bin/python3")
        .context("lab tdc: no /usr/bin/python3 (Debian: apt-get install python3)")?;
    let version = python
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| n.starts_with("python3."))
        .with_context(|| format!("lab tdc: {} is not python3.X", python.display()))?
        .to_string();
    let library = PathBuf::from("/usr/lib").join(&version);
    let bash = fetch::which("bash").context("lab tdc: no bash on the host")?;
    let mut results = vec![];
    for &k in kernels {
        let vm = VmArgs {
            nics: true,
            mem: 2048,
            cpus: 2,
            timeout: 3600,
            accel: "tcg".into(),
            kernel: k,
            modules: vec!["dummy".into()],
            trees: vec![library.clone(), tests.clone()],
        };
        let exes = extra_executables(&[python.clone(), bash.clone()])?;
        let log = lab.dir.join(format!("kernel/tdc-{}.log", k.name()));
        let rc = run_in_guest(
            lab,
            &vm,
            &lqos,
            exes,
            format!(
                "sh lab/kernel/tdc.sh {}",
                quote(&tests.display().to_string())
            ),
            Some(log.clone()),
        )?;
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let summary = text
            .lines()
            .rfind(|l| l.starts_with("tdc: ") && l.contains(" ok, "))
            .unwrap_or("tdc: no summary")
            .to_string();
        results.push((k, rc, summary));
    }
    for (k, rc, summary) in &results {
        println!(
            "lab tdc: {}: {summary}{}",
            k.name(),
            if *rc == 0 { "" } else { " (FAILED)" }
        );
    }
    Ok(if results.iter().all(|r| r.1 == 0) {
        0
    } else {
        1
    })
}

/// `lab indr-replay`: the module built against and run on each kernel;
/// 0 when every run passed and all replayed the same blocks.
fn indr_replay(
    lab: &Lab,
    kernels: &[Kernel],
    classes: u32,
    opts: &kernel::BuildOpts,
) -> Result<i32> {
    let stock = fetch::fetch(lab)?;
    let lqos = build_lqos(lab)?;
    let mut transcripts: Vec<(Kernel, i32, Vec<String>)> = vec![];
    for &k in kernels {
        let ko = kernel::external_module(lab, &stock, k, "indr_replay", opts)?;
        let mut exes = BTreeMap::new();
        exes.insert(format!("{}/indr_replay.ko", initramfs::LAB), ko);
        let vm = VmArgs {
            nics: true,
            mem: 2048,
            cpus: 2,
            timeout: 1800,
            accel: "tcg".into(),
            kernel: k,
            modules: vec![],
            trees: vec![],
        };
        let log = lab.dir.join(format!("kernel/indr-replay-{}.log", k.name()));
        let rc = run_in_guest(
            lab,
            &vm,
            &lqos,
            exes,
            format!(
                "sh lab/kernel/indr-replay.sh /{}/indr_replay.ko {classes}",
                initramfs::LAB
            ),
            Some(log.clone()),
        )?;
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        transcripts.push((k, rc, replay_lines(&text)));
    }
    let mut ok = true;
    for (k, rc, _) in &transcripts {
        println!(
            "indr-replay: {}: {}",
            k.name(),
            if *rc == 0 { "ok" } else { "FAILED" }
        );
        ok &= *rc == 0;
    }
    if let Some((first, _, lines)) = transcripts.first() {
        for (k, _, other) in &transcripts[1..] {
            if other != lines {
                ok = false;
                println!(
                    "indr-replay: {} replayed other blocks than {}:
  {}
  vs
  {}",
                    k.name(),
                    first.name(),
                    other.join("\n  "),
                    lines.join("\n  ")
                );
            }
        }
        if ok && transcripts.len() > 1 {
            println!("indr-replay: all kernels replayed the same blocks at every step");
        }
    }
    Ok(if ok { 0 } else { 1 })
}

/// The lines of an indr-replay transcript that must agree across kernels.
fn replay_lines(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with("replay:") || l.starts_with("live:"))
        .map(str::to_string)
        .collect()
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.task {
        Task::Lab { cmd } => lab(cmd),
        Task::Soak(a) => Lab::new().and_then(|l| soak::soak(&l, &a)),
        Task::Package(a) => Lab::new().and_then(|l| package::package(&l, &a)),
        Task::Deb(a) => Lab::new().and_then(|l| deb::deb(&l, &a)),
        Task::Api(a) => Lab::new().and_then(|l| api::api(&l.repo, &a)),
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

    /// The lab runs the tests a host's `cargo test` ignores for lack of
    /// cake, fq_codel or the classifier, requiring every feature.
    #[test]
    fn the_lab_runs_the_ignored_live_tests() {
        let s = test_script(
            &[(
                "live_leaves".into(),
                "/lab/tests/live_leaves".into(),
                PathBuf::from("/r"),
            )],
            &[],
        );
        assert!(
            s.contains("/lab/tests/live_leaves --test-threads=1 --include-ignored "),
            "{s}"
        );
        assert!(
            s.contains("LQOS_REQUIRE_CAKE=1 LQOS_REQUIRE_CLASSIFIER=1"),
            "{s}"
        );
    }

    #[test]
    fn quoting() {
        assert_eq!(quote("--exact"), "--exact");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), "'it'\\''s'");
    }
}
