//! The one load step every reload, edit and verify ends in: preflight,
//! read back (or the known state), diff, memory check, send, and what the
//! outcome does to the model, the plan, the status and the timers.

use super::*;

impl Reloader {
    /// Loads `cand`: against the known kernel state when there is one
    /// (and `readback` is off), else reading the kernel back.
    pub(super) fn begin_load(&mut self, cand: Candidate, readback: bool, now: Instant) {
        if matches!(self.leaves, Some(Leaves::Lazy(None))) {
            self.asked = cand.plan.interfaces.iter().map(|i| i.dev.clone()).collect();
            self.set_step(Step::LeafTrees { readback, cand });
            return;
        }
        self.load_with(cand, readback, None, now);
    }

    pub(super) fn load_with(
        &mut self,
        cand: Candidate,
        readback: bool,
        trees: Option<BTreeMap<String, TcTree>>,
        now: Instant,
    ) {
        let eff = match &self.leaves {
            Some(Leaves::Lazy(Some(t))) => Some(lqos_tc::rules::lazy_plan(&cand.plan, t.active())),
            _ => None,
        };
        let readback = readback || !self.known.is_known();
        let ld = Box::new(Loading {
            cand,
            eff,
            readback,
            live: trees,
            streams: Vec::new(),
            started: now,
        });
        self.set_step(Step::Preflight { ld });
    }

    pub(super) fn preflighted(&mut self, mut ld: Box<Loading>, now: Instant) {
        if !ld.readback {
            let eff = ld.eff();
            let mut streams = Vec::new();
            let mut rebuilds = Vec::new();
            for ip in &eff.interfaces {
                let tree = self.known.tree(&ip.dev).expect("known");
                let c = plan_change(ip, tree, false);
                if let LoadKind::Full { reason } = &c.kind {
                    rebuilds.push((c.stream.dev.clone(), reason.clone(), c.stream.len()));
                }
                streams.push(c.stream.into_owned());
            }
            ld.streams = streams;
            for (dev, reason, ops) in rebuilds {
                self.emit(Event::FullRebuild { dev, reason, ops });
            }
            return self.check_memory(ld, now);
        }
        if let Some(trees) = ld.live.take() {
            return self.diff_live(ld, trees, now);
        }
        self.asked = ld.devs();
        self.set_step(Step::Trees { ld });
    }

    pub(super) fn diff_live(
        &mut self,
        mut ld: Box<Loading>,
        trees: BTreeMap<String, TcTree>,
        now: Instant,
    ) {
        let empty = TcTree::default();
        let ordered: Vec<TcTree> = ld
            .eff()
            .interfaces
            .iter()
            .map(|ip| trees.get(&ip.dev).unwrap_or(&empty).clone())
            .collect();
        let changes = plan_changes(ld.eff(), &ordered, false);
        let mut rebuilds = Vec::new();
        let streams: Vec<IfaceOps<'static>> = changes
            .into_iter()
            .map(|c| {
                if let LoadKind::Full { reason } = &c.kind {
                    rebuilds.push((c.stream.dev.clone(), reason.clone(), c.stream.len()));
                }
                c.stream.into_owned()
            })
            .collect();
        for (dev, reason, ops) in rebuilds {
            self.emit(Event::FullRebuild { dev, reason, ops });
        }
        ld.streams = streams;
        ld.live = Some(trees);
        self.check_memory(ld, now);
    }

    /// The trees the streams apply to, in the streams' order.
    pub(super) fn base_trees<'a>(&'a self, ld: &'a Loading) -> Vec<&'a TcTree> {
        static EMPTY: std::sync::OnceLock<TcTree> = std::sync::OnceLock::new();
        let empty = EMPTY.get_or_init(TcTree::default);
        ld.streams
            .iter()
            .map(|s| match &ld.live {
                Some(t) => t.get(&s.dev).unwrap_or(empty),
                None => self.known.tree(&s.dev).unwrap_or(empty),
            })
            .collect()
    }

    pub(super) fn check_memory(&mut self, ld: Box<Loading>, now: Instant) {
        if ld.streams.iter().all(|s| s.is_empty()) {
            return self.loaded(ld, None, now);
        }
        if !self.settings.memory_check {
            return self.send(ld, now);
        }
        // Memory is read only when the load creates something.
        let mut asked = false;
        let first = check_memory(&ld.streams, &self.base_trees(&ld), || {
            asked = true;
            None
        });
        match (first, asked) {
            (Err(e), _) => self.load_failed(ld, e, now),
            (Ok(_), false) => self.send(ld, now),
            (Ok(_), true) => self.set_step(Step::Memory { ld }),
        }
    }

