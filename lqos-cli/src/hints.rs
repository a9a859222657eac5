//! What to do about an error: the library's errors state facts (typed
//! fields); the flags and commands that fix them belong to this binary, so
//! they are added here, in one place, next to `main`'s mapping of errors
//! to exit codes.

use lqos_apply::error::{ApplyError, UnsafeState};
use lqos_apply::guard;
use lqos_apply::load::{FullReason, LoadKind};
use lqos_model::config::ConfigKey;
use lqos_model::{Problem, Report};

/// The removal guard refused a plan: nothing was changed.
#[derive(Debug)]
pub struct Refused(pub guard::Refusal);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "refused: {}; nothing was changed", self.0)
    }
}

impl std::error::Error for Refused {}

/// A load that failed part way (the context of its error): the interface
/// holds what was applied until then.
#[derive(Debug, Clone, Copy)]
pub struct LoadStopped;

impl std::fmt::Display for LoadStopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the load stopped")
    }
}

/// What this binary offers instead of a LibreQoS `lqos.conf` key that
/// lqos honours differently (the library's warning says what LibreQoS
/// does and what lqos does).
pub(crate) fn config_key(key: ConfigKey) -> Option<&'static str> {
    Some(match key {
        ConfigKey::UseBinpacking => "--strategy balanced, or --strategy round-robin",
        ConfigKey::LazyQueues => "`lqos watch --lazy-leaves`",
        ConfigKey::DryRun => "`lqos plan` or `lqos apply --dry-run` show what would be sent",
        ConfigKey::InsightTopology => "--network and --devices name them",
        ConfigKey::Integration => "give --network and --devices the files it exports",
        _ => return None,
    })
}

/// `p` with the advice for its `lqos.conf` key, if any.
pub(crate) fn problem(p: &Problem) -> String {
    match p.key.and_then(config_key) {
        Some(a) => format!("{p} ({a})"),
        None => p.to_string(),
    }
}

/// The report as [`Report`] displays it (one `severity: problem` line
/// each), with the advice for `lqos.conf` keys.
pub(crate) fn report(r: &Report) -> String {
    r.problems
        .iter()
        .map(|p| format!("{}: {}\n", p.severity, problem(p)))
        .collect()
}

/// Advice for the first error in `err`'s chain that has some (with, after a
/// load that stopped part way, how to go on from the partial tree).
pub(crate) fn hint(err: &anyhow::Error) -> Option<String> {
    if let Some(Refused(r)) = err.downcast_ref::<Refused>() {
        return refusal_hint(r);
    }
    let advice = err
        .chain()
        .filter_map(|e| e.downcast_ref::<ApplyError>())
        .find_map(apply_hint);
    if err.downcast_ref::<LoadStopped>().is_none() {
        return advice;
    }
    let partial = "the interface was left partly loaded; the next `lqos apply` continues from \
                   there (or use --rollback)";
    Some(match advice {
        Some(a) => format!("{a}; {partial}"),
        None => partial.to_string(),
    })
}

/// Advice for a refusal of the removal guard.
fn refusal_hint(r: &guard::Refusal) -> Option<String> {
    match r {
        guard::Refusal::TooManyRemovals { .. } => Some(
            "if that is meant, run again with --allow-removals (or set --max-removals / [lqos] \
             max_removals)"
                .to_string(),
        ),
        _ => None,
    }
}

/// Advice for one library error, naming this binary's flags.
pub(crate) fn apply_hint(e: &ApplyError) -> Option<String> {
    Some(match e {
        ApplyError::TooFewQueues { available, .. } => {
            format!("plan with --queues {available} (or fewer)")
        }
        ApplyError::MqOnSingleQueue { .. } => "plan with --queues 1 (an HTB root, no mq; \
             `lqos apply` does this itself when neither --queues nor override_available_queues \
             is given)"
            .to_string(),
        ApplyError::UnsupportedQdisc { alternatives, .. } if !alternatives.is_empty() => {
            format!("use --sqm {}", alternatives.join(" or "))
        }
        ApplyError::ClassifierUnsupported { .. } => "--classifier tc cannot be used here: use \
             --classifier none (or `classifier = \"none\"` in lqos.conf's [lqos] section) and \
             feed ip_map.csv from `lqos plan --out DIR` to an XDP classifier (LibreQoS's lqosd)"
            .to_string(),
        ApplyError::NotEnoughMemory { .. } => "use lazy leaves (`lqos watch --lazy-leaves`: a \
             circuit gets its leaf only while it carries traffic), a cheaper leaf (--sqm \
             fq_codel: 69 KiB each, or pfifo), or more memory; --skip-memory-check loads anyway"
            .to_string(),
        ApplyError::UnsafeState {
            problem: UnsafeState::OtherOwner { .. },
            ..
        } => "lqos runs as root: use a directory only this user can write".to_string(),
        ApplyError::UnsafeState {
            problem: UnsafeState::Writable { .. },
            ..
        } => "chmod go-w it, or use another --state-dir".to_string(),
        ApplyError::Incomplete { cause: Some(c), .. } => return apply_hint(c),
        ApplyError::Locked {
            daemon: true,
            holder,
            ..
        } => {
            let pid = holder.map_or("$(pidof lqos)".to_string(), |p| p.to_string());
            format!(
                "`lqos watch` (pid {pid}) applies every change of the files: edit them and see \
                 `lqos status`; `kill -HUP {pid}` applies now; for `lqos apply` by hand, stop \
                 it first (`systemctl stop lqos-watch`, or `kill {pid}`: the tree stays)"
            )
        }
        ApplyError::Locked { .. } => "wait for it to finish".to_string(),
        ApplyError::InvalidInputs { .. } => "run `lqos check` for details".to_string(),
        ApplyError::NoInterface {
            config_key: Some(key),
            netns,
            ..
        } => match netns {
            Some(ns) => format!(
                "name an interface of network namespace {ns} in lqos.conf's {key} (`ip -n {ns} \
                 link` lists them)"
            ),
            None => format!(
                "name an interface of this machine in lqos.conf's {key} (`ip link` lists them; \
                 --netns NAME for one in a network namespace)"
            ),
        },
        _ => return None,
    })
}

