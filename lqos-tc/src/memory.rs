//! Kernel memory estimates: what the qdiscs and classes an op stream
//! creates (and frees) cost the kernel.
//!
//! A cake leaf allocates its 8 tins of 1,024 flows up front (whatever the
//! diffserv mode): about 1 MiB of unswappable kernel memory per circuit and
//! direction, so a full load of a large tree with cake everywhere can take
//! more memory than the machine has, and the kernel then runs out of memory
//! (the OOM killer, or a dead box) in the middle of the load. The costs
//! below were measured in the stock-kernel lab (Linux 6.1, x86_64,
//! `lab/memory.sh` and `lab/lazy.sh`: `MemFree` before and after loading
//! thousands of objects, caches dropped); other kernels and architectures
//! differ by some percent, which the caller's margin absorbs.
//!
//! ```
//! use lqos_tc::memory::{estimate_ops, CAKE_BYTES};
//! use lqos_tc::{TcHandle, TcOp};
//! use lqos_tc::ops::{Qdisc, QdiscKind};
//! use lqos_tc::tree::TcTree;
//!
//! let leaf = |minor| TcOp::AddQdisc(Qdisc {
//!     parent: TcHandle::new(1, minor),
//!     handle: TcHandle::new(0x100 + minor, 0),
//!     kind: QdiscKind::Cake(Default::default()),
//! });
//! let e = estimate_ops(&TcTree::default(), &[leaf(3), leaf(4)]);
//! assert_eq!(e.leaves_created(), 2);
//! assert_eq!(e.net_bytes(), 2 * CAKE_BYTES as i64);
//! ```

use std::collections::{BTreeMap, HashMap};

use crate::filter::CLSACT_PARENT;
use crate::handle::TcHandle;
use crate::op::TcOp;
use crate::ops::QdiscKind;
use crate::tree::TcTree;

const KIB: u64 = 1024;

/// Kernel memory of one `cake` instance (measured: 1,060-1,064 KiB per
/// leaf in the lab; `cake_init` allocates 8 tins x 1,024 flows whatever
/// the diffserv mode).
pub const CAKE_BYTES: u64 = 1_064 * KIB;

/// Kernel memory of one `fq_codel` instance with the default 1,024 flows
/// (measured: 68-69 KiB; its flow table and backlogs scale with `flows`,
/// see [`FQ_CODEL_BYTES_PER_FLOW`]).
pub const FQ_CODEL_BYTES: u64 = 69 * KIB;

/// Per flow of an `fq_codel` (a flow struct and a backlog counter, 68
/// bytes); the rest of [`FQ_CODEL_BYTES`] is fixed.
pub const FQ_CODEL_BYTES_PER_FLOW: u64 = 68;

/// Kernel memory of one HTB class with the default pfifo HTB gives a leaf
/// class (measured from trees without circuit leaves: 3.3-3.8 KiB per
/// class; rounded up).
pub const HTB_CLASS_BYTES: u64 = 4 * KIB;

/// Any other qdisc (pfifo, bfifo, HTB, mq, clsact): too small to measure
/// next to the classes (pfifo: under 3 KiB per leaf, below the method's
/// resolution); counted at 1 KiB.
pub const SMALL_QDISC_BYTES: u64 = KIB;

/// Estimated kernel memory of one qdisc of `kind`.
pub fn qdisc_bytes(kind: &QdiscKind) -> u64 {
    match kind {
        QdiscKind::Cake(_) => CAKE_BYTES,
        QdiscKind::FqCodel(p) => match p.flows {
            None => FQ_CODEL_BYTES,
            Some(f) => {
                FQ_CODEL_BYTES - 1_024 * FQ_CODEL_BYTES_PER_FLOW
                    + u64::from(f) * FQ_CODEL_BYTES_PER_FLOW
            }
        },
        _ => SMALL_QDISC_BYTES,
    }
}

/// `bytes` for people: `4.1 GiB`, `281 MiB`, `69 KiB`.
pub fn human_bytes(bytes: u64) -> String {
    const MIB: u64 = KIB * KIB;
    if bytes >= 10 * KIB * MIB {
        format!("{:.0} GiB", bytes as f64 / (KIB * MIB) as f64)
    } else if bytes >= KIB * MIB {
        format!("{:.1} GiB", bytes as f64 / (KIB * MIB) as f64)
    } else if bytes >= 10 * MIB {
        format!("{:.0} MiB", bytes as f64 / MIB as f64)
    } else if bytes >= MIB {
        format!("{:.2} MiB", bytes as f64 / MIB as f64)
    } else {
        format!("{} KiB", bytes.div_ceil(KIB))
    }
}

