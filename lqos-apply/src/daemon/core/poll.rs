//! Polls: one read of the kernel's counters per `poll` interval feeds the
//! statistics (a [`Snapshot`] per poll) and lazy leaves (one op per leaf
//! to add or remove) from the same dumps.

use super::*;

impl Reloader {
    pub(super) fn begin_poll(&mut self, now: Instant) {
        let Some(cur) = &self.current else {
            self.next_poll = Some(now + self.settings.poll);
            return;
        };
        self.poll_req = if self.settings.statistics {
            let gen = self.plan_gen;
            let st = match &mut self.statistics {
                Some(st) if st.gen == gen => st,
                Some(st) => {
                    // A reload since the last poll: the counters of the
                    // circuits both plans have carry over.
                    st.poll.replan(&cur.plan);
                    st.gen = gen;
                    st
                }
                None => self.statistics.insert(Statistics {
                    poll: StatsPoll::new(&cur.plan),
                    gen,
                    latest: None,
                }),
            };
            st.poll.request(true)
        } else {
            PollRequest::classes_of(&cur.plan)
        };
        self.job = Some(Job {
            trigger: Trigger::LeafPoll,
            since: now,
            at: now,
            read_at: now,
            ready: None,
            step: Step::Poll,
        });
    }

    /// The poll asked for at `asked` answered at `now`: statistics, then
    /// lazy leaves.
    pub(super) fn polled(&mut self, mut polled: Polled, asked: Instant, now: Instant) {
        let origin = *self.origin.get_or_insert(asked);
        let failed = std::mem::take(&mut polled.failed);
        let n_failed = failed.len();
        for (dev, error) in failed {
            self.emit(Event::CountersUnreadable { dev, error });
        }
        if let Some(st) = &mut self.statistics {
            let snapshot = st
                .poll
                .observe(&polled, now.saturating_duration_since(origin));
            st.latest = Some(Arc::new(snapshot));
        }
        self.emit(Event::CountersRead {
            took: now.saturating_duration_since(asked),
            interfaces: polled.samples.interfaces.len(),
            failed: n_failed,
        });
        let (Some(Leaves::Lazy(Some(tracker))), Some(cur)) = (&mut self.leaves, &self.current)
        else {
            self.job = None;
            self.after_job(Trigger::LeafPoll, now);
            return;
        };
        let mut changes = Vec::new();
        for ip in &cur.plan.interfaces {
            let Some(s) = polled.samples.interface(&ip.dev) else {
                continue;
            };
            let ch = tracker.observe(ip, &s.classes, now);
            changes.push((ip.dev.clone(), ch));
        }
        let poll = Box::new(Poll {
            changes,
            streams: Vec::new(),
        });
        let adds = poll.changes.iter().any(|(_, c)| !c.add.is_empty());
        if adds && self.settings.memory_check {
            self.set_step(Step::PollMemory { poll });
        } else {
            self.poll_fit(*poll, None, now);
        }
    }

    /// Takes back the activations whose leaves do not fit in `mem`, then
    /// sends the rest.
    pub(super) fn poll_fit(&mut self, mut poll: Poll, mem: Option<MemInfo>, now: Instant) {
        if let (Some(mem), Some(Leaves::Lazy(Some(tracker)))) = (mem, &mut self.leaves) {
            let mut usable = mem.usable();
            let mut events = Vec::new();
            for (dev, ch) in &mut poll.changes {
                let (fit, bytes) = leaves_that_fit(&ch.add, usable);
                usable -= bytes;
                if fit < ch.add.len() {
                    let deferred = ch.add.split_off(fit);
                    tracker.defer(dev, &deferred);
                    events.push(Event::LeavesDeferred {
                        dev: dev.clone(),
                        added: fit,
                        deferred: deferred.len(),
                        mem,
                    });
                }
            }
            for e in events {
                self.emit(e);
            }
        }
        poll.streams = poll
            .changes
            .iter()
            .filter(|(_, c)| !c.is_empty())
            .map(|(dev, c)| IfaceOps::new(dev.clone(), c.ops()))
            .collect();
        if poll.streams.is_empty() {
            let active = self.active_leaves();
            self.emit(Event::LeavesUnchanged { active });
            self.job = None;
            self.after_job(Trigger::LeafPoll, now);
            return;
        }
        self.set_step(Step::PollSend {
            poll: Box::new(poll),
        });
    }

    pub(super) fn poll_sent(&mut self, poll: Poll, report: LoadReport, now: Instant) {
        let since = self.job_since();
        let took = now.saturating_duration_since(since);
        let added: usize = poll.changes.iter().map(|(_, c)| c.add.len()).sum();
        let removed: usize = poll.changes.iter().map(|(_, c)| c.remove.len()).sum();
        let mut summary = DiffSummary::default();
        summary.added = added;
        summary.removed = removed;
        let error = report.into_result().err();
        let failed_dev = error
            .as_ref()
            .and_then(|e| e.dev().map(str::to_string))
            .unwrap_or_default();
        let text = error.as_ref().map(|e| e.to_string());
        match error {
            Some(error) => {
                self.emit(Event::LeafKernelError {
                    dev: failed_dev,
                    error,
                });
                self.known.invalidate();
            }
            None => {
                if self.known.apply_sent(&poll.streams).is_err() {
                    // Silently: the next load reads the kernel back.
                }
            }
        }
        let active = self.active_leaves();
        self.emit(Event::Leaves {
            added,
            removed,
            active,
            took,
        });
        self.status.active_leaves = active;
        let record = Record {
            trigger: Trigger::LeafPoll,
            outcome: if text.is_some() {
                Outcome::Failed
            } else {
                Outcome::Applied
            },
            summary,
            took,
            error: text.clone(),
        };
        if text.is_some() {
            self.resync(record);
        } else {
            self.record(record);
            self.job = None;
            self.after_job(Trigger::LeafPoll, now);
        }
    }
}

/// How many of the leaf ops `add` (in order) fit in `usable` bytes, and
/// the bytes those take.
fn leaves_that_fit(add: &[TcOp], usable: u64) -> (usize, u64) {
    let mut sum = 0u64;
    let mut n = 0;
    for op in add {
        let b = match op {
            TcOp::ReplaceQdisc(q) | TcOp::AddQdisc(q) => lqos_tc::memory::qdisc_bytes(&q.kind),
            _ => 0,
        };
        if sum + b > usable {
            break;
        }
        sum += b;
        n += 1;
    }
    (n, sum)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lqos_tc::ops::{Qdisc, QdiscKind};
    use lqos_tc::TcHandle;

    #[test]
    pub(super) fn leaves_that_fit_counts_in_order_by_kind() {
        let leaf = |minor, kind| {
            TcOp::ReplaceQdisc(Qdisc {
                parent: TcHandle::new(1, minor),
                handle: TcHandle::new(0x100 + minor, 0),
                kind,
            })
        };
        let cake = || QdiscKind::Cake(Default::default());
        let fq = || QdiscKind::FqCodel(Default::default());
        let add = [leaf(3, cake()), leaf(4, fq()), leaf(5, cake())];
        let mib = 1u64 << 20;
        let n = |usable| leaves_that_fit(&add, usable).0;
        assert_eq!(n(0), 0);
        assert_eq!(n(mib), 0);
        assert_eq!(n(2 * mib), 2);
        assert_eq!(n(3 * mib), 3);
        assert_eq!(leaves_that_fit(&[], 0).0, 0);
    }
}
