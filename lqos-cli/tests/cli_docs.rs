//! The README and `docs/` stay true to the tree: every relative link
//! points at a file that exists (and at a heading that exists, for a
//! `#fragment`), every repository path quoted in backticks exists, every
//! page of `docs/` is packaged, and the README's two opening commands are
//! the ones CI and users run (`.ci/run` runs the README's test command).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The README and every page of `docs/`, as paths relative to the root.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![PathBuf::from("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .map(|p| Path::new("docs").join(p.file_name().unwrap()))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// The page's lines outside fenced code blocks, numbered from 1.
fn prose(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            out.push((i + 1, line));
        }
    }
    out
}

/// The anchors GitHub gives the page's headings.
fn anchors(text: &str) -> HashSet<String> {
    let mut seen = HashSet::new();
    for (_, line) in prose(text) {
        let Some(title) = line.strip_prefix('#') else {
            continue;
        };
        let title = title.trim_start_matches('#').trim();
        let slug: String = title
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let mut unique = slug.clone();
        let mut n = 1;
        while !seen.insert(unique.clone()) {
            unique = format!("{slug}-{n}");
            n += 1;
        }
    }
    seen
}

/// The targets of the inline links `[text](target)` on one line.
fn link_targets(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find("](") {
        let after = &rest[i + 2..];
        let Some(end) = after.find(')') else { break };
        out.push(&after[..end]);
        rest = &after[end..];
    }
    out
}

/// The spans quoted in backticks on one line.
fn code_spans(line: &str) -> Vec<&str> {
    line.split('`').skip(1).step_by(2).collect()
}

#[test]
fn links_and_anchors_resolve() {
    let mut bad = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(root().join(&page)).unwrap();
        let dir = page.parent().unwrap().to_path_buf();
        for (n, line) in prose(&text) {
            for target in link_targets(line) {
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                let (file, fragment) = match target.split_once('#') {
                    Some((f, a)) => (f, Some(a)),
                    None => (target, None),
                };
                let linked = if file.is_empty() {
                    page.clone()
                } else {
                    dir.join(file)
                };
                let path = root().join(&linked);
                if !path.exists() {
                    bad.push(format!("{}:{n}: {target}: no such file", page.display()));
                    continue;
                }
                if let Some(fragment) = fragment {
                    let linked_text = std::fs::read_to_string(&path).unwrap();
                    if !anchors(&linked_text).contains(fragment) {
                        bad.push(format!("{}:{n}: {target}: no such heading", page.display()));
                    }
                }
            }
        }
    }
    assert!(bad.is_empty(), "dangling links:\n{}", bad.join("\n"));
}

#[test]
fn quoted_repository_paths_exist() {
    const TOP: [&str; 12] = [
        ".ci/",
        "benches/",
        "docs/",
        "examples/",
        "fuzz/",
        "lab/",
        "lqos-apply/",
        "lqos-cli/",
        "lqos-model/",
        "lqos-tc/",
        "packaging/",
        "samples/",
    ];
    let mut bad = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let text = std::fs::read_to_string(root().join(&page)).unwrap();
        for (n, line) in prose(&text) {
            for span in code_spans(line) {
                let plain = span
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-/".contains(c));
                if !plain || !TOP.iter().any(|t| span.starts_with(t)) {
                    continue;
                }
                checked += 1;
                if !root().join(span).exists() {
                    bad.push(format!("{}:{n}: `{span}`: no such path", page.display()));
                }
            }
        }
    }
    assert!(checked > 10, "only {checked} paths found");
    assert!(
        bad.is_empty(),
        "paths that do not exist:\n{}",
        bad.join("\n")
    );
}

#[test]
fn every_docs_page_is_packaged() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cargo: toml::Value =
        toml::from_str(&std::fs::read_to_string(manifest.join("Cargo.toml")).unwrap()).unwrap();
    let assets: HashSet<&str> = cargo["package"]["metadata"]["deb"]["assets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a[0].as_str().unwrap())
        .collect();
    for page in pages() {
        let asset = format!("../{}", page.display());
        assert!(
            assets.contains(asset.as_str()),
            "{} is not a cargo deb asset of lqos-cli",
            page.display()
        );
    }
}

#[test]
fn the_two_opening_commands_are_current() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let block: Vec<&str> = readme
        .split("```sh\n")
        .nth(1)
        .expect("the README opens with a sh block")
        .split("```")
        .next()
        .unwrap()
        .lines()
        .map(|l| l.split('#').next().unwrap().trim())
        .collect();
    assert_eq!(
        block,
        [
            "cargo run --release -p lqos-cli -- bench",
            "cargo test --workspace"
        ],
        "the README's opening commands"
    );
    let ci = std::fs::read_to_string(root().join(".ci/run")).unwrap();
    assert!(
        ci.lines().any(|l| l.trim() == block[1]),
        ".ci/run does not run the README's test command `{}`",
        block[1]
    );
    // The first command's subcommand is the binary's.
    let bench = lqos_bench_help();
    assert!(bench.contains("--circuits"), "{bench}");
}

fn lqos_bench_help() -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lqos"))
        .args(["bench", "--help"])
        .output()
        .unwrap();
    assert!(out.status.success(), "lqos bench --help failed");
    String::from_utf8(out.stdout).unwrap()
}
