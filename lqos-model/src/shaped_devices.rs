//! `ShapedDevices.csv`: one row per device, rows sharing a Circuit ID form
//! one circuit.
//!
//! See [`parse_shaped_devices`] for how rows are read.

use hashbrown::HashTable;
use smol_str::SmolStr;
use std::io::Read;

use ipnet::{Ipv4Net, Ipv6Net};

use crate::report::{Problem, Report};
use crate::{Circuit, Device, ModelError, Rate, RateError, SqmOverride};

/// The columns lqos writes, in LibreQoS's current order (16 with `sqm`).
pub const CURRENT_HEADER: [&str; 16] = [
    "Circuit ID",
    "Circuit Name",
    "Device ID",
    "Device Name",
    "Parent Node",
    "Parent Node ID",
    "Anchor Node ID",
    "MAC",
    "IPv4",
    "IPv6",
    "Download Min Mbps",
    "Upload Min Mbps",
    "Download Max Mbps",
    "Upload Max Mbps",
    "Comment",
    "sqm",
];

/// The legacy 13-column order, which LibreQoS uses positionally.
pub const LEGACY_HEADER: [&str; 13] = [
    "Circuit ID",
    "Circuit Name",
    "Device ID",
    "Device Name",
    "Parent Node",
    "MAC",
    "IPv4",
    "IPv6",
    "Download Min Mbps",
    "Upload Min Mbps",
    "Download Max Mbps",
    "Upload Max Mbps",
    "Comment",
];

/// Leaf qdisc names accepted in the `sqm` column (first word).
pub const KNOWN_SQM: [&str; 5] = ["cake", "fq_codel", "none", "pfifo", "bfifo"];

/// What [`parse_shaped_devices`] read: the circuits (devices grouped) and
/// every row-level problem.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShapedDevices {
    /// Circuits in order of first appearance, each with its devices in file
    /// order.
    pub circuits: Vec<Circuit>,
    /// The `Parent Node ID` cell of each circuit's first row (same index as
    /// `circuits`; `None` when empty or the column is absent). [`load`]
    /// uses it to find the parent of a circuit whose `Parent Node` is empty.
    ///
    /// [`load`]: crate::load
    pub parent_node_ids: Vec<Option<String>>,
    /// Row-level problems (with line numbers).
    pub report: Report,
}

impl ShapedDevices {
    /// Total number of devices (rows kept).
    pub fn device_count(&self) -> usize {
        self.circuits.iter().map(|c| c.devices.len()).sum()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Col {
    CircuitId,
    CircuitName,
    DeviceId,
    DeviceName,
    ParentNode,
    ParentNodeId,
    AnchorNodeId,
    Mac,
    Ipv4,
    Ipv6,
    DownMin,
    UpMin,
    DownMax,
    UpMax,
    Comment,
    Sqm,
}

const ALL_COLS: [Col; 16] = [
    Col::CircuitId,
    Col::CircuitName,
    Col::DeviceId,
    Col::DeviceName,
    Col::ParentNode,
    Col::ParentNodeId,
    Col::AnchorNodeId,
    Col::Mac,
    Col::Ipv4,
    Col::Ipv6,
    Col::DownMin,
    Col::UpMin,
    Col::DownMax,
    Col::UpMax,
    Col::Comment,
    Col::Sqm,
];

const LEGACY_COLS: [Col; 13] = [
    Col::CircuitId,
    Col::CircuitName,
    Col::DeviceId,
    Col::DeviceName,
    Col::ParentNode,
    Col::Mac,
    Col::Ipv4,
    Col::Ipv6,
    Col::DownMin,
    Col::UpMin,
    Col::DownMax,
    Col::UpMax,
    Col::Comment,
];

impl Col {
    fn name(self) -> &'static str {
        CURRENT_HEADER[ALL_COLS.iter().position(|&c| c == self).unwrap_or(0)]
    }

    fn optional(self) -> bool {
        matches!(
            self,
            Col::ParentNodeId | Col::AnchorNodeId | Col::Comment | Col::Sqm
        )
    }

    fn from_header(text: &str) -> Option<Col> {
        let norm: String = text
            .chars()
            .filter(|c| c.is_alphanumeric())
            .flat_map(char::to_lowercase)
            .collect();
        let norm = norm.strip_suffix("mbps").unwrap_or(&norm);
        Some(match norm {
            "circuitid" => Col::CircuitId,
            "circuitname" => Col::CircuitName,
            "deviceid" => Col::DeviceId,
            "devicename" => Col::DeviceName,
            "parentnode" => Col::ParentNode,
            "parentnodeid" => Col::ParentNodeId,
            "anchornodeid" => Col::AnchorNodeId,
            "mac" => Col::Mac,
            "ipv4" => Col::Ipv4,
            "ipv6" => Col::Ipv6,
            "downloadmin" => Col::DownMin,
            "uploadmin" => Col::UpMin,
            "downloadmax" => Col::DownMax,
            "uploadmax" => Col::UpMax,
            "comment" | "comments" => Col::Comment,
            "sqm" => Col::Sqm,
            _ => return None,
        })
    }
}

/// One row, its fields by column.
struct Row<'a> {
    fields: [&'a str; 16],
}

impl<'a> Row<'a> {
    fn get(&self, col: Col) -> &'a str {
        self.fields[col as usize]
    }
}

