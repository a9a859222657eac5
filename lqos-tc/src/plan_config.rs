//! [`PlanConfig`]: what the planner needs besides the network.

use serde::{Deserialize, Serialize};

use crate::config::{Interfaces, LeafSpec, QueueStrategy, FQ_CODEL_FROM};
use crate::error::{Capacity, ConfigError, PlanError};
use lqos_model::config::{Classifier, LqosConfig};
use lqos_model::Rate;

/// The most TX queues per interface lqos plans for.
const MAX_QUEUES: u32 = 4096;

/// Everything the planner needs besides the [`lqos_model::Network`].
///
/// ```
/// use lqos_tc::PlanConfig;
/// use lqos_tc::config::Interfaces;
/// let cfg = PlanConfig::bridge("ens19", "ens20", 4);
/// assert_eq!(cfg.queues, 4);
/// assert!(matches!(cfg.interfaces, Interfaces::Bridge { .. }));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PlanConfig {
    /// Interfaces and how the directions map onto them.
    pub interfaces: Interfaces,
    /// TX queues of the interface(s) (given, not probed). On a stick each
    /// direction gets `queues / 2`.
    pub queues: u32,
    /// Download link capacity (top class of every download queue).
    pub download_capacity: Rate,
    /// Upload link capacity.
    pub upload_capacity: Rate,
    /// Leaf qdisc for circuits (and each queue's default class).
    pub default_sqm: LeafSpec,
    /// Queue assignment strategy.
    pub strategy: QueueStrategy,
    /// Download rate of generated parent nodes.
    pub generated_pn_download: Rate,
    /// Upload rate of generated parent nodes.
    pub generated_pn_upload: Rate,
    /// LibreQoS's `fast_queues_fq_codel` (default [`FQ_CODEL_FROM`]):
    /// circuits without an `sqm` override whose ceiling is at least this get
    /// `fq_codel` instead of the default leaf (unless the default is
    /// `none`). `None` disables.
    pub fq_codel_threshold: Option<Rate>,
    /// Which classifier the plan includes (`none`: the IP map only, for
    /// an external classifier; `tc`: clsact + flower + skbedit filters).
    #[serde(default)]
    pub classifier: Classifier,
    /// LibreQoS's `queue_mode = "observe"`: only the `mq` roots, no shaping
    /// tree and no classifier (a baseline with nothing shaped).
    #[serde(default)]
    pub observe: bool,
}

impl PlanConfig {
    /// A bridge config with LibreQoS's defaults (1 Gbit links, `cake
    /// diffserv4`, balanced).
    pub fn bridge(download: &str, upload: &str, queues: u32) -> PlanConfig {
        PlanConfig {
            interfaces: Interfaces::Bridge {
                download: download.to_string(),
                upload: upload.to_string(),
            },
            queues,
            download_capacity: Rate::from_mbps(1000),
            upload_capacity: Rate::from_mbps(1000),
            default_sqm: LeafSpec::cake_diffserv4(),
            strategy: QueueStrategy::Balanced,
            generated_pn_download: Rate::from_mbps(1000),
            generated_pn_upload: Rate::from_mbps(1000),
            fq_codel_threshold: Some(FQ_CODEL_FROM),
            classifier: Classifier::None,
            observe: false,
        }
    }

