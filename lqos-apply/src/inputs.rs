//! From LibreQoS files to a [`Plan`]: read `network.json`,
//! `ShapedDevices.csv` and `lqos.conf`, validate, resolve the planner
//! settings (lqos.conf, the operator's overrides, the interfaces' TX queue
//! count) and plan. The CLI's `plan`, `show`, `diff`, `apply` and `verify`
//! all go through [`plan_files`] (or [`read_plan`] for a saved plan).
//!
//! ```
//! use lqos_apply::inputs::{plan_files, Inputs, PlanOverrides, QueueCount};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let g = lqos_model::generate(&lqos_model::GenParams::with_circuits(20));
//! std::fs::write(dir.path().join("network.json"), lqos_model::write::write_network_json(&g.network)).unwrap();
//! std::fs::write(dir.path().join("ShapedDevices.csv"), lqos_model::write::write_shaped_devices(&g.network)).unwrap();
//! std::fs::write(dir.path().join("lqos.conf"), lqos_model::write::write_config(&g.config)).unwrap();
//! let inputs = Inputs::in_dir(dir.path());
//! let overrides = PlanOverrides::default().sqm("pfifo".parse().unwrap());
//! let planned = plan_files(&inputs, &overrides, QueueCount::Default(4), None).unwrap();
//! assert!(planned.report.is_clean());
//! assert_eq!(planned.plan.allocation.queues, 4);
//! assert_eq!(planned.plan.allocation.circuits.len(), 20);
//! ```

use std::path::{Path, PathBuf};

use lqos_model::config::Classifier;
use lqos_model::config::LqosConfig;
use lqos_model::{Network, Report};
use lqos_tc::config::{Interfaces, LeafSpec, QueueStrategy};
use lqos_tc::record::PlanRecord;
use lqos_tc::{Allocation, Plan, PlanConfig};

use crate::error::{ApplyError, IoAction, Result, StateProblem};
pub use crate::input_file::InputFile;
use crate::live::LiveSource;

/// Default file names, as LibreQoS names them.
pub const NETWORK_FILE: &str = "network.json";
/// See [`NETWORK_FILE`].
pub const DEVICES_FILE: &str = "ShapedDevices.csv";
/// See [`NETWORK_FILE`].
pub const CONFIG_FILE: &str = "lqos.conf";

/// Where the LibreQoS input files are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inputs {
    /// The node hierarchy (`network.json`).
    pub network: PathBuf,
    /// The circuits and devices (`ShapedDevices.csv`).
    pub devices: PathBuf,
    /// `lqos.conf` (TOML); `None` = built-in defaults.
    pub config: Option<PathBuf>,
}

impl Inputs {
    /// `network.json`, `ShapedDevices.csv` and (if it exists) `lqos.conf`
    /// in `dir`.
    pub fn in_dir(dir: &Path) -> Inputs {
        let config = dir.join(CONFIG_FILE);
        Inputs {
            network: dir.join(NETWORK_FILE),
            devices: dir.join(DEVICES_FILE),
            config: config.exists().then_some(config),
        }
    }

    /// The interfaces these inputs shape, from `lqos.conf` alone (or the
    /// built-in defaults without one), without reading the other files:
    /// what [`crate::load::Prefetched::overlap`] can start reading while the
    /// rest is parsed. Empty if the config cannot be read or parsed (the
    /// full load then reports why).
    pub fn interface_hint(&self) -> Vec<String> {
        let config = match &self.config {
            Some(p) => {
                let Ok(text) = std::fs::read_to_string(p) else {
                    return Vec::new();
                };
                match lqos_model::config::parse_config(&p.display().to_string(), &text) {
                    Ok(c) => c,
                    Err(_) => return Vec::new(),
                }
            }
            None => LqosConfig::default(),
        };
        match PlanConfig::from_lqos_config(&config, 1) {
            Ok(cfg) => interface_names(&cfg.interfaces)
                .into_iter()
                .map(str::to_string)
                .collect(),
            Err(_) => Vec::new(),
        }
    }

    /// Reads the files' bytes (an unreadable file is an error naming its
    /// path; `network.json` and `lqos.conf` must be UTF-8).
    pub fn read(&self) -> Result<RawInputs> {
        self.read_reusing(Vec::new())
    }

