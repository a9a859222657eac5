//! The planner's settings besides [`PlanConfig`](crate::PlanConfig)'s own: which
//! interfaces, the queue strategy, the leaf qdiscs, and their errors.

use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::PlanError;
pub use crate::error::{Capacity, ConfigError, SqmError};
use crate::ops::{CakeParams, QdiscKind};
use crate::options::CakeDiffserv;
use lqos_model::config::LqosConfig;
use lqos_model::Rate;

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

/// LibreQoS's default `fast_queues_fq_codel`: 1000 Mbps.
pub const FQ_CODEL_FROM: Rate = Rate::from_mbps(1000);
