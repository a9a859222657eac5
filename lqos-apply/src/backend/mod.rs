//! Loaders that drive per-interface op streams into the kernel: `tc -b`
//! ([`TcBatch`]), rtnetlink ([`NetlinkBackend`]) and a [`Recording`] fake,
//! all behind one [`Backend`] trait chosen at run time.

use std::borrow::Cow;
use std::sync::atomic::{AtomicUsize, Ordering};

use lqos_tc::{InterfacePlan, Plan, TcOp};
use serde::Serialize;

use crate::error::ApplyError;
use crate::timing::Timing;

#[cfg(feature = "test-util")]
mod faults;
mod netlink;
mod recording;
mod tc;

#[cfg(feature = "test-util")]
pub use faults::{Fault, Faulty};
pub use netlink::NetlinkBackend;
pub use recording::{Recording, RECORDING_BATCH};
pub use tc::{TcBatch, TcMode};

/// What is sent to one interface: ops borrowed from a plan (a full build,
/// never copied) or owned (a diff), and whether the old tree is deleted
/// first.
///
/// This is the one "device + ops" type of lqos-apply. It differs from
/// [`lqos_tc::InterfacePlan`], the plan of record (the full build of an
/// interface with its direction and queue layout, saved and diffed
/// against), in that it is a *delivery*: a diff, or a full build with a root
/// delete in front, as chosen for one load.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct IfaceOps<'a> {
    /// Interface name.
    pub dev: String,
    /// Send `qdisc del dev X root` before `ops` (full reloads of a device
    /// that has a tree). [`load_deletes_first`] hoists these deletes before
    /// every build; a backend sends it as the first op of the stream unless
    /// the load's [`RootDelete`] places deletes otherwise.
    pub delete_root: bool,
    /// Ops in order (without the root delete).
    pub ops: Cow<'a, [TcOp]>,
    /// How many leading ops build the queue layout (root, HTBs, `:1`,
    /// `:2`), from [`InterfacePlan::setup_ops`]; 0 for a diff. A combined
    /// `tc -b` batch sends every interface's setup before interleaving.
    pub setup_len: usize,
}

impl<'a> IfaceOps<'a> {
    /// A stream of `ops` (owned or borrowed) for `dev`, with no setup
    /// prefix and no root delete.
    pub fn new(dev: impl Into<String>, ops: impl Into<Cow<'a, [TcOp]>>) -> IfaceOps<'a> {
        IfaceOps {
            dev: dev.into(),
            delete_root: false,
            ops: ops.into(),
            setup_len: 0,
        }
    }

    /// The full build of one planned interface (borrowed, not copied).
    pub fn from_plan(ip: &'a InterfacePlan) -> IfaceOps<'a> {
        IfaceOps {
            dev: ip.dev.clone(),
            delete_root: false,
            ops: Cow::Borrowed(&ip.ops),
            setup_len: ip.setup_ops.min(ip.ops.len()),
        }
    }

    /// The full builds of all interfaces of `plan`.
    pub fn all_from_plan(plan: &'a Plan) -> Vec<IfaceOps<'a>> {
        plan.interfaces.iter().map(IfaceOps::from_plan).collect()
    }

    /// The same stream with a root delete in front.
    pub fn with_delete_root(mut self) -> IfaceOps<'a> {
        self.delete_root = true;
        self
    }

    /// Ops sent, the root delete included.
    pub fn len(&self) -> usize {
        usize::from(self.delete_root) + self.ops.len()
    }

    /// True when nothing is sent.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The op at `index` of the stream as sent (index 0 is the root delete
    /// when there is one).
    pub fn op(&self, index: usize) -> Option<Cow<'_, TcOp>> {
        match (self.delete_root, index) {
            (true, 0) => Some(Cow::Owned(TcOp::delete_root())),
            (true, i) => self.ops.get(i - 1).map(Cow::Borrowed),
            (false, i) => self.ops.get(i).map(Cow::Borrowed),
        }
    }

    /// Every op as sent, the root delete first when there is one.
    pub fn sent(&self) -> impl Iterator<Item = Cow<'_, TcOp>> + '_ {
        let delete = self.delete_root.then(|| Cow::Owned(TcOp::delete_root()));
        delete.into_iter().chain(self.ops.iter().map(Cow::Borrowed))
    }

    /// What is sent, counted: ops added, changed, removed (the root delete
    /// counts as one removal).
    pub fn summary(&self) -> lqos_tc::DiffSummary {
        let mut s = lqos_tc::DiffSummary::of(&self.ops);
        if self.delete_root {
            s.add(&[TcOp::delete_root()]);
        }
        s
    }

    /// An owned copy (for reports that outlive the plan).
    pub fn into_owned(self) -> IfaceOps<'static> {
        IfaceOps {
            dev: self.dev,
            delete_root: self.delete_root,
            ops: Cow::Owned(self.ops.into_owned()),
            setup_len: self.setup_len,
        }
    }
}

