//! The module graph of a crate, read from its source text, and the check
//! that its imports point one way: for every parent module, the imports
//! between its children (each child standing for its whole subtree) form a
//! DAG. A module and its own ancestors or descendants are exempt (a facade
//! `mod.rs` re-exports its children, and children use what their parent
//! defines).
//!
//! An import is followed to where the item is defined: `use crate::Plan`
//! in `ops.rs`, with `pub use plan::Plan` at the root, is an import of
//! `plan`, not of the root. Every `use` (public or private, since a child
//! sees its parent's private imports through `super::`) binds a name in
//! its module; a path is resolved segment by segment through modules and
//! those bindings. Paths in code (`crate::a::f()`, `super::x::Y`) count as
//! imports too. Comments, `#[cfg(test)]` items and paths outside the crate
//! are left out; inline modules (`mod m { ... }`) are modules of their own.
//!
//! `cargo test -p xtask` checks every crate of the workspace
//! ([`CRATES`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module: its path from the crate root (`[]` is the root).
pub type Module = Vec<String>;

/// The source directories the check covers (relative to the workspace).
pub const CRATES: [&str; 6] = [
    "lqos-model/src",
    "lqos-tc/src",
    "lqos-apply/src",
    "lqos-bench/src",
    "lqos-bpf/src",
    "lqos-cli/src",
];

/// One module's source: where it is in the crate and its text (comments
/// and test items removed, inline modules cut out into their own).
struct Source {
    module: Module,
    text: String,
}

/// A crate's modules, what each `use` binds, and the imports of each
/// module (absolute paths, before resolution).
pub struct Crate {
    modules: BTreeSet<Module>,
    bindings: BTreeMap<(Module, String), Vec<String>>,
    imports: Vec<(Module, Vec<String>)>,
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// `src/a/b.rs` -> `["a", "b"]`, `src/a/mod.rs` -> `["a"]`, `src/lib.rs`
/// and `src/main.rs` -> `[]`.
fn module_of(src: &Path, file: &Path) -> Module {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Module = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let root = parts.len() == 1 && matches!(parts[0].as_str(), "lib" | "main");
    if root || parts.last().map(String::as_str) == Some("mod") {
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

/// The source without `//` comments (line and doc comments), string
/// literals emptied (a path or a brace inside one is not code).
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let (mut in_str, mut prev) = (false, ' ');
    while let Some(c) = chars.next() {
        if in_str {
            if c == '\\' {
                chars.next();
            } else if c == '"' {
                in_str = false;
                out.push('"');
            } else if c == '\n' {
                out.push('\n');
            }
            continue;
        }
        match c {
            '"' if prev != '\'' => {
                in_str = true;
                out.push('"');
            }
            '/' if chars.peek() == Some(&'/') => {
                for d in chars.by_ref() {
                    if d == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            _ => out.push(c),
        }
        prev = c;
    }
    out
}

/// The index just past the brace that closes the one at `open`.
fn close_of(text: &str, open: usize) -> usize {
    let mut depth = 0;
    for (k, c) in text[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return open + k + 1;
                }
            }
            _ => {}
        }
    }
    text.len()
}

/// The source without its `#[cfg(test)]` items (unit tests may use any
/// module; they are not part of the crate's structure).
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
            rest = &after[(semi + 1).min(after.len())..];
            continue;
        }
        rest = &after[close_of(after, open)..];
    }
    out.push_str(rest);
    out
}

/// Cuts the inline modules (`mod m { ... }`) out of `text` (module
/// `here`) into sources of their own.
fn split_inline(here: &Module, text: &str, out: &mut Vec<Source>) {
    let mut kept = String::new();
    let mut rest = text;
    while let Some((name, at, open)) = next_inline_mod(rest) {
        kept.push_str(&rest[..at]);
        let end = close_of(rest, open);
        let mut inner = here.clone();
        inner.push(name);
        split_inline(&inner, &rest[open + 1..end - 1], out);
        rest = &rest[end..];
    }
    kept.push_str(rest);
    out.push(Source {
        module: here.clone(),
        text: kept,
    });
}

