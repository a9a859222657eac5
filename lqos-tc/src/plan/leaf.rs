//! The leaf qdisc of each circuit: the default, a circuit's `sqm`
//! override, cake's rtt raise for slow circuits, and the table of distinct
//! leaf kinds.

use hashbrown::HashMap;
use lqos_model::{Circuit, Rate};

use super::PlanError;
use crate::config::{CircuitSqm, LeafSpec, SqmChoice};
use crate::ops::{FqCodelParams, QdiscKind};
use crate::plan_config::PlanConfig;

/// cake's rtt raise for slow circuits (LibreQoS `sqmFixupRate`, which meant
/// milliseconds): at most 1/2/3/4 Mbit -> 300/180/140/120 ms.
fn cake_rtt_fixup(kind: QdiscKind, ceil: Rate) -> QdiscKind {
    match kind {
        QdiscKind::Cake(mut p) if p.rtt_us.is_none() => {
            let b = ceil.bps();
            p.rtt_us = match b {
                0..=1_000_000 => Some(300_000),
                1_000_001..=2_000_000 => Some(180_000),
                2_000_001..=3_000_000 => Some(140_000),
                3_000_001..=4_000_000 => Some(120_000),
                _ => None,
            };
            QdiscKind::Cake(p)
        }
        other => other,
    }
}

/// Turns a circuit's parsed [`SqmChoice`] (or none) into its leaf kind.
pub(crate) struct LeafChooser<'c> {
    pub(crate) cfg: &'c PlanConfig,
    /// Overrides already parsed, by the text as written (most files repeat
    /// a few values).
    pub(crate) cache: HashMap<(String, String), CircuitSqm>,
}

impl LeafChooser<'_> {
    /// The leaf for a circuit without an override.
    fn default_for(&self, ceil: Rate) -> Option<QdiscKind> {
        match &self.cfg.default_sqm {
            LeafSpec::None => None,
            LeafSpec::Qdisc(k @ QdiscKind::Cake(_)) => {
                if self.cfg.fq_codel_threshold.is_some_and(|t| ceil >= t) {
                    Some(QdiscKind::FqCodel(FqCodelParams::default()))
                } else {
                    Some(cake_rtt_fixup(k.clone(), ceil))
                }
            }
            LeafSpec::Qdisc(k) => Some(k.clone()),
        }
    }

    /// The leaf for `choice` on a class with ceiling `ceil`.
    fn leaf(&self, choice: &SqmChoice, ceil: Rate) -> Option<QdiscKind> {
        match choice {
            SqmChoice::Default => self.default_for(ceil),
            SqmChoice::Cake => {
                let base = if self.cfg.default_sqm.is_cake() {
                    self.cfg.default_sqm.clone()
                } else {
                    LeafSpec::cake_diffserv4()
                };
                match base {
                    LeafSpec::Qdisc(k) => Some(cake_rtt_fixup(k, ceil)),
                    LeafSpec::None => None,
                }
            }
            SqmChoice::Spec(LeafSpec::None) => None,
            SqmChoice::Spec(LeafSpec::Qdisc(k)) => Some(cake_rtt_fixup(k.clone(), ceil)),
        }
    }

    /// Circuit `c`'s leaves (download, upload), its override parsed once
    /// per distinct text; an unusable override is an error naming the
    /// circuit and its CSV line.
    pub(crate) fn choose(
        &mut self,
        c: &Circuit,
        ceil_d: Rate,
        ceil_u: Rate,
    ) -> Result<(Option<QdiscKind>, Option<QdiscKind>), PlanError> {
        let Some(o) = &c.sqm else {
            return Ok((self.default_for(ceil_d), self.default_for(ceil_u)));
        };
        let key = (o.download.clone(), o.upload.clone());
        let sqm = match self.cache.get(&key) {
            Some(s) => s.clone(),
            None => {
                let s = CircuitSqm::parse(o, &c.id)?;
                self.cache.insert(key, s.clone());
                s
            }
        };
        Ok((
            self.leaf(&sqm.download, ceil_d),
            self.leaf(&sqm.upload, ceil_u),
        ))
    }
}

/// No leaf qdisc (index into the leaf kind table).
pub(super) const NO_LEAF: u16 = u16::MAX;

/// Index of `kind` in the (small) table of distinct leaf kinds.
pub(super) fn kind_index(kinds: &mut Vec<QdiscKind>, kind: Option<QdiscKind>) -> u16 {
    match kind {
        None => NO_LEAF,
        Some(k) => match kinds.iter().position(|x| *x == k) {
            Some(i) => i as u16,
            None => {
                kinds.push(k);
                (kinds.len() - 1) as u16
            }
        },
    }
}
