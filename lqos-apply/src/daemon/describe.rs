//! Each [`Event`] described as log lines: a level, a message and its
//! fields, in the order a structured logger should record them. The
//! messages state facts; advice naming a program's flags is the embedding
//! program's to add.

use std::time::Duration;

use crate::error::ApplyError;
use crate::error::Stopped;

use super::event::{Applied, Event, LoadPath};
use crate::state::StateFile;

/// How much a line matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Something failed: inputs refused, a load failed.
    Error,
    /// Something is off but the daemon carries on.
    Warn,
    /// What the daemon did.
    Info,
    /// Detail for debugging (file events, why a path was taken).
    Debug,
}

/// A field's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// Text to show as it is: a path, an error, a trigger, a rendering.
    Text(String),
    /// A string value (text loggers quote it): a number with its
    /// decimals, a file name, a circuit ID.
    Str(String),
    /// A count or a size.
    U64(u64),
    /// A flag.
    Bool(bool),
}

/// One log line of an event.
#[derive(Debug, Clone, PartialEq)]
pub struct LogLine {
    /// How much it matters.
    pub level: Level,
    /// What happened.
    pub message: String,
    /// Its numbers and names, in order.
    pub fields: Vec<(&'static str, Value)>,
}

impl LogLine {
    fn new(level: Level, message: &str) -> LogLine {
        LogLine {
            level,
            message: message.to_string(),
            fields: Vec::new(),
        }
    }

    fn text(mut self, name: &'static str, v: impl std::fmt::Display) -> LogLine {
        self.fields.push((name, Value::Text(v.to_string())));
        self
    }

    fn str(mut self, name: &'static str, v: impl Into<String>) -> LogLine {
        self.fields.push((name, Value::Str(v.into())));
        self
    }

    fn num(mut self, name: &'static str, v: impl TryInto<u64>) -> LogLine {
        self.fields
            .push((name, Value::U64(v.try_into().unwrap_or(u64::MAX))));
        self
    }

    fn flag(mut self, name: &'static str, v: bool) -> LogLine {
        self.fields.push((name, Value::Bool(v)));
        self
    }

    /// The value of field `name`, if the line has it.
    pub fn field(&self, name: &str) -> Option<&Value> {
        self.fields.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// Sets field `name` (appended when the line does not have it).
    pub fn set(&mut self, name: &'static str, value: Value) {
        match self.fields.iter_mut().find(|(n, _)| *n == name) {
            Some((_, v)) => *v = value,
            None => self.fields.push((name, value)),
        }
    }
}

/// Milliseconds with one decimal.
fn ms1(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e3)
}

/// Milliseconds with two decimals.
fn ms2(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1e3)
}

/// At most this many repair ops get a line of their own.
pub const REPAIRS_LOGGED: usize = 50;

/// At most this many squashed (and this many cleared) nodes get a line of
/// their own, then one line counts them.
pub const SQUASHED_LOGGED: usize = 50;

