//! A guarded apply: machine-wide lock, preflight, load, and the last good
//! plan saved atomically for stable classids and rollback.

use std::time::{SystemTime, UNIX_EPOCH};

use lqos_model::Network;
use lqos_tc::record::{PlanRecord, PlanRecordRef};
use lqos_tc::{Allocation, Plan};
use serde::{Deserialize, Serialize};

use crate::backend::{Backend, Progress};
use crate::engine::{apply_plan, ApplyOptions, ApplyReport};
use crate::error::{ApplyError, Result, StateProblem};
use crate::live::LiveSource;
use crate::state::{ApplyLock, NetnsState, StateFile};

/// Format version of the saved state: 2 stores a compact [`PlanRecord`]
/// (config, inputs and allocation; the ops are re-derived), 1 stored the
/// whole plan with its ops (still read).
pub const SAVED_PLAN_VERSION: u32 = 2;

/// The last plan that loaded completely, as read from the state directory.
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

/// The state file as written (format 2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct SavedState {
    version: u32,
    netns: Option<String>,
    applied_at: u64,
    record: PlanRecord,
}

/// [`SavedState`] as written: the same fields, the record borrowed from
/// the plan (no copy of its rows).
#[derive(Serialize)]
struct SavedStateRef<'a> {
    version: u32,
    netns: Option<&'a str>,
    applied_at: u64,
    record: PlanRecordRef<'a>,
}

/// Just the format number of a state file.
#[derive(Deserialize)]
struct VersionOnly {
    version: u32,
}

/// A state file, parsed by its format.
enum OnDisk {
    V1(SavedPlan),
    V2(SavedState),
}

fn read_state(state: &NetnsState) -> Result<Option<OnDisk>> {
    let path = state.file(StateFile::LastPlan);
    let Some(bytes) = state.read(StateFile::LastPlan)? else {
        return Ok(None);
    };
    let bad = |e: serde_json::Error| ApplyError::State {
        path: path.clone(),
        reason: StateProblem::NotASavedPlan(e),
    };
    let v: VersionOnly = serde_json::from_slice(&bytes).map_err(bad)?;
    match v.version {
        1 => Ok(Some(OnDisk::V1(
            serde_json::from_slice(&bytes).map_err(bad)?,
        ))),
        SAVED_PLAN_VERSION => Ok(Some(OnDisk::V2(
            serde_json::from_slice(&bytes).map_err(bad)?,
        ))),
        n => Err(ApplyError::State {
            path,
            reason: StateProblem::UnknownFormat {
                found: n,
                known: SAVED_PLAN_VERSION,
            },
        }),
    }
}

/// The last good plan of `state`'s namespace, if one was saved
/// (re-planned from the compact record, or read whole from a format-1
/// file), with the network it was planned from when the record has it.
pub fn load_saved(state: &NetnsState) -> Result<Option<(SavedPlan, Option<Network>)>> {
    let path = state.file(StateFile::LastPlan);
    let bad = |e: lqos_tc::record::RecordError| ApplyError::State {
        path: path.clone(),
        reason: StateProblem::Record(e),
    };
    Ok(match read_state(state)? {
        None => None,
        Some(OnDisk::V1(p)) => Some((p, None)),
        Some(OnDisk::V2(s)) => {
            let plan = s.record.replan().map_err(bad)?;
            let net = s
                .record
                .inputs
                .as_ref()
                .map(|i| i.network())
                .transpose()
                .map_err(bad)?;
            let saved = SavedPlan {
                version: s.version,
                netns: s.netns,
                applied_at: s.applied_at,
                plan,
            };
            Some((saved, net))
        }
    })
}

/// The last good plan of `state`'s namespace, if one was saved.
pub fn load_saved_plan(state: &NetnsState) -> Result<Option<SavedPlan>> {
    Ok(load_saved(state)?.map(|(p, _)| p))
}

/// The allocation of the last good plan (for stable classids), without
/// re-planning it; `None` when there is none. Reads only: a missing state
/// directory is not created.
pub fn load_saved_allocation(state: &NetnsState) -> Result<Option<Allocation>> {
    Ok(match read_state(state)? {
        None => None,
        Some(OnDisk::V1(p)) => Some(p.plan.allocation),
        Some(OnDisk::V2(s)) => match s.record.allocation() {
            Some(a) => Some(a),
            None => load_saved_plan(state)?.map(|p| p.plan.allocation),
        },
    })
}

