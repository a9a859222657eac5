//! Pure tc planner for LibreQoS-style shaping trees.
//!
//! `lqos-tc` turns a validated [`lqos_model::Network`] and a [`PlanConfig`]
//! into a [`Plan`]: for each interface an ordered stream of typed [`TcOp`]s
//! (mq root `7fff:`, one HTB per TX queue with top class `:1` and default
//! class `:2`, site and circuit classes from minor 3, a leaf qdisc per
//! circuit with an explicit handle), plus a stable [`Allocation`] of
//! queues, classids and leaf handles that the next plan reuses. No I/O, no
//! clock.
//!
//! A tool that embeds the planner reads LibreQoS's three files, plans them
//! and prints the ops as `tc -b` lines:
//!
//! ```
//! use lqos_tc::{plan, render, PlanConfig};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // The files as LibreQoS keeps them (a tool reads them from disk).
//! let network_json = r#"{"Site_1": {"downloadBandwidthMbps": 1000, "uploadBandwidthMbps": 1000}}"#;
//! let shaped_devices = "\
//! Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,MAC,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,Comment
//! 10001,Ann,1,Router,Site_1,,100.64.0.1,,2,1,50,10,
//! ";
//! let lqos_conf = "[bridge]\nto_network = \"ens19\"\nto_internet = \"ens20\"\n";
//! let loaded = lqos_model::load_with_config(
//!     ("network.json", network_json),
//!     ("ShapedDevices.csv", shaped_devices.as_bytes()),
//!     Some(("lqos.conf", lqos_conf)),
//! );
//! loaded.require_valid()?;
//! let cfg = PlanConfig::from_lqos_config(&loaded.config, 4)?; // 4 TX queues
//! let p = plan(&loaded.network, &cfg, None)?;
//! for ip in &p.interfaces {
//!     for op in &ip.ops {
//!         println!("tc {}", render::render_line(&ip.dev, op));
//!     }
//! }
//! let text = render::render_interface(p.interface("ens19").unwrap(), false);
//! assert!(text.starts_with("qdisc replace dev ens19 root handle 7fff: mq\n"));
//! assert!(text.contains("htb rate 2mbit ceil 50mbit prio 3 quantum 2999"));
//!
//! // Re-planned with the previous allocation, nothing changes: no ops.
//! let again = plan(&loaded.network, &cfg, Some(&p.allocation))?;
//! assert!(lqos_tc::diff(&p.interfaces[0].tree(), &again.interfaces[0].tree()).is_empty());
//! # Ok(())
//! # }
//! ```
//!
//! The root holds that path: [`plan`], its [`PlanConfig`], [`Plan`]
//! (with its [`InterfacePlan`]s and [`Allocation`]) and [`PlanError`];
//! [`TcOp`] and [`TcHandle`]; [`diff`] (two trees into the fewest ops,
//! checked on an in-memory model of the kernel's rules,
//! [`tree::TcTree::apply`]), [`diff_plans`] and [`DiffSummary`]. The rest
//! is in modules:
//!
//! - [`config`]: the planner's settings; [`ops`] and [`options`]: the
//!   qdiscs and classes an op names and their option words;
//!   [`classify`]: the tc classifier's filters; [`tree`]: the kernel's tree
//!   as a value.
//! - [`render`] and [`parse`]: ops as `tc -b` text and back; [`record`]:
//!   the compact record that re-derives the identical plan; [`ipmap`]: every
//!   address's circuit and class.
//! - [`allocation`], [`rates`] and [`order`]: where the planner puts
//!   things, its rate and quantum arithmetic, the op order; [`replan`]: a
//!   few circuits re-planned in place.
//! - [`rules`]: the one place that decides whether a live object satisfies
//!   the plan (diff, verify and lazy leaves alike); [`memory`]: the kernel
//!   memory of a tree; [`libreqos`]: what a LibreQoS box keeps, compared
//!   with a plan and adopted.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod classify;
pub mod config;
mod diff;
mod error;
mod filter;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod handle;
pub mod ipmap;
pub mod libreqos;
pub mod memory;
mod op;
pub mod ops;
pub mod options;
pub mod order;
pub mod parse;
mod plan;
mod plan_config;
pub mod record;
pub mod render;
pub mod rules;
mod text;
pub mod tree;

pub use diff::{diff, diff_plans, DiffSummary};
pub use error::PlanError;
pub use handle::TcHandle;
pub use op::TcOp;
pub use plan::{plan, Allocation, InterfacePlan, Plan};
pub use plan_config::PlanConfig;

pub mod allocation {
    //! Where the planner puts things: the slots of nodes, circuits and
    //! filters in an [`Allocation`](crate::Allocation), the directions, and the fixed handles of
    //! the layout.

    pub use crate::plan::{
        default_leaf_major, CircuitSlot, Direction, FilterSlot, NodeSlot, MQ_HANDLE,
    };
}

pub mod rates {
    //! The planner's rate and quantum arithmetic: LibreQoS's rules for class
    //! rates, quanta and the squashing of minimums.

    pub use crate::plan::{
        default_class_rate, just_below, quantum_for, r2q_for, squashed_min, squashed_rate,
        squashes, Squashed, MIN_RATE, QUANTUM_MAX, QUANTUM_MIN,
    };
}

pub mod replan {
    //! Re-planning a few circuits in place, for edits that change circuits'
    //! attributes but not the tree's shape (a CRM changing a plan's rates, a
    //! name, a device's addresses).
    //!
    //! [`replan_circuits`] patches a [`Plan`](crate::Plan) so that it equals
    //! what [`plan`](crate::plan()) gives for the edited network with the old
    //! plan's allocation as `previous`: same classids, leaf handles and filter
    //! handles, same op order. It handles circuits that keep their Circuit
    //! ID, parent node and leaf qdiscs (present or not, per direction);
    //! anything else is refused with the reason ([`Replan::Full`]) and the
    //! caller plans the whole network. [`known_diff`] then gives the ops that
    //! take a model of the kernel to the patched objects, as
    //! [`diff`](crate::diff()) would.

    pub use crate::diff::{known_diff, KnownDiffError};
    pub use crate::plan::replan::{replan_circuits, PlanIndex, Replan, ReplanFallback};
}

// The README's example runs as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
