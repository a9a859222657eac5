//! Shim of LibreQoS's lqos_config: only what the bakery's command builder reads,
//! plus the real planner.rs.
#[path = "upstream_planner.rs"]
pub mod planner;
pub use planner::*;
use serde::Deserialize;

#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
pub enum LazyQueueMode { #[default] No, Htb, Full }
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Default)]
#[serde(rename_all = "snake_case")]
pub enum QueueMode { #[default] Shape, Observe }
impl QueueMode { pub const fn is_observe(self) -> bool { matches!(self, Self::Observe) } }

#[derive(Clone, Debug, Deserialize)]
#[serde(default)]
pub struct QueueConfig {
    pub default_sqm: String,
    pub queue_mode: QueueMode,
    pub monitor_only: bool,
    pub uplink_bandwidth_mbps: u64,
    pub downlink_bandwidth_mbps: u64,
    pub generated_pn_download_mbps: u64,
    pub generated_pn_upload_mbps: u64,
    pub lazy_queues: Option<LazyQueueMode>,
    pub fast_queues_fq_codel: Option<f64>,
}
impl Default for QueueConfig {
    fn default() -> Self {
        Self { default_sqm: "cake diffserv4".into(), queue_mode: QueueMode::Shape, monitor_only: false,
            uplink_bandwidth_mbps: 1000, downlink_bandwidth_mbps: 1000,
            generated_pn_download_mbps: 1000, generated_pn_upload_mbps: 1000,
            lazy_queues: None, fast_queues_fq_codel: None }
    }
}
#[derive(Clone, Debug, Deserialize)]
pub struct BridgeConfig { pub to_internet: String, pub to_network: String }
#[derive(Clone, Debug, Deserialize)]
pub struct SingleInterfaceConfig { pub interface: String }
#[derive(Clone, Debug, Deserialize, Default)]
pub struct Config {
    pub bridge: Option<BridgeConfig>,
    pub single_interface: Option<SingleInterfaceConfig>,
    #[serde(default)]
    pub queues: QueueConfig,
}
impl Config {
    pub fn internet_interface(&self) -> String {
        if let Some(b) = &self.bridge { b.to_internet.clone() } else { self.single_interface.as_ref().unwrap().interface.clone() }
    }
    pub fn isp_interface(&self) -> String {
        if let Some(b) = &self.bridge { b.to_network.clone() } else { self.single_interface.as_ref().unwrap().interface.clone() }
    }
    pub fn on_a_stick_mode(&self) -> bool { self.bridge.is_none() }
}
#[derive(Clone, Debug, Default)]
pub struct ShapedDevice;
