//! `PlanConfig`: what the planner needs besides the network.

use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::PlanError;
pub use crate::error::{Capacity, ConfigError, SqmError};
use crate::ops::{CakeParams, QdiscKind};
use crate::options::CakeDiffserv;
use lqos_model::config::Classifier;
use lqos_model::config::LqosConfig;
use lqos_model::Rate;

/// The most TX queues per interface lqos plans for.
const MAX_QUEUES: u32 = 4096;

/// Which interfaces get a tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Interfaces {
    /// Two-interface bridge: download shaping on `download` (lqos.conf
    /// `to_network`), upload shaping on `upload` (`to_internet`).
    Bridge {
        /// Subscriber-facing interface (download rates).
        download: String,
        /// Internet-facing interface (upload rates).
        upload: String,
    },
    /// One interface carrying both directions: the TX queues are split in
    /// half, download uses HTB majors `1..=n/2`, upload `n/2+1..=n`.
    OnAStick {
        /// The one interface.
        interface: String,
        /// VLAN towards the internet (informational).
        internet_vlan: u32,
        /// VLAN towards the subscribers (informational).
        network_vlan: u32,
    },
}

/// How top-level subtrees are spread over the TX queues (HTB qdiscs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum QueueStrategy {
    /// LibreQoS's way: top-level nodes in order, queue `i % n`.
    RoundRobin,
    /// Largest subtree first into the least-loaded queue, minimising the
    /// kernel's load cost `sum over queues of classes^2`.
    #[default]
    Balanced,
}

impl FromStr for QueueStrategy {
    type Err = PlanError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "balanced" => Ok(QueueStrategy::Balanced),
            "round-robin" | "roundrobin" | "round_robin" => Ok(QueueStrategy::RoundRobin),
            _ => Err(ConfigError::UnknownStrategy(s.to_string()).into()),
        }
    }
}

/// A leaf qdisc specification such as `cake diffserv4`, `fq_codel`,
/// `pfifo limit 1000` or `none` (no leaf qdisc).
///
/// ```
/// use lqos_tc::config::LeafSpec;
/// let s: LeafSpec = "cake besteffort rtt 300ms".parse().unwrap();
/// assert_eq!(s.to_string(), "cake besteffort rtt 300ms");
/// assert_eq!("none".parse::<LeafSpec>().unwrap(), LeafSpec::None);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum LeafSpec {
    /// No leaf qdisc (the kernel's default pfifo stays).
    None,
    /// This qdisc kind with these options.
    Qdisc(QdiscKind),
}

impl LeafSpec {
    /// LibreQoS's default, `cake diffserv4`.
    pub fn cake_diffserv4() -> LeafSpec {
        LeafSpec::Qdisc(QdiscKind::Cake(CakeParams {
            diffserv: Some(CakeDiffserv::Diffserv4),
            ..Default::default()
        }))
    }

    /// True for a cake spec.
    pub fn is_cake(&self) -> bool {
        matches!(self, LeafSpec::Qdisc(QdiscKind::Cake(_)))
    }

    /// `lqos.conf`'s `[queues] default_sqm`, parsed (the line of a bad one
    /// is `conf.queues.default_sqm.line`; [`config_problems`] reports it).
    pub fn from_config(conf: &LqosConfig) -> Result<LeafSpec, PlanError> {
        conf.queues.default_sqm.parse()
    }
}

/// The problems of the `lqos.conf` values whose grammar is this crate's
/// (`[queues] default_sqm`), each with `file` and the value's line: what
/// loading the inputs reports, so that a bad value fails at load time
/// with its place rather than when planning.
///
/// ```
/// let conf = lqos_model::config::parse_config("lqos.conf", "[queues]\ndefault_sqm = \"cake diffserv5\"\n").unwrap();
/// let p = lqos_tc::config::config_problems(&conf, "lqos.conf");
/// assert!(p[0].to_string().starts_with("lqos.conf:2: [queues] default_sqm: sqm \"cake diffserv5\""), "{}", p[0]);
/// ```
pub fn config_problems(conf: &LqosConfig, file: &str) -> Vec<lqos_model::Problem> {
    let mut out = Vec::new();
    if let Err(e) = LeafSpec::from_config(conf) {
        out.push(
            lqos_model::Problem::error(file, format!("[queues] default_sqm: {e}"))
                .at_opt(conf.queues.default_sqm.line),
        );
    }
    out
}

/// One direction of a circuit's `sqm` override (the CSV column), parsed.
///
/// ```
/// use lqos_tc::config::{LeafSpec, SqmChoice};
/// assert_eq!("".parse::<SqmChoice>().unwrap(), SqmChoice::Default);
/// assert_eq!("Cake".parse::<SqmChoice>().unwrap(), SqmChoice::Cake);
/// assert_eq!("none".parse::<SqmChoice>().unwrap(), SqmChoice::Spec(LeafSpec::None));
/// assert!("cake diffserv5".parse::<SqmChoice>().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SqmChoice {
    /// Empty: the configured `default_sqm` (with LibreQoS's fq_codel
    /// threshold and cake rtt raise for slow circuits).
    Default,
    /// Bare `cake`: the configured default if it is cake, else `cake
    /// diffserv4` (with the rtt raise).
    Cake,
    /// Any other spec (`none`, `fq_codel`, `cake diffserv8 rtt 50ms`,
    /// `pfifo limit 100`); a cake spec without `rtt` gets the rtt raise.
    Spec(LeafSpec),
}

impl FromStr for SqmChoice {
    type Err = PlanError;
    /// Case-insensitive, like LibreQoS.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s.is_empty() {
            Ok(SqmChoice::Default)
        } else if s.eq_ignore_ascii_case("cake") {
            Ok(SqmChoice::Cake)
        } else {
            s.parse().map(SqmChoice::Spec)
        }
    }
}

/// A circuit's `sqm` override, parsed for both directions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CircuitSqm {
    /// Download direction.
    pub download: SqmChoice,
    /// Upload direction.
    pub upload: SqmChoice,
}

impl CircuitSqm {
    /// Parses circuit `circuit`'s override; an error names the circuit
    /// and the CSV line the override was read from.
    pub fn parse(o: &lqos_model::SqmOverride, circuit: &str) -> Result<CircuitSqm, PlanError> {
        let half = |s: &str| {
            s.parse::<SqmChoice>().map_err(|e| match e {
                PlanError::Sqm { spec, reason } => PlanError::CircuitSqm {
                    circuit: circuit.to_string(),
                    line: o.line,
                    spec,
                    reason,
                },
                other => other,
            })
        };
        Ok(CircuitSqm {
            download: half(&o.download)?,
            upload: half(&o.upload)?,
        })
    }
}

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

/// LibreQoS's default `fast_queues_fq_codel`: 1000 Mbps.
pub const FQ_CODEL_FROM: Rate = Rate::from_mbps(1000);

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
