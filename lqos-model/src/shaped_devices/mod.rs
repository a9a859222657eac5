//! `ShapedDevices.csv`: one row per device, rows sharing a Circuit ID form
//! one circuit.
//!
//! See [`parse_shaped_devices`] for how rows are read. The work is split
//! by job: the schema (header names, columns; `schema`), the record
//! splitter (`records`), the row validator with one check per column
//! (`parser`), the cell parsers (`cells`), and the hooks the incremental
//! re-read of [`DevicesIndex`](crate::devices_index::DevicesIndex) uses
//! (`spans`).

mod cells;
mod parser;
mod records;
mod schema;
mod spans;

use std::io::Read;

pub(crate) use cells::rate_error_message;
pub use cells::{is_mac, KNOWN_SQM};
pub(crate) use schema::Col;
pub use schema::{CURRENT_HEADER, LEGACY_HEADER};
pub(crate) use spans::{field_count, header_cols, parse_rows, record_spans, RecordSpan};

use crate::error::ModelError;
use crate::report::{Problem, Report};
use crate::types::Circuit;
use parser::Parser;
use records::Records;

/// What [`parse_shaped_devices`] read: the circuits (devices grouped) and
/// every row-level problem.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
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
/// - **13-field rows under a longer header.** Older LibreQoS read rows by
///   position, in the legacy 13-column order (Circuit ID, Circuit Name,
///   Device ID, Device Name, Parent Node, MAC, IPv4, IPv6, Download Min,
///   Upload Min, Download Max, Upload Max, Comment), whatever the header
///   said, and LibreQoS's own `ShapedDevices.example.csv` still has a
///   15-column header over 13-field rows. LibreQoS HEAD reads the columns
///   by header name and refuses that file; lqos reads a row of exactly 13
///   fields under a longer header in the legacy order, with one warning for
///   the file.
/// - Other rows with fewer fields than the header are accepted when only
///   optional trailing columns are missing (they read as empty); otherwise
///   the row is an error and skipped. Rows with more fields than the header
///   are errors (usually an unquoted comma) and skipped.
/// - IPv4 / IPv6 cells hold comma-separated addresses or CIDR ranges; a bare
///   address is a /32 or /128. Spaces around entries are ignored.
/// - Rates are decimal Mbps, read exactly (see [`Rate`](crate::Rate)).
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
/// let sd = lqos_model::shaped_devices::parse_shaped_devices("ShapedDevices.csv", csv.as_bytes()).unwrap();
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
