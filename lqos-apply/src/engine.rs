//! Preflight, incremental-or-full decision, and the load itself.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use lqos_tc::ops::QdiscKind;
use lqos_tc::rules::{self, Layout};
use lqos_tc::tree::TcTree;
use lqos_tc::{diff, InterfacePlan, Plan, TcOp};
use serde::Serialize;

use crate::backend::{load_deletes_first, Backend, IfaceOps, LoadReport, Progress};
use crate::error::{ApplyError, PlanProblem, Result};
use crate::live::{LinkSummary, LiveSource};
use crate::memory::check_memory;
use crate::timing::{CpuScope, Stopwatch, Timing};
use crate::verify::{verify_tree, VerifyReport};

/// How an interface is (or would be) loaded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub enum LoadKind {
    /// Root delete (if there is a tree) and full build.
    Full {
        /// Why not incremental.
        reason: FullReason,
    },
    /// Only the diff between the live tree and the plan.
    Incremental,
}

impl std::fmt::Display for LoadKind {
    /// `incremental`, or `full rebuild (REASON)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadKind::Full { reason } => write!(f, "full rebuild ({reason})"),
            LoadKind::Incremental => f.write_str("incremental"),
        }
    }
}

/// Why an interface is rebuilt rather than changed in place.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FullReason {
    /// The caller asked for a full rebuild ([`ApplyOptions::full`]).
    Requested,
    /// The live tree's layout cannot be changed into the plan's in place.
    Layout(rules::RebuildReason),
}

impl std::fmt::Display for FullReason {
    /// `requested`, or the layout's reason (`no tree loaded yet`, ...).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FullReason::Requested => f.write_str("requested"),
            FullReason::Layout(r) => r.fmt(f),
        }
    }
}

impl Serialize for FullReason {
    /// As its text.
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The ops chosen for one interface, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Change<'a> {
    /// Full or incremental.
    pub kind: LoadKind,
    /// Exactly what is (or would be) sent.
    pub stream: IfaceOps<'a>,
}

impl Change<'_> {
    /// An owned copy (for reports that outlive the plan).
    pub fn into_owned(self) -> Change<'static> {
        Change {
            kind: self.kind,
            stream: self.stream.into_owned(),
        }
    }
}

/// Options of [`apply_plan`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ApplyOptions {
    /// Always root delete + full build.
    pub full: bool,
    /// Compute and return the ops, send nothing.
    pub dry_run: bool,
    /// Read the trees back after loading and verify them.
    pub verify_after: bool,
    /// Load even when the memory preflight estimates that the new leaf
    /// qdiscs do not fit in `MemAvailable` ([`crate::memory`]).
    pub skip_memory_check: bool,
}

impl ApplyOptions {
    /// Root delete and full build even when an incremental change would do.
    pub fn full(mut self, yes: bool) -> Self {
        self.full = yes;
        self
    }

    /// Compute the ops, send nothing.
    pub fn dry_run(mut self, yes: bool) -> Self {
        self.dry_run = yes;
        self
    }

    /// Read the trees back after loading and verify them.
    pub fn verify_after(mut self, yes: bool) -> Self {
        self.verify_after = yes;
        self
    }

    /// Skip the memory preflight.
    pub fn skip_memory_check(mut self, yes: bool) -> Self {
        self.skip_memory_check = yes;
        self
    }
}

/// The outcome of [`apply_plan`].
#[derive(Debug)]
#[non_exhaustive]
pub struct ApplyReport<'a> {
    /// Per interface: full or incremental, and the ops (borrowed from the
    /// plan for full builds).
    pub changes: Vec<Change<'a>>,
    /// Preflight time (links, queues, qdisc kinds).
    pub preflight: Timing,
    /// Time to read the live trees back.
    pub readback: Timing,
    /// Time to choose full/incremental and compute the diffs.
    pub diff: Timing,
    /// The load (`None` for a dry run).
    pub load: Option<LoadReport>,
    /// Post-load verification, if asked for.
    pub verify: Option<VerifyReport>,
    /// The memory preflight's estimate, when the load could create more
    /// than the memory it may use and was estimated exactly (`None`: the
    /// load is small, memory is unknown, a dry run, or the check was
    /// skipped).
    pub memory: Option<lqos_tc::memory::MemoryEstimate>,
}

