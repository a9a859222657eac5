//! The record splitter: `csv_core` for any record, a `memchr` fast path
//! for the common one-line record, both into the same reused buffers.

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
pub(super) struct Records<'a> {
    data: &'a [u8],
    /// Where the next record starts.
    pub(super) pos: usize,
    /// Where the last record returned started.
    pub(super) last_start: usize,
    core: csv_core::Reader,
    /// The current record's unquoted text, fields back to back.
    out: Vec<u8>,
    /// End offset in `out` of each field of the current record.
    ends: Vec<usize>,
    /// Line number at `pos` (1-based).
    pub(super) line: usize,
    /// Split simple records without `csv_core` ([`Records::simple_record`];
    /// off only in tests, to compare).
    fast: bool,
}

/// One record's fields, borrowed from [`Records`]' buffers.
pub(super) struct Fields<'r> {
    /// All fields back to back (valid UTF-8 only when `utf8` says so).
    text: &'r [u8],
    ends: &'r [usize],
}

impl<'r> Fields<'r> {
    pub(super) fn len(&self) -> usize {
        self.ends.len()
    }

    #[cfg(test)]
    fn bytes(&self, i: usize) -> &'r [u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.text[start..self.ends[i]]
    }

    pub(super) fn all_blank(&self) -> bool {
        self.text.iter().all(u8::is_ascii_whitespace)
    }

    /// The fields as text, `None` if any field is not valid UTF-8 on its own.
    pub(super) fn to_str(&self) -> Option<StrFields<'r>> {
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
pub(super) struct StrFields<'r> {
    text: &'r str,
    ends: &'r [usize],
}

impl<'r> StrFields<'r> {
    pub(super) fn len(&self) -> usize {
        self.ends.len()
    }

    pub(super) fn iter(self) -> impl Iterator<Item = &'r str> {
        let mut start = 0;
        self.ends.iter().map(move |&e| {
            let f = &self.text[start..e];
            start = e;
            f
        })
    }
}

impl<'a> Records<'a> {
    pub(super) fn new(data: &'a [u8]) -> Self {
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
    pub(super) fn next_record(&mut self) -> Option<Result<(usize, Fields<'_>), usize>> {
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