/// The next `mod NAME {` in `text`: its name, where the `mod` keyword
/// starts and where its brace is.
fn next_inline_mod(text: &str) -> Option<(String, usize, usize)> {
    let mut from = 0;
    while let Some(i) = text[from..].find("mod ") {
        let at = from + i;
        from = at + 4;
        if at > 0 && is_ident(text[..at].chars().next_back().unwrap()) {
            continue;
        }
        let name: String = text[from..].chars().take_while(|&c| is_ident(c)).collect();
        let after = text[from + name.len()..].trim_start();
        if !name.is_empty() && after.starts_with('{') {
            let open = text.len() - after.len();
            return Some((name, at, open));
        }
    }
    None
}

/// The leaves of a use tree (`a::{b, c::d as e, self}`): each full path
/// and the name it binds (`None` for a glob).
fn use_leaves(tree: &str) -> Vec<(Vec<String>, Option<String>)> {
    fn walk(s: &str, prefix: &[String], out: &mut Vec<(Vec<String>, Option<String>)>) {
        let s = s.trim();
        if s.is_empty() {
            return;
        }
        if let Some(open) = s.find('{') {
            let head = s[..open].trim().trim_end_matches("::");
            let mut p = prefix.to_vec();
            p.extend(
                head.split("::")
                    .map(str::trim)
                    .filter(|x| !x.is_empty())
                    .map(String::from),
            );
            let body = &s[open + 1..s.rfind('}').unwrap_or(s.len())];
            let (mut depth, mut start) = (0, 0);
            for (k, c) in body.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        walk(&body[start..k], &p, out);
                        start = k + 1;
                    }
                    _ => {}
                }
            }
            walk(&body[start..], &p, out);
            return;
        }
        let (path, alias) = match s.split_once(" as ") {
            Some((p, a)) => (p.trim(), Some(a.trim().to_string())),
            None => (s, None),
        };
        let mut p = prefix.to_vec();
        p.extend(path.split("::").map(|x| x.trim().to_string()));
        let last = p.last().cloned().unwrap_or_default();
        if last == "*" {
            p.pop();
            out.push((p, None));
        } else if last == "self" {
            p.pop();
            let name = alias.or_else(|| p.last().cloned());
            out.push((p, name));
        } else {
            out.push((p, Some(alias.unwrap_or(last))));
        }
    }
    let mut out = Vec::new();
    walk(tree, &[], &mut out);
    out
}

/// The `use` statements of `text`: each tree, and the text without them.
fn use_statements(text: &str) -> (Vec<String>, String) {
    let mut trees = Vec::new();
    let mut rest = String::new();
    let mut from = 0;
    while let Some(i) = text[from..].find("use ") {
        let at = from + i;
        let before = text[..at].chars().next_back();
        if before.is_some_and(|c| is_ident(c) || c == ':') {
            rest.push_str(&text[from..at + 4]);
            from = at + 4;
            continue;
        }
        let end = text[at..].find(';').map_or(text.len(), |e| at + e);
        rest.push_str(&text[from..at]);
        trees.push(text[at + 4..end].to_string());
        from = (end + 1).min(text.len());
    }
    rest.push_str(&text[from..]);
    (trees, rest)
}

/// Every path in code that starts with `crate::`, `super::` or `self::`
/// (the segments as written).
fn code_paths(text: &str) -> Vec<Vec<String>> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let rest = &text[i..];
        let starts = ["crate::", "super::", "self::"]
            .iter()
            .any(|p| rest.starts_with(p));
        if !starts || (i > 0 && (is_ident(b[i - 1] as char) || b[i - 1] == b':')) {
            i += 1;
            continue;
        }
        let mut segs = Vec::new();
        let mut j = i;
        loop {
            let start = j;
            while j < b.len() && is_ident(b[j] as char) {
                j += 1;
            }
            if j == start {
                break;
            }
            segs.push(text[start..j].to_string());
            if text[j..].starts_with("::") && text[j + 2..].starts_with(|c: char| is_ident(c)) {
                j += 2;
            } else {
                break;
            }
        }
        out.push(segs);
        i = j.max(i + 1);
    }
    out
}

