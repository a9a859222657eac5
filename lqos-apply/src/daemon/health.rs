//! The daemon's health numbers (what `/metrics` says about the daemon
//! itself), kept from its events.

use std::collections::BTreeMap;

use super::event::Event;

/// What the daemon last did: reloads by trigger and outcome, the last
/// reload, lazy leaves, polls. [`super::Driver`] keeps one from the events
/// it reports ([`Driver::health`](super::Driver::health)).
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct Health {
    /// Reloads by (trigger, outcome: `applied`, `failed`, `rejected`).
    pub reloads: BTreeMap<(String, String), u64>,
    /// Unix time of the last reload (seconds).
    pub last_reload_unix: Option<f64>,
    /// Its duration, seconds.
    pub last_reload_secs: f64,
    /// Its ops added, changed, removed.
    pub last_ops: [u64; 3],
    /// Whether it succeeded.
    pub last_ok: bool,
    /// Circuits with their lazy leaf now (`None`: lazy leaves off).
    pub lazy_active: Option<usize>,
    /// Duration of the last poll, seconds.
    pub poll_secs: f64,
    /// Polls made.
    pub polls: u64,
    /// Polls in which an interface could not be read.
    pub poll_errors: u64,
}

impl Health {
    /// Takes one event of the daemon, reported at Unix time `unix_secs`.
    pub fn event(&mut self, e: &Event, unix_secs: f64) {
        let mut reload = |trigger: String, outcome: &str, secs: f64, ops: [u64; 3], ok: bool| {
            *self
                .reloads
                .entry((trigger, outcome.to_string()))
                .or_default() += 1;
            self.last_reload_unix = Some(unix_secs);
            self.last_reload_secs = secs;
            self.last_ops = ops;
            self.last_ok = ok;
        };
        match e {
            Event::Applied(a) => {
                let s = &a.summary;
                let ops = [s.added as u64, s.changed as u64, s.removed as u64];
                reload(
                    a.trigger.to_string(),
                    "applied",
                    a.took.as_secs_f64(),
                    ops,
                    true,
                );
            }
            Event::LoadFailed {
                trigger, summary, ..
            } => {
                let s = summary;
                let ops = [s.added as u64, s.changed as u64, s.removed as u64];
                reload(trigger.to_string(), "failed", 0.0, ops, false);
            }
            Event::Rejected { trigger, .. }
            | Event::PlanRefused { trigger, .. }
            | Event::PlanFailed { trigger, .. } => {
                reload(trigger.to_string(), "rejected", 0.0, [0; 3], false)
            }
            Event::Leaves { active, .. } | Event::LeavesUnchanged { active } => {
                self.lazy_active = Some(*active)
            }
            Event::CountersRead { took, failed, .. } => {
                self.polls += 1;
                self.poll_secs = took.as_secs_f64();
                if *failed > 0 {
                    self.poll_errors += 1;
                }
            }
            _ => {}
        }
    }
}