/// Where the `qdisc del dev X root` of a full reload goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub enum RootDelete {
    /// No root delete added (incremental loads); a stream's own
    /// [`IfaceOps::delete_root`] is still sent, in its batch.
    #[default]
    None,
    /// First op of each interface's stream, in the same batch / socket.
    /// The stream a report counts is then `[root delete] + ops`. A root
    /// delete that finds nothing to delete (`ENOENT`) is ignored.
    InBatch,
    /// Its own step before each interface's batch (its own `tc` process for
    /// the tc backend), timed separately in [`IfaceReport::root_delete`].
    Separate,
}

/// Whether interfaces are loaded one after another or concurrently.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub enum Parallelism {
    /// One interface after another.
    #[default]
    Serial,
    /// One worker (thread / process) per interface.
    Parallel,
}

/// Receives progress while a load runs (ops handed to the kernel or to
/// tc), and tells it when to stop.
pub trait Progress: Sync {
    /// `n` more ops of `dev` were sent.
    fn advance(&self, dev: &str, n: usize);

    /// Whether the load should stop at its next safe point: the netlink
    /// backend checks between two batches of requests (waiting for the
    /// ACKs of the batch in flight), `tc -b` between two lines (then
    /// closes tc's input, killing tc if the lines it still holds take
    /// long). An interface stopped this way reports the ops applied so far
    /// and [`ApplyError::Incomplete`] with [`Stopped::Cancelled`].
    ///
    /// [`Stopped::Cancelled`]: crate::error::Stopped::Cancelled
    fn cancelled(&self) -> bool {
        false
    }
}

/// A cancellation flag for loads: set it (from a signal handler, another
/// thread) and every load given it as (or inside) its [`Progress`] stops at
/// its next safe point.
///
/// ```
/// use lqos_apply::backend::{Cancel, Progress};
/// let cancel = Cancel::new();
/// assert!(!cancel.cancelled());
/// // e.g. signal_hook::flag::register(SIGTERM, cancel.flag())
/// cancel.cancel();
/// assert!(cancel.cancelled());
/// ```
#[derive(Debug, Clone, Default)]
pub struct Cancel(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Cancel {
    /// A flag that is not set.
    pub fn new() -> Cancel {
        Cancel::default()
    }

    /// Sets the flag: loads stop at their next safe point.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// The shared flag itself (for `signal_hook::flag::register`, which
    /// sets it from the signal handler).
    pub fn flag(&self) -> std::sync::Arc<std::sync::atomic::AtomicBool> {
        self.0.clone()
    }

    /// `progress`, stopping when this flag is set.
    pub fn with<'a>(&'a self, progress: &'a dyn Progress) -> WithCancel<'a> {
        WithCancel {
            progress,
            cancel: self,
        }
    }
}

impl Progress for Cancel {
    fn advance(&self, _dev: &str, _n: usize) {}

    fn cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// A [`Progress`] that also stops when its [`Cancel`] is set
/// ([`Cancel::with`]).
pub struct WithCancel<'a> {
    progress: &'a dyn Progress,
    cancel: &'a Cancel,
}

impl Progress for WithCancel<'_> {
    fn advance(&self, dev: &str, n: usize) {
        self.progress.advance(dev, n);
    }

    fn cancelled(&self) -> bool {
        self.cancel.cancelled() || self.progress.cancelled()
    }
}

/// A [`Progress`] that ignores everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoProgress;

impl Progress for NoProgress {
    fn advance(&self, _dev: &str, _n: usize) {}
}

/// A [`Progress`] that just counts.
#[derive(Debug, Default)]
pub struct CountProgress(pub AtomicUsize);

impl Progress for CountProgress {
    fn advance(&self, _dev: &str, n: usize) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }
}

