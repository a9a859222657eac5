//! `network.json`: nested node objects keyed by node name.
//!
//! See [`parse_network_json_with_report`] for the accepted form.

use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::error::ModelError;
use crate::network::Network;
use crate::rate::{Rate, RateError};
use crate::report::{Problem, Report};
use crate::shaped_devices::rate_error_message;
use crate::types::Node;

/// Nesting beyond this is not read at all (far beyond what LibreQoS shapes,
/// see [`Network::MAX_NODE_DEPTH`](crate::Network::MAX_NODE_DEPTH); bounds work and stack on
/// hostile input).
const MAX_NESTING: usize = 32;

/// The level whose nodes take in every deeper node (LibreQoS's flattening:
/// a node below level [`Network::MAX_NODE_DEPTH`](crate::Network::MAX_NODE_DEPTH) becomes a
/// child of its ancestor at this level).
const FLATTEN_UNDER: usize = crate::network::Network::MAX_NODE_DEPTH - 1;

/// A JSON object as its entries in file order, values left unparsed.
struct Entries<'a>(Vec<(String, &'a RawValue)>);

impl<'de: 'a, 'a> Deserialize<'de> for Entries<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Entries<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, &'a RawValue>()? {
                    out.push((k, v));
                }
                Ok(Entries(out))
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

/// Reads `network.json`; `file` names it in messages.
///
/// Returns the first error if the file has any (use
/// [`parse_network_json_with_report`] to get every problem and the
/// warnings).
///
/// ```
/// let json = r#"{"Site_1": {"downloadBandwidthMbps": 1000, "uploadBandwidthMbps": 100.5,
///                "children": {"AP_A": {"downloadBandwidthMbps": 500, "uploadBandwidthMbps": 50}}}}"#;
/// let net = lqos_model::network_json::parse_network_json("network.json", json).unwrap();
/// assert_eq!(net.node_count(), 2);
/// assert_eq!(net.depth(), 2);
/// let site = net.node(net.roots()[0]);
/// assert_eq!(site.upload.to_string(), "100.5");
/// ```
pub fn parse_network_json(file: &str, text: &str) -> Result<Network, ModelError> {
    let (net, report) = parse_network_json_with_report(file, text)?;
    let first = report.errors().next().cloned();
    match first {
        Some(p) => Err(ModelError::Invalid(Box::new(p))),
        None => Ok(net),
    }
}

/// Reads `network.json`, collecting every node problem into a report.
///
/// Each node is an object with `downloadBandwidthMbps` and
/// `uploadBandwidthMbps` (numbers, fractional allowed, read exactly from
/// their decimal text, never through a float), optional `type` (string),
/// `id` (string or number), `virtual` (bool) and `children` (an object of
/// nodes). Other keys are ignored. `{}` is a flat network. Nodes keep file
/// order.
///
/// Node problems (a bandwidth that is not a number, absurd rates, a
/// duplicate name or `id`, a value that is not an object) are collected with the
/// node's line; a node whose name is a duplicate is dropped with its
/// subtree, as LibreQoS does.
///
/// What LibreQoS loads with a warning loads here with one, the same way:
///
/// - A bandwidth that is 0, negative or missing: the node takes its
///   parent's rate (the link's for a top-level node). It is kept as
///   [`Rate::ZERO`], which the planner reads as "inherit".
/// - A node deeper than [`Network::MAX_NODE_DEPTH`](crate::Network::MAX_NODE_DEPTH) levels
///   (virtual nodes not counted): it becomes a child of its ancestor at
///   level 5 (so every descendant of a level-5 node is at level 6), with
///   its rates capped by the ancestors it left (what it inherited).
/// - `"type": "virtual"` (any case) marks a virtual node, like
///   `"virtual": true`.
///
/// `Err` only when the text is not JSON or its top level is not an object.
pub fn parse_network_json_with_report(
    file: &str,
    text: &str,
) -> Result<(Network, Report), ModelError> {
    parse_with_lines(file, text).map(|(n, r, _)| (n, r))
}

