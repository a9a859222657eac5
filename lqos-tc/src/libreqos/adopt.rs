//! Adopting a tree LibreQoS built: lqos's allocation seeded with
//! LibreQoS's classids (and the leaf handles the kernel holds), so that the
//! first plan is LibreQoS's tree with LibreQoS's numbering.

use std::collections::HashMap;

use super::state::LibreQosState;
use crate::handle::TcHandle;
use crate::plan::{Allocation, CircuitSlot, NodeSlot};
use crate::tree::TcTree;

impl LibreQosState {
    /// The allocation that keeps LibreQoS's numbering: every node and
    /// attached circuit at its queue (download major - 1) and minor, the
    /// generated parent nodes marked generated. Fed to [`crate::plan`] as the
    /// previous allocation (made for [`LibreQosState::queues`] queues per
    /// direction), a node or circuit that still exists keeps its classid;
    /// new ones get free minors, as after any plan.
    ///
    /// Circuits get no leaf handles here (LibreQoS's state does not record
    /// them): [`LibreQosState::adopt_leaves`] takes them from the live tree.
    pub fn allocation(&self) -> Allocation {
        let nodes: Vec<NodeSlot> = self
            .nodes
            .iter()
            .map(|n| NodeSlot {
                name: n.name.clone(),
                parent: n.parent.map(|p| p as u32),
                queue: u32::from(n.classid.major()) - 1,
                minor: n.classid.minor(),
                generated: n.generated,
            })
            .collect();
        let index = self.node_index();
        let circuits = self
            .circuits
            .iter()
            .map(|c| CircuitSlot {
                id: c.id.as_str().into(),
                name: Default::default(),
                parent: index.get(c.parent.as_str()).map_or(0, |&i| i as u32),
                queue: u32::from(c.classid.major()) - 1,
                minor: c.classid.minor(),
                leaf_download: None,
                leaf_upload: None,
            })
            .collect();
        Allocation {
            queues: self.queues,
            nodes,
            circuits,
            ..Allocation::default()
        }
    }

    /// Sets each circuit's leaf handles in `alloc` (made by
    /// [`LibreQosState::allocation`]) to the leaf qdisc the kernel holds on
    /// its class in `download` and `upload` (the interfaces' live trees; the
    /// same tree twice on a stick), so the plan keeps them instead of
    /// replacing every leaf.
    pub fn adopt_leaves(&self, alloc: &mut Allocation, download: &TcTree, upload: &TcTree) {
        let leaf_at = |t: &TcTree| -> HashMap<TcHandle, u16> {
            t.qdisc_by_parent()
                .into_iter()
                .map(|(parent, q)| (parent, q.handle.major()))
                .collect()
        };
        let (down, up) = (leaf_at(download), leaf_at(upload));
        let by_id: HashMap<&str, &super::StateCircuit> =
            self.circuits.iter().map(|c| (c.id.as_str(), c)).collect();
        for slot in &mut alloc.circuits {
            if let Some(c) = by_id.get(slot.id.as_str()) {
                slot.leaf_download = down.get(&c.classid).copied();
                slot.leaf_upload = up.get(&c.up_classid).copied();
            }
        }
    }
}
