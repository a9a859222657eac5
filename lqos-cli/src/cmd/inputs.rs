//! Shared input options: `--network`, `--devices`, `--config`.
//!
//! Every verb that reads LibreQoS inputs flattens [`InputArgs`] into its
//! own arguments and calls [`InputArgs::load`].

use std::path::{Path, PathBuf};

use anyhow::Context;
use lqos_model::{LqosConfig, Network, Report, Summary};

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

/// The inputs as read, with every problem found (not yet judged).
#[derive(Debug, Clone)]
#[allow(dead_code)] // `config` is for plan/apply
pub struct Loaded {
    /// Nodes and circuits (whatever could be read).
    pub network: Network,
    /// The config (defaults if none).
    pub config: LqosConfig,
    /// Every parse and validation problem of all three files.
    pub report: Report,
    /// The config file actually read, if any.
    pub config_path: Option<PathBuf>,
}

impl Loaded {
    /// Counts of nodes, circuits, devices and the depth.
    pub fn summary(&self) -> Summary {
        lqos_model::summarize(&self.network)
    }

    /// Prints every problem to stderr and fails if any is an error
    /// (warnings alone pass).
    #[allow(dead_code)] // for plan/apply
    pub fn require_valid(&self) -> anyhow::Result<()> {
        eprint!("{}", self.report);
        let errors = self.report.error_count();
        if errors > 0 {
            anyhow::bail!(
                "the inputs have {errors} error(s) and {} warning(s); run `lqos check` for details",
                self.report.warning_count()
            );
        }
        Ok(())
    }
}

fn read(path: &Path, what: &str) -> anyhow::Result<String> {
    let bytes =
        std::fs::read(path).with_context(|| format!("cannot read {what} {}", path.display()))?;
    String::from_utf8(bytes)
        .map_err(|e| anyhow::anyhow!("{what} {} is not valid UTF-8: {e}", path.display()))
}

impl InputArgs {
    /// Reads the three files (naming the path in any I/O error) and parses
    /// and validates them. Validation problems do not fail: they are in
    /// [`Loaded::report`]; call [`Loaded::require_valid`] to insist.
    ///
    /// Without `--config`, `lqos.conf` in the current directory is used if
    /// it exists, else the built-in defaults (said on stderr). An explicit
    /// `--config` that cannot be read is an error.
    pub fn load(&self) -> anyhow::Result<Loaded> {
        let network_text = read(&self.network, "network file")?;
        let devices_bytes = std::fs::read(&self.devices)
            .with_context(|| format!("cannot read devices file {}", self.devices.display()))?;
        let (config_path, config_text) = match &self.config {
            Some(p) => (Some(p.clone()), Some(read(p, "config file")?)),
            None => {
                let p = PathBuf::from(DEFAULT_CONFIG);
                if p.exists() {
                    let t = read(&p, "config file")?;
                    (Some(p), Some(t))
                } else {
                    eprintln!(
                        "lqos: no {DEFAULT_CONFIG} in the current directory; using built-in defaults (give --config to use another file)"
                    );
                    (None, None)
                }
            }
        };
        let nlabel = self.network.display().to_string();
        let dlabel = self.devices.display().to_string();
        let clabel = config_path.as_ref().map(|p| p.display().to_string());
        let loaded = lqos_model::load_with_config(
            (&nlabel, &network_text),
            (&dlabel, devices_bytes.as_slice()),
            clabel.as_deref().zip(config_text.as_deref()),
        );
        Ok(Loaded {
            network: loaded.network,
            config: loaded.config,
            report: loaded.report,
            config_path,
        })
    }
}
