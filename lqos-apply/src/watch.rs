//! The status file of the reload daemon: what it last did, written
//! atomically to the state directory after every event, for a status
//! reader.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::state::{NetnsState, StateFile};

/// Format version of [`WatchStatus`].
pub const STATUS_VERSION: u32 = 1;

/// The confirmation of refused inputs for the reload daemon (its
/// [`StateFile::Confirm`] file): the daemon applies the inputs with this
/// sha256 once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Confirmation {
    /// The sha256 of the refused inputs it confirms.
    pub sha256: String,
}

impl Confirmation {
    /// Writes it atomically for the daemon of `state`'s namespace.
    pub fn save(&self, state: &NetnsState) -> Result<()> {
        state.save_json(StateFile::Confirm, self)
    }

    /// The confirmation waiting for the daemon of `state`'s namespace, if
    /// any; the file is removed (a confirmation is used once), even when it
    /// cannot be read.
    pub fn take(state: &NetnsState) -> Result<Option<Confirmation>> {
        let found = state.load_json(StateFile::Confirm);
        let path = state.file(StateFile::Confirm);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(crate::error::ApplyError::io(
                    crate::error::IoAction::Remove,
                    Some(&path),
                    e,
                ))
            }
            _ => {}
        }
        found
    }
}

/// What started an event (shown kebab-case, as in the JSON).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Trigger {
    /// The first apply after start.
    Start,
    /// An input file changed.
    FileChange,
    /// SIGHUP.
    Sighup,
    /// Retry of an apply that failed in the kernel.
    Retry,
    /// The periodic verify.
    Verify,
    /// The lazy-leaf poll.
    LeafPoll,
    /// An operator confirmed refused removals ([`Confirmation`]).
    Confirm,
}

impl fmt::Display for Trigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Trigger::Start => "start",
            Trigger::FileChange => "file-change",
            Trigger::Sighup => "sighup",
            Trigger::Retry => "retry",
            Trigger::Verify => "verify",
            Trigger::LeafPoll => "leaf-poll",
            Trigger::Confirm => "confirm",
        })
    }
}

/// How an event ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Outcome {
    /// Ops loaded (possibly none: already in sync).
    Applied,
    /// The inputs failed validation; nothing was sent.
    Rejected,
    /// The kernel (or reading it) failed; retried later.
    Failed,
    /// The removal guard refused it (nothing was sent); applied once
    /// confirmed.
    Refused,
}

/// One event of the daemon.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct WatchEvent {
    /// Milliseconds since the Unix epoch when it ended.
    pub at_ms: u64,
    /// What started it.
    pub trigger: Trigger,
    /// How it ended.
    pub outcome: Outcome,
    /// Ops that add objects.
    pub added: usize,
    /// Ops that change objects in place.
    pub changed: usize,
    /// Ops that delete objects.
    pub removed: usize,
    /// From the trigger (first file event, signal, timer) to kernel done.
    pub millis: f64,
    /// The problem (validation report, failing op and kernel message).
    pub error: Option<String>,
}

impl WatchEvent {
    /// An event ending now.
    pub fn now(trigger: Trigger, outcome: Outcome, took: Duration) -> WatchEvent {
        WatchEvent {
            at_ms: unix_ms(SystemTime::now()),
            trigger,
            outcome,
            added: 0,
            changed: 0,
            removed: 0,
            millis: took.as_secs_f64() * 1e3,
            error: None,
        }
    }
}

/// The daemon's status, as saved in its [`StateFile::WatchStatus`] file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct WatchStatus {
    /// [`STATUS_VERSION`].
    pub version: u32,
    /// The daemon's pid.
    pub pid: u32,
    /// Its network namespace (None = the host's).
    pub netns: Option<String>,
    /// Milliseconds since the Unix epoch when it started.
    pub started_ms: u64,
    /// Set when it exited (SIGTERM/SIGINT).
    pub stopped_ms: Option<u64>,
    /// Whether leaves are lazy.
    pub lazy_leaves: bool,
    /// Circuits in the plan it runs.
    pub circuits: usize,
    /// Circuits (over all interfaces) with their leaf loaded; with lazy
    /// leaves off, every planned leaf.
    pub active_leaves: usize,
    /// The last event.
    pub last: Option<WatchEvent>,
    /// The last event that failed or was rejected.
    pub last_error: Option<WatchEvent>,
    /// Inputs the removal guard refused, waiting for a confirmation.
    #[serde(default)]
    pub pending: Option<Pending>,
}

/// Inputs the removal guard refused, as the status file keeps them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pending {
    /// sha256 of the refused inputs (what a confirmation names).
    pub sha256: String,
    /// Why (the count and the first circuits).
    pub refusal: crate::guard::Refusal,
    /// Milliseconds since the Unix epoch when it was refused.
    pub at_ms: u64,
}

impl WatchStatus {
    /// A fresh status for this process.
    pub fn new(netns: Option<&str>, lazy_leaves: bool) -> WatchStatus {
        WatchStatus {
            version: STATUS_VERSION,
            pid: std::process::id(),
            netns: netns.map(str::to_string),
            started_ms: unix_ms(SystemTime::now()),
            stopped_ms: None,
            lazy_leaves,
            circuits: 0,
            active_leaves: 0,
            last: None,
            last_error: None,
            pending: None,
        }
    }