/// Reads `ShapedDevices.csv` from `reader`; `file` names it in messages.
///
/// Only input that cannot be read at all is an `Err`: an I/O error, a quote
/// never closed in the header, no header, or a header without a required
/// column. Every row-level problem goes into the returned report.
///
/// # How rows are read
///
/// - The first non-comment row is the header. Columns are matched by name,
///   ignoring case, spaces, `_`/`-` and a trailing `Mbps` (`Circuit ID`,
///   `circuit_id` and `CIRCUIT ID` are one column). Unknown columns are
///   ignored with a warning. Required: the 12 legacy columns other than
///   `Comment`; `Parent Node ID`, `Anchor Node ID`, `Comment` and `sqm` are
///   optional.
/// - Lines starting with `#` are comments, anywhere in the file. Blank lines
///   and rows whose fields are all empty are skipped. CRLF line ends and a
///   UTF-8 byte order mark are accepted. Fields may be quoted (`"a, b"`).
/// - **13-field rows under a longer header.** LibreQoS itself reads rows by
///   position, in the legacy 13-column order (Circuit ID, Circuit Name,
///   Device ID, Device Name, Parent Node, MAC, IPv4, IPv6, Download Min,
///   Upload Min, Download Max, Upload Max, Comment), whatever the header
///   says. LibreQoS's own `ShapedDevices.example.csv` depends on that: its
///   header has 15 columns but its rows have 13 fields. So a row with exactly
///   13 fields under a header of more columns is read in that legacy order,
///   as LibreQoS reads it, and the file gets one warning saying so.
/// - Other rows with fewer fields than the header are accepted when only
///   optional trailing columns are missing (they read as empty); otherwise
///   the row is an error and skipped. Rows with more fields than the header
///   are errors (usually an unquoted comma) and skipped.
/// - IPv4 / IPv6 cells hold comma-separated addresses or CIDR ranges; a bare
///   address is a /32 or /128. Spaces around entries are ignored.
/// - Rates are decimal Mbps, read exactly (see [`Rate`]).
/// - Circuit ID, Device ID, Parent Node, MAC, IP and rate cells are trimmed
///   of surrounding whitespace; names and comments are kept verbatim (text
///   with control characters is kept too, with a warning).
/// - A MAC that is not `aa:bb:cc:dd:ee:ff` (or `-`-separated) is a warning
///   and kept as written: LibreQoS does not check MACs and some
///   integrations put other text there (e.g. `pppoe-known`).
/// - `sqm` is `spec` (both directions) or `down/up`; a first word other
///   than those in [`KNOWN_SQM`] is a warning. An empty half means the
///   default.
/// - `Parent Node ID` is kept per circuit in
///   [`ShapedDevices::parent_node_ids`]; [`load`](crate::load) resolves it
///   as LibreQoS does (a known ID wins over `Parent Node`; with an empty
///   `Parent Node` it is ignored).
///
/// Row-level problems go into [`ShapedDevices::report`] with their line
/// numbers; a row with an error that makes it unusable (no circuit ID, a rate
/// that is not a number, a wrong field count) is skipped, everything else is
/// kept so that all problems can be reported in one pass.
///
/// # Devices of one circuit
///
/// The first row of a circuit defines its name, parent, rates, comment and
/// sqm. A later row that names another parent is an error (LibreQoS refuses
/// such a file). Later rows with other rates, name, comment or sqm are
/// warnings, and the first row wins (as in LibreQoS).
///
/// Device IDs must be unique in the file (a repeated non-empty Device ID is
/// an error, naming the first line that used it); an empty Device ID is a
/// warning.
///
/// ```
/// let csv = "Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,MAC,IPv4,IPv6,\
/// Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,Comment\n\
/// 1,\"Main St, 5\",d1,Router,AP_A,,\"100.64.0.1, 100.64.1.0/24\",,2.5,1,100.5,20,\n";
/// let sd = lqos_model::parse_shaped_devices("ShapedDevices.csv", csv.as_bytes()).unwrap();
/// assert!(sd.report.is_clean());
/// assert_eq!(sd.circuits[0].name, "Main St, 5");
/// assert_eq!(sd.circuits[0].devices[0].ipv4.len(), 2);
/// assert_eq!(sd.circuits[0].download_max.to_string(), "100.5");
/// ```
pub fn parse_shaped_devices<R: Read>(
    file: &str,
    mut reader: R,
) -> Result<ShapedDevices, ModelError> {
    let mut bytes = Vec::new();
    reader
        .read_to_end(&mut bytes)
        .map_err(|e| ModelError::Csv {
            file: file.to_string(),
            line: None,
            message: e.to_string(),
        })?;
    let data = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&bytes);
    let mut records = Records::new(data);
    let mut parser = Parser::new(file);
    // Size the tables once: growing 100k-entry tables and vectors row by
    // row is a large share of the parse time.
    // (A real row has 12 commas and values: never less than ~32 bytes, so a
    // file of blank lines cannot make this reserve much.)
    let lines = memchr::memchr_iter(b'\n', data).count();
    parser.reserve(lines.min(data.len() / 32));
    let mut header: Option<(Vec<Option<Col>>, usize)> = None;
    while let Some(rec) = records.next_record() {
        let (line, raw) = match rec {
            Ok(r) => r,
            Err(line) => {
                let msg = format!("a quote opened on line {line} is never closed");
                if header.is_none() {
                    return Err(ModelError::Csv {
                        file: file.to_string(),
                        line: Some(line),
                        message: msg,
                    });
                }
                parser.report.push(
                    Problem::error(file, format!("{msg}; the rest of the file is skipped"))
                        .at(line),
                );
                break;
            }
        };
        if raw.all_blank() {
            continue;
        }
        let Some(fields) = raw.to_str() else {
            parser
                .report
                .push(Problem::error(file, "row is not valid UTF-8; skipped").at(line));
            continue;
        };
        match &header {
            None => {
                let names: Vec<&str> = fields.iter().collect();
                header = Some(parser.read_header(&names, line)?);
            }
            Some((cols, _)) => parser.read_row(cols, fields, line),
        }
    }
    if header.is_none() {
        return Err(ModelError::NoHeader {
            file: file.to_string(),
        });
    }
    Ok(parser.finish())
}

/// The record splitter: `csv_core`'s reader (the engine of the `csv`
/// crate's `ByteRecord` reader) over the file in memory, writing every
/// record into one reused buffer (no allocation per row or field once the
/// buffers have grown to the longest row).
///
/// Around it, what LibreQoS's files need and `csv_core` does not do the
/// same way: `#` comment lines are skipped here (up to a CR, LF or CRLF;
/// `csv_core` would only stop at LF), lines are counted here from byte
/// (CR, LF and CRLF each end one line; `csv_core` counts LFs), and a
/// quote still open at the end of the input is reported (`csv_core` ends the
/// field silently). Quoted fields may span lines, `""` in a quoted field is
/// one quote and text after a closing quote is kept, as Python's csv module
/// does.
struct Records<'a> {
    data: &'a [u8],
    /// Where the next record starts.
    pos: usize,
    /// Where the last record returned started.
    last_start: usize,
    core: csv_core::Reader,
    /// The current record's unquoted text, fields back to back.
    out: Vec<u8>,
    /// End offset in `out` of each field of the current record.
    ends: Vec<usize>,
    /// Line number at `pos` (1-based).
    line: usize,
    /// Split simple records without `csv_core` ([`Records::simple_record`];
    /// off only in tests, to compare).
    fast: bool,
}

