//! Lazy leaves: a circuit gets its planned leaf qdisc (cake, fq_codel, ...)
//! only while it carries traffic.
//!
//! A circuit class without an explicit leaf uses the `pfifo` HTB attaches
//! to every leaf class by itself (no handle, a few hundred bytes), while a
//! cake instance costs about 1 MiB of kernel memory. So a circuit starts
//! without its leaf; [`LeafTracker::observe`] compares the class counters of
//! one poll ([`crate::live::LiveSource::poll`]) with the previous one and
//! returns one op per circuit that needs its leaf now (counters moved) or
//! no longer (idle for the idle time). The leaf always comes back with its
//! planned handle: the plan keeps every handle reserved, only the op is
//! held back.
//!
//! The rest of lqos sees lazy leaves through [`lazy_plan`](lqos_tc::rules::lazy_plan): the plan with
//! the leaves of the circuits that are not active taken out (the rule
//! lives with the other satisfies/drift rules, in [`lqos_tc::rules`]). Incremental
//! apply and verify run against it, so a missing leaf on an idle circuit is
//! not drift, and a file-triggered apply keeps the leaves of active
//! circuits. Outside the daemon (a one-off verify), the active set is the set
//! of planned leaves found in the kernel ([`lqos_tc::rules::present_leaves`]).

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use crate::netlink::ClassSample;
use lqos_tc::{InterfacePlan, TcHandle, TcOp};

use lqos_tc::rules::{circuit_leaves, ActiveLeaves, LeafKey};

/// What one [`LeafTracker::observe`] decided for one interface.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeafChanges {
    /// `qdisc replace` of the planned leaf, one per circuit that started
    /// carrying traffic.
    pub add: Vec<TcOp>,
    /// `qdisc del` of the leaf, one per circuit idle for the idle time.
    pub remove: Vec<TcOp>,
}

impl LeafChanges {
    /// All ops, additions first.
    pub fn ops(&self) -> Vec<TcOp> {
        self.add.iter().chain(&self.remove).cloned().collect()
    }

    /// No op.
    pub fn is_empty(&self) -> bool {
        self.add.is_empty() && self.remove.is_empty()
    }
}

#[derive(Debug, Clone, Copy)]
struct Seen {
    bytes: u64,
    packets: u64,
    /// When the counters last moved (or the circuit became active).
    moved_at: Instant,
}

/// Decides which circuits have their leaf, from successive class counter
/// samples. Pure apart from the `now` it is given.
#[derive(Debug, Clone)]
pub struct LeafTracker {
    idle: Duration,
    seen: HashMap<LeafKey, Seen>,
    active: ActiveLeaves,
}

impl LeafTracker {
    /// A tracker that removes a leaf after `idle` without traffic, starting
    /// with `active` (e.g. [`present_leaves`](lqos_tc::rules::present_leaves) at daemon start; they get a
    /// full idle period from `now`).
    pub fn new(idle: Duration, active: ActiveLeaves, now: Instant) -> LeafTracker {
        let seen = active
            .iter()
            .map(|k| {
                (
                    k.clone(),
                    Seen {
                        bytes: 0,
                        packets: 0,
                        moved_at: now,
                    },
                )
            })
            .collect();
        LeafTracker { idle, seen, active }
    }

    /// The circuits that have (or are getting) their leaf.
    pub fn active(&self) -> &ActiveLeaves {
        &self.active
    }

    /// Replaces the active set (after a failed load, from what the kernel
    /// has: [`present_leaves`](lqos_tc::rules::present_leaves)); newly active circuits get a full idle
    /// period from `now`.
    pub fn resync(&mut self, active: ActiveLeaves, now: Instant) {
        for k in &active {
            if !self.active.contains(k) {
                if let Some(s) = self.seen.get_mut(k) {
                    s.moved_at = now;
                }
            }
        }
        self.active = active;
    }

