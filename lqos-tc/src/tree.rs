//! An in-memory model of one interface's kernel tree.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{Class, Qdisc, TcHandle};

/// The qdiscs and classes of one interface, keyed by handle / classid.
///
/// Built by applying ops (the planner's view) or by reading the kernel back
/// (`lqos-apply`), so a plan and a live tree compare directly.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcTree {
    /// Qdiscs by handle.
    pub qdiscs: BTreeMap<TcHandle, Qdisc>,
    /// HTB classes by classid.
    pub classes: BTreeMap<TcHandle, Class>,
}
