//! The daemon's events as `tracing` log lines: each [`Event`] describes
//! itself ([`Event::describe`]); this module adds this binary's advice
//! (its flags and commands, from [`crate::hints`]) and the start line's
//! paths, and records each line's fields in one fixed order (the
//! callsites'), which keeps every event's own order.

use std::path::PathBuf;

use lqos_apply::daemon::{Event, Level, LogLine, Value};
use tracing::callsite::{Callsite, DefaultCallsite};
use tracing::field::{display, DisplayValue, Field};

/// What is logged once the daemon knows whether leaves are lazy.
pub(super) struct StartInfo {
    pub netns: Option<String>,
    pub files: Vec<PathBuf>,
    pub state_dir: PathBuf,
}

/// One log line per event (a repair: one per op, then the count).
pub(super) fn log(e: Event, start: &StartInfo) {
    let mut lines = e.describe();
    match &e {
        Event::Started { .. } => {
            let l = &mut lines[0];
            l.message = "lqos watch started".to_string();
            if let Some(ns) = &start.netns {
                l.set("netns", Value::Str(ns.clone()));
            }
            l.set("files", Value::Text(format!("{:?}", start.files)));
            l.set(
                "state_dir",
                Value::Text(start.state_dir.display().to_string()),
            );
        }
        Event::RemovalsRefused { .. } => {
            lines[0].message += "; `lqos confirm` applies them once";
        }
        Event::LeavesDeferred { .. } => {
            lines[0].message += " (--sqm fq_codel or more memory)";
        }
        Event::InputWarning(p) => {
            lines[0].set("problem", Value::Text(crate::hints::problem(p)));
        }
        Event::LoadFailed { error, .. } => {
            lines[0].set("error", Value::Text(crate::hints::with_hint(error)));
        }
        _ => {}
    }
    for l in &lines {
        emit(l);
    }
}

/// A callsite with every field an event's line may have, in the order
/// they are recorded (each event's own order is a subsequence of it).
macro_rules! site {
    ($lvl:ident) => {
        tracing::callsite! {
            name: "daemon event",
            kind: tracing::metadata::Kind::EVENT,
            target: super::TARGET,
            level: tracing::Level::$lvl,
            fields: message, netns, lazy_leaves, files, state_dir, file, line, circuit,
                problem, wait_ms, path, dev, trigger, added, changed, removed, deferred,
                mem_available_mib, margin_mib, active, ms, incremental, rows, node, circuits,
                asked_down_mbps, asked_up_mbps, fits_down_mbps, fits_up_mbps, each_mbps,
                cleared, total, parse_ms, plan_ms, diff_ms, load_ms, readback, indexed, reason,
                ops, op, refusal, sha256, pending, errors, error
        }
    };
}

/// How many fields the callsites have (`message` and the rest).
const FIELDS: usize = 46;

/// A field's value as `tracing` records it.
enum Recorded<'a> {
    Text(DisplayValue<&'a str>),
    Str(&'a str),
    U64(u64),
    Bool(bool),
}

impl Recorded<'_> {
    fn value(&self) -> &dyn tracing::Value {
        match self {
            Recorded::Text(v) => v,
            Recorded::Str(v) => v,
            Recorded::U64(v) => v,
            Recorded::Bool(v) => v,
        }
    }
}