/// What happened on one interface.
#[derive(Debug)]
#[non_exhaustive]
pub struct IfaceReport {
    /// Interface.
    pub dev: String,
    /// Ops in the stream (including an in-batch root delete).
    pub ops_total: usize,
    /// Ops the kernel accepted, each counted by its own ACK (with netlink
    /// batches this includes ops after a failed one that the kernel still
    /// applied) or, for `tc -b`, by the lines tc did not report as failed.
    pub ops_applied: usize,
    /// Wall and CPU time of this interface's load (the worker thread for
    /// netlink, the tc process for tc). `None` when interfaces shared one
    /// process (combined tc batch): see [`LoadReport::total`].
    pub timing: Option<Timing>,
    /// Time of the separate root delete ([`RootDelete::Separate`]).
    pub root_delete: Option<Timing>,
    /// Why this interface's load stopped early.
    pub error: Option<ApplyError>,
}

impl IfaceReport {
    /// A report for `dev` whose stream has `ops_total` ops, nothing applied
    /// yet (for [`Backend`] implementations).
    pub fn new(dev: impl Into<String>, ops_total: usize) -> IfaceReport {
        IfaceReport {
            dev: dev.into(),
            ops_total,
            ops_applied: 0,
            timing: None,
            root_delete: None,
            error: None,
        }
    }
}

/// The outcome of one [`Backend::load`].
#[derive(Debug)]
#[non_exhaustive]
pub struct LoadReport {
    /// [`Backend::describe`] of the backend used.
    pub backend: String,
    /// One entry per interface, in request order.
    pub interfaces: Vec<IfaceReport>,
    /// Whole load: wall time; user/sys of the tc children (tc backend) or
    /// of this process (netlink backend).
    pub total: Timing,
}

impl LoadReport {
    /// A report of `backend` ([`Backend::describe`]) over `interfaces`
    /// that took `total` (for [`Backend`] implementations).
    pub fn new(backend: impl Into<String>, interfaces: Vec<IfaceReport>, total: Timing) -> Self {
        LoadReport {
            backend: backend.into(),
            interfaces,
            total,
        }
    }

    /// True when every interface loaded completely.
    pub fn is_ok(&self) -> bool {
        self.interfaces.iter().all(|i| i.error.is_none())
    }

    /// Total ops the kernel accepted.
    pub fn ops_applied(&self) -> usize {
        self.interfaces.iter().map(|i| i.ops_applied).sum()
    }

    /// The first interface error, if any.
    pub fn first_error(&self) -> Option<&ApplyError> {
        self.interfaces.iter().find_map(|i| i.error.as_ref())
    }

    /// `Err` with the first error (preferring a real op failure over an
    /// `Incomplete` caused by it), else the report.
    pub fn into_result(mut self) -> Result<LoadReport, ApplyError> {
        let pos = self
            .interfaces
            .iter()
            .position(|i| matches!(i.error, Some(ApplyError::OpFailed { .. })))
            .or_else(|| self.interfaces.iter().position(|i| i.error.is_some()));
        match pos {
            Some(p) => Err(self.interfaces[p].error.take().expect("error present")),
            None => Ok(self),
        }
    }
}

/// A loader of op streams.
pub trait Backend: Send + Sync {
    /// Short description (`tc -b serial`, `netlink parallel`, ...).
    fn describe(&self) -> String;

