//! A reload's first part: the inputs read, validated and planned (the
//! full path).

use super::*;

impl Reloader {
    pub(super) fn got_inputs(&mut self, readback: bool, raw: Result<RawInputs>, now: Instant) {
        let trigger = self.job_trigger();
        // An edit made ready by a close or rename whose file still ends in
        // the middle of a record: its writer is not done; wait.
        if let (Ok(r), Some(Ready::Closed)) = (&raw, self.job.as_ref().and_then(|j| j.ready)) {
            let network_known = self
                .current
                .as_ref()
                .and_then(|c| c.index.as_ref())
                .is_some_and(|i| i.network_text == r.network);
            let file = if network_known {
                // Unchanged network.json: only the other two are looked at.
                partial_file(&RawInputs {
                    network: "{}".into(),
                    devices: Vec::new(),
                    config: r.config.clone(),
                })
                .filter(|f| *f != InputFile::Devices)
                .or_else(|| {
                    (r.devices.is_empty() || !r.devices.ends_with(b"\n"))
                        .then_some(InputFile::Devices)
                })
            } else {
                partial_file(r)
            };
            if let Some(file) = file {
                let since = self.job_since();
                self.ready.partial(file, since, now);
                self.emit(Event::PartialWrite {
                    file,
                    wait: self.settings.quiet,
                });
                self.job = None;
                return;
            }
        }
        let raw = if !readback && trigger == Trigger::FileChange && self.settings.incremental {
            match self.try_incremental(raw) {
                Incremental::Continue(step) => return self.set_step(*step),
                Incremental::Unchanged => return self.unchanged(now),
                Incremental::Full(reason, raw) => {
                    self.emit(Event::PlannedInFull { reason });
                    raw
                }
            }
        } else {
            raw
        };
        self.plan_inputs(readback, raw, now);
    }

    /// The full path: validate and plan everything read.
    pub(super) fn plan_inputs(&mut self, readback: bool, raw: Result<RawInputs>, now: Instant) {
        let trigger = self.job_trigger();
        let raw = match raw {
            Ok(raw) => raw,
            Err(e) => {
                self.decide_leaves(false);
                return self.plan_failed(e, now);
            }
        };
        // An empty file is refused before it is read as one without
        // circuits (or as the built-in config).
        let empty = [
            (raw.network.trim().is_empty(), "network.json"),
            (raw.devices.trim_ascii().is_empty(), "ShapedDevices.csv"),
            (
                raw.config.as_deref().is_some_and(|c| c.trim().is_empty()),
                "lqos.conf",
            ),
        ]
        .into_iter()
        .find_map(|(e, what)| e.then_some(what));
        if let Some(what) = empty {
            self.decide_leaves(false);
            let of = self.old_allocation().circuits.len();
            let refusal = crate::guard::Refusal::Empty {
                what: what.to_string(),
                of,
            };
            return self.refuse(raw, refusal, now);
        }
        let loaded = raw.load(&self.inputs);
        self.decide_leaves(loaded.config.lqos.lazy_leaves);
        if loaded.report.has_errors() {
            let errors = loaded.report.error_count();
            let text = loaded.report.to_string();
            for p in loaded.report.errors() {
                self.emit(Event::InvalidInput(p.clone()));
            }
            self.end_rejected(
                Outcome::Rejected,
                text,
                Event::Rejected { trigger, errors },
                now,
            );
            return;
        }
        // The queue count: given, or from the interfaces.
        if given_queues(&loaded.config, &self.settings.overrides).is_none() {
            match PlanConfig::from_lqos_config(&loaded.config, crate::inputs::NAMES_ONLY_QUEUES) {
                Ok(cfg) => {
                    self.asked = interface_names(&cfg.interfaces)
                        .into_iter()
                        .map(str::to_string)
                        .collect();
                    self.set_step(Step::Links {
                        readback,
                        raw,
                        loaded: Box::new(loaded),
                    });
                    return;
                }
                Err(source) => {
                    let error = ApplyError::Config {
                        path: loaded.config_path.clone(),
                        source,
                    };
                    return self.plan_refused(error, now);
                }
            }
        }
        self.plan_loaded(readback, raw, loaded, 0, now);
    }

