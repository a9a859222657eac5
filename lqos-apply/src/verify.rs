//! Live tree vs plan: every missing, extra or different qdisc, class and
//! classifier filter.

use std::collections::BTreeMap;
use std::fmt;

use lqos_tc::classify::FilterKey;
use lqos_tc::tree::TcTree;
use lqos_tc::{rules, TcHandle};
use serde::Serialize;

/// One difference between the planned and the live tree of an interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub enum Drift {
    /// Planned qdisc not in the kernel.
    MissingQdisc {
        /// Handle.
        handle: TcHandle,
        /// Planned kind.
        kind: String,
    },
    /// Qdisc in the kernel that the plan does not have.
    ExtraQdisc {
        /// Handle.
        handle: TcHandle,
        /// Live kind.
        kind: String,
    },
    /// Qdisc present on both sides with a different field.
    QdiscDiffers {
        /// Handle.
        handle: TcHandle,
        /// `kind`, `parent` or an option name ([`rules::FieldDrift::field`]).
        field: String,
        /// Planned value.
        planned: String,
        /// Live value.
        live: String,
    },
    /// Planned class not in the kernel.
    MissingClass {
        /// Classid.
        classid: TcHandle,
        /// Circuit / node name from the plan, if any.
        label: Option<String>,
    },
    /// Class in the kernel that the plan does not have.
    ExtraClass {
        /// Classid.
        classid: TcHandle,
    },
    /// Class present on both sides with a different field.
    ClassDiffers {
        /// Classid.
        classid: TcHandle,
        /// Circuit / node name from the plan, if any.
        label: Option<String>,
        /// `rate`, `ceil`, `quantum`, `prio`, `parent`, `burst`, `cburst`.
        field: String,
        /// Planned value.
        planned: String,
        /// Live value.
        live: String,
    },
    /// Planned classifier filter not in the kernel (its address is not
    /// steered: it falls to the default class).
    MissingFilter {
        /// Pref, protocol, handle.
        key: FilterKey,
        /// The planned address or prefix.
        net: String,
        /// The circuit it should steer to, if known.
        label: Option<String>,
    },
    /// lqos filter in the kernel that the plan does not have.
    ExtraFilter {
        /// Pref, protocol, handle.
        key: FilterKey,
        /// The live address or prefix.
        net: String,
    },
    /// Filter on both sides with a different field.
    FilterDiffers {
        /// Pref, protocol, handle.
        key: FilterKey,
        /// The circuit it should steer to, if known.
        label: Option<String>,
        /// `side`, `net`, `queue_mapping`, `priority`.
        field: String,
        /// Planned value.
        planned: String,
        /// Live value.
        live: String,
    },
}

fn lab(label: &Option<String>) -> String {
    label
        .as_ref()
        .map(|l| format!(" ({})", l.escape_debug()))
        .unwrap_or_default()
}

impl fmt::Display for Drift {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Drift::MissingQdisc { handle, kind } => write!(f, "missing qdisc {handle} {kind}"),
            Drift::ExtraQdisc { handle, kind } => write!(f, "extra qdisc {handle} {kind}"),
            Drift::QdiscDiffers {
                handle,
                field,
                planned,
                live,
            } => write!(f, "qdisc {handle} {field} is {live}, plan says {planned}"),
            Drift::MissingClass { classid, label } => {
                write!(f, "missing class {classid}{}", lab(label))
            }
            Drift::ExtraClass { classid } => write!(f, "extra class {classid}"),
            Drift::MissingFilter { key, net, label } => {
                write!(f, "missing {key} for {net}{}", lab(label))
            }
            Drift::ExtraFilter { key, net } => write!(f, "extra {key} for {net}"),
            Drift::FilterDiffers {
                key,
                label,
                field,
                planned,
                live,
            } => write!(
                f,
                "{key}{} {field} is {live}, plan says {planned}",
                lab(label)
            ),
            Drift::ClassDiffers {
                classid,
                label,
                field,
                planned,
                live,
            } => write!(
                f,
                "class {classid}{} {field} is {live}, plan says {planned}",
                lab(label)
            ),
        }
    }
}