    /// [`read`](Self::read), reading `ShapedDevices.csv` into `buffer`
    /// (its bytes are dropped, its allocation kept). A daemon hands back
    /// the buffer of the bytes it no longer needs: at 100,000 circuits a
    /// fresh 15 MB buffer costs more in page faults than the read itself.
    pub fn read_reusing(&self, buffer: Vec<u8>) -> Result<RawInputs> {
        let read = |p: &Path, what: InputFile, mut into: Vec<u8>| {
            read_noatime_into(p, &mut into)
                .map(|()| into)
                .map_err(|e| ApplyError::io(IoAction::ReadInput(what), Some(p), e))
        };
        let text = |p: &Path, what: InputFile, bytes: Vec<u8>| {
            String::from_utf8(bytes).map_err(|e| {
                let e = std::io::Error::new(std::io::ErrorKind::InvalidData, e);
                ApplyError::io(IoAction::DecodeInput(what), Some(p), e)
            })
        };
        let network = read(&self.network, InputFile::Network, Vec::new())?;
        let network = text(&self.network, InputFile::Network, network)?;
        let devices = read(&self.devices, InputFile::Devices, buffer)?;
        let config = match &self.config {
            Some(p) => {
                let bytes = read(p, InputFile::Config, Vec::new())?;
                Some(text(p, InputFile::Config, bytes)?)
            }
            None => None,
        };
        Ok(RawInputs {
            network,
            devices,
            config,
        })
    }

    /// The label of `ShapedDevices.csv` in problems (its path as given).
    pub fn devices_label(&self) -> String {
        self.devices.display().to_string()
    }

    /// Reads and parses the files (an unreadable file is an error naming
    /// its path). Validation problems do not fail here: they are in
    /// [`LoadedInputs::report`].
    pub fn load(&self) -> Result<LoadedInputs> {
        Ok(self.read()?.load(self))
    }
}

/// The three files' contents, as [`Inputs::read`] read them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawInputs {
    /// `network.json`.
    pub network: String,
    /// `ShapedDevices.csv`.
    pub devices: Vec<u8>,
    /// `lqos.conf`, if one is given.
    pub config: Option<String>,
}

impl RawInputs {
    /// Parses and validates the contents read from `inputs` (whose paths
    /// label the problems).
    pub fn load(&self, inputs: &Inputs) -> LoadedInputs {
        let nlabel = inputs.network.display().to_string();
        let dlabel = inputs.devices_label();
        let clabel = inputs.config.as_ref().map(|p| p.display().to_string());
        let mut loaded = lqos_model::load_with_config(
            (&nlabel, &self.network),
            (&dlabel, self.devices.as_slice()),
            clabel.as_deref().zip(self.config.as_deref()),
        );
        // The values whose grammar is the planner's, checked now with
        // their line (not later, when planning, without it).
        if let Some(file) = &clabel {
            for p in lqos_tc::config::config_problems(&loaded.config, file) {
                loaded.report.push(p);
            }
        }
        LoadedInputs {
            network: loaded.network,
            config: loaded.config,
            report: loaded.report,
            config_path: inputs.config.clone(),
            unshaped: loaded.unshaped,
        }
    }
}

/// The inputs as read, with every problem found.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LoadedInputs {
    /// Nodes and circuits (whatever could be read).
    pub network: Network,
    /// The config (defaults if none was given).
    pub config: LqosConfig,
    /// Every parse and validation problem of all three files.
    pub report: Report,
    /// The config file read, if any.
    pub config_path: Option<PathBuf>,
    /// Circuits read but not shaped (their parent node is not in
    /// `network.json`): [`lqos_model::Loaded::unshaped`].
    pub unshaped: Vec<lqos_model::Circuit>,
}

impl LoadedInputs {
    /// `Err(InvalidInputs)` (with the report) if any problem is an error;
    /// warnings alone pass.
    pub fn require_valid(&self) -> Result<()> {
        if self.report.has_errors() {
            return Err(ApplyError::InvalidInputs {
                report: Box::new(self.report.clone()),
            });
        }
        Ok(())
    }

