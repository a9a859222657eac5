//! A guarded apply: machine-wide lock, preflight, load, and the last good
//! plan saved atomically for stable classids and `--rollback`.

use std::time::{SystemTime, UNIX_EPOCH};

use lqos_tc::Plan;
use serde::{Deserialize, Serialize};

use crate::backend::{Backend, Progress};
use crate::engine::{apply_plan, ApplyOptions, ApplyReport};
use crate::error::{ApplyError, Result};
use crate::live::LiveSource;
use crate::state::StateDir;

/// Format version of [`SavedPlan`].
pub const SAVED_PLAN_VERSION: u32 = 1;

/// The last plan that loaded completely, as saved in the state directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedPlan {
    /// [`SAVED_PLAN_VERSION`].
    pub version: u32,
    /// Network namespace it was applied in (None = the host's).
    pub netns: Option<String>,
    /// Seconds since the Unix epoch when it was applied.
    pub applied_at: u64,
    /// The plan (with its allocation, for stable classids).
    pub plan: Plan,
}

/// File name of the last good plan for `netns` (namespaces get their own,
/// so a test or bench never overwrites the host's state).
pub fn saved_plan_file(netns: Option<&str>) -> String {
    match netns {
        None => crate::state::LAST_PLAN_FILE.to_string(),
        Some(ns) => format!("last-plan.netns-{ns}.json"),
    }
}

/// The last good plan for `netns`, if one was saved.
pub fn load_saved_plan(state: &StateDir, netns: Option<&str>) -> Result<Option<SavedPlan>> {
    let file = saved_plan_file(netns);
    let saved: Option<SavedPlan> = state.load_json(&file)?;
    if let Some(s) = &saved {
        if s.version != SAVED_PLAN_VERSION {
            return Err(ApplyError::State {
                path: state.path().join(file),
                message: format!(
                    "saved plan format {} is not {SAVED_PLAN_VERSION}",
                    s.version
                ),
            });
        }
    }
    Ok(saved)
}

/// The allocation of the last good plan for `netns` in the state directory
/// at `path`, to keep classids stable when planning the next one; `None`
/// when there is none. Reads only: a missing directory is not created.
pub fn last_good_allocation(
    path: &std::path::Path,
    netns: Option<&str>,
) -> Result<Option<lqos_tc::Allocation>> {
    if !path.join(saved_plan_file(netns)).exists() {
        return Ok(None);
    }
    let dir = StateDir::open(path)?;
    Ok(load_saved_plan(&dir, netns)?.map(|s| s.plan.allocation))
}

/// Where and how to apply.
pub struct Session<'a> {
    /// State directory (lock, saved plan).
    pub state: &'a StateDir,
    /// Network namespace (None = the host's), for the saved-plan file name.
    pub netns: Option<&'a str>,
    /// Live tree reader (netlink, or a fake).
    pub live: &'a dyn LiveSource,
    /// Loader.
    pub backend: &'a dyn Backend,
}

impl Session<'_> {
    /// Takes the lock (refusing if another apply holds it), preflights,
    /// reads back, loads the diff (or the full build), and on complete
    /// success saves `plan` as the last good plan. A dry run takes no lock
    /// and saves nothing. A failed load returns the report with the error in
    /// it (see [`ApplyReport::load`]) and leaves the saved plan untouched.
    pub fn apply<'p>(
        &self,
        plan: &'p Plan,
        opts: ApplyOptions,
        progress: &dyn Progress,
    ) -> Result<ApplyReport<'p>> {
        let _lock = if opts.dry_run {
            None
        } else {
            Some(self.state.lock()?)
        };
        let report = apply_plan(plan, self.live, self.backend, opts, progress)?;
        let loaded = report.load.as_ref().is_some_and(|l| l.is_ok());
        if loaded {
            let saved = SavedPlan {
                version: SAVED_PLAN_VERSION,
                netns: self.netns.map(str::to_string),
                applied_at: SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map(|d| d.as_secs())
                    .unwrap_or(0),
                plan: plan.clone(),
            };
            self.state.save_json(&saved_plan_file(self.netns), &saved)?;
        }
        Ok(report)
    }

    /// Re-applies the last good plan (incrementally, unless `opts.full`).
    pub fn rollback(
        &self,
        opts: ApplyOptions,
        progress: &dyn Progress,
    ) -> Result<ApplyReport<'static>> {
        let saved = load_saved_plan(self.state, self.netns)?.ok_or_else(|| ApplyError::State {
            path: self.state.path().join(saved_plan_file(self.netns)),
            message: "no plan was applied successfully yet: nothing to roll back to".into(),
        })?;
        Ok(self.apply(&saved.plan, opts, progress)?.into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{NoProgress, Recording};

    fn plan(circuits: usize, seed: u64) -> Plan {
        let g = lqos_model::generate(&lqos_model::GenParams {
            circuits,
            seed,
            ..Default::default()
        });
        let mut cfg = lqos_tc::PlanConfig::bridge("ens19", "ens20", 4);
        cfg.default_sqm = lqos_tc::LeafSpec::Qdisc(lqos_tc::QdiscKind::Pfifo { limit: None });
        lqos_tc::plan(&g.network, &cfg, None).unwrap()
    }

    #[test]
    fn saves_last_good_plan_refuses_second_apply_and_rolls_back() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open(dir.path().join("state")).unwrap();
        let rec = Recording::new().with_link("ens19", 4).with_link("ens20", 4);
        let s = Session {
            state: &state,
            netns: None,
            live: &rec,
            backend: &rec,
        };
        assert!(s.rollback(ApplyOptions::default(), &NoProgress).is_err());
        let p1 = plan(100, 1);
        let r = s.apply(&p1, ApplyOptions::default(), &NoProgress).unwrap();
        assert!(r.load.unwrap().is_ok());
        assert_eq!(load_saved_plan(&state, None).unwrap().unwrap().plan, p1);

        // A failing load keeps the old saved plan.
        let p2 = plan(120, 2);
        rec.fail_at("ens19", rec.sent_for("ens19").len() + 3, "Error: boom.");
        let r = s.apply(&p2, ApplyOptions::default(), &NoProgress).unwrap();
        assert!(!r.load.unwrap().is_ok());
        assert_eq!(load_saved_plan(&state, None).unwrap().unwrap().plan, p1);

        // Held lock: refused, nothing sent.
        let held = state.lock().unwrap();
        let before = rec.sent().len();
        let e = s
            .apply(&p2, ApplyOptions::default(), &NoProgress)
            .unwrap_err();
        assert!(matches!(e, ApplyError::Locked { .. }), "{e}");
        assert_eq!(rec.sent().len(), before);
        drop(held);

        // Rollback converges back to p1.
        let r = s
            .rollback(
                ApplyOptions {
                    verify_after: true,
                    ..Default::default()
                },
                &NoProgress,
            )
            .unwrap();
        assert!(r.verify.unwrap().is_clean());
        assert_eq!(rec.tree("ens19").unwrap(), p1.interfaces[0].tree());
    }

    #[test]
    fn netns_state_is_separate() {
        assert_eq!(saved_plan_file(None), "last-plan.json");
        assert_eq!(saved_plan_file(Some("x")), "last-plan.netns-x.json");
    }
}