/// One record's fields, borrowed from [`Records`]' buffers.
struct Fields<'r> {
    /// All fields back to back (valid UTF-8 only when `utf8` says so).
    text: &'r [u8],
    ends: &'r [usize],
}

impl<'r> Fields<'r> {
    #[cfg(test)]
    fn len(&self) -> usize {
        self.ends.len()
    }

    #[cfg(test)]
    fn bytes(&self, i: usize) -> &'r [u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.text[start..self.ends[i]]
    }

    fn all_blank(&self) -> bool {
        self.text.iter().all(u8::is_ascii_whitespace)
    }

    /// The fields as text, `None` if any field is not valid UTF-8 on its own.
    fn to_str(&self) -> Option<StrFields<'r>> {
        let text = std::str::from_utf8(self.text).ok()?;
        // A field boundary inside a multi-byte character would make both
        // fields invalid on their own.
        self.ends
            .iter()
            .all(|&e| text.is_char_boundary(e))
            .then_some(StrFields {
                text,
                ends: self.ends,
            })
    }
}

/// [`Fields`] known to be valid UTF-8, field by field.
#[derive(Clone, Copy)]
struct StrFields<'r> {
    text: &'r str,
    ends: &'r [usize],
}

impl<'r> StrFields<'r> {
    fn len(&self) -> usize {
        self.ends.len()
    }

    fn iter(self) -> impl Iterator<Item = &'r str> {
        let mut start = 0;
        self.ends.iter().map(move |&e| {
            let f = &self.text[start..e];
            start = e;
            f
        })
    }
}

impl<'a> Records<'a> {
    fn new(data: &'a [u8]) -> Self {
        let mut core = csv_core::ReaderBuilder::new()
            .comment(None)
            .quoting(true)
            .double_quote(true)
            .build();
        // `csv_core` strips a byte order mark from the first input it sees;
        // the caller strips exactly one, and a second one is text. A lone LF
        // in the start state is discarded and marks the reader as started.
        let _ = core.read_record(b"\n", &mut [0u8; 1], &mut [0usize; 1]);
        Records {
            data,
            pos: 0,
            last_start: 0,
            core,
            out: vec![0; 1024],
            ends: vec![0; 32],
            line: 1,
            fast: true,
        }
    }

    /// The record at `pos` if it is a simple one-line record (the common
    /// case), split with `memchr` into the same buffers `csv_core` fills:
    /// `(bytes consumed, text length, field count)`. Simple means: the line
    /// has no CR except one right before its LF, and every quoted field
    /// closes on that line with no `""` inside and a delimiter or the line
    /// end right after the closing quote. Anything else is `None`, and
    /// `csv_core` reads the record; both read a simple record the same way
    /// (the property tests compare them).
    fn simple_record(&mut self) -> Option<(usize, usize, usize)> {
        use memchr::memchr;
        let d = &self.data[self.pos..];
        // Consume through the LF, or only through the CR of a CRLF (the
        // LF is then skipped as the end of that line, as after csv_core).
        let (line, consumed) = match memchr(b'\n', d) {
            Some(n) if n > 0 && d[n - 1] == b'\r' => (&d[..n - 1], n),
            Some(n) => (&d[..n], n + 1),
            // Input ending in a CR with no LF after it.
            None if d.last() == Some(&b'\r') => (&d[..d.len() - 1], d.len()),
            None => (d, d.len()),
        };
        if memchr(b'\r', line).is_some() {
            return None;
        }
        if self.out.len() < line.len() {
            self.out.resize(line.len().next_power_of_two(), 0);
        }
        let (mut nout, mut nends, mut i) = (0, 0, 0);
        loop {
            // Fields are short: a plain byte loop beats memchr's setup.
            let (field, next) = if line.get(i) == Some(&b'"') {
                let close = i + 1 + line[i + 1..].iter().position(|&b| b == b'"')?;
                match line.get(close + 1) {
                    None => (&line[i + 1..close], None),
                    Some(b',') => (&line[i + 1..close], Some(close + 2)),
                    Some(_) => return None,
                }
            } else {
                match line[i..].iter().position(|&b| b == b',') {
                    Some(c) => (&line[i..i + c], Some(i + c + 1)),
                    None => (&line[i..], None),
                }
            };
            self.out[nout..nout + field.len()].copy_from_slice(field);
            nout += field.len();
            if nends == self.ends.len() {
                self.ends.resize(nends * 2, 0);
            }
            self.ends[nends] = nout;
            nends += 1;
            match next {
                Some(n) => i = n,
                None => break,
            }
        }
        Some((consumed, nout, nends))
    }

    /// Skips blank lines and `#` comment lines at the start of a record.
    fn skip_to_record(&mut self) {
        let d = self.data;
        while let Some(&b) = d.get(self.pos) {
            match b {
                b'\r' => {
                    self.pos += 1;
                    self.line += 1;
                }
                b'\n' => {
                    // The LF of a CRLF whose CR ended the previous line (or
                    // record) is not a line of its own.
                    if self.pos == 0 || d[self.pos - 1] != b'\r' {
                        self.line += 1;
                    }
                    self.pos += 1;
                }
                b'#' => {
                    while !matches!(d.get(self.pos), None | Some(b'\r' | b'\n')) {
                        self.pos += 1;
                    }
                }
                _ => break,
            }
        }
    }

