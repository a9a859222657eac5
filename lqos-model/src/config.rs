//! LibreQoS's `lqos.conf` (TOML): every key lqos honours, typed, parsed
//! once.
//!
//! Unknown sections and keys are ignored, so a user's full `lqos.conf`
//! loads unchanged. A value of the wrong type or out of range is an error
//! naming the file and line ([`parse_config`]). Values whose grammar lives
//! in another crate (the leaf qdisc spec of `default_sqm`, parsed by
//! `lqos-tc`) keep the line they were read from ([`Located`]), so a bad one
//! is still reported with its file and line when the inputs are loaded.
//!
//! Adding a key is one change: a field (with its type, default and doc) in
//! the struct of its section.

pub use crate::report::ConfigKey;
use std::cell::RefCell;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The parts of `lqos.conf` lqos uses.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[non_exhaustive]
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
    /// LibreQoS's `[treeguard]` (on by default in LibreQoS): runtime leaf
    /// and node changes lqos does not make; read so that loading says so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub treeguard: Option<TreeGuard>,
    /// LibreQoS's `[stormguard]`: runtime rate changes (read to say so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stormguard: Option<Switch>,
    /// LibreQoS's `[dynamic_circuits]`: runtime circuits (read to say so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dynamic_circuits: Option<Switch>,
    /// `[long_term_stats] enable_insight_topology`: LibreQoS then prefers
    /// `ShapedDevices.insight.csv` and `network.insight.json`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub long_term_stats: Option<LongTermStats>,
    /// `exclude_efficiency_cores`: LibreQoS counts only performance cores
    /// when it caps the queues at the CPU count.
    #[serde(default, skip_serializing_if = "is_default")]
    pub exclude_efficiency_cores: bool,
    /// LibreQoS's built-in integrations (`[uisp_integration] enable_uisp`,
    /// `[splynx_integration] enable_splynx`, ...): with one on, LibreQoS
    /// shapes from its integration's runtime files, not the two input files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uisp_integration: Option<Integration>,
    /// See [`LqosConfig::uisp_integration`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub splynx_integration: Option<Integration>,
    /// See [`LqosConfig::uisp_integration`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netzur_integration: Option<Integration>,
    /// See [`LqosConfig::uisp_integration`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub visp_integration: Option<Integration>,
    /// See [`LqosConfig::uisp_integration`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub powercode_integration: Option<Integration>,
    /// See [`LqosConfig::uisp_integration`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sonar_integration: Option<Integration>,
    /// See [`LqosConfig::uisp_integration`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wispgate_integration: Option<Integration>,
}

impl LqosConfig {
    /// The integrations switched on (`uisp`, `splynx`, ...).
    pub fn integrations_on(&self) -> Vec<&'static str> {
        [
            ("uisp", &self.uisp_integration),
            ("splynx", &self.splynx_integration),
            ("netzur", &self.netzur_integration),
            ("visp", &self.visp_integration),
            ("powercode", &self.powercode_integration),
            ("sonar", &self.sonar_integration),
            ("wispgate", &self.wispgate_integration),
        ]
        .into_iter()
        .filter(|(_, i)| i.as_ref().is_some_and(|i| i.enabled))
        .map(|(n, _)| n)
        .collect()
    }
}

/// A LibreQoS section's `enabled` switch (`None`: not written, LibreQoS's
/// default for that section applies).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Switch {
    /// `enabled`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

impl Switch {
    /// On: `enabled = true`, or not written where LibreQoS's default is on.
    pub fn on(&self, default: bool) -> bool {
        self.enabled.unwrap_or(default)
    }
}

/// LibreQoS's `[treeguard]`: `enabled` (default on), `[treeguard.links]
/// enabled` (virtualizing idle nodes, default off) and `[treeguard.circuits]
/// enabled` (switching idle circuits' leaves, default on).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TreeGuard {
    /// `enabled` (default on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// `[treeguard.links]` (default off).
    pub links: Switch,
    /// `[treeguard.circuits]` (default on).
    pub circuits: Switch,
}

