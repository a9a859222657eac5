//! The statistics of one poll as Prometheus text (what a `/metrics`
//! endpoint serves), in either text format
//! ([`Format`]): the Prometheus text format 0.0.4 or OpenMetrics 1.0.0,
//! the same families and samples from one renderer. Per circuit and node
//! and direction, counters in base units and gauges.
//!
//! Series (counters end in `_total`):
//! - per circuit (labels `circuit_id`, `direction`):
//!   `lqos_circuit_sent_bytes_total`, `_sent_packets_total`,
//!   `_drops_total`, `_overlimits_total`, `_ecn_marks_total`; gauges
//!   `lqos_circuit_backlog_bytes`, `lqos_circuit_ceil_bytes_per_second`;
//!   for cake leaves `lqos_circuit_cake_delay_seconds` (labels `tin`: the
//!   tin's index, diffserv4 0 Bulk, 1 Best Effort, 2 Video, 3 Voice;
//!   `delay`: `peak`, `avg` or `base`), for each tin that has sent a
//!   packet since the leaf was created (an idle tin's delays are zero and
//!   carry nothing; a tin's series stays once it has one);
//! - `lqos_circuit_info{circuit_id, name, parent} 1` (a gauge, as
//!   Prometheus stores an info series): names and parents in one series,
//!   so the counters' labels stay bounded;
//! - per node (labels `node`, `direction`): the same counters and the two
//!   gauges;
//! - traffic no circuit's class took, the default classes `:2` of every
//!   queue summed (label `direction`): `lqos_unclassified_*`, the same
//!   counters and gauges;
//! - with lqos's eBPF data path, per circuit with TCP flows (labels
//!   `circuit_id`, `direction`: the way the flows' data goes, `side`:
//!   `subscriber` or `internet`): `lqos_circuit_tcp_rtt_seconds`, a
//!   histogram of round-trip times in octave buckets from 100 µs to
//!   6.55 s (the kernel's quarter-octave buckets added up), for each
//!   direction and side with samples;
//!   `lqos_circuit_tcp_retransmits_total` (labels `circuit_id`,
//!   `direction`), `lqos_circuit_tcp_flows_total` and
//!   `lqos_circuit_tcp_unmeasured_flows_total` (flows without TCP
//!   timestamps); the same per node (`lqos_node_tcp_*`, label `node`, the
//!   histograms of the circuits below it merged); and the tracking's own
//!   health (`lqos_bpf_tcp_*`: flows in the table, its size and fill,
//!   evictions, samples, circuits measured and the map's capacity);
//! - any [`Family`] of the caller's own (the daemon's health), after them.
//!
//! The formats differ only in their descriptors: OpenMetrics names a
//! counter family without its `_total` suffix and ends with `# EOF`; the
//! text format names it with the suffix and has no end marker.
//!
//! [`CircuitSeries`] bounds the circuit series on very large networks.
//!
//! Labels change only when the plan does: [`Labels`] escapes them once per
//! plan and every render copies them, so a render is a few copies and
//! integer formats per sample (10,000 circuits with four busy cake tins
//! each, 381,000 samples: see `docs/benchmarks.md`). The OpenMetrics text
//! is the one prometheus-client writes for the same families (a test
//! compares them); its per-label encoding costs several times this, too
//! much at this size. [`Exposition`] renders a chunk at a time, so a server
//! sends an answer as its client reads it, without a copy of the whole.
//!
//! ```
//! use lqos_apply::stats::openmetrics::{render, CircuitSeries, Format, Labels};
//! use lqos_apply::stats::{IfaceSamples, Samples, StatsIndex, StatsTracker};
//! use std::time::Duration;
//!
//! let g = lqos_model::generate(&lqos_model::GenParams::with_circuits(3));
//! let cfg = lqos_tc::PlanConfig::bridge("ens19", "ens20", 2);
//! let plan = lqos_tc::plan(&g.network, &cfg, None).unwrap();
//! let index = StatsIndex::new(&plan);
//! let labels = Labels::new(&index);
//! let raw = Samples::from(index.devs().map(IfaceSamples::empty).collect::<Vec<_>>());
//! let stats = StatsTracker::new(&index).observe(&index, &raw, Duration::ZERO);
//! let mut out = Vec::new();
//! render(&mut out, Some((&stats, &labels)), &[], CircuitSeries::All, Format::Prometheus).unwrap();
//! let text = String::from_utf8(out).unwrap();
//! assert!(text.contains("# TYPE lqos_circuit_sent_bytes_total counter\n"));
//! assert!(text.contains("lqos_circuit_sent_bytes_total{circuit_id=\"10001\",direction=\"download\"} 0\n"));
//! assert!(text.contains("lqos_unclassified_sent_bytes_total{direction=\"upload\"} 0\n"));
//! ```

