//! `cargo xtask api`: the public API of every library crate, one line per
//! item, committed in `api/<crate>.txt`, so that a change to it shows in
//! review.
//!
//! The listing is read from rustdoc's JSON output (`cargo rustdoc -- -Z
//! unstable-options --output-format json`, on the stable toolchain with
//! `RUSTC_BOOTSTRAP=1`: no nightly toolchain, no tool to install), walking
//! each crate from its root through its public modules and re-exports with
//! the default features: every module, type, field, variant, function,
//! method, trait, trait impl (auto traits and blanket impls left out),
//! constant and type alias, with its signature and `#[non_exhaustive]`.
//! Types are named as the source writes them.
//!
//! - `cargo xtask api` writes the listings (after a change to the API that
//!   is meant: commit them with it).
//! - `cargo xtask api --check` fails, printing the lines that differ, when
//!   the API is not the committed one (CI runs it).
//!
//! Either fails when an item of a crate has more than one public path (a
//! re-export of an item its module already exports): each item is named
//! once.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use serde_json::Value;

/// The library crates whose API is recorded.
pub const LIBS: [&str; 5] = [
    "lqos-model",
    "lqos-tc",
    "lqos-apply",
    "lqos-bench",
    "lqos-bpf",
];

/// Arguments of `cargo xtask api`.
#[derive(clap::Args)]
pub struct ApiArgs {
    /// Compare with the committed listings instead of writing them.
    #[arg(long)]
    check: bool,
}

/// Runs `cargo xtask api`: 0 written or the same, 1 differs.
pub fn api(root: &Path, args: &ApiArgs) -> Result<i32> {
    let dir = root.join("api");
    let mut differ = Vec::new();
    for lib in LIBS {
        let json = rustdoc_json(root, lib)?;
        let text = listing(&json).with_context(|| format!("reading {}", json.display()))?;
        let file = dir.join(format!("{lib}.txt"));
        if args.check {
            let old = std::fs::read_to_string(&file).unwrap_or_default();
            if old != text {
                differ.push((lib, diff(&old, &text)));
            }
        } else {
            std::fs::create_dir_all(&dir)?;
            std::fs::write(&file, &text).with_context(|| format!("writing {}", file.display()))?;
            println!("{}: {} items", file.display(), text.lines().count());
        }
    }
    if differ.is_empty() {
        if args.check {
            println!("the public API is the committed one (api/*.txt)");
        }
        return Ok(0);
    }
    for (lib, d) in &differ {
        eprintln!("{lib}: the public API differs from api/{lib}.txt:\n{d}");
    }
    eprintln!(
        "the public API changed: if that is meant, run `cargo xtask api` and commit api/*.txt \
         with the change"
    );
    Ok(1)
}