impl ApplyReport<'_> {
    /// Total ops chosen over all interfaces.
    pub fn ops_total(&self) -> usize {
        self.changes.iter().map(|c| c.stream.len()).sum()
    }

    /// An owned copy (for reports that outlive the plan).
    pub fn into_owned(self) -> ApplyReport<'static> {
        ApplyReport {
            changes: self.changes.into_iter().map(Change::into_owned).collect(),
            preflight: self.preflight,
            readback: self.readback,
            diff: self.diff,
            load: self.load,
            verify: self.verify,
            memory: self.memory,
        }
    }
}

/// The leaf kinds tried as alternatives in the preflight hint.
fn sqm_alternatives() -> [QdiscKind; 3] {
    [
        QdiscKind::Cake(Default::default()),
        QdiscKind::FqCodel(Default::default()),
        QdiscKind::Pfifo { limit: None },
    ]
}

/// Checks, before any change: every interface exists, has enough TX queues,
/// the kernel can run the `tc` classifier if the plan has filters
/// ([`LiveSource::probe_classifier`]), and every qdisc kind of the plan is
/// accepted by this kernel (probed away from the real interfaces). Returns
/// the links.
pub fn preflight(plan: &Plan, live: &dyn LiveSource) -> Result<BTreeMap<String, LinkSummary>> {
    if plan.interfaces.is_empty() {
        return Err(ApplyError::Plan(PlanProblem::NoInterfaces));
    }
    let mut links = BTreeMap::new();
    for t in &plan.interfaces {
        let link = live.link(&t.dev)?.ok_or_else(|| ApplyError::NoInterface {
            dev: t.dev.clone(),
            netns: live.netns().map(str::to_string),
            config_key: crate::inputs::config_key(&plan.config.interfaces, &t.dev),
        })?;
        let mq_root = t.ops[..t.setup_ops.min(t.ops.len())].iter().any(|op| {
            matches!(op, TcOp::AddQdisc(q) | TcOp::ReplaceQdisc(q)
                if q.parent == lqos_tc::TcHandle::ROOT && q.kind == QdiscKind::Mq)
        });
        if link.num_tx_queues < 2 && mq_root {
            return Err(ApplyError::MqOnSingleQueue { dev: t.dev.clone() });
        }
        let needed = t.tx_queues();
        if needed > link.num_tx_queues as usize {
            return Err(ApplyError::TooFewQueues {
                dev: t.dev.clone(),
                needed,
                available: link.num_tx_queues,
            });
        }
        links.insert(t.dev.clone(), link);
    }
    // The classifier: kernel version, clsact, flower, skbedit.
    if plan
        .interfaces
        .iter()
        .any(|t| t.ops.iter().any(|op| matches!(op, TcOp::ReplaceFilter(_))))
    {
        if let Err(reason) = live.probe_classifier()? {
            return Err(ApplyError::ClassifierUnsupported { reason });
        }
    }
    // One probe per kind (first instance's options); mq needs a multiqueue
    // device and is part of every kernel with tc, so it is not probed;
    // clsact was probed with the classifier above.
    let mut seen = BTreeSet::new();
    let mut kinds = Vec::new();
    for t in &plan.interfaces {
        for op in &t.ops {
            if let TcOp::AddQdisc(q) | TcOp::ReplaceQdisc(q) = op {
                let skip = matches!(q.kind, QdiscKind::Mq | QdiscKind::Clsact);
                if !skip && seen.insert(q.kind.name().to_string()) {
                    kinds.push(q.kind.clone());
                }
            }
        }
    }
    let results = live.probe_qdiscs(&kinds)?;
    for (k, r) in kinds.iter().zip(results) {
        let Err(refusal) = r else { continue };
        let kind = k.name().to_string();
        if !refusal.is_unknown_kind() {
            return Err(ApplyError::QdiscRejected { kind, refusal });
        }
        let alts: Vec<QdiscKind> = sqm_alternatives()
            .into_iter()
            .filter(|a| a.name() != kind)
            .collect();
        let ok: Vec<&str> = alts
            .iter()
            .zip(live.probe_qdiscs(&alts)?)
            .filter(|(_, r)| r.is_ok())
            .map(|(a, _)| a.name())
            .collect();
        return Err(ApplyError::UnsupportedQdisc {
            kind,
            refusal,
            alternatives: ok.into_iter().map(str::to_string).collect(),
        });
    }
    Ok(links)
}

