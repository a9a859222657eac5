//! Pure model of a LibreQoS-style shaping hierarchy.
//!
//! `lqos-model` reads LibreQoS's `ShapedDevices.csv`, `network.json` and
//! `lqos.conf` unchanged, validates them into a [`Network`] (nodes in a
//! petgraph graph, plus circuits and their devices), and generates synthetic
//! networks for tests and benches. It does no I/O of its own: parsers take
//! readers or strings, so any Rust tool can embed it.
//!
//! ```
//! use lqos_model::{Network, Node, Rate};
//! let mut net = Network::new();
//! let site = Node {
//!     name: "Site_1".into(), id: None, node_type: Some("site".into()),
//!     download: Rate::from_mbps(1000), upload: Rate::from_mbps(1000), virtual_node: false,
//! };
//! net.add_node(None, site).unwrap();
//! assert_eq!(net.depth(), 1);
//! ```
#![forbid(unsafe_code)]

mod config;
mod network;
mod rate;
mod types;

pub use config::{BridgeConfig, LqosConfig, QueuesConfig, SingleInterfaceConfig};
pub use network::{Network, NetworkError, NodeIdx};
pub use rate::{Rate, RateError};
pub use types::{Circuit, Device, Node, SqmOverride};