impl Crate {
    /// Reads the crate whose sources are in `src`.
    pub fn read(src: &Path) -> Crate {
        let mut list = Vec::new();
        files(src, &mut list);
        list.sort();
        let mut sources = Vec::new();
        for f in &list {
            let text = strip_test_items(&strip_comments(&std::fs::read_to_string(f).unwrap()));
            split_inline(&module_of(src, f), &text, &mut sources);
        }
        let modules: BTreeSet<Module> = sources.iter().map(|s| s.module.clone()).collect();
        let mut c = Crate {
            modules,
            bindings: BTreeMap::new(),
            imports: Vec::new(),
        };
        for s in &sources {
            let (trees, code) = use_statements(&s.text);
            for t in &trees {
                for (path, name) in use_leaves(t) {
                    let Some(abs) = c.absolute(&s.module, &path) else {
                        continue;
                    };
                    if let Some(name) = name {
                        c.bindings.insert((s.module.clone(), name), abs.clone());
                    }
                    c.imports.push((s.module.clone(), abs));
                }
            }
            for path in code_paths(&code) {
                if let Some(abs) = c.absolute(&s.module, &path) {
                    c.imports.push((s.module.clone(), abs));
                }
            }
        }
        c
    }

    /// `path` as written in module `here`, from the crate root; `None`
    /// when it leaves the crate.
    fn absolute(&self, here: &Module, path: &[String]) -> Option<Vec<String>> {
        let first = path.first()?;
        let mut base: Vec<String> = match first.as_str() {
            "crate" => Vec::new(),
            "self" | "super" => here.clone(),
            _ => {
                let mut child = here.clone();
                child.push(first.clone());
                if !self.modules.contains(&child) {
                    return None;
                }
                here.clone()
            }
        };
        let mut rest = path;
        if first == "crate" || first == "self" {
            rest = &path[1..];
        }
        while rest.first().is_some_and(|s| s == "super") {
            base.pop();
            rest = &rest[1..];
        }
        base.extend(rest.iter().cloned());
        Some(base)
    }

    /// The module where the item at absolute `path` is defined, following
    /// `use` bindings.
    pub fn resolve(&self, path: &[String]) -> Module {
        self.resolve_in(path, 0)
    }

    fn resolve_in(&self, path: &[String], depth: usize) -> Module {
        let mut m: Module = Vec::new();
        for (i, seg) in path.iter().enumerate() {
            let mut child = m.clone();
            child.push(seg.clone());
            if self.modules.contains(&child) {
                m = child;
                continue;
            }
            if depth < 16 {
                if let Some(target) = self.bindings.get(&(m.clone(), seg.clone())) {
                    let mut t = target.clone();
                    t.extend(path[i + 1..].iter().cloned());
                    return self.resolve_in(&t, depth + 1);
                }
            }
            return m;
        }
        m
    }

    /// Each module's imports of other modules (resolved, self excluded).
    pub fn edges(&self) -> BTreeSet<(Module, Module)> {
        self.imports
            .iter()
            .map(|(from, path)| (from.clone(), self.resolve(path)))
            .filter(|(a, b)| a != b)
            .collect()
    }