/// True for the classifier's ops (`clsact` and its filters).
fn is_classifier_op(op: &TcOp) -> bool {
    match op {
        TcOp::ReplaceFilter(_) | TcOp::DeleteFilter(_) => true,
        TcOp::AddQdisc(q) | TcOp::ReplaceQdisc(q) => q.kind == QdiscKind::Clsact,
        _ => false,
    }
}

/// [`plan_change`] of every interface of `plan` against its live tree
/// (`trees`, in the plan's order), one thread per interface when there are
/// several: the interfaces are independent, and on a no-op reload the two
/// diffs are most of what follows the kernel's dumps.
pub(crate) fn plan_changes<'a>(plan: &'a Plan, trees: &[TcTree], full: bool) -> Vec<Change<'a>> {
    if plan.interfaces.len() < 2 {
        return plan
            .interfaces
            .iter()
            .zip(trees)
            .map(|(ip, tree)| plan_change(ip, tree, full))
            .collect();
    }
    std::thread::scope(|s| {
        let workers: Vec<_> = plan
            .interfaces
            .iter()
            .zip(trees)
            .map(|(ip, tree)| s.spawn(move || plan_change(ip, tree, full)))
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    })
}

/// The ops that take `live` to `ip`: the diff when the layout matches
/// ([`rules::layout`]; and `full` is off), else a root delete (if a tree is
/// there, [`rules::rebuild_deletes_root`]) plus the full build of the
/// classes, borrowed from the plan, then the classifier's diff against
/// `live` (the root delete does not remove `clsact` or its filters).
pub fn plan_change<'a>(ip: &'a InterfacePlan, live: &TcTree, full: bool) -> Change<'a> {
    let planned = ip.tree();
    let reason = if full {
        Some(FullReason::Requested)
    } else {
        match rules::layout(live, &planned) {
            Layout::Same => None,
            Layout::Rebuild(r) => Some(FullReason::Layout(r)),
        }
    };
    match reason {
        None => Change {
            kind: LoadKind::Incremental,
            stream: IfaceOps::new(ip.dev.clone(), diff(live, &planned)),
        },
        Some(reason) => {
            let mut stream = rebuild_stream(ip, live, &planned);
            stream.delete_root = rules::rebuild_deletes_root(live);
            Change {
                kind: LoadKind::Full { reason },
                stream,
            }
        }
    }
}

/// The full build of `ip` for a rebuild over `live`. The planner appends
/// the classifier (`clsact`, then the filters) after the classes; the root
/// delete leaves a live `clsact` and its filters in place, so the
/// classifier part is diffed against `live` instead of resent: with no
/// classifier live, the plan's ops are borrowed whole; with one in sync,
/// the classes alone are borrowed (a no-op for the classifier); otherwise
/// the classes are followed by the classifier's diff (owned).
fn rebuild_stream<'a>(ip: &'a InterfacePlan, live: &TcTree, planned: &TcTree) -> IfaceOps<'a> {
    let mut stream = IfaceOps::from_plan(ip);
    let classes = ip
        .ops
        .iter()
        .position(is_classifier_op)
        .unwrap_or(ip.ops.len());
    if !live.has_clsact() && live.filters.is_empty() {
        // Nothing of a classifier is live: the plan's own suffix builds it
        // (what `diff_filters` from an empty tree would send).
        return stream;
    }
    debug_assert!(
        ip.ops[classes..].iter().all(is_classifier_op),
        "the classifier's ops are the plan's suffix"
    );
    let filters = lqos_tc::classify::diff_filters(live, planned);
    stream.ops = if filters.is_empty() {
        Cow::Borrowed(&ip.ops[..classes])
    } else {
        let mut ops = Vec::with_capacity(classes + filters.len());
        ops.extend_from_slice(&ip.ops[..classes]);
        ops.extend(filters);
        Cow::Owned(ops)
    };
    stream.setup_len = stream.setup_len.min(classes);
    stream
}