    /// The next record and its first line; `Err(line)` for a quote opened
    /// on `line` and never closed.
    fn next_record(&mut self) -> Option<Result<(usize, Fields<'_>), usize>> {
        use csv_core::ReadRecordResult as R;
        self.skip_to_record();
        if self.pos >= self.data.len() {
            return None;
        }
        let start = self.pos;
        self.last_start = start;
        if self.fast {
            if let Some((consumed, nout, nends)) = self.simple_record() {
                let line = self.line;
                let raw = &self.data[start..start + consumed];
                self.pos += consumed;
                self.line += usize::from(matches!(raw.last(), Some(b'\r' | b'\n')));
                return Some(Ok((
                    line,
                    Fields {
                        text: &self.out[..nout],
                        ends: &self.ends[..nends],
                    },
                )));
            }
        }
        let (mut nout, mut nends) = (0, 0);
        loop {
            let input = &self.data[self.pos..];
            let (res, nin, o, e) =
                self.core
                    .read_record(input, &mut self.out[nout..], &mut self.ends[nends..]);
            self.pos += nin;
            nout += o;
            nends += e;
            match res {
                // All input was given at once: the next call, with no input
                // left, ends the last record.
                R::InputEmpty => {}
                R::OutputFull => {
                    let n = self.out.len() * 2;
                    self.out.resize(n, 0);
                }
                R::OutputEndsFull => {
                    let n = self.ends.len() * 2;
                    self.ends.resize(n, 0);
                }
                R::Record => break,
                R::End => return None,
            }
        }
        let line = self.line;
        let raw = &self.data[start..self.pos];
        let newlines = |b: &[u8]| memchr::memchr_iter(b'\n', b).count();
        if self.pos >= self.data.len() {
            if let Some(open) = open_quote(raw) {
                return Some(Err(line + newlines(&raw[..open])));
            }
        }
        // Line ends inside quoted fields count as LFs (a lone CR there is
        // text, as in the reference splitter); the record's own terminator
        // is one line end, CR, LF or CRLF.
        self.line += newlines(raw) + usize::from(raw.last() == Some(&b'\r'));
        Some(Ok((
            line,
            Fields {
                text: &self.out[..nout],
                ends: &self.ends[..nends],
            },
        )))
    }
}

/// Offset of the quote that opens a quoted field still open at the end of
/// `record` (the raw text of the input's last record), if there is one.
fn open_quote(record: &[u8]) -> Option<usize> {
    let mut at_field_start = true;
    let mut open: Option<usize> = None;
    let mut i = 0;
    while i < record.len() {
        let b = record[i];
        match open {
            Some(_) if b == b'"' => {
                if record.get(i + 1) == Some(&b'"') {
                    i += 1;
                } else {
                    open = None;
                }
            }
            Some(_) => {}
            None if at_field_start && b == b'"' => open = Some(i),
            None => {}
        }
        at_field_start = open.is_none() && matches!(b, b',' | b'\r' | b'\n');
        i += 1;
    }
    open
}

/// FNV-1a: ids are short and the maps are hot; no need for SipHash here.
#[derive(Default)]
struct Fnv(u64);

impl std::hash::Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for &b in bytes {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
}

/// The FNV-1a hash of `text`.
fn fnv(text: &str) -> u64 {
    use std::hash::Hasher;
    let mut h = Fnv::default();
    h.write(text.as_bytes());
    h.finish()
}

pub(crate) struct Parser<'f> {
    file: &'f str,
    report: Report,
    circuits: Vec<Circuit>,
    parent_node_ids: Vec<Option<String>>,
    /// Index into `circuits` of each circuit ID (keyed by the circuit's own
    /// `id`: no second copy of the string).
    circuit_index: HashTable<usize>,
    /// `(circuit, device)` indices of the first device with each non-empty
    /// Device ID (keyed by that device's `id`).
    device_ids: HashTable<(usize, usize)>,
    /// Every Parent Node name seen, once: the circuits of one parent share
    /// its text (a few hundred parents for 10^5 circuits).
    parents: HashTable<SmolStr>,
    legacy_rows: usize,
    legacy_first_line: usize,
    header_len: usize,
}

impl<'f> Parser<'f> {
    fn new(file: &'f str) -> Self {
        Parser {
            file,
            report: Report::new(),
            circuits: Vec::new(),
            parent_node_ids: Vec::new(),
            circuit_index: HashTable::new(),
            device_ids: HashTable::new(),
            parents: HashTable::new(),
            legacy_rows: 0,
            legacy_first_line: 0,
            header_len: 0,
        }
    }

    fn reserve(&mut self, rows: usize) {
        self.circuits.reserve(rows);
        self.parent_node_ids.reserve(rows);
        let circuits = &self.circuits;
        self.circuit_index.reserve(rows, |&i| fnv(&circuits[i].id));
        self.device_ids
            .reserve(rows, |&(c, d)| fnv(&circuits[c].devices[d].id));
    }

    fn read_header(
        &mut self,
        fields: &[&str],
        line: usize,
    ) -> Result<(Vec<Option<Col>>, usize), ModelError> {
        let cols: Vec<Option<Col>> = fields.iter().map(|f| Col::from_header(f)).collect();
        if !cols.contains(&Some(Col::CircuitId)) {
            return Err(ModelError::NoHeader {
                file: self.file.to_string(),
            });
        }
        for col in ALL_COLS {
            if !col.optional() && !cols.contains(&Some(col)) {
                return Err(ModelError::MissingColumn {
                    file: self.file.to_string(),
                    line,
                    column: col.name().to_string(),
                });
            }
        }
        let mut seen = Vec::new();
        for (f, c) in fields.iter().zip(&cols) {
            match c {
                None => self.report.push(
                    Problem::warning(self.file, format!("unknown column {f:?} ignored")).at(line),
                ),
                Some(c) if seen.contains(c) => self.report.push(
                    Problem::warning(
                        self.file,
                        format!("column {f:?} appears twice; the first one is used"),
                    )
                    .at(line),
                ),
                Some(c) => seen.push(*c),
            }
        }
        self.header_len = fields.len();
        Ok((cols, line))
    }

