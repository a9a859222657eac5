//! Pure model of a LibreQoS-style shaping hierarchy.
//!
//! `lqos-model` reads LibreQoS's `ShapedDevices.csv`, `network.json` and
//! `lqos.conf` unchanged, validates them into a [`Network`] (nodes in a
//! petgraph graph, plus circuits and their devices), and generates synthetic
//! networks for tests and benches. It does no I/O of its own: parsers take
//! readers or strings plus a file label for messages, so any Rust tool can
//! embed it.
//!
//! - [`load`] / [`load_with_config`]: parse, build the [`Network`] and
//!   [`validate`] in one call, returning a [`Loaded`] with every problem in
//!   a [`Report`]. Only unreadable input is an `Err` ([`ModelError`]).
//! - One file at a time: [`network_json`], [`shaped_devices`] and
//!   [`config`] (`lqos.conf`); [`devices_index`] re-reads only the rows of
//!   `ShapedDevices.csv` an edit changed.
//! - [`generate`]: a deterministic synthetic ISP network ([`GenParams`]),
//!   and the writers of the files a LibreQoS user would have
//!   ([`mod@write`]).
//!
//! ```
//! use lqos_model::load;
//!
//! let network = r#"{
//!   "Site_1": {"downloadBandwidthMbps": 1000, "uploadBandwidthMbps": 1000,
//!     "children": {"AP_A": {"downloadBandwidthMbps": 500, "uploadBandwidthMbps": 500}}}
//! }"#;
//! let devices = "\
//! Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,MAC,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,Comment
//! 10001,\"Main St, 5\",1,Router,AP_A,,100.64.0.1,,25,5,100,20,
//! 10002,Shop,2,Router,AP_A,,100.64.0.1,,25,5,100,20,
//! 10003,Barn,3,Router,AP_Z,,100.64.0.3,,25,5,100,20,
//! ";
//! let loaded = load(("network.json", network), ("ShapedDevices.csv", devices.as_bytes()));
//! // 10003's parent node is not in network.json: it is read but not shaped.
//! assert_eq!(loaded.summary().circuits, 2);
//! assert_eq!(loaded.unshaped[0].id, "10003");
//! assert_eq!(loaded.summary().depth, 2);
//! let problems: Vec<String> = loaded.report.problems.iter().map(|p| format!("{}: {p}", p.severity)).collect();
//! assert_eq!(problems, [
//!     "error: ShapedDevices.csv:3: circuit \"10002\": IPv4 100.64.0.1/32 overlaps 100.64.0.1/32 of circuit \"10001\" (line 2)",
//!     "warning: ShapedDevices.csv:4: circuit \"10003\": parent node \"AP_Z\" does not exist in network.json; \
//! the circuit is not shaped (no class, no leaf, no IP mapping: its traffic goes to the default class), as LibreQoS does",
//! ]);
//! assert!(loaded.require_valid().is_err());
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod config;
pub mod devices_index;
mod error;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod generate;
mod load;
mod network;
pub mod network_json;
mod rate;
mod report;
pub mod shaped_devices;
mod types;
mod validate;
pub mod write;

pub use error::ModelError;
pub use generate::{generate, GenParams, Generated};
pub use load::{load, load_with_config, Loaded, Summary};
pub use network::{Network, NetworkError, NodeIdx};
pub use rate::{Rate, RateError};
pub use report::{Problem, Report, Severity};
/// The string type of ids and names (inline up to 23 bytes).
pub use smol_str::SmolStr;
pub use types::{Circuit, Device, Node, SqmOverride};
pub use validate::validate;

// The README's example runs as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
