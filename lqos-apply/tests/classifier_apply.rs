//! The `tc` classifier through the engine, on the recording backend (a
//! model of the kernel's rules, no root needed): first load, no-op reload,
//! a moved address, verify's filter drift, and the preflight refusal.

use lqos_apply::backend::{NoProgress, Recording};
use lqos_apply::error::{ApplyError, ClassifierMissing};
use lqos_apply::verify::{verify_tree, Drift};
use lqos_apply::{apply_plan, ApplyOptions};
use lqos_model::config::Classifier;
use lqos_model::{Circuit, Device, Network, Node, Rate};
use lqos_tc::config::LeafSpec;
use lqos_tc::ops::QdiscKind;
use lqos_tc::{plan, Plan, PlanConfig, TcOp};

fn network(b_addr: &str) -> Network {
    let mut net = Network::new();
    net.add_node(
        None,
        Node {
            name: "Site".into(),
            id: None,
            node_type: None,
            download: Rate::from_mbps(100),
            upload: Rate::from_mbps(100),
            virtual_node: false,
        },
    )
    .unwrap();
    for (id, addr) in [("a", "10.0.0.1/32"), ("b", b_addr), ("c", "10.0.0.3/32")] {
        net.add_circuit(Circuit {
            id: id.into(),
            name: format!("circuit {id}").into(),
            parent: Some("Site".into()),
            download_min: Rate::from_mbps(1),
            upload_min: Rate::from_mbps(1),
            download_max: Rate::from_mbps(10),
            upload_max: Rate::from_mbps(5),
            comment: Default::default(),
            sqm: None,
            devices: vec![Device {
                id: format!("{id}1").into(),
                name: Default::default(),
                mac: Default::default(),
                ipv4: vec![addr.parse().unwrap()],
                ipv6: vec![],
                line: 0,
            }],
        });
    }
    net
}

fn planned(net: &Network, prev: Option<&Plan>) -> Plan {
    let mut cfg = PlanConfig::bridge("ens19", "ens20", 4);
    cfg.default_sqm = LeafSpec::Qdisc(QdiscKind::Pfifo { limit: None });
    cfg.classifier = Classifier::Tc;
    plan(net, &cfg, prev.map(|p| &p.allocation)).unwrap()
}

fn rec() -> Recording {
    Recording::new().with_link("ens19", 4).with_link("ens20", 4)
}

fn apply(p: &Plan, r: &Recording) {
    let opts = {
        let mut p = ApplyOptions::default();
        p.verify_after = true;
        p
    };
    let rep = apply_plan(p, r, r, opts, &NoProgress).unwrap();
    assert!(rep.verify.unwrap().is_clean());
}

#[test]
fn load_reload_and_move_an_address() {
    let r = rec();
    let a = planned(&network("10.0.0.2/32"), None);
    apply(&a, &r);
    assert_eq!(r.tree("ens19").unwrap().filters.len(), 3);
    assert_eq!(r.tree("ens20").unwrap().filters.len(), 3);
    // No-op reload with the classifier: nothing is sent.
    r.clear_sent();
    apply(&planned(&network("10.0.0.2/32"), Some(&a)), &r);
    assert!(r.sent().is_empty(), "{:?}", r.sent());
    // b's device gets another address: the freed handle is reused in the
    // same pref, so flower changes that filter's key in place (one op).
    let b = planned(&network("10.0.0.9/32"), Some(&a));
    r.clear_sent();
    apply(&b, &r);
    for dev in ["ens19", "ens20"] {
        let ops = r.sent_for(dev);
        assert_eq!(ops.len(), 1, "{dev}: {ops:?}");
        assert!(matches!(&ops[0], TcOp::ReplaceFilter(f) if f.net.to_string() == "10.0.0.9/32"));
    }
}