/// Verifies the live trees of all interfaces of `plan`.
pub fn verify_plan(plan: &Plan, live: &dyn LiveSource) -> Result<VerifyReport> {
    let mut report = VerifyReport::default();
    for ip in &plan.interfaces {
        let tree = live.dump(&ip.dev)?;
        report.interfaces.push(verify_tree(
            &ip.dev,
            &ip.tree(),
            &tree,
            &plan.labels(&ip.dev),
        ));
    }
    Ok(report)
}

/// Preflight, read back, choose full or incremental per interface, check
/// that the load fits in memory ([`crate::memory::check_memory`], unless
/// `skip_memory_check`), and load (unless `dry_run`). Returns `Err` for a
/// failed preflight or memory check (nothing was changed); a failed load is
/// `Ok` with the error inside [`ApplyReport::load`] so the caller sees what
/// was applied.
pub fn apply_plan<'a>(
    plan: &'a Plan,
    live: &dyn LiveSource,
    backend: &dyn Backend,
    opts: ApplyOptions,
    progress: &dyn Progress,
) -> Result<ApplyReport<'a>> {
    let sw = Stopwatch::start(CpuScope::Process);
    preflight(plan, live)?;
    let preflight_t = sw.stop();
    let sw = Stopwatch::start(CpuScope::Process);
    let mut trees = Vec::with_capacity(plan.interfaces.len());
    for ip in &plan.interfaces {
        trees.push(live.dump(&ip.dev)?);
    }
    let readback = sw.stop();
    let sw = Stopwatch::start(CpuScope::Process);
    let changes = plan_changes(plan, &trees, opts.full);
    let diff_t = sw.stop();
    let mut report = ApplyReport {
        changes,
        preflight: preflight_t,
        readback,
        diff: diff_t,
        load: None,
        verify: None,
        memory: None,
    };
    if opts.dry_run {
        return Ok(report);
    }
    let streams: Vec<IfaceOps> = report.changes.iter().map(|c| c.stream.clone()).collect();
    if !opts.skip_memory_check {
        let live_trees: Vec<&TcTree> = trees.iter().collect();
        report.memory = check_memory(&streams, &live_trees, || live.meminfo())?;
    }
    let load = load_deletes_first(backend, &streams, progress);
    let ok = load.is_ok();
    report.load = Some(load);
    if ok && opts.verify_after {
        report.verify = Some(verify_plan(plan, live)?);
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{NoProgress, Recording};
    use lqos_model::Rate;
    use lqos_tc::ops::{Class, HtbClass, HtbQdisc, Qdisc};
    use lqos_tc::TcHandle;

    fn class(parent: TcHandle, classid: TcHandle, mbps: u64) -> Class {
        Class {
            parent,
            classid,
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

    /// mq + `queues` htbs + `n` circuits with `leaf` leaves.
    fn target(
        dev: &str,
        queues: u16,
        n: usize,
        rate: impl Fn(usize) -> u64,
        leaf: QdiscKind,
    ) -> InterfacePlan {
        let root = TcHandle::new(0x7fff, 0);
        let mut ops = vec![TcOp::ReplaceQdisc(Qdisc {
            parent: TcHandle::ROOT,
            handle: root,
            kind: QdiscKind::Mq,
        })];
        for q in 1..=queues {
            ops.push(TcOp::AddQdisc(Qdisc {
                parent: TcHandle::new(0x7fff, q),
                handle: TcHandle::new(q, 0),
                kind: QdiscKind::Htb(HtbQdisc {
                    default_minor: 2,
                    r2q: None,
                    direct_qlen: None,
                }),
            }));
            ops.push(TcOp::AddClass(class(
                TcHandle::new(q, 0),
                TcHandle::new(q, 1),
                1000,
            )));
        }
        let setup_ops = ops.len();
        for i in 0..n {
            let q = (i % queues as usize) as u16 + 1;
            let id = TcHandle::new(q, 3 + (i / queues as usize) as u16);
            ops.push(TcOp::AddClass(class(TcHandle::new(q, 1), id, rate(i))));
            ops.push(TcOp::AddQdisc(Qdisc {
                parent: id,
                handle: TcHandle::new(0x100 + i as u16, 0),
                kind: leaf.clone(),
            }));
        }
        InterfacePlan {
            dev: dev.into(),
            direction: lqos_tc::allocation::Direction::Download,
            ops,
            setup_ops,
            queue_class_counts: vec![],
        }
    }

    /// A plan of hand-built interfaces.
    fn plan_of(ifaces: &[InterfacePlan]) -> Plan {
        Plan {
            config: lqos_tc::PlanConfig::bridge("ens19", "ens20", 4),
            interfaces: ifaces.to_vec(),
            allocation: Default::default(),
            squashed: Vec::new(),
            ip_map: Default::default(),
        }
    }

    fn pfifo() -> QdiscKind {
        QdiscKind::Pfifo { limit: None }
    }

    fn run(targets: &[InterfacePlan], rec: &Recording, full: bool) -> ApplyReport<'static> {
        let opts = ApplyOptions {
            full,
            dry_run: false,
            verify_after: true,
            ..Default::default()
        };
        apply_plan(&plan_of(targets), rec, rec, opts, &NoProgress)
            .unwrap()
            .into_owned()
    }

    #[test]
    fn first_load_is_full_then_no_change_sends_nothing() {
        let rec = Recording::new().with_link("ens19", 4).with_link("ens20", 4);
        let t = [
            target("ens19", 4, 40, |_| 10, pfifo()),
            target("ens20", 4, 40, |_| 5, pfifo()),
        ];
        let r = run(&t, &rec, false);
        assert!(matches!(r.changes[0].kind, LoadKind::Full { .. }));
        // Empty device: no root delete before the build.
        assert_eq!(rec.sent_for("ens19"), t[0].ops);
        assert!(r.verify.unwrap().is_clean());
        rec.clear_sent();
        let r = run(&t, &rec, false);
        assert_eq!(r.changes[0].kind, LoadKind::Incremental);
        assert_eq!(r.ops_total(), 0);
        assert!(rec.sent().is_empty());
    }

    #[test]
    fn rate_change_is_a_change_in_place_and_full_forces_rebuild() {
        let rec = Recording::new().with_link("ens19", 4);
        run(&[target("ens19", 4, 40, |_| 10, pfifo())], &rec, false);
        rec.clear_sent();
        let t = [target(
            "ens19",
            4,
            40,
            |i| if i == 7 { 20 } else { 10 },
            pfifo(),
        )];
        let r = run(&t, &rec, false);
        let sent = rec.sent_for("ens19");
        assert_eq!(sent.len(), 1, "{sent:?}");
        assert!(matches!(&sent[0], TcOp::ChangeClass(c) if c.htb.rate == Rate::from_mbps(20)));
        assert!(r.verify.unwrap().is_clean());
        rec.clear_sent();
        run(&t, &rec, true);
        let sent = rec.sent_for("ens19");
        assert_eq!(sent[0], TcOp::delete_root());
        assert_eq!(&sent[1..], &t[0].ops[..]);
    }

    #[test]
    fn a_failed_op_is_reported_and_the_next_apply_converges() {
        let rec = Recording::new().with_link("ens19", 4).with_link("ens20", 4);
        let t = [
            target("ens19", 4, 40, |_| 10, pfifo()),
            target("ens20", 4, 40, |_| 5, pfifo()),
        ];
        rec.fail_at("ens20", 30, "Error: boom.");
        let r = run(&t, &rec, false);
        let load = r.load.unwrap();
        assert!(load.interfaces[0].error.is_none());
        let err = load.into_result().unwrap_err();
        match &err {
            ApplyError::OpFailed {
                dev,
                index,
                op,
                message,
                ..
            } => {
                assert_eq!((dev.as_str(), *index), ("ens20", 30));
                assert_eq!(**op, t[1].ops[30]);
                assert_eq!(message, "Error: boom.");
            }
            e => panic!("{e}"),
        }
        assert!(err.to_string().contains("ens20: op #30"), "{err}");
        // Partial tree: the next run converges.
        let r = run(&t, &rec, false);
        assert!(r.load.unwrap().is_ok());
        assert!(r.verify.unwrap().is_clean());
        assert_eq!(rec.tree("ens20").unwrap(), t[1].tree());
    }

    #[test]
    fn preflight_failures_change_nothing_and_say_what_is_missing() {
        let rec = Recording::new()
            .with_link("ens19", 2)
            .without_qdisc_kind("cake");
        let opts = ApplyOptions::default();
        let e = apply_plan(
            &plan_of(&[target("eth9", 2, 4, |_| 10, pfifo())]),
            &rec,
            &rec,
            opts,
            &NoProgress,
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("interface eth9 does not exist"),
            "{e}"
        );
        let e = apply_plan(
            &plan_of(&[target("ens19", 4, 4, |_| 10, pfifo())]),
            &rec,
            &rec,
            opts,
            &NoProgress,
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("uses 4 TX queues but the interface has 2"),
            "{e}"
        );
        let cake = QdiscKind::Cake(Default::default());
        let e = apply_plan(
            &plan_of(&[target("ens19", 2, 4, |_| 10, cake)]),
            &rec,
            &rec,
            opts,
            &NoProgress,
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("this kernel has no sch_cake")
                && e.to_string().contains("fq_codel and pfifo work"),
            "{e}"
        );
        let ApplyError::UnsupportedQdisc { alternatives, .. } = &e else {
            panic!("{e}")
        };
        assert_eq!(alternatives, &["fq_codel", "pfifo"]);
        assert!(rec.sent().is_empty());
    }

    #[test]
    fn preflight_counts_the_queues_the_plan_uses_on_a_bridge_and_a_stick() {
        let g = lqos_model::generate(&lqos_model::GenParams::with_circuits(40));
        let bridge = lqos_tc::PlanConfig::bridge("ens19", "ens20", 4);
        let mut stick = bridge.clone();
        stick.interfaces = lqos_tc::config::Interfaces::OnAStick {
            interface: "ens19".into(),
            internet_vlan: 2,
            network_vlan: 3,
        };
        let p = lqos_tc::plan(&g.network, &bridge, None).unwrap();
        assert_eq!(p.interfaces[0].tx_queues(), 4);
        let rec = Recording::new().with_link("ens19", 4).with_link("ens20", 4);
        assert!(preflight(&p, &rec).is_ok());
        // A stick splits the 4 queues between the directions.
        let p = lqos_tc::plan(&g.network, &stick, None).unwrap();
        assert_eq!(p.interfaces[0].tx_queues(), 4);
        let rec = Recording::new().with_link("ens19", 3);
        let e = preflight(&p, &rec).unwrap_err();
        assert!(
            matches!(
                e,
                ApplyError::TooFewQueues {
                    needed: 4,
                    available: 3,
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn a_load_that_does_not_fit_in_memory_is_refused_before_any_op() {
        let g = lqos_model::generate(&lqos_model::GenParams::with_circuits(400));
        let mut cfg = lqos_tc::PlanConfig::bridge("ens19", "ens20", 4);
        cfg.default_sqm = "cake diffserv4".parse().unwrap();
        let p = lqos_tc::plan(&g.network, &cfg, None).unwrap();
        let mib = 1u64 << 20;
        // ~800 cake leaves (~830 MiB) into 700 MiB available.
        let rec = Recording::new()
            .with_link("ens19", 4)
            .with_link("ens20", 4)
            .with_meminfo(crate::memory::MemInfo {
                total: 1024 * mib,
                available: 700 * mib,
            });
        let e = apply_plan(&p, &rec, &rec, ApplyOptions::default(), &NoProgress).unwrap_err();
        assert!(matches!(e, ApplyError::NotEnoughMemory { .. }), "{e}");
        assert!(rec.sent().is_empty());
        // A dry run shows the ops; skipping the check loads.
        let dry = ApplyOptions::default().dry_run(true);
        assert!(apply_plan(&p, &rec, &rec, dry, &NoProgress).is_ok());
        let skip = ApplyOptions::default().skip_memory_check(true);
        let r = apply_plan(&p, &rec, &rec, skip, &NoProgress).unwrap();
        assert!(r.load.unwrap().is_ok());
        // Loaded, a no-op reload and a full rebuild create nothing new.
        let r = apply_plan(&p, &rec, &rec, ApplyOptions::default(), &NoProgress).unwrap();
        assert_eq!(r.ops_total(), 0);
        let full = ApplyOptions::default().full(true);
        let r = apply_plan(&p, &rec, &rec, full, &NoProgress).unwrap();
        assert!(r.load.unwrap().is_ok());
        assert_eq!(r.memory.unwrap().net_bytes(), 0);
    }

    #[test]
    fn dry_run_returns_ops_without_sending() {
        let rec = Recording::new().with_link("ens19", 4);
        let t = [target("ens19", 4, 8, |_| 10, pfifo())];
        let opts = ApplyOptions {
            dry_run: true,
            ..Default::default()
        };
        let p = plan_of(&t);
        let r = apply_plan(&p, &rec, &rec, opts, &NoProgress).unwrap();
        assert_eq!(r.changes[0].stream.ops[..], t[0].ops[..]);
        // The full build is the plan's own ops, not a copy.
        assert!(std::ptr::eq(
            &r.changes[0].stream.ops[..],
            &p.interfaces[0].ops[..]
        ));
        assert!(r.load.is_none());
        assert!(rec.sent().is_empty());
    }

    #[test]
    fn wrong_layout_triggers_full_rebuild() {
        let rec = Recording::new().with_link("ens19", 8);
        run(&[target("ens19", 4, 8, |_| 10, pfifo())], &rec, false);
        rec.clear_sent();
        // Now 8 queues: queue qdiscs 5..8 are missing -> full rebuild.
        let t = [target("ens19", 8, 8, |_| 10, pfifo())];
        let r = run(&t, &rec, false);
        match &r.changes[0].kind {
            LoadKind::Full { reason } => {
                assert!(reason.to_string().contains("5: is missing"), "{reason}")
            }
            k => panic!("{k:?}"),
        }
        assert_eq!(rec.sent_for("ens19")[0], TcOp::delete_root());
        assert!(r.verify.unwrap().is_clean());
        rec.clear_sent();
        // Back to 4 queues: queue qdiscs 5..8 are extra -> full rebuild.
        let t = [target("ens19", 4, 8, |_| 10, pfifo())];
        let r = run(&t, &rec, false);
        match &r.changes[0].kind {
            LoadKind::Full { reason } => {
                assert!(
                    reason.to_string().contains("queue count changed"),
                    "{reason}"
                )
            }
            k => panic!("{k:?}"),
        }
        assert!(r.verify.unwrap().is_clean());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]
        /// Whatever op a load dies at, and whatever the plan changes to,
        /// the next apply converges to the plan.
        #[test]
        fn incremental_converges_from_any_partial_tree(
            fail_at in 0usize..200,
            n1 in 1usize..40,
            n2 in 1usize..40,
            bump in 0usize..40,
            full in proptest::bool::ANY,
        ) {
            let rec = Recording::new().with_link("ens19", 4);
            let first = [target("ens19", 4, n1, |_| 10, pfifo())];
            run(&first, &rec, false);
            let second = [target("ens19", 4, n2, |i| if i == bump { 30 } else { 10 }, pfifo())];
            rec.fail_at("ens19", rec.sent_for("ens19").len() + fail_at, "Error: injected.");
            let _ = run(&second, &rec, full);
            let r = run(&second, &rec, false);
            proptest::prop_assert!(r.load.unwrap().is_ok());
            proptest::prop_assert!(r.verify.unwrap().is_clean());
            proptest::prop_assert_eq!(rec.tree("ens19").unwrap(), second[0].tree());
        }
    }
}
