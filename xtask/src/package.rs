//! `cargo xtask package`: the crates as a registry would get them.
//!
//! 1. `cargo package` of every workspace member that is not `publish =
//!    false` (from `cargo metadata`, so a new crate is covered when it is
//!    added): cargo checks the manifests and builds each `.crate` on its own,
//!    the workspace dependencies coming from a temporary local registry of
//!    the other `.crate` files (what `cargo publish --dry-run` checks).
//! 2. The `.crate` files unpacked under `target/package-check/crates/`,
//!    and a scratch workspace in `target/package-check/` (outside the
//!    repository's workspace, its own `[workspace]`) whose crate depends on
//!    them through `[patch.crates-io]`, as a tool would depend on the
//!    published crates. Its `main` (`xtask/package-check/main.rs`) reads the
//!    files `lqos gen` wrote, plans them with `lqos-tc`, renders LibreQoS's
//!    `linux_tc.txt` and loads the plan into `lqos-apply`'s recording
//!    kernel; the text must be byte for byte what the workspace's `lqos
//!    plan` writes for the same files.
//! 3. The packaged tests of the pure crates (`lqos-model`, `lqos-tc`) run
//!    from the unpacked sources, so a test that reads a file the package
//!    does not ship fails here; the other crates' packaged tests are
//!    type-checked (`--all-tests` runs them: their live tests need root).

use std::process::Command;
use std::time::Instant;

use anyhow::{bail, ensure, Context, Result};
use clap::Args;

/// The options of `cargo xtask package`.
#[derive(Args, Clone)]
pub struct PackageArgs {
    /// Circuits of the `lqos gen` network the scratch crate plans.
    #[arg(long, default_value_t = 2000)]
    circuits: usize,
    /// Also run (not only type-check) the packaged tests of the crates
    /// that touch the kernel (their live tests need root).
    #[arg(long)]
    all_tests: bool,
}

/// The crates whose packaged tests always run: pure, quick, no root.
const PURE: [&str; 2] = ["lqos-model", "lqos-tc"];

/// A workspace member that is published.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Member {
    name: String,
    version: String,
    /// It has a library target (a scratch crate can depend on it).
    lib: bool,
    /// Its features (the packaged tests are built with all of them).
    features: Vec<String>,
}

/// The published members in `cargo metadata`'s JSON, in workspace order.
fn publishable(metadata: &serde_json::Value) -> Result<Vec<Member>> {
    let members: Vec<&str> = metadata["workspace_members"]
        .as_array()
        .context("cargo metadata: no workspace_members")?
        .iter()
        .filter_map(|m| m.as_str())
        .collect();
    let mut out = Vec::new();
    for id in members {
        let p = metadata["packages"]
            .as_array()
            .context("cargo metadata: no packages")?
            .iter()
            .find(|p| p["id"].as_str() == Some(id))
            .with_context(|| format!("cargo metadata: no package {id}"))?;
        // `publish = false` is `"publish": []`; null means any registry.
        if p["publish"].as_array().is_some_and(|r| r.is_empty()) {
            continue;
        }
        let kinds = |k: &str| {
            p["targets"].as_array().is_some_and(|ts| {
                ts.iter().any(|t| {
                    t["kind"]
                        .as_array()
                        .is_some_and(|ks| ks.iter().any(|x| x.as_str() == Some(k)))
                })
            })
        };
        let mut features: Vec<String> = p["features"]
            .as_object()
            .map(|f| f.keys().filter(|k| *k != "default").cloned().collect())
            .unwrap_or_default();
        features.sort();
        out.push(Member {
            name: p["name"].as_str().context("package without a name")?.into(),
            version: p["version"]
                .as_str()
                .context("package without a version")?
                .into(),
            lib: kinds("lib"),
            features,
        });
    }
    Ok(out)
}

/// The scratch workspace's manifest: a crate depending on every published
/// library, each patched to its unpacked `.crate`, and every unpacked crate
/// a member (so its packaged tests can run there).
fn scratch_manifest(members: &[Member]) -> String {
    let mut deps = String::new();
    let mut patch = String::new();
    for m in members {
        let dir = format!("crates/{}-{}", m.name, m.version);
        if m.lib {
            deps += &format!("{} = \"={}\"\n", m.name, m.version);
        }
        patch += &format!("{} = {{ path = \"{dir}\" }}\n", m.name);
    }
    format!(
        "# Written by `cargo xtask package`: the published crates, unpacked from\n\
         # their .crate files, used as a tool outside the lqos workspace would.\n\
         [package]\n\
         name = \"lqos-package-check\"\n\
         version = \"0.0.0\"\n\
         edition = \"2021\"\n\
         publish = false\n\n\
         [[bin]]\n\
         name = \"lqos-package-check\"\n\
         path = \"main.rs\"\n\n\
         [dependencies]\n{deps}\n\
         [patch.crates-io]\n{patch}\n\
         [workspace]\n\
         members = [\".\", \"crates/*\"]\n\
         resolver = \"2\"\n"
    )
}

