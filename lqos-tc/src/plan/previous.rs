//! The previous allocation, indexed for the stages that reuse it.

use hashbrown::HashMap;

use super::{Allocation, CircuitSlot, NodeSlot};

/// The previous allocation, indexed by node name and circuit ID; empty
/// unless it was made for the same number of queues.
pub(super) struct Previous<'a> {
    pub(super) alloc: Option<&'a Allocation>,
    pub(super) nodes: HashMap<&'a str, &'a NodeSlot>,
    pub(super) circuits: HashMap<&'a str, &'a CircuitSlot>,
}

impl<'a> Previous<'a> {
    pub(super) fn new(previous: Option<&'a Allocation>, queues: usize) -> Previous<'a> {
        let alloc = previous.filter(|p| p.queues as usize == queues);
        let mut nodes: HashMap<&str, &NodeSlot> = HashMap::default();
        let mut circuits: HashMap<&str, &CircuitSlot> = HashMap::default();
        if let Some(p) = alloc {
            nodes.reserve(p.nodes.len());
            nodes.extend(p.nodes.iter().map(|n| (n.name.as_str(), n)));
            circuits.reserve(p.circuits.len());
            circuits.extend(p.circuits.iter().map(|c| (c.id.as_str(), c)));
        }
        Previous {
            alloc,
            nodes,
            circuits,
        }
    }

    /// The generated parent node a circuit hung under, if it did and that
    /// node is one of this plan's `q`: its index `k` (`Generated_PN_{k+1}`).
    pub(super) fn generated_parent(&self, id: &str, q: usize) -> Option<usize> {
        let slot = self.circuits.get(id)?;
        let node = self.alloc?.nodes.get(slot.parent as usize)?;
        let k: usize = node.name.strip_prefix("Generated_PN_")?.parse().ok()?;
        (node.generated && (1..=q).contains(&k)).then(|| k - 1)
    }
}