    pub(super) fn memory_verdict(&self, ld: &Loading, mem: Option<MemInfo>) -> Result<()> {
        check_memory(&ld.streams, &self.base_trees(ld), || mem).map(drop)
    }

    pub(super) fn send(&mut self, ld: Box<Loading>, _now: Instant) {
        self.set_step(Step::Send { ld });
    }

    pub(super) fn load_failed(&mut self, ld: Box<Loading>, error: ApplyError, now: Instant) {
        self.finish(ld, Some(error), now);
    }

    pub(super) fn loaded(&mut self, ld: Box<Loading>, report: Option<LoadReport>, now: Instant) {
        let err = report.and_then(|r| r.into_result().err());
        self.finish(ld, err, now);
    }

    /// The one end of every load (full, incremental, verify): the model,
    /// the plan the daemon runs, the status, what to save and log.
    pub(super) fn finish(&mut self, ld: Box<Loading>, err: Option<ApplyError>, now: Instant) {
        let job = self.job.as_ref().expect("a job");
        let (trigger, since) = (job.trigger, job.since);
        let took = now.saturating_duration_since(since);
        let summary = ld.summary();
        let Loading {
            cand,
            eff,
            readback,
            streams,
            started,
            ..
        } = *ld;
        if let Some(error) = err {
            let text = error.to_string();
            self.emit(Event::LoadFailed {
                trigger,
                summary,
                error,
            });
            // Unknown kernel state: the retry reads it back and plans in
            // full.
            self.known.invalidate();
            self.current = Some(Current {
                plan: cand.plan,
                index: None,
                raw: None,
            });
            self.plan_gen += 1;
            self.retry_at = Some(now + self.settings.retry);
            let record = Record {
                trigger,
                outcome: Outcome::Failed,
                summary,
                took,
                error: Some(text),
            };
            return self.resync(record);
        }
        // The model: the ops sent on top of the known state; after a
        // read-back, what was loaded.
        if readback {
            let plan = eff.as_ref().unwrap_or(&cand.plan);
            self.known = KnownKernel::known(
                plan.interfaces
                    .iter()
                    .map(|ip| (ip.dev.clone(), ip.tree()))
                    .collect(),
            );
        } else if let Err(o) = self.known.apply_sent(&streams) {
            self.emit(Event::OutOfStep { dev: o.dev });
            self.retry_at = Some(now + self.settings.retry);
        }
        let verify = matches!(cand.kind, CandidateKind::Verify);
        let load = now.saturating_duration_since(started);
        let path = match cand.kind {
            CandidateKind::Incremental(b) => LoadPath::Incremental(Breakdown { load, ..b }),
            CandidateKind::Full { plan } => LoadPath::Full {
                plan,
                load,
                readback,
            },
            CandidateKind::Verify => LoadPath::Full {
                plan: Duration::ZERO,
                load,
                readback,
            },
        };
        self.status.circuits = cand.plan.allocation.circuits.len();
        let squashed = cand.plan.squashed.clone();
        self.current = Some(Current {
            plan: cand.plan,
            index: cand.index,
            raw: cand.raw,
        });
        if !verify {
            self.plan_gen += 1;
        }
        self.status.active_leaves = self.active_leaves();
        if !verify && self.known.is_known() {
            // (Out of step, the retry just scheduled stays.)
            self.retry_at = None;
        }
        let record = Record {
            trigger,
            outcome: Outcome::Applied,
            summary,
            took,
            error: None,
        };
        let applied = Event::Applied(Applied {
            trigger,
            summary,
            took,
            path: path.clone(),
        });
        let new_inputs = !verify;
        if new_inputs && self.refused.take().is_some() {
            self.out.push_back(Output::Pending(None));
        }
        // The state first, then the line that reports it: a reader who
        // saw the line finds the status and the last good plan written.
        self.out.push_back(Output::SaveLastGood);
        self.record(record);
        self.emit(applied);
        self.squashed_changed(&squashed);
        if new_inputs {
            self.out.push_back(Output::Journal);
        }
        if verify {
            let ops: Vec<String> = if readback {
                streams
                    .iter()
                    .flat_map(|s| {
                        s.sent()
                            .map(|op| lqos_tc::render::render_line(&s.dev, &op))
                            .collect::<Vec<_>>()
                    })
                    .collect()
            } else {
                Vec::new()
            };
            self.emit(if ops.is_empty() {
                Event::InSync
            } else {
                Event::Repaired { ops }
            });
        }
        let job = self.job.take().expect("a job");
        self.after_job(job.trigger, now);
    }