/// Runs `cmd` (echoed first); fails unless it succeeds.
fn run(cmd: &mut Command) -> Result<()> {
    eprintln!("+ {}", show(cmd));
    let st = cmd
        .status()
        .with_context(|| format!("running {}", show(cmd)))?;
    ensure!(st.success(), "`{}` failed ({st})", show(cmd));
    Ok(())
}

fn show(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// Removes the copies of `members` that an earlier `cargo package`
/// unpacked under `$CARGO_HOME/registry/src/` for its temporary local
/// registry. Cargo unpacks a `.crate` there only once per name and
/// version (it keeps a `.cargo-ok` marker), so without this a second run
/// in the same directory verifies against the sources of the first.
/// Copies from crates.io's index (`index.*` directories) are left alone.
fn forget_unpacked(members: &[Member]) -> Result<()> {
    let home = match std::env::var_os("CARGO_HOME") {
        Some(h) => std::path::PathBuf::from(h),
        None => match std::env::var_os("HOME") {
            Some(h) => std::path::PathBuf::from(h).join(".cargo"),
            None => return Ok(()),
        },
    };
    let Ok(sources) = std::fs::read_dir(home.join("registry").join("src")) else {
        return Ok(());
    };
    for source in sources.flatten() {
        if source.file_name().to_string_lossy().starts_with("index.") {
            continue;
        }
        for m in members {
            let dir = source.path().join(format!("{}-{}", m.name, m.version));
            if dir.exists() {
                std::fs::remove_dir_all(&dir)
                    .with_context(|| format!("removing {}", dir.display()))?;
            }
        }
    }
    Ok(())
}

/// Runs `cargo xtask package`; 0 when every check passed.
pub fn package(lab: &super::Lab, a: &PackageArgs) -> Result<i32> {
    let start = Instant::now();
    let repo = &lab.repo;
    let target = lab.target();
    let metadata = super::run_capture(
        super::cargo()
            .args(["metadata", "--no-deps", "--format-version", "1"])
            .current_dir(repo),
    )?;
    let metadata: serde_json::Value =
        serde_json::from_str(&metadata).context("parsing cargo metadata")?;
    let members = publishable(&metadata)?;
    ensure!(!members.is_empty(), "no published workspace member");
    let names: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
    eprintln!("package: {}", names.join(", "));

    forget_unpacked(&members)?;

    // 1. Package and verify (each crate built from its .crate on its own).
    let mut cmd = super::cargo();
    // --allow-dirty: the check is of the working tree, committed or not.
    cmd.args(["package", "--locked", "--allow-dirty"])
        .current_dir(repo);
    for m in &members {
        cmd.args(["-p", &m.name]);
    }
    run(&mut cmd)?;
    let packaged = Instant::now();

    // 2. Unpack them into the scratch workspace.
    let check = target.join("package-check");
    let crates = check.join("crates");
    if crates.exists() {
        std::fs::remove_dir_all(&crates)
            .with_context(|| format!("removing {}", crates.display()))?;
    }
    std::fs::create_dir_all(&crates).with_context(|| format!("creating {}", crates.display()))?;
    for m in &members {
        let file = target
            .join("package")
            .join(format!("{}-{}.crate", m.name, m.version));
        run(Command::new("tar")
            .arg("-xzf")
            .arg(&file)
            .arg("-C")
            .arg(&crates))?;
    }
    std::fs::write(check.join("Cargo.toml"), scratch_manifest(&members))?;
    std::fs::write(
        check.join("main.rs"),
        include_str!("../package-check/main.rs"),
    )?;
    // The versions the workspace was tested with (cargo adds the rest).
    std::fs::copy(repo.join("Cargo.lock"), check.join("Cargo.lock"))
        .context("copying Cargo.lock")?;
    // The workspace's target directory: the registry crates built for its
    // tests are reused (the unpacked crates are other packages to cargo);
    // cargo links each binary back when the workspace builds it again.
    let scratch = || {
        let mut c = super::cargo();
        c.current_dir(&check).env("CARGO_TARGET_DIR", &target);
        c
    };

    // The workspace's `lqos gen` and `lqos plan`: what the packages must reproduce.
    run(super::cargo()
        .args(["build", "-p", "lqos-cli", "--bin", "lqos"])
        .current_dir(repo))?;
    let lqos = target.join("debug/lqos");
    let net = check.join("net");
    if net.exists() {
        std::fs::remove_dir_all(&net)?;
    }
    run(Command::new(&lqos)
        .args(["gen", "--circuits", &a.circuits.to_string(), "--out"])
        .arg(&net))?;
    run(Command::new(&lqos)
        .args(["plan", "--out", "plan"])
        .current_dir(&net))?;

    // 3. The scratch crate, then the packaged tests.
    let out = net.join("packaged_linux_tc.txt");
    run(scratch()
        .args(["run", "-p", "lqos-package-check", "--"])
        .arg(&net)
        .arg(&out))?;
    let want = std::fs::read(net.join("plan/linux_tc.txt"))?;
    let got = std::fs::read(&out)?;
    if want != got {
        bail!(
            "the packaged crates plan {} differently from `lqos plan` ({} and {} bytes): diff {} {}",
            net.display(),
            got.len(),
            want.len(),
            out.display(),
            net.join("plan/linux_tc.txt").display()
        );
    }
    eprintln!(
        "package: the packaged crates render the same linux_tc.txt as `lqos plan` ({} bytes)",
        want.len()
    );
    let built = Instant::now();

    let mut pure = scratch();
    pure.arg("test");
    let mut rest = scratch();
    if a.all_tests {
        rest.arg("test");
    } else {
        // Type-checked, not built: a test that includes a file the package
        // lacks fails here, in a fraction of the time a build takes.
        rest.args(["check", "--tests"]);
    }
    let (mut n_pure, mut n_rest) = (0, 0);
    for m in &members {
        let (cmd, n) = if PURE.contains(&m.name.as_str()) {
            (&mut pure, &mut n_pure)
        } else {
            (&mut rest, &mut n_rest)
        };
        cmd.args(["-p", &m.name]);
        for f in &m.features {
            cmd.arg("--features").arg(format!("{}/{f}", m.name));
        }
        *n += 1;
    }
    if n_pure > 0 {
        run(&mut pure)?;
    }
    if n_rest > 0 {
        run(&mut rest)?;
    }
    eprintln!(
        "package: done in {:.0?} (cargo package {:.0?}, scratch crate {:.0?}, packaged tests {:.0?})",
        start.elapsed(),
        packaged - start,
        built - packaged,
        built.elapsed()
    );
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metadata() -> serde_json::Value {
        serde_json::json!({
            "workspace_members": ["a 0.1.0", "cli 0.1.0", "benches 0.1.0"],
            "packages": [
                {"id": "benches 0.1.0", "name": "benches", "version": "0.1.0", "publish": [],
                 "features": {}, "targets": [{"kind": ["lib"]}]},
                {"id": "a 0.1.0", "name": "a", "version": "0.1.0", "publish": null,
                 "features": {"test-util": [], "default": []}, "targets": [{"kind": ["lib"]}, {"kind": ["test"]}]},
                {"id": "cli 0.1.0", "name": "cli", "version": "0.1.0", "publish": null,
                 "features": {}, "targets": [{"kind": ["bin"]}]}
            ]
        })
    }

    #[test]
    fn publish_false_members_are_left_out() {
        let m = publishable(&metadata()).unwrap();
        assert_eq!(
            m,
            [
                Member {
                    name: "a".into(),
                    version: "0.1.0".into(),
                    lib: true,
                    features: vec!["test-util".into()],
                },
                Member {
                    name: "cli".into(),
                    version: "0.1.0".into(),
                    lib: false,
                    features: vec![],
                },
            ]
        );
    }

    #[test]
    fn the_scratch_crate_depends_on_libraries_and_patches_all() {
        let text = scratch_manifest(&publishable(&metadata()).unwrap());
        let toml: toml::Table = text.parse().unwrap();
        assert_eq!(toml["dependencies"]["a"].as_str(), Some("=0.1.0"));
        assert!(toml["dependencies"].get("cli").is_none());
        assert_eq!(
            toml["patch"]["crates-io"]["cli"]["path"].as_str(),
            Some("crates/cli-0.1.0")
        );
    }
}
