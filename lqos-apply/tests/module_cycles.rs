//! No import cycles between the modules of lqos-apply: for every parent
//! module, the `use crate::...` / `use super::...` references between its
//! children (each child standing for its whole subtree) form a DAG. A
//! parent and its own descendants are exempt (a facade `mod.rs` re-exports
//! its children, and children use the traits their parent defines).
//!
//! Read from the source text (`src/**/*.rs`, comments and `#[cfg(test)]`
//! items stripped): a path
//! `crate::a::b::C` or `super::x::Y` is resolved to the longest prefix that
//! is a module file; grouped imports (`use super::{a, b::{c}}`) count each
//! group member.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// `src/a/b.rs` -> `["a", "b"]`, `src/a/mod.rs` -> `["a"]`, `src/lib.rs` -> `[]`.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The source without `//` comments (line and doc comments).
fn strip_comments(text: &str) -> String {
    text.lines()
        .map(|l| match l.find("//") {
            // Keep `//` inside string literals out of the way crudely: a
            // quote before the comment start leaves the line as is.
            Some(i) if !l[..i].contains('"') => &l[..i],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The source without its `#[cfg(test)]` items (unit tests may use any
/// module; they are not part of the library's structure).
fn strip_test_items(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..i]);
        let after = &rest[i..];
        let semi = after.find(';').unwrap_or(after.len());
        let open = after.find('{').unwrap_or(after.len());
        if semi < open {
            // `#[cfg(test)] mod fixtures;` or a `use`.
            rest = &after[semi + 1..];
            continue;
        }
        let mut depth = 0;
        let mut end = after.len();
        for (k, c) in after[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + k + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Every path that starts with `crate::` or `super::` (one or more),
/// resolved against `here` into absolute segment lists; grouped imports are
/// expanded one level (each member's first two segments).
fn references(text: &str, here: &[String], is_mod_rs: bool) -> Vec<Vec<String>> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let rest = &text[i..];
        let starts = rest.starts_with("crate::") || rest.starts_with("super::");
        if !starts || (i > 0 && is_ident(b[i - 1] as char)) {
            i += 1;
            continue;
        }
        // The module the path is relative to: super of a `mod.rs` is the
        // parent of its directory's module.
        let mut base: Vec<String>;
        let mut j = i;
        if rest.starts_with("crate::") {
            base = Vec::new();
            j += "crate::".len();
        } else {
            base = here.to_vec();
            if !is_mod_rs && base.is_empty() {
                i += 1;
                continue;
            }
            while text[j..].starts_with("super::") {
                base.pop();
                j += "super::".len();
            }
        }
        let mut segs = base.clone();
        loop {
            let start = j;
            while j < b.len() && is_ident(b[j] as char) {
                j += 1;
            }
            if j > start {
                segs.push(text[start..j].to_string());
            }
            if text[j..].starts_with("::{") {
                j += 2;
            }
            if text[j..].starts_with('{') {
                // Group: each member's first two segments.
                j += 1;
                let mut depth = 1;
                let mut member = String::new();
                while j < b.len() && depth > 0 {
                    let c = b[j] as char;
                    match c {
                        '{' => depth += 1,
                        '}' => depth -= 1,
                        ',' if depth == 1 => {
                            push_member(&mut out, &segs, &member);
                            member.clear();
                        }
                        _ if depth == 1 || member.matches("::").count() < 2 => member.push(c),
                        _ => {}
                    }
                    j += 1;
                }
                push_member(&mut out, &segs, &member);
                break;
            }
            if text[j..].starts_with("::") {
                j += 2;
                continue;
            }
            out.push(segs);
            break;
        }
        i = j.max(i + 1);
    }
    out
}

fn push_member(out: &mut Vec<Vec<String>>, prefix: &[String], member: &str) {
    let mut segs = prefix.to_vec();
    for s in member.trim().split("::").take(2) {
        let s: String = s.chars().take_while(|&c| is_ident(c)).collect();
        if s.is_empty() || s == "self" {
            break;
        }
        segs.push(s);
    }
    out.push(segs);
}

/// Finds a cycle in `edges` (a path that comes back to its start).
fn find_cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(n.to_string(), 1);
        stack.push(n.to_string());
        for m in edges.get(n).into_iter().flatten() {
            match state.get(m.as_str()).copied().unwrap_or(0) {
                1 => {
                    let at = stack.iter().position(|s| s == m).unwrap();
                    let mut c = stack[at..].to_vec();
                    c.push(m.clone());
                    return Some(c);
                }
                0 => {
                    if let Some(c) = visit(m, edges, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in edges.keys() {
        if state.get(n.as_str()).copied().unwrap_or(0) == 0 {
            if let Some(c) = visit(n, edges, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

/// The sibling-level edges of the crate: `parent -> {child -> {child}}`.
fn sibling_edges(src: &Path) -> BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> {
    let mut list = Vec::new();
    files(src, &mut list);
    let modules: BTreeSet<Vec<String>> = list.iter().map(|f| module_of(src, f)).collect();
    let mut graph: BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for f in &list {
        let here = module_of(src, f);
        let is_mod_rs = f
            .file_name()
            .is_some_and(|n| n == "mod.rs" || n == "lib.rs");
        let text = strip_test_items(&strip_comments(&std::fs::read_to_string(f).unwrap()));
        // `super` inside `mod.rs` is relative to the directory's module.
        for r in references(&text, &here, is_mod_rs) {
            let target = (0..=r.len())
                .rev()
                .map(|n| r[..n].to_vec())
                .find(|p| modules.contains(p))
                .unwrap_or_default();
            let common = here.iter().zip(&target).take_while(|(a, b)| a == b).count();
            // A module and its ancestors or descendants: exempt.
            if common == here.len() || common == target.len() {
                continue;
            }
            graph
                .entry(here[..common].to_vec())
                .or_default()
                .entry(here[common].clone())
                .or_default()
                .insert(target[common].clone());
        }
    }
    graph
}

#[test]
fn no_import_cycles_between_sibling_modules() {
    let src: PathBuf = [env!("CARGO_MANIFEST_DIR"), "src"].iter().collect();
    let graph = sibling_edges(&src);
    // The checker sees the known edges (it would pass vacuously otherwise).
    let top = &graph[&Vec::new()];
    assert!(top["engine"].contains("backend"), "{top:?}");
    assert!(graph[&vec!["netlink".to_string()]]["socket"].contains("pipeline"));
    for (parent, edges) in &graph {
        if let Some(c) = find_cycle(edges) {
            panic!(
                "import cycle among the children of `crate::{}`: {}",
                parent.join("::"),
                c.join(" -> ")
            );
        }
    }
}

#[test]
fn the_checker_finds_a_cycle() {
    assert_eq!(
        strip_test_items("a\n#[cfg(test)]\nmod t { fn x() { y() } }\nb #[cfg(test)] mod f; c"),
        "a\n\nb  c"
    );
    let mut e: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    e.entry("a".into()).or_default().insert("b".into());
    e.entry("b".into()).or_default().insert("c".into());
    assert_eq!(find_cycle(&e), None);
    e.entry("c".into()).or_default().insert("a".into());
    assert_eq!(find_cycle(&e).unwrap(), ["a", "b", "c", "a"]);
    let here = vec!["netlink".to_string(), "htb".to_string()];
    let r = references(
        "use super::attr::{attr, attrs};\nuse super::{cake, msg::tcmsg};\nlet x = crate::error::ApplyError::Plan;",
        &here,
        false,
    );
    assert!(
        r.contains(&vec!["netlink".into(), "attr".into(), "attr".into()]),
        "{r:?}"
    );
    assert!(r.contains(&vec!["netlink".into(), "cake".into()]), "{r:?}");
    assert!(
        r.contains(&vec!["netlink".into(), "msg".into(), "tcmsg".into()]),
        "{r:?}"
    );
    assert!(
        r.contains(&vec!["error".into(), "ApplyError".into(), "Plan".into()]),
        "{r:?}"
    );
}
