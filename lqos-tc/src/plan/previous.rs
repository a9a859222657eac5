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

    /// The previous circuit slot of a circuit that hung under a generated
    /// parent node of queue `< q`: its queue.
    pub(super) fn generated_queue(&self, id: &str, q: usize) -> Option<usize> {
        self.circuits
            .get(id)
            .filter(|s| {
                (s.queue as usize) < q
                    && self
                        .alloc
                        .and_then(|p| p.nodes.get(s.parent as usize))
                        .is_some_and(|n| n.generated)
            })
            .map(|s| s.queue as usize)
    }
}