/// Builds `lib`'s rustdoc JSON and returns its path.
fn rustdoc_json(root: &Path, lib: &str) -> Result<PathBuf> {
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(root)
        .env("RUSTC_BOOTSTRAP", "1")
        .args(["rustdoc", "-q", "-p", lib, "--lib", "--"])
        .args(["-Z", "unstable-options", "--output-format", "json"])
        .status()
        .context("running cargo rustdoc")?;
    if !status.success() {
        bail!("cargo rustdoc -p {lib} (JSON output) failed: {status}");
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    Ok(target
        .join("doc")
        .join(format!("{}.json", lib.replace('-', "_"))))
}

/// The lines only in `old` (`-`) and only in `new` (`+`).
fn diff(old: &str, new: &str) -> String {
    let (a, b): (BTreeSet<&str>, BTreeSet<&str>) = (old.lines().collect(), new.lines().collect());
    let mut out = String::new();
    for l in a.difference(&b) {
        out += &format!("- {l}\n");
    }
    for l in b.difference(&a) {
        out += &format!("+ {l}\n");
    }
    out
}

/// The listing of the crate whose rustdoc JSON is at `path`.
pub fn listing(path: &Path) -> Result<String> {
    let text = std::fs::read_to_string(path)?;
    let doc: Value = serde_json::from_str(&text)?;
    let root = doc["root"].as_u64().context("no root")?;
    let name = doc["index"][root.to_string()]["name"]
        .as_str()
        .context("no crate name")?
        .to_string();
    let mut paths = HashMap::new();
    public_paths(&doc, root, &name, &mut paths);
    PATHS.with(|p| *p.borrow_mut() = paths);
    let mut w = Walk {
        doc: &doc,
        out: BTreeSet::new(),
        seen: BTreeSet::new(),
    };
    w.module(root, &name);
    let mut by_id: HashMap<u64, Vec<&str>> = HashMap::new();
    for (id, p) in &w.seen {
        by_id.entry(*id).or_default().push(p);
    }
    let mut twice: Vec<String> = by_id
        .values()
        .filter(|ps| ps.len() > 1)
        .map(|ps| ps.join(" = "))
        .collect();
    if !twice.is_empty() {
        twice.sort();
        bail!("items with more than one public path: {}", twice.join("; "));
    }
    let mut s = String::new();
    for l in w.out {
        s += &l;
        s.push('\n');
    }
    Ok(s)
}

thread_local! {
    /// The public path of every item of the crate being listed, by id: how
    /// a type is named in signatures (other crates' types by their name as
    /// written).
    static PATHS: RefCell<HashMap<u64, String>> = RefCell::new(HashMap::new());
}

/// The public path of every item reachable from module `id` (the first
/// path in name order when there are several).
fn public_paths(doc: &Value, id: u64, path: &str, out: &mut HashMap<u64, String>) {
    let items = ids(&doc["index"][id.to_string()]["inner"]["module"]["items"]);
    for i in items {
        let it = &doc["index"][i.to_string()];
        if it["visibility"] != "public" {
            continue;
        }
        let (target, name) = match it["inner"].get("use") {
            Some(u) => match u["id"].as_u64() {
                Some(t) if u["is_glob"] == true => {
                    if !doc["index"][t.to_string()].is_null() {
                        public_paths(doc, t, path, out);
                    }
                    continue;
                }
                Some(t) => (t, u["name"].as_str().unwrap_or_default().to_string()),
                None => continue,
            },
            None => (i, it["name"].as_str().unwrap_or_default().to_string()),
        };
        let p = format!("{path}::{name}");
        let better = out.get(&target).is_none_or(|old| p < *old);
        if better {
            out.insert(target, p.clone());
        }
        if doc["index"][target.to_string()]["inner"]
            .get("module")
            .is_some()
        {
            public_paths(doc, target, &p, out);
        }
    }
}

struct Walk<'a> {
    doc: &'a Value,
    out: BTreeSet<String>,
    /// (item id, path) already listed.
    seen: BTreeSet<(u64, String)>,
}