use std::io;

use super::tcp::{TcpDataPath, TcpStats, EXPOSED_BUCKETS};
use super::{CircuitStats, Dir, DirStats, Stats, StatsIndex};

/// Which circuits get series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CircuitSeries {
    /// Every circuit.
    All,
    /// The N busiest (download + upload rate) at each render.
    Top(usize),
    /// None (nodes only).
    None,
}

/// One counter or gauge every circuit and node direction has: name (after
/// `lqos_circuit_` / `lqos_node_`), help, value.
pub type Field = (&'static str, &'static str, fn(&DirStats) -> u64);

/// The counters (`_total`), in exposition order.
pub const COUNTERS: [Field; 5] = [
    ("sent_bytes", "Bytes sent", |d| d.bytes),
    ("sent_packets", "Packets sent", |d| d.packets),
    ("drops", "Packets dropped (class and leaf)", |d| d.drops),
    ("overlimits", "HTB overlimit events", |d| d.overlimits),
    ("ecn_marks", "Packets ECN-marked", |d| d.ecn_marks),
];

/// The gauges, in exposition order.
pub const GAUGES: [Field; 2] = [
    ("backlog_bytes", "Bytes queued now", |d| d.backlog_bytes),
    ("ceil_bytes_per_second", "Planned ceil", |d| d.ceil_bps / 8),
];

/// The cake delay family's name and help.
pub const DELAY: (&str, &str) = (
    "lqos_circuit_cake_delay_seconds",
    "cake tin queueing delay (peak, avg, base)",
);

/// The info family's name and help (a gauge of value 1 per circuit).
pub const INFO: (&str, &str) = ("lqos_circuit_info", "A circuit's name and parent node");

/// The TCP round-trip histogram's name (after `lqos_circuit_` /
/// `lqos_node_`) and help.
pub const TCP_RTT: (&str, &str) = (
    "tcp_rtt_seconds",
    "TCP round-trip time by the way the flows' data goes and the side of the shaper (subscriber: to the subscriber and back, with the shaper's queue; internet: to the far end and back)",
);

/// A counter of a circuit's or node's TCP statistics: name (after
/// `lqos_circuit_` / `lqos_node_`, without `_total`), help, value per
/// direction (`None`: one series without a direction label).
type TcpField = (&'static str, &'static str, fn(&TcpStats) -> TcpValue);

enum TcpValue {
    PerDir([u64; 2]),
    One(u64),
}

/// The TCP counters, in exposition order.
const TCP_COUNTERS: [TcpField; 3] = [
    (
        "tcp_retransmits",
        "TCP segments sent again (by the segments' direction)",
        |t| TcpValue::PerDir([t.download.retransmits, t.upload.retransmits]),
    ),
    ("tcp_flows", "TCP flows seen", |t| TcpValue::One(t.flows)),
    (
        "tcp_unmeasured_flows",
        "TCP flows without timestamps (no round-trip times)",
        |t| TcpValue::One(t.unmeasured_flows),
    ),
];

/// The `side` label values.
const SIDE: [&str; 2] = [",side=\"subscriber\"", ",side=\"internet\""];

/// The data path's TCP tracking as families (`lqos_bpf_tcp_*`).
pub fn tcp_families(t: &TcpDataPath) -> Vec<Family> {
    let gauge =
        |name: &str, help: &str, v: f64| Family::new(name, help, Kind::Gauge).sample(&[], v);
    let counter = |name: &str, help: &str, v: u64| {
        Family::new(name, help, Kind::Counter).sample(&[], v as f64)
    };
    vec![
        gauge(
            "lqos_bpf_tcp_flows",
            "TCP flows in the flow table (estimated: entered and not closed, at most its size)",
            t.flows_tracked as f64,
        ),
        gauge(
            "lqos_bpf_tcp_flow_table_size",
            "Entries of the TCP flow table",
            f64::from(t.flow_table_size),
        ),
        gauge(
            "lqos_bpf_tcp_flow_table_fill",
            "Fill of the TCP flow table (0 to 1)",
            t.flow_table_fill,
        ),
        counter(
            "lqos_bpf_tcp_flows_entered",
            "TCP flows entered in the flow table",
            t.flows_entered,
        ),
        counter(
            "lqos_bpf_tcp_flows_closed",
            "TCP flows taken out on a RST or FINs both ways",
            t.flows_closed,
        ),
        counter(
            "lqos_bpf_tcp_flow_evictions",
            "TCP flows the flow table's LRU evicted for new ones (estimated)",
            t.flows_evicted,
        ),
        counter(
            "lqos_bpf_tcp_flows_failed",
            "TCP flows that could not be entered",
            t.flows_failed,
        ),
        counter("lqos_bpf_tcp_rtt_samples", "RTT samples taken", t.samples),
        gauge(
            "lqos_bpf_tcp_circuits",
            "Circuits with TCP statistics in the kernel",
            f64::from(t.circuits),
        ),
        gauge(
            "lqos_bpf_tcp_circuits_capacity",
            "Capacity of the kernel's map of circuits' TCP statistics",
            f64::from(t.circuit_capacity),
        ),
        counter(
            "lqos_bpf_tcp_circuits_full",
            "Circuits that found the map of TCP statistics full",
            t.circuits_full,
        ),
    ]
}