    fn read_row(&mut self, cols: &[Option<Col>], fields: StrFields<'_>, line: usize) {
        let mut row = Row { fields: [""; 16] };
        let n = fields.len();
        if n == cols.len()
            || (n < cols.len() && cols[n..].iter().all(|c| c.is_none_or(Col::optional)))
        {
            let mut set = [false; 16];
            for (f, c) in fields.iter().zip(cols) {
                if let Some(c) = c {
                    if !set[*c as usize] {
                        row.fields[*c as usize] = f;
                        set[*c as usize] = true;
                    }
                }
            }
        } else if n == LEGACY_COLS.len() && cols.len() > n {
            for (f, c) in fields.iter().zip(LEGACY_COLS) {
                row.fields[c as usize] = f;
            }
            if self.legacy_rows == 0 {
                self.legacy_first_line = line;
            }
            self.legacy_rows += 1;
        } else {
            self.report.push(
                Problem::error(
                    self.file,
                    format!(
                        "row has {n} fields but the header has {} columns; skipped",
                        cols.len()
                    ),
                )
                .at(line),
            );
            return;
        }
        self.add_row(&row, line);
    }

    fn add_row(&mut self, row: &Row<'_>, line: usize) {
        let file = self.file;
        let circuit_id = trim(row.get(Col::CircuitId));
        if circuit_id.is_empty() {
            self.report
                .push(Problem::error(file, "row has no Circuit ID; skipped").at(line));
            return;
        }
        let err = |msg: String| Problem::error(file, msg).at(line).circuit(circuit_id);
        let warn = |msg: String| Problem::warning(file, msg).at(line).circuit(circuit_id);

        let mut rates = [Rate::ZERO; 4];
        let mut rates_ok = true;
        for (i, (col, label)) in [
            (Col::DownMin, "download min"),
            (Col::UpMin, "upload min"),
            (Col::DownMax, "download max"),
            (Col::UpMax, "upload max"),
        ]
        .into_iter()
        .enumerate()
        {
            match Rate::from_mbps_str(row.get(col)) {
                Ok(r) => rates[i] = r,
                Err(e) => {
                    rates_ok = false;
                    self.report.push(err(rate_error_message(label, &e)));
                }
            }
        }
        if !rates_ok {
            self.report
                .push(err("row skipped because of its rates".to_string()));
            return;
        }

        let mut problems = Vec::new();
        let ipv4 = parse_ip_list::<Ipv4Net>(row.get(Col::Ipv4), "IPv4", &mut problems);
        let ipv6 = parse_ip_list::<Ipv6Net>(row.get(Col::Ipv6), "IPv6", &mut problems);
        for (sev_err, msg) in problems {
            self.report.push(if sev_err { err(msg) } else { warn(msg) });
        }

        let mac = trim(row.get(Col::Mac));
        if !mac.is_empty() && !is_mac(mac) {
            self.report.push(warn(format!(
                "MAC {mac:?} is not a MAC address (kept as written)"
            )));
        }

        let sqm = parse_sqm(row.get(Col::Sqm), line);
        for w in [&sqm.0, &sqm.1].into_iter().flatten() {
            {
                self.report.push(warn(format!(
                    "sqm {:?}: unknown qdisc {w:?} (expected one of {})",
                    row.get(Col::Sqm),
                    KNOWN_SQM.join(", ")
                )));
            }
        }
        let sqm = sqm.2;

        for col in [
            Col::CircuitId,
            Col::CircuitName,
            Col::DeviceId,
            Col::DeviceName,
            Col::ParentNode,
            Col::Comment,
        ] {
            if has_control(row.get(col)) {
                self.report.push(warn(format!(
                    "{} {:?} contains control characters (kept as written)",
                    col.name(),
                    row.get(col)
                )));
            }
        }

        let circuit_hash = fnv(circuit_id);
        let existing = {
            let circuits = &self.circuits;
            self.circuit_index
                .find(circuit_hash, |&i| circuits[i].id == circuit_id)
                .copied()
        };
        // Where this device will be: its circuit's next device.
        let slot = match existing {
            Some(idx) => (idx, self.circuits[idx].devices.len()),
            None => (self.circuits.len(), 0),
        };
        let device_id = trim(row.get(Col::DeviceId));
        let mut new_device_id = None;
        if device_id.is_empty() {
            self.report
                .push(warn("device has no Device ID".to_string()));
        } else {
            let hash = fnv(device_id);
            let circuits = &self.circuits;
            match self
                .device_ids
                .find(hash, |&(c, d)| circuits[c].devices[d].id == device_id)
            {
                Some(&(c, d)) => {
                    let first = circuits[c].devices[d].line;
                    self.report.push(err(format!(
                        "Device ID {device_id:?} is already used at line {first}"
                    )));
                }
                None => new_device_id = Some(hash),
            }
        }

        let device = Device {
            id: device_id.into(),
            name: row.get(Col::DeviceName).into(),
            mac: mac.into(),
            ipv4,
            ipv6,
            line,
        };
        let parent = Some(trim(row.get(Col::ParentNode))).filter(|p| !p.is_empty());
        let name = row.get(Col::CircuitName);
        let comment = row.get(Col::Comment);

        match existing {
            None => {
                let circuits = &self.circuits;
                self.circuit_index
                    .insert_unique(circuit_hash, circuits.len(), |&i| fnv(&circuits[i].id));
                let pid = trim(row.get(Col::ParentNodeId));
                self.parent_node_ids
                    .push((!pid.is_empty()).then(|| pid.to_string()));
                let parent = parent.map(|p| self.intern_parent(p));
                self.circuits.push(Circuit {
                    id: circuit_id.into(),
                    name: name.into(),
                    parent,
                    download_min: rates[0],
                    upload_min: rates[1],
                    download_max: rates[2],
                    upload_max: rates[3],
                    comment: comment.into(),
                    sqm,
                    devices: vec![device],
                });
            }
            Some(idx) => {
                let c = &mut self.circuits[idx];
                let first = c.devices.first().map(|d| d.line).unwrap_or(0);
                if c.parent.as_deref() != parent {
                    self.report.push(err(format!(
                        "device {device_id:?} has parent node {:?} but line {first} of this circuit has {:?}",
                        parent.unwrap_or(""),
                        c.parent.as_deref().unwrap_or("")
                    )));
                }
                let theirs = [c.download_min, c.upload_min, c.download_max, c.upload_max];
                if theirs != rates {
                    self.report.push(warn(format!(
                        "device {device_id:?} has rates {}/{}/{}/{} (down min/up min/down max/up max) but line {first} of this circuit has {}/{}/{}/{}; using line {first}'s",
                        rates[0], rates[1], rates[2], rates[3], theirs[0], theirs[1], theirs[2], theirs[3]
                    )));
                }
                if c.name != name {
                    self.report.push(warn(format!(
                        "device {device_id:?} has circuit name {name:?} but line {first} of this circuit has {:?}; using line {first}'s",
                        c.name
                    )));
                }
                if c.sqm != sqm {
                    self.report.push(warn(format!(
                        "device {device_id:?} has sqm {:?} but line {first} of this circuit has another; using line {first}'s",
                        row.get(Col::Sqm)
                    )));
                }
                c.devices.push(device);
            }
        }
        if let Some(hash) = new_device_id {
            let circuits = &self.circuits;
            self.device_ids
                .insert_unique(hash, slot, |&(c, d)| fnv(&circuits[c].devices[d].id));
        }
    }