impl Walk<'_> {
    fn item(&self, id: u64) -> Option<&Value> {
        let it = &self.doc["index"][id.to_string()];
        (!it.is_null()).then_some(it)
    }

    fn module(&mut self, id: u64, path: &str) {
        let Some(m) = self.item(id) else { return };
        let items: Vec<u64> = m["inner"]["module"]["items"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_u64).collect())
            .unwrap_or_default();
        for i in items {
            let Some(it) = self.item(i) else { continue };
            if it["visibility"] != "public" {
                continue;
            }
            let inner = &it["inner"];
            if let Some(u) = inner.get("use") {
                let name = u["name"].as_str().unwrap_or_default();
                let target = u["id"].as_u64().filter(|t| self.item(*t).is_some());
                match (target, u["is_glob"].as_bool() == Some(true)) {
                    (Some(t), true) => self.module(t, path),
                    (Some(t), false) => self.named(t, &format!("{path}::{name}")),
                    (None, _) => {
                        let source = u["source"].as_str().unwrap_or_default();
                        self.out.insert(format!("{path}::{name}: pub use {source}"));
                    }
                }
                continue;
            }
            let name = it["name"].as_str().unwrap_or_default().to_string();
            self.named(i, &format!("{path}::{name}"));
        }
    }

    /// Lists item `id` at `path` (and what it holds).
    fn named(&mut self, id: u64, path: &str) {
        if !self.seen.insert((id, path.to_string())) {
            return;
        }
        let Some(it) = self.item(id).cloned() else {
            return;
        };
        let inner = &it["inner"];
        let attrs = attrs(&it);
        let (kind, body) = inner
            .as_object()
            .and_then(|o| o.iter().next())
            .map(|(k, v)| (k.as_str(), v))
            .unwrap_or(("", &Value::Null));
        match kind {
            "module" => {
                self.out.insert(format!("{path}: mod"));
                self.module(id, path);
            }
            "struct" => {
                let g = generics(&body["generics"]);
                self.out.insert(format!("{path}: {attrs}struct{g}"));
                let k = &body["kind"];
                if let Some(p) = k.get("plain") {
                    for f in ids(&p["fields"]) {
                        self.field(f, path);
                    }
                    if p["has_stripped_fields"] == true {
                        self.out.insert(format!("{path}: (private fields)"));
                    }
                } else if let Some(t) = k.get("tuple") {
                    for (n, f) in arr(t).enumerate() {
                        match f.as_u64().and_then(|f| self.item(f)) {
                            Some(fi) => {
                                let ty = ty(&fi["inner"]["struct_field"]);
                                self.out.insert(format!("{path}.{n}: {ty}"));
                            }
                            None => {
                                self.out.insert(format!("{path}.{n}: (private)"));
                            }
                        }
                    }
                }
                self.impls(&body["impls"], path);
            }
            "enum" => {
                let g = generics(&body["generics"]);
                self.out.insert(format!("{path}: {attrs}enum{g}"));
                for v in ids(&body["variants"]) {
                    self.variant(v, path);
                }
                self.impls(&body["impls"], path);
            }
            "union" => {
                self.out.insert(format!("{path}: {attrs}union"));
                self.impls(&body["impls"], path);
            }
            "function" => {
                self.out
                    .insert(format!("{path}: {attrs}{}", function(body)));
            }
            "trait" => {
                let g = generics(&body["generics"]);
                self.out.insert(format!("{path}: {attrs}trait{g}"));
                for m in ids(&body["items"]) {
                    self.assoc(m, path);
                }
            }
            "constant" => {
                self.out
                    .insert(format!("{path}: const {}", ty(&body["type"])));
            }
            "static" => {
                self.out
                    .insert(format!("{path}: static {}", ty(&body["type"])));
            }
            "type_alias" => {
                let g = generics(&body["generics"]);
                self.out
                    .insert(format!("{path}: type{g} = {}", ty(&body["type"])));
            }
            "macro" | "proc_macro" => {
                self.out.insert(format!("{path}: macro"));
            }
            other => {
                self.out.insert(format!("{path}: {other}"));
            }
        }
    }

    fn field(&mut self, id: u64, owner: &str) {
        let Some(f) = self.item(id) else { return };
        if f["visibility"] != "public" {
            return;
        }
        let name = f["name"].as_str().unwrap_or_default();
        let t = ty(&f["inner"]["struct_field"]);
        self.out.insert(format!("{owner}.{name}: {t}"));
    }

    fn variant(&mut self, id: u64, owner: &str) {
        let Some(v) = self.item(id).cloned() else {
            return;
        };
        let name = v["name"].as_str().unwrap_or_default();
        let path = format!("{owner}::{name}");
        let k = &v["inner"]["variant"]["kind"];
        let a = attrs(&v);
        if let Some(t) = k.get("tuple") {
            let tys: Vec<String> = t
                .as_array()
                .into_iter()
                .flatten()
                .map(|f| match f.as_u64().and_then(|f| self.item(f)) {
                    Some(fi) => ty(&fi["inner"]["struct_field"]),
                    None => "_".into(),
                })
                .collect();
            self.out
                .insert(format!("{path}: {a}variant({})", tys.join(", ")));
        } else if let Some(s) = k.get("struct") {
            self.out.insert(format!("{path}: {a}variant {{}}"));
            for f in ids(&s["fields"]) {
                self.field(f, &path);
            }
        } else {
            self.out.insert(format!("{path}: {a}variant"));
        }
    }

    /// Inherent methods and associated items, and the trait impls of a type.
    fn impls(&mut self, impls: &Value, path: &str) {
        for i in ids(impls) {
            let Some(imp) = self.item(i).cloned() else {
                continue;
            };
            let b = &imp["inner"]["impl"];
            if b["is_synthetic"] == true || !b["blanket_impl"].is_null() {
                continue;
            }
            match b.get("trait").filter(|t| !t.is_null()) {
                Some(t) => {
                    if t["path"] == "StructuralPartialEq" {
                        continue;
                    }
                    let neg = if b["is_negative"] == true { "!" } else { "" };
                    let g = generics(&b["generics"]);
                    let for_ty = ty(&b["for"]);
                    let own = PATHS.with(|p| p.borrow().get(&i).is_none())
                        && b["for"]["resolved_path"]["path"]
                            .as_str()
                            .is_some_and(|f| path.ends_with(&format!("::{}", last(f))));
                    let for_part = if own {
                        String::new()
                    } else {
                        format!(" for {for_ty}")
                    };
                    self.out
                        .insert(format!("{path}: impl{g} {neg}{}{for_part}", path_args(t)));
                }
                None => {
                    for m in ids(&b["items"]) {
                        if self.item(m).is_some_and(|x| x["visibility"] == "public") {
                            self.assoc(m, path);
                        }
                    }
                }
            }
        }
    }

    /// An associated function, constant or type.
    fn assoc(&mut self, id: u64, owner: &str) {
        let Some(it) = self.item(id).cloned() else {
            return;
        };
        let name = it["name"].as_str().unwrap_or_default();
        let path = format!("{owner}::{name}");
        let inner = &it["inner"];
        let line = if let Some(f) = inner.get("function") {
            format!("{path}: {}{}", attrs(&it), function(f))
        } else if let Some(c) = inner.get("assoc_const") {
            format!("{path}: const {}", ty(&c["type"]))
        } else if let Some(c) = inner.get("constant") {
            format!("{path}: const {}", ty(&c["type"]))
        } else if let Some(t) = inner.get("assoc_type") {
            format!("{path}: type{}", bounds(&t["bounds"]))
        } else {
            format!(
                "{path}: {}",
                inner
                    .as_object()
                    .and_then(|o| o.keys().next().cloned())
                    .unwrap_or_default()
            )
        };
        self.out.insert(line);
    }
}

