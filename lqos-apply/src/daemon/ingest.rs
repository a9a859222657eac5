//! When an edit of the input files is complete: pure readiness rules.
//!
//! A file is ready when it was closed after writing or renamed into place
//! (then, after `settle`, it is read). A writer that keeps the file open,
//! or writes, closes and reopens, sends no close at its end: once no event
//! came for the quiet period, the file is read anyway. A file that is
//! being written (a write event with no close after it) holds the edit
//! back, and so does a removed file (until it is back). A read whose file
//! changed while it was read ([`super::Response::InputsChanging`]) and a file
//! that ends in the middle of a record ([`partial_file`]) wait too: the
//! first until it is stable, the second for the quiet period (a file still
//! cut short after it is read as it is, and validation reports it).

use std::time::{Duration, Instant};

use crate::input_file::InputFile;
use crate::inputs::RawInputs;

/// What the file watcher saw happen to an input file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileEvent {
    /// Created, truncated or written (inotify `IN_CREATE`, `IN_MODIFY`).
    Written,
    /// Closed after writing (`IN_CLOSE_WRITE`).
    Closed,
    /// Another file renamed onto it (`IN_MOVED_TO`).
    Renamed,
    /// Removed or renamed away (`IN_DELETE`, `IN_MOVED_FROM`).
    Removed,
}

#[derive(Debug, Clone, Copy, Default)]
struct FileState {
    /// The last write with no close or rename after it.
    writing: Option<Instant>,
    /// Removed and not back yet.
    gone: bool,
}

/// How an edit became ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ready {
    /// Every file written was closed or renamed into place.
    Closed,
    /// A file written was not closed, but nothing happened for the quiet
    /// period.
    Quiet,
}

/// The readiness of a pending edit of the input files.
#[derive(Debug, Clone)]
pub struct Readiness {
    quiet: Duration,
    settle: Duration,
    files: [FileState; 3],
    /// The first event of the edit (its time is the edit's start).
    first: Option<Instant>,
    /// The last close or rename.
    closed: Option<Instant>,
    /// Read again no earlier than this (the last read was unstable or cut
    /// short).
    not_before: Option<Instant>,
}

impl Readiness {
    /// Reads `settle` after the last close or rename, `quiet` after the
    /// last write of a file never closed.
    pub fn new(quiet: Duration, settle: Duration) -> Readiness {
        Readiness {
            quiet,
            settle,
            files: [FileState::default(); 3],
            first: None,
            closed: None,
            not_before: None,
        }
    }

    /// Something happened to `file` at `now`.
    pub fn event(&mut self, file: InputFile, e: FileEvent, now: Instant) {
        self.first.get_or_insert(now);
        let f = &mut self.files[file.index()];
        match e {
            FileEvent::Written => {
                f.writing = Some(now);
                f.gone = false;
            }
            FileEvent::Closed | FileEvent::Renamed => {
                f.writing = None;
                f.gone = false;
                self.closed = Some(now);
            }
            FileEvent::Removed => {
                f.writing = None;
                f.gone = true;
            }
        }
    }

    /// When the edit is to be read (`None`: nothing pending, or a file
    /// is gone).
    pub fn deadline(&self) -> Option<Instant> {
        self.first?;
        if self.files.iter().any(|f| f.gone) {
            return None;
        }
        let at = match self.files.iter().filter_map(|f| f.writing).max() {
            Some(last_write) => last_write + self.quiet,
            None => self.closed.unwrap_or(self.first?) + self.settle,
        };
        Some(self.not_before.map_or(at, |nb| at.max(nb)))
    }

    /// At `now`, whether the edit is ready to be read: its first event's
    /// time and how it became ready. The edit is then no longer pending.
    pub fn take(&mut self, now: Instant) -> Option<(Instant, Ready)> {
        let due = self.deadline()?;
        if now < due {
            return None;
        }
        let how = if self.files.iter().any(|f| f.writing.is_some()) {
            Ready::Quiet
        } else {
            Ready::Closed
        };
        let first = self.first.take()?;
        *self = Readiness::new(self.quiet, self.settle);
        Some((first, how))
    }

    /// The read found a file changing: read it again after `wait`, unless
    /// events decide otherwise. `first` is the edit's start.
    pub fn retry(&mut self, first: Instant, now: Instant, wait: Duration) {
        self.first = Some(self.first.map_or(first, |f| f.min(first)));
        self.closed.get_or_insert(now);
        self.not_before = Some(now + wait);
    }

    /// The read found `file` cut short: wait for the quiet period after
    /// `since` (when it became ready) for the rest.
    pub fn partial(&mut self, file: InputFile, first: Instant, since: Instant) {
        self.first = Some(self.first.map_or(first, |f| f.min(first)));
        let f = &mut self.files[file.index()];
        f.writing = Some(f.writing.map_or(since, |w| w.max(since)));
    }

    /// Forgets the pending edit (a reload reads everything now).
    pub fn clear(&mut self) {
        *self = Readiness::new(self.quiet, self.settle);
    }
}