/// What an op stream does to kernel memory, by the costs of this module.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MemoryEstimate {
    /// Qdiscs the stream creates, by kind name: (count, bytes).
    pub created: BTreeMap<String, (usize, u64)>,
    /// HTB classes the stream creates.
    pub classes_created: usize,
    /// Bytes of everything created.
    pub created_bytes: u64,
    /// Bytes of everything the stream deletes (a root delete frees the
    /// whole tree under the root).
    pub freed_bytes: u64,
}

impl MemoryEstimate {
    /// Created minus freed: what the kernel holds more (or less, when
    /// negative) once the stream is loaded.
    pub fn net_bytes(&self) -> i64 {
        self.created_bytes as i64 - self.freed_bytes as i64
    }

    /// Costly leaf qdiscs (cake, fq_codel) created.
    pub fn leaves_created(&self) -> usize {
        self.created
            .iter()
            .filter(|(k, _)| matches!(k.as_str(), "cake" | "fq_codel"))
            .map(|(_, (n, _))| n)
            .sum()
    }

    /// Adds `other` (another interface's stream) to this one.
    pub fn merge(&mut self, other: &MemoryEstimate) {
        for (k, (n, b)) in &other.created {
            let e = self.created.entry(k.clone()).or_default();
            e.0 += n;
            e.1 += b;
        }
        self.classes_created += other.classes_created;
        self.created_bytes += other.created_bytes;
        self.freed_bytes += other.freed_bytes;
    }

    /// The created objects for people: `3965 cake x 1.04 MiB (4.0 GiB), 67
    /// fq_codel x 69 KiB (5 MiB), 4288 HTB classes x 4 KiB (17 MiB)`; small
    /// qdiscs are left out.
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = self
            .created
            .iter()
            .filter(|(k, _)| matches!(k.as_str(), "cake" | "fq_codel"))
            .map(|(k, (n, b))| {
                let each = human_bytes(b / (*n).max(1) as u64);
                format!("{n} {k} x {each} ({})", human_bytes(*b))
            })
            .collect();
        if self.classes_created > 0 {
            parts.push(format!(
                "{} HTB classes x {} ({})",
                self.classes_created,
                human_bytes(HTB_CLASS_BYTES),
                human_bytes(self.classes_created as u64 * HTB_CLASS_BYTES)
            ));
        }
        if parts.is_empty() {
            "no costly objects".into()
        } else {
            parts.join(", ")
        }
    }
}

/// The estimate of loading `ops` (as sent, a root delete included as
/// [`TcOp::DeleteRoot`]) onto `live`: objects the ops create that are not
/// there yet count, objects they delete count as freed (a class delete
/// frees its leaf qdisc too; a root delete frees the whole tree under the
/// root, but not `clsact`), a `qdisc replace` of a live qdisc of the same
/// kind changes it in place (no new memory), of another kind swaps the
/// cost. Filters are not counted (a flower filter is a few hundred bytes).
pub fn estimate_ops<'o>(live: &TcTree, ops: impl IntoIterator<Item = &'o TcOp>) -> MemoryEstimate {
    let mut est = MemoryEstimate::default();
    // handle -> (parent, bytes, costly kind name) of the qdiscs there, and
    // classes there, as the stream goes.
    let mut qdiscs: HashMap<TcHandle, (TcHandle, u64)> = live
        .qdiscs
        .values()
        .map(|q| (q.handle, (q.parent, qdisc_bytes(&q.kind))))
        .collect();
    let mut by_parent: HashMap<TcHandle, TcHandle> =
        live.qdiscs.values().map(|q| (q.parent, q.handle)).collect();
    let mut classes: std::collections::HashSet<TcHandle> = live.classes.keys().copied().collect();
    for op in ops {
        match op {
            TcOp::DeleteRoot => {
                qdiscs.retain(|_, (parent, bytes)| {
                    let keep = *parent == CLSACT_PARENT;
                    if !keep {
                        est.freed_bytes += *bytes;
                    }
                    keep
                });
                by_parent.retain(|p, _| *p == CLSACT_PARENT);
                est.freed_bytes += classes.len() as u64 * HTB_CLASS_BYTES;
                classes.clear();
            }
            TcOp::AddQdisc(q) | TcOp::ReplaceQdisc(q) => {
                let bytes = qdisc_bytes(&q.kind);
                let old = qdiscs.get(&q.handle).copied().or_else(|| {
                    by_parent
                        .get(&q.parent)
                        .and_then(|h| qdiscs.get(h).copied())
                });
                match old {
                    // In place (same cost: same kind); a changed kind is
                    // a new qdisc grafted over the old one.
                    Some((_, b)) if b == bytes => continue,
                    Some((_, b)) => est.freed_bytes += b,
                    None => {}
                }
                if let Some(h) = by_parent.insert(q.parent, q.handle) {
                    qdiscs.remove(&h);
                }
                qdiscs.insert(q.handle, (q.parent, bytes));
                est.created_bytes += bytes;
                let e = est.created.entry(q.kind.name().to_string()).or_default();
                e.0 += 1;
                e.1 += bytes;
            }
            TcOp::DeleteQdisc { parent, handle } => {
                let h = if *handle == TcHandle::UNSPEC {
                    by_parent.get(parent).copied()
                } else {
                    Some(*handle)
                };
                if let Some((p, b)) = h.and_then(|h| qdiscs.remove(&h)) {
                    by_parent.remove(&p);
                    est.freed_bytes += b;
                }
            }
            TcOp::AddClass(c) => {
                if classes.insert(c.classid) {
                    est.classes_created += 1;
                    est.created_bytes += HTB_CLASS_BYTES;
                }
            }
            TcOp::DeleteClass { classid, .. } => {
                if classes.remove(classid) {
                    est.freed_bytes += HTB_CLASS_BYTES;
                    if let Some(h) = by_parent.remove(classid) {
                        if let Some((_, b)) = qdiscs.remove(&h) {
                            est.freed_bytes += b;
                        }
                    }
                }
            }
            TcOp::ChangeClass(_) | TcOp::ReplaceFilter(_) | TcOp::DeleteFilter(_) => {}
        }
    }
    est
}