impl Event {
    /// The event as log lines (one, except a repair: one line per op, at
    /// most [`REPAIRS_LOGGED`], then the count).
    pub fn describe(&self) -> Vec<LogLine> {
        use Level::*;
        let line = match self {
            Event::SavedPlanIgnored { error } => {
                LogLine::new(Warn, "ignoring the saved plan; classids may change")
                    .text("error", error)
            }
            Event::Started { lazy_leaves } => {
                LogLine::new(Info, "daemon started").flag("lazy_leaves", *lazy_leaves)
            }
            Event::InputWarning(p) => LogLine::new(Warn, "input warning").text("problem", p),
            Event::InvalidInput(p) => {
                let mut l = LogLine::new(Error, "invalid input").text("file", &p.file);
                if let Some(n) = p.line {
                    l = l.num("line", n);
                }
                if let Some(c) = &p.circuit {
                    l = l.str("circuit", c.as_str());
                }
                l.text("problem", p)
            }
            Event::Rejected { trigger, errors } => LogLine::new(
                Error,
                "inputs rejected: nothing applied, the live tree and the last good plan stay",
            )
            .text("trigger", trigger)
            .num("errors", *errors),
            Event::PlanRefused { trigger, error } => {
                LogLine::new(Error, "inputs rejected: nothing applied")
                    .text("trigger", trigger)
                    .text("error", error)
            }
            Event::PlanFailed { trigger, error } => LogLine::new(Error, "cannot plan")
                .text("trigger", trigger)
                .text("error", error),
            Event::Indexed { took, indexed } => {
                LogLine::new(Debug, "inputs indexed for incremental edits")
                    .str("ms", ms1(*took))
                    .flag("indexed", *indexed)
            }
            Event::PlannedInFull { reason } => {
                LogLine::new(Debug, "edit planned in full").text("reason", reason)
            }
            Event::WholeTreeDiff { reason } => {
                LogLine::new(Debug, "diffing the whole tree against the known state")
                    .text("reason", reason)
            }
            Event::Unchanged { trigger } => {
                LogLine::new(Info, "inputs unchanged; nothing to apply").text("trigger", trigger)
            }
            Event::PartialWrite { file, wait } => LogLine::new(
                Info,
                "input ends in the middle of a record: waiting for the rest",
            )
            .str("file", file.name())
            .num("wait_ms", wait.as_millis()),
            Event::InputsChanging { path } => {
                LogLine::new(Debug, "input changed while read: reading again")
                    .text("path", path.display())
            }
            Event::RemovalsRefused {
                trigger,
                refusal,
                sha256,
            } => LogLine::new(
                Error,
                "inputs refused: nothing applied, the live tree and the last good plan stay",
            )
            .text("trigger", trigger)
            .text("refusal", refusal)
            .text("sha256", sha256),
            Event::ConfirmIgnored { sha256, pending } => LogLine::new(
                Warn,
                "confirmation ignored: it does not name the refused inputs",
            )
            .text("sha256", sha256)
            .flag("pending", *pending),
            Event::FullRebuild { dev, reason, ops } => LogLine::new(Info, "full rebuild")
                .text("dev", dev)
                .text("reason", reason)
                .num("ops", *ops),
            Event::Applied(Applied {
                trigger,
                took,
                path: LoadPath::Unchanged,
                ..
            }) => LogLine::new(Info, "inputs are the ones live again: nothing to send")
                .text("trigger", trigger)
                .str("ms", ms1(*took)),
            Event::Applied(a) => {
                let s = &a.summary;
                let l = LogLine::new(Info, "applied")
                    .text("trigger", a.trigger)
                    .num("added", s.added)
                    .num("changed", s.changed)
                    .num("removed", s.removed)
                    .str("ms", ms1(a.took));
                match &a.path {
                    LoadPath::Full {
                        plan,
                        load,
                        readback,
                    } => l
                        .str("plan_ms", ms1(*plan))
                        .str("load_ms", ms1(*load))
                        .flag("readback", *readback),
                    LoadPath::Incremental(b) => l
                        .flag("incremental", true)
                        .num("rows", b.rows)
                        .num("circuits", b.circuits)
                        .str("parse_ms", ms2(b.parse))
                        .str("plan_ms", ms2(b.plan))
                        .str("diff_ms", ms2(b.diff))
                        .str("load_ms", ms2(b.load)),
                    LoadPath::Unchanged => l,
                }
            }
            Event::Squashed {
                now,
                cleared,
                total,
            } => {
                let mut lines: Vec<LogLine> = now
                    .iter()
                    .take(SQUASHED_LOGGED)
                    .map(|s| {
                        LogLine::new(
                            Warn,
                            "the node cannot guarantee its circuits' minimums: each is squashed",
                        )
                        .str("node", s.node.as_str())
                        .num("circuits", s.circuits)
                        .str("asked_down_mbps", s.asked_down.to_string())
                        .str("asked_up_mbps", s.asked_up.to_string())
                        .str("fits_down_mbps", s.fits_down.to_string())
                        .str("fits_up_mbps", s.fits_up.to_string())
                        .str("each_mbps", s.each.to_string())
                    })
                    .chain(cleared.iter().take(SQUASHED_LOGGED).map(|n| {
                        LogLine::new(Info, "the node's circuits' minimums are guaranteed again")
                            .str("node", n.as_str())
                    }))
                    .collect();
                if now.len() > SQUASHED_LOGGED || cleared.len() > SQUASHED_LOGGED {
                    lines.push(
                        LogLine::new(Warn, "nodes whose circuits' minimums are squashed")
                            .num("changed", now.len())
                            .num("cleared", cleared.len())
                            .num("total", *total),
                    );
                }
                return lines;
            }
            Event::LoadFailed {
                trigger,
                summary: s,
                error,
            } => {
                let what = if matches!(error, ApplyError::NotEnoughMemory { .. }) {
                    "not enough memory: nothing changed; will retry"
                } else if matches!(
                    error,
                    ApplyError::Incomplete {
                        reason: Stopped::Cancelled { .. },
                        ..
                    }
                ) {
                    "load stopped by a signal between two batches; the next start reads the \
                     kernel back"
                } else {
                    "kernel error; will retry"
                };
                LogLine::new(Error, what)
                    .text("trigger", trigger)
                    .num("added", s.added)
                    .num("changed", s.changed)
                    .num("removed", s.removed)
                    .text("error", error)
            }
            Event::OutOfStep { dev } => LogLine::new(
                Warn,
                "the daemon's model of the kernel went out of step; reading back next time",
            )
            .text("dev", dev),
            Event::LastGoodSaved { took } => {
                LogLine::new(Debug, "last good plan saved").str("ms", ms2(*took))
            }
            Event::SaveFailed { what, error } => LogLine::new(
                Warn,
                match what {
                    StateFile::LastPlan => "cannot save the last good plan",
                    StateFile::WatchStatus => "cannot write the status file",
                    StateFile::Journal => "cannot write the input journal",
                    StateFile::Confirm => "cannot write the confirmation",
                    StateFile::ProbeCache => "cannot write the qdisc kind probe cache",
                    StateFile::Lock => "cannot write the lock file",
                },
            )
            .text("error", error),
            Event::LeavesUnreadable { error } => {
                LogLine::new(Warn, "cannot read the leaves back").text("error", error)
            }
            Event::InSync => LogLine::new(Info, "verify: in sync"),
            Event::Repaired { ops } => {
                let mut lines: Vec<LogLine> = ops
                    .iter()
                    .take(REPAIRS_LOGGED)
                    .map(|op| LogLine::new(Warn, "verify: repaired drift").text("op", op))
                    .collect();
                lines.push(LogLine::new(Warn, "verify: repaired drift").num("ops", ops.len()));
                return lines;
            }
            Event::CountersUnreadable { dev, error } => {
                LogLine::new(Warn, "poll: cannot read counters")
                    .text("dev", dev)
                    .text("error", error)
            }
            Event::CountersRead {
                took,
                interfaces,
                failed,
            } => LogLine::new(Debug, "poll")
                .num("interfaces", *interfaces)
                .num("failed", *failed)
                .str("ms", ms1(*took)),
            Event::LeavesDeferred {
                dev,
                added,
                deferred,
                mem,
            } => LogLine::new(
                Warn,
                "leaf poll: not enough memory for every active circuit's leaf; the rest stay \
                 without until memory frees up",
            )
            .text("dev", dev)
            .num("added", *added)
            .num("deferred", *deferred)
            .num("mem_available_mib", mem.available >> 20)
            .num("margin_mib", mem.margin() >> 20),
            Event::LeafKernelError { dev, error } => LogLine::new(Error, "leaf poll: kernel error")
                .text("dev", dev)
                .text("error", error),
            Event::LeavesUnchanged { active } => {
                LogLine::new(Debug, "leaf poll: no change").num("active", *active)
            }
            Event::Leaves {
                added,
                removed,
                active,
                took,
            } => LogLine::new(Info, "leaves")
                .num("added", *added)
                .num("removed", *removed)
                .num("active", *active)
                .str("ms", ms1(*took)),
        };
        vec![line]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::{Applied, Breakdown};
    use crate::watch::Trigger;
    use lqos_tc::DiffSummary;

    fn one(e: Event) -> LogLine {
        let mut lines = e.describe();
        assert_eq!(lines.len(), 1);
        lines.remove(0)
    }

    #[test]
    fn an_incremental_load_names_its_parts() {
        let l = one(Event::Applied(Applied {
            trigger: Trigger::FileChange,
            summary: {
                let mut s = DiffSummary::default();
                s.changed = 1;
                s
            },
            took: Duration::from_micros(24_400),
            path: LoadPath::Incremental(Breakdown {
                parse: Duration::from_micros(1_234),
                rows: 1,
                circuits: 1,
                ..Default::default()
            }),
        }));
        assert_eq!((l.level, l.message.as_str()), (Level::Info, "applied"));
        let names: Vec<&str> = l.fields.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names,
            [
                "trigger",
                "added",
                "changed",
                "removed",
                "ms",
                "incremental",
                "rows",
                "circuits",
                "parse_ms",
                "plan_ms",
                "diff_ms",
                "load_ms"
            ]
        );
        assert_eq!(l.field("trigger"), Some(&Value::Text("file-change".into())));
        assert_eq!(l.field("ms"), Some(&Value::Str("24.4".into())));
        assert_eq!(l.field("parse_ms"), Some(&Value::Str("1.23".into())));
        assert_eq!(l.field("changed"), Some(&Value::U64(1)));
    }