/// Records one line, with its level and fields.
fn emit(line: &LogLine) {
    let (level, site): (tracing::Level, &'static DefaultCallsite) = match line.level {
        Level::Error => (tracing::Level::ERROR, site!(ERROR)),
        Level::Warn => (tracing::Level::WARN, site!(WARN)),
        Level::Info => (tracing::Level::INFO, site!(INFO)),
        Level::Debug => (tracing::Level::DEBUG, site!(DEBUG)),
    };
    if !tracing::level_enabled!(level) {
        return;
    }
    let meta = site.metadata();
    if !tracing::dispatcher::get_default(|d| d.enabled(meta)) {
        return;
    }
    let keys: Vec<Field> = meta.fields().iter().collect();
    assert_eq!(keys.len(), FIELDS, "the callsites' fields");
    let mut values: Vec<Option<Recorded>> = (0..FIELDS).map(|_| None).collect();
    values[0] = Some(Recorded::Text(display(line.message.as_str())));
    for (name, v) in &line.fields {
        // A field the callsites lack is a bug of this list: tests fail on
        // it; the daemon logs the line without it rather than stop.
        let Some(i) = keys.iter().position(|k| k.name() == *name) else {
            debug_assert!(false, "no log field {name} in the callsites");
            continue;
        };
        values[i] = Some(match v {
            Value::Text(s) => Recorded::Text(display(s.as_str())),
            Value::Str(s) => Recorded::Str(s.as_str()),
            Value::U64(n) => Recorded::U64(*n),
            Value::Bool(b) => Recorded::Bool(*b),
        });
    }
    let pairs: [(&Field, Option<&dyn tracing::Value>); FIELDS] =
        std::array::from_fn(|i| (&keys[i], values[i].as_ref().map(Recorded::value)));
    tracing::Event::dispatch(meta, &meta.fields().value_set(&pairs));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use tracing::{error, info};

    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// What `f` logs, as text and as JSON lines, without timestamps.
    fn logged(f: impl Fn()) -> (String, String) {
        let text = Buf::default();
        let w = text.clone();
        let sub = tracing_subscriber::fmt()
            .with_writer(move || w.clone())
            .with_target(false)
            .with_ansi(false)
            .without_time()
            .finish();
        tracing::subscriber::with_default(sub, &f);
        let json = Buf::default();
        let w = json.clone();
        let sub = tracing_subscriber::fmt()
            .with_writer(move || w.clone())
            .with_target(false)
            .without_time()
            .json()
            .flatten_event(true)
            .finish();
        tracing::subscriber::with_default(sub, &f);
        let s = |b: Buf| String::from_utf8(b.0.lock().unwrap().clone()).unwrap();
        (s(text), s(json))
    }

    /// Every field of the squashed nodes' lines is logged (a field the
    /// callsites lack stopped a debug build of the daemon).
    #[test]
    fn squashed_nodes_are_logged_with_every_number() {
        let start = StartInfo {
            netns: None,
            files: Vec::new(),
            state_dir: PathBuf::from("/var/lib/lqos"),
        };
        // A planner's report, as it serializes (rates in bit/s).
        let squashed: lqos_tc::rates::Squashed = serde_json::from_str(
            r#"{"node": "AP 1", "circuits": 40, "asked_down": 1500000000, "asked_up": 250000000,
                "fits_down": 999000000, "fits_up": 999000000, "each": 1000000}"#,
        )
        .unwrap();
        let (text, json) = logged(|| {
            log(
                Event::Squashed {
                    now: vec![squashed.clone()],
                    cleared: vec!["AP 2".into()],
                    total: 1,
                },
                &start,
            )
        });
        assert_eq!(text.lines().count(), 2, "{text}");
        for want in [
            "\"node\":\"AP 1\"",
            "\"circuits\":40",
            "\"asked_down_mbps\":\"1500\"",
            "\"asked_up_mbps\":\"250\"",
            "\"fits_down_mbps\":\"999\"",
            "\"each_mbps\":\"1\"",
            "\"node\":\"AP 2\"",
        ] {
            assert!(json.contains(want), "{want} not in {json}");
        }
    }

    /// The lines are what the field-by-field macros wrote.
    #[test]
    fn lines_are_the_macros_bytes() {
        let start = StartInfo {
            netns: Some("ns1".into()),
            files: vec![PathBuf::from("/a/network.json")],
            state_dir: PathBuf::from("/var/lib/lqos"),
        };
        let new = logged(|| {
            log(Event::Started { lazy_leaves: true }, &start);
            let mut p = lqos_model::Problem::error("ShapedDevices.csv", "bad rate");
            p.line = Some(7);
            p.circuit = Some("c 1".into());
            log(Event::InvalidInput(p), &start);
        });
        let old = logged(|| {
            info!(
                netns = start.netns.as_deref(),
                lazy_leaves = true,
                files = ?start.files,
                state_dir = %start.state_dir.display(),
                "lqos watch started"
            );
            let mut p = lqos_model::Problem::error("ShapedDevices.csv", "bad rate");
            p.line = Some(7);
            p.circuit = Some("c 1".into());
            error!(
                file = %p.file,
                line = p.line,
                circuit = p.circuit.as_deref(),
                problem = %p,
                "invalid input"
            );
        });
        assert_eq!(new.0, old.0);
        assert_eq!(new.1, old.1);
        assert!(
            new.0.contains("netns=\"ns1\" lazy_leaves=true"),
            "{}",
            new.0
        );
    }
}
