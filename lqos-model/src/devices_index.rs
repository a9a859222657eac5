//! Incremental re-reading of `ShapedDevices.csv`: after an edit of a few
//! rows (a CRM changing a plan, an operator fixing a name), read and check
//! only the circuits whose rows changed, instead of the whole file.
//!
//! [`DevicesIndex`] keeps the last good file's bytes, where each of its
//! records is, which circuit each line belongs to, and every circuit's
//! addresses (merged into disjoint ranges: in a valid file no two circuits
//! overlap). [`DevicesIndex::edit`] compares a new version with it: the
//! common byte prefix and suffix give the changed records; their circuits
//! are read again, all of their rows, with the parser of
//! [`parse_shaped_devices`](crate::parse_shaped_devices), and checked with
//! the rules of [`validate`](crate::validate). The result is exact, or the
//! edit is refused and the caller reads the whole file:
//!
//! - [`DevicesEdit::Patch`]: the changed circuits as a full read of the new
//!   file would give them, with their warnings (the same problems, in the
//!   same order, that a full read reports on those circuits' lines). Every
//!   other circuit is unchanged by construction: same bytes, same lines.
//! - [`DevicesEdit::Full`] with the reason when the edit is not one of
//!   those: the header or a comment/blank line changed, rows were added or
//!   removed (line numbers would shift), a row spans lines, a changed row
//!   has another field count, Circuit ID, Device ID or parent node than
//!   before, or more than [`MAX_CHANGED_ROWS`] rows changed. An edit with
//!   any error (a bad rate, an address another circuit has) is also
//!   refused, so that the full read reports every problem exactly as it
//!   always does.

use std::collections::BTreeMap;

use crate::report::Report;
use crate::shaped_devices::{field_count, header_cols, parse_rows, record_spans, Col, RecordSpan};
use crate::{Circuit, Network};

/// Most changed rows an edit may have to be read incrementally (more: read
/// the whole file).
pub const MAX_CHANGED_ROWS: usize = 256;

/// The last good `ShapedDevices.csv`, indexed for [`DevicesIndex::edit`].
#[derive(Debug, Clone)]
pub struct DevicesIndex {
    file: String,
    bytes: Vec<u8>,
    /// Length of the byte order mark (0 or 3).
    bom: usize,
    /// Every record, header first, in BOM-stripped coordinates.
    spans: Vec<RecordSpan>,
    cols: Vec<Option<Col>>,
    /// Circuit index + 1 of the device row starting on each line (0: none).
    line_circuit: Vec<u32>,
    v4: BTreeMap<u32, (u32, u32)>,
    v6: BTreeMap<u128, (u128, u32)>,
}

/// What an edit of `ShapedDevices.csv` needs, from [`DevicesIndex::edit`].
#[derive(Debug, Clone)]
pub enum DevicesEdit {
    /// The bytes are the same.
    Same,
    /// Only these circuits changed; read exactly.
    Patch(DevicesPatch),
    /// Read the whole file (why, for the logs).
    Full(String),
}

/// The circuits an edit changed, read and checked.
#[derive(Debug, Clone)]
pub struct DevicesPatch {
    /// `(index in the network's circuits, the circuit as read now)`, by
    /// index.
    pub circuits: Vec<(usize, Circuit)>,
    /// The problems a full read reports on these circuits' lines (warnings
    /// only: an edit with errors is [`DevicesEdit::Full`]).
    pub report: Report,
    /// Rows read.
    pub rows: usize,
    new_spans: Vec<RecordSpan>,
    first: usize,
    delta: isize,
    bytes: Vec<u8>,
}

/// A circuit's addresses merged into disjoint ranges.
fn ranges(c: &Circuit) -> (Vec<(u32, u32)>, Vec<(u128, u128)>) {
    fn merge<T: Ord + Copy>(mut v: Vec<(T, T)>) -> Vec<(T, T)> {
        v.sort();
        let mut out: Vec<(T, T)> = Vec::with_capacity(v.len());
        for (s, e) in v {
            match out.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => out.push((s, e)),
            }
        }
        out
    }
    let v4 = c
        .devices
        .iter()
        .flat_map(|d| &d.ipv4)
        .map(|n| (u32::from(n.network()), u32::from(n.broadcast())))
        .collect();
    let v6 = c
        .devices
        .iter()
        .flat_map(|d| &d.ipv6)
        .map(|n| (u128::from(n.network()), u128::from(n.broadcast())))
        .collect();
    (merge(v4), merge(v6))
}

/// Whether `[s, e]` overlaps a range in `map` of a circuit not in `skip`
/// (the ranges of different circuits are disjoint, so the nearest one
/// starting at or before `e` is the only candidate).
fn hits<T: Ord + Copy>(map: &BTreeMap<T, (T, u32)>, s: T, e: T, skip: &[usize]) -> bool {
    map.range(..=e)
        .rev()
        .find(|(_, &(_, c))| !skip.contains(&(c as usize)))
        .is_some_and(|(_, &(end, _))| end >= s)
}

