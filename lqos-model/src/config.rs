//! The subset of LibreQoS's `lqos.conf` (TOML) that shaping needs.
//!
//! Unknown sections and keys are ignored, so a user's full `lqos.conf`
//! loads unchanged.

use serde::{Deserialize, Serialize};

/// The parts of `lqos.conf` lqos uses.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct LqosConfig {
    /// Two-interface bridge: `to_network` (download) / `to_internet` (upload).
    #[serde(default)]
    pub bridge: Option<BridgeConfig>,
    /// One interface on a stick with two VLANs.
    #[serde(default)]
    pub single_interface: Option<SingleInterfaceConfig>,
    /// Queue settings.
    #[serde(default)]
    pub queues: QueuesConfig,
    /// lqos's own `[lqos]` section (LibreQoS ignores unknown sections).
    #[serde(default)]
    pub lqos: LqosSection,
}

/// `[lqos]`: settings only lqos reads.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LqosSection {
    /// `classifier = "tc" | "none"` (checked by the planner; default none).
    pub classifier: Option<String>,
}

/// `[bridge]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BridgeConfig {
    /// Internet-facing interface (upload shaping).
    pub to_internet: String,
    /// Subscriber-facing interface (download shaping).
    pub to_network: String,
}

/// `[single_interface]` (on-a-stick).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SingleInterfaceConfig {
    /// The one interface.
    pub interface: String,
    /// VLAN towards the internet.
    #[serde(default)]
    pub internet_vlan: u32,
    /// VLAN towards the subscribers.
    #[serde(default)]
    pub network_vlan: u32,
}

/// `[queues]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct QueuesConfig {
    /// Leaf qdisc for circuits (`cake diffserv4`, `fq_codel`, `pfifo`, `none`).
    pub default_sqm: String,
    /// Upload link capacity in Mbps.
    pub uplink_bandwidth_mbps: u64,
    /// Download link capacity in Mbps.
    pub downlink_bandwidth_mbps: u64,
    /// Download rate of generated parent nodes, Mbps.
    pub generated_pn_download_mbps: u64,
    /// Upload rate of generated parent nodes, Mbps.
    pub generated_pn_upload_mbps: u64,
    /// Use this many queues instead of probing the NIC (0 or absent = probe).
    pub override_available_queues: Option<u32>,
    /// LibreQoS's binpacking switch (lqos's balanced strategy when true).
    pub use_binpacking: bool,
}

impl Default for QueuesConfig {
    fn default() -> Self {
        QueuesConfig {
            default_sqm: "cake diffserv4".to_string(),
            uplink_bandwidth_mbps: 1000,
            downlink_bandwidth_mbps: 1000,
            generated_pn_download_mbps: 1000,
            generated_pn_upload_mbps: 1000,
            override_available_queues: None,
            use_binpacking: false,
        }
    }
}

/// Reads `lqos.conf` (TOML); `file` names it in messages.
///
/// Unknown sections and keys are ignored, so a full LibreQoS `lqos.conf`
/// loads unchanged. A missing section gets its defaults.
///
/// ```
/// let conf = "[bridge]\nto_internet = \"ens20\"\nto_network = \"ens19\"\n[tuning]\nfoo = 1\n";
/// let c = lqos_model::parse_config("lqos.conf", conf).unwrap();
/// assert_eq!(c.bridge.unwrap().to_network, "ens19");
/// assert_eq!(c.queues.default_sqm, "cake diffserv4");
/// ```
pub fn parse_config(file: &str, text: &str) -> Result<LqosConfig, crate::ModelError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    toml::from_str(text).map_err(|e| crate::ModelError::Toml {
        file: file.to_string(),
        line: e.span().map(|s| {
            text.as_bytes()[..s.start.min(text.len())]
                .iter()
                .filter(|&&b| b == b'\n')
                .count()
                + 1
        }),
        message: e.message().trim().to_string(),
    })
}