    /// Takes back the activation of the circuits whose leaf ops in `add`
    /// (from [`LeafTracker::observe`] for interface `dev`) were not loaded,
    /// e.g. because their leaves would not fit in memory: they stay without
    /// a leaf and get it at a later sample in which their counters move
    /// again.
    pub fn defer(&mut self, dev: &str, add: &[TcOp]) {
        for op in add {
            if let TcOp::ReplaceQdisc(q) | TcOp::AddQdisc(q) = op {
                self.active.remove(&(dev.to_string(), q.parent));
            }
        }
    }

    /// One sample of `ip`'s class counters at `now`: the ops that give
    /// each circuit whose counters moved since the last sample its leaf,
    /// and take the leaf from each active circuit idle for the idle time.
    /// The first sample of a circuit is its baseline (counters from before
    /// do not count). Circuits no longer in the plan are forgotten.
    pub fn observe(
        &mut self,
        ip: &InterfacePlan,
        stats: &[ClassSample],
        now: Instant,
    ) -> LeafChanges {
        let by_class: HashMap<TcHandle, &ClassSample> =
            stats.iter().map(|s| (s.classid, s)).collect();
        let mut changes = LeafChanges::default();
        let mut planned = BTreeSet::new();
        for q in circuit_leaves(ip) {
            let key: LeafKey = (ip.dev.clone(), q.parent);
            planned.insert(q.parent);
            let Some(s) = by_class.get(&q.parent) else {
                continue; // class not in the kernel (yet)
            };
            let active = self.active.contains(&key);
            let entry = self.seen.entry(key.clone());
            let moved = match entry {
                std::collections::hash_map::Entry::Vacant(v) => {
                    v.insert(Seen {
                        bytes: s.counters.bytes,
                        packets: s.counters.packets,
                        moved_at: now,
                    });
                    false
                }
                std::collections::hash_map::Entry::Occupied(mut o) => {
                    let seen = o.get_mut();
                    let c = &s.counters;
                    let moved = seen.bytes != c.bytes || seen.packets != c.packets;
                    seen.bytes = c.bytes;
                    seen.packets = c.packets;
                    if moved {
                        seen.moved_at = now;
                    }
                    moved
                }
            };
            if moved && !active {
                changes.add.push(TcOp::ReplaceQdisc(q.clone()));
                self.active.insert(key);
            } else if active && !moved {
                let idle_for = now.saturating_duration_since(self.seen[&key].moved_at);
                if idle_for >= self.idle {
                    changes.remove.push(TcOp::DeleteQdisc {
                        parent: q.parent,
                        handle: q.handle,
                    });
                    self.active.remove(&key);
                }
            }
        }
        let dev = &ip.dev;
        self.seen
            .retain(|(d, c), _| d != dev || planned.contains(c));
        self.active.retain(|(d, c)| d != dev || planned.contains(c));
        changes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lqos_tc::ops::Qdisc;
    use lqos_tc::Plan;

    fn plan(circuits: usize) -> Plan {
        crate::test_fixtures::bridge_plan(circuits, 1, "pfifo").1
    }

    fn stats(ip: &InterfacePlan, bytes: impl Fn(usize) -> u64) -> Vec<ClassSample> {
        circuit_leaves(ip)
            .enumerate()
            .map(|(i, q)| ClassSample {
                classid: q.parent,
                counters: crate::netlink::Counters {
                    bytes: bytes(i),
                    packets: bytes(i) / 100,
                    ..Default::default()
                },
                htb: None,
            })
            .collect()
    }

    #[test]
    fn traffic_adds_the_planned_leaf_and_idle_removes_it() {
        let p = plan(12);
        let ip = &p.interfaces[0];
        let leaves: Vec<Qdisc> = circuit_leaves(ip).cloned().collect();
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let mut tr = LeafTracker::new(3 * s, ActiveLeaves::new(), t0);
        // Baseline: counters from before do not count.
        assert!(tr
            .observe(ip, &stats(ip, |i| i as u64 * 1000), t0)
            .is_empty());
        // Circuit 2 moves: its leaf, with its planned handle, in one op.
        let c = tr.observe(
            ip,
            &stats(ip, |i| i as u64 * 1000 + u64::from(i == 2) * 64),
            t0 + s,
        );
        assert_eq!(c.add, vec![TcOp::ReplaceQdisc(leaves[2].clone())]);
        assert!(c.remove.is_empty());
        assert!(tr.active().contains(&(ip.dev.clone(), leaves[2].parent)));
        // Idle for less than 3 s: kept; then removed.
        let same = stats(ip, |i| i as u64 * 1000 + u64::from(i == 2) * 64);
        assert!(tr.observe(ip, &same, t0 + 3 * s).is_empty());
        let c = tr.observe(ip, &same, t0 + 4 * s);
        assert_eq!(
            c.remove,
            vec![TcOp::DeleteQdisc {
                parent: leaves[2].parent,
                handle: leaves[2].handle
            }]
        );
        assert!(tr.active().is_empty());
    }

    #[test]
    fn deferred_leaves_come_at_the_next_move() {
        let p = plan(12);
        let ip = &p.interfaces[0];
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let mut tr = LeafTracker::new(10 * s, ActiveLeaves::new(), t0);
        assert!(tr.observe(ip, &stats(ip, |_| 0), t0).is_empty());
        let c = tr.observe(ip, &stats(ip, |i| u64::from(i < 2) * 100), t0 + s);
        assert_eq!(c.add.len(), 2);
        // Only the first fits: the second is taken back.
        tr.defer(&ip.dev, &c.add[1..]);
        assert_eq!(tr.active().len(), 1);
        // No new traffic: nothing; traffic again: its leaf.
        let same = stats(ip, |i| u64::from(i < 2) * 100);
        assert!(tr.observe(ip, &same, t0 + 2 * s).is_empty());
        let c = tr.observe(ip, &stats(ip, |i| u64::from(i < 2) * 200), t0 + 3 * s);
        let leaves: Vec<Qdisc> = circuit_leaves(ip).cloned().collect();
        assert_eq!(c.add, vec![TcOp::ReplaceQdisc(leaves[1].clone())]);
        assert_eq!(tr.active().len(), 2);
    }

    #[test]
    fn circuits_that_leave_the_plan_are_forgotten() {
        let p = plan(12);
        let ip = &p.interfaces[0];
        let leaves: Vec<Qdisc> = circuit_leaves(ip).cloned().collect();
        let t0 = Instant::now();
        let active: ActiveLeaves = [(ip.dev.clone(), leaves[0].parent)].into();
        let mut tr = LeafTracker::new(Duration::from_secs(3), active, t0);
        let smaller = plan(0);
        tr.observe(&smaller.interfaces[0], &[], t0);
        assert!(tr.active().is_empty());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(32))]
        /// Whatever the traffic pattern, a circuit is active exactly when
        /// its counters moved within the idle time (after its baseline),
        /// and the ops say so one by one.
        #[test]
        fn active_means_moved_within_idle(pattern in proptest::collection::vec(proptest::collection::vec(proptest::bool::ANY, 6), 1..12)) {
            let p = plan(6);
            let ip = &p.interfaces[0];
            let t0 = Instant::now();
            let s = Duration::from_secs(1);
            let mut tr = LeafTracker::new(2 * s, ActiveLeaves::new(), t0);
            let mut counters = [0u64; 6];
            tr.observe(ip, &stats(ip, |i| counters[i]), t0);
            let mut last_move: [Option<usize>; 6] = [None; 6];
            for (step, moves) in pattern.iter().enumerate() {
                let step = step + 1;
                for (i, m) in moves.iter().enumerate() {
                    if *m { counters[i] += 100; last_move[i] = Some(step); }
                }
                let before = tr.active().len();
                let c = tr.observe(ip, &stats(ip, |i| counters[i]), t0 + s * step as u32);
                proptest::prop_assert_eq!(tr.active().len() + c.remove.len(), before + c.add.len());
                for (i, q) in circuit_leaves(ip).enumerate() {
                    let want = last_move[i].is_some_and(|m| step - m < 2);
                    proptest::prop_assert_eq!(tr.active().contains(&(ip.dev.clone(), q.parent)), want);
                }
            }
        }
    }
}