/// The elements of a JSON array (none when it is not one).
fn arr(v: &Value) -> impl Iterator<Item = &Value> {
    v.as_array().into_iter().flatten()
}

/// `xs` joined by `sep` between `open` and `close`; empty when `xs` is.
fn wrap(xs: &[String], open: &str, sep: &str, close: &str) -> String {
    if xs.is_empty() {
        String::new()
    } else {
        format!("{open}{}{close}", xs.join(sep))
    }
}

fn ids(v: &Value) -> Vec<u64> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default()
}

/// `#[non_exhaustive] ` when it is.
fn attrs(it: &Value) -> String {
    let ne = arr(&it["attrs"])
        .any(|a| a == "non_exhaustive" || a.as_str().is_some_and(|s| s.contains("non_exhaustive")));
    if ne {
        "#[non_exhaustive] ".into()
    } else {
        String::new()
    }
}

fn function(f: &Value) -> String {
    let h = &f["header"];
    let mut s = String::new();
    if h["is_const"] == true {
        s += "const ";
    }
    if h["is_async"] == true {
        s += "async ";
    }
    if h["is_unsafe"] == true {
        s += "unsafe ";
    }
    s += "fn";
    s += &generics(&f["generics"]);
    let inputs: Vec<String> = arr(&f["sig"]["inputs"])
        .map(|p| {
            let name = p[0].as_str().unwrap_or("_");
            let t = &p[1];
            if name == "self" {
                match t.get("borrowed_ref") {
                    Some(r) if r["type"]["generic"] == "Self" => {
                        let m = if r["is_mutable"] == true { "mut " } else { "" };
                        let l = r["lifetime"]
                            .as_str()
                            .map(|l| format!("{l} "))
                            .unwrap_or_default();
                        format!("&{l}{m}self")
                    }
                    _ if t["generic"] == "Self" => "self".into(),
                    _ => format!("self: {}", ty(t)),
                }
            } else {
                format!("{name}: {}", ty(t))
            }
        })
        .collect();
    s += &format!("({})", inputs.join(", "));
    let out = &f["sig"]["output"];
    if !out.is_null() {
        s += &format!(" -> {}", ty(out));
    }
    s += &wheres(&f["generics"]);
    s
}

