//! The load methods of the bench, run against a scratch namespace.
//!
//! Every method starts from the base tree fully loaded (as a reload on a
//! running shaper does) and leaves it loaded again, so methods can run in
//! any order and be repeated. Full reloads include the root delete of the
//! old tree; method 9 times that teardown alone.

use std::cell::Cell;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use lqos_apply::backend::{
    load_deletes_first, Backend, IfaceOps, NetlinkBackend, NoProgress, Parallelism, Progress,
    RootDelete, TcBatch, TcMode,
};
use lqos_apply::live::{read_live, NetlinkLive};
use lqos_apply::load::plan_change;
use lqos_apply::timing::Timing;
use lqos_apply::timing::{CpuScope, Stopwatch};
use lqos_tc::{InterfacePlan, TcOp};
use serde::Serialize;

use crate::error::{BenchError, Result};
use crate::stats::Sample;

/// A load method, numbered as in issue 526's reproduction (docs/benchmarks.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum Method {
    /// 1: `tc -b` of each interface's file on its own (one row per interface).
    TcEachAlone,
    /// 2: `tc -b` of one combined file in LibreQoS.py's line order (the
    /// baseline): root deletes as their own `tc` commands first (as
    /// LibreQoS's `clearPriorSettings`), then both setups, then per node
    /// depth-first its class on A and on B, per circuit class A, leaf A,
    /// class B, leaf B (the planner's locality order, interleaved).
    TcCombined,
    /// 3a: per-interface files one after another, root delete outside the batch.
    TcSerialRootOutside,
    /// 3b: per-interface files one after another, root delete inside the batch.
    TcSerialRootInside,
    /// 4: per-interface files in parallel.
    TcParallel,
    /// 5: netlink, one interface after another, all old trees deleted first.
    NetlinkSerial,
    /// 6: netlink, one worker per interface, all old trees deleted first.
    NetlinkParallel,
    /// 5p: the front end's full reload as a whole process (parse the
    /// inputs, plan, delete and rebuild both trees over netlink, save the
    /// state): [`ApplyCommand`] with its `full` arguments.
    ApplyProcessFull,
    /// 7: incremental reload with no change (readback + diff + send).
    IncrementalNoChange,
    /// 7p: the front end's reload with nothing changed, as a whole process
    /// (parse the inputs, plan, read both trees back, diff, send nothing).
    ApplyProcessNoChange,
    /// 8: incremental reload with 1% of circuits changed in rate.
    IncrementalChanged,
    /// 9: full teardown (root delete of both interfaces).
    Teardown,
}

impl Method {
    /// All methods, in table order.
    pub const ALL: [Method; 12] = [
        Method::TcEachAlone,
        Method::TcCombined,
        Method::TcSerialRootOutside,
        Method::TcSerialRootInside,
        Method::TcParallel,
        Method::NetlinkSerial,
        Method::NetlinkParallel,
        Method::ApplyProcessFull,
        Method::IncrementalNoChange,
        Method::ApplyProcessNoChange,
        Method::IncrementalChanged,
        Method::Teardown,
    ];

