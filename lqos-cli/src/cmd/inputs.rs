//! Shared input options: `--network`, `--devices`, `--config`, and the
//! planner's `--queues`, `--sqm`, `--strategy`, `--classifier`.
//!
//! Every verb that reads LibreQoS inputs flattens [`InputArgs`] into its
//! own arguments and calls [`InputArgs::load`]; every verb that plans
//! flattens [`PlanOptions`] too.

use std::path::PathBuf;

use anyhow::Context;
use lqos_apply::inputs::{Inputs, LoadedInputs, PlanOverrides};
use lqos_model::config::Classifier;
use lqos_model::{Report, Summary};
use lqos_tc::config::{LeafSpec, QueueStrategy};

/// Default `--config` path (LibreQoS keeps `/etc/lqos.conf`; lqos looks in
/// the current directory first, like the other two files).
pub const DEFAULT_CONFIG: &str = "lqos.conf";

/// Where the LibreQoS inputs are.
#[derive(clap::Args, Debug, Clone)]
pub struct InputArgs {
    /// The node hierarchy (LibreQoS network.json).
    #[arg(long, value_name = "FILE", default_value = "network.json")]
    pub network: PathBuf,
    /// The circuits and devices (LibreQoS ShapedDevices.csv).
    #[arg(long, value_name = "FILE", default_value = "ShapedDevices.csv")]
    pub devices: PathBuf,
    /// The config (LibreQoS lqos.conf, TOML) [default: lqos.conf if it exists,
    /// else built-in defaults].
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// The inputs as read (see [`lqos_apply::inputs::LoadedInputs`]).
pub type Loaded = LoadedInputs;

/// Prints every problem of `report` to stderr (warnings of a plan that
/// succeeded, or everything wrong with inputs that failed).
pub fn print_report(report: &Report) {
    crate::out::eprint(format_args!("{}", crate::hints::report(report)));
}

/// Prints, to stderr as warnings, the nodes whose circuits' minimums the
/// planner squashed (what the files promise and the tree cannot
/// guarantee).
pub fn print_squashed(plan: &lqos_tc::Plan) {
    for s in &plan.squashed {
        crate::out::note!("warning: {s}");
    }
}

/// The counts of nodes, circuits, devices and the depth.
pub fn summary(loaded: &Loaded) -> Summary {
    lqos_model::Summary::of(&loaded.network)
}

impl InputArgs {
    /// The files to read. Without `--config`, `lqos.conf` in the current
    /// directory is used if it exists, else the built-in defaults (said on
    /// stderr).
    pub fn inputs(&self) -> Inputs {
        let inputs = self.inputs_quiet();
        if inputs.config.is_none() {
            crate::out::note!(
                "lqos: no {DEFAULT_CONFIG} in the current directory; using built-in defaults (give --config to use another file)"
            );
        }
        inputs
    }

    /// [`InputArgs::inputs`] without the notice about a missing config.
    pub fn inputs_quiet(&self) -> Inputs {
        let config = self.config.clone().or_else(|| {
            let p = PathBuf::from(DEFAULT_CONFIG);
            p.exists().then_some(p)
        });
        Inputs {
            network: self.network.clone(),
            devices: self.devices.clone(),
            config,
        }
    }

    /// Reads the three files (naming the path in any I/O error) and parses
    /// and validates them. Validation problems do not fail: they are in
    /// [`LoadedInputs::report`].
    pub fn load(&self) -> anyhow::Result<Loaded> {
        Ok(self.inputs().load()?)
    }
}

/// Planner options shared by the verbs that plan.
#[derive(clap::Args, Debug, Clone)]
pub struct PlanOptions {
    /// TX queues per interface [default: lqos.conf override_available_queues,
    /// else 16 for plan/show/diff, the interfaces' TX queues for apply/verify].
    #[arg(long, value_name = "N")]
    pub queues: Option<u32>,
    /// Leaf qdisc for circuits, overriding lqos.conf default_sqm
    /// (e.g. "cake diffserv4", "fq_codel", "pfifo limit 1000", "none").
    #[arg(long, value_name = "SPEC")]
    pub sqm: Option<String>,
    /// How top-level subtrees are spread over the queues [default:
    /// balanced].
    #[arg(long, value_enum)]
    pub strategy: Option<Strategy>,
    /// Classifier: `tc` plans clsact + flower + skbedit filters with the
    /// tree; `none` leaves classification to an external program (feed it
    /// ip_map.csv) [default: lqos.conf [lqos] classifier, else none].
    // The doc comment is the help text: `[lqos]` is a TOML section, not a link.
    #[allow(rustdoc::broken_intra_doc_links)]
    #[arg(long, value_enum, value_name = "tc|none")]
    pub classifier: Option<ClassifierArg>,
}

/// `--classifier` values.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClassifierArg {
    /// clsact + flower + skbedit filters (needs cls_flower, act_skbedit, Linux >= 6.0).
    Tc,
    /// No classifier ops (LibreQoS's XDP or another program classifies).
    None,
}

impl From<ClassifierArg> for Classifier {
    fn from(c: ClassifierArg) -> Classifier {
        match c {
            ClassifierArg::Tc => Classifier::Tc,
            ClassifierArg::None => Classifier::None,
        }
    }
}

/// `--strategy` values.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// Largest subtree first into the least-loaded queue (default).
    Balanced,
    /// LibreQoS's round robin over top-level nodes.
    RoundRobin,
}

/// A strategy as `--strategy` names it.
pub fn strategy_name(s: QueueStrategy) -> &'static str {
    match s {
        QueueStrategy::Balanced => "balanced",
        QueueStrategy::RoundRobin => "round-robin",
    }
}

impl PlanOptions {
    /// Whether any planner option is given (a command that describes the
    /// plan last applied then plans the input files instead).
    pub fn given(&self) -> bool {
        self.queues.is_some()
            || self.sqm.is_some()
            || self.strategy.is_some()
            || self.classifier.is_some()
    }

    /// The overrides these options give on top of lqos.conf.
    pub fn overrides(&self) -> anyhow::Result<PlanOverrides> {
        let sqm = match &self.sqm {
            Some(s) => Some(
                s.parse::<LeafSpec>()
                    .with_context(|| format!("--sqm {s:?}"))?,
            ),
            None => None,
        };
        Ok({
            let mut p = PlanOverrides::default();
            p.queues = self.queues;
            p.sqm = sqm;
            p.strategy = self.strategy.map(|s| match s {
                Strategy::Balanced => QueueStrategy::Balanced,
                Strategy::RoundRobin => QueueStrategy::RoundRobin,
            });
            p.classifier = self.classifier.map(Classifier::from);
            p
        })
    }
}