    /// Reports what the planner squashes when it differs from what was
    /// reported last (once per change).
    fn squashed_changed(&mut self, squashed: &[lqos_tc::rates::Squashed]) {
        if squashed == self.squashed.as_slice() {
            return;
        }
        let now: Vec<lqos_tc::rates::Squashed> = squashed
            .iter()
            .filter(|s| !self.squashed.contains(s))
            .cloned()
            .collect();
        let cleared: Vec<String> = self
            .squashed
            .iter()
            .filter(|old| !squashed.iter().any(|s| s.node == old.node))
            .map(|s| s.node.clone())
            .collect();
        self.squashed = squashed.to_vec();
        if !now.is_empty() || !cleared.is_empty() {
            self.emit(Event::Squashed {
                now,
                cleared,
                total: squashed.len(),
            });
        }
    }

    pub(super) fn active_leaves(&self) -> usize {
        match (&self.leaves, &self.current) {
            (Some(Leaves::Lazy(Some(t))), _) => t.active().len(),
            (_, Some(c)) => c
                .plan
                .interfaces
                .iter()
                .map(|ip| lqos_tc::rules::circuit_leaves(ip).count())
                .sum(),
            _ => 0,
        }
    }

    /// After a failed load: the leaves the kernel has become the active
    /// set (lazy leaves), then `record`.
    pub(super) fn resync(&mut self, record: Record) {
        match (&self.leaves, &self.current) {
            (Some(Leaves::Lazy(Some(_))), Some(c)) => {
                self.asked = c.plan.interfaces.iter().map(|i| i.dev.clone()).collect();
                self.set_step(Step::Resync { record });
            }
            _ => {
                self.record(record);
                let job = self.job.take().expect("a job");
                let now = job.at;
                self.after_job(job.trigger, now);
            }
        }
    }

    pub(super) fn resynced(&mut self, trees: Result<BTreeMap<String, TcTree>>, now: Instant) {
        match trees {
            Ok(trees) => {
                if let (Some(Leaves::Lazy(Some(t))), Some(c)) = (&mut self.leaves, &self.current) {
                    t.resync(lqos_tc::rules::present_leaves(&c.plan, &trees), now);
                }
            }
            Err(error) => self.emit(Event::LeavesUnreadable { error }),
        }
        let trigger = self.job_trigger();
        self.after_job(trigger, now);
    }

    /// The timers a finished job of `trigger` sets.
    pub(super) fn after_job(&mut self, trigger: Trigger, now: Instant) {
        if trigger == Trigger::Confirm {
            // Once: a confirmation not used by this job is gone too.
            self.allow_once = None;
        }
        if trigger == Trigger::Start {
            self.next_verify = self.settings.verify_every.map(|v| now + v);
            if self.polls() {
                // The counters' baseline right away: traffic from now on
                // gives a leaf (and a rate) at the next poll.
                self.next_poll = Some(now);
            }
        }
        if trigger == Trigger::LeafPoll {
            self.next_poll = Some(now + self.settings.poll);
        }
        if self.next_poll.is_none() && self.polls() {
            self.next_poll = Some(now + self.settings.poll);
        }
    }

    pub(super) fn begin_verify(&mut self, now: Instant) {
        let Some(cur) = self.current.take() else {
            return;
        };
        self.job = Some(Job {
            trigger: Trigger::Verify,
            since: now,
            at: now,
            read_at: now,
            ready: None,
            step: Step::Poll,
        });
        let cand = Candidate {
            plan: cur.plan,
            index: cur.index,
            raw: cur.raw,
            kind: CandidateKind::Verify,
        };
        self.load_with(cand, true, None, now);
    }
}

pub(super) fn summarize(streams: &[IfaceOps<'_>]) -> DiffSummary {
    let mut sum = DiffSummary::default();
    for s in streams {
        let x = s.summary();
        sum.added += x.added;
        sum.changed += x.changed;
        sum.removed += x.removed;
    }
    sum
}