impl TreeGuard {
    /// What LibreQoS's TreeGuard changes at runtime with these settings:
    /// `(virtualizes idle nodes, switches idle circuits' leaves)`.
    pub fn active(&self) -> (bool, bool) {
        let on = self.enabled.unwrap_or(true);
        (on && self.links.on(false), on && self.circuits.on(true))
    }
}

/// LibreQoS's `[long_term_stats]`, the one key that changes its inputs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LongTermStats {
    /// `enable_insight_topology`.
    pub enable_insight_topology: bool,
}

/// One of LibreQoS's integration sections, by its `enable_*` switch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Integration {
    /// `enable_uisp`, `enable_splynx`, ... (whichever the section has).
    #[serde(
        alias = "enable_uisp",
        alias = "enable_splynx",
        alias = "enable_netzur",
        alias = "enable_visp",
        alias = "enable_powercode",
        alias = "enable_sonar",
        alias = "enable_wispgate"
    )]
    pub enabled: bool,
}

/// `[queues] queue_mode` (LibreQoS's legacy `monitor_only = true` is
/// `observe`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QueueMode {
    /// Build the shaping tree.
    #[default]
    Shape,
    /// Keep only the `mq` roots, no shaping tree (a baseline).
    Observe,
}

/// `[lqos]`: settings only lqos reads.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct LqosSection {
    /// `classifier = "bpf" | "tc" | "none"`: which classifier lqos runs
    /// (default `none`: something else, e.g. LibreQoS's XDP, classifies).
    #[serde(
        deserialize_with = "classifier_value",
        skip_serializing_if = "is_default"
    )]
    pub classifier: Classifier,
    /// `lazy_leaves = true`: the reload daemon gives a circuit its leaf
    /// qdisc only while it carries traffic.
    #[serde(skip_serializing_if = "is_default")]
    pub lazy_leaves: bool,
    /// `max_removals = 25 | "5%" | 0`: a reload that would remove more
    /// circuits than this is refused until confirmed (`0`: no limit;
    /// absent: more than 10% and more than 10 circuits).
    #[serde(
        deserialize_with = "removal_limit_value",
        skip_serializing_if = "is_default"
    )]
    pub max_removals: RemovalLimit,
    /// `flow_table_size = 262144`: flows the eBPF data path's TCP
    /// round-trip tracking holds at once (1,024 to 16,777,216, about 136
    /// bytes each; absent: 262,144).
    #[serde(
        deserialize_with = "flow_table_value",
        skip_serializing_if = "Option::is_none"
    )]
    pub flow_table_size: Option<u32>,
}

/// The smallest and largest `[lqos] flow_table_size`.
pub const FLOW_TABLE_RANGE: std::ops::RangeInclusive<u32> = 1024..=(1 << 24);

/// `[lqos] flow_table_size`: an integer in [`FLOW_TABLE_RANGE`].
fn flow_table_value<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    let n = i64::deserialize(d)?;
    u32::try_from(n)
        .ok()
        .filter(|n| FLOW_TABLE_RANGE.contains(n))
        .map(Some)
        .ok_or_else(|| {
            serde::de::Error::custom(format!(
                "[lqos] flow_table_size: {n} flows; give {} to {}",
                FLOW_TABLE_RANGE.start(),
                FLOW_TABLE_RANGE.end()
            ))
        })
}

/// How many circuits a reload may remove before it is refused.
///
/// ```
/// use lqos_model::config::RemovalLimit;
/// assert_eq!("25".parse::<RemovalLimit>().unwrap(), RemovalLimit::Count(25));
/// assert_eq!("5%".parse::<RemovalLimit>().unwrap(), RemovalLimit::Percent(5));
/// assert_eq!("0".parse::<RemovalLimit>().unwrap(), RemovalLimit::Off);
/// // The default: more than 10% and more than 10 circuits.
/// assert!(!RemovalLimit::Default.exceeded(10, 20));
/// assert!(!RemovalLimit::Default.exceeded(11, 200));
/// assert!(RemovalLimit::Default.exceeded(11, 100));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RemovalLimit {
    /// More than 10% of the circuits and more than 10 circuits.
    #[default]
    Default,
    /// More than this many circuits.
    Count(usize),
    /// More than this percentage of the circuits.
    Percent(u32),
    /// No limit.
    Off,
}