/// `error; hint` for log lines (the daemon logs one line per event).
pub(crate) fn with_hint(e: &ApplyError) -> String {
    match apply_hint(e) {
        Some(h) => format!("{e}; {h}"),
        None => e.to_string(),
    }
}

/// A load kind as the CLI prints it: a requested rebuild is `--full`'s.
pub(crate) fn load_kind(k: &LoadKind) -> String {
    match k {
        LoadKind::Full {
            reason: FullReason::Requested,
        } => "full rebuild (--full)".to_string(),
        k => k.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lqos_apply::backend::{NoProgress, Recording};
    use lqos_apply::error::QdiscRefusal;
    use lqos_apply::ApplyOptions;

    fn planned(sqm: &str, classifier: lqos_model::config::Classifier) -> lqos_tc::Plan {
        let g = lqos_model::generate(&lqos_model::GenParams::with_circuits(1000));
        let overrides = lqos_apply::inputs::PlanOverrides::default()
            .sqm(sqm.parse().unwrap())
            .classifier(classifier);
        let cfg = lqos_apply::inputs::plan_config(
            &g.config,
            None,
            &overrides,
            lqos_apply::inputs::QueueCount::Default(1),
        )
        .unwrap();
        lqos_tc::plan(&g.network, &cfg, None).unwrap()
    }

    fn refused(rec: &Recording, p: &lqos_tc::Plan) -> ApplyError {
        lqos_apply::apply_plan(p, rec, rec, ApplyOptions::default(), &NoProgress).unwrap_err()
    }

    /// The library's memory refusal states the numbers; the CLI adds what
    /// to do, with its flags.
    #[test]
    fn not_enough_memory_gets_the_flags_that_help() {
        let rec = Recording::new()
            .with_link("ens19", 1)
            .with_link("ens20", 1)
            .with_meminfo(lqos_apply::memory::MemInfo {
                total: 2048 << 20,
                available: 1800 << 20,
            });
        let e = refused(
            &rec,
            &planned("cake diffserv4", lqos_model::config::Classifier::None),
        );
        assert!(matches!(e, ApplyError::NotEnoughMemory { .. }), "{e}");
        let lib = e.to_string();
        assert!(
            lib.contains("Nothing was changed") && !lib.contains("--"),
            "{lib}"
        );
        let h = apply_hint(&e).unwrap();
        for want in [
            "--lazy-leaves",
            "--sqm fq_codel",
            "more memory",
            "--skip-memory-check",
        ] {
            assert!(h.contains(want), "{want:?} not in {h}");
        }
    }

    #[test]
    fn classifier_and_qdisc_refusals_get_flags() {
        let rec = Recording::new()
            .with_link("ens19", 1)
            .with_link("ens20", 1)
            .without_qdisc_kind("flower");
        let e = refused(&rec, &planned("pfifo", lqos_model::config::Classifier::Tc));
        assert!(!e.to_string().contains("--classifier"), "{e}");
        let h = apply_hint(&e).unwrap();
        assert!(
            h.contains("--classifier none") && h.contains("ip_map.csv"),
            "{h}"
        );
        let e = ApplyError::UnsupportedQdisc {
            kind: "cake".into(),
            refusal: QdiscRefusal::new(2, "Specified qdisc kind is unknown"),
            alternatives: vec!["fq_codel".into(), "pfifo".into()],
        };
        assert_eq!(apply_hint(&e).unwrap(), "use --sqm fq_codel or pfifo");
        let e = ApplyError::TooFewQueues {
            dev: "ens19".into(),
            needed: 8,
            available: 4,
        };
        assert!(!e.to_string().contains("--queues"));
        assert_eq!(apply_hint(&e).unwrap(), "plan with --queues 4 (or fewer)");
        let one = ApplyError::MqOnSingleQueue {
            dev: "ens19".into(),
        };
        assert!(apply_hint(&one)
            .unwrap()
            .starts_with("plan with --queues 1"));
        let wrapped = anyhow::Error::new(e).context("applying");
        assert_eq!(hint(&wrapped).unwrap(), "plan with --queues 4 (or fewer)");
    }
}
