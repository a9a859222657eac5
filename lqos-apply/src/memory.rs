//! The memory preflight: refuse a load whose leaf qdiscs the kernel's
//! memory cannot hold, before anything is changed.
//!
//! A cake leaf takes about 1 MiB of kernel memory; a full load of cake
//! leaves that does not fit runs the kernel out of memory in the middle of
//! the load (the OOM killer, or a box that stops answering). The estimate
//! of what a load adds is pure ([`lqos_tc::memory`]); this module reads
//! `/proc/meminfo` and compares: a load is refused when it adds more than
//! `MemAvailable` minus a margin ([`MemInfo::margin`]).

use lqos_tc::memory::{estimate_ops, qdisc_bytes, MemoryEstimate, HTB_CLASS_BYTES};
use lqos_tc::tree::TcTree;
use lqos_tc::TcOp;

use crate::backend::IfaceOps;
use crate::error::{ApplyError, Result};
pub use crate::meminfo::MemInfo;

/// An upper bound of what `ops` create (every qdisc and class counted as
/// new), without looking at the live tree: cheap, for the common case of a
/// small change.
fn created_upper_bound<'o>(ops: impl IntoIterator<Item = &'o TcOp>) -> u64 {
    ops.into_iter()
        .map(|op| match op {
            TcOp::AddQdisc(q) | TcOp::ReplaceQdisc(q) => qdisc_bytes(&q.kind),
            TcOp::AddClass(_) => HTB_CLASS_BYTES,
            _ => 0,
        })
        .sum()
}

/// Checks that loading `streams` onto the `live` trees (one per stream, in
/// order) fits in memory: `Ok(None)` when it trivially does (nothing is
/// created, or what it could create at most fits, or `mem` answers `None`;
/// `mem` is only asked when something is created),
/// `Ok(Some(estimate))` when it fits by the estimate,
/// [`ApplyError::NotEnoughMemory`] when it does not.
pub fn check_memory(
    streams: &[IfaceOps<'_>],
    live: &[&TcTree],
    mem: impl FnOnce() -> Option<MemInfo>,
) -> Result<Option<MemoryEstimate>> {
    let upper: u64 = streams.iter().map(|s| created_upper_bound(&*s.ops)).sum();
    if upper == 0 {
        return Ok(None);
    }
    let Some(mem) = mem() else { return Ok(None) };
    if upper <= mem.usable() {
        return Ok(None);
    }
    let empty = TcTree::default();
    let mut est = MemoryEstimate::default();
    for (i, s) in streams.iter().enumerate() {
        let tree = live.get(i).copied().unwrap_or(&empty);
        est.merge(&estimate_ops(
            tree,
            s.sent().collect::<Vec<_>>().iter().map(|c| &**c),
        ));
    }
    let needed = est.net_bytes().max(0) as u64;
    if needed > mem.usable() {
        return Err(ApplyError::NotEnoughMemory {
            estimate: Box::new(est),
            needed,
            mem,
        });
    }
    Ok(Some(est))
}

#[cfg(test)]
mod tests {
    use super::*;
    use lqos_tc::memory::CAKE_BYTES;

    const MIB: u64 = 1 << 20;

    const MEMINFO: &str = "MemTotal:        6080276 kB\nMemFree:         5900000 kB\nMemAvailable:    5855440 kB\nBuffers:               0 kB\n";

    fn plan(circuits: usize, sqm: &str) -> lqos_tc::Plan {
        crate::test_fixtures::bridge_plan(circuits, 1, sqm).1
    }

    #[test]
    fn refuses_what_does_not_fit_and_passes_what_does() {
        let p = plan(1000, "cake diffserv4");
        let streams = IfaceOps::all_from_plan(&p);
        let empty = TcTree::default();
        let live = [&empty, &empty];
        // ~2,000 cake leaves (~2 GiB) into a 2 GiB machine: refused.
        let small = MemInfo {
            total: 2048 * MIB,
            available: 1800 * MIB,
        };
        let e = check_memory(&streams, &live, || Some(small)).unwrap_err();
        let ApplyError::NotEnoughMemory {
            estimate, needed, ..
        } = &e
        else {
            panic!("{e}")
        };
        assert!(estimate.leaves_created() >= 2000, "{}", estimate.describe());
        assert!(*needed > 1900 * CAKE_BYTES, "{needed}");
        let msg = e.to_string();
        for want in [
            "new leaf qdiscs",
            "cake x 1.04 MiB",
            "MemAvailable 1.8 GiB",
            "256 MiB",
            "Nothing was changed",
        ] {
            assert!(msg.contains(want), "{want:?} not in {msg}");
        }
        // Facts only: the CLI adds the flags that help (lqos-cli's hints).
        assert!(!msg.contains("--"), "{msg}");
        // The same into the lab's 6 GiB guest: fits (without an exact
        // estimate: even counting every op as new it fits).
        let big = MemInfo::parse(MEMINFO).unwrap();
        assert!(*needed < big.usable());
        assert_eq!(check_memory(&streams, &live, || Some(big)).unwrap(), None);
        // Nothing created (a no-op reload): memory is not even read.
        let noop = [IfaceOps::new("ens19", Vec::new())];
        let unasked = || -> Option<MemInfo> { panic!("meminfo read for a no-op") };
        assert_eq!(check_memory(&noop, &live, unasked).unwrap(), None);
        // Unknown memory: not checked.
        assert_eq!(check_memory(&streams, &live, || None).unwrap(), None);
        // pfifo leaves fit anywhere.
        let p = plan(1000, "pfifo");
        let streams = IfaceOps::all_from_plan(&p);
        assert_eq!(check_memory(&streams, &live, || Some(small)).unwrap(), None);
    }

    #[test]
    fn a_rebuild_over_the_loaded_tree_frees_what_it_recreates() {
        let p = plan(1000, "cake diffserv4");
        let trees: Vec<TcTree> = p.interfaces.iter().map(|ip| ip.tree()).collect();
        let live: Vec<&TcTree> = trees.iter().collect();
        let streams: Vec<IfaceOps> = IfaceOps::all_from_plan(&p)
            .into_iter()
            .map(IfaceOps::with_delete_root)
            .collect();
        // The tree takes the machine's memory; rebuilding it adds nothing.
        let loaded = MemInfo {
            total: 2500 * MIB,
            available: 300 * MIB,
        };
        let est = check_memory(&streams, &live, || Some(loaded))
            .unwrap()
            .unwrap();
        assert_eq!(est.net_bytes(), 0);
        // Adding the leaves one by one to the idle tree of lazy leaves: the
        // same memory as the full build.
        let lazy = lqos_tc::rules::lazy_plan(&p, &Default::default());
        let lazy_trees: Vec<TcTree> = lazy.interfaces.iter().map(|ip| ip.tree()).collect();
        let adds: Vec<IfaceOps> = p
            .interfaces
            .iter()
            .map(|ip| {
                IfaceOps::new(
                    ip.dev.clone(),
                    lqos_tc::rules::circuit_leaves(ip)
                        .map(|q| TcOp::ReplaceQdisc(q.clone()))
                        .collect::<Vec<_>>(),
                )
            })
            .collect();
        let e = check_memory(&adds, &lazy_trees.iter().collect::<Vec<_>>(), || {
            Some(loaded)
        })
        .unwrap_err();
        assert!(matches!(e, ApplyError::NotEnoughMemory { .. }), "{e}");
    }
}
