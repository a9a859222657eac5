//! The removal guard: a reload that would remove more circuits than a
//! limit ([`RemovalLimit`], `[lqos] max_removals`), or that comes from an
//! empty input, is refused until an operator confirms it. A circuit is
//! its Circuit ID: moved to another parent or renamed, it is not removed.
//!
//! ```
//! use lqos_apply::guard::{removals, check};
//! use lqos_model::config::RemovalLimit;
//!
//! let g = lqos_model::generate(&lqos_model::GenParams::with_circuits(100));
//! let cfg = lqos_tc::PlanConfig::bridge("ens19", "ens20", 4);
//! let old = lqos_tc::plan(&g.network, &cfg, None).unwrap();
//! // An export cut short: the last 40 circuits are missing.
//! let mut short = g.network.clone();
//! short.set_circuits(g.network.circuits()[..60].to_vec());
//! let cut = lqos_tc::plan(&short, &cfg, None).unwrap();
//! let r = removals(&old.allocation, &cut.allocation);
//! assert_eq!((r.removed, r.of), (40, 100));
//! assert!(check(RemovalLimit::Default, &r, &[]).is_err());
//! assert!(check(RemovalLimit::Count(40), &r, &[]).is_ok());
//! ```

use std::collections::HashSet;

use lqos_model::config::RemovalLimit;
use lqos_model::SmolStr;
use lqos_tc::Allocation;
use serde::{Deserialize, Serialize};

/// How many first removed circuits a refusal names.
pub const NAMED: usize = 5;

/// The circuits a reload would remove.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Removals {
    /// Circuits of the old plan not in the new one.
    pub removed: usize,
    /// Circuits in the old plan.
    pub of: usize,
    /// Circuits in the new plan.
    pub now: usize,
    /// The first few removed, `(Circuit ID, Circuit Name)`, in the old
    /// plan's order.
    pub first: Vec<(SmolStr, SmolStr)>,
}

/// The circuits of `old` (by Circuit ID) that `new` lacks.
pub fn removals(old: &Allocation, new: &Allocation) -> Removals {
    let ids: HashSet<&str> = new.circuits.iter().map(|c| c.id.as_str()).collect();
    let mut r = Removals {
        of: old.circuits.len(),
        now: new.circuits.len(),
        ..Removals::default()
    };
    for c in &old.circuits {
        if !ids.contains(c.id.as_str()) {
            r.removed += 1;
            if r.first.len() < NAMED {
                r.first.push((c.id.clone(), c.name.clone()));
            }
        }
    }
    r
}

/// Why a reload is refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// It would remove more circuits than the limit allows.
    #[error("would remove {} of {} circuits ({}), more than the limit ({limit}){}", .removals.removed, .removals.of, pct(.removals), named(.removals))]
    TooManyRemovals {
        /// What it would remove.
        removals: Removals,
        /// The limit, as text.
        limit: String,
    },
    /// An input file is empty, or the devices file has no circuit.
    #[error("{what} is empty: refused (the live plan has {of} circuits)")]
    Empty {
        /// The file (or `ShapedDevices.csv has no circuit`).
        what: String,
        /// Circuits in the old plan.
        of: usize,
    },
}

fn pct(r: &Removals) -> String {
    if r.of == 0 {
        return "0%".into();
    }
    format!("{:.0}%", 100.0 * r.removed as f64 / r.of as f64)
}

fn named(r: &Removals) -> String {
    if r.first.is_empty() {
        return String::new();
    }
    let list: Vec<String> = r
        .first
        .iter()
        .map(|(id, name)| format!("{id:?} ({name:?})"))
        .collect();
    let more = if r.removed > r.first.len() {
        format!(" and {} more", r.removed - r.first.len())
    } else {
        String::new()
    };
    format!(": {}{more}", list.join(", "))
}

/// Checks a reload: refused when an input named in `empty` has no
/// content, when the new plan has no circuit, or when `limit` is exceeded.
pub fn check(limit: RemovalLimit, r: &Removals, empty: &[&str]) -> Result<(), Refusal> {
    if let Some(what) = empty.first() {
        return Err(Refusal::Empty {
            what: what.to_string(),
            of: r.of,
        });
    }
    if r.now == 0 {
        return Err(Refusal::Empty {
            what: "the circuit list".into(),
            of: r.of,
        });
    }
    if limit.exceeded(r.removed, r.of) {
        return Err(Refusal::TooManyRemovals {
            removals: r.clone(),
            limit: limit.to_string(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use lqos_model::{GenParams, Network};
    use lqos_tc::PlanConfig;

    fn plan(net: &Network) -> Allocation {
        lqos_tc::plan(net, &PlanConfig::bridge("ens19", "ens20", 4), None)
            .unwrap()
            .allocation
    }

    #[test]
    fn the_default_limit_is_more_than_ten_percent_and_more_than_ten() {
        let l = RemovalLimit::Default;
        assert!(!l.exceeded(10, 10)); // all 10: not more than 10
        assert!(!l.exceeded(11, 110)); // exactly 10%
        assert!(l.exceeded(12, 110));
        assert!(!l.exceeded(50, 1000));
        assert!(l.exceeded(101, 1000));
        assert!(RemovalLimit::Count(5).exceeded(6, 1000));
        assert!(!RemovalLimit::Count(5).exceeded(5, 6));
        assert!(RemovalLimit::Percent(1).exceeded(2, 100));
        assert!(!RemovalLimit::Percent(1).exceeded(1, 100));
        assert!(!RemovalLimit::Off.exceeded(1000, 1000));
    }

    #[test]
    fn a_moved_or_renamed_circuit_is_not_removed() {
        let g = lqos_model::generate(&GenParams::with_circuits(50));
        let old = plan(&g.network);
        let mut cs = g.network.circuits().to_vec();
        // Renamed, and moved under another circuit's parent.
        cs[3].name = "renamed".into();
        let other = cs[40].parent.clone();
        cs[4].parent = other;
        let mut net = g.network.clone();
        net.set_circuits(cs.clone());
        let r = removals(&old, &plan(&net));
        assert_eq!((r.removed, r.of, r.now), (0, 50, 50));
        // A changed Circuit ID is a removal (and an addition).
        cs[5].id = "new-id".into();
        net.set_circuits(cs);
        let r = removals(&old, &plan(&net));
        assert_eq!(r.removed, 1);
        assert_eq!(r.first[0].0, old.circuits[5].id);
    }

    #[test]
    fn a_refusal_names_the_count_and_the_first_circuits() {
        let g = lqos_model::generate(&GenParams::with_circuits(100));
        let first = |n: usize| {
            let mut net = g.network.clone();
            net.set_circuits(g.network.circuits()[..n].to_vec());
            plan(&net)
        };
        let old = plan(&g.network);
        let r = removals(&old, &first(70));
        let e = check(RemovalLimit::Default, &r, &[])
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("would remove 30 of 100 circuits (30%)"),
            "{e}"
        );
        assert!(e.contains(&format!("{:?}", old.circuits[70].id)), "{e}");
        assert!(e.ends_with("and 25 more"), "{e}");
        // Empty inputs are refused whatever the limit.
        let none = removals(&old, &first(0));
        assert!(matches!(
            check(RemovalLimit::Off, &none, &[]),
            Err(Refusal::Empty { of: 100, .. })
        ));
        assert!(check(RemovalLimit::Off, &r, &["lqos.conf"]).is_err());
    }
}