    /// The method's number in the table ("1", "3a", ...).
    pub fn id(self) -> &'static str {
        match self {
            Method::TcEachAlone => "1",
            Method::TcCombined => "2",
            Method::TcSerialRootOutside => "3a",
            Method::TcSerialRootInside => "3b",
            Method::TcParallel => "4",
            Method::NetlinkSerial => "5",
            Method::NetlinkParallel => "6",
            Method::ApplyProcessFull => "5p",
            Method::IncrementalNoChange => "7",
            Method::ApplyProcessNoChange => "7p",
            Method::IncrementalChanged => "8",
            Method::Teardown => "9",
        }
    }

    /// A short description.
    pub fn name(self) -> &'static str {
        match self {
            Method::TcEachAlone => "tc -b, one interface alone",
            Method::TcCombined => "tc -b, combined file, LibreQoS.py order",
            Method::TcSerialRootOutside => "tc -b per iface, serial, root del outside",
            Method::TcSerialRootInside => "tc -b per iface, serial, root del inside",
            Method::TcParallel => "tc -b per iface, parallel",
            Method::NetlinkSerial => "netlink, serial (old trees deleted first)",
            Method::NetlinkParallel => "netlink, parallel (old trees deleted first)",
            Method::ApplyProcessFull => "full reload, whole process",
            Method::IncrementalNoChange => "incremental reload, no change",
            Method::ApplyProcessNoChange => "reload, no change, whole process",
            Method::IncrementalChanged => "incremental reload, 1% changed",
            Method::Teardown => "teardown (root delete)",
        }
    }

    /// The quick default set: issue 526's question (1, 2, 4), the netlink
    /// loader (5), and full vs no-op reloads in-process and as whole
    /// processes (5p, 7, 7p, 8).
    pub const QUICK: [Method; 8] = [
        Method::TcEachAlone,
        Method::TcCombined,
        Method::TcParallel,
        Method::NetlinkSerial,
        Method::ApplyProcessFull,
        Method::IncrementalNoChange,
        Method::ApplyProcessNoChange,
        Method::IncrementalChanged,
    ];

    /// True for the methods that run the front end's reload as a process
    /// (they need [`Runner::with_apply_command`]).
    pub fn is_process(self) -> bool {
        matches!(
            self,
            Method::ApplyProcessFull | Method::ApplyProcessNoChange
        )
    }

    /// Parses a method id (`"1"`, `"3a"`, ...).
    pub fn from_id(id: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|m| m.id() == id)
    }
}

/// One measured row: method, what exactly was timed, and the sample.
#[derive(Debug, Clone, Serialize)]
pub struct Measured {
    /// The method.
    pub method: Method,
    /// Row label (the method name, plus the interface for method 1).
    pub label: String,
    /// The run's timing.
    pub sample: Sample,
}

/// A tree to benchmark: the base plan's targets, and the same plan with
/// 1% of circuits changed in rate (for method 8).
#[derive(Debug, Clone)]
pub struct BenchTree {
    /// Circuits in the tree.
    pub circuits: usize,
    /// Full builds of the base plan, one per interface.
    pub base: Vec<InterfacePlan>,
    /// Full builds of the changed plan, same interfaces and order.
    pub changed: Vec<InterfacePlan>,
    /// The base plan's op streams as loaders take them.
    pub base_ops: Vec<IfaceOps<'static>>,
    /// `base_ops`, each starting with its root delete (a full reload).
    pub reload_ops: Vec<IfaceOps<'static>>,
}

impl BenchTree {
    fn devs(&self) -> Vec<&str> {
        self.base.iter().map(|t| t.dev.as_str()).collect()
    }
}

/// How to run the front end's reload as a process on the bench's tree:
/// the program and the arguments that make it plan exactly the bench's
/// base tree (inputs, queues, leaf qdisc, strategy, namespace, state
/// directory) and load it, and the arguments that make that load a full
/// rebuild.
#[derive(Debug, Clone)]
pub struct ApplyCommand {
    /// The executable.
    pub program: PathBuf,
    /// Its arguments for a reload (incremental: nothing is sent when
    /// nothing changed).
    pub args: Vec<OsString>,
    /// The arguments added for a full rebuild.
    pub full: Vec<OsString>,
}

/// Runs methods in one network namespace.
#[derive(Debug)]
pub struct Runner {
    netns: Option<String>,
    live: NetlinkLive,
    apply: Option<ApplyCommand>,
    primed: Cell<bool>,
}

impl Runner {
    /// A runner for the interfaces of namespace `netns`.
    pub fn new(netns: &str) -> Runner {
        Runner::in_netns(Some(netns))
    }

    /// A runner for existing interfaces: of namespace `netns`, or of the
    /// current namespace (existing interfaces).
    pub fn in_netns(netns: Option<&str>) -> Runner {
        Runner {
            netns: netns.map(str::to_string),
            live: NetlinkLive::new(netns.map(str::to_string)),
            apply: None,
            primed: Cell::new(false),
        }
    }