/// Verification of one interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct IfaceVerify {
    /// Interface.
    pub dev: String,
    /// Qdiscs in the plan.
    pub planned_qdiscs: usize,
    /// Classes in the plan.
    pub planned_classes: usize,
    /// Qdiscs in the kernel (kernel defaults with handle 0 not counted).
    pub live_qdiscs: usize,
    /// Classes in the kernel.
    pub live_classes: usize,
    /// Differences, qdiscs first, then classes, by handle.
    pub drift: Vec<Drift>,
}

/// Verification of a whole plan.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct VerifyReport {
    /// One entry per planned interface.
    pub interfaces: Vec<IfaceVerify>,
}

impl VerifyReport {
    /// No drift anywhere.
    pub fn is_clean(&self) -> bool {
        self.interfaces.iter().all(|i| i.drift.is_empty())
    }

    /// Number of differences over all interfaces.
    pub fn drift_count(&self) -> usize {
        self.interfaces.iter().map(|i| i.drift.len()).sum()
    }
}

impl fmt::Display for VerifyReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for i in &self.interfaces {
            writeln!(
                f,
                "{}: plan {} qdiscs / {} classes, live {} / {}: {}",
                i.dev,
                i.planned_qdiscs,
                i.planned_classes,
                i.live_qdiscs,
                i.live_classes,
                if i.drift.is_empty() {
                    "in sync".to_string()
                } else {
                    format!("{} difference(s)", i.drift.len())
                }
            )?;
            for d in &i.drift {
                writeln!(f, "  {}: {d}", i.dev)?;
            }
        }
        Ok(())
    }
}