    /// Builds the config from `lqos.conf` and the TX queue count (which the
    /// caller probes or takes from `override_available_queues`).
    pub fn from_lqos_config(conf: &LqosConfig, queues: u32) -> Result<PlanConfig, PlanError> {
        // A [bridge] means bridge mode (LibreQoS's `on_a_stick_mode()` is
        // "no [bridge]"), whatever [single_interface] says.
        let interfaces = match (&conf.bridge, &conf.single_interface) {
            (Some(b), _) => Interfaces::Bridge {
                download: b.to_network.clone(),
                upload: b.to_internet.clone(),
            },
            (None, Some(s)) => Interfaces::OnAStick {
                interface: s.interface.clone(),
                internet_vlan: s.internet_vlan,
                network_vlan: s.network_vlan,
            },
            (None, None) => return Err(ConfigError::NoInterfaces.into()),
        };
        let q = &conf.queues;
        let cfg = PlanConfig {
            interfaces,
            queues,
            download_capacity: Rate::from_mbps(q.downlink_bandwidth_mbps),
            upload_capacity: Rate::from_mbps(q.uplink_bandwidth_mbps),
            default_sqm: LeafSpec::from_config(conf)?,
            strategy: QueueStrategy::Balanced,
            generated_pn_download: Rate::from_mbps(q.generated_pn_download_mbps),
            generated_pn_upload: Rate::from_mbps(q.generated_pn_upload_mbps),
            fq_codel_threshold: Some(q.fast_queues_fq_codel.unwrap_or(FQ_CODEL_FROM)),
            classifier: conf.lqos.classifier,
            observe: q.observe(),
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// HTB queues per direction (`queues`, or `queues / 2` on a stick).
    pub fn queues_per_direction(&self) -> u32 {
        match self.interfaces {
            Interfaces::Bridge { .. } => self.queues,
            Interfaces::OnAStick { .. } => self.queues / 2,
        }
    }

    /// Checks the values that make a plan impossible.
    pub fn validate(&self) -> Result<(), PlanError> {
        let per_dir = self.queues_per_direction();
        if per_dir == 0 {
            return Err(PlanError::Config(match self.interfaces {
                Interfaces::OnAStick { .. } => ConfigError::TooFewStickQueues {
                    queues: self.queues,
                },
                Interfaces::Bridge { .. } => ConfigError::NoQueues,
            }));
        }
        if self.queues > MAX_QUEUES {
            return Err(ConfigError::TooManyQueues {
                queues: self.queues,
                max: MAX_QUEUES,
            }
            .into());
        }
        let check_if = |name: &str| -> Result<(), PlanError> {
            let ok = !name.is_empty()
                && name.len() < 16
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.@".contains(&b));
            if ok {
                Ok(())
            } else {
                Err(ConfigError::InterfaceName(name.to_string()).into())
            }
        };
        match &self.interfaces {
            Interfaces::Bridge { download, upload } => {
                check_if(download)?;
                check_if(upload)?;
                if download == upload {
                    return Err(ConfigError::SameInterface(download.clone()).into());
                }
            }
            Interfaces::OnAStick { interface, .. } => check_if(interface)?,
        }
        let min = Rate::from_mbps(2);
        for (what, rate) in [
            (Capacity::Download, self.download_capacity),
            (Capacity::Upload, self.upload_capacity),
            (Capacity::GeneratedDownload, self.generated_pn_download),
            (Capacity::GeneratedUpload, self.generated_pn_upload),
        ] {
            if rate < min {
                return Err(ConfigError::TooSmall { what, rate, min }.into());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bad config is a typed reason, its message as clear as the text
    /// it replaced.
    #[test]
    fn config_errors_are_typed_and_say_what_is_wrong() {
        let err = |cfg: &PlanConfig| match cfg.validate() {
            Err(PlanError::Config(e)) => e,
            r => panic!("{r:?}"),
        };
        let mut c = PlanConfig::bridge("ens19", "ens20", 4);
        c.download_capacity = Rate::from_mbps(1);
        let e = err(&c);
        assert_eq!(
            e,
            ConfigError::TooSmall {
                what: Capacity::Download,
                rate: Rate::from_mbps(1),
                min: Rate::from_mbps(2)
            }
        );
        assert_eq!(
            PlanError::from(e).to_string(),
            "config: download capacity 1 Mbps is too small (at least 2 Mbps)"
        );
        let c = PlanConfig::bridge("ens19", "ens19", 4);
        assert_eq!(
            err(&c).to_string(),
            "download and upload interface are both \"ens19\"; use [single_interface] for on-a-stick"
        );
        let c = PlanConfig::bridge("ens19", "ens20", 5000);
        assert_eq!(
            err(&c).to_string(),
            "5000 queues is more than lqos supports (4096)"
        );
        assert_eq!(
            "sideways".parse::<QueueStrategy>().unwrap_err().to_string(),
            "config: unknown queue strategy \"sideways\" (expected balanced or round-robin)"
        );
    }
}