impl DevicesIndex {
    /// Indexes `bytes`, the file `network`'s circuits were read from
    /// (labelled `file`, as in its problems). `None` if the file cannot be
    /// indexed (no header, a quote never closed); then every edit is a
    /// full read.
    pub fn new(file: &str, bytes: Vec<u8>, network: &Network) -> Option<DevicesIndex> {
        let bom = if bytes.starts_with(b"\xEF\xBB\xBF") {
            3
        } else {
            0
        };
        let data = &bytes[bom..];
        let spans = record_spans(data)?;
        let cols = header_cols(file, data).ok()?;
        let last_line = spans.last().map_or(0, |s| s.line);
        let mut line_circuit = vec![0u32; last_line + 2];
        let mut v4 = BTreeMap::new();
        let mut v6 = BTreeMap::new();
        for (ci, c) in network.circuits().iter().enumerate() {
            for d in &c.devices {
                *line_circuit.get_mut(d.line)? = ci as u32 + 1;
            }
            let (a, b) = ranges(c);
            v4.extend(a.into_iter().map(|(s, e)| (s, (e, ci as u32))));
            v6.extend(b.into_iter().map(|(s, e)| (s, (e, ci as u32))));
        }
        Some(DevicesIndex {
            file: file.to_string(),
            bytes,
            bom,
            spans,
            cols,
            line_circuit,
            v4,
            v6,
        })
    }

    /// The indexed file's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Compares `new` (the file's new content) with the indexed one;
    /// `network` is the model read from the indexed bytes.
    pub fn edit(&self, network: &Network, new: &[u8]) -> DevicesEdit {
        match self.try_edit(network, new) {
            Ok(Some(p)) => DevicesEdit::Patch(p),
            Ok(None) => DevicesEdit::Same,
            Err(why) => DevicesEdit::Full(why.to_string()),
        }
    }