/// Saves `plan` (planned from `net`, when known) as the last good plan of
/// `state`'s namespace: the compact record, or the record with the ops when the
/// network is not known (or the plan is not its plain plan, e.g. with lazy
/// leaves). Returns whether the file was written: when the saved record is
/// already this one (a no-op reload), nothing is rewritten.
pub fn save_last_good(state: &NetnsState, plan: &Plan, net: Option<&Network>) -> Result<bool> {
    let record = PlanRecordRef::new(plan, net, false).map_err(|e| ApplyError::State {
        path: state.file(StateFile::LastPlan),
        reason: StateProblem::Unrecordable(e),
    })?;
    // The record is the last field of a state file as written here, so
    // "unchanged" is a byte comparison of the file's tail (no second parse).
    let unchanged = match (state.read(StateFile::LastPlan), serde_json::to_vec(&record)) {
        (Ok(Some(old)), Ok(mut rec)) => {
            rec.push(b'}');
            old.starts_with(format!("{{\"version\":{SAVED_PLAN_VERSION},").as_bytes())
                && old.ends_with(&rec)
                && old.len() > rec.len()
                && old[..old.len() - rec.len()].ends_with(b"\"record\":")
        }
        _ => false,
    };
    if unchanged {
        return Ok(false);
    }
    let saved = SavedStateRef {
        version: SAVED_PLAN_VERSION,
        netns: state.netns(),
        applied_at: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        record,
    };
    state.save_json_compact(StateFile::LastPlan, &saved)?;
    Ok(true)
}

