//! `cargo xtask deb`: builds the Debian package with cargo-deb (metadata
//! in `lqos-cli/Cargo.toml`) from the release build and checks what it
//! holds: `/usr/bin/lqos` stripped (no `.debug_*` sections, no symbol
//! table) and under a size limit, and it runs; its debug information in
//! the `lqos-dbgsym` package under the binary's build id; every man page,
//! the three shell completions and the systemd unit as `packaging/` has
//! them; `Depends` naming iproute2. Needs `cargo-deb` (`cargo install
//! cargo-deb --version 3.8.0 --locked`), `dpkg-deb` and binutils'
//! `readelf`.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, ensure, Context, Result};
use clap::Args;

/// The options of `cargo xtask deb`.
#[derive(Args, Clone)]
pub struct DebArgs {
    /// Package the release build as it is (no `cargo build --release -p
    /// lqos-cli` first).
    #[arg(long)]
    no_build: bool,
    /// Largest `/usr/bin/lqos` accepted, in MiB.
    #[arg(long, default_value_t = 16)]
    max_mib: u64,
}

/// The `.deb` and `.ddeb` paths in cargo-deb's output (one a line).
fn packages(stdout: &str) -> Result<(PathBuf, PathBuf)> {
    let mut deb = None;
    let mut ddeb = None;
    for line in stdout.lines().map(str::trim) {
        if line.ends_with(".ddeb") {
            ddeb = Some(PathBuf::from(line));
        } else if line.ends_with(".deb") {
            deb = Some(PathBuf::from(line));
        }
    }
    match (deb, ddeb) {
        (Some(d), Some(s)) => Ok((d, s)),
        (None, _) => bail!("cargo deb printed no .deb path:\n{stdout}"),
        (_, None) => bail!(
            "cargo deb made no -dbgsym package (is `dbgsym = true` in \
             lqos-cli's [package.metadata.deb]?):\n{stdout}"
        ),
    }
}

/// Section names of an ELF file (`readelf -S -W`).
fn sections(file: &Path) -> Result<Vec<String>> {
    let out = super::run_capture(Command::new("readelf").arg("-S").arg("-W").arg(file))?;
    Ok(out
        .lines()
        .filter_map(|l| {
            let l = l.trim_start();
            // "[Nr] Name Type ...": the name follows the bracketed number.
            let rest = l.strip_prefix('[')?.split_once(']')?.1;
            rest.split_whitespace().next().map(str::to_string)
        })
        .collect())
}

/// Whether the sections carry debug information or a symbol table
/// (`.debug_gdb_scripts` is loaded at run time: not debug information).
fn has_debug_info(sections: &[String]) -> bool {
    sections
        .iter()
        .any(|s| (s.starts_with(".debug_") && s != ".debug_gdb_scripts") || s == ".symtab")
}

/// The GNU build id of an ELF file (`readelf -n`), lower-case hex.
fn build_id(file: &Path) -> Result<String> {
    let out = super::run_capture(Command::new("readelf").arg("-n").arg(file))?;
    out.lines()
        .find_map(|l| l.trim().strip_prefix("Build ID:"))
        .map(|id| id.trim().to_ascii_lowercase())
        .with_context(|| format!("{} has no GNU build id", file.display()))
}

/// `dpkg-deb -x` of `pkg` into a fresh `dir`.
fn extract(pkg: &Path, dir: &Path) -> Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    std::fs::create_dir_all(dir)?;
    super::run_capture(Command::new("dpkg-deb").arg("-x").arg(pkg).arg(dir))?;
    Ok(())
}

/// `path` in the package holds the same bytes as `packaging/<src>`.
fn same_file(root: &Path, path: &str, src: &Path) -> Result<()> {
    let got = std::fs::read(root.join(path)).with_context(|| format!("the .deb lacks /{path}"))?;
    let want = std::fs::read(src).with_context(|| format!("reading {}", src.display()))?;
    ensure!(
        got == want,
        "/{path} in the .deb differs from {}",
        src.display()
    );
    Ok(())
}

/// The sorted file names in `dir` ending with `suffix`.
fn names(dir: &Path, suffix: &str) -> Result<Vec<String>> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter_map(|n| n.strip_suffix(suffix).map(str::to_string))
        .collect();
    out.sort();
    Ok(out)
}