    fn try_edit(&self, network: &Network, new: &[u8]) -> Result<Option<DevicesPatch>, &str> {
        let old = &self.bytes;
        if old.as_slice() == new {
            return Ok(None);
        }
        let bom = self.bom;
        if new.len() < bom || new[..bom] != old[..bom] {
            return Err("the byte order mark changed");
        }
        let (o, n) = (&old[bom..], &new[bom..]);
        let max = o.len().min(n.len());
        let prefix = o.iter().zip(n).take_while(|(a, b)| a == b).count();
        let suffix = o
            .iter()
            .rev()
            .zip(n.iter().rev())
            .take(max - prefix)
            .take_while(|(a, b)| a == b)
            .count();
        let changed_end = o.len() - suffix; // exclusive, old coordinates
        // The records the changed bytes touch (an insertion touches the
        // record it is in).
        let containing = |at: usize| self.spans.partition_point(|s| s.start <= at).checked_sub(1);
        let first = containing(prefix).ok_or("the edit is before the header")?;
        let last = if changed_end > prefix {
            containing(changed_end - 1).ok_or("the edit is before the header")?
        } else {
            first
        };
        if first == 0 {
            return Err("the header changed");
        }
        let (fs, ls) = (self.spans[first], self.spans[last]);
        if prefix >= fs.end.max(fs.start + 1) || changed_end > ls.end {
            return Err("a comment or blank line changed");
        }
        if last + 1 - first > MAX_CHANGED_ROWS {
            return Err("too many rows changed");
        }
        let single_line = |text: &[u8]| {
            let body = text
                .strip_suffix(b"\n")
                .map(|t| t.strip_suffix(b"\r").unwrap_or(t))
                .or_else(|| text.strip_suffix(b"\r"))
                .unwrap_or(text);
            !body.iter().any(|&b| b == b'\r' || b == b'\n')
        };
        for k in first..=last {
            let s = self.spans[k];
            if k < last && s.end != self.spans[k + 1].start {
                return Err("a comment or blank line changed");
            }
            if !single_line(&o[s.start..s.end]) || s.line != fs.line + (k - first) {
                return Err("a changed row spans lines");
            }
        }
        let delta = n.len() as isize - o.len() as isize;
        let region_end = (ls.end as isize + delta) as usize;
        let region = &n[fs.start..region_end];
        if region_end < n.len() && !region.ends_with(b"\n") {
            return Err("a row's line end changed");
        }
        // The new region, line by line: as many one-line rows as before.
        let mut new_spans = Vec::with_capacity(last + 1 - first);
        let mut at = fs.start;
        while at < region_end {
            let rest = &n[at..region_end];
            let mut len = rest
                .iter()
                .position(|&b| b == b'\n' || b == b'\r')
                .map_or(rest.len(), |i| i + 1);
            if rest.get(len - 1) == Some(&b'\r') && rest.get(len) == Some(&b'\n') {
                len += 1;
            }
            let k = first + new_spans.len();
            if k > last {
                return Err("rows were added");
            }
            new_spans.push(RecordSpan {
                start: at,
                end: at + len,
                line: self.spans[k].line,
            });
            at += len;
        }
        if new_spans.len() != last + 1 - first {
            return Err("rows were removed");
        }
        // The changed rows' circuits, every row of each.
        let mut changed: Vec<usize> = Vec::new();
        for s in &self.spans[first..=last] {
            match self.line_circuit.get(s.line).copied().unwrap_or(0) {
                0 => return Err("a changed row was not a device row"),
                c => changed.push(c as usize - 1),
            }
        }
        changed.sort_unstable();
        changed.dedup();
        let circuits = network.circuits();
        let mut rows: Vec<(usize, &[u8], usize)> = Vec::new();
        for &ci in &changed {
            for d in &circuits[ci].devices {
                let k = self.spans.partition_point(|s| s.line < d.line);
                let old_span = self.spans.get(k).filter(|s| s.line == d.line);
                let old_span = old_span.ok_or("a device row was not found")?;
                let old_text = &o[old_span.start..old_span.end];
                let want = field_count(old_text).ok_or("a row could not be read")?;
                let text = if (first..=last).contains(&k) {
                    let s = new_spans[k - first];
                    &n[s.start..s.end]
                } else {
                    let shift = if k > last { delta } else { 0 };
                    let start = (old_span.start as isize + shift) as usize;
                    &n[start..start + old_text.len()]
                };
                rows.push((d.line, text, want));
            }
        }
        let mut sd = parse_rows(&self.file, &self.cols, &rows)
            .ok_or("a changed row is not one row with its old field count")?;
        if sd.report.has_errors() {
            return Err("the changed rows have errors");
        }
        if sd.circuits.len() != changed.len() {
            return Err("a Circuit ID changed");
        }
        for (c, &ci) in sd.circuits.iter().zip(&changed) {
            let old = &circuits[ci];
            let same_devices = c.devices.len() == old.devices.len()
                && c.devices
                    .iter()
                    .zip(&old.devices)
                    .all(|(a, b)| a.id == b.id && a.line == b.line);
            if c.id != old.id || !same_devices {
                return Err("a Circuit ID or Device ID changed");
            }
        }
        // What `load` does after parsing, for these circuits only.
        let mut report = std::mem::take(&mut sd.report);
        crate::load::resolve_parent_ids(
            network,
            &mut sd.circuits,
            &sd.parent_node_ids,
            &self.file,
            &mut report,
        );
        for (c, &ci) in sd.circuits.iter().zip(&changed) {
            if c.parent != circuits[ci].parent {
                return Err("a circuit moved to another parent node");
            }
        }
        for c in &sd.circuits {
            crate::validate::check_circuit(network, c, &self.file, true, &mut report);
        }
        for c in &sd.circuits {
            crate::validate::check_overlaps_of(std::slice::from_ref(c), &self.file, &mut report);
        }
        if report.has_errors() {
            return Err("the changed circuits have errors");
        }
        // Addresses against every other circuit (and each other).
        let mut fresh: Vec<(usize, Vec<(u32, u32)>, Vec<(u128, u128)>)> = Vec::new();
        for (c, &ci) in sd.circuits.iter().zip(&changed) {
            let (a, b) = ranges(c);
            let clash = a.iter().any(|&(s, e)| hits(&self.v4, s, e, &changed))
                || b.iter().any(|&(s, e)| hits(&self.v6, s, e, &changed))
                || fresh.iter().any(|(_, fa, fb)| {
                    a.iter()
                        .any(|&(s, e)| fa.iter().any(|&(t, f)| s <= f && t <= e))
                        || b.iter()
                            .any(|&(s, e)| fb.iter().any(|&(t, f)| s <= f && t <= e))
                });
            if clash {
                return Err("an address overlaps another circuit's");
            }
            fresh.push((ci, a, b));
        }
        report.problems.sort_by_key(|p| p.line.unwrap_or(0));
        Ok(Some(DevicesPatch {
            rows: rows.len(),
            circuits: changed.into_iter().zip(sd.circuits).collect(),
            report,
            new_spans,
            first,
            delta,
            bytes: new.to_vec(),
        }))
    }

    /// Applies `patch` (from [`edit`](Self::edit) on this index and
    /// `network`): the circuits are replaced in `network` and the index
    /// describes the new file.
    pub fn commit(&mut self, network: &mut Network, patch: DevicesPatch) {
        for (ci, c) in patch.circuits {
            let (a, b) = ranges(&network.circuits()[ci]);
            for (s, _) in a {
                self.v4.remove(&s);
            }
            for (s, _) in b {
                self.v6.remove(&s);
            }
            let (a, b) = ranges(&c);
            self.v4
                .extend(a.into_iter().map(|(s, e)| (s, (e, ci as u32))));
            self.v6
                .extend(b.into_iter().map(|(s, e)| (s, (e, ci as u32))));
            network.replace_circuit(ci, c);
        }
        let first = patch.first;
        let last = first + patch.new_spans.len() - 1;
        self.spans[first..=last].copy_from_slice(&patch.new_spans);
        for s in &mut self.spans[last + 1..] {
            s.start = (s.start as isize + patch.delta) as usize;
            s.end = (s.end as isize + patch.delta) as usize;
        }
        self.bytes = patch.bytes;
    }
}