#[test]
fn verify_reports_filter_drift() {
    let r = rec();
    let p = planned(&network("10.0.0.2/32"), None);
    apply(&p, &r);
    let planned_tree = p.interfaces[0].tree();
    let mut live = r.tree("ens19").unwrap();
    // One filter gone, one steering elsewhere.
    let mut keys = live.filters.keys().copied();
    let (k1, k2) = (keys.next().unwrap(), keys.next().unwrap());
    live.filters.remove(&k1);
    live.filters.get_mut(&k2).unwrap().queue_mapping = 3;
    let v = verify_tree("ens19", &planned_tree, &live, &p.labels("ens19"));
    assert_eq!(v.drift.len(), 2, "{:?}", v.drift);
    assert!(v
        .drift
        .iter()
        .any(|d| matches!(d, Drift::MissingFilter { key, .. } if *key == k1)));
    assert!(v.drift.iter().any(|d| matches!(d,
        Drift::FilterDiffers { key, field, .. } if *key == k2 && field == "queue_mapping")));
    let text: Vec<String> = v.drift.iter().map(|d| d.to_string()).collect();
    assert!(
        text.iter()
            .any(|t| t.contains("missing egress filter pref 1000") && t.contains("circuit ")),
        "{text:?}"
    );
    // A live clsact the plan does not want (another program's) is no drift.
    let none = {
        let mut cfg = PlanConfig::bridge("ens19", "ens20", 4);
        cfg.default_sqm = LeafSpec::Qdisc(QdiscKind::Pfifo { limit: None });
        plan(&network("10.0.0.2/32"), &cfg, None).unwrap()
    };
    let mut live = r.tree("ens19").unwrap();
    live.filters.clear();
    let v = verify_tree(
        "ens19",
        &none.interfaces[0].tree(),
        &live,
        &none.labels("ens19"),
    );
    assert!(v.drift.is_empty(), "{:?}", v.drift);
}

#[test]
fn preflight_refuses_the_classifier_without_flower_and_changes_nothing() {
    let r = rec().without_qdisc_kind("flower");
    let p = planned(&network("10.0.0.2/32"), None);
    let e = apply_plan(&p, &r, &r, ApplyOptions::default(), &NoProgress).unwrap_err();
    // The facts: what is missing, and that nothing changed (the CLI adds
    // the flags that help: lqos-cli's hints).
    let msg = e.to_string();
    assert!(msg.contains("the tc classifier"), "{msg}");
    assert!(msg.contains("nothing was changed"), "{msg}");
    assert!(
        matches!(
            &e,
            ApplyError::ClassifierUnsupported {
                reason: ClassifierMissing::Refused { op, .. }
            } if op.contains("flower")
        ),
        "{e:?}"
    );
    assert!(r.sent().is_empty());
}

/// A full rebuild (`--full`, or a layout change) deletes the root, which
/// leaves `clsact` and its filters in place: the classifier is diffed
/// against the live one, not resent (regression: the merge onto main's
/// borrowed full builds must not resend every filter).
#[test]
fn full_rebuild_diffs_the_classifier_instead_of_resending_it() {
    let r = rec();
    let a = planned(&network("10.0.0.2/32"), None);
    apply(&a, &r);
    let full = |p: &Plan| {
        let opts = {
            let mut p = ApplyOptions::default();
            p.full = true;
            p.verify_after = true;
            p
        };
        r.clear_sent();
        let rep = apply_plan(p, &r, &r, opts, &NoProgress).unwrap();
        assert!(rep.verify.unwrap().is_clean());
    };
    let is_filter = |op: &TcOp| {
        matches!(op, TcOp::ReplaceFilter(_) | TcOp::DeleteFilter(_))
            || matches!(op, TcOp::ReplaceQdisc(q) | TcOp::AddQdisc(q) if q.kind == QdiscKind::Clsact)
    };
    // In sync: the classes are rebuilt, no classifier op is sent.
    full(&planned(&network("10.0.0.2/32"), Some(&a)));
    for dev in ["ens19", "ens20"] {
        let ops = r.sent_for(dev);
        assert!(ops.first().is_some_and(TcOp::is_root_delete), "{dev}");
        assert!(!ops.iter().any(is_filter), "{dev}: {ops:?}");
    }
    // One address moved: the rebuild sends that one filter.
    let b = planned(&network("10.0.0.9/32"), Some(&a));
    full(&b);
    for dev in ["ens19", "ens20"] {
        let filters: Vec<TcOp> = r.sent_for(dev).into_iter().filter(is_filter).collect();
        assert_eq!(filters.len(), 1, "{dev}: {filters:?}");
        assert!(
            matches!(&filters[0], TcOp::ReplaceFilter(f) if f.net.to_string() == "10.0.0.9/32")
        );
    }
}