    /// Enables the whole-process methods (5p, 7p) with this command.
    pub fn with_apply_command(mut self, cmd: ApplyCommand) -> Runner {
        self.apply = Some(cmd);
        self
    }

    /// Runs the reload command (with `full`, its full-rebuild arguments)
    /// once, timed as a whole child process.
    fn apply_process(&self, method: Method, full: bool) -> Result<Timing> {
        let cmd = self.apply.as_ref().ok_or(BenchError::NoApplyCommand {
            method: method.id(),
        })?;
        let sw = Stopwatch::start(CpuScope::Children);
        let extra: &[OsString] = if full { &cmd.full } else { &[] };
        let out = Command::new(&cmd.program)
            .args(&cmd.args)
            .args(extra)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| BenchError::Process {
                command: describe(cmd, extra),
                message: e.to_string(),
            })?;
        let t = sw.stop();
        if !out.status.success() {
            return Err(BenchError::Process {
                command: describe(cmd, extra),
                message: format!(
                    "{}: {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
            });
        }
        Ok(t)
    }

    /// The first whole-process run saves the state the front end keeps; do
    /// that once, untimed, so every timed run sees a warm state directory.
    fn prime(&self, method: Method) -> Result<()> {
        if !self.primed.get() {
            self.apply_process(method, false)?;
            self.primed.set(true);
        }
        Ok(())
    }

    fn tc(&self, mode: TcMode) -> TcBatch {
        TcBatch::new(self.netns.clone(), mode)
    }

    fn netlink(&self, p: Parallelism) -> NetlinkBackend {
        NetlinkBackend::new(self.netns.clone(), p)
    }

    /// Runs one load and turns its report into a sample, failing on any
    /// op error.
    fn timed_load(
        &self,
        backend: &dyn Backend,
        ifaces: &[IfaceOps],
        root_delete: RootDelete,
        progress: &dyn Progress,
    ) -> Result<Sample> {
        let sw = Stopwatch::start(CpuScope::ProcessAndChildren);
        let rep = backend.load(ifaces, root_delete, progress);
        let ops = rep.interfaces.iter().map(|i| i.ops_total).sum::<usize>()
            + if root_delete == RootDelete::Separate {
                ifaces.len()
            } else {
                0
            };
        let sample = Sample::new(sw.stop(), ops);
        rep.into_result()?;
        Ok(sample)
    }

    /// A full reload as the front end's full rebuild does it: every old tree
    /// deleted first, then the builds ([`load_deletes_first`]).
    fn timed_reload(
        &self,
        backend: &dyn Backend,
        reload: &[IfaceOps],
        progress: &dyn Progress,
    ) -> Result<Sample> {
        let sw = Stopwatch::start(CpuScope::ProcessAndChildren);
        let rep = load_deletes_first(backend, reload, progress);
        let ops = rep.interfaces.iter().map(|i| i.ops_total).sum::<usize>();
        let sample = Sample::new(sw.stop(), ops);
        rep.into_result()?;
        Ok(sample)
    }

    /// Makes the live trees equal `targets` (incremental, untimed).
    pub fn converge(&self, targets: &[InterfacePlan]) -> Result<usize> {
        self.sync_to(targets, &NoProgress)
    }

    /// What a reload does by default: read the live trees back, diff
    /// them against `targets`, and send only the difference (nothing when
    /// there is none) with the serial netlink loader. Returns the ops sent.
    fn sync_to(&self, targets: &[InterfacePlan], progress: &dyn Progress) -> Result<usize> {
        let devs: Vec<&str> = targets.iter().map(|t| t.dev.as_str()).collect();
        let live = read_live(&self.live, &devs)?;
        let ifaces: Vec<IfaceOps> = targets
            .iter()
            .map(|t| plan_change(t, &live[&t.dev], false).stream)
            .collect();
        let ops = ifaces.iter().map(IfaceOps::len).sum();
        if ops > 0 {
            self.netlink(Parallelism::Serial)
                .load(&ifaces, RootDelete::None, progress)
                .into_result()?;
        }
        Ok(ops)
    }