    /// The edges between siblings: for each parent, `child -> {child}`
    /// (a module and its ancestors or descendants are exempt).
    pub fn sibling_edges(&self) -> BTreeMap<Module, BTreeMap<String, BTreeSet<String>>> {
        let mut graph: BTreeMap<Module, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
        for (here, target) in self.edges() {
            let common = here.iter().zip(&target).take_while(|(a, b)| a == b).count();
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
        graph
    }

    /// Every import cycle among siblings: for each parent, each group of
    /// children that import each other round (a strongly connected
    /// component of more than one), with a cycle through it, as
    /// `parent: a -> b -> a`.
    pub fn cycles(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (parent, edges) in self.sibling_edges() {
            let at = if parent.is_empty() {
                "crate".to_string()
            } else {
                format!("crate::{}", parent.join("::"))
            };
            for group in components(&edges) {
                let inside: BTreeMap<String, BTreeSet<String>> = group
                    .iter()
                    .map(|n| {
                        let to = edges.get(n).into_iter().flatten();
                        (
                            n.clone(),
                            to.filter(|t| group.contains(*t)).cloned().collect(),
                        )
                    })
                    .collect();
                let c = find_cycle(&inside).unwrap_or_default();
                let all: Vec<&str> = group.iter().map(String::as_str).collect();
                out.push(format!(
                    "{at}: {} (among {})",
                    c.join(" -> "),
                    all.join(", ")
                ));
            }
        }
        out
    }
}

/// The strongly connected components of more than one node (Tarjan).
fn components(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    struct T<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, (usize, usize)>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<BTreeSet<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, n: &'a str) {
        let i = t.index.len();
        t.index.insert(n, (i, i));
        t.stack.push(n);
        t.on.insert(n);
        for m in t.edges.get(n).into_iter().flatten() {
            let m = m.as_str();
            if !t.index.contains_key(m) {
                visit(t, m);
                let low = t.index[m].1.min(t.index[n].1);
                t.index.get_mut(n).unwrap().1 = low;
            } else if t.on.contains(m) {
                let low = t.index[m].0.min(t.index[n].1);
                t.index.get_mut(n).unwrap().1 = low;
            }
        }
        if t.index[n].0 == t.index[n].1 {
            let mut group = BTreeSet::new();
            while let Some(m) = t.stack.pop() {
                t.on.remove(m);
                group.insert(m.to_string());
                if m == n {
                    break;
                }
            }
            if group.len() > 1 {
                t.out.push(group);
            }
        }
    }
    let mut t = T {
        edges,
        index: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for n in edges.keys() {
        if !t.index.contains_key(n.as_str()) {
            visit(&mut t, n);
        }
    }
    t.out
}

/// Finds a cycle in `edges` (a path that comes back to its start).
pub fn find_cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap()
            .to_path_buf()
    }

    fn m(s: &str) -> Module {
        s.split("::")
            .filter(|x| !x.is_empty())
            .map(String::from)
            .collect()
    }

    /// A scratch crate from `(file, text)` pairs.
    fn scratch(files: &[(&str, &str)]) -> (tempfile::TempDir, Crate) {
        let dir = tempfile::tempdir().unwrap();
        for (f, t) in files {
            let p = dir.path().join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, t).unwrap();
        }
        let c = Crate::read(dir.path());
        (dir, c)
    }

    #[test]
    fn no_import_cycles_between_sibling_modules_in_any_crate() {
        let mut found = Vec::new();
        for src in CRATES {
            let c = Crate::read(&workspace().join(src));
            found.extend(c.cycles().into_iter().map(|c| format!("{src}: {c}")));
        }
        assert!(found.is_empty(), "import cycles:\n{}", found.join("\n"));
    }

    /// lqos-tc's shared vocabulary (handles, option words, the classifier's
    /// filters, ops and their qdisc and class types, the errors, the
    /// planner's config) is at the bottom: it imports none of its users
    /// (the planner, the text, the tree model, the diff).
    #[test]
    fn lqos_tc_vocabulary_imports_none_of_its_users() {
        let vocabulary = [
            "handle", "options", "filter", "op", "ops", "error", "config",
        ];
        let c = Crate::read(&workspace().join("lqos-tc/src"));
        let up: Vec<String> = c
            .edges()
            .into_iter()
            .filter(|(from, to)| {
                let top = |m: &Module| m.first().cloned().unwrap_or_default();
                vocabulary.contains(&top(from).as_str())
                    && !to.is_empty()
                    && !vocabulary.contains(&top(to).as_str())
            })
            .map(|(from, to)| format!("{} -> {}", from.join("::"), to.join("::")))
            .collect();
        assert!(up.is_empty(), "{up:?}");
        assert!(c.edges().contains(&(m("ops"), m("filter"))));
    }

    /// The checker sees the known edges of each crate (it would pass
    /// vacuously otherwise), through re-exports.
    #[test]
    fn the_checker_sees_each_crates_imports() {
        let edges = |src: &str| Crate::read(&workspace().join(src)).sibling_edges();
        let apply = edges("lqos-apply/src");
        assert!(apply[&m("")]["engine"].contains("backend"), "{apply:?}");
        assert!(apply[&m("netlink")]["socket"].contains("pipeline"));
        let tc = edges("lqos-tc/src");
        assert!(tc[&m("")]["render"].contains("op"), "{tc:?}");
        assert!(tc[&m("plan")]["build"].contains("rates"), "{tc:?}");
        let model = edges("lqos-model/src");
        assert!(model[&m("")]["load"].contains("validate"), "{model:?}");
        let cli = edges("lqos-cli/src");
        assert!(cli[&m("")]["cmd"].contains("out"), "{cli:?}");
        let bpf = edges("lqos-bpf/src");
        assert!(bpf[&m("")]["install"].contains("loader"), "{bpf:?}");
        let bench = edges("lqos-bench/src");
        assert!(bench[&m("")]["runner"].contains("error"), "{bench:?}");
    }

    #[test]
    fn imports_are_followed_through_re_exports_to_their_module() {
        let (_d, c) = scratch(&[
            (
                "lib.rs",
                "mod a;\nmod b;\nmod c;\npub use a::{A, inner::Deep as D};\n",
            ),
            (
                "a/mod.rs",
                "pub mod inner;\npub struct A;\nuse crate::b::B;\n",
            ),
            ("a/inner.rs", "pub struct Deep;\n"),
            // `crate::D` and `super::A` are `a`'s items: b and c import a.
            ("b.rs", "use crate::D; // use crate::c::C;\npub struct B;\n"),
            (
                "c.rs",
                "use super::{A, b::{B}};\nfn f() { let _ = \"crate::a::x\"; crate::b::B; }\n",
            ),
        ]);
        let e = c.sibling_edges();
        let root = &e[&m("")];
        assert_eq!(root["b"], BTreeSet::from(["a".to_string()]));
        assert_eq!(
            root["c"],
            BTreeSet::from(["a".to_string(), "b".to_string()])
        );
        assert_eq!(c.cycles(), ["crate: a -> b -> a (among a, b)"]);
        assert_eq!(c.resolve(&m("D")), m("a::inner"));
    }

    #[test]
    fn private_imports_of_a_parent_and_inline_modules_count() {
        let (_d, c) = scratch(&[
            ("lib.rs", "mod p;\n"),
            (
                "p/mod.rs",
                "mod x;\nmod y;\nuse x::X;\npub mod inline { use super::y::Y; }\n",
            ),
            // y sees x's X through its parent's private import.
            ("p/y.rs", "use super::X;\npub struct Y;\n"),
            (
                "p/x.rs",
                "pub struct X;\n#[cfg(test)]\nmod t { use super::super::y::Y; }\n",
            ),
        ]);
        let e = c.sibling_edges();
        let p = &e[&m("p")];
        assert_eq!(p["y"], BTreeSet::from(["x".to_string()]));
        assert_eq!(p["inline"], BTreeSet::from(["y".to_string()]));
        assert!(!p.contains_key("x"), "test items are not imports: {p:?}");
        assert!(c.cycles().is_empty());
    }

    #[test]
    fn use_trees_and_cycles() {
        let leaves = use_leaves("super::{a::{b, c as d}, self, e::*}");
        let got: Vec<(String, Option<String>)> =
            leaves.into_iter().map(|(p, n)| (p.join("::"), n)).collect();
        assert_eq!(
            got,
            [
                ("super::a::b".to_string(), Some("b".to_string())),
                ("super::a::c".to_string(), Some("d".to_string())),
                ("super".to_string(), Some("super".to_string())),
                ("super::e".to_string(), None),
            ]
        );
        let mut e: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        e.entry("a".into()).or_default().insert("b".into());
        e.entry("b".into()).or_default().insert("c".into());
        assert_eq!(find_cycle(&e), None);
        e.entry("c".into()).or_default().insert("a".into());
        assert_eq!(find_cycle(&e).unwrap(), ["a", "b", "c", "a"]);
    }
}