/// The `direction` label of each [`Dir`], after a circuit's or node's own.
const DIRECTION: [&str; 2] = [",direction=\"download\"", ",direction=\"upload\""];

/// The `delay` label values, in the order of [`tin_delays`].
pub const DELAY_KINDS: [&str; 3] = ["peak", "avg", "base"];

macro_rules! tin_labels {
    ($($t:literal),*) => {
        [$([
            concat!(",tin=\"", $t, "\",delay=\"peak\"} "),
            concat!(",tin=\"", $t, "\",delay=\"avg\"} "),
            concat!(",tin=\"", $t, "\",delay=\"base\"} "),
        ]),*]
    };
}

/// The rest of a delay sample's label set per tin and delay, closed.
const TIN_DELAY: [[&str; 3]; 8] = tin_labels!("0", "1", "2", "3", "4", "5", "6", "7");

/// The cake tins of `d` whose delays are served: those that have sent a
/// packet (index, peak/avg/base delay in µs).
pub fn tin_delays(d: &DirStats) -> impl Iterator<Item = (usize, [u32; 3])> + '_ {
    d.tins
        .iter()
        .take(TIN_DELAY.len())
        .enumerate()
        .filter(|(_, t)| t.sent_packets > 0 || t.sent_bytes > 0)
        .map(|(i, t)| (i, [t.peak_delay_us, t.avg_delay_us, t.base_delay_us]))
}

/// Label values escaped for the text formats (`\`, `"` and newline).
fn escape_into(out: &mut String, v: &str) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// Strings stored end to end (one allocation for all of them).
#[derive(Debug, Default, Clone)]
struct Arena {
    text: String,
    ends: Vec<u32>,
}

impl Arena {
    /// Appends `k1="v1",k2="v2"...` (values escaped) as the next string.
    fn push(&mut self, labels: &[(&str, &str)]) {
        for (i, (k, v)) in labels.iter().enumerate() {
            if i > 0 {
                self.text.push(',');
            }
            self.text.push_str(k);
            self.text.push_str("=\"");
            escape_into(&mut self.text, v);
            self.text.push('"');
        }
        self.ends
            .push(u32::try_from(self.text.len()).expect("label sets under 4 GiB"));
    }

    fn get(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.text[start..self.ends[i] as usize]
    }

    fn len(&self) -> usize {
        self.ends.len()
    }
}

/// The label sets of one plan's circuits and nodes, escaped once (they
/// change only on a reload) and kept across renders.
#[derive(Debug, Default, Clone)]
pub struct Labels {
    /// Per circuit: `circuit_id="ID"`.
    circuit: Arena,
    /// Per circuit: `circuit_id="ID",name="NAME",parent="NODE"`.
    info: Arena,
    /// Per node: `node="NAME"`.
    node: Arena,
}

impl Labels {
    /// The label sets of `index`'s circuits and nodes.
    pub fn new(index: &StatsIndex) -> Labels {
        let mut l = Labels::default();
        for c in &index.circuits {
            let parent = index
                .nodes
                .get(c.parent as usize)
                .map_or("", |n| n.name.as_str());
            l.circuit.push(&[("circuit_id", &c.id)]);
            l.info
                .push(&[("circuit_id", &c.id), ("name", &c.name), ("parent", parent)]);
        }
        for n in &index.nodes {
            l.node.push(&[("node", &n.name)]);
        }
        l
    }

    /// Whether these are the labels of `stats`'s plan (same circuits and
    /// nodes, in the same order).
    fn fits(&self, stats: &Stats) -> bool {
        self.circuit.len() == stats.circuits.len() && self.node.len() == stats.nodes.len()
    }
}