impl RemovalLimit {
    /// Whether removing `removed` of `total` circuits goes over the limit.
    pub fn exceeded(self, removed: usize, total: usize) -> bool {
        // `removed > p% of total`, in integers: 100 * removed > p * total.
        let over_pct = |p: u32| 100 * removed as u128 > u128::from(p) * total as u128;
        match self {
            RemovalLimit::Default => removed > 10 && over_pct(10),
            RemovalLimit::Count(n) => removed > n,
            RemovalLimit::Percent(p) => over_pct(p),
            RemovalLimit::Off => false,
        }
    }
}

impl std::str::FromStr for RemovalLimit {
    type Err = String;
    /// `N` (a count) or `N%`; `0` (or `0%`) turns the limit off.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let bad = || format!("{s:?} is not a count or a percentage (e.g. 25 or 5%)");
        match s.strip_suffix('%') {
            Some(p) => match p.trim().parse::<u32>() {
                Ok(0) => Ok(RemovalLimit::Off),
                Ok(p) if p <= 100 => Ok(RemovalLimit::Percent(p)),
                _ => Err(bad()),
            },
            None => match s.parse::<usize>() {
                Ok(0) => Ok(RemovalLimit::Off),
                Ok(n) => Ok(RemovalLimit::Count(n)),
                Err(_) => Err(bad()),
            },
        }
    }
}

impl fmt::Display for RemovalLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RemovalLimit::Default => f.write_str("more than 10% and more than 10 circuits"),
            RemovalLimit::Count(n) => write!(f, "more than {n} circuits"),
            RemovalLimit::Percent(p) => write!(f, "more than {p}% of the circuits"),
            RemovalLimit::Off => f.write_str("off"),
        }
    }
}

impl Serialize for RemovalLimit {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            RemovalLimit::Count(n) => s.serialize_u64(*n as u64),
            RemovalLimit::Percent(p) => s.collect_str(&format_args!("{p}%")),
            RemovalLimit::Off => s.serialize_u64(0),
            RemovalLimit::Default => s.serialize_none(),
        }
    }
}

/// `[lqos] max_removals`: an integer or a string (`"5%"`).
fn removal_limit_value<'de, D: Deserializer<'de>>(d: D) -> Result<RemovalLimit, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Count(u64),
        Text(String),
    }
    let text = match Raw::deserialize(d)? {
        Raw::Count(n) => n.to_string(),
        Raw::Text(t) => t,
    };
    text.parse()
        .map_err(|e| serde::de::Error::custom(format!("[lqos] max_removals: {e}")))
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
#[non_exhaustive]
pub struct QueuesConfig {
    /// Leaf qdisc for circuits (`cake diffserv4`, `fq_codel`, `pfifo`,
    /// `none`), as written, with its line: the grammar is `lqos-tc`'s
    /// (`LeafSpec`).
    pub default_sqm: Located<String>,
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
    /// LibreQoS's binpacking switch (read; lqos always balances queues).
    pub use_binpacking: bool,
    /// Mbps from which a circuit without an `sqm` override gets fq_codel
    /// instead of the default leaf (LibreQoS's `fast_queues_fq_codel`;
    /// absent = 1000).
    #[serde(
        deserialize_with = "mbps_value",
        skip_serializing_if = "Option::is_none"
    )]
    pub fast_queues_fq_codel: Option<crate::rate::Rate>,
    /// `shape` or `observe` ([`QueuesConfig::observe`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_mode: Option<QueueMode>,
    /// LibreQoS's legacy spelling of `queue_mode = "observe"` (used only
    /// without `queue_mode`).
    #[serde(skip_serializing_if = "is_default")]
    pub monitor_only: bool,
    /// LibreQoS's `lazy_queues` (`No`, `Htb`, `Full`), as written (read so
    /// that loading can name lqos's equivalent, lazy leaves).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lazy_queues: Option<String>,
    /// LibreQoS's `dry_run` (log the commands, run none); read to say that
    /// lqos ignores it (a dry run is the front end's choice).
    #[serde(skip_serializing_if = "is_default")]
    pub dry_run: bool,
}

