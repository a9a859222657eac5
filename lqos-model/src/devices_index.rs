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
//! [`parse_shaped_devices`](crate::shaped_devices::parse_shaped_devices), and checked with
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

use crate::network::Network;
use crate::report::Report;
use crate::shaped_devices::{field_count, header_cols, parse_rows, record_spans, Col, RecordSpan};
use crate::types::Circuit;

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
    /// Read the whole file (why, to count and log).
    Full(DevicesFallback),
}

/// Why [`DevicesIndex::edit`] cannot patch an edit (read the whole file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum DevicesFallback {
    /// The byte order mark was added or removed.
    #[error("the byte order mark changed")]
    ByteOrderMark,
    /// The edit starts before the header.
    #[error("the edit is before the header")]
    BeforeHeader,
    /// The header row changed.
    #[error("the header changed")]
    Header,
    /// A comment or blank line changed.
    #[error("a comment or blank line changed")]
    CommentOrBlankLine,
    /// More than [`MAX_CHANGED_ROWS`] rows changed.
    #[error("too many rows changed")]
    TooManyRows,
    /// A changed row spans lines (a quoted field with a line break).
    #[error("a changed row spans lines")]
    MultiLineRow,
    /// A changed row's line end changed.
    #[error("a row's line end changed")]
    LineEnd,
    /// Rows were added (the following lines would shift).
    #[error("rows were added")]
    RowsAdded,
    /// Rows were removed.
    #[error("rows were removed")]
    RowsRemoved,
    /// A changed row was not a device row of the last good file.
    #[error("a changed row was not a device row")]
    NotADeviceRow,
    /// A device row of a changed circuit was not found.
    #[error("a device row was not found")]
    DeviceRowNotFound,
    /// A row of a changed circuit could not be read.
    #[error("a row could not be read")]
    UnreadableRow,
    /// A changed row is not one record with its old field count.
    #[error("a changed row is not one row with its old field count")]
    FieldCount,
    /// The changed rows have errors (the full read reports them).
    #[error("the changed rows have errors")]
    RowErrors,
    /// A Circuit ID changed (rows now form other circuits).
    #[error("a Circuit ID changed")]
    CircuitIdChanged,
    /// A Circuit ID or Device ID changed.
    #[error("a Circuit ID or Device ID changed")]
    DeviceIdChanged,
    /// A circuit moved to another parent node.
    #[error("a circuit moved to another parent node")]
    ParentChanged,
    /// The changed circuits have errors (the full read reports them).
    #[error("the changed circuits have errors")]
    CircuitErrors,
    /// An address overlaps another circuit's.
    #[error("an address overlaps another circuit's")]
    AddressOverlap,
}

/// The circuits an edit changed, read and checked.
#[derive(Debug, Clone)]
#[non_exhaustive]
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
}

/// Bytes compared at a time by [`common_prefix`] and [`common_suffix`]
/// (one `memcmp` per block; then byte by byte in the block that differs).
const BLOCK: usize = 4096;

/// Length of the common prefix of `a` and `b` (compared in blocks: the
/// files are megabytes and an edit is one row).
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let max = a.len().min(b.len());
    let mut i = 0;
    while i + BLOCK <= max && a[i..i + BLOCK] == b[i..i + BLOCK] {
        i += BLOCK;
    }
    i + a[i..max]
        .iter()
        .zip(&b[i..max])
        .take_while(|(x, y)| x == y)
        .count()
}

/// Length of the common suffix of `a` and `b`.
fn common_suffix(a: &[u8], b: &[u8]) -> usize {
    let max = a.len().min(b.len());
    let (mut i, la, lb) = (0, a.len(), b.len());
    while i + BLOCK <= max && a[la - i - BLOCK..la - i] == b[lb - i - BLOCK..lb - i] {
        i += BLOCK;
    }
    i + a[..la - i]
        .iter()
        .rev()
        .zip(b[..lb - i].iter().rev())
        .take_while(|(x, y)| x == y)
        .count()
}

/// A circuit's IPv4 and IPv6 ranges (`[start, end]`, disjoint).
type Ranges = (Vec<(u32, u32)>, Vec<(u128, u128)>);

