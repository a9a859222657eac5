//! Live tree vs plan: every missing, extra or different qdisc and class.

use std::collections::BTreeMap;
use std::fmt;

use lqos_tc::{Class, Qdisc, TcHandle, TcTree};
use serde::Serialize;

/// One difference between the planned and the live tree of an interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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
        /// `leaf kind`, `parent` or an option name.
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

/// Compares the JSON forms of planned and live option values; only fields
/// the plan sets (non-null) are compared, so kernel defaults that the
/// readback fills in are not drift.
fn compare_json(
    prefix: &str,
    planned: &serde_json::Value,
    live: &serde_json::Value,
    out: &mut Vec<(String, String, String)>,
) {
    use serde_json::Value;
    match (planned, live) {
        (Value::Null, _) => {}
        (Value::Object(p), Value::Object(l)) => {
            for (k, pv) in p {
                let name = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                compare_json(&name, pv, l.get(k).unwrap_or(&Value::Null), out);
            }
        }
        (p, l) if p != l => out.push((prefix.to_string(), p.to_string(), l.to_string())),
        _ => {}
    }
}

fn qdisc_drift(p: &Qdisc, l: &Qdisc, out: &mut Vec<Drift>) {
    let d = |field: &str, planned: String, live: String| Drift::QdiscDiffers {
        handle: p.handle,
        field: field.to_string(),
        planned,
        live,
    };
    if p.kind.name() != l.kind.name() {
        out.push(d(
            "leaf kind",
            p.kind.name().to_string(),
            l.kind.name().to_string(),
        ));
        return;
    }
    if p.parent != l.parent {
        out.push(d("parent", p.parent.to_string(), l.parent.to_string()));
    }
    let pj = serde_json::to_value(&p.kind).unwrap_or_default();
    let lj = serde_json::to_value(&l.kind).unwrap_or_default();
    let mut diffs = Vec::new();
    compare_json("", &pj, &lj, &mut diffs);
    for (field, planned, live) in diffs {
        // `Htb.default_minor` -> `default_minor`
        let field = field.split_once('.').map(|x| x.1).unwrap_or(&field);
        out.push(d(field, planned, live));
    }
}

fn mbps(r: lqos_model::Rate) -> String {
    format!("{} Mbps", r.to_mbps_string())
}

fn class_drift(p: &Class, l: &Class, label: &Option<String>, out: &mut Vec<Drift>) {
    let mut d = |field: &str, planned: String, live: String| {
        out.push(Drift::ClassDiffers {
            classid: p.classid,
            label: label.clone(),
            field: field.to_string(),
            planned,
            live,
        })
    };
    if p.parent != l.parent {
        d("parent", p.parent.to_string(), l.parent.to_string());
    }
    // The kernel keeps rates in bytes/s.
    if p.htb.rate.bps() / 8 != l.htb.rate.bps() / 8 {
        d("rate", mbps(p.htb.rate), mbps(l.htb.rate));
    }
    if p.htb.ceil.bps() / 8 != l.htb.ceil.bps() / 8 {
        d("ceil", mbps(p.htb.ceil), mbps(l.htb.ceil));
    }
    if p.htb.quantum != l.htb.quantum {
        d(
            "quantum",
            p.htb.quantum.to_string(),
            l.htb.quantum.to_string(),
        );
    }
    if p.htb.prio != l.htb.prio {
        d("prio", p.htb.prio.to_string(), l.htb.prio.to_string());
    }
    if let Some(b) = p.htb.burst {
        if Some(b) != l.htb.burst {
            d("burst", b.to_string(), format!("{:?}", l.htb.burst));
        }
    }
    if let Some(b) = p.htb.cburst {
        if Some(b) != l.htb.cburst {
            d("cburst", b.to_string(), format!("{:?}", l.htb.cburst));
        }
    }
}

/// Compares one interface's planned tree with its live tree. `labels` maps
/// classids to circuit / node names for the report. Live qdiscs with handle
/// 0 (kernel defaults such as `noqueue`) are ignored.
pub fn verify_tree(
    dev: &str,
    planned: &TcTree,
    live: &TcTree,
    labels: &BTreeMap<TcHandle, String>,
) -> IfaceVerify {
    let mut drift = Vec::new();
    // Kernel defaults (handle 0) are filed under their parent by the
    // readback; they are not part of any plan.
    let live_qdiscs: BTreeMap<&TcHandle, &Qdisc> = live
        .qdiscs
        .iter()
        .filter(|(_, q)| q.handle != TcHandle::UNSPEC)
        .collect();
    for (h, p) in &planned.qdiscs {
        match live_qdiscs.get(h) {
            None => drift.push(Drift::MissingQdisc {
                handle: *h,
                kind: p.kind.name().to_string(),
            }),
            Some(l) => qdisc_drift(p, l, &mut drift),
        }
    }
    for (h, l) in &live_qdiscs {
        if !planned.qdiscs.contains_key(h) {
            drift.push(Drift::ExtraQdisc {
                handle: **h,
                kind: l.kind.name().to_string(),
            });
        }
    }
    for (id, p) in &planned.classes {
        let label = labels.get(id).cloned();
        match live.classes.get(id) {
            None => drift.push(Drift::MissingClass {
                classid: *id,
                label,
            }),
            Some(l) => class_drift(p, l, &label, &mut drift),
        }
    }
    for id in live.classes.keys() {
        if !planned.classes.contains_key(id) {
            drift.push(Drift::ExtraClass { classid: *id });
        }
    }
    IfaceVerify {
        dev: dev.to_string(),
        planned_qdiscs: planned.qdiscs.len(),
        planned_classes: planned.classes.len(),
        live_qdiscs: live_qdiscs.len(),
        live_classes: live.classes.len(),
        drift,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lqos_model::Rate;
    use lqos_tc::{HtbClass, HtbQdisc, QdiscKind};

    fn class(minor: u16, mbps: u64) -> Class {
        Class {
            parent: TcHandle::new(1, 1),
            classid: TcHandle::new(1, minor),
            htb: HtbClass {
                rate: Rate::from_mbps(mbps),
                ceil: Rate::from_mbps(mbps),
                quantum: 1522,
                prio: 3,
                burst: None,
                cburst: None,
            },
        }
    }

    fn tree() -> TcTree {
        let mut t = TcTree::default();
        let q = Qdisc {
            parent: TcHandle::ROOT,
            handle: TcHandle::new(1, 0),
            kind: QdiscKind::Htb(HtbQdisc {
                default_minor: 2,
                r2q: None,
                direct_qlen: None,
            }),
        };
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
        l.qdiscs.insert(
            TcHandle::ROOT,
            Qdisc {
                parent: TcHandle::ROOT,
                handle: TcHandle::UNSPEC,
                kind: QdiscKind::Other("noqueue".into()),
            },
        );
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
                "qdisc 1: leaf kind is pfifo, plan says htb",
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
}