    /// Sends each interface's ops in order, with a root delete first where
    /// `root_delete` adds one or the stream asks for one
    /// ([`IfaceOps::delete_root`]). A failed op stops that interface's
    /// stream (and, for a combined tc batch, the whole batch); the failure
    /// is reported in its [`IfaceReport::error`], and
    /// [`IfaceReport::ops_applied`] counts what the kernel accepted. Other
    /// interfaces carry on where the backend allows it.
    fn load(
        &self,
        ifaces: &[IfaceOps<'_>],
        root_delete: RootDelete,
        progress: &dyn Progress,
    ) -> LoadReport;
}

/// Loads `ifaces`, first deleting every old tree a stream asks to delete
/// ([`IfaceOps::delete_root`]: all interfaces' root deletes, in one step),
/// then running the rest of each stream as `backend` does (serially or in
/// parallel).
///
/// Why: each new HTB class makes the kernel scan a filter-block list that
/// is global to the machine, so building one interface while another's old
/// tree still exists costs more. Deleting every old tree first is what
/// LibreQoS's combined file does by accident (its first lines are the root
/// deletes); per-interface streams must do it on purpose. An interface whose
/// delete fails is not built (its old tree stays); the others are.
pub fn load_deletes_first(
    backend: &dyn Backend,
    ifaces: &[IfaceOps<'_>],
    progress: &dyn Progress,
) -> LoadReport {
    if ifaces.len() < 2 || !ifaces.iter().any(|i| i.delete_root) {
        return backend.load(ifaces, RootDelete::None, progress);
    }
    let deletes: Vec<IfaceOps> = ifaces
        .iter()
        .filter(|i| i.delete_root)
        .map(|i| IfaceOps::new(i.dev.clone(), Vec::new()).with_delete_root())
        .collect();
    let mut first = backend.load(&deletes, RootDelete::None, progress);
    let builds: Vec<IfaceOps> = ifaces
        .iter()
        .filter(|i| {
            !first
                .interfaces
                .iter()
                .any(|d| d.dev == i.dev && d.error.is_some())
        })
        .map(|i| IfaceOps {
            dev: i.dev.clone(),
            delete_root: false,
            ops: Cow::Borrowed(&i.ops[..]),
            setup_len: i.setup_len,
        })
        .collect();
    let mut second = backend.load(&builds, RootDelete::None, progress);
    let delete_total = first.total;
    let interfaces = ifaces
        .iter()
        .map(|i| {
            let del = first
                .interfaces
                .iter()
                .position(|d| d.dev == i.dev)
                .map(|k| first.interfaces.swap_remove(k));
            let build = second
                .interfaces
                .iter()
                .position(|b| b.dev == i.dev)
                .map(|k| second.interfaces.swap_remove(k));
            let del_applied = del.as_ref().map_or(0, |d| d.ops_applied);
            let del_timing = del.as_ref().and_then(|d| d.timing.or(Some(delete_total)));
            let del_error = del.and_then(|d| d.error);
            // Indexes count the stream as given, hoisted delete included.
            let skip = usize::from(i.delete_root);
            match build.map(|b| shift_op_index(b, skip)) {
                Some(b) => IfaceReport {
                    dev: i.dev.clone(),
                    ops_total: i.len(),
                    ops_applied: del_applied + b.ops_applied,
                    timing: b.timing,
                    root_delete: del_timing,
                    error: del_error.or(b.error),
                },
                None => IfaceReport {
                    dev: i.dev.clone(),
                    ops_total: i.len(),
                    ops_applied: del_applied,
                    timing: None,
                    root_delete: del_timing,
                    error: del_error,
                },
            }
        })
        .collect();
    LoadReport {
        backend: second.backend,
        interfaces,
        total: delete_total + second.total,
    }
}

/// `report` with its failed op's index moved `by` places later (the ops
/// of its stream that were sent in an earlier step).
fn shift_op_index(mut report: IfaceReport, by: usize) -> IfaceReport {
    if let Some(ApplyError::OpFailed { index, .. }) = &mut report.error {
        *index += by;
    }
    report
}

/// Where `iface`'s root delete goes under the load's `placement`: the
/// placement if it adds one, else in-batch if the stream asks for one.
pub(crate) fn delete_placement(iface: &IfaceOps<'_>, placement: RootDelete) -> RootDelete {
    match placement {
        RootDelete::None if iface.delete_root => RootDelete::InBatch,
        p => p,
    }
}

/// The stream actually sent for `iface` under the load's `placement`: the
/// same ops, borrowed, with `delete_root` set when an in-batch root delete
/// goes first (index 0 of [`IfaceOps::op`]).
pub(crate) fn as_sent<'s>(iface: &'s IfaceOps<'_>, placement: RootDelete) -> IfaceOps<'s> {
    IfaceOps {
        dev: iface.dev.clone(),
        delete_root: delete_placement(iface, placement) == RootDelete::InBatch,
        ops: Cow::Borrowed(&iface.ops[..]),
        setup_len: iface.setup_len,
    }
}

/// True for the root delete (`qdisc del dev X root`).
pub(crate) fn is_root_delete(op: &TcOp) -> bool {
    op.is_root_delete()
}

/// The errno the kernel answers a root delete with when there is nothing
/// to delete: `ENOENT`, both when the root is the device's own handle-0
/// default ("Cannot delete qdisc with handle of zero", e.g. `noqueue` on a
/// veth) and when there is no root qdisc at all (`tc_get_qdisc` in
/// `net/sched/sch_api.c`; checked live in `tests/netlink_live.rs`). The
/// root delete sends handle 0, so the kernel's `EINVAL` "Invalid handle"
/// cannot mean "nothing there" and is a real failure.
pub(crate) const NOTHING_TO_DELETE: i32 = libc::ENOENT;

/// True when a failed op only means "nothing to delete": a
/// [`TcOp::DeleteRoot`] answered with [`NOTHING_TO_DELETE`]. The netlink
/// backend passes the kernel's errno; `tc -b` reports only text, so
/// without an errno it is read from the message ([`tc_message_errno`]).
pub(crate) fn root_delete_found_nothing(op: &TcOp, errno: Option<i32>, message: &str) -> bool {
    op.is_root_delete() && errno.or_else(|| tc_message_errno(message)) == Some(NOTHING_TO_DELETE)
}

/// The errno behind a failure that `tc` reported only as text. tc prints
/// the kernel's extended-ACK message when there is one, else `RTNETLINK
/// answers: <strerror>`; only the `ENOENT` answers to a delete are
/// recognised (the rest stays unknown, which is never benign).
pub(crate) fn tc_message_errno(message: &str) -> Option<i32> {
    const ENOENT_TEXTS: [&str; 3] = [
        "No such file or directory",
        "Cannot delete qdisc with handle of zero",
        "Cannot find specified qdisc on specified device",
    ];
    ENOENT_TEXTS
        .iter()
        .any(|t| message.contains(t))
        .then_some(libc::ENOENT)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lqos_tc::ops::{HtbQdisc, Qdisc, QdiscKind};
    use lqos_tc::TcHandle;

    fn build() -> Vec<TcOp> {
        vec![
            TcOp::ReplaceQdisc(Qdisc {
                parent: TcHandle::ROOT,
                handle: TcHandle::new(0x7fff, 0),
                kind: QdiscKind::Mq,
            }),
            TcOp::AddQdisc(Qdisc {
                parent: TcHandle::new(0x7fff, 1),
                handle: TcHandle::new(1, 0),
                kind: QdiscKind::Htb(HtbQdisc {
                    default_minor: 2,
                    r2q: None,
                    direct_qlen: None,
                }),
            }),
        ]
    }

    fn reload_streams() -> Vec<IfaceOps<'static>> {
        ["ens19", "ens20"]
            .map(|dev| IfaceOps::new(dev, build()).with_delete_root())
            .to_vec()
    }

    fn loaded() -> Recording {
        let rec = Recording::new().with_link("ens19", 4).with_link("ens20", 4);
        let full = ["ens19", "ens20"].map(|d| IfaceOps::new(d, build()));
        assert!(rec.load(&full, RootDelete::None, &NoProgress).is_ok());
        rec.clear_sent();
        rec
    }

    #[test]
    fn every_old_tree_is_deleted_before_any_build() {
        let rec = loaded();
        let rep = load_deletes_first(&rec, &reload_streams(), &NoProgress);
        assert!(rep.is_ok(), "{:?}", rep.first_error());
        let sent = rec.sent();
        assert_eq!(sent.len(), 6);
        assert!(sent[..2].iter().all(|(_, op)| is_root_delete(op)));
        assert_eq!((sent[0].0.as_str(), sent[1].0.as_str()), ("ens19", "ens20"));
        assert!(sent[2..].iter().all(|(_, op)| !is_root_delete(op)));
        for i in &rep.interfaces {
            assert_eq!((i.ops_total, i.ops_applied), (3, 3));
        }
        assert_eq!(rec.tree("ens20").unwrap().qdiscs.len(), 2);
    }

    #[test]
    fn an_interface_whose_delete_fails_is_not_built_and_keeps_its_tree() {
        let rec = loaded();
        // ens20 has received 2 ops so far; its 3rd (index 2) is the delete.
        rec.fail_at("ens20", 2, "RTNETLINK answers: Operation not permitted");
        let before = rec.tree("ens20").unwrap();
        let rep = load_deletes_first(&rec, &reload_streams(), &NoProgress);
        let (a, b) = (&rep.interfaces[0], &rep.interfaces[1]);
        assert!(a.error.is_none() && a.ops_applied == 3);
        assert!(b.error.is_some() && b.ops_applied == 0, "{b:?}");
        assert!(rec.sent_for("ens20").iter().all(is_root_delete));
        assert_eq!(rec.tree("ens20").unwrap(), before);
    }

    #[test]
    fn a_failed_build_op_is_indexed_in_the_stream_as_given() {
        let rec = loaded();
        // ens19 has received 2 ops; after its hoisted delete (index 2) the
        // build's second op is its 4th overall, index 2 of the given stream.
        rec.fail_at("ens19", 4, "Specified class not found");
        let rep = load_deletes_first(&rec, &reload_streams(), &NoProgress);
        match &rep.interfaces[0].error {
            Some(ApplyError::OpFailed { index, .. }) => assert_eq!(*index, 2),
            e => panic!("{e:?}"),
        }
        assert!(rep.interfaces[1].error.is_none());
    }

    #[test]
    fn only_a_root_delete_answered_enoent_is_benign() {
        let found_nothing = |op: &TcOp, e| root_delete_found_nothing(op, Some(e), "");
        assert!(found_nothing(&TcOp::DeleteRoot, libc::ENOENT));
        assert!(!found_nothing(&TcOp::DeleteRoot, libc::EINVAL));
        assert!(!found_nothing(&TcOp::DeleteRoot, libc::EPERM));
        let leaf = TcOp::DeleteQdisc {
            parent: TcHandle::new(1, 3),
            handle: TcHandle::new(3, 0),
        };
        assert!(!found_nothing(&leaf, libc::ENOENT));
        // The errno wins over the text.
        let text = "Error: Cannot delete qdisc with handle of zero.";
        assert!(root_delete_found_nothing(&TcOp::DeleteRoot, None, text));
        assert!(!root_delete_found_nothing(
            &TcOp::DeleteRoot,
            Some(libc::EPERM),
            text
        ));
        // What tc prints for the kernel's ENOENT, with and without ext-ack.
        for m in [
            "Error: Cannot delete qdisc with handle of zero.",
            "RTNETLINK answers: No such file or directory",
        ] {
            assert_eq!(tc_message_errno(m), Some(libc::ENOENT), "{m}");
        }
        assert_eq!(tc_message_errno("Error: Invalid handle."), None);
        assert_eq!(
            tc_message_errno("RTNETLINK answers: Operation not permitted"),
            None
        );
    }

    #[test]
    fn a_full_build_borrows_the_plan_and_its_setup_length() {
        let g = lqos_model::generate(&lqos_model::GenParams::with_circuits(20));
        let plan =
            lqos_tc::plan(&g.network, &lqos_tc::PlanConfig::bridge("a", "b", 2), None).unwrap();
        let s = IfaceOps::from_plan(&plan.interfaces[0]);
        assert!(matches!(s.ops, Cow::Borrowed(_)));
        assert!(std::ptr::eq(&s.ops[..], &plan.interfaces[0].ops[..]));
        assert_eq!(s.setup_len, plan.interfaces[0].setup_ops);
        let s = s.with_delete_root();
        assert_eq!(s.len(), plan.interfaces[0].ops.len() + 1);
        assert_eq!(s.op(0).as_deref(), Some(&TcOp::delete_root()));
        assert_eq!(s.sent().count(), s.len());
        assert_eq!(s.summary().removed, 1);
    }

    #[test]
    fn a_streams_own_root_delete_is_sent_first_in_its_batch() {
        let rec = loaded();
        let one = [IfaceOps::new("ens19", build()).with_delete_root()];
        let rep = rec.load(&one, RootDelete::None, &NoProgress);
        assert!(rep.is_ok(), "{:?}", rep.first_error());
        assert_eq!(rep.interfaces[0].ops_total, 3);
        let sent = rec.sent_for("ens19");
        assert!(is_root_delete(&sent[0]) && sent[1..] == build()[..]);
    }

    #[test]
    fn streams_without_a_leading_delete_go_straight_through() {
        let rec = loaded();
        let diff = ["ens19", "ens20"].map(|d| IfaceOps::new(d, Vec::new()));
        let rep = load_deletes_first(&rec, &diff, &NoProgress);
        assert!(rep.is_ok());
        assert!(rec.sent().is_empty());
    }
}