/// The text format of an exposition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// The Prometheus text format 0.0.4 (what `promtool check metrics`
    /// reads; the default when a scraper does not ask for OpenMetrics).
    #[default]
    Prometheus,
    /// OpenMetrics 1.0.0.
    OpenMetrics,
}

impl Format {
    /// The `Content-Type` of an answer in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }

    /// The format an HTTP `Accept` header asks for: OpenMetrics when it
    /// names `application/openmetrics-text` (version 1.0.0, 0.0.1 or
    /// none) with a weight at least that of an explicit `text/plain`;
    /// the text format otherwise (no header, `text/plain`, `*/*`).
    /// Prometheus's own header
    /// (`application/openmetrics-text;version=1.0.0,...,text/plain;version=0.0.4;q=0.5,*/*;q=0.1`)
    /// gets OpenMetrics.
    pub fn negotiate(accept: Option<&str>) -> Format {
        let (mut om, mut text) = (0.0f32, 0.0f32);
        for range in accept.unwrap_or("").split(',') {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or("").to_ascii_lowercase();
            let (mut q, mut version) = (1.0f32, None);
            for p in parts {
                let Some((k, v)) = p.split_once('=') else {
                    continue;
                };
                let v = v.trim().trim_matches('"');
                match k.trim().to_ascii_lowercase().as_str() {
                    "q" => q = v.parse().unwrap_or(0.0),
                    "version" => version = Some(v.to_string()),
                    _ => {}
                }
            }
            match media.as_str() {
                "application/openmetrics-text"
                    if matches!(version.as_deref(), None | Some("1.0.0" | "0.0.1")) =>
                {
                    om = om.max(q)
                }
                "text/plain" if matches!(version.as_deref(), None | Some("0.0.4")) => {
                    text = text.max(q)
                }
                _ => {}
            }
        }
        if om > 0.0 && om >= text {
            Format::OpenMetrics
        } else {
            Format::Prometheus
        }
    }
}

/// The type of a [`Family`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A counter: its samples are named with `_total`.
    Counter,
    /// A gauge.
    Gauge,
}

/// A family of the caller's own series, rendered after the statistics in
/// the same format (the daemon's health:
/// [`crate::daemon::Health::families`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    /// The family's name; a counter's without `_total`.
    pub name: String,
    /// What it counts or measures.
    pub help: String,
    /// Counter or gauge.
    pub kind: Kind,
    /// Its samples: label pairs (values escaped when written) and value.
    pub samples: Vec<(Vec<(String, String)>, f64)>,
}

impl Family {
    /// A family with no samples yet.
    pub fn new(name: &str, help: &str, kind: Kind) -> Family {
        Family {
            name: name.to_string(),
            help: help.to_string(),
            kind,
            samples: Vec::new(),
        }
    }

    /// The same family with one more sample.
    pub fn sample(mut self, labels: &[(&str, &str)], value: f64) -> Family {
        let labels = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self.samples.push((labels, value));
        self
    }
}

/// The statistics to render and their plan's label sets.
pub type Series<'a> = (&'a Stats, &'a Labels);

/// Per-sample output: integer and decimal formats without allocation.
struct Out<'a>(&'a mut Vec<u8>);

impl Out<'_> {
    #[inline]
    fn put(&mut self, s: &str) {
        self.0.extend_from_slice(s.as_bytes());
    }

    #[inline]
    fn uint(&mut self, v: u64) {
        self.0
            .extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
    }

    /// µs as decimal seconds, exactly (`1234` -> `0.001234`).
    #[inline]
    fn micros_as_secs(&mut self, us: u32) {
        self.uint(u64::from(us / 1_000_000));
        let mut frac = us % 1_000_000;
        if frac == 0 {
            return;
        }
        let mut digits = [b'0'; 7];
        digits[0] = b'.';
        for d in digits[1..].iter_mut().rev() {
            *d = b'0' + (frac % 10) as u8;
            frac /= 10;
        }
        let end = digits.iter().rposition(|&d| d != b'0').map_or(1, |p| p + 1);
        self.0.extend_from_slice(&digits[..end]);
    }

    /// A float as both formats write it (`+Inf`, `-Inf`, `NaN`; whole
    /// numbers without a fraction).
    fn float(&mut self, v: f64) {
        if v.is_nan() {
            self.put("NaN");
        } else if v.is_infinite() {
            self.put(if v > 0.0 { "+Inf" } else { "-Inf" });
        } else if v.fract() == 0.0 && v.abs() < 9.0e15 {
            self.0
                .extend_from_slice(itoa::Buffer::new().format(v as i64).as_bytes());
        } else {
            use std::io::Write;
            let _ = write!(self.0, "{v}");
        }
    }

    /// `# HELP` and `# TYPE` of histogram family `name` (the same in both
    /// formats; `help` has no character to escape).
    fn histogram_descriptor(&mut self, name: &str, help: &str) {
        self.put("# HELP ");
        self.put(name);
        self.put(" ");
        self.put(help);
        self.put("\n# TYPE ");
        self.put(name);
        self.put(" histogram\n");
    }

    /// `# HELP` and `# TYPE` of family `name` in `format`.
    fn descriptor(&mut self, format: Format, name: &str, help: &str, kind: Kind) {
        let suffix = match (format, kind) {
            (Format::Prometheus, Kind::Counter) => "_total",
            _ => "",
        };
        self.put("# HELP ");
        self.put(name);
        self.put(suffix);
        self.put(" ");
        for c in help.chars() {
            match c {
                '\\' => self.put("\\\\"),
                '\n' => self.put("\\n"),
                '"' if format == Format::OpenMetrics => self.put("\\\""),
                c => self.put(c.encode_utf8(&mut [0; 4])),
            }
        }
        self.put("\n# TYPE ");
        self.put(name);
        self.put(suffix);
        self.put(match kind {
            Kind::Counter => " counter\n",
            Kind::Gauge => " gauge\n",
        });
    }
}

