//! The packaged files stay true to the binary: the man pages and shell
//! completions in `packaging/` are what `lqos man` / `lqos completions`
//! generate from the clap definitions now, every `cargo deb` asset exists,
//! and the systemd unit runs `lqos watch` with CAP_NET_ADMIN only.

mod common;

use std::path::{Path, PathBuf};

use common::{lqos, ok};

fn packaging() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../packaging")
}

const REGENERATE: &str = "regenerate with: lqos man --out packaging/man; \
     lqos completions bash > packaging/completions/lqos.bash; \
     lqos completions zsh > packaging/completions/_lqos; \
     lqos completions fish > packaging/completions/lqos.fish";

#[test]
fn man_pages_and_completions_are_current() {
    let dir = tempfile::tempdir().unwrap();
    ok(&lqos(dir.path(), &["man", "--out", "man"]));
    let mut generated: Vec<String> = std::fs::read_dir(dir.path().join("man"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    generated.sort();
    let mut committed: Vec<String> = std::fs::read_dir(packaging().join("man"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    committed.sort();
    assert_eq!(generated, committed, "{REGENERATE}");
    assert!(generated.contains(&"lqos-watch.1".to_string()));
    for name in &generated {
        let a = std::fs::read(dir.path().join("man").join(name)).unwrap();
        let b = std::fs::read(packaging().join("man").join(name)).unwrap();
        assert!(a == b, "packaging/man/{name} is stale; {REGENERATE}");
    }
    // `lqos man` alone prints the top page.
    let top = ok(&lqos(dir.path(), &["man"]));
    assert!(top.contains(".TH lqos") && top.contains("watch"), "{top}");
    for (shell, file) in [
        ("bash", "lqos.bash"),
        ("zsh", "_lqos"),
        ("fish", "lqos.fish"),
    ] {
        let out = ok(&lqos(dir.path(), &["completions", shell]));
        assert!(out.contains("lazy-leaves"), "{shell}");
        let committed =
            std::fs::read_to_string(packaging().join("completions").join(file)).unwrap();
        assert!(
            out == committed,
            "packaging/completions/{file} is stale; {REGENERATE}"
        );
    }
}

#[test]
fn deb_assets_exist_and_the_unit_is_hardened() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cargo: toml::Value =
        toml::from_str(&std::fs::read_to_string(manifest.join("Cargo.toml")).unwrap()).unwrap();
    let deb = &cargo["package"]["metadata"]["deb"];
    for asset in deb["assets"].as_array().unwrap() {
        let src = asset[0].as_str().unwrap();
        if src.starts_with("target/") {
            continue; // built by cargo
        }
        if let Some(dir) = src.strip_suffix("/*.1") {
            let n = std::fs::read_dir(manifest.join(dir)).unwrap().count();
            assert!(n > 5, "{src}: {n} pages");
        } else {
            assert!(
                manifest.join(src).is_file(),
                "cargo deb asset {src} is missing"
            );
        }
    }
    let units = deb["systemd-units"]["unit-scripts"].as_str().unwrap();
    let unit_name = deb["systemd-units"]["unit-name"].as_str().unwrap();
    let unit =
        std::fs::read_to_string(manifest.join(units).join(format!("{unit_name}.service"))).unwrap();
    let lines: Vec<&str> = unit.lines().map(str::trim).collect();
    for want in [
        "CapabilityBoundingSet=CAP_NET_ADMIN",
        "AmbientCapabilities=CAP_NET_ADMIN",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "StateDirectory=lqos",
        "ExecReload=/bin/kill -HUP $MAINPID",
    ] {
        assert!(lines.contains(&want), "unit lacks {want}");
    }
    let exec = lines.iter().find(|l| l.starts_with("ExecStart=")).unwrap();
    assert!(
        exec.starts_with("ExecStart=/usr/bin/lqos watch ")
            && exec.contains("--state-dir /var/lib/lqos"),
        "{exec}"
    );
}