impl QueuesConfig {
    /// `queue_mode = "observe"` (or, without `queue_mode`, the legacy
    /// `monitor_only = true`): no shaping tree, only the `mq` roots.
    pub fn observe(&self) -> bool {
        self.queue_mode.unwrap_or(if self.monitor_only {
            QueueMode::Observe
        } else {
            QueueMode::Shape
        }) == QueueMode::Observe
    }
}

impl Default for QueuesConfig {
    fn default() -> Self {
        QueuesConfig {
            default_sqm: Located::new("cake diffserv4".to_string()),
            uplink_bandwidth_mbps: 1000,
            downlink_bandwidth_mbps: 1000,
            generated_pn_download_mbps: 1000,
            generated_pn_upload_mbps: 1000,
            override_available_queues: None,
            use_binpacking: false,
            fast_queues_fq_codel: None,
            queue_mode: None,
            monitor_only: false,
            lazy_queues: None,
            dry_run: false,
        }
    }
}

/// Which classifier a plan includes (`[lqos] classifier`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Classifier {
    /// No classifier ops: something else (LibreQoS's XDP, fed with
    /// `ip_map.csv`) classifies. The default, so LibreQoS boxes keep theirs.
    #[default]
    None,
    /// `clsact` + `flower` + `skbedit` filters planned with the tree.
    Tc,
    /// lqos's eBPF data path (XDP CPU steering and a `cls_bpf` program
    /// reading pinned maps): no classifier ops in the tree; the maps are
    /// written from the plan's IP map.
    Bpf,
}

impl std::str::FromStr for Classifier {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "none" => Ok(Classifier::None),
            "tc" => Ok(Classifier::Tc),
            "bpf" => Ok(Classifier::Bpf),
            other => Err(format!(
                "unknown classifier {other:?} (expected `bpf`, `tc` or `none`)"
            )),
        }
    }
}

impl fmt::Display for Classifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Classifier::None => "none",
            Classifier::Tc => "tc",
            Classifier::Bpf => "bpf",
        })
    }
}

/// `[lqos] classifier`: case-insensitive, an error names the key.
fn classifier_value<'de, D: Deserializer<'de>>(d: D) -> Result<Classifier, D::Error> {
    let s = String::deserialize(d)?;
    s.parse()
        .map_err(|e| serde::de::Error::custom(format!("[lqos] classifier: {e}")))
}

/// A rate in Mbps written as a TOML integer or float (`1000`, `2500.5`),
/// read exactly from its shortest decimal form.
fn mbps_value<'de, D: Deserializer<'de>>(d: D) -> Result<Option<crate::rate::Rate>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Num {
        Int(u64),
        Float(f64),
    }
    let text = match Num::deserialize(d)? {
        Num::Int(i) => i.to_string(),
        Num::Float(f) => f.to_string(),
    };
    crate::rate::Rate::from_mbps_str(&text)
        .map(Some)
        .map_err(|e| serde::de::Error::custom(format!("{text} Mbps: {e}")))
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

/// A config value with the 1-based line of `lqos.conf` it was read from
/// (`None` when it was not read from a file: a default, or built in
/// code). Compares and serializes as the value alone.
///
/// ```
/// let c = lqos_model::config::parse_config("lqos.conf", "[queues]\n\ndefault_sqm = \"fq_codel\"\n").unwrap();
/// assert_eq!(c.queues.default_sqm, "fq_codel");
/// assert_eq!(c.queues.default_sqm.line, Some(3));
/// ```
#[derive(Clone, Default)]
pub struct Located<T> {
    /// The value.
    pub value: T,
    /// Where it was read.
    pub line: Option<usize>,
}