    #[test]
    fn a_repair_is_a_line_per_op_then_the_count() {
        let ops: Vec<String> = (0..60).map(|i| format!("class change {i}")).collect();
        let lines = Event::Repaired { ops }.describe();
        assert_eq!(lines.len(), REPAIRS_LOGGED + 1);
        assert!(lines.iter().all(|l| l.level == Level::Warn));
        assert_eq!(
            lines[0].field("op"),
            Some(&Value::Text("class change 0".into()))
        );
        assert_eq!(lines[REPAIRS_LOGGED].field("ops"), Some(&Value::U64(60)));
    }

    #[test]
    fn messages_name_no_flags() {
        let mem = crate::memory::MemInfo {
            total: 4096 << 20,
            available: 1024 << 20,
        };
        let l = one(Event::LeavesDeferred {
            dev: "ens19".into(),
            added: 3,
            deferred: 7,
            mem,
        });
        assert!(!l.message.contains("--"), "{}", l.message);
        assert_eq!(l.field("mem_available_mib"), Some(&Value::U64(1024)));
        let l = one(Event::InvalidInput(lqos_model::Problem::error(
            "ShapedDevices.csv",
            "bad",
        )));
        assert_eq!(l.level, Level::Error);
        assert!(l.field("line").is_none() && l.field("circuit").is_none());
    }
}
