//! The one way every command writes: stdout through [`outln!`] / [`out!`]
//! (or [`with_stdout`] for a renderer that takes a writer), stderr through
//! [`note!`].
//!
//! A closed pipe is not a failure of the command: when the reader of
//! stdout goes away (`lqos verify | head -1`), the write returns
//! [`Closed`], the command ends at its next `?`, and `main` exits 0
//! without a message. A note that cannot be written to stderr is dropped.
//! Nothing here panics (`println!` does on a closed pipe).

use std::io::{self, Write};

/// The reader of stdout went away (a closed pipe): the command stops
/// there, and `main` exits 0 quietly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Closed;

impl std::fmt::Display for Closed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the reader of the output went away")
    }
}

impl std::error::Error for Closed {}

/// `r` as the CLI's result: a closed pipe becomes [`Closed`], any other
/// error says it was stdout's.
pub fn check<T>(r: io::Result<T>) -> anyhow::Result<T> {
    r.map_err(|e| {
        if e.kind() == io::ErrorKind::BrokenPipe {
            anyhow::Error::new(Closed)
        } else {
            anyhow::Error::new(e).context("writing to stdout")
        }
    })
}

/// Writes `args` to stdout ([`out!`] and [`outln!`] call this).
pub fn print(args: std::fmt::Arguments<'_>) -> anyhow::Result<()> {
    check(io::stdout().lock().write_fmt(args))
}

/// Writes `args` to stderr; a failure to write is ignored ([`note!`]).
pub fn eprint(args: std::fmt::Arguments<'_>) {
    let _ = io::stderr().lock().write_fmt(args);
}

/// Hands `body` a buffered stdout and flushes it (for renderers that take
/// a writer: man pages, completions, JSON, tc ops).
pub fn with_stdout(body: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> anyhow::Result<()> {
    let mut w = io::BufWriter::with_capacity(64 * 1024, io::stdout().lock());
    check(body(&mut w).and_then(|()| w.flush()))
}

/// `print!` that returns `Err(Closed)` on a closed pipe instead of
/// panicking; use with `?`.
macro_rules! out {
    ($($t:tt)*) => { $crate::out::print(format_args!($($t)*)) };
}

/// `println!` that returns `Err(Closed)` on a closed pipe instead of
/// panicking; use with `?`.
macro_rules! outln {
    () => { $crate::out::print(format_args!("\n")) };
    ($($t:tt)*) => {
        $crate::out::print(format_args!("{}\n", format_args!($($t)*)))
    };
}

/// `eprintln!` that never panics (a note that cannot be written is
/// dropped).
macro_rules! note {
    ($($t:tt)*) => {
        $crate::out::eprint(format_args!("{}\n", format_args!($($t)*)))
    };
}

pub(crate) use {note, out, outln};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_pipe_is_closed_and_other_errors_name_stdout() {
        let e = check::<()>(Err(io::Error::from(io::ErrorKind::BrokenPipe))).unwrap_err();
        assert!(e.downcast_ref::<Closed>().is_some());
        let e = check::<()>(Err(io::Error::from(io::ErrorKind::StorageFull))).unwrap_err();
        assert!(e.downcast_ref::<Closed>().is_none());
        assert!(format!("{e:#}").starts_with("writing to stdout"), "{e:#}");
    }
}