impl<T> Located<T> {
    /// A value not read from a file.
    pub fn new(value: T) -> Located<T> {
        Located { value, line: None }
    }
}

impl<T> std::ops::Deref for Located<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T> From<T> for Located<T> {
    fn from(value: T) -> Located<T> {
        Located::new(value)
    }
}

impl From<&str> for Located<String> {
    fn from(value: &str) -> Located<String> {
        Located::new(value.to_string())
    }
}

impl<T: fmt::Debug> fmt::Debug for Located<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.value.fmt(f)
    }
}

impl<T: fmt::Display> fmt::Display for Located<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.value.fmt(f)
    }
}

impl<T: PartialEq> PartialEq for Located<T> {
    fn eq(&self, other: &Located<T>) -> bool {
        self.value == other.value
    }
}

impl<T: Eq> Eq for Located<T> {}

impl PartialEq<&str> for Located<String> {
    fn eq(&self, other: &&str) -> bool {
        self.value == *other
    }
}

impl PartialEq<str> for Located<String> {
    fn eq(&self, other: &str) -> bool {
        self.value == other
    }
}

impl<T: Serialize> Serialize for Located<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.value.serialize(s)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Located<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let spanned = toml::Spanned::<T>::deserialize(d)?;
        let line = LINES.with(|l| l.borrow().as_ref().map(|l| l.line_of(spanned.span().start)));
        Ok(Located {
            value: spanned.into_inner(),
            line,
        })
    }
}

/// Byte offsets of the line starts of the text [`parse_config`] is
/// reading, for [`Located`] values to find their line. Set only for the
/// duration of one parse on this thread.
struct LineStarts(Vec<usize>);

impl LineStarts {
    fn of(text: &str) -> LineStarts {
        LineStarts(
            std::iter::once(0)
                .chain(memchr::memchr_iter(b'\n', text.as_bytes()).map(|i| i + 1))
                .collect(),
        )
    }

    /// 1-based line of byte `offset`.
    fn line_of(&self, offset: usize) -> usize {
        self.0.partition_point(|&s| s <= offset)
    }
}

thread_local! {
    static LINES: RefCell<Option<LineStarts>> = const { RefCell::new(None) };
}