/// The kernel memory a whole tree takes, by the costs of this module
/// (e.g. a plan's [`crate::InterfacePlan::tree`]).
pub fn tree_bytes(tree: &TcTree) -> u64 {
    tree.qdiscs
        .values()
        .map(|q| qdisc_bytes(&q.kind))
        .sum::<u64>()
        + tree.classes.len() as u64 * HTB_CLASS_BYTES
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LeafSpec;
    use crate::ops::{Class, FqCodelParams, HtbClass, Qdisc};
    use crate::plan_config::PlanConfig;
    use lqos_model::Rate;

    fn cake() -> QdiscKind {
        QdiscKind::Cake(Default::default())
    }

    fn leaf(minor: u16, kind: QdiscKind) -> Qdisc {
        Qdisc {
            parent: TcHandle::new(1, minor),
            handle: TcHandle::new(0x100 + minor, 0),
            kind,
        }
    }

    fn class(minor: u16) -> Class {
        Class {
            parent: TcHandle::new(1, 1),
            classid: TcHandle::new(1, minor),
            htb: HtbClass {
                rate: Rate::from_mbps(10),
                ceil: Rate::from_mbps(10),
                quantum: 1522,
                prio: 3,
                burst: None,
                cburst: None,
            },
        }
    }

    fn plan(circuits: usize, sqm: &str) -> crate::plan::Plan {
        let g = lqos_model::generate(&lqos_model::GenParams::with_circuits(circuits));
        let mut cfg = PlanConfig::bridge("ens19", "ens20", 4);
        cfg.default_sqm = sqm.parse::<LeafSpec>().unwrap();
        crate::plan::plan(&g.network, &cfg, None).unwrap()
    }

    #[test]
    fn per_kind_costs() {
        assert_eq!(qdisc_bytes(&cake()), 1_064 * 1024);
        let fq = |flows| {
            QdiscKind::FqCodel(FqCodelParams {
                flows,
                ..Default::default()
            })
        };
        assert_eq!(qdisc_bytes(&fq(None)), 69 * 1024);
        assert_eq!(qdisc_bytes(&fq(Some(1024))), 69 * 1024);
        assert_eq!(
            qdisc_bytes(&fq(Some(4096))) - qdisc_bytes(&fq(Some(1024))),
            3072 * 68
        );
        assert_eq!(
            qdisc_bytes(&QdiscKind::Pfifo { limit: None }),
            SMALL_QDISC_BYTES
        );
    }

    #[test]
    fn full_build_of_a_plan_counts_every_leaf_and_class() {
        let p = plan(100, "cake diffserv4");
        let ip = &p.interfaces[0];
        let e = estimate_ops(&TcTree::default(), &ip.ops);
        let t = ip.tree();
        let cakes = t
            .qdiscs
            .values()
            .filter(|q| matches!(q.kind, QdiscKind::Cake(_)))
            .count();
        let fq = t
            .qdiscs
            .values()
            .filter(|q| matches!(q.kind, QdiscKind::FqCodel(_)))
            .count();
        assert!(cakes + fq >= 100, "{cakes} + {fq}");
        assert_eq!(e.created["cake"].0, cakes);
        assert_eq!(e.leaves_created(), cakes + fq);
        assert_eq!(e.classes_created, t.classes.len());
        assert_eq!(e.created_bytes, tree_bytes(&t));
        assert_eq!(e.freed_bytes, 0);
        assert!(
            e.describe()
                .starts_with(&format!("{cakes} cake x 1.04 MiB (")),
            "{}",
            e.describe()
        );
        // Loaded again over itself: nothing new (the diff is empty, and
        // even resending the build creates nothing).
        assert_eq!(estimate_ops(&t, &ip.ops).net_bytes(), 0);
        // A rebuild (root delete + build) frees what it recreates.
        let rebuild: Vec<TcOp> = std::iter::once(TcOp::DeleteRoot)
            .chain(ip.ops.iter().cloned())
            .collect();
        let e = estimate_ops(&t, &rebuild);
        assert_eq!(e.net_bytes(), 0);
        assert_eq!(e.freed_bytes, tree_bytes(&t));
        // pfifo leaves cost next to nothing.
        let p = plan(100, "pfifo");
        let e = estimate_ops(&TcTree::default(), &p.interfaces[0].ops);
        assert_eq!(e.leaves_created(), 0);
        assert!(e.net_bytes() < 2 * 1024 * 1024, "{}", e.net_bytes());
    }

    #[test]
    fn replaces_deletes_and_class_deletes() {
        let mut live = TcTree::default();
        live.classes.insert(TcHandle::new(1, 3), class(3));
        live.classes.insert(TcHandle::new(1, 4), class(4));
        let l3 = leaf(3, cake());
        live.qdiscs.insert(l3.handle, l3.clone());
        // Same kind replaced: in place.
        let e = estimate_ops(&live, &[TcOp::ReplaceQdisc(l3.clone())]);
        assert_eq!(e, MemoryEstimate::default());
        // Another kind: the cake is freed, the fq_codel created.
        let fq = leaf(3, QdiscKind::FqCodel(Default::default()));
        let e = estimate_ops(&live, &[TcOp::ReplaceQdisc(fq)]);
        assert_eq!(e.net_bytes(), FQ_CODEL_BYTES as i64 - CAKE_BYTES as i64);
        assert_eq!(e.leaves_created(), 1);
        // A new leaf, then a delete of the live one.
        let e = estimate_ops(
            &live,
            &[
                TcOp::AddQdisc(leaf(4, cake())),
                TcOp::DeleteQdisc {
                    parent: l3.parent,
                    handle: l3.handle,
                },
            ],
        );
        assert_eq!(e.net_bytes(), 0);
        assert_eq!(e.created_bytes, CAKE_BYTES);
        // Deleting the class frees its leaf too.
        let e = estimate_ops(
            &live,
            &[TcOp::DeleteClass {
                parent: TcHandle::new(1, 1),
                classid: TcHandle::new(1, 3),
            }],
        );
        assert_eq!(e.freed_bytes, CAKE_BYTES + HTB_CLASS_BYTES);
        // A new class with a leaf.
        let e = estimate_ops(
            &live,
            &[TcOp::AddClass(class(5)), TcOp::AddQdisc(leaf(5, cake()))],
        );
        assert_eq!(e.net_bytes(), (CAKE_BYTES + HTB_CLASS_BYTES) as i64);
        assert_eq!(
            e.describe(),
            "1 cake x 1.04 MiB (1.04 MiB), 1 HTB classes x 4 KiB (4 KiB)"
        );
        // A root delete keeps clsact.
        let clsact = Qdisc {
            parent: CLSACT_PARENT,
            handle: TcHandle::new(0xffff, 0),
            kind: QdiscKind::Clsact,
        };
        live.qdiscs.insert(clsact.handle, clsact);
        let e = estimate_ops(&live, &[TcOp::DeleteRoot]);
        assert_eq!(e.freed_bytes, CAKE_BYTES + 2 * HTB_CLASS_BYTES);
    }

    #[test]
    fn human() {
        assert_eq!(human_bytes(69 * 1024), "69 KiB");
        assert_eq!(human_bytes(281 << 20), "281 MiB");
        assert_eq!(human_bytes(1_064 * 1024), "1.04 MiB");
        assert_eq!(human_bytes(4_234_000_000), "3.9 GiB");
        assert_eq!(human_bytes(21 << 30), "21 GiB");
    }

    #[test]
    fn merge_adds_up() {
        let a = estimate_ops(&TcTree::default(), &[TcOp::AddQdisc(leaf(3, cake()))]);
        let mut m = a.clone();
        m.merge(&a);
        assert_eq!(m.created["cake"], (2, 2 * CAKE_BYTES));
        assert_eq!(m.net_bytes(), 2 * a.net_bytes());
    }
}