/// Where and how to apply.
pub struct Session<'a> {
    /// The namespace's state (lock, saved plan).
    pub state: &'a NetnsState,
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
        self.apply_planned(plan, None, opts, progress)
    }

    /// [`Session::apply`] of `plan`, planned from `net`: the saved state is
    /// then the compact record (config, inputs, allocation; ~90 bytes per
    /// circuit) instead of the ops. When the saved record is already this
    /// one (a no-op reload), nothing is rewritten.
    pub fn apply_planned<'p>(
        &self,
        plan: &'p Plan,
        net: Option<&Network>,
        opts: ApplyOptions,
        progress: &dyn Progress,
    ) -> Result<ApplyReport<'p>> {
        let _lock = if opts.dry_run {
            None
        } else {
            Some(self.state.lock()?)
        };
        self.apply_locked(plan, net, opts, progress)
    }

    /// [`Session::apply_planned`] under a lock the caller already holds
    /// (taken with [`NetnsState::lock`] on this session's state),
    /// e.g. before planning while [`crate::load::Prefetched::overlap`] reads the
    /// live trees, so that no other apply changes them in between.
    pub fn apply_planned_locked<'p>(
        &self,
        _lock: &ApplyLock,
        plan: &'p Plan,
        net: Option<&Network>,
        opts: ApplyOptions,
        progress: &dyn Progress,
    ) -> Result<ApplyReport<'p>> {
        self.apply_locked(plan, net, opts, progress)
    }

    fn apply_locked<'p>(
        &self,
        plan: &'p Plan,
        net: Option<&Network>,
        opts: ApplyOptions,
        progress: &dyn Progress,
    ) -> Result<ApplyReport<'p>> {
        let report = apply_plan(plan, self.live, self.backend, opts, progress)?;
        let loaded = report.load.as_ref().is_some_and(|l| l.is_ok());
        if loaded {
            save_last_good(self.state, plan, net)?;
        }
        Ok(report)
    }

    /// Re-applies the last good plan (incrementally, unless `opts.full`).
    pub fn rollback(
        &self,
        opts: ApplyOptions,
        progress: &dyn Progress,
    ) -> Result<ApplyReport<'static>> {
        let (saved, net) = load_saved(self.state)?.ok_or_else(|| ApplyError::State {
            path: self.state.file(StateFile::LastPlan),
            reason: StateProblem::NothingSaved,
        })?;
        Ok(self
            .apply_planned(&saved.plan, net.as_ref(), opts, progress)?
            .into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{NoProgress, Recording};

    fn plan(circuits: usize, seed: u64) -> Plan {
        net_and_plan(circuits, seed).1
    }

    /// A saved plan that cannot be read is a typed reason with the file's
    /// path: its format, or where its JSON breaks.
    #[test]
    fn unreadable_saved_plans_say_why() {
        let dir = tempfile::tempdir().unwrap();
        let state = NetnsState::new(dir.path(), None);
        let path = state.file(StateFile::LastPlan);
        std::fs::write(&path, br#"{"version":9}"#).unwrap();
        let e = load_saved(&state).unwrap_err();
        let ApplyError::State {
            path: p,
            reason: StateProblem::UnknownFormat { found, known },
        } = &e
        else {
            panic!("{e:?}")
        };
        assert_eq!((p, *found, *known), (&path, 9, SAVED_PLAN_VERSION));
        assert_eq!(
            e.to_string(),
            format!(
                "state {}: saved plan format 9 is not one this lqos reads (1 or 2); \
                 remove it to start afresh (classids may then change)",
                path.display()
            )
        );
        std::fs::write(&path, b"{\n  \"version\": 2,\n  oops").unwrap();
        let e = load_saved(&state).unwrap_err();
        let ApplyError::State {
            reason: StateProblem::NotASavedPlan(j),
            ..
        } = &e
        else {
            panic!("{e:?}")
        };
        assert_eq!((j.line(), j.column()), (3, 3));
        assert!(e.to_string().contains("not a saved lqos plan: "), "{e}");
        std::fs::remove_file(&path).unwrap();
        let s = Session {
            state: &state,
            live: &Recording::new(),
            backend: &Recording::new(),
        };
        let e = s
            .rollback(ApplyOptions::default(), &NoProgress)
            .unwrap_err();
        assert!(
            matches!(
                e,
                ApplyError::State {
                    reason: StateProblem::NothingSaved,
                    ..
                }
            ),
            "{e:?}"
        );
    }

    #[test]
    fn saves_last_good_plan_refuses_second_apply_and_rolls_back() {
        let dir = tempfile::tempdir().unwrap();
        let state = NetnsState::new(dir.path().join("state"), None);
        let rec = Recording::new().with_link("ens19", 4).with_link("ens20", 4);
        let s = Session {
            state: &state,
            live: &rec,
            backend: &rec,
        };
        assert!(s.rollback(ApplyOptions::default(), &NoProgress).is_err());
        let p1 = plan(100, 1);
        let r = s.apply(&p1, ApplyOptions::default(), &NoProgress).unwrap();
        assert!(r.load.unwrap().is_ok());
        assert_eq!(load_saved_plan(&state).unwrap().unwrap().plan, p1);

        // A failing load keeps the old saved plan.
        let p2 = plan(120, 2);
        rec.fail_at("ens19", rec.sent_for("ens19").len() + 3, "Error: boom.");
        let r = s.apply(&p2, ApplyOptions::default(), &NoProgress).unwrap();
        assert!(!r.load.unwrap().is_ok());
        assert_eq!(load_saved_plan(&state).unwrap().unwrap().plan, p1);

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

    fn net_and_plan(circuits: usize, seed: u64) -> (lqos_model::Network, Plan) {
        crate::test_fixtures::bridge_plan(circuits, seed, "pfifo")
    }

    #[test]
    fn compact_state_reloads_the_same_plan_and_a_noop_rewrites_nothing() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let state = NetnsState::new(dir.path(), None);
        let rec = Recording::new().with_link("ens19", 4).with_link("ens20", 4);
        let s = Session {
            state: &state,
            live: &rec,
            backend: &rec,
        };
        let (net, p) = net_and_plan(2000, 1);
        let opts = ApplyOptions::default();
        s.apply_planned(&p, Some(&net), opts, &NoProgress).unwrap();
        let file = state.file(StateFile::LastPlan);
        let meta = std::fs::metadata(&file).unwrap();
        // About 100 bytes per circuit plus one row per device address (the
        // IP map and the classifier's filter handles are kept with them).
        let prefixes = p.ip_map.len() as u64;
        assert!(
            meta.len() <= 100 * 2000 + 60 * prefixes,
            "{} bytes for 2000 circuits and {prefixes} prefixes",
            meta.len()
        );
        assert_eq!(load_saved_plan(&state).unwrap().unwrap().plan, p);
        assert_eq!(
            load_saved_allocation(&state).unwrap().unwrap(),
            p.allocation
        );
        // Nothing changed: the file is not rewritten (same inode, same bytes).
        let bytes = std::fs::read(&file).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(1100));
        s.apply_planned(&p, Some(&net), opts, &NoProgress).unwrap();
        let again = std::fs::metadata(&file).unwrap();
        assert_eq!(again.ino(), meta.ino());
        assert_eq!(std::fs::read(&file).unwrap(), bytes);
        // Rollback re-plans from the record and keeps the state compact.
        s.rollback(opts, &NoProgress).unwrap();
        assert_eq!(std::fs::metadata(&file).unwrap().ino(), meta.ino());
        // A changed plan is saved.
        let (net2, p2) = net_and_plan(2000, 2);
        s.apply_planned(&p2, Some(&net2), opts, &NoProgress)
            .unwrap();
        assert_ne!(std::fs::read(&file).unwrap(), bytes);
        assert_eq!(load_saved_plan(&state).unwrap().unwrap().plan, p2);
    }

    #[test]
    fn format_1_state_still_loads_and_unknown_formats_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let state = NetnsState::new(dir.path(), None);
        let (_, p) = net_and_plan(50, 3);
        let v1 = SavedPlan {
            version: 1,
            netns: None,
            applied_at: 1,
            plan: p.clone(),
        };
        state.save_json(StateFile::LastPlan, &v1).unwrap();
        assert_eq!(load_saved_plan(&state).unwrap().unwrap(), v1);
        assert_eq!(
            load_saved_allocation(&state).unwrap().unwrap(),
            p.allocation
        );
        std::fs::write(
            state.file(StateFile::LastPlan),
            r#"{"version": 9, "whatever": true}"#,
        )
        .unwrap();
        let e = load_saved_plan(&state).unwrap_err().to_string();
        assert!(
            e.contains("last-plan.json") && e.contains("format 9"),
            "{e}"
        );
    }
}