/// Reads `lqos.conf` (TOML); `file` names it in messages.
///
/// Unknown sections and keys are ignored, so a full LibreQoS `lqos.conf`
/// loads unchanged. A missing section gets its defaults. A leading byte
/// order mark is skipped.
///
/// ```
/// let conf = "[bridge]\nto_internet = \"ens20\"\nto_network = \"ens19\"\n[tuning]\nfoo = 1\n";
/// let c = lqos_model::config::parse_config("lqos.conf", conf).unwrap();
/// assert_eq!(c.bridge.unwrap().to_network, "ens19");
/// assert_eq!(c.queues.default_sqm, "cake diffserv4");
/// let e = lqos_model::config::parse_config("lqos.conf", "[lqos]\n\nclassifier = \"xdp\"\n").unwrap_err();
/// assert!(e.to_string().starts_with("lqos.conf:3: invalid config: [lqos] classifier: unknown classifier \"xdp\""), "{e}");
/// ```
pub fn parse_config(file: &str, text: &str) -> Result<LqosConfig, crate::error::ModelError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let lines = LineStarts::of(text);
    /// Clears the line table when the parse ends (also on a panic).
    struct Scope;
    impl Drop for Scope {
        fn drop(&mut self) {
            LINES.with(|l| *l.borrow_mut() = None);
        }
    }
    let parsed = {
        LINES.with(|l| *l.borrow_mut() = Some(lines));
        let _scope = Scope;
        toml::from_str(text)
    };
    parsed.map_err(|e: toml::de::Error| crate::error::ModelError::Toml {
        file: file.to_string(),
        line: e
            .span()
            .map(|s| LineStarts::of(text).line_of(s.start.min(text.len()))),
        message: e.message().trim().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_lqos_key_is_typed_and_a_bad_value_names_file_and_line() {
        let c = parse_config(
            "lqos.conf",
            "\u{feff}[lqos]\nlazy_leaves = true\nclassifier = \"TC\"\n",
        )
        .unwrap();
        assert!(c.lqos.lazy_leaves);
        assert_eq!(c.lqos.classifier, Classifier::Tc);
        let c = parse_config("lqos.conf", "[lqos]\nclassifier = \"bpf\"\n").unwrap();
        assert_eq!(c.lqos.classifier, Classifier::Bpf);
        let e = parse_config("lqos.conf", "[lqos]\nlazy_leaves = 3\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "lqos.conf:2: invalid config: invalid type: integer `3`, expected a boolean"
        );
        let c = parse_config("lqos.conf", "[lqos]\nmax_removals = \"5%\"\n").unwrap();
        assert_eq!(c.lqos.max_removals, RemovalLimit::Percent(5));
        let c = parse_config("lqos.conf", "[lqos]\nmax_removals = 0\n").unwrap();
        assert_eq!(c.lqos.max_removals, RemovalLimit::Off);
        let e = parse_config("lqos.conf", "[lqos]\nmax_removals = \"lots\"\n").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("lqos.conf:2: invalid config: [lqos] max_removals: "),
            "{e}"
        );
        let c = parse_config("lqos.conf", "[lqos]\nflow_table_size = 1048576\n").unwrap();
        assert_eq!(c.lqos.flow_table_size, Some(1 << 20));
        for bad in ["100", "-1", "99999999999"] {
            let text = format!("[lqos]\nflow_table_size = {bad}\n");
            let e = parse_config("lqos.conf", &text).unwrap_err();
            assert!(
                e.to_string().starts_with(&format!(
                    "lqos.conf:2: invalid config: [lqos] flow_table_size: {bad} flows; give 1024 to 16777216"
                )),
                "{e}"
            );
        }
        let d = parse_config("lqos.conf", "").unwrap();
        assert_eq!(d.lqos.flow_table_size, None);
        assert_eq!(d.lqos.max_removals, RemovalLimit::Default);
        assert!(!d.lqos.lazy_leaves);
        assert_eq!(d.lqos.classifier, Classifier::None);
        assert_eq!(d.queues.default_sqm.line, None);
    }

    #[test]
    fn located_values_know_their_line_and_compare_by_value() {
        let text = "# x\n[queues]\ndefault_sqm = \"fq_codel\"\n";
        let c = parse_config("lqos.conf", text).unwrap();
        assert_eq!(c.queues.default_sqm.line, Some(3));
        assert_eq!(c.queues.default_sqm, Located::from("fq_codel"));
        // The table is gone after the parse: values deserialized elsewhere
        // have no line.
        let q: QueuesConfig = toml::from_str("default_sqm = \"pfifo\"\n").unwrap();
        assert_eq!(q.default_sqm.line, None);
    }

    #[test]
    fn writing_leaves_defaults_out() {
        let mut c = LqosConfig::default();
        let text = toml::to_string(&c).unwrap();
        assert!(
            text.contains("[lqos]\n") && !text.contains("lazy_leaves"),
            "{text}"
        );
        c.lqos.lazy_leaves = true;
        c.lqos.classifier = Classifier::Bpf;
        for limit in [
            RemovalLimit::Count(7),
            RemovalLimit::Percent(3),
            RemovalLimit::Off,
        ] {
            c.lqos.max_removals = limit;
            let back = parse_config("x", &toml::to_string(&c).unwrap()).unwrap();
            assert_eq!(back, c);
        }
        let back = parse_config("x", &toml::to_string(&c).unwrap()).unwrap();
        assert_eq!(back, c);
    }
}
