//! Test fixtures shared by the stages' unit tests.

use lqos_model::{Circuit, Network, Node, Rate, SmolStr};

use crate::config::QueueStrategy;
use crate::plan_config::PlanConfig;

pub(super) use super::hierarchy::hierarchy;
pub(super) use super::ids::ids;
pub(super) use super::plan;
pub(super) use super::previous::Previous;
pub(super) use super::queues::queues;

pub(crate) fn node(name: &str, mbps: u64, virtual_node: bool) -> Node {
    Node {
        name: name.into(),
        id: None,
        node_type: None,
        download: Rate::from_mbps(mbps),
        upload: Rate::from_mbps(mbps),
        virtual_node,
    }
}

pub(crate) fn circuit(id: &str, parent: Option<&str>, max: u64) -> Circuit {
    Circuit {
        id: id.into(),
        name: format!("name of {id}").into(),
        parent: parent.map(Into::into),
        download_min: Rate::from_mbps(1),
        upload_min: Rate::from_mbps(1),
        download_max: Rate::from_mbps(max),
        upload_max: Rate::from_mbps(max),
        comment: SmolStr::default(),
        sqm: None,
        devices: vec![],
    }
}

/// Site_A (800) > virtual V > AP (2000), Site_B (100); circuits under
/// V, AP, Site_B and one without a parent.
pub(crate) fn net() -> Network {
    let mut net = Network::new();
    net.add_node(None, node("Site_A", 800, false)).unwrap();
    net.add_node(Some("Site_A"), node("V", 50, true)).unwrap();
    net.add_node(Some("V"), node("AP", 2000, false)).unwrap();
    net.add_node(None, node("Site_B", 100, false)).unwrap();
    net.add_circuit(circuit("under_v", Some("V"), 900));
    net.add_circuit(circuit("under_ap", Some("AP"), 10));
    net.add_circuit(circuit("under_b", Some("Site_B"), 10));
    net.add_circuit(circuit("orphan", None, 10));
    net
}

pub(crate) fn cfg(queues: u32) -> PlanConfig {
    let mut c = PlanConfig::bridge("ens19", "ens20", queues);
    c.strategy = QueueStrategy::RoundRobin;
    c
}
