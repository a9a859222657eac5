//! Hooks for [`DevicesIndex`](crate::devices_index::DevicesIndex): where each record of
//! a file is, the header's columns, and rows read on their own the way a
//! full read reads them.

use super::parser::Parser;
use super::records::Records;
use super::schema::Col;
use super::ShapedDevices;
use crate::error::ModelError;
use crate::report::Problem;

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
    Some(raw.len())
}