    /// Plans the (valid) inputs: [`plan_config`] then [`lqos_tc::plan`].
    pub fn plan(
        &self,
        overrides: &PlanOverrides,
        queues: QueueCount<'_>,
        previous: Option<&Allocation>,
    ) -> Result<Plan> {
        self.require_valid()?;
        let cfg = plan_config(&self.config, self.config_path.as_deref(), overrides, queues)?;
        lqos_tc::plan(&self.network, &cfg, previous).map_err(|source| ApplyError::Planning {
            devices: None,
            source,
        })
    }
}

/// Planner settings an operator gives on top of `lqos.conf` (a front
/// end's options: queues, leaf qdisc, strategy, classifier). The journal keeps
/// them with each input set applied, so a rollback plans it as it was.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct PlanOverrides {
    /// TX queues per interface, instead of `override_available_queues` or
    /// the [`QueueCount`] fallback.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queues: Option<u32>,
    /// Leaf qdisc for circuits instead of `default_sqm`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sqm: Option<LeafSpec>,
    /// How top-level subtrees are spread over the queues (default:
    /// [`QueueStrategy::Balanced`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<QueueStrategy>,
    /// Which classifier the plan includes, instead of lqos.conf's
    /// `[lqos] classifier` (default [`Classifier::None`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub classifier: Option<Classifier>,
}

impl PlanOverrides {
    /// With the leaf qdisc `sqm` for circuits.
    pub fn sqm(mut self, sqm: LeafSpec) -> Self {
        self.sqm = Some(sqm);
        self
    }

    /// With `queues` TX queues per interface.
    pub fn queues(mut self, queues: u32) -> Self {
        self.queues = Some(queues);
        self
    }

    /// With queue strategy `strategy`.
    pub fn strategy(mut self, strategy: QueueStrategy) -> Self {
        self.strategy = Some(strategy);
        self
    }

    /// With classifier `classifier`.
    pub fn classifier(mut self, classifier: Classifier) -> Self {
        self.classifier = Some(classifier);
        self
    }

    /// Whether none is given.
    pub fn is_empty(&self) -> bool {
        *self == PlanOverrides::default()
    }

    /// These overrides, with each one `over` gives taking its place.
    pub fn under(&self, over: &PlanOverrides) -> PlanOverrides {
        PlanOverrides {
            queues: over.queues.or(self.queues),
            sqm: over.sqm.clone().or_else(|| self.sqm.clone()),
            strategy: over.strategy.or(self.strategy),
            classifier: over.classifier.or(self.classifier),
        }
    }
}

/// Where the queue count comes from when neither the overrides nor
/// `override_available_queues` give one.
#[derive(Clone, Copy)]
pub enum QueueCount<'a> {
    /// This many (offline planning, with no kernel to ask).
    Default(u32),
    /// The smallest `num_tx_queues` of the plan's interfaces, read from
    /// the kernel (a load).
    FromInterfaces(&'a dyn LiveSource),
}

impl std::fmt::Debug for QueueCount<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QueueCount::Default(n) => write!(f, "Default({n})"),
            QueueCount::FromInterfaces(_) => f.write_str("FromInterfaces(..)"),
        }
    }
}

/// The lqos.conf key that names interface `dev` in `cfg`: `[bridge]
/// to_network` (download), `[bridge] to_internet` (upload) or
/// `[single_interface] interface`.
pub fn config_key(cfg: &Interfaces, dev: &str) -> Option<&'static str> {
    match cfg {
        Interfaces::Bridge { download, .. } if download == dev => Some("[bridge] to_network"),
        Interfaces::Bridge { upload, .. } if upload == dev => Some("[bridge] to_internet"),
        Interfaces::OnAStick { interface, .. } if interface == dev => {
            Some("[single_interface] interface")
        }
        _ => None,
    }
}

/// `e` with the lqos.conf key that names its interface in `cfg` when it
/// is an [`ApplyError::NoInterface`] without one ([`config_key`]).
pub(crate) fn with_config_key(e: ApplyError, cfg: &Interfaces) -> ApplyError {
    match e {
        ApplyError::NoInterface {
            dev,
            netns,
            config_key: None,
        } => ApplyError::NoInterface {
            config_key: config_key(cfg, &dev),
            dev,
            netns,
        },
        e => e,
    }
}