/// The circuits an exposition has series of.
#[derive(Debug, Clone)]
enum Selected {
    /// The first n (every circuit: no list kept).
    All(usize),
    /// These, by index into `stats.circuits`.
    Some(Vec<usize>),
}

impl Selected {
    fn len(&self) -> usize {
        match self {
            Selected::All(n) => *n,
            Selected::Some(v) => v.len(),
        }
    }

    /// The index of the `i`-th selected circuit.
    fn get(&self, i: usize) -> usize {
        match self {
            Selected::All(_) => i,
            Selected::Some(v) => v[i],
        }
    }
}

/// The circuits `which` selects.
fn selected(stats: &Stats, which: CircuitSeries) -> Selected {
    let busy = |c: &CircuitStats| c.download.rate_bps + c.upload.rate_bps;
    Selected::Some(match which {
        CircuitSeries::None => Vec::new(),
        CircuitSeries::All => return Selected::All(stats.circuits.len()),
        CircuitSeries::Top(n) => {
            let mut v: Vec<usize> = (0..stats.circuits.len()).collect();
            let by_rate = |a: &usize, b: &usize| {
                busy(&stats.circuits[*b]).total_cmp(&busy(&stats.circuits[*a]))
            };
            if n < v.len() {
                v.select_nth_unstable_by(n, by_rate);
                v.truncate(n);
            }
            v.sort_by(by_rate);
            v
        }
    })
}

/// The counter and gauge fields in exposition order, with their kind.
fn fields() -> impl Iterator<Item = (&'static Field, Kind)> {
    COUNTERS
        .iter()
        .map(|f| (f, Kind::Counter))
        .chain(GAUGES.iter().map(|f| (f, Kind::Gauge)))
}

/// Who a field section is of, in the order of the sections.
const WHO: [&str; 3] = ["circuit", "node", "unclassified"];

/// Sections of an exposition: per field a circuit, a node and an
/// unclassified section, then the delays, the circuits' info, the TCP
/// histograms and counters of circuits and nodes, the data path's and the
/// caller's families, the end.
const FIELD_SECTIONS: usize = WHO.len() * (COUNTERS.len() + GAUGES.len());
const DELAY_SECTION: usize = FIELD_SECTIONS;
const INFO_SECTION: usize = FIELD_SECTIONS + 1;
/// Per TCP family (the histogram, then the counters), a circuit and a
/// node section.
const TCP_SECTIONS: usize = FIELD_SECTIONS + 2;
const TCP_FAMILIES: usize = 1 + TCP_COUNTERS.len();
const FAMILY_SECTIONS: usize = TCP_SECTIONS + 2 * TCP_FAMILIES;

/// An exposition being written, resumable: [`Exposition::fill`] writes
/// the next part of it, so a server sends a large answer a chunk at a time
/// as its client reads (no copy of the whole is kept), and
/// [`render`] writes it whole. Each call must be given the same
/// statistics and families.
#[derive(Debug, Clone)]
pub struct Exposition {
    format: Format,
    circuits: Selected,
    nodes: usize,
    /// The data path's families (before the caller's).
    own: Vec<Family>,
    /// Per field section, `lqos_circuit_NAME_total{` and the like.
    prefixes: Vec<String>,
    section: usize,
    /// 0: the section's descriptor; then its rows.
    row: usize,
}