/// Runs `cargo xtask deb`; 0 when the package is as it should be.
pub fn deb(lab: &super::Lab, a: &DebArgs) -> Result<i32> {
    let repo = &lab.repo;
    if !super::have_command("cargo-deb") {
        bail!("cargo-deb is not installed: cargo install cargo-deb --version 3.8.0 --locked");
    }
    if !a.no_build {
        super::build_lqos(lab)?;
    }
    let built = lab.target().join("release/lqos");
    let built_size = std::fs::metadata(&built)
        .with_context(|| format!("{} (build it, or drop --no-build)", built.display()))?
        .len();
    let stdout = super::run_capture(
        super::cargo()
            .args(["deb", "-p", "lqos-cli", "--no-build"])
            .current_dir(repo),
    )?;
    let (deb, ddeb) = packages(&stdout)?;

    // Control fields.
    let control = super::run_capture(Command::new("dpkg-deb").arg("-f").arg(&deb))?;
    let field = |name: &str| {
        control
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}: ")))
            .unwrap_or("")
            .to_string()
    };
    ensure!(field("Package") == "lqos", "Package: {}", field("Package"));
    ensure!(
        field("Depends").contains("iproute2"),
        "Depends: {} (no iproute2)",
        field("Depends")
    );

    let check = lab.target().join("deb-check");
    let root = check.join("lqos");
    extract(&deb, &root)?;
    let bin = root.join("usr/bin/lqos");
    let size = std::fs::metadata(&bin)
        .context("the .deb has no /usr/bin/lqos")?
        .len();
    ensure!(
        !has_debug_info(&sections(&bin)?),
        "/usr/bin/lqos in the .deb is not stripped: {:?}",
        sections(&bin)?
    );
    ensure!(
        size <= a.max_mib << 20,
        "/usr/bin/lqos is {:.1} MiB, over the {} MiB limit",
        size as f64 / 1048576.0,
        a.max_mib
    );
    let version = super::run_capture(Command::new(&bin).arg("--version"))?;
    ensure!(version.starts_with("lqos "), "lqos --version: {version}");

    // The debug information, under the stripped binary's build id.
    let id = build_id(&bin)?;
    let dbg_root = check.join("lqos-dbgsym");
    extract(&ddeb, &dbg_root)?;
    let debug_file = dbg_root.join(format!(
        "usr/lib/debug/.build-id/{}/{}.debug",
        &id[..2],
        &id[2..]
    ));
    ensure!(
        debug_file.is_file(),
        "the -dbgsym package lacks {} (the binary's build id)",
        debug_file.display()
    );
    ensure!(
        sections(&debug_file)?.iter().any(|s| s == ".debug_info"),
        "{} has no .debug_info",
        debug_file.display()
    );

    // Man pages, completions, the unit: as packaging/ has them.
    let packaging = repo.join("packaging");
    let pages = names(&packaging.join("man"), ".1")?;
    let shipped = names(&root.join("usr/share/man/man1"), ".1.gz")?;
    ensure!(
        pages == shipped,
        "man pages: packaging/man has {pages:?}, the .deb {shipped:?}"
    );
    ensure!(pages.iter().any(|p| p == "lqos-watch"), "no lqos-watch(1)");
    for (path, src) in [
        (
            "usr/share/bash-completion/completions/lqos",
            "completions/lqos.bash",
        ),
        (
            "usr/share/zsh/vendor-completions/_lqos",
            "completions/_lqos",
        ),
        (
            "usr/share/fish/vendor_completions.d/lqos.fish",
            "completions/lqos.fish",
        ),
        (
            "usr/lib/systemd/system/lqos-watch.service",
            "systemd/lqos-watch.service",
        ),
    ] {
        same_file(&root, path, &packaging.join(src))?;
    }

    let kib = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len() >> 10);
    eprintln!(
        "deb: {} ({} KiB): /usr/bin/lqos stripped, {:.1} MiB (the release build {:.1} MiB), {}; \
         {} man pages, 3 completions, lqos-watch.service; debug information in {} ({} KiB)",
        deb.display(),
        kib(&deb),
        size as f64 / 1048576.0,
        built_size as f64 / 1048576.0,
        version.trim(),
        pages.len(),
        ddeb.display(),
        kib(&ddeb)
    );
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_packages_are_found_in_cargo_debs_output() {
        let out = "/r/target/debian/lqos-dbgsym_0.1.0-1_amd64.ddeb\n/r/target/debian/lqos_0.1.0-1_amd64.deb\n";
        let (deb, ddeb) = packages(out).unwrap();
        assert_eq!(deb, Path::new("/r/target/debian/lqos_0.1.0-1_amd64.deb"));
        assert_eq!(
            ddeb,
            Path::new("/r/target/debian/lqos-dbgsym_0.1.0-1_amd64.ddeb")
        );
        assert!(packages("/r/target/debian/lqos_0.1.0-1_amd64.deb\n").is_err());
    }

    #[test]
    fn debug_sections_and_the_symbol_table_count_as_debug_information() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert!(!has_debug_info(&s(&[
            ".text",
            ".debug_gdb_scripts",
            ".gnu_debuglink"
        ])));
        assert!(has_debug_info(&s(&[".text", ".debug_line"])));
        assert!(has_debug_info(&s(&[".text", ".symtab"])));
    }
}
