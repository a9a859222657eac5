//! Kernel faults injected at any op of a load ([`Faulty`] around the
//! recording fake kernel): the load reports the op and the kernel's words,
//! the last good state is never replaced by the plan that failed, and the
//! next apply converges to the plan with a clean verify.

use lqos_apply::backend::{Fault, Faulty, RECORDING_BATCH};
use lqos_apply::backend::{NoProgress, Recording};
use lqos_apply::error::ApplyError;
use lqos_apply::saved::load_saved_plan;
use lqos_apply::state::NetnsState;
use lqos_apply::{ApplyOptions, Session};
use proptest::prelude::*;

mod common;
use common::{generated, mutate, plan_for};

fn fault() -> impl Strategy<Value = Fault> {
    prop_oneof![
        Just(Fault::Errno(libc::ENOMEM)),
        Just(Fault::Errno(libc::EBUSY)),
        Just(Fault::Errno(libc::EINVAL)),
        Just(Fault::Errno(libc::ENOBUFS)),
        Just(Fault::CutSocket),
    ]
}

fn opts(full: bool) -> ApplyOptions {
    {
        let mut p = ApplyOptions::default();
        p.full = full;
        p
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn a_fault_at_any_op_keeps_the_last_good_state_and_the_next_apply_converges(
        at in 0.0f64..1.0,
        fault in fault(),
        first_load in any::<bool>(),
        full in any::<bool>(),
    ) {
        let g = generated(40, 11);
        let good = plan_for(&g, &g.network, None);
        let faulty = Faulty::new(Recording::new().with_link("ens19", 16).with_link("ens20", 16));
        let dir = tempfile::tempdir().unwrap();
        let state = NetnsState::new(dir.path(), None);
        let s = Session { state: &state, live: faulty.inner(), backend: &faulty };
        let (net, plan) = if first_load {
            (g.network.clone(), good.clone())
        } else {
            let r = s.apply_planned(&good, Some(&g.network), opts(false), &NoProgress).unwrap();
            prop_assert!(r.load.unwrap().is_ok());
            let net = mutate(&g.network, 3, 2);
            let plan = plan_for(&g, &net, Some(&good.allocation));
            (net, plan)
        };
        // Where the fault goes: op k of the ops this apply sends.
        let dry = s.apply(&plan, { let mut p = opts(full); p.dry_run = true; p }, &NoProgress).unwrap();
        let n: usize = dry.changes.iter().map(|c| c.stream.len()).sum();
        prop_assume!(n > 0);
        let k = ((at * n as f64) as usize).min(n - 1);
        faulty.fail_at(k, fault);
        let r = s.apply_planned(&plan, Some(&net), opts(full), &NoProgress).unwrap();
        prop_assert_eq!(faulty.fired(), 1);
        match r.load.unwrap().into_result() {
            Err(ApplyError::OpFailed { op, message, errno, .. }) => {
                let Fault::Errno(e) = fault else { panic!("{fault:?} reported as an op failure") };
                prop_assert_eq!(errno, Some(e));
                prop_assert_eq!(message, nix::errno::Errno::from_raw(e).desc());
                let text = ApplyError::OpFailed {
                    dev: "ens19".into(), index: 0, op, message: "x".into(), errno,
                }.to_string();
                prop_assert!(text.contains("` failed: x"), "{}", text);
            }
            Err(ApplyError::Netlink { source, .. }) => {
                prop_assert_eq!(fault, Fault::CutSocket);
                prop_assert!(source.to_string().contains("receiving the ACK"), "{}", source);
            }
            other => prop_assert!(false, "{:?}", other.map(|r| r.ops_applied())),
        }
        // The plan that failed is not the last good state.
        let saved = load_saved_plan(&state).unwrap().map(|s| s.plan);
        if first_load {
            prop_assert!(saved.is_none(), "a failed first load saved a plan");
        } else {
            prop_assert_eq!(saved.as_ref(), Some(&good));
        }
        // The next apply (the fault is spent) converges from whatever the
        // failed load left.
        let r = s
            .apply_planned(&plan, Some(&net), { let mut p = opts(false); p.verify_after = true; p }, &NoProgress)
            .unwrap();
        prop_assert!(r.load.unwrap().is_ok());
        let v = r.verify.unwrap();
        prop_assert!(v.is_clean(), "{:?}", v);
        let saved = load_saved_plan(&state).unwrap().map(|s| s.plan);
        prop_assert_eq!(saved.as_ref(), Some(&plan));
        // And nothing is left to do.
        let again = s.apply(&plan, { let mut p = opts(false); p.dry_run = true; p }, &NoProgress).unwrap();
        prop_assert_eq!(again.changes.iter().map(|c| c.stream.len()).sum::<usize>(), 0);
    }
}

/// Cancels the load once `after` ops were reported sent.
struct CancelAfter {
    after: usize,
    sent: std::sync::atomic::AtomicUsize,
}

impl lqos_apply::backend::Progress for CancelAfter {
    fn advance(&self, _dev: &str, n: usize) {
        self.sent.fetch_add(n, std::sync::atomic::Ordering::SeqCst);
    }

    fn cancelled(&self) -> bool {
        self.sent.load(std::sync::atomic::Ordering::SeqCst) >= self.after
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// A load cancelled (SIGTERM, Ctrl-C) at any point stops between two
    /// batches, reports exactly the ops the kernel got, saves nothing, and
    /// the next apply converges.
    #[test]
    fn a_load_cancelled_at_any_point_saves_nothing_and_the_next_apply_converges(
        at in 0.0f64..1.0,
        first_load in any::<bool>(),
        full in any::<bool>(),
    ) {
        let g = generated(300, 12);
        let good = plan_for(&g, &g.network, None);
        let kernel = Recording::new().with_link("ens19", 16).with_link("ens20", 16);
        let dir = tempfile::tempdir().unwrap();
        let state = NetnsState::new(dir.path(), None);
        let s = Session { state: &state, live: &kernel, backend: &kernel };
        let (net, plan) = if first_load {
            (g.network.clone(), good.clone())
        } else {
            s.apply_planned(&good, Some(&g.network), opts(false), &NoProgress).unwrap();
            let net = mutate(&g.network, 40, 20);
            let plan = plan_for(&g, &net, Some(&good.allocation));
            (net, plan)
        };
        let before = kernel.sent().len();
        let dry = s.apply(&plan, { let mut p = opts(full); p.dry_run = true; p }, &NoProgress).unwrap();
        let n: usize = dry.changes.iter().map(|c| c.stream.len()).sum();
        prop_assume!(n > 0);
        let cancel = CancelAfter { after: (at * n as f64) as usize, sent: Default::default() };
        let r = s.apply_planned(&plan, Some(&net), opts(full), &cancel).unwrap();
        let load = r.load.unwrap();
        let applied = load.ops_applied();
        // It stops at the next batch boundary.
        prop_assert!(applied <= cancel.after + RECORDING_BATCH, "{} ops after a cancel at {}", applied, cancel.after);
        prop_assert_eq!(kernel.sent().len() - before, applied);
        let saved = load_saved_plan(&state).unwrap().map(|s| s.plan);
        match load.into_result() {
            Err(ApplyError::Incomplete { reason: lqos_apply::error::Stopped::Cancelled { unsure: 0 }, sent, total, .. }) => {
                prop_assert!(sent < total);
            }
            Ok(_) => {
                // The last batch was already under way: the load is complete.
                prop_assert_eq!(applied, n);
                prop_assert_eq!(saved.as_ref(), Some(&plan));
                return Ok(());
            }
            other => prop_assert!(false, "{:?}", other.map(|r| r.ops_applied())),
        }
        if first_load {
            prop_assert!(saved.is_none(), "a cancelled first load saved a plan");
        } else {
            prop_assert_eq!(saved.as_ref(), Some(&good));
        }
        let r = s
            .apply_planned(&plan, Some(&net), { let mut p = opts(false); p.verify_after = true; p }, &NoProgress)
            .unwrap();
        prop_assert!(r.load.unwrap().is_ok());
        prop_assert!(r.verify.unwrap().is_clean());
        let saved = load_saved_plan(&state).unwrap().map(|s| s.plan);
        prop_assert_eq!(saved.as_ref(), Some(&plan));
    }
}