impl Exposition {
    /// The exposition of `series` (`None`: before a first poll, only
    /// `families`) with the circuits `which` selects, in `format`.
    pub fn new(series: Option<Series<'_>>, which: CircuitSeries, format: Format) -> Exposition {
        let (circuits, nodes) = match series {
            Some((stats, labels)) if labels.fits(stats) => {
                (selected(stats, which), stats.nodes.len())
            }
            _ => (Selected::Some(Vec::new()), 0),
        };
        let prefixes = fields()
            .flat_map(|(&(name, _, _), kind)| {
                let open = match kind {
                    Kind::Counter => "_total{",
                    Kind::Gauge => "{",
                };
                WHO.map(|who| format!("lqos_{who}_{name}{open}"))
            })
            .collect();
        let own = series
            .and_then(|(stats, _)| stats.tcp.as_ref())
            .map(tcp_families)
            .unwrap_or_default();
        Exposition {
            format,
            circuits,
            nodes,
            own,
            prefixes,
            // No statistics (no poll yet): no descriptors of theirs.
            section: if series.is_some() { 0 } else { FAMILY_SECTIONS },
            row: 0,
        }
    }

    /// Writes the next part of the exposition to `out` until `out` holds
    /// at least `limit` bytes (one row more at most) or the exposition
    /// ends. Returns whether more is to come.
    pub fn fill(
        &mut self,
        series: Option<Series<'_>>,
        families: &[Family],
        out: &mut Vec<u8>,
        limit: usize,
    ) -> bool {
        let eof_section = FAMILY_SECTIONS + self.own.len() + families.len();
        let mut o = Out(out);
        while o.0.len() < limit {
            if self.section > eof_section {
                return false;
            }
            let rows = match self.section {
                s if s < FIELD_SECTIONS && s % WHO.len() == 0 => self.circuits.len(),
                s if s < FIELD_SECTIONS && s % WHO.len() == 1 => self.nodes,
                s if s < FIELD_SECTIONS => usize::from(series.is_some()),
                DELAY_SECTION | INFO_SECTION => self.circuits.len(),
                s if s < FAMILY_SECTIONS && (s - TCP_SECTIONS) % 2 == 0 => self.circuits.len(),
                s if s < FAMILY_SECTIONS => self.nodes,
                s if s < eof_section => self.family(families, s).map_or(0, |f| f.samples.len()),
                _ => 0,
            };
            if self.row > rows {
                self.section += 1;
                self.row = 0;
                continue;
            }
            self.write(series, families, &mut o);
            self.row += 1;
        }
        self.section <= eof_section
    }

    /// The family of section `s` (the data path's, then the caller's).
    fn family<'a>(&'a self, families: &'a [Family], s: usize) -> Option<&'a Family> {
        let i = s.checked_sub(FAMILY_SECTIONS)?;
        match i.checked_sub(self.own.len()) {
            None => self.own.get(i),
            Some(j) => families.get(j),
        }
    }