    /// The shared text of parent node `name` (made on first sight).
    fn intern_parent(&mut self, name: &str) -> SmolStr {
        let hash = fnv(name);
        self.parents
            .entry(hash, |p| p == name, |p| fnv(p))
            .or_insert_with(|| SmolStr::new(name))
            .get()
            .clone()
    }

    fn finish(mut self) -> ShapedDevices {
        if self.legacy_rows > 0 {
            self.report.push(
                Problem::warning(
                    self.file,
                    format!(
                        "{} row(s) have 13 fields but the header has {} columns; read them in the legacy 13-column order (Circuit ID, Circuit Name, Device ID, Device Name, Parent Node, MAC, IPv4, IPv6, rates, Comment), as LibreQoS does",
                        self.legacy_rows, self.header_len
                    ),
                )
                .at(self.legacy_first_line),
            );
        }
        ShapedDevices {
            parent_node_ids: self.parent_node_ids,
            circuits: self.circuits,
            report: self.report,
        }
    }
}

/// The message for a rate cell that is not a valid rate.
pub(crate) fn rate_error_message(label: &str, e: &RateError) -> String {
    match e {
        RateError::Empty => format!("{label} is empty"),
        RateError::Negative(t) => format!("{label} {t:?} is negative"),
        RateError::NotANumber(t) => format!("{label} {t:?} is not a number"),
        RateError::TooPrecise(t) => {
            format!("{label} {t:?} has more than 6 decimal places (finer than 1 bit/s)")
        }
        RateError::TooLarge(t) => format!("{label} {t:?} is too large"),
    }
}

trait IpEntry: Sized + std::str::FromStr {
    fn from_host(text: &str) -> Option<Self>;
    fn has_host_bits(&self) -> bool;
}

impl IpEntry for Ipv4Net {
    fn from_host(text: &str) -> Option<Self> {
        text.parse().ok().map(|a| Ipv4Net::new_assert(a, 32))
    }
    fn has_host_bits(&self) -> bool {
        self.addr() != self.network()
    }
}

impl IpEntry for Ipv6Net {
    fn from_host(text: &str) -> Option<Self> {
        text.parse().ok().map(|a| Ipv6Net::new_assert(a, 128))
    }
    fn has_host_bits(&self) -> bool {
        self.addr() != self.network()
    }
}

/// Parses a comma-separated list of addresses / CIDR ranges; problems are
/// `(is_error, message)`.
fn parse_ip_list<T: IpEntry + std::fmt::Display>(
    cell: &str,
    label: &str,
    problems: &mut Vec<(bool, String)>,
) -> Vec<T> {
    let mut out = Vec::new();
    for entry in cell.split(',') {
        let entry = trim(entry);
        if entry.is_empty() {
            continue;
        }
        let parsed = if entry.contains('/') {
            entry.parse::<T>().ok()
        } else {
            T::from_host(entry)
        };
        match parsed {
            Some(net) => {
                if net.has_host_bits() {
                    problems.push((
                        false,
                        format!("{label} {entry:?} has host bits set after the prefix length"),
                    ));
                }
                out.push(net);
            }
            None => problems.push((
                true,
                format!("{label} {entry:?} is not a valid {label} address or CIDR range"),
            )),
        }
    }
    out
}

/// True for `aa:bb:cc:dd:ee:ff` / `aa-bb-cc-dd-ee-ff` (any case).
pub fn is_mac(text: &str) -> bool {
    let b = text.as_bytes();
    if b.len() != 17 || !matches!(b[2], b':' | b'-') {
        return false;
    }
    let sep = b[2];
    b.iter().enumerate().all(|(i, &c)| {
        if i % 3 == 2 {
            c == sep
        } else {
            c.is_ascii_hexdigit()
        }
    })
}

/// `text.trim()`, skipping the Unicode scan when both ends are visible
/// ASCII (the common case).
#[inline]
fn trim(text: &str) -> &str {
    let b = text.as_bytes();
    let visible = |c: u8| c > b' ' && c < 0x7f;
    match (b.first(), b.last()) {
        (None, _) => text,
        (Some(&f), Some(&l)) if visible(f) && visible(l) => text,
        _ => text.trim(),
    }
}

/// True when `text` has a control character (`char::is_control`: C0,
/// DEL and C1); visible ASCII is checked byte by byte.
fn has_control(text: &str) -> bool {
    // One pass over visible ASCII; only other bytes need the char check.
    text.bytes().any(|b| !(0x20..0x7f).contains(&b)) && text.chars().any(char::is_control)
}