/// `<T: Bound, 'a>` (synthetic `impl Trait` parameters left out).
fn generics(g: &Value) -> String {
    let ps: Vec<String> = arr(&g["params"])
        .filter_map(|p| {
            let name = p["name"].as_str().unwrap_or_default();
            let k = &p["kind"];
            if let Some(t) = k.get("type") {
                if t["is_synthetic"] == true {
                    return None;
                }
                let d = if t["default"].is_null() {
                    String::new()
                } else {
                    format!(" = {}", ty(&t["default"]))
                };
                Some(format!("{name}{}{d}", bounds(&t["bounds"])))
            } else if let Some(c) = k.get("const") {
                Some(format!("const {name}: {}", ty(&c["type"])))
            } else {
                Some(name.to_string())
            }
        })
        .collect();
    wrap(&ps, "<", ", ", ">")
}

fn wheres(g: &Value) -> String {
    let ws: Vec<String> = arr(&g["where_predicates"])
        .filter_map(|w| {
            let b = w.get("bound_predicate")?;
            Some(format!("{}{}", ty(&b["type"]), bounds(&b["bounds"])))
        })
        .collect();
    wrap(&ws, " where ", ", ", "")
}

/// `: A + B` (empty when none).
fn bounds(b: &Value) -> String {
    let bs: Vec<String> = arr(b)
        .map(|b| {
            if let Some(t) = b.get("trait_bound") {
                let m = if t["modifier"] == "maybe" { "?" } else { "" };
                format!("{m}{}", path_args(&t["trait"]))
            } else if let Some(l) = b.get("outlives") {
                l.as_str().unwrap_or_default().to_string()
            } else {
                "use<..>".to_string()
            }
        })
        .collect();
    wrap(&bs, ": ", " + ", "")
}

/// A path with its generic arguments (`Result<T, E>`, `Fn(u8) -> u8`): an
/// item of this crate by its public path, another's by its name.
fn path_args(p: &Value) -> String {
    let written = p["path"].as_str().unwrap_or_default();
    let name = p["id"]
        .as_u64()
        .and_then(|id| PATHS.with(|m| m.borrow().get(&id).cloned()))
        .unwrap_or_else(|| last(written).to_string());
    format!("{name}{}", args(&p["args"]))
}

/// The last segment of a path.
fn last(p: &str) -> &str {
    p.rsplit("::").next().unwrap_or(p)
}

fn args(a: &Value) -> String {
    if let Some(ab) = a.get("angle_bracketed") {
        let mut xs: Vec<String> = ab["args"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|x| {
                if let Some(t) = x.get("type") {
                    ty(t)
                } else if let Some(l) = x.get("lifetime") {
                    l.as_str().unwrap_or_default().to_string()
                } else if let Some(c) = x.get("const") {
                    c["expr"].as_str().unwrap_or("_").to_string()
                } else {
                    "_".into()
                }
            })
            .collect();
        for c in arr(&ab["constraints"]) {
            let n = c["name"].as_str().unwrap_or_default();
            let b = &c["binding"];
            if let Some(t) = b.get("equality").and_then(|e| e.get("type")) {
                xs.push(format!("{n} = {}", ty(t)));
            } else if let Some(bs) = b.get("constraint") {
                xs.push(format!("{n}{}", bounds(bs)));
            }
        }
        wrap(&xs, "<", ", ", ">")
    } else if let Some(p) = a.get("parenthesized") {
        let ins: Vec<String> = p["inputs"]
            .as_array()
            .into_iter()
            .flatten()
            .map(ty)
            .collect();
        let out = if p["output"].is_null() {
            String::new()
        } else {
            format!(" -> {}", ty(&p["output"]))
        };
        format!("({}){out}", ins.join(", "))
    } else {
        String::new()
    }
}