/// The interface names `cfg` shapes.
pub fn interface_names(cfg: &Interfaces) -> Vec<&str> {
    match cfg {
        Interfaces::Bridge { download, upload } => vec![download, upload],
        Interfaces::OnAStick { interface, .. } => vec![interface],
    }
}

/// The planner config: `lqos.conf` with the operator's overrides, the queue
/// count from `overrides.queues`, else `override_available_queues` (if > 0),
/// else `queues`. `config_path` names the file in errors.
pub fn plan_config(
    config: &LqosConfig,
    config_path: Option<&Path>,
    overrides: &PlanOverrides,
    queues: QueueCount<'_>,
) -> Result<PlanConfig> {
    let config_err = |source| ApplyError::Config {
        path: config_path.map(Path::to_path_buf),
        source,
    };
    let n = match (given_queues(config, overrides), queues) {
        (Some(q), _) => q,
        (None, QueueCount::Default(n)) => n,
        (None, QueueCount::FromInterfaces(live)) => {
            // Interface names first (the queue count does not matter).
            let cfg = PlanConfig::from_lqos_config(config, 1).map_err(config_err)?;
            let mut min = u32::MAX;
            for dev in interface_names(&cfg.interfaces) {
                let link = live.link(dev)?.ok_or_else(|| ApplyError::NoInterface {
                    dev: dev.to_string(),
                    netns: live.netns().map(str::to_string),
                    config_key: config_key(&cfg.interfaces, dev),
                })?;
                min = min.min(link.num_tx_queues);
            }
            min
        }
    };
    let mut cfg = PlanConfig::from_lqos_config(config, n).map_err(config_err)?;
    if let Some(sqm) = &overrides.sqm {
        cfg.default_sqm = sqm.clone();
    }
    if let Some(s) = overrides.strategy {
        cfg.strategy = s;
    }
    if let Some(c) = overrides.classifier {
        cfg.classifier = c;
    }
    Ok(cfg)
}

/// The queue count the operator gave: `overrides.queues`, else
/// `override_available_queues` (if > 0); `None` when it comes from the
/// interfaces (or a default).
pub fn given_queues(config: &LqosConfig, overrides: &PlanOverrides) -> Option<u32> {
    match (overrides.queues, config.queues.override_available_queues) {
        (Some(q), _) => Some(q),
        (None, Some(q)) if q > 0 => Some(q),
        _ => None,
    }
}

/// A plan with the problems (warnings only) its inputs had.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Planned {
    /// The plan.
    pub plan: Plan,
    /// The inputs' warnings (an input with errors is not planned).
    pub report: Report,
    /// The network it was planned from (for the compact plan record).
    pub network: Network,
    /// The config it was planned with (defaults if none was given).
    pub config: LqosConfig,
    /// Circuits read but not shaped: [`LoadedInputs::unshaped`].
    pub unshaped: Vec<lqos_model::Circuit>,
}

/// Inputs to plan in one call: read, validate (errors fail with
/// [`ApplyError::InvalidInputs`], carrying the report), resolve the config
/// ([`plan_config`]) and plan, keeping `previous`'s classids.
pub fn plan_files(
    inputs: &Inputs,
    overrides: &PlanOverrides,
    queues: QueueCount<'_>,
    previous: Option<&Allocation>,
) -> Result<Planned> {
    plan_raw(inputs, &inputs.read()?, overrides, queues, previous)
}

/// [`plan_files`] on contents already read from `inputs` ([`Inputs::read`]).
pub fn plan_raw(
    inputs: &Inputs,
    raw: &RawInputs,
    overrides: &PlanOverrides,
    queues: QueueCount<'_>,
    previous: Option<&Allocation>,
) -> Result<Planned> {
    let loaded = raw.load(inputs);
    let plan = loaded
        .plan(overrides, queues, previous)
        .map_err(|e| match e {
            ApplyError::Planning { source, .. } => ApplyError::Planning {
                devices: Some(inputs.devices.clone()),
                source,
            },
            e => e,
        })?;
    Ok(Planned {
        plan,
        report: loaded.report,
        network: loaded.network,
        config: loaded.config,
        unshaped: loaded.unshaped,
    })
}