/// Parses the `sqm` cell: empty, `spec`, or `down/up` (either half may be
/// empty = the default). Returns unknown first words of each half plus the
/// override.
fn parse_sqm(cell: &str, line: usize) -> (Option<String>, Option<String>, Option<SqmOverride>) {
    let cell = cell.trim();
    if cell.is_empty() {
        return (None, None, None);
    }
    let (down, up) = match cell.split_once('/') {
        Some((d, u)) => (d.trim(), u.trim()),
        None => (cell, cell),
    };
    let unknown = |s: &str| -> Option<String> {
        let w = s.split_whitespace().next()?;
        // LibreQoS lowercases the cell: `Cake`, `None`, `FQ_CODEL` are known.
        (!KNOWN_SQM.iter().any(|k| k.eq_ignore_ascii_case(w))).then(|| w.to_string())
    };
    let ud = unknown(down);
    let uu = if cell.contains('/') {
        unknown(up)
    } else {
        None
    };
    (
        ud,
        uu,
        Some(SqmOverride {
            download: down.to_string(),
            upload: up.to_string(),
            line,
        }),
    )
}

/// A record's place in a file: `[start, end)` in bytes (`end` after its
/// line terminator, CRLF whole) and its first line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RecordSpan {
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) line: usize,
}

/// Every record of `data` (a whole file without its byte order mark),
/// the header first; `None` if a quote is never closed.
pub(crate) fn record_spans(data: &[u8]) -> Option<Vec<RecordSpan>> {
    let mut records = Records::new(data);
    let mut out = Vec::new();
    while let Some(rec) = records.next_record() {
        let (line, _) = rec.ok()?;
        let start = records.last_start;
        let mut end = records.pos;
        if end > 0 && data[end - 1] == b'\r' && data.get(end) == Some(&b'\n') {
            end += 1;
        }
        out.push(RecordSpan { start, end, line });
    }
    Some(out)
}

/// The header's columns (the first record of `data`).
pub(crate) fn header_cols(file: &str, data: &[u8]) -> Result<Vec<Option<Col>>, ModelError> {
    let mut records = Records::new(data);
    let mut parser = Parser::new(file);
    while let Some(rec) = records.next_record() {
        let Ok((line, raw)) = rec else { break };
        if raw.all_blank() {
            continue;
        }
        let Some(fields) = raw.to_str() else { break };
        let names: Vec<&str> = fields.iter().collect();
        return Ok(parser.read_header(&names, line)?.0);
    }
    Err(ModelError::NoHeader {
        file: file.to_string(),
    })
}

/// Rows read the way [`parse_shaped_devices`] reads them, each given as its
/// line number and its one-line text (terminator included or not), under a
/// header with `cols`: the circuits they form and their problems (no
/// file-level ones). `None` if a row is not exactly one non-blank record
/// (blank, several records, a quote left open), or if a row has another
/// number of fields than `fields[i]`.
pub(crate) fn parse_rows(
    file: &str,
    cols: &[Option<Col>],
    rows: &[(usize, &[u8], usize)],
) -> Option<ShapedDevices> {
    let mut parser = Parser::new(file);
    parser.header_len = cols.len();
    for &(line, text, want_fields) in rows {
        match record_spans(text)?.as_slice() {
            [one] if one.start == 0 && one.end == text.len() => {}
            _ => return None,
        }
        let mut records = Records::new(text);
        records.line = line;
        let (l, raw) = records.next_record()?.ok()?;
        if raw.all_blank() {
            return None;
        }
        match raw.to_str() {
            Some(fields) => {
                if fields.len() != want_fields {
                    return None;
                }
                parser.read_row(cols, fields, l);
            }
            None => parser
                .report
                .push(Problem::error(file, "row is not valid UTF-8; skipped").at(l)),
        }
    }
    Some(ShapedDevices {
        parent_node_ids: parser.parent_node_ids,
        circuits: parser.circuits,
        report: parser.report,
    })
}

/// The number of fields of the record in `text` (one row), if it is one.
pub(crate) fn field_count(text: &[u8]) -> Option<usize> {
    let mut records = Records::new(text);
    let (_, raw) = records.next_record()?.ok()?;
    Some(raw.ends.len())
}

#[cfg(test)]
mod tests {
    use super::Records;
    use proptest::prelude::*;

