//! The crate's error type.

use crate::report::Problem;

/// Why an input could not be read at all.
///
/// Problems inside an input that can be read (a bad row, a bad rate, an
/// unknown parent) are not errors of this kind: they are collected as
/// [`Problem`]s in a [`Report`](crate::Report) so that every one of them can
/// be shown at once.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// The file is not valid JSON.
    #[error("{file}:{line}:{column}: invalid JSON: {message}")]
    Json {
        /// File label.
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What the JSON parser said.
        message: String,
    },
    /// The CSV could not be read (I/O error or broken quoting).
    #[error("{file}{}: cannot read CSV: {message}", line.map(|l| format!(":{l}")).unwrap_or_default())]
    Csv {
        /// File label.
        file: String,
        /// 1-based line, when known.
        line: Option<usize>,
        /// What went wrong.
        message: String,
    },
    /// The CSV has no header row (empty, or only comments).
    #[error("{file}: no header row (expected a line starting with \"Circuit ID\")")]
    NoHeader {
        /// File label.
        file: String,
    },
    /// The CSV header lacks a column that every row needs.
    #[error("{file}:{line}: header has no {column:?} column")]
    MissingColumn {
        /// File label.
        file: String,
        /// Line of the header.
        line: usize,
        /// The missing column's name.
        column: String,
    },
    /// The TOML file is not valid or has a field of the wrong type.
    #[error("{file}{}: invalid config: {message}", line.map(|l| format!(":{l}")).unwrap_or_default())]
    Toml {
        /// File label.
        file: String,
        /// 1-based line, when known.
        line: Option<usize>,
        /// What the TOML parser said.
        message: String,
    },
    /// One problem that made the input unusable (e.g. a `network.json` node
    /// without a bandwidth).
    #[error("{0}")]
    Invalid(Box<Problem>),
}
