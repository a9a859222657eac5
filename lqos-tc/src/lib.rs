//! Pure tc planner for LibreQoS-style shaping trees.
//!
//! `lqos-tc` turns a validated [`lqos_model::Network`] and a [`PlanConfig`]
//! into a [`Plan`]: for each interface an ordered stream of typed [`TcOp`]s
//! (mq root `7fff:`, one HTB per TX queue with top class `:1` and default
//! class `:2`, site and circuit classes from minor 3, a leaf qdisc per
//! circuit with an explicit handle), plus a stable [`Allocation`] of
//! queues, classids and leaf handles that the next plan reuses. Ops render
//! as `tc -b` text ([`render`]) and parse back ([`parse`]); two trees diff
//! into the minimal op stream between them ([`diff()`]), checked on an
//! in-memory model of the kernel's rules ([`TcTree::apply`]). Whether a
//! live object satisfies the plan (and whether a change can be incremental)
//! is decided once, in [`rules`]; option words and kernel numbers live
//! once, in [`options`]. No I/O, no clock.
//!
//! ```
//! use lqos_model::{Circuit, Network, Node, Rate};
//! use lqos_tc::{diff, plan, render, PlanConfig};
//!
//! let mut net = Network::new();
//! net.add_node(None, Node { name: "Site_1".into(), id: None, node_type: None,
//!     download: Rate::from_mbps(1000), upload: Rate::from_mbps(1000), virtual_node: false }).unwrap();
//! net.add_circuit(Circuit { id: "c1".into(), name: "Ann".into(), parent: Some("Site_1".into()),
//!     download_min: Rate::from_mbps(2), upload_min: Rate::from_mbps(1),
//!     download_max: Rate::from_mbps(50), upload_max: Rate::from_mbps(10),
//!     comment: Default::default(), sqm: None, devices: vec![] });
//! let cfg = PlanConfig::bridge("ens19", "ens20", 4);
//! let p = plan(&net, &cfg, None).unwrap();
//! let text = render::render_interface(p.interface("ens19").unwrap(), false);
//! assert!(text.starts_with("qdisc replace dev ens19 root handle 7fff: mq\n"));
//! assert!(text.contains("htb rate 2mbit ceil 50mbit prio 3 quantum 2999"));
//!
//! // Re-planning with the previous allocation changes nothing.
//! let again = plan(&net, &cfg, Some(&p.allocation)).unwrap();
//! let ops = diff::diff(&p.interfaces[0].tree(), &again.interfaces[0].tree());
//! assert!(ops.is_empty());
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod classify;
mod config;
pub mod diff;
mod error;
mod filter;
pub mod fuzzing;
mod handle;
pub mod ipmap;
pub mod libreqos;
pub mod memory;
mod ops;
pub mod options;
pub mod order;
pub mod parse;
mod plan;
pub mod record;
pub mod render;
pub mod rules;
mod text;
mod tree;

pub use classify::{Classifier, FilterKey, FilterProto, FlowerFilter, MatchSide};
pub use config::{
    config_problems, CircuitSqm, Interfaces, LeafSpec, PlanConfig, QueueStrategy, SqmChoice,
    FQ_CODEL_FROM,
};
pub use diff::{diff, DiffSummary};
pub use diff::{known_diff, KnownDiffError};
pub use handle::{HandleError, TcHandle};
pub use ipmap::{IpDetails, IpMap, IpMapEntry, Steer, SteerDetails};
pub use ops::HTB_MAX_DEPTH;
pub use ops::{CakeParams, Class, FqCodelParams, HtbClass, HtbQdisc, Qdisc, QdiscKind, TcOp};
pub use options::{CakeAckFilter, CakeDiffserv, CakeFlowMode};
pub use order::locality_order;
pub use parse::{parse_batch, ParseError, SyntaxError};
pub use plan::replan;
pub use plan::replan::{replan_circuits, PlanIndex, Replan, ReplanFallback};
pub use plan::{
    default_class_rate, default_leaf_major, just_below, plan, quantum_for, r2q_for, squashed_min,
    squashed_rate, squashes, Allocation, CircuitSlot, Direction, FilterSlot, InterfacePlan,
    NodeSlot, Plan, PlanError, SqmError, Squashed, MIN_RATE, MQ_HANDLE, QUANTUM_MAX, QUANTUM_MIN,
};
pub use record::{PlanInputs, PlanRecord, PlanRecordRef, PrefixRow, RecordError, RECORD_FORMAT};
pub use render::{
    render_combined, render_combined_to, render_interface, render_interface_to, render_line,
};
pub use tree::{TcTree, TreeError};

// The README's example runs as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