/// A circuit's addresses merged into disjoint ranges.
fn ranges(c: &Circuit) -> Ranges {
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
            Err(why) => DevicesEdit::Full(why),
        }
    }

    fn try_edit(
        &self,
        network: &Network,
        new: &[u8],
    ) -> Result<Option<DevicesPatch>, DevicesFallback> {
        let old = &self.bytes;
        let bom = self.bom;
        if new.len() < bom || new[..bom] != old[..bom] {
            return Err(DevicesFallback::ByteOrderMark);
        }
        let (o, n) = (&old[bom..], &new[bom..]);
        let max = o.len().min(n.len());
        // One pass over the unchanged start: it also says whether the
        // bytes are the same.
        let prefix = common_prefix(o, n);
        if prefix == o.len() && prefix == n.len() {
            return Ok(None);
        }
        let suffix = common_suffix(&o[prefix..], &n[prefix..]).min(max - prefix);
        let changed_end = o.len() - suffix; // exclusive, old coordinates
                                            // The records the changed bytes touch (an insertion touches the
                                            // record it is in).
        let containing = |at: usize| self.spans.partition_point(|s| s.start <= at).checked_sub(1);
        let first = containing(prefix).ok_or(DevicesFallback::BeforeHeader)?;
        let last = if changed_end > prefix {
            containing(changed_end - 1).ok_or(DevicesFallback::BeforeHeader)?
        } else {
            first
        };
        if first == 0 {
            return Err(DevicesFallback::Header);
        }
        let (fs, ls) = (self.spans[first], self.spans[last]);
        if prefix >= fs.end.max(fs.start + 1) || changed_end > ls.end {
            return Err(DevicesFallback::CommentOrBlankLine);
        }
        if last + 1 - first > MAX_CHANGED_ROWS {
            return Err(DevicesFallback::TooManyRows);
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
                return Err(DevicesFallback::CommentOrBlankLine);
            }
            if !single_line(&o[s.start..s.end]) || s.line != fs.line + (k - first) {
                return Err(DevicesFallback::MultiLineRow);
            }
        }
        let delta = n.len() as isize - o.len() as isize;
        let region_end = (ls.end as isize + delta) as usize;
        let region = &n[fs.start..region_end];
        if region_end < n.len() && !region.ends_with(b"\n") {
            return Err(DevicesFallback::LineEnd);
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
                return Err(DevicesFallback::RowsAdded);
            }
            new_spans.push(RecordSpan {
                start: at,
                end: at + len,
                line: self.spans[k].line,
            });
            at += len;
        }
        if new_spans.len() != last + 1 - first {
            return Err(DevicesFallback::RowsRemoved);
        }
        // The changed rows' circuits, every row of each.
        let mut changed: Vec<usize> = Vec::new();
        for s in &self.spans[first..=last] {
            match self.line_circuit.get(s.line).copied().unwrap_or(0) {
                0 => return Err(DevicesFallback::NotADeviceRow),
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
                let old_span = old_span.ok_or(DevicesFallback::DeviceRowNotFound)?;
                let old_text = &o[old_span.start..old_span.end];
                let want = field_count(old_text).ok_or(DevicesFallback::UnreadableRow)?;
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
        let mut sd =
            parse_rows(&self.file, &self.cols, &rows).ok_or(DevicesFallback::FieldCount)?;
        if sd.report.has_errors() {
            return Err(DevicesFallback::RowErrors);
        }
        if sd.circuits.len() != changed.len() {
            return Err(DevicesFallback::CircuitIdChanged);
        }
        for (c, &ci) in sd.circuits.iter().zip(&changed) {
            let old = &circuits[ci];
            let same_devices = c.devices.len() == old.devices.len()
                && c.devices
                    .iter()
                    .zip(&old.devices)
                    .all(|(a, b)| a.id == b.id && a.line == b.line);
            if c.id != old.id || !same_devices {
                return Err(DevicesFallback::DeviceIdChanged);
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
                return Err(DevicesFallback::ParentChanged);
            }
        }
        for c in &sd.circuits {
            crate::validate::check_circuit(network, c, &self.file, true, &mut report);
        }
        for c in &sd.circuits {
            crate::validate::check_overlaps_of(std::slice::from_ref(c), &self.file, &mut report);
        }
        if report.has_errors() {
            return Err(DevicesFallback::CircuitErrors);
        }
        // Addresses against every other circuit (and each other).
        let mut fresh: Vec<Ranges> = Vec::new();
        for c in &sd.circuits {
            let (a, b) = ranges(c);
            let clash = a.iter().any(|&(s, e)| hits(&self.v4, s, e, &changed))
                || b.iter().any(|&(s, e)| hits(&self.v6, s, e, &changed))
                || fresh.iter().any(|(fa, fb)| {
                    a.iter()
                        .any(|&(s, e)| fa.iter().any(|&(t, f)| s <= f && t <= e))
                        || b.iter()
                            .any(|&(s, e)| fb.iter().any(|&(t, f)| s <= f && t <= e))
                });
            if clash {
                return Err(DevicesFallback::AddressOverlap);
            }
            fresh.push((a, b));
        }
        report.problems.sort_by_key(|p| p.line.unwrap_or(0));
        Ok(Some(DevicesPatch {
            rows: rows.len(),
            circuits: changed.into_iter().zip(sd.circuits).collect(),
            report,
            new_spans,
            first,
            delta,
        }))
    }

    /// Applies `patch` (from [`edit`](Self::edit) on this index and
    /// `network` with `new`, the file's new content): the circuits are
    /// replaced in `network` and the index describes `new`. Returns the
    /// old content.
    pub fn commit(&mut self, network: &mut Network, patch: DevicesPatch, new: Vec<u8>) -> Vec<u8> {
        // Every old range out first: an address may move between two
        // changed circuits.
        for (ci, _) in &patch.circuits {
            let (a, b) = ranges(&network.circuits()[*ci]);
            for (s, _) in a {
                self.v4.remove(&s);
            }
            for (s, _) in b {
                self.v6.remove(&s);
            }
        }
        for (ci, c) in patch.circuits {
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
        debug_assert_eq!(
            new.len() as isize - self.bytes.len() as isize,
            patch.delta,
            "commit with the edit's bytes"
        );
        std::mem::replace(&mut self.bytes, new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NET: &str = r#"{"AP_A": {"downloadBandwidthMbps": 500, "uploadBandwidthMbps": 500},
        "AP_B": {"downloadBandwidthMbps": 500, "uploadBandwidthMbps": 500}}"#;
    const HEAD: &str = "Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,MAC,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,Comment";

    fn file(rows: &[&str], eol: &str) -> Vec<u8> {
        let mut s = String::from("\u{feff}");
        s.push_str(HEAD);
        for r in rows {
            s.push_str(eol);
            s.push_str(r);
        }
        s.push_str(eol);
        s.into_bytes()
    }

    /// The edit's outcome; a patch is checked against a full read.
    fn outcome(old: &[u8], new: &[u8]) -> String {
        let full_old = crate::load::load(("network.json", NET), ("SD.csv", old));
        assert!(!full_old.report.has_errors(), "{}", full_old.report);
        let index = DevicesIndex::new("SD.csv", old.to_vec(), &full_old.network).unwrap();
        let full_new = crate::load::load(("network.json", NET), ("SD.csv", new));
        match index.edit(&full_old.network, new) {
            DevicesEdit::Same => "same".into(),
            DevicesEdit::Full(why) => format!("full: {why}"),
            DevicesEdit::Patch(p) => {
                assert!(!full_new.report.has_errors(), "{}", full_new.report);
                let mut index = index;
                let mut net = full_old.network.clone();
                let n = p.circuits.len();
                index.commit(&mut net, p, new.to_vec());
                assert_eq!(net, full_new.network);
                // The committed index edits on: back to the old file.
                match index.edit(&net, old) {
                    DevicesEdit::Patch(_) => {}
                    e => panic!("edit back: {e:?}"),
                }
                format!("patch {n}")
            }
        }
    }

    proptest::proptest! {
        /// The block-wise prefix and suffix equal a byte-by-byte count,
        /// whatever the lengths and wherever the first difference falls
        /// (inside a block, on its edge, past the shorter input).
        #[test]
        fn block_prefix_and_suffix_count_like_bytes(
            len in 0usize..3 * BLOCK,
            extra in 0usize..BLOCK + 2,
            at in proptest::prelude::any::<proptest::sample::Index>(),
            from_end in proptest::prelude::any::<bool>(),
        ) {
            let a: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            let mut b = a.clone();
            b.extend((0..extra).map(|i| i as u8));
            if !b.is_empty() {
                let i = at.index(b.len());
                b[i] ^= 0x55;
            }
            let (x, y) = if from_end { (&b, &a) } else { (&a, &b) };
            let naive = x.iter().zip(y.iter()).take_while(|(p, q)| p == q).count();
            proptest::prop_assert_eq!(common_prefix(x, y), naive);
            let naive = x.iter().rev().zip(y.iter().rev()).take_while(|(p, q)| p == q).count();
            proptest::prop_assert_eq!(common_suffix(x, y), naive);
        }
    }

    const ROWS: [&str; 5] = [
        "1,One,d1,R,AP_A,,100.64.0.1,,10,2,100,20,",
        "2,Two,d2,R,AP_A,,100.64.0.2,,10,2,100,20,",
        "# a comment",
        "3,\"Three\nlines\",d3,R,AP_B,,100.64.0.3,,10,2,100,20,",
        "4,Four,d4,R,AP_B,,100.64.0.4,,10,2,100,20,",
    ];

    fn with(i: usize, row: &str) -> Vec<&str> {
        let mut v = ROWS.to_vec();
        v[i] = row;
        v
    }

    #[test]
    fn edits_of_rows_are_patched_in_any_line_ending_and_others_are_full() {
        for eol in ["\n", "\r\n"] {
            let old = file(&ROWS, eol);
            assert_eq!(outcome(&old, &old), "same");
            let rate = with(0, "1,One,d1,R,AP_A,,100.64.0.1,,10,2,150,20,");
            assert_eq!(outcome(&old, &file(&rate, eol)), "patch 1", "{eol:?}");
            let name = with(4, "4,\"Four, longer\",d4,R,AP_B,,100.64.0.9,,10,2,100,20,x");
            assert_eq!(outcome(&old, &file(&name, eol)), "patch 1");
            let two = {
                let mut v = rate.clone();
                v[1] = "2,Two,d2,R,AP_A,,100.64.0.2,,10,2,90,20,";
                v
            };
            assert_eq!(outcome(&old, &file(&two, eol)), "patch 2");
            for (what, rows) in [
                ("comment", with(2, "# another comment")),
                (
                    "multi-line",
                    with(3, "3,\"Three\nlines!\",d3,R,AP_B,,100.64.0.3,,10,2,10,20,"),
                ),
                (
                    "moved",
                    with(1, "2,Two,d2,R,AP_B,,100.64.0.2,,10,2,100,20,"),
                ),
                ("id", with(1, "2x,Two,d2,R,AP_A,,100.64.0.2,,10,2,100,20,")),
                (
                    "overlap",
                    with(1, "2,Two,d2,R,AP_A,,100.64.0.1,,10,2,100,20,"),
                ),
                (
                    "bad rate",
                    with(1, "2,Two,d2,R,AP_A,,100.64.0.2,,10,2,fast,20,"),
                ),
                (
                    "fields",
                    with(1, "2,Two,d2,R,AP_A,,100.64.0.2,,10,2,100,20,,extra"),
                ),
            ] {
                let got = outcome(&old, &file(&rows, eol));
                assert!(got.starts_with("full"), "{what} {eol:?}: {got}");
            }
            let mut added = ROWS.to_vec();
            added.insert(1, "5,Five,d5,R,AP_A,,100.64.0.5,,10,2,100,20,");
            assert!(outcome(&old, &file(&added, eol)).starts_with("full"));
            let mut removed = ROWS.to_vec();
            removed.remove(1);
            assert!(outcome(&old, &file(&removed, eol)).starts_with("full"));
            let header = String::from_utf8(file(&ROWS, eol))
                .unwrap()
                .replace("Comment", "Comments");
            assert!(outcome(&old, header.as_bytes()).starts_with("full"));
        }
    }

    #[test]
    fn the_last_row_without_a_line_end_is_patched() {
        let mut old = file(&ROWS, "\n");
        old.pop();
        let mut new = file(&with(4, "4,Four,d4,R,AP_B,,100.64.0.4,,10,2,99,20,"), "\n");
        new.pop();
        assert_eq!(outcome(&old, &new), "patch 1");
    }
}