/// The parse plus the 1-based line of each node (indexed by `NodeIdx`).
pub(crate) fn parse_with_lines(
    file: &str,
    text: &str,
) -> Result<(Network, Report, Vec<usize>), ModelError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let top: Entries<'_> = serde_json::from_str(text).map_err(|e| ModelError::Json {
        file: file.to_string(),
        line: e.line(),
        column: e.column(),
        message: strip_position(&e.to_string()),
    })?;
    let mut p = JsonParser {
        file,
        text,
        line_starts: line_starts(text),
        net: Network::new(),
        report: Report::new(),
        node_lines: Vec::new(),
        ids: std::collections::HashMap::new(),
    };
    p.nodes(None, &[], top, 1);
    Ok((p.net, p.report, p.node_lines))
}

/// serde_json appends " at line L column C"; we print the position ourselves.
fn strip_position(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg.to_string(),
    }
}

fn line_starts(text: &str) -> Vec<usize> {
    std::iter::once(0)
        .chain(
            text.bytes()
                .enumerate()
                .filter(|&(_, b)| b == b'\n')
                .map(|(i, _)| i + 1),
        )
        .collect()
}

struct JsonParser<'a> {
    file: &'a str,
    text: &'a str,
    line_starts: Vec<usize>,
    net: Network,
    report: Report,
    node_lines: Vec<usize>,
    ids: std::collections::HashMap<String, (String, usize)>,
}

impl<'a> JsonParser<'a> {
    /// 1-based line of a raw value (a slice of `self.text`).
    fn line_of(&self, raw: &RawValue) -> usize {
        let offset = (raw.get().as_ptr() as usize).wrapping_sub(self.text.as_ptr() as usize);
        if offset > self.text.len() {
            return 0;
        }
        self.line_starts.partition_point(|&s| s <= offset)
    }

    /// `parent`: the node's parent in the file; `chain`: its non-virtual
    /// ancestors (top first) as placed, with their rates.
    fn nodes(
        &mut self,
        parent: Option<&str>,
        chain: &[Placed],
        entries: Entries<'a>,
        level: usize,
    ) {
        for (name, raw) in entries.0 {
            self.node(parent, chain, name, raw, level);
        }
    }

