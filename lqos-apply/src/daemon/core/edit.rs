//! The incremental path: a few ShapedDevices.csv rows re-read, their
//! circuits re-planned in place and diffed against the known state.

use super::*;

impl Reloader {
    pub(super) fn replan(
        &mut self,
        raw: RawInputs,
        patch: lqos_model::devices_index::DevicesPatch,
        b: Breakdown,
        now: Instant,
    ) {
        let mut cur = self.current.take().expect("checked by try_incremental");
        let idx = cur.index.as_mut().expect("checked by try_incremental");
        match lqos_tc::replan::replan_circuits(&mut cur.plan, &idx.plan, &idx.net, &patch.circuits)
        {
            Replan::Patched(at) => {
                let old = idx.devices.commit(&mut idx.net, patch, raw.devices);
                self.spare = Some(old);
                let cand = Candidate {
                    plan: cur.plan,
                    index: cur.index,
                    raw: None,
                    kind: CandidateKind::Incremental(b),
                };
                self.set_step(Step::Replanned { cand, at, b });
            }
            Replan::Full(why) => {
                // Nothing changed yet: the full path from the same state.
                self.current = Some(cur);
                self.emit(Event::PlannedInFull {
                    reason: Fallback::Replan(why),
                });
                self.plan_inputs(false, Ok(raw), now);
            }
        }
    }

    pub(super) fn diff_patch(
        &mut self,
        cand: Candidate,
        at: Vec<(usize, usize)>,
        b: Breakdown,
        now: Instant,
    ) {
        let active = match &self.leaves {
            Some(Leaves::Lazy(Some(t))) => Some(t.active()),
            _ => None,
        };
        let mut streams = Vec::new();
        let mut fallback = None;
        for (i, ip) in cand.plan.interfaces.iter().enumerate() {
            let ops = at
                .iter()
                .filter(|(k, _)| *k == i)
                .map(|&(_, o)| &ip.ops[o])
                .filter(|op| match (op, active) {
                    // Lazy leaves: an idle circuit's leaf is not loaded.
                    (TcOp::AddQdisc(q), Some(a)) => a.contains(&(ip.dev.clone(), q.parent)),
                    _ => true,
                });
            let model = self
                .known
                .tree(&ip.dev)
                .expect("known: checked by try_incremental");
            match known_diff(model, ops) {
                Ok(d) => streams.push(IfaceOps::new(ip.dev.clone(), d)),
                Err(e) => {
                    fallback = Some(e);
                    break;
                }
            }
        }
        if let Some(reason) = fallback {
            // The patched plan is right; only the short diff does not
            // apply: diff the whole tree against the known state.
            self.emit(Event::WholeTreeDiff { reason });
            let cand = Candidate {
                kind: CandidateKind::Full {
                    plan: b.parse + b.plan,
                },
                ..cand
            };
            return self.load_with(cand, false, None, now);
        }
        let ld = Box::new(Loading {
            eff: None,
            cand,
            readback: false,
            live: None,
            streams,
            started: now,
        });
        self.set_step(Step::Diffed { ld, b });
    }
}