    /// Checks that the live trees have exactly the classes and qdiscs of
    /// `targets` (same handles), so a method that silently loaded nothing
    /// cannot look fast.
    pub fn check_loaded(&self, targets: &[InterfacePlan]) -> Result<()> {
        self.check_loaded_after("bench check", targets)
    }

    fn check_loaded_after(&self, method: &str, targets: &[InterfacePlan]) -> Result<()> {
        let devs: Vec<&str> = targets.iter().map(|t| t.dev.as_str()).collect();
        let live = read_live(&self.live, &devs)?;
        for t in targets {
            let want = t.tree();
            let got = &live[&t.dev];
            let planned_classes = want.classes.len();
            let live_classes = got.classes.len();
            let qdiscs_missing = want
                .qdiscs
                .keys()
                .filter(|h| !got.qdiscs.contains_key(h))
                .count();
            if live_classes != planned_classes || qdiscs_missing != 0 {
                return Err(BenchError::NotLoaded {
                    method: method.to_string(),
                    dev: t.dev.clone(),
                    live_classes,
                    planned_classes,
                    qdiscs_missing,
                });
            }
        }
        Ok(())
    }

    /// Runs `method` once on `tree` (which must be loaded) and leaves the
    /// base tree loaded.
    pub fn run(
        &self,
        tree: &BenchTree,
        method: Method,
        progress: &dyn Progress,
    ) -> Result<Vec<Measured>> {
        let row = |sample| {
            vec![Measured {
                method,
                label: method.name().to_string(),
                sample,
            }]
        };
        let base = &tree.base_ops;
        let rows = match method {
            Method::TcEachAlone => {
                let mut rows = Vec::new();
                for iface in base {
                    let sample = self.timed_load(
                        &self.tc(TcMode::Serial),
                        std::slice::from_ref(iface),
                        RootDelete::InBatch,
                        progress,
                    )?;
                    rows.push(Measured {
                        method,
                        label: format!("tc -b, {} alone", iface.dev),
                        sample,
                    });
                }
                rows
            }
            Method::TcCombined => row(self.timed_load(
                &self.tc(TcMode::Combined),
                base,
                RootDelete::Separate,
                progress,
            )?),
            Method::TcSerialRootOutside => row(self.timed_load(
                &self.tc(TcMode::Serial),
                base,
                RootDelete::Separate,
                progress,
            )?),
            Method::TcSerialRootInside => row(self.timed_load(
                &self.tc(TcMode::Serial),
                base,
                RootDelete::InBatch,
                progress,
            )?),
            Method::TcParallel => row(self.timed_load(
                &self.tc(TcMode::Parallel),
                base,
                RootDelete::InBatch,
                progress,
            )?),
            Method::NetlinkSerial => row(self.timed_reload(
                &self.netlink(Parallelism::Serial),
                &tree.reload_ops,
                progress,
            )?),
            Method::NetlinkParallel => row(self.timed_reload(
                &self.netlink(Parallelism::Parallel),
                &tree.reload_ops,
                progress,
            )?),
            Method::ApplyProcessFull => {
                self.prime(method)?;
                let t = self.apply_process(method, true)?;
                let ops = tree.reload_ops.iter().map(IfaceOps::len).sum();
                row(Sample::new(t, ops))
            }
            Method::ApplyProcessNoChange => {
                self.prime(method)?;
                row(Sample::new(self.apply_process(method, false)?, 0))
            }
            Method::IncrementalNoChange => row(self.incremental(&tree.base, progress)?),
            Method::IncrementalChanged => {
                let s = self.incremental(&tree.changed, progress)?;
                self.check_loaded_after(method.name(), &tree.changed)?;
                self.converge(&tree.base)?;
                row(s)
            }
            Method::Teardown => {
                let dels: Vec<IfaceOps> = tree
                    .devs()
                    .into_iter()
                    .map(|d| IfaceOps::new(d, vec![TcOp::delete_root()]))
                    .collect();
                let s = self.timed_load(
                    &self.netlink(Parallelism::Serial),
                    &dels,
                    RootDelete::None,
                    progress,
                )?;
                self.netlink(Parallelism::Parallel)
                    .load(base, RootDelete::None, &NoProgress)
                    .into_result()?;
                row(s)
            }
        };
        self.check_loaded_after(method.name(), &tree.base)?;
        Ok(rows)
    }