    fn node(
        &mut self,
        parent: Option<&str>,
        chain: &[Placed],
        name: String,
        raw: &'a RawValue,
        level: usize,
    ) {
        let line = self.line_of(raw);
        let file = self.file;
        let err = |msg: String| Problem::error(file, msg).at(line).node(&name);
        let warn = |msg: String| Problem::warning(file, msg).at(line).node(&name);
        if level > MAX_NESTING {
            self.report.push(err(format!(
                "node is nested more than {MAX_NESTING} levels deep; skipped with its children"
            )));
            return;
        }
        let fields: Entries<'a> = match serde_json::from_str(raw.get()) {
            Ok(f) => f,
            Err(_) => {
                self.report.push(err(format!(
                    "node is {}, not an object; skipped",
                    json_kind(raw.get())
                )));
                return;
            }
        };
        let mut download = None;
        let mut upload = None;
        let mut node_type = None;
        let mut id = None;
        let mut virtual_node = false;
        let mut children = None;
        // In the order found; `true` for a warning.
        let mut problems: Vec<(bool, String)> = Vec::new();
        for (key, value) in fields.0 {
            let v = value.get().trim();
            match key.as_str() {
                "downloadBandwidthMbps" | "uploadBandwidthMbps" => {
                    let label = if key.starts_with("download") {
                        "downloadBandwidthMbps"
                    } else {
                        "uploadBandwidthMbps"
                    };
                    let inherit = INHERIT;
                    let rate = match json_rate(v) {
                        Ok(r) if r.is_zero() => {
                            problems.push((true, format!("{label} is {v}; {inherit}")));
                            Some(r)
                        }
                        Err(RateError::Negative(_)) => {
                            problems.push((true, format!("{label} {v} is negative; {inherit}")));
                            Some(Rate::ZERO)
                        }
                        Ok(r) if r > Rate::MAX_PLAUSIBLE => {
                            problems.push((
                                false,
                                format!(
                                    "{label} {v} is absurdly large (above {} Mbps)",
                                    Rate::MAX_PLAUSIBLE
                                ),
                            ));
                            Some(r)
                        }
                        Ok(r) => Some(r),
                        Err(e) => {
                            problems.push((false, rate_error_message(label, &e)));
                            Some(Rate::ZERO)
                        }
                    };
                    if label.starts_with("download") {
                        download = rate;
                    } else {
                        upload = rate;
                    }
                }
                "type" => match serde_json::from_str::<Option<String>>(v) {
                    Ok(t) => {
                        // LibreQoS's legacy marker of a virtual node.
                        virtual_node |= t
                            .as_deref()
                            .is_some_and(|t| t.eq_ignore_ascii_case("virtual"));
                        node_type = t;
                    }
                    Err(_) => {
                        problems.push((false, format!("type is {}, not a string", json_kind(v))))
                    }
                },
                "id" => {
                    if let Ok(s) = serde_json::from_str::<Option<String>>(v) {
                        id = s;
                    } else if v.starts_with(|c: char| c == '-' || c.is_ascii_digit()) {
                        id = Some(v.to_string());
                    } else {
                        problems.push((false, format!("id is {}, not a string", json_kind(v))));
                    }
                }
                "virtual" => match serde_json::from_str::<Option<bool>>(v) {
                    Ok(b) => virtual_node |= b.unwrap_or(false),
                    Err(_) => problems.push((
                        false,
                        format!("virtual is {}, not true or false", json_kind(v)),
                    )),
                },
                "children" => match serde_json::from_str::<Entries<'a>>(value.get()) {
                    Ok(c) => children = Some(c),
                    Err(_) if v == "null" => {}
                    Err(_) => problems.push((
                        false,
                        format!("children is {}, not an object", json_kind(v)),
                    )),
                },
                _ => {}
            }
        }
        for (label, r) in [
            ("downloadBandwidthMbps", download),
            ("uploadBandwidthMbps", upload),
        ] {
            if r.is_none() {
                problems.push((true, format!("{label} is missing; {INHERIT}")));
            }
        }
        for (warning, m) in problems {
            self.report.push(if warning { warn(m) } else { err(m) });
        }
        let mut node = Node {
            name: name.clone(),
            id,
            node_type,
            download: download.unwrap_or(Rate::ZERO),
            upload: upload.unwrap_or(Rate::ZERO),
            virtual_node,
        };
        // Where it goes: under its parent, or (deeper than LibreQoS keeps)
        // under its level-5 ancestor, capped by the ancestors it leaves.
        let mut attach = parent.map(str::to_string);
        let level_here = chain.len() + 1;
        if !virtual_node && level_here > crate::network::Network::MAX_NODE_DEPTH {
            let skipped = &chain[FLATTEN_UNDER..];
            let cap = |own: Rate, pick: fn(&Placed) -> Rate| {
                skipped
                    .iter()
                    .map(pick)
                    .chain([own])
                    .filter(|r| !r.is_zero())
                    .min()
                    .unwrap_or(Rate::ZERO)
            };
            node.download = cap(node.download, |p| p.download);
            node.upload = cap(node.upload, |p| p.upload);
            let under = &chain[FLATTEN_UNDER - 1].name;
            let rate = |r: Rate| {
                if r.is_zero() {
                    format!("{under:?}'s")
                } else {
                    format!("{r} Mbps")
                }
            };
            self.report.push(warn(format!(
                "node is at level {level_here} (virtual nodes not counted); as LibreQoS does below {} levels, it becomes a child of {under:?} at level {}, with download {} and upload {} (capped by the parents it leaves)",
                crate::network::Network::MAX_NODE_DEPTH,
                crate::network::Network::MAX_NODE_DEPTH,
                rate(node.download),
                rate(node.upload),
            )));
            attach = Some(under.clone());
        }
        let placed = Placed {
            name: name.clone(),
            download: node.download,
            upload: node.upload,
        };
        let node_id = node.id.clone();
        match self.net.add_node(attach.as_deref(), node) {
            Ok(idx) => {
                if let Some(id) = node_id {
                    if let Some((other, other_line)) = self.ids.get(&id) {
                        self.report.push(err(format!(
                            "node id {id:?} is already used by node {other:?} (line {other_line})"
                        )));
                    } else {
                        self.ids.insert(id, (name.clone(), line));
                    }
                }
                if self.node_lines.len() <= idx.index() {
                    self.node_lines.resize(idx.index() + 1, 0);
                }
                self.node_lines[idx.index()] = line;
                if let Some(c) = children {
                    let mut below = chain.to_vec();
                    if !virtual_node {
                        below.push(placed);
                    }
                    self.nodes(Some(&name), &below, c, level + 1);
                }
            }
            Err(_) => self.report.push(err(
                "node name is used twice; this one is skipped with its children".to_string(),
            )),
        }
    }
}

