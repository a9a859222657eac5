//! Single-queue interfaces against a real kernel: a veth pair with one TX
//! queue each gets an HTB root (`root handle 1: htb`), no mq; full load,
//! no-op reload, incremental change and verify work as on a multiqueue
//! device, and preflight refuses an mq plan with a clear message.

use lqos_apply::backend::{NetlinkBackend, NoProgress, Parallelism};
use lqos_apply::error::ApplyError;
use lqos_apply::live::NetlinkLive;
use lqos_apply::netns::{require_netns, unique_name, ScratchNetns};
use lqos_apply::state::NetnsState;
use lqos_apply::{verify_plan, ApplyOptions, Session};
use lqos_tc::ops::QdiscKind;
use lqos_tc::{TcHandle, TcOp};

fn plan(circuits: usize, queues: u32) -> (lqos_model::Network, lqos_tc::Plan) {
    let g = lqos_model::generate(&{
        let mut p = lqos_model::GenParams::with_circuits(circuits);
        p.seed = 5;
        p
    });
    let mut cfg = lqos_tc::PlanConfig::from_lqos_config(&g.config, queues).unwrap();
    cfg.default_sqm = "pfifo".parse().unwrap();
    let p = lqos_tc::plan(&g.network, &cfg, None).unwrap();
    (g.network, p)
}

#[test]
fn one_tx_queue_gets_an_htb_root_and_reloads_incrementally() {
    if !require_netns("single_queue") {
        return;
    }
    let ns = ScratchNetns::with_veth(&unique_name("lqos-test", "1q"), "ens19", "ens20", 1)
        .expect("scratch netns");
    let (net, p) = plan(300, 1);
    for ip in &p.interfaces {
        assert_eq!(
            ip.ops[0],
            TcOp::ReplaceQdisc(lqos_tc::ops::Qdisc {
                parent: TcHandle::ROOT,
                handle: TcHandle::new(1, 0),
                kind: QdiscKind::Htb(lqos_tc::ops::HtbQdisc {
                    default_minor: 2,
                    r2q: None,
                    direct_qlen: None,
                }),
            })
        );
        assert!(!ip.ops.iter().any(|o| matches!(o,
            TcOp::AddQdisc(q) | TcOp::ReplaceQdisc(q) if q.kind == QdiscKind::Mq)));
    }
    let dir = tempfile::tempdir().unwrap();
    let state = NetnsState::new(dir.path(), Some(ns.name()));
    let live = NetlinkLive::new(Some(ns.name().to_string()));
    let backend = NetlinkBackend::new(Some(ns.name().to_string()), Parallelism::Serial);
    let s = Session {
        state: &state,
        live: &live,
        backend: &backend,
    };
    let opts = {
        let mut p = ApplyOptions::default();
        p.verify_after = true;
        p
    };
    let first = s.apply_planned(&p, Some(&net), opts, &NoProgress).unwrap();
    assert!(first.verify.as_ref().unwrap().is_clean());
    assert!(first.load.unwrap().is_ok());
    let again = s.apply_planned(&p, Some(&net), opts, &NoProgress).unwrap();
    assert_eq!(again.ops_total(), 0);

    // 1% changed: class changes in place, no rebuild.
    let mut changed = net.clone();
    let mut cs = changed.circuits().to_vec();
    for c in cs.iter_mut().step_by(100) {
        c.download_max = lqos_model::Rate::from_bps(c.download_max.bps() + 1_000_000);
    }
    changed.set_circuits(cs);
    let p2 = lqos_tc::plan(&changed, &p.config, Some(&p.allocation)).unwrap();
    let r = s
        .apply_planned(&p2, Some(&changed), opts, &NoProgress)
        .unwrap();
    assert!(r.verify.as_ref().unwrap().is_clean());
    assert!(r.ops_total() >= 3, "{} ops", r.ops_total());
    for c in &r.changes {
        assert!(
            c.stream
                .ops
                .iter()
                .all(|o| matches!(o, TcOp::ChangeClass(_))),
            "{:?}",
            c.stream.ops
        );
    }
    let v = verify_plan(&p2, &live).unwrap();
    assert!(v.is_clean(), "{v}");
}

#[test]
fn preflight_refuses_mq_on_a_single_queue_device() {
    if !require_netns("single_queue_mq") {
        return;
    }
    let ns = ScratchNetns::with_veth(&unique_name("lqos-test", "1qmq"), "ens19", "ens20", 1)
        .expect("scratch netns");
    // A plan made for two queues has an mq root.
    let (_, p) = plan(50, 2);
    let live = NetlinkLive::new(Some(ns.name().to_string()));
    let e = lqos_apply::load::preflight(&p, &live).unwrap_err();
    assert!(matches!(e, ApplyError::MqOnSingleQueue { .. }), "{e}");
    // The fact; the CLI adds `plan with --queues 1` (lqos-cli's hints).
    let msg = e.to_string();
    assert!(msg.contains("ens19 has a single TX queue"), "{msg}");
}
