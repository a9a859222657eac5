//! `network.json`: nested node objects keyed by node name.
//!
//! See [`parse_network_json_with_report`] for the accepted form.

use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::report::{Problem, Report};
use crate::shaped_devices::rate_error_message;
use crate::validate::MAX_RATE;
use crate::{ModelError, Network, Node, Rate, RateError};

/// Nesting beyond this is not read at all (far beyond what HTB can shape,
/// see [`MAX_NODE_DEPTH`](crate::MAX_NODE_DEPTH); bounds work and stack on
/// hostile input).
const MAX_NESTING: usize = 32;

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
/// let net = lqos_model::parse_network_json("network.json", json).unwrap();
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
/// Node problems (missing or bad bandwidth, zero or absurd rates, a
/// duplicate name or `id`, a value that is not an object) are collected with the
/// node's line; a node whose name is a duplicate is dropped with its
/// subtree, as LibreQoS does.
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
    p.nodes(None, top, 1);
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

    fn nodes(&mut self, parent: Option<&str>, entries: Entries<'a>, level: usize) {
        for (name, raw) in entries.0 {
            self.node(parent, name, raw, level);
        }
    }

    fn node(&mut self, parent: Option<&str>, name: String, raw: &'a RawValue, level: usize) {
        let line = self.line_of(raw);
        let file = self.file;
        let err = |msg: String| Problem::error(file, msg).at(line).node(&name);
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
        let mut problems = Vec::new();
        for (key, value) in fields.0 {
            let v = value.get().trim();
            match key.as_str() {
                "downloadBandwidthMbps" | "uploadBandwidthMbps" => {
                    let label = if key.starts_with("download") {
                        "downloadBandwidthMbps"
                    } else {
                        "uploadBandwidthMbps"
                    };
                    let rate = match json_rate(v) {
                        Ok(r) if r.is_zero() => {
                            problems.push(format!("{label} {v} is zero"));
                            Some(r)
                        }
                        Ok(r) if r > MAX_RATE => {
                            problems.push(format!(
                                "{label} {v} is absurdly large (above {} Mbps)",
                                MAX_RATE
                            ));
                            Some(r)
                        }
                        Ok(r) => Some(r),
                        Err(e) => {
                            problems.push(rate_error_message(label, &e));
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
                    Ok(t) => node_type = t,
                    Err(_) => problems.push(format!("type is {}, not a string", json_kind(v))),
                },
                "id" => {
                    if let Ok(s) = serde_json::from_str::<Option<String>>(v) {
                        id = s;
                    } else if v.starts_with(|c: char| c == '-' || c.is_ascii_digit()) {
                        id = Some(v.to_string());
                    } else {
                        problems.push(format!("id is {}, not a string", json_kind(v)));
                    }
                }
                "virtual" => match serde_json::from_str::<Option<bool>>(v) {
                    Ok(b) => virtual_node = b.unwrap_or(false),
                    Err(_) => {
                        problems.push(format!("virtual is {}, not true or false", json_kind(v)))
                    }
                },
                "children" => match serde_json::from_str::<Entries<'a>>(value.get()) {
                    Ok(c) => children = Some(c),
                    Err(_) if v == "null" => {}
                    Err(_) => problems.push(format!("children is {}, not an object", json_kind(v))),
                },
                _ => {}
            }
        }
        if download.is_none() {
            problems.push("downloadBandwidthMbps is missing".to_string());
        }
        if upload.is_none() {
            problems.push("uploadBandwidthMbps is missing".to_string());
        }
        for m in problems {
            self.report.push(err(m));
        }
        let node = Node {
            name: name.clone(),
            id,
            node_type,
            download: download.unwrap_or(Rate::ZERO),
            upload: upload.unwrap_or(Rate::ZERO),
            virtual_node,
        };
        let node_id = node.id.clone();
        match self.net.add_node(parent, node) {
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
                    self.nodes(Some(&name), c, level + 1);
                }
            }
            Err(_) => self.report.push(err(
                "node name is used twice; this one is skipped with its children".to_string(),
            )),
        }
    }
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