    /// The hand-written RFC 4180 record splitter this parser used before
    /// `csv_core` (kept as the reference the new one must match): a splitter that knows LibreQoS's `#` comment
    /// lines and counts lines exactly (CRLF, LF or CR line ends; quoted fields
    /// may span lines; `""` in a quoted field is one quote; text after a closing
    /// quote is kept, as Python's csv module does).
    struct RefRecords<'a> {
        data: &'a [u8],
        pos: usize,
        line: usize,
    }

    type RawFields<'a> = Vec<std::borrow::Cow<'a, [u8]>>;

    impl<'a> RefRecords<'a> {
        /// Consumes one line end at `pos` (CRLF, LF or CR) if there is one.
        fn eat_line_end(&mut self) -> bool {
            match self.data.get(self.pos) {
                Some(b'\r') => {
                    self.pos += 1;
                    if self.data.get(self.pos) == Some(&b'\n') {
                        self.pos += 1;
                    }
                    self.line += 1;
                    true
                }
                Some(b'\n') => {
                    self.pos += 1;
                    self.line += 1;
                    true
                }
                _ => false,
            }
        }

        /// The next record and its first line; `Err(line)` for a quote opened
        /// on `line` and never closed.
        fn next_record(&mut self) -> Option<Result<(usize, RawFields<'a>), usize>> {
            use std::borrow::Cow;
            let d = self.data;
            // Skip comment lines.
            while self.pos < d.len() && d[self.pos] == b'#' {
                while self.pos < d.len() && !self.eat_line_end() {
                    self.pos += 1;
                }
            }
            if self.pos >= d.len() {
                return None;
            }
            let start_line = self.line;
            let mut fields: RawFields<'a> = Vec::with_capacity(16);
            loop {
                let field: Cow<'a, [u8]> = if d.get(self.pos) == Some(&b'"') {
                    let open_line = self.line;
                    self.pos += 1;
                    // Fast path: no doubled quote inside and a delimiter right
                    // after the closing quote: borrow the text.
                    if let Some(i) = d[self.pos..].iter().position(|&b| b == b'"') {
                        let after = d.get(self.pos + i + 1);
                        if matches!(after, None | Some(b',' | b'\r' | b'\n')) {
                            let chunk = &d[self.pos..self.pos + i];
                            self.line += chunk.iter().filter(|&&b| b == b'\n').count();
                            self.pos += i + 1;
                            fields.push(Cow::Borrowed(chunk));
                            if d.get(self.pos) == Some(&b',') {
                                self.pos += 1;
                                continue;
                            }
                            self.eat_line_end();
                            return Some(Ok((start_line, fields)));
                        }
                    }
                    let mut buf = Vec::new();
                    loop {
                        match d[self.pos.min(d.len())..].iter().position(|&b| b == b'"') {
                            None => {
                                self.pos = d.len();
                                return Some(Err(open_line));
                            }
                            Some(i) => {
                                let chunk = &d[self.pos..self.pos + i];
                                self.line += chunk.iter().filter(|&&b| b == b'\n').count();
                                buf.extend_from_slice(chunk);
                                self.pos += i + 1;
                                if d.get(self.pos) == Some(&b'"') {
                                    buf.push(b'"');
                                    self.pos += 1;
                                } else {
                                    break;
                                }
                            }
                        }
                    }
                    while let Some(&b) = d.get(self.pos) {
                        if matches!(b, b',' | b'\r' | b'\n') {
                            break;
                        }
                        buf.push(b);
                        self.pos += 1;
                    }
                    Cow::Owned(buf)
                } else {
                    let start = self.pos;
                    while let Some(&b) = d.get(self.pos) {
                        if matches!(b, b',' | b'\r' | b'\n') {
                            break;
                        }
                        self.pos += 1;
                    }
                    Cow::Borrowed(&d[start..self.pos])
                };
                fields.push(field);
                if d.get(self.pos) == Some(&b',') {
                    self.pos += 1;
                    continue;
                }
                self.eat_line_end();
                return Some(Ok((start_line, fields)));
            }
        }
    }

    /// Each record as (line, fields), or `Err(line)` of a quote never closed.
    type Split = Vec<Result<(usize, Vec<Vec<u8>>), usize>>;

    /// Every record of `data` as (line, fields), or the line of a quote
    /// never closed, by the reference splitter.
    fn reference(data: &[u8]) -> Split {
        let mut r = RefRecords {
            data,
            pos: 0,
            line: 1,
        };
        let mut out = Vec::new();
        while let Some(rec) = r.next_record() {
            let stop = rec.is_err();
            out.push(rec.map(|(l, f)| (l, f.into_iter().map(|c| c.into_owned()).collect())));
            if stop {
                break;
            }
        }
        out
    }

    /// The same by the `csv_core` splitter. The reference yields blank
    /// lines as one empty field and the new one skips them; both callers
    /// skip blank records, so they are dropped from the comparison.
    fn current(data: &[u8]) -> Split {
        split(data, true)
    }

    /// The same, with or without the simple-record fast path.
    fn split(data: &[u8], fast: bool) -> Split {
        let mut r = Records::new(data);
        r.fast = fast;
        let mut out = Vec::new();
        while let Some(rec) = r.next_record() {
            let stop = rec.is_err();
            out.push(rec.map(|(l, f)| (l, (0..f.len()).map(|i| f.bytes(i).to_vec()).collect())));
            if stop {
                break;
            }
        }
        out
    }

    fn without_empty(v: Split) -> Split {
        v.into_iter()
            .filter(|r| !matches!(r, Ok((_, f)) if f.len() == 1 && f[0].is_empty()))
            .collect()
    }

    #[test]
    fn csv_core_splitter_matches_the_hand_written_one_on_edge_cases() {
        for data in [
            &b"a,b\r\n\"c\r\nd\",e\r\r\n# x,\"y\r#z\rf\n"[..],
            b"\"ab\"c\"d,\"e\"\"\"\n\"open\nstill",
            b"\xEF\xBB\xBFh\n\"a\"\"",
            b"#only\r\n\r\n",
            b"a,,\n,\n\"\",\"\"\"\"",
            b"1,\"a, b\",,\"\"\r\n2,x\"y,\"z\"\r\n3,\"q\"\r",
            b"h\n\"a\"b,c\n\"d\ne\",f\n",
        ] {
            assert_eq!(
                split(data, true),
                split(data, false),
                "{:?}",
                String::from_utf8_lossy(data)
            );
            assert_eq!(
                without_empty(current(data)),
                without_empty(reference(data)),
                "{:?}",
                String::from_utf8_lossy(data)
            );
        }
    }

    proptest! {
        #[test]
        fn csv_core_splitter_matches_the_hand_written_one(
            body in proptest::collection::vec(prop_oneof![
                Just(b','), Just(b'"'), Just(b'#'), Just(b'\r'), Just(b'\n'),
                Just(b' '), Just(b'a'), Just(b'1'), Just(0xEF), Just(0xBB), Just(0xBF),
            ], 0..200)
        ) {
            prop_assert_eq!(without_empty(current(&body)), without_empty(reference(&body)));
            prop_assert_eq!(split(&body, true), split(&body, false));
        }

        #[test]
        fn fast_path_matches_csv_core_on_line_shaped_input(
            lines in proptest::collection::vec(
                proptest::collection::vec(prop_oneof![
                    Just(&b","[..]), Just(&b"\""[..]), Just(&b"\"\""[..]), Just(&b"\r"[..]),
                    Just(&b"ab"[..]), Just(&b" "[..]), Just(&b"#"[..]), Just(&b"\"x,y\""[..]),
                    Just(&b"\xC3\xA9"[..]),
                ], 0..12),
                0..8),
            crlf in any::<bool>(),
            last_nl in any::<bool>(),
        ) {
            let mut body = Vec::new();
            for (i, l) in lines.iter().enumerate() {
                body.extend(l.iter().copied().flatten());
                if i + 1 < lines.len() || last_nl {
                    body.extend_from_slice(if crlf { b"\r\n" } else { b"\n" });
                }
            }
            prop_assert_eq!(split(&body, true), split(&body, false));
            prop_assert_eq!(without_empty(current(&body)), without_empty(reference(&body)));
        }
    }
}