/// Compares one interface's planned tree with its live tree. `labels` maps
/// classids to circuit / node names for the report. What counts as drift is
/// [`lqos_tc::rules::tree_drift`], the same rules [`lqos_tc::diff()`] uses,
/// so the report is empty exactly when a diff would send nothing: kernel
/// defaults the plan leaves unset, quantum 0 and handle-0 kernel qdiscs
/// (such as `noqueue`) are not drift.
pub fn verify_tree(
    dev: &str,
    planned: &TcTree,
    live: &TcTree,
    labels: &BTreeMap<TcHandle, String>,
) -> IfaceVerify {
    let label = |id: &TcHandle| labels.get(id).cloned();
    let mut drift = Vec::new();
    for d in rules::tree_drift(live, planned) {
        match d {
            rules::Drift::MissingQdisc(q) => drift.push(Drift::MissingQdisc {
                handle: q.handle,
                kind: q.kind.name().to_string(),
            }),
            rules::Drift::ExtraQdisc(q) => drift.push(Drift::ExtraQdisc {
                handle: q.handle,
                kind: q.kind.name().to_string(),
            }),
            rules::Drift::QdiscDiffers { handle, fields } => {
                drift.extend(fields.into_iter().map(|f| Drift::QdiscDiffers {
                    handle,
                    field: f.field.to_string(),
                    planned: f.planned,
                    live: f.live,
                }))
            }
            rules::Drift::MissingClass(classid) => drift.push(Drift::MissingClass {
                classid,
                label: label(&classid),
            }),
            rules::Drift::ExtraClass(classid) => drift.push(Drift::ExtraClass { classid }),
            rules::Drift::ClassDiffers { classid, fields } => {
                drift.extend(fields.into_iter().map(|f| Drift::ClassDiffers {
                    classid,
                    label: label(&classid),
                    field: f.field.to_string(),
                    planned: f.planned,
                    live: f.live,
                }))
            }
            rules::Drift::MissingFilter(key) => {
                let p = &planned.filters[&key];
                drift.push(Drift::MissingFilter {
                    key,
                    net: p.net.to_string(),
                    label: label(&p.priority),
                })
            }
            rules::Drift::ExtraFilter(key) => drift.push(Drift::ExtraFilter {
                key,
                net: live.filters[&key].net.to_string(),
            }),
            rules::Drift::FilterDiffers { key, fields } => {
                let l = label(&planned.filters[&key].priority);
                drift.extend(fields.into_iter().map(|f| Drift::FilterDiffers {
                    key,
                    label: l.clone(),
                    field: f.field.to_string(),
                    planned: f.planned,
                    live: f.live,
                }))
            }
        }
    }
    let explicit = |t: &TcTree| t.qdiscs.values().filter(|q| !q.is_kernel_default()).count();
    IfaceVerify {
        dev: dev.to_string(),
        planned_qdiscs: explicit(planned),
        planned_classes: planned.classes.len(),
        live_qdiscs: explicit(live),
        live_classes: live.classes.len(),
        drift,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lqos_model::Rate;
    use lqos_tc::ops::{Class, HtbQdisc, Qdisc, QdiscKind};

    fn class(minor: u16, mbps: u64) -> Class {
        let r = Rate::from_mbps(mbps);
        Class::htb(TcHandle::new(1, 1), TcHandle::new(1, minor), r, r, 3, 1522)
    }

    fn tree() -> TcTree {
        let mut t = TcTree::default();
        let q = Qdisc::htb(TcHandle::ROOT, 1, 2);
        t.qdiscs.insert(q.handle, q);
        for m in 3..6 {
            let c = class(m, 10);
            t.classes.insert(c.classid, c);
        }
        t
    }

    #[test]
    fn identical_trees_are_clean_and_kernel_defaults_are_ignored() {
        let p = tree();
        let mut l = tree();
        // Readback fills in values the plan leaves to the kernel.
        if let Some(Qdisc {
            kind: QdiscKind::Htb(h),
            ..
        }) = l.qdiscs.get_mut(&TcHandle::new(1, 0))
        {
            h.r2q = Some(10);
            h.direct_qlen = Some(1000);
        }
        l.classes.get_mut(&TcHandle::new(1, 3)).unwrap().htb.burst = Some(1600);
        l.insert_qdisc(Qdisc::new(
            TcHandle::ROOT,
            TcHandle::UNSPEC,
            QdiscKind::Other("noqueue".into()),
        ));
        assert_eq!(l.kernel_defaults.len(), 1);
        let v = verify_tree("ens19", &p, &l, &BTreeMap::new());
        assert!(v.drift.is_empty(), "{:?}", v.drift);
    }

    #[test]
    fn every_kind_of_drift_is_reported_with_labels() {
        let p = tree();
        let mut l = tree();
        l.classes.remove(&TcHandle::new(1, 3));
        l.classes.get_mut(&TcHandle::new(1, 4)).unwrap().htb.rate = Rate::from_mbps(20);
        l.classes.get_mut(&TcHandle::new(1, 5)).unwrap().htb.prio = 5;
        let extra = class(9, 1);
        l.classes.insert(extra.classid, extra);
        if let Some(q) = l.qdiscs.get_mut(&TcHandle::new(1, 0)) {
            q.kind = QdiscKind::Pfifo { limit: None };
        }
        let labels = BTreeMap::from([(TcHandle::new(1, 3), "Circuit A".to_string())]);
        let v = verify_tree("ens19", &p, &l, &labels);
        let text: Vec<String> = v.drift.iter().map(|d| d.to_string()).collect();
        assert_eq!(
            text,
            vec![
                "qdisc 1: kind is pfifo, plan says htb",
                "missing class 1:3 (Circuit A)",
                "class 1:4 rate is 20 Mbps, plan says 10 Mbps",
                "class 1:5 prio is 5, plan says 3",
                "extra class 1:9",
            ]
        );
        let report = VerifyReport {
            interfaces: vec![v],
        };
        assert!(!report.is_clean());
        assert_eq!(report.drift_count(), 5);
    }

    /// The leaf kinds the proptest plans and mutates between.
    fn leaf_kind(sel: u8) -> QdiscKind {
        use lqos_tc::ops::{CakeParams, FqCodelParams};
        use lqos_tc::options::CakeDiffserv;
        match sel % 5 {
            0 => QdiscKind::Pfifo { limit: None },
            1 => QdiscKind::Pfifo { limit: Some(100) },
            2 => QdiscKind::Cake(CakeParams {
                diffserv: Some(CakeDiffserv::Diffserv4),
                rtt_us: Some(300_000),
                ..Default::default()
            }),
            3 => QdiscKind::Cake(CakeParams::default()),
            _ => QdiscKind::FqCodel(FqCodelParams::default()),
        }
    }

    /// mq root, `queues` HTBs with top class `:1` and default class `:2`,
    /// then `leaves.len()` circuits round-robin, each with a leaf qdisc of
    /// `leaf_kind(sel)`; classes whose `q0` bit is set plan quantum 0.
    fn plan_ops(queues: u16, leaves: &[u8], q0: u32) -> Vec<lqos_tc::TcOp> {
        use lqos_tc::TcOp;
        let root = TcHandle::new(0x7fff, 0);
        let htb_class = |parent, classid, mbps, quantum| {
            let r = Rate::from_mbps(mbps);
            Class::htb(parent, classid, r, r, 3, quantum)
        };
        let mut ops = vec![TcOp::ReplaceQdisc(Qdisc::root(root, QdiscKind::Mq))];
        for q in 1..=queues {
            ops.push(TcOp::AddQdisc(Qdisc::htb(TcHandle::new(0x7fff, q), q, 2)));
            let top = TcHandle::new(q, 1);
            ops.push(TcOp::AddClass(htb_class(
                TcHandle::new(q, 0),
                top,
                1000,
                1522,
            )));
            ops.push(TcOp::AddClass(htb_class(
                top,
                TcHandle::new(q, 2),
                249,
                1522,
            )));
        }
        for (i, &sel) in leaves.iter().enumerate() {
            let q = (i % queues as usize) as u16 + 1;
            let id = TcHandle::new(q, 3 + (i / queues as usize) as u16);
            let quantum = if q0 & (1 << (i % 32)) != 0 { 0 } else { 1522 };
            ops.push(TcOp::AddClass(htb_class(
                TcHandle::new(q, 1),
                id,
                10 + i as u64,
                quantum,
            )));
            ops.push(TcOp::AddQdisc(Qdisc::leaf(
                id,
                0x100 + i as u16,
                leaf_kind(sel),
            )));
        }
        ops
    }

    /// Changes `live` the way the kernel or an operator could: through ops
    /// the tree model accepts (ignored when it refuses), and through values
    /// only a readback fills in.
    fn mutate(live: &mut TcTree, what: u8, pick: usize, val: u32) {
        use lqos_tc::TcOp;
        let classes: Vec<Class> = live.classes.values().cloned().collect();
        let leaves: Vec<Qdisc> = live
            .qdiscs
            .values()
            .filter(|q| !q.is_kernel_default() && live.classes.contains_key(&q.parent))
            .cloned()
            .collect();
        let c = (!classes.is_empty()).then(|| classes[pick % classes.len()].clone());
        let l = (!leaves.is_empty()).then(|| leaves[pick % leaves.len()].clone());
        let op = match (what % 14, c, l) {
            (0, Some(mut c), _) => {
                c.htb.rate = Rate::from_bps(c.htb.rate.bps() + 8 * (1 + val as u64 % 3));
                TcOp::ChangeClass(c)
            }
            (1, Some(mut c), _) => {
                c.htb.quantum = 1522 + val % 3;
                TcOp::ChangeClass(c)
            }
            (2, Some(mut c), _) => {
                c.htb.prio = val % 8;
                TcOp::ChangeClass(c)
            }
            // Readback fills in values the plan leaves to the kernel.
            (3, Some(mut c), _) => {
                c.htb.burst = Some(1600 + val % 5);
                c.htb.cburst = Some(1600);
                live.classes.insert(c.classid, c);
                return;
            }
            (4, Some(c), _) => TcOp::DeleteClass {
                parent: c.parent,
                classid: c.classid,
            },
            (5, Some(c), _) => {
                let mut extra = c.clone();
                extra.classid = TcHandle::new(c.classid.major(), 0x900 + (val % 4) as u16);
                TcOp::AddClass(extra)
            }
            (6, _, Some(l)) => TcOp::DeleteQdisc {
                parent: l.parent,
                handle: l.handle,
            },
            (7, _, Some(mut l)) => {
                l.kind = match l.kind {
                    QdiscKind::Cake(mut p) => {
                        match val % 4 {
                            0 => p.rtt_us = Some(100_000), // the default: no drift
                            1 => p.rtt_us = Some(val % 7 * 1000),
                            2 => p.nat = Some(val % 2 == 0),
                            _ => p.diffserv = Some(lqos_tc::options::CakeDiffserv::Diffserv8),
                        }
                        QdiscKind::Cake(p)
                    }
                    QdiscKind::FqCodel(mut p) => {
                        p.limit = Some(10_240 - val % 2);
                        QdiscKind::FqCodel(p)
                    }
                    QdiscKind::Pfifo { .. } => QdiscKind::Pfifo {
                        limit: Some(val % 200),
                    },
                    k => k,
                };
                TcOp::ReplaceQdisc(l)
            }
            // Another kind under the same class (new handle).
            (8, _, Some(mut l)) => {
                l.handle = TcHandle::new(0x800 + (val % 8) as u16, 0);
                l.kind = leaf_kind(val as u8);
                TcOp::ReplaceQdisc(l)
            }
            // A kernel-created qdisc filed under a class without a leaf.
            (9, Some(c), _) => {
                if !live.qdiscs.values().any(|q| q.parent == c.classid) {
                    live.insert_qdisc(Qdisc::new(
                        c.classid,
                        TcHandle::UNSPEC,
                        QdiscKind::Other("pfifo_fast".into()),
                    ));
                }
                return;
            }
            // Queue layout changes.
            (10, _, _) => {
                let q = 1 + (val % 4) as u16;
                TcOp::DeleteQdisc {
                    parent: TcHandle::new(0x7fff, q),
                    handle: TcHandle::new(q, 0),
                }
            }
            (11, _, _) => {
                let q = 1 + (val % 5) as u16;
                TcOp::AddQdisc(Qdisc {
                    parent: TcHandle::new(0x7fff, q),
                    handle: TcHandle::new(q, 0),
                    kind: QdiscKind::Htb(HtbQdisc {
                        default_minor: 2 + val % 2,
                        r2q: None,
                        direct_qlen: None,
                    }),
                })
            }
            // Readback fills in HTB qdisc defaults.
            (12, _, _) => {
                for q in live.qdiscs.values_mut() {
                    if let QdiscKind::Htb(h) = &mut q.kind {
                        h.r2q = Some(10);
                        h.direct_qlen = Some(1000);
                    }
                }
                return;
            }
            (13, _, _) if val % 3 == 0 => TcOp::delete_root(),
            _ => return,
        };
        let _ = live.apply(&op);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
        /// verify and diff share the rules: the live tree verifies clean
        /// exactly when the diff sends nothing, and after the diff it
        /// verifies clean.
        #[test]
        fn verify_is_clean_exactly_when_diff_is_empty(
            queues in 1u16..4,
            leaves in proptest::collection::vec(0u8..5, 0..10),
            q0 in proptest::prelude::any::<u32>(),
            muts in proptest::collection::vec((0u8..14, 0usize..64, 0u32..1000), 0..5),
        ) {
            let planned = TcTree::from_ops(&plan_ops(queues, &leaves, q0)).unwrap();
            let mut live = TcTree::from_ops(&plan_ops(queues, &leaves, 0)).unwrap();
            for (what, pick, val) in muts {
                mutate(&mut live, what, pick, val);
            }
            let v = verify_tree("ens19", &planned, &live, &BTreeMap::new());
            let ops = lqos_tc::diff(&live, &planned);
            proptest::prop_assert_eq!(
                v.drift.is_empty(),
                ops.is_empty(),
                "drift {:?}, ops {:?}",
                v.drift,
                ops
            );
            let mut after = live.clone();
            after.apply_all(&ops).map_err(|(i, e)| {
                proptest::test_runner::TestCaseError::fail(format!("op {i}: {e}"))
            })?;
            let v = verify_tree("ens19", &planned, &after, &BTreeMap::new());
            proptest::prop_assert!(v.drift.is_empty(), "after diff: {:?}", v.drift);
            proptest::prop_assert!(lqos_tc::diff(&after, &planned).is_empty());
        }
    }
}