    /// Records `e` as the last event (and last error if it is one).
    pub fn record(&mut self, e: WatchEvent) {
        if e.outcome != Outcome::Applied {
            self.last_error = Some(e.clone());
        }
        self.last = Some(e);
    }

    /// Writes it atomically as the status of `state`'s namespace.
    pub fn save(&self, state: &NetnsState) -> Result<()> {
        state.save_json(StateFile::WatchStatus, self)
    }

    /// The saved status of `state`'s namespace, if any (a state directory
    /// that does not exist is not created).
    pub fn load(state: &NetnsState) -> Result<Option<WatchStatus>> {
        state.load_json(StateFile::WatchStatus)
    }
}

/// Milliseconds since the Unix epoch of `t`.
pub fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn time(ms: u64) -> String {
    let t = UNIX_EPOCH + Duration::from_millis(ms);
    humantime::format_rfc3339_millis(t).to_string()
}

impl fmt::Display for WatchEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let outcome = match self.outcome {
            Outcome::Applied => "applied",
            Outcome::Rejected => "rejected (invalid inputs, nothing sent)",
            Outcome::Failed => "failed (will retry)",
            Outcome::Refused => "refused by the removal guard (nothing sent)",
        };
        write!(
            f,
            "{} {}: {outcome}, {} added, {} changed, {} removed, {:.1} ms",
            time(self.at_ms),
            self.trigger,
            self.added,
            self.changed,
            self.removed,
            self.millis
        )?;
        if let Some(e) = &self.error {
            for line in e.lines() {
                write!(f, "\n    {line}")?;
            }
        }
        Ok(())
    }
}

impl fmt::Display for WatchStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self
            .netns
            .as_deref()
            .map(|n| format!(" in netns {n}"))
            .unwrap_or_default();
        match self.stopped_ms {
            Some(s) => writeln!(
                f,
                "reload daemon (pid {}){ns}: stopped at {}",
                self.pid,
                time(s)
            )?,
            None => writeln!(
                f,
                "reload daemon (pid {}){ns}: running since {}",
                self.pid,
                time(self.started_ms)
            )?,
        }
        writeln!(
            f,
            "circuits: {}, leaves loaded: {}{}",
            self.circuits,
            self.active_leaves,
            if self.lazy_leaves { " (lazy)" } else { "" }
        )?;
        match &self.last {
            Some(e) => writeln!(f, "last: {e}")?,
            None => writeln!(f, "last: nothing yet")?,
        }
        if let Some(e) = &self.last_error {
            if Some(e) != self.last.as_ref() {
                writeln!(f, "last error: {e}")?;
            }
        }
        if let Some(p) = &self.pending {
            writeln!(
                f,
                "pending: inputs {} refused at {}: {}",
                &p.sha256[..12.min(p.sha256.len())],
                time(p.at_ms),
                p.refusal
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_round_trips_and_prints_the_last_event_and_error() {
        let dir = tempfile::tempdir().unwrap();
        let st = NetnsState::new(dir.path(), Some("x"));
        assert_eq!(WatchStatus::load(&st).unwrap(), None);
        let mut s = WatchStatus::new(Some("x"), true);
        let mut bad = WatchEvent::now(Trigger::FileChange, Outcome::Rejected, Duration::ZERO);
        bad.error = Some("ShapedDevices.csv:7: bad rate".into());
        s.record(bad);
        let mut ok = WatchEvent::now(
            Trigger::FileChange,
            Outcome::Applied,
            Duration::from_millis(12),
        );
        ok.changed = 1;
        s.record(ok);
        s.active_leaves = 3;
        s.save(&st).unwrap();
        let back = WatchStatus::load(&st).unwrap().unwrap();
        assert_eq!(back, s);
        let text = back.to_string();
        assert!(text.contains("leaves loaded: 3 (lazy)"), "{text}");
        assert!(
            text.contains("file-change: applied, 0 added, 1 changed, 0 removed, 12.0 ms"),
            "{text}"
        );
        assert!(
            text.contains("last error:") && text.contains("ShapedDevices.csv:7"),
            "{text}"
        );
        assert!(dir.path().join("watch-status.netns-x.json").exists());
    }

    #[test]
    fn a_confirmation_is_taken_once() {
        let dir = tempfile::tempdir().unwrap();
        let st = NetnsState::new(dir.path(), None);
        assert_eq!(Confirmation::take(&st).unwrap(), None);
        let c = Confirmation {
            sha256: "ab".into(),
        };
        c.save(&st).unwrap();
        assert!(dir.path().join("confirm.json").exists());
        assert_eq!(Confirmation::take(&st).unwrap(), Some(c));
        assert_eq!(Confirmation::take(&st).unwrap(), None);
        std::fs::write(dir.path().join("confirm.json"), "{").unwrap();
        assert!(Confirmation::take(&st).is_err());
        assert!(!dir.path().join("confirm.json").exists());
    }
}