/// The first input that ends in the middle of a record, as a writer
/// still writing it would leave it: a devices file or `lqos.conf` whose
/// last line has no line end, or an empty devices file; a
/// `network.json` whose JSON ends early.
pub fn partial_file(raw: &RawInputs) -> Option<InputFile> {
    let ends_mid_line = |b: &[u8]| !b.is_empty() && !b.ends_with(b"\n");
    if raw.devices.is_empty() || ends_mid_line(&raw.devices) {
        return Some(InputFile::Devices);
    }
    if raw
        .config
        .as_deref()
        .is_some_and(|c| ends_mid_line(c.as_bytes()) || c.is_empty())
    {
        return Some(InputFile::Config);
    }
    let net = raw.network.trim_start_matches('\u{feff}');
    if net.trim().is_empty() {
        return Some(InputFile::Network);
    }
    match serde_json::from_str::<serde::de::IgnoredAny>(net) {
        Err(e) if e.is_eof() => Some(InputFile::Network),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const Q: Duration = Duration::from_secs(2);

    #[test]
    fn a_close_or_rename_makes_an_edit_ready_a_write_holds_it_back() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut r = Readiness::new(Q, Duration::ZERO);
        assert_eq!(r.deadline(), None);
        // In place: truncate, writes every 100 ms, one close.
        for i in 0..10 {
            r.event(InputFile::Devices, FileEvent::Written, t0 + ms(100 * i));
            assert_eq!(r.deadline(), Some(t0 + ms(100 * i) + Q));
            assert!(r.take(t0 + ms(100 * i + 50)).is_none());
        }
        r.event(InputFile::Devices, FileEvent::Closed, t0 + ms(1000));
        assert_eq!(r.deadline(), Some(t0 + ms(1000)));
        assert_eq!(r.take(t0 + ms(1000)), Some((t0, Ready::Closed)));
        assert!(r.first.is_none());
        // By rename: ready at once.
        r.event(InputFile::Devices, FileEvent::Renamed, t0 + ms(2000));
        assert_eq!(r.take(t0 + ms(2000)), Some((t0 + ms(2000), Ready::Closed)));
    }

    #[test]
    fn a_writer_that_never_closes_is_read_after_the_quiet_period_once() {
        let t0 = Instant::now();
        let mut r = Readiness::new(Q, Duration::ZERO);
        r.event(InputFile::Devices, FileEvent::Written, t0);
        // Closed, reopened and written again: still being written.
        r.event(InputFile::Devices, FileEvent::Closed, t0);
        r.event(InputFile::Devices, FileEvent::Written, t0 + Q / 2);
        assert!(r.take(t0 + Q).is_none());
        assert_eq!(r.take(t0 + Q / 2 + Q), Some((t0, Ready::Quiet)));
        assert_eq!(r.deadline(), None, "once");
    }

    #[test]
    fn another_file_being_written_or_gone_holds_the_edit_back() {
        let t0 = Instant::now();
        let mut r = Readiness::new(Q, Duration::ZERO);
        r.event(InputFile::Network, FileEvent::Written, t0);
        r.event(InputFile::Devices, FileEvent::Renamed, t0);
        assert_eq!(r.deadline(), Some(t0 + Q));
        r.event(InputFile::Network, FileEvent::Closed, t0 + Q / 4);
        assert_eq!(r.deadline(), Some(t0 + Q / 4));
        let mut r = Readiness::new(Q, Duration::ZERO);
        r.event(InputFile::Devices, FileEvent::Removed, t0);
        assert_eq!(r.deadline(), None);
        r.event(InputFile::Devices, FileEvent::Renamed, t0 + Q);
        assert_eq!(r.deadline(), Some(t0 + Q));
    }

    #[test]
    fn a_cut_short_or_changing_read_waits() {
        let t0 = Instant::now();
        let mut r = Readiness::new(Q, Duration::ZERO);
        r.partial(InputFile::Devices, t0, t0);
        assert_eq!(r.deadline(), Some(t0 + Q));
        assert_eq!(r.take(t0 + Q), Some((t0, Ready::Quiet)));
        r.retry(t0, t0, Duration::from_millis(20));
        assert_eq!(r.deadline(), Some(t0 + Duration::from_millis(20)));
    }

    #[test]
    fn files_that_end_mid_record_are_partial() {
        let raw = |net: &str, dev: &str, conf: Option<&str>| RawInputs {
            network: net.into(),
            devices: dev.as_bytes().to_vec(),
            config: conf.map(str::to_string),
        };
        let csv = "Circuit ID,Circuit Name\n1,a\n";
        assert_eq!(partial_file(&raw("{}", csv, None)), None);
        assert_eq!(partial_file(&raw("{}", csv, Some("[x]\n"))), None);
        assert_eq!(
            partial_file(&raw("{}", "Circuit ID,Circuit Name\n1,", None)),
            Some(InputFile::Devices)
        );
        assert_eq!(partial_file(&raw("{}", "", None)), Some(InputFile::Devices));
        assert_eq!(
            partial_file(&raw("{\"a\": {", csv, None)),
            Some(InputFile::Network)
        );
        assert_eq!(partial_file(&raw("", csv, None)), Some(InputFile::Network));
        // Broken (not cut short) JSON is for validation to report.
        assert_eq!(partial_file(&raw("{]", csv, None)), None);
        assert_eq!(
            partial_file(&raw("{}", csv, Some("[bridge]\nto_int"))),
            Some(InputFile::Config)
        );
    }
}
