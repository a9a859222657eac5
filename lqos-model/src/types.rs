//! Nodes, circuits and devices as LibreQoS describes them.

use ipnet::{Ipv4Net, Ipv6Net};
use serde::{Deserialize, Serialize};
use smol_str::SmolStr;

use crate::rate::Rate;

/// A node of the hierarchy (site, AP, PoP...) from `network.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    /// Unique node name (the JSON key).
    pub name: String,
    /// Optional stable id (`"id"` in `network.json`).
    pub id: Option<String>,
    /// Optional free-form type (`"site"`, `"ap"`, ...).
    pub node_type: Option<String>,
    /// Download capacity.
    pub download: Rate,
    /// Upload capacity.
    pub upload: Rate,
    /// A virtual node is kept for grouping but gets no HTB class of its own;
    /// its children attach to its nearest non-virtual ancestor.
    pub virtual_node: bool,
}

/// One subscriber device (one CSV row).
///
/// Text fields are [`SmolStr`]: up to 23 bytes are stored inline (no
/// allocation per field when a CSV row is read), longer text once behind a
/// shared pointer (clones into the plan and its IP map copy no text).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Device {
    /// Device ID column.
    pub id: SmolStr,
    /// Device Name column.
    pub name: SmolStr,
    /// MAC column, as written (may be empty).
    pub mac: SmolStr,
    /// IPv4 addresses and ranges.
    pub ipv4: Vec<Ipv4Net>,
    /// IPv6 addresses and ranges.
    pub ipv6: Vec<Ipv6Net>,
    /// 1-based line of the CSV row this device came from (0 if not from a file).
    pub line: usize,
}

/// A per-circuit leaf-qdisc override (the optional `sqm` CSV column), as
/// written; `lqos-tc` parses it into a typed leaf spec, naming `line` when
/// it cannot.
///
/// Two overrides are equal when both halves are: `line` says where the
/// value was read, it is not part of it.
#[derive(Debug, Clone, Eq, Serialize, Deserialize)]
pub struct SqmOverride {
    /// Leaf qdisc spec for the download direction (e.g. `cake`, `fq_codel`, `none`).
    pub download: String,
    /// Leaf qdisc spec for the upload direction.
    pub upload: String,
    /// 1-based line of the CSV row it was read from (0 if not from a file).
    #[serde(default)]
    pub line: usize,
}

impl SqmOverride {
    /// An override not read from a file (`line` 0).
    pub fn new(download: impl Into<String>, upload: impl Into<String>) -> SqmOverride {
        SqmOverride {
            download: download.into(),
            upload: upload.into(),
            line: 0,
        }
    }
}

impl PartialEq for SqmOverride {
    fn eq(&self, other: &SqmOverride) -> bool {
        self.download == other.download && self.upload == other.upload
    }
}

/// A subscriber circuit: one shaped class per direction, one or more devices.
///
/// Text fields are [`SmolStr`] (see [`Device`]); the parser gives every
/// circuit of one parent node the same shared `parent` text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Circuit {
    /// Circuit ID column (unique).
    pub id: SmolStr,
    /// Circuit Name column.
    pub name: SmolStr,
    /// Parent Node name; `None` when empty (flat network or generated parent).
    pub parent: Option<SmolStr>,
    /// Guaranteed download rate.
    pub download_min: Rate,
    /// Guaranteed upload rate.
    pub upload_min: Rate,
    /// Download ceiling.
    pub download_max: Rate,
    /// Upload ceiling.
    pub upload_max: Rate,
    /// Comment column (untrusted free text).
    pub comment: SmolStr,
    /// Optional `sqm` column override.
    pub sqm: Option<SqmOverride>,
    /// The circuit's devices, in file order.
    pub devices: Vec<Device>,
}