    /// Row `self.row` of TCP section `s` (0: the descriptor).
    fn write_tcp(&self, series: Option<Series<'_>>, s: usize, o: &mut Out<'_>) {
        let (family, node) = ((s - TCP_SECTIONS) / 2, (s - TCP_SECTIONS) % 2 == 1);
        let who = if node { "lqos_node_" } else { "lqos_circuit_" };
        let format = self.format;
        if self.row == 0 {
            return match family {
                0 => o.histogram_descriptor(&format!("{who}{}", TCP_RTT.0), TCP_RTT.1),
                f => {
                    let (name, help, _) = TCP_COUNTERS[f - 1];
                    o.descriptor(format, &format!("{who}{name}"), help, Kind::Counter)
                }
            };
        }
        let Some((stats, labels)) = series else {
            return;
        };
        let (tcp, label) = if node {
            let i = self.row - 1;
            (stats.nodes[i].tcp.as_deref(), labels.node.get(i))
        } else {
            let i = self.circuits.get(self.row - 1);
            (stats.circuits[i].tcp.as_deref(), labels.circuit.get(i))
        };
        let Some(tcp) = tcp else { return };
        if family == 0 {
            for d in Dir::BOTH {
                for (side, side_label) in SIDE.iter().enumerate() {
                    let t = tcp.dir(d);
                    let r = if side == 0 {
                        &t.subscriber
                    } else {
                        &t.internet
                    };
                    // A side without samples has no series (yet).
                    if r.samples == 0 && r.buckets.is_empty() {
                        continue;
                    }
                    let rest = |o: &mut Out<'_>| {
                        o.put(label);
                        o.put(DIRECTION[d as usize]);
                        o.put(side_label);
                    };
                    // Cumulative counts at the exposed bounds; the
                    // count is the +Inf bucket's (the kernel adds to the
                    // count and to a bucket one after the other).
                    let mut cum = r.cumulative();
                    let counts = EXPOSED_BUCKETS
                        .map(|(k, _)| cum.find(|&(b, _)| b == k).map_or(0, |(_, n)| n));
                    // prometheus-client's order: sum, count, buckets.
                    for (suffix, v) in [("_sum{", None), ("_count{", Some(counts[17]))] {
                        o.put(who);
                        o.put(TCP_RTT.0);
                        o.put(suffix);
                        rest(o);
                        o.put("} ");
                        match v {
                            None => o.float(r.sum_ms / 1e3),
                            Some(n) => o.uint(n),
                        }
                        o.put("\n");
                    }
                    for (&(_, le), n) in EXPOSED_BUCKETS.iter().zip(counts) {
                        o.put(who);
                        o.put(TCP_RTT.0);
                        // `le` first, as prometheus-client writes it.
                        o.put("_bucket{le=\"");
                        o.put(le);
                        o.put("\",");
                        rest(o);
                        o.put("} ");
                        o.uint(n);
                        o.put("\n");
                    }
                }
            }
            return;
        }
        let (name, _, value) = TCP_COUNTERS[family - 1];
        let mut line = |dir: Option<Dir>, v: u64| {
            o.put(who);
            o.put(name);
            o.put("_total{");
            o.put(label);
            if let Some(d) = dir {
                o.put(DIRECTION[d as usize]);
            }
            o.put("} ");
            o.uint(v);
            o.put("\n");
        };
        match value(tcp) {
            TcpValue::PerDir(v) => {
                for d in Dir::BOTH {
                    line(Some(d), v[d as usize]);
                }
            }
            TcpValue::One(v) => line(None, v),
        }
    }

    /// Row `self.row` of section `self.section` (0: the descriptor).
    fn write(&self, series: Option<Series<'_>>, families: &[Family], o: &mut Out<'_>) {
        let (s, row) = (self.section, self.row);
        let format = self.format;
        if s < FIELD_SECTIONS {
            let (&(name, help, value), kind) =
                fields().nth(s / WHO.len()).expect("a field section");
            let who = WHO[s % WHO.len()];
            if row == 0 {
                return o.descriptor(format, &format!("lqos_{who}_{name}"), help, kind);
            }
            let Some((stats, labels)) = series else {
                return;
            };
            let (dirs, label) = match s % WHO.len() {
                0 => {
                    let i = self.circuits.get(row - 1);
                    (
                        [&stats.circuits[i].download, &stats.circuits[i].upload],
                        labels.circuit.get(i),
                    )
                }
                1 => {
                    let n = &stats.nodes[row - 1];
                    ([&n.download, &n.upload], labels.node.get(row - 1))
                }
                _ => {
                    let u = &stats.unclassified;
                    ([&u.download, &u.upload], "")
                }
            };
            for d in Dir::BOTH {
                o.put(&self.prefixes[s]);
                o.put(label);
                // The direction alone has no comma before it.
                let direction = DIRECTION[d as usize];
                o.put(if label.is_empty() {
                    &direction[1..]
                } else {
                    direction
                });
                o.put("} ");
                o.uint(value(dirs[d as usize]));
                o.put("\n");
            }
        } else if s == DELAY_SECTION {
            if row == 0 {
                return o.descriptor(format, DELAY.0, DELAY.1, Kind::Gauge);
            }
            let Some((stats, labels)) = series else {
                return;
            };
            let i = self.circuits.get(row - 1);
            let c = &stats.circuits[i];
            for d in Dir::BOTH {
                for (tin, delays) in tin_delays(c.dir(d)) {
                    for (k, us) in delays.into_iter().enumerate() {
                        o.put(DELAY.0);
                        o.put("{");
                        o.put(labels.circuit.get(i));
                        o.put(DIRECTION[d as usize]);
                        o.put(TIN_DELAY[tin][k]);
                        o.micros_as_secs(us);
                        o.put("\n");
                    }
                }
            }
        } else if s == INFO_SECTION {
            if row == 0 {
                return o.descriptor(format, INFO.0, INFO.1, Kind::Gauge);
            }
            let Some((_, labels)) = series else { return };
            o.put(INFO.0);
            o.put("{");
            o.put(labels.info.get(self.circuits.get(row - 1)));
            o.put("} 1\n");
        } else if (TCP_SECTIONS..FAMILY_SECTIONS).contains(&s) {
            self.write_tcp(series, s, o);
        } else if let Some(f) = self.family(families, s) {
            if row == 0 {
                return o.descriptor(format, &f.name, &f.help, f.kind);
            }
            let (labels, value) = &f.samples[row - 1];
            o.put(&f.name);
            if f.kind == Kind::Counter {
                o.put("_total");
            }
            if !labels.is_empty() {
                let mut set = String::new();
                for (k, v) in labels {
                    if !set.is_empty() {
                        set.push(',');
                    }
                    set.push_str(k);
                    set.push_str("=\"");
                    escape_into(&mut set, v);
                    set.push('"');
                }
                o.put("{");
                o.put(&set);
                o.put("}");
            }
            o.put(" ");
            o.float(*value);
            o.put("\n");
        } else if format == Format::OpenMetrics {
            o.put(EOF);
        }
    }
}