/// Reads a whole file without updating its access time (`O_NOATIME`,
/// falling back to a plain open where the kernel refuses the flag: not
/// the file's owner, without `CAP_FOWNER`). A file just written has an
/// access time older than its change, so under `relatime` every read
/// after an edit would dirty the inode: one more metadata write, and a
/// wait on the filesystem's journal, per edit the daemon reads.
/// The bytes go into `out` (cleared first; its allocation is reused).
pub fn read_noatime_into(path: &Path, out: &mut Vec<u8>) -> std::io::Result<()> {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    out.clear();
    let mut f = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOATIME)
        .open(path)
    {
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => std::fs::File::open(path)?,
        r => r?,
    };
    out.reserve(f.metadata().map_or(0, |m| m.len() as usize));
    f.read_to_end(out)?;
    Ok(())
}

/// Reads a plan file (a `plan.json`: [`lqos_tc::record::PlanRecord`] as
/// JSON, or the whole plan of earlier versions).
pub fn read_plan(path: &Path) -> Result<Plan> {
    Ok(read_plan_record(path)?.0)
}

/// Reads a plan file: a compact [`PlanRecord`] (re-planned unless it holds
/// its ops, with the network it describes) or the whole-plan JSON of
/// earlier versions (no network).
pub fn read_plan_record(path: &Path) -> Result<(Plan, Option<Network>)> {
    let bytes =
        std::fs::read(path).map_err(|e| ApplyError::io(IoAction::ReadPlan, Some(path), e))?;
    let record_err = |e: lqos_tc::record::RecordError| ApplyError::State {
        path: path.to_path_buf(),
        reason: StateProblem::Record(e),
    };
    match serde_json::from_slice::<PlanRecord>(&bytes) {
        Ok(rec) => {
            let plan = rec.replan().map_err(record_err)?;
            let net = rec
                .inputs
                .as_ref()
                .map(|i| i.network())
                .transpose()
                .map_err(record_err)?;
            Ok((plan, net))
        }
        Err(record) => match serde_json::from_slice::<Plan>(&bytes) {
            Ok(plan) => Ok((plan, None)),
            Err(_) => Err(ApplyError::PlanFile {
                path: path.to_path_buf(),
                source: record,
            }),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::Recording;

    fn conf() -> LqosConfig {
        lqos_model::generate(&lqos_model::GenParams::default()).config
    }

    /// Regression guard: reading the inputs after an edit dirtied their
    /// inode (the access time moved), a metadata write per edit.
    #[test]
    fn reading_inputs_leaves_their_access_time_alone() {
        use std::os::unix::fs::MetadataExt as _;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(DEVICES_FILE);
        std::fs::write(&p, b"Circuit ID\n").unwrap();
        // An access time older than the change, as after a writer's edit.
        let old = nix::sys::time::TimeSpec::new(1_000_000, 0);
        let now = nix::sys::time::TimeSpec::new(2_000_000, 0);
        nix::sys::stat::utimensat(
            nix::fcntl::AT_FDCWD,
            &p,
            &old,
            &now,
            nix::sys::stat::UtimensatFlags::FollowSymlink,
        )
        .unwrap();
        let atime = || std::fs::metadata(&p).unwrap().atime();
        let mut bytes = Vec::new();
        read_noatime_into(&p, &mut bytes).unwrap();
        assert_eq!(bytes, b"Circuit ID\n");
        assert_eq!(atime(), 1_000_000, "O_NOATIME read moved the access time");
        std::fs::read(&p).unwrap();
        if atime() == 1_000_000 {
            eprintln!("note: this filesystem keeps no access times (noatime): the check above could not fail here");
        }
    }

    /// The daemon's reads of `ShapedDevices.csv` go into the buffer of the
    /// bytes it dropped last (no fresh pages to fault in per edit).
    #[test]
    fn a_read_reuses_the_buffer_it_is_given() {
        let dir = tempfile::tempdir().unwrap();
        let g = lqos_model::generate(&lqos_model::GenParams::with_circuits(50));
        let d = dir.path();
        std::fs::write(
            d.join(NETWORK_FILE),
            lqos_model::write::write_network_json(&g.network),
        )
        .unwrap();
        let devices = lqos_model::write::write_shaped_devices(&g.network);
        std::fs::write(d.join(DEVICES_FILE), devices).unwrap();
        std::fs::write(
            d.join(CONFIG_FILE),
            lqos_model::write::write_config(&g.config),
        )
        .unwrap();
        let inputs = Inputs::in_dir(d);
        let first = inputs.read().unwrap();
        let mut buffer = Vec::with_capacity(first.devices.len() + 100);
        buffer.extend_from_slice(b"stale bytes, dropped by the read");
        let at = buffer.as_ptr();
        let again = inputs.read_reusing(buffer).unwrap();
        assert_eq!(again.devices, first.devices);
        assert_eq!(again.devices.as_ptr(), at, "the buffer was not reused");
        assert_eq!((again.network, again.config), (first.network, first.config));
    }

    #[test]
    fn queue_count_precedence_flag_then_conf_then_fallback() {
        let mut c = conf();
        let rec = Recording::new().with_link("ens19", 6).with_link("ens20", 3);
        let q = |c: &LqosConfig, o: &PlanOverrides, qc| plan_config(c, None, o, qc).unwrap().queues;
        c.queues.override_available_queues = None;
        assert_eq!(
            q(&c, &PlanOverrides::default(), QueueCount::Default(16)),
            16
        );
        // The smaller of the two interfaces.
        let live = QueueCount::FromInterfaces(&rec);
        assert_eq!(q(&c, &PlanOverrides::default(), live), 3);
        c.queues.override_available_queues = Some(0); // 0 = not set
        assert_eq!(q(&c, &PlanOverrides::default(), live), 3);
        c.queues.override_available_queues = Some(2);
        assert_eq!(q(&c, &PlanOverrides::default(), live), 2);
        let o = PlanOverrides {
            queues: Some(5),
            ..Default::default()
        };
        assert_eq!(q(&c, &o, live), 5);
    }

    #[test]
    fn a_missing_interface_is_named_when_probing_queues() {
        let mut c = conf();
        c.queues.override_available_queues = None;
        let rec = Recording::new().with_link("ens19", 6);
        let e = plan_config(
            &c,
            None,
            &PlanOverrides::default(),
            QueueCount::FromInterfaces(&rec),
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .ends_with("ens20 does not exist (lqos.conf's [bridge] to_internet names it)"),
            "{e}"
        );
        assert!(
            matches!(&e, ApplyError::NoInterface { dev, .. } if dev == "ens20"),
            "{e}"
        );
    }

    #[test]
    fn overrides_replace_sqm_and_strategy() {
        let o = PlanOverrides {
            sqm: Some("fq_codel".parse().unwrap()),
            strategy: Some(QueueStrategy::RoundRobin),
            ..Default::default()
        };
        let cfg = plan_config(&conf(), None, &o, QueueCount::Default(4)).unwrap();
        assert_eq!(cfg.default_sqm, "fq_codel".parse().unwrap());
        assert_eq!(cfg.strategy, QueueStrategy::RoundRobin);
    }

    #[test]
    fn invalid_inputs_fail_with_the_report_and_unreadable_files_name_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let e = plan_files(
            &Inputs::in_dir(dir.path()),
            &PlanOverrides::default(),
            QueueCount::Default(2),
            None,
        )
        .unwrap_err();
        assert!(e.to_string().contains("network.json"), "{e}");
        std::fs::write(dir.path().join(NETWORK_FILE), "{}").unwrap();
        std::fs::write(
            dir.path().join(DEVICES_FILE),
            "Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,MAC,IPv4,IPv6,\
             Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,Comment\n\
             1,a,1,a,,,100.64.0.1,,0,1,100,20,\n",
        )
        .unwrap();
        let e = plan_files(
            &Inputs::in_dir(dir.path()),
            &PlanOverrides::default(),
            QueueCount::Default(2),
            None,
        )
        .unwrap_err();
        match &e {
            ApplyError::InvalidInputs { report } => {
                assert!(
                    report.to_string().contains("ShapedDevices.csv:2"),
                    "{report}"
                )
            }
            e => panic!("{e}"),
        }
    }

    #[test]
    fn read_plan_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("plan.json");
        std::fs::write(&p, "{").unwrap();
        let e = read_plan(&p).unwrap_err();
        assert!(e.to_string().contains("plan.json"), "{e}");
    }
}