/// A type as the source writes it.
fn ty(t: &Value) -> String {
    if let Some(p) = t.get("resolved_path") {
        return path_args(p);
    }
    if let Some(s) = t.get("primitive").and_then(Value::as_str) {
        return s.to_string();
    }
    if let Some(s) = t.get("generic").and_then(Value::as_str) {
        return s.to_string();
    }
    if let Some(r) = t.get("borrowed_ref") {
        let l = r["lifetime"]
            .as_str()
            .map(|l| format!("{l} "))
            .unwrap_or_default();
        let m = if r["is_mutable"] == true { "mut " } else { "" };
        return format!("&{l}{m}{}", ty(&r["type"]));
    }
    if let Some(r) = t.get("raw_pointer") {
        let m = if r["is_mutable"] == true {
            "mut"
        } else {
            "const"
        };
        return format!("*{m} {}", ty(&r["type"]));
    }
    if let Some(s) = t.get("slice") {
        return format!("[{}]", ty(s));
    }
    if let Some(a) = t.get("array") {
        return format!("[{}; {}]", ty(&a["type"]), a["len"].as_str().unwrap_or("_"));
    }
    if let Some(ts) = t.get("tuple") {
        let xs: Vec<String> = arr(ts).map(ty).collect();
        return format!("({})", xs.join(", "));
    }
    if let Some(b) = t.get("impl_trait") {
        return format!("impl{}", bounds(b).replacen(':', "", 1));
    }
    if let Some(d) = t.get("dyn_trait") {
        let xs: Vec<String> = d["traits"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|x| path_args(&x["trait"]))
            .collect();
        let l = d["lifetime"]
            .as_str()
            .map(|l| format!(" + {l}"))
            .unwrap_or_default();
        return format!("dyn {}{l}", xs.join(" + "));
    }
    if let Some(q) = t.get("qualified_path") {
        let name = q["name"].as_str().unwrap_or_default();
        let self_ty = ty(&q["self_type"]);
        return match q.get("trait").filter(|t| !t.is_null()) {
            Some(tr) => format!("<{self_ty} as {}>::{name}", path_args(tr)),
            None => format!("{self_ty}::{name}"),
        };
    }
    if let Some(f) = t.get("function_pointer") {
        let ins: Vec<String> = f["sig"]["inputs"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| ty(&p[1]))
            .collect();
        let out = if f["sig"]["output"].is_null() {
            String::new()
        } else {
            format!(" -> {}", ty(&f["sig"]["output"]))
        };
        return format!("fn({}){out}", ins.join(", "));
    }
    if t.get("infer").is_some() {
        return "_".into();
    }
    t.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(json: &str) -> String {
        ty(&serde_json::from_str(json).unwrap())
    }

    #[test]
    fn types_read_as_the_source_writes_them() {
        assert_eq!(
            t(
                r#"{"borrowed_ref": {"lifetime": "'a", "is_mutable": true, "type": {"slice": {"primitive": "u8"}}}}"#
            ),
            "&'a mut [u8]"
        );
        assert_eq!(
            t(
                r#"{"resolved_path": {"path": "Option", "id": 999999, "args": {"angle_bracketed": {"args": [{"type": {"tuple": [{"primitive": "u32"}, {"generic": "T"}]}}], "constraints": []}}}}"#
            ),
            "Option<(u32, T)>"
        );
        assert_eq!(
            t(
                r#"{"dyn_trait": {"traits": [{"trait": {"path": "std::ops::Fn", "id": 999998, "args": {"parenthesized": {"inputs": [{"primitive": "u8"}], "output": {"primitive": "bool"}}}}, "generic_params": []}], "lifetime": null}}"#
            ),
            "dyn Fn(u8) -> bool"
        );
    }

    #[test]
    fn a_diff_names_the_lines_gone_and_the_lines_new() {
        assert_eq!(diff("a\nb\n", "b\nc\n"), "- a\n+ c\n");
        assert_eq!(diff("a\n", "a\n"), "");
    }
}