    /// Readback + diff + send of the difference to `targets`, timed as one.
    fn incremental(&self, targets: &[InterfacePlan], progress: &dyn Progress) -> Result<Sample> {
        let sw = Stopwatch::start(CpuScope::ProcessAndChildren);
        let ops = self.sync_to(targets, progress)?;
        Ok(Sample::new(sw.stop(), ops))
    }
}

impl BenchTree {
    /// Plans `net` with `cfg`, and the same network with every 100th
    /// circuit's ceilings raised by 10% (classids kept stable through the
    /// base plan's allocation).
    pub fn plan(net: &lqos_model::Network, cfg: &lqos_tc::PlanConfig) -> Result<BenchTree> {
        let base = lqos_tc::plan(net, cfg, None)?;
        let changed_net = one_percent_changed(net);
        let changed = lqos_tc::plan(&changed_net, cfg, Some(&base.allocation))?;
        let base_ops: Vec<IfaceOps<'static>> = IfaceOps::all_from_plan(&base)
            .into_iter()
            .map(IfaceOps::into_owned)
            .collect();
        Ok(BenchTree {
            circuits: net.circuits().len(),
            reload_ops: base_ops
                .iter()
                .cloned()
                .map(IfaceOps::with_delete_root)
                .collect(),
            base_ops,
            base: base.interfaces,
            changed: changed.interfaces,
        })
    }
}

fn describe(cmd: &ApplyCommand, extra: &[OsString]) -> String {
    let mut s = cmd.program.display().to_string();
    for a in cmd.args.iter().chain(extra) {
        s += " ";
        s += &a.to_string_lossy();
    }
    s
}

/// `net` with every 100th circuit's download and upload ceilings raised by
/// 10% (at least 1 Mbps): a 1% rate change.
pub fn one_percent_changed(net: &lqos_model::Network) -> lqos_model::Network {
    use lqos_model::Rate;
    let bump = |r: Rate| Rate::from_bps(r.bps() + (r.bps() / 10).max(1_000_000));
    let mut changed = net.clone();
    let circuits = net
        .circuits()
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let mut c = c.clone();
            if i % 100 == 0 {
                c.download_max = bump(c.download_max);
                c.upload_max = bump(c.upload_max);
            }
            c
        })
        .collect();
    changed.set_circuits(circuits);
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_percent_means_every_hundredth_circuit() {
        let g = lqos_model::generate(&lqos_model::GenParams::with_circuits(1000));
        let changed = one_percent_changed(&g.network);
        let differing = g
            .network
            .circuits()
            .iter()
            .zip(changed.circuits())
            .filter(|(a, b)| a != b)
            .count();
        assert_eq!(differing, 10);
    }

    #[test]
    fn method_ids_round_trip() {
        for m in Method::ALL {
            assert_eq!(Method::from_id(m.id()), Some(m));
        }
        assert_eq!(Method::from_id("10"), None);
    }

    #[test]
    fn changed_tree_differs_only_in_class_changes() {
        let g = lqos_model::generate(&lqos_model::GenParams::with_circuits(500));
        let mut cfg = lqos_tc::PlanConfig::bridge("ens19", "ens20", 4);
        cfg.default_sqm = "pfifo".parse().unwrap();
        let t = BenchTree::plan(&g.network, &cfg).unwrap();
        for (b, c) in t.base.iter().zip(&t.changed) {
            let ops = lqos_tc::diff(&b.tree(), &c.tree());
            assert!(!ops.is_empty());
            assert!(
                ops.iter().all(|o| matches!(o, TcOp::ChangeClass(_))),
                "{ops:?}"
            );
        }
    }
}
