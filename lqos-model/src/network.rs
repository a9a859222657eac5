//! The node hierarchy (petgraph underneath) plus the circuits hanging off it.

use std::collections::HashMap;

use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::Direction;

use crate::types::{Circuit, Node};

/// Index of a node in a [`Network`].
pub type NodeIdx = NodeIndex<u32>;

/// A node hierarchy with unique node names, plus the circuits.
///
/// Edges point parent → child. Children keep the order in which they were
/// added (the order of `network.json`).
#[derive(Debug, Clone, Default)]
pub struct Network {
    graph: DiGraph<Node, ()>,
    by_name: HashMap<String, NodeIdx>,
    roots: Vec<NodeIdx>,
    children: HashMap<NodeIdx, Vec<NodeIdx>>,
    circuits: Vec<Circuit>,
}

/// Why a node could not be added to a [`Network`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NetworkError {
    /// Two nodes with one name.
    #[error("duplicate node name {0:?}")]
    DuplicateNode(String),
    /// The named parent is not in the network.
    #[error("node {node:?}: parent {parent:?} does not exist")]
    UnknownParent {
        /// The node being added.
        node: String,
        /// The missing parent.
        parent: String,
    },
}

impl PartialEq for Network {
    fn eq(&self, other: &Self) -> bool {
        if self.circuits != other.circuits || self.roots.len() != other.roots.len() {
            return false;
        }
        fn subtree_eq(a: &Network, ai: NodeIdx, b: &Network, bi: NodeIdx) -> bool {
            let (ac, bc) = (a.children(ai), b.children(bi));
            a.node(ai) == b.node(bi)
                && ac.len() == bc.len()
                && ac.iter().zip(bc).all(|(&x, &y)| subtree_eq(a, x, b, y))
        }
        self.roots
            .iter()
            .zip(&other.roots)
            .all(|(&a, &b)| subtree_eq(self, a, other, b))
    }
}

impl Network {
    /// Most non-virtual node levels above a circuit: LibreQoS's limit (it
    /// flattens deeper nodes into level 6 when it reads `network.json`, and
    /// so does lqos). A deeper network built in code is an error.
    pub const MAX_NODE_DEPTH: usize = 6;

    /// An empty (flat) network.
    pub fn new() -> Network {
        Network::default()
    }

    /// Adds `node` under `parent` (`None` = top level).
    pub fn add_node(&mut self, parent: Option<&str>, node: Node) -> Result<NodeIdx, NetworkError> {
        if self.by_name.contains_key(&node.name) {
            return Err(NetworkError::DuplicateNode(node.name));
        }
        let parent_idx = match parent {
            None => None,
            Some(p) => Some(
                *self
                    .by_name
                    .get(p)
                    .ok_or_else(|| NetworkError::UnknownParent {
                        node: node.name.clone(),
                        parent: p.to_string(),
                    })?,
            ),
        };
        let name = node.name.clone();
        let idx = self.graph.add_node(node);
        self.by_name.insert(name, idx);
        match parent_idx {
            None => self.roots.push(idx),
            Some(p) => {
                self.graph.add_edge(p, idx, ());
                self.children.entry(p).or_default().push(idx);
            }
        }
        Ok(idx)
    }

    /// Appends a circuit (not checked here: see the validation module).
    pub fn add_circuit(&mut self, circuit: Circuit) {
        self.circuits.push(circuit);
    }

    /// Replaces the circuit at `idx` (in file order), returning the old one.
    ///
    /// # Panics
    ///
    /// If there is no circuit at `idx`.
    pub fn replace_circuit(&mut self, idx: usize, circuit: Circuit) -> Circuit {
        std::mem::replace(&mut self.circuits[idx], circuit)
    }

    /// Replaces all circuits.
    pub fn set_circuits(&mut self, circuits: Vec<Circuit>) {
        self.circuits = circuits;
    }

    /// The node at `idx`.
    pub fn node(&self, idx: NodeIdx) -> &Node {
        &self.graph[idx]
    }

    /// The node named `name`.
    pub fn node_by_name(&self, name: &str) -> Option<NodeIdx> {
        self.by_name.get(name).copied()
    }

    /// Top-level nodes in file order.
    pub fn roots(&self) -> &[NodeIdx] {
        &self.roots
    }

    /// Children of `idx` in file order.
    pub fn children(&self, idx: NodeIdx) -> &[NodeIdx] {
        self.children.get(&idx).map(Vec::as_slice).unwrap_or(&[])
    }

    /// The parent of `idx`, if it is not top level.
    pub fn parent(&self, idx: NodeIdx) -> Option<NodeIdx> {
        self.graph
            .neighbors_directed(idx, Direction::Incoming)
            .next()
    }

    /// Number of nodes.
    pub fn node_count(&self) -> usize {
        self.graph.node_count()
    }

    /// All nodes, parents before children (depth-first, file order).
    pub fn nodes_preorder(&self) -> Vec<NodeIdx> {
        let mut out = Vec::with_capacity(self.node_count());
        let mut stack: Vec<NodeIdx> = self.roots.iter().rev().copied().collect();
        while let Some(n) = stack.pop() {
            out.push(n);
            stack.extend(self.children(n).iter().rev().copied());
        }
        out
    }

    /// Depth of `idx` (top-level nodes have depth 1).
    pub fn depth_of(&self, idx: NodeIdx) -> usize {
        let mut d = 1;
        let mut cur = idx;
        while let Some(p) = self.parent(cur) {
            d += 1;
            cur = p;
        }
        d
    }

    /// Depth of the node hierarchy (0 for a flat network).
    pub fn depth(&self) -> usize {
        fn go(n: &Network, i: NodeIdx) -> usize {
            1 + n.children(i).iter().map(|&c| go(n, c)).max().unwrap_or(0)
        }
        self.roots.iter().map(|&r| go(self, r)).max().unwrap_or(0)
    }

    /// The circuits, in file order.
    pub fn circuits(&self) -> &[Circuit] {
        &self.circuits
    }

    /// The underlying petgraph graph (edges parent → child).
    pub fn graph(&self) -> &DiGraph<Node, ()> {
        &self.graph
    }
}