/// Bytes written per chunk by [`render`].
const CHUNK: usize = 64 << 10;

/// Writes the whole exposition of `series` and `families` to `sink`, a
/// chunk at a time (no copy of the whole is kept).
pub fn render(
    sink: &mut dyn io::Write,
    series: Option<Series<'_>>,
    families: &[Family],
    which: CircuitSeries,
    format: Format,
) -> io::Result<()> {
    let mut e = Exposition::new(series, which, format);
    let mut buf = Vec::with_capacity(CHUNK + 4096);
    loop {
        let more = e.fill(series, families, &mut buf, CHUNK);
        sink.write_all(&buf)?;
        buf.clear();
        if !more {
            return Ok(());
        }
    }
}

/// The line that ends an OpenMetrics exposition.
pub const EOF: &str = "# EOF\n";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{IfaceSamples, Samples, StatsTracker};

    fn fixture() -> (Stats, Labels, Vec<Family>) {
        let (_, plan) = crate::test_fixtures::bridge_plan(7, 2, "cake diffserv4");
        let index = StatsIndex::new(&plan);
        let raw = Samples::from(index.devs().map(IfaceSamples::empty).collect::<Vec<_>>());
        let stats = StatsTracker::new(&index).observe(&index, &raw, Default::default());
        let families = vec![
            Family::new("x_events", "Events \\ with \"quotes\"", Kind::Counter)
                .sample(&[("k", "v\"\n")], 3.0),
            Family::new("x_ratio", "A ratio", Kind::Gauge)
                .sample(&[], 0.25)
                .sample(&[("k", "inf")], f64::INFINITY),
        ];
        (stats, Labels::new(&index), families)
    }

    /// Written a few bytes at a time, the exposition is the one written
    /// whole.
    #[test]
    fn an_exposition_in_small_parts_is_the_whole_one() {
        let (stats, labels, families) = fixture();
        for format in [Format::Prometheus, Format::OpenMetrics] {
            let series = Some((&stats, &labels));
            let mut whole = Vec::new();
            render(&mut whole, series, &families, CircuitSeries::All, format).unwrap();
            for limit in [1, 100, 4096] {
                let mut e = Exposition::new(series, CircuitSeries::All, format);
                let (mut parts, mut buf) = (Vec::new(), Vec::new());
                while e.fill(series, &families, &mut buf, limit) {
                    assert!(!buf.is_empty() || limit == 0);
                    parts.append(&mut buf);
                }
                parts.append(&mut buf);
                assert_eq!(parts, whole, "{format:?} {limit}");
            }
        }
    }

    #[test]
    fn families_render_in_either_format_and_alone() {
        let (_, _, families) = fixture();
        let text = |format| {
            let mut out = Vec::new();
            render(&mut out, None, &families, CircuitSeries::All, format).unwrap();
            String::from_utf8(out).unwrap()
        };
        assert_eq!(
            text(Format::Prometheus),
            "# HELP x_events_total Events \\\\ with \"quotes\"\n# TYPE x_events_total counter\n\
             x_events_total{k=\"v\\\"\\n\"} 3\n\
             # HELP x_ratio A ratio\n# TYPE x_ratio gauge\nx_ratio 0.25\nx_ratio{k=\"inf\"} +Inf\n"
        );
        assert_eq!(
            text(Format::OpenMetrics),
            "# HELP x_events Events \\\\ with \\\"quotes\\\"\n# TYPE x_events counter\n\
             x_events_total{k=\"v\\\"\\n\"} 3\n\
             # HELP x_ratio A ratio\n# TYPE x_ratio gauge\nx_ratio 0.25\nx_ratio{k=\"inf\"} +Inf\n# EOF\n"
        );
    }
}