/// What a node without a usable rate gets.
const INHERIT: &str =
    "it takes its parent node's rate (the link's at the top level), as LibreQoS does";

/// A non-virtual ancestor as placed: its name and (capped) rates.
#[derive(Clone)]
struct Placed {
    name: String,
    download: Rate,
    upload: Rate,
}

fn json_kind(v: &str) -> &'static str {
    match v.trim_start().as_bytes().first() {
        Some(b'{') => "an object",
        Some(b'[') => "an array",
        Some(b'"') => "a string",
        Some(b't' | b'f') => "a boolean",
        Some(b'n') => "null",
        _ => "a number",
    }
}

/// Reads a JSON number (or a string holding one) as an exact Mbps rate.
fn json_rate(v: &str) -> Result<Rate, RateError> {
    let text = match serde_json::from_str::<String>(v) {
        Ok(s) => s,
        Err(_) => v.to_string(),
    };
    Rate::from_mbps_str(&expand_exponent(text.trim()).ok_or(RateError::NotANumber(text.clone()))?)
        .map_err(|e| match e {
            RateError::Empty => RateError::Empty,
            RateError::Negative(_) => RateError::Negative(text.clone()),
            RateError::NotANumber(_) => RateError::NotANumber(text.clone()),
            RateError::TooPrecise(_) => RateError::TooPrecise(text.clone()),
            RateError::TooLarge(_) => RateError::TooLarge(text.clone()),
        })
}

/// Rewrites `1.5e3` as `1500` (plain decimal text); other text unchanged.
/// `None` for an exponent that is not a number.
fn expand_exponent(s: &str) -> Option<String> {
    let Some((mant, exp)) = s.split_once(['e', 'E']) else {
        return Some(s.to_string());
    };
    let exp: i64 = exp.parse().ok()?;
    let (sign, mant) = match mant.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mant),
    };
    let (int, frac) = mant.split_once('.').unwrap_or((mant, ""));
    if !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) || int.len() + frac.len() == 0 {
        return None;
    }
    let digits: String = format!("{int}{frac}");
    if digits.bytes().all(|b| b == b'0') {
        return Some("0".to_string());
    }
    if exp.abs() > 64 {
        // Far outside any rate: keep it recognisably too large / too precise.
        return Some(if exp > 0 {
            format!("{sign}{}", "9".repeat(40))
        } else {
            format!("{sign}0.{}1", "0".repeat(40))
        });
    }
    let point = int.len() as i64 + exp;
    let out = if point <= 0 {
        format!("0.{}{digits}", "0".repeat((-point) as usize))
    } else if point as usize >= digits.len() {
        format!("{digits}{}", "0".repeat(point as usize - digits.len()))
    } else {
        format!(
            "{}.{}",
            &digits[..point as usize],
            &digits[point as usize..]
        )
    };
    Some(format!("{sign}{out}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponents_expand_exactly() {
        assert_eq!(expand_exponent("1.5e3").unwrap(), "1500");
        assert_eq!(expand_exponent("25E-1").unwrap(), "2.5");
        assert_eq!(expand_exponent("1e-6").unwrap(), "0.000001");
        assert_eq!(expand_exponent("100").unwrap(), "100");
        assert_eq!(json_rate("2.8e-3").unwrap().bps(), 2800);
        assert!(matches!(json_rate("1e-7"), Err(RateError::TooPrecise(_))));
        assert!(matches!(json_rate("1e300"), Err(RateError::TooLarge(_))));
        assert!(matches!(json_rate("-5"), Err(RateError::Negative(_))));
        assert_eq!(json_rate("\"10.5\"").unwrap().to_string(), "10.5");
    }
}
