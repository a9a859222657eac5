//! Shared input options: `--network`, `--devices`, `--config`.
//!
//! Every verb that reads LibreQoS inputs flattens [`InputArgs`] into its
//! own arguments and calls [`InputArgs::load`].

use std::path::PathBuf;

use lqos_apply::{Inputs, LoadedInputs};
use lqos_model::{Report, Summary};

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

/// The inputs as read (see [`lqos_apply::LoadedInputs`]).
pub type Loaded = LoadedInputs;

/// Prints every problem of `report` to stderr (warnings of a plan that
/// succeeded, or everything wrong with inputs that failed).
pub fn print_report(report: &Report) {
    crate::out::eprint(format_args!("{report}"));
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
    lqos_model::summarize(&loaded.network)
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