    /// The inputs changed while they were read: read them again soon.
    pub(super) fn inputs_changing(
        &mut self,
        readback: bool,
        path: std::path::PathBuf,
        now: Instant,
    ) {
        let job = self.job.take().expect("a job");
        self.emit(Event::InputsChanging { path });
        let at = now + self.settings.stable_retry;
        if job.trigger == Trigger::FileChange {
            self.ready.retry(job.since, now, self.settings.stable_retry);
        } else {
            self.again = Some((job.trigger, job.since, readback, at));
        }
    }

    /// The first read of the inputs decides whether leaves are lazy (the
    /// flag, or `config_lazy`: lqos.conf's `[lqos] lazy_leaves`).
    pub(super) fn decide_leaves(&mut self, config_lazy: bool) {
        if self.leaves.is_none() {
            let lazy = self.settings.lazy_leaves || config_lazy;
            self.leaves = Some(if lazy {
                Leaves::Lazy(None)
            } else {
                Leaves::All
            });
            self.status.lazy_leaves = lazy;
            self.emit(Event::Started { lazy_leaves: lazy });
        }
    }

    /// The incremental path, if it applies.
    pub(super) fn try_incremental(&mut self, raw: Result<RawInputs>) -> Incremental {
        let (
            Some(Current {
                index: Some(idx), ..
            }),
            true,
        ) = (&self.current, self.known.is_known())
        else {
            return Incremental::Full(Fallback::NoIndex, raw);
        };
        let raw = match raw {
            Ok(r) => r,
            Err(e) => return Incremental::Full(Fallback::Unreadable(e.to_string()), Err(e)),
        };
        if raw.network != idx.network_text || raw.config != idx.config_text {
            return Incremental::Full(Fallback::OtherFileChanged, Ok(raw));
        }
        let patch = match idx.devices.edit(&idx.net, &raw.devices) {
            DevicesEdit::Same => {
                self.spare = Some(raw.devices);
                return Incremental::Unchanged;
            }
            DevicesEdit::Full(why) => return Incremental::Full(Fallback::Devices(why), Ok(raw)),
            DevicesEdit::Patch(p) => p,
        };
        for w in patch.report.warnings() {
            self.out
                .push_back(Output::Event(Event::InputWarning(w.clone())));
        }
        let b = Breakdown {
            rows: patch.rows,
            circuits: patch.circuits.len(),
            ..Breakdown::default()
        };
        Incremental::Continue(Box::new(Step::Patch {
            raw,
            patch: Box::new(patch),
            b,
        }))
    }

    pub(super) fn plan_loaded(
        &mut self,
        readback: bool,
        raw: RawInputs,
        loaded: crate::inputs::LoadedInputs,
        probed_queues: u32,
        now: Instant,
    ) {
        let prev = self
            .current
            .as_ref()
            .map(|c| &c.plan.allocation)
            .or(self.previous.as_ref());
        let r = loaded.plan(
            &self.settings.overrides,
            QueueCount::Default(probed_queues),
            prev,
        );
        match r {
            Ok(plan) => {
                if let Err(refusal) = self.guard(&raw, &loaded, &plan) {
                    return self.refuse(raw, refusal, now);
                }
                for w in loaded.report.warnings() {
                    self.out
                        .push_back(Output::Event(Event::InputWarning(w.clone())));
                }
                self.set_step(Step::Planned {
                    readback,
                    raw,
                    network: loaded.network,
                    plan,
                });
            }
            Err(e @ (ApplyError::Config { .. } | ApplyError::Planning { .. })) => {
                let e = match e {
                    ApplyError::Planning { source, .. } => ApplyError::Planning {
                        devices: Some(self.inputs.devices.clone()),
                        source,
                    },
                    e => e,
                };
                self.plan_refused(e, now)
            }
            Err(e) => self.plan_failed(e, now),
        }
    }

