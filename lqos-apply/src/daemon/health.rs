//! The daemon's health numbers (what `/metrics` says about the daemon
//! itself), kept from its events.

use std::collections::BTreeMap;

use super::event::Event;
use crate::stats::openmetrics::{Family, Kind};

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

    /// The health as exposition families (both text formats):
    /// `lqos_reloads_total{trigger, outcome}`,
    /// `lqos_reload_last_timestamp_seconds`, `_duration_seconds`,
    /// `lqos_reload_last_success`, `lqos_reload_last_ops{change}`,
    /// `lqos_lazy_leaves_active`, `lqos_stats_poll_duration_seconds`,
    /// `lqos_stats_polls_total`, `lqos_stats_poll_errors_total`.
    pub fn families(&self) -> Vec<Family> {
        let gauge =
            |name: &str, help: &str, v: f64| Family::new(name, help, Kind::Gauge).sample(&[], v);
        let mut reloads = Family::new(
            "lqos_reloads",
            "Reloads by trigger and outcome",
            Kind::Counter,
        );
        for ((t, o), n) in &self.reloads {
            reloads = reloads.sample(&[("trigger", t), ("outcome", o)], *n as f64);
        }
        let mut v = vec![reloads];
        if let Some(t) = self.last_reload_unix {
            v.push(gauge(
                "lqos_reload_last_timestamp_seconds",
                "Unix time of the last reload",
                t,
            ));
        }
        v.push(gauge(
            "lqos_reload_last_duration_seconds",
            "Duration of the last reload",
            self.last_reload_secs,
        ));
        v.push(gauge(
            "lqos_reload_last_success",
            "1 when the last reload succeeded",
            if self.last_ok { 1.0 } else { 0.0 },
        ));
        let mut ops = Family::new(
            "lqos_reload_last_ops",
            "Ops of the last reload by change",
            Kind::Gauge,
        );
        for (k, n) in ["added", "changed", "removed"]
            .into_iter()
            .zip(self.last_ops)
        {
            ops = ops.sample(&[("change", k)], n as f64);
        }
        v.push(ops);
        if let Some(n) = self.lazy_active {
            v.push(gauge(
                "lqos_lazy_leaves_active",
                "Circuits with their lazy leaf now",
                n as f64,
            ));
        }
        v.push(gauge(
            "lqos_stats_poll_duration_seconds",
            "Duration of the last statistics poll",
            self.poll_secs,
        ));
        v.push(
            Family::new("lqos_stats_polls", "Statistics polls", Kind::Counter)
                .sample(&[], self.polls as f64),
        );
        v.push(
            Family::new(
                "lqos_stats_poll_errors",
                "Statistics polls that failed",
                Kind::Counter,
            )
            .sample(&[], self.poll_errors as f64),
        );
        v
    }
}
