//! Why a plan cannot be made.

use super::HTB_LEVELS;

/// Why a plan cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// Bad or inconsistent configuration.
    #[error("config: {0}")]
    Config(String),
    /// A leaf qdisc spec (`default_sqm`) that lqos cannot use.
    #[error("sqm {spec:?}: {reason}")]
    Sqm {
        /// The spec as written.
        spec: String,
        /// Why.
        reason: SqmError,
    },
    /// A circuit's `sqm` override that lqos cannot use.
    #[error("circuit {circuit:?}{}: sqm {spec:?}: {reason}", csv_line(*.line))]
    CircuitSqm {
        /// Circuit ID.
        circuit: String,
        /// 1-based CSV line of the override (0 if not from a file).
        line: usize,
        /// The spec as written.
        spec: String,
        /// Why.
        reason: SqmError,
    },
    /// A circuit names a parent node that is not in the network. Only a
    /// network built in code gets here: reading the files
    /// ([`lqos_model::load`]) leaves such circuits out of the network,
    /// unshaped, with a warning, as LibreQoS does.
    #[error("circuit {circuit:?}: parent node {parent:?} is not in network.json")]
    UnknownParent {
        /// Circuit ID.
        circuit: String,
        /// The missing node.
        parent: String,
    },
    /// Two circuits with one Circuit ID.
    #[error("circuit ID {0:?} appears twice")]
    DuplicateCircuit(String),
    /// A circuit with a zero maximum rate.
    #[error("circuit {circuit:?}: {direction} max rate is 0")]
    ZeroRate {
        /// Circuit ID.
        circuit: String,
        /// `download` or `upload`.
        direction: &'static str,
    },
    /// The hierarchy is deeper than HTB allows.
    #[error("{what} would be HTB class level {levels}; HTB allows {max} (top-level nodes are level 1): flatten network.json", max = HTB_LEVELS)]
    TooDeep {
        /// `node "X"` or `circuit "Y" under node "X"`.
        what: String,
        /// The level it would need.
        levels: u32,
    },
    /// More classes in one queue than the 16-bit minor space holds.
    #[error("queue {queue} (HTB {major:x}:) needs more than 65533 classes; use more queues or split the largest top-level node")]
    MinorOverflow {
        /// 1-based queue number.
        queue: u32,
        /// The HTB major of that queue (download side).
        major: u16,
    },
    /// More leaf qdiscs on an interface than the 16-bit handle space holds.
    #[error("interface {interface}: {needed} circuit leaf qdiscs, but only {available} qdisc handles are available (16-bit majors); give some circuits sqm `none` or spread them over more interfaces")]
    LeafMajorOverflow {
        /// The interface.
        interface: String,
        /// Leaf qdiscs wanted on it.
        needed: usize,
        /// Handles available for leaves.
        available: usize,
    },
}

/// Why an sqm spec (`default_sqm`, `--sqm`, the CSV's `sqm` column)
/// cannot be a circuit's leaf qdisc.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SqmError {
    /// Nothing but blanks.
    #[error("empty")]
    Empty,
    /// A qdisc kind lqos does not model.
    #[error("unsupported qdisc kind {0:?} (cake, fq_codel, pfifo, bfifo, none)")]
    UnsupportedKind(String),
    /// `mq` or `htb`: the tree's own kinds, never a leaf.
    #[error("mq/htb cannot be a leaf qdisc")]
    NotALeaf,
    /// The kind's options do not parse.
    #[error(transparent)]
    Syntax(Box<crate::parse::SyntaxError>),
}

impl From<crate::parse::SyntaxError> for SqmError {
    fn from(e: crate::parse::SyntaxError) -> SqmError {
        SqmError::Syntax(Box::new(e))
    }
}

/// ` (ShapedDevices line N)`, or nothing for line 0 (not from a file).
fn csv_line(line: usize) -> String {
    if line == 0 {
        String::new()
    } else {
        format!(" (ShapedDevices line {line})")
    }
}