    /// The removal guard: too many circuits removed, or an empty input.
    /// Confirmed inputs (a confirm's job, same sha256) pass once.
    fn guard(
        &mut self,
        raw: &RawInputs,
        loaded: &crate::inputs::LoadedInputs,
        plan: &Plan,
    ) -> std::result::Result<(), crate::guard::Refusal> {
        let r = crate::guard::removals(self.old_allocation(), &plan.allocation);
        let empty: Vec<&str> = raw
            .config
            .as_deref()
            .filter(|c| c.trim().is_empty())
            .map(|_| "lqos.conf")
            .into_iter()
            .collect();
        let limit = self
            .settings
            .max_removals
            .unwrap_or(loaded.config.lqos.max_removals);
        let verdict = crate::guard::check(limit, &r, &empty);
        if verdict.is_err() {
            if let Some(sha) = self.allow_once.take() {
                if InputSet::from(raw).sha256() == sha {
                    return Ok(());
                }
            }
        }
        verdict
    }

    /// The allocation of the plan the daemon runs (or the saved one).
    fn old_allocation(&self) -> &Allocation {
        static EMPTY: std::sync::OnceLock<Allocation> = std::sync::OnceLock::new();
        self.current
            .as_ref()
            .map(|c| &c.plan.allocation)
            .or(self.previous.as_ref())
            .unwrap_or_else(|| EMPTY.get_or_init(Allocation::default))
    }

    fn refuse(&mut self, raw: RawInputs, refusal: crate::guard::Refusal, now: Instant) {
        let trigger = self.job_trigger();
        let sha256 = InputSet::from(&raw).sha256();
        let text = refusal.to_string();
        let event = Event::RemovalsRefused {
            trigger,
            refusal: refusal.clone(),
            sha256: sha256.clone(),
        };
        let r = Refused { sha256, refusal };
        self.refused = Some(r.clone());
        self.out.push_back(Output::Pending(Some(r)));
        self.end_rejected(Outcome::Refused, text, event, now);
    }

    pub(super) fn plan_refused(&mut self, error: ApplyError, now: Instant) {
        let trigger = self.job_trigger();
        let text = error.to_string();
        self.end_rejected(
            Outcome::Rejected,
            text,
            Event::PlanRefused { trigger, error },
            now,
        );
    }

    pub(super) fn plan_failed(&mut self, error: ApplyError, now: Instant) {
        let trigger = self.job_trigger();
        let text = error.to_string();
        self.end_rejected(
            Outcome::Failed,
            text,
            Event::PlanFailed { trigger, error },
            now,
        );
    }

    /// The inputs are those of the plan the daemon runs, which the kernel
    /// holds (the incremental path is taken only then). After a reload
    /// that was rejected, refused or failed, what the daemon reports comes
    /// back to what is live: a success with nothing sent, and no refusal
    /// pending; otherwise there is nothing to report but the finding.
    fn unchanged(&mut self, now: Instant) {
        let job = self.job.take().expect("a job");
        self.retry_at = None;
        let behind = self.reported != Some(Outcome::Applied) || self.refused.is_some();
        if !behind {
            self.emit(Event::Unchanged {
                trigger: job.trigger,
            });
            return self.after_job(job.trigger, now);
        }
        if self.refused.take().is_some() {
            self.out.push_back(Output::Pending(None));
        }
        let took = now.saturating_duration_since(job.since);
        self.record(Record {
            trigger: job.trigger,
            outcome: Outcome::Applied,
            summary: DiffSummary::default(),
            took,
            error: None,
        });
        self.emit(Event::Applied(Applied {
            trigger: job.trigger,
            summary: DiffSummary::default(),
            took,
            path: LoadPath::Unchanged,
            maps: None,
        }));
        self.after_job(job.trigger, now);
    }

    /// Ends a reload that sent nothing: the status is recorded, then
    /// `event` (the line that says so) reported, so that a reader who saw
    /// the line finds the status written.
    pub(super) fn end_rejected(
        &mut self,
        outcome: Outcome,
        error: String,
        event: Event,
        now: Instant,
    ) {
        let job = self.job.take().expect("a job");
        self.record(Record {
            trigger: job.trigger,
            outcome,
            summary: DiffSummary::default(),
            took: now.saturating_duration_since(job.since),
            error: Some(error),
        });
        self.emit(event);
        if outcome == Outcome::Failed {
            self.retry_at = Some(now + self.settings.retry);
        } else if job.trigger != Trigger::Verify {
            self.retry_at = None;
        }
        self.after_job(job.trigger, now);
    }
}
