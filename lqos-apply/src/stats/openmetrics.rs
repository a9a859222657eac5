//! The statistics of one poll as OpenMetrics text (what `lqos watch
//! --metrics` serves at `/metrics`): per circuit and node and direction,
//! counters in base units and gauges.
//!
//! Series (counters end in `_total`):
//! - per circuit (labels `circuit_id`, `direction`):
//!   `lqos_circuit_sent_bytes_total`, `_sent_packets_total`,
//!   `_drops_total`, `_overlimits_total`, `_ecn_marks_total`; gauges
//!   `lqos_circuit_backlog_bytes`, `lqos_circuit_ceil_bits_per_second`;
//!   for cake leaves `lqos_circuit_cake_delay_seconds` (labels `tin`: the
//!   tin's index, diffserv4 0 Bulk, 1 Best Effort, 2 Video, 3 Voice;
//!   `delay`: `peak`, `avg` or `base`), for each tin that has sent a
//!   packet since the leaf was created (an idle tin's delays are zero and
//!   carry nothing; a tin's series stays once it has one);
//! - `lqos_circuit_info{circuit_id, name, parent} 1` (type `info`): names
//!   and parents in one series, so the counters' labels stay bounded;
//! - per node (labels `node`, `direction`): the same counters and the two
//!   gauges;
//! - traffic no circuit's class took, the default classes `:2` of every
//!   queue summed (label `direction`): `lqos_unclassified_*`, the same
//!   counters and gauges.
//!
//! [`CircuitSeries`] bounds the circuit series on very large networks.
//!
//! Labels change only when the plan does: [`Labels`] escapes them once per
//! plan and every render copies them, so a render is a few copies and
//! integer formats per sample (10,000 circuits with four busy cake tins
//! each, 381,000 samples: see `docs/benchmarks.md`). The output is the
//! text prometheus-client writes for the same families (a test compares
//! them); its per-label encoding costs several times this, too much at
//! this size.
//!
//! ```
//! use lqos_apply::stats::openmetrics::{render, CircuitSeries, Labels};
//! use lqos_apply::stats::{RawIface, RawStats, StatsIndex, StatsTracker};
//! use std::time::Duration;
//!
//! let g = lqos_model::generate(&lqos_model::GenParams { circuits: 3, ..Default::default() });
//! let cfg = lqos_tc::PlanConfig::bridge("ens19", "ens20", 2);
//! let plan = lqos_tc::plan(&g.network, &cfg, None).unwrap();
//! let index = StatsIndex::new(&plan);
//! let labels = Labels::new(&index);
//! let raw = RawStats { interfaces: index.devs().map(RawIface::empty).collect() };
//! let stats = StatsTracker::new(&index).observe(&index, &raw, Duration::ZERO);
//! let mut out = Vec::new();
//! render(&mut out, &stats, &labels, CircuitSeries::All).unwrap();
//! let text = String::from_utf8(out).unwrap();
//! assert!(text.contains("lqos_circuit_sent_bytes_total{circuit_id=\"10001\",direction=\"download\"} 0\n"));
//! assert!(text.contains("lqos_unclassified_sent_bytes_total{direction=\"upload\"} 0\n"));
//! ```

use std::io;

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
    ("ceil_bits_per_second", "Planned ceil", |d| d.ceil_bps),
];

/// The cake delay family's name and help.
pub const DELAY: (&str, &str) = (
    "lqos_circuit_cake_delay_seconds",
    "cake tin queueing delay (peak, avg, base)",
);

/// The info family's name (samples `lqos_circuit_info`) and help.
pub const INFO: (&str, &str) = ("lqos_circuit", "A circuit's name and parent node");

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

/// Bytes of output buffered before they go to the sink.
const CHUNK: usize = 64 << 10;

/// A buffered writer that never grows its buffer past one chunk and a
/// sample (cheaper per small write than `io::BufWriter`).
struct Out<'a> {
    buf: Vec<u8>,
    sink: &'a mut dyn io::Write,
}

impl Out<'_> {
    #[inline]
    fn put(&mut self, s: &str) {
        self.buf.extend_from_slice(s.as_bytes());
    }

    #[inline]
    fn uint(&mut self, v: u64) {
        self.buf
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
        self.buf.extend_from_slice(&digits[..end]);
    }

    /// Ends a sample line; passes a full chunk on.
    #[inline]
    fn end_line(&mut self) -> io::Result<()> {
        self.buf.push(b'\n');
        if self.buf.len() >= CHUNK {
            self.sink.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    fn descriptor(&mut self, name: &str, help: &str, kind: &str) -> io::Result<()> {
        for s in ["# HELP ", name, " ", help, "\n# TYPE ", name, " ", kind] {
            self.put(s);
        }
        self.end_line()
    }

    /// The descriptor of family `lqos_{who}_{name}`; returns the start of
    /// its samples (`lqos_{who}_{name}{open}`).
    fn family(
        &mut self,
        who: &str,
        name: &str,
        help: &str,
        kind: &str,
        open: &str,
    ) -> io::Result<String> {
        let family = format!("lqos_{who}_{name}");
        self.descriptor(&family, help, kind)?;
        Ok(format!("{family}{open}"))
    }

    /// The download and upload samples of one label set (`labels` without
    /// the direction; empty: the direction alone).
    #[inline]
    fn both(
        &mut self,
        sample: &str,
        labels: &str,
        dirs: [&DirStats; 2],
        value: fn(&DirStats) -> u64,
    ) -> io::Result<()> {
        for d in Dir::BOTH {
            self.put(sample);
            self.put(labels);
            let direction = DIRECTION[d as usize];
            self.put(if labels.is_empty() {
                &direction[1..]
            } else {
                direction
            });
            self.put("} ");
            self.uint(value(dirs[d as usize]));
            self.end_line()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.sink.write_all(&self.buf)?;
        self.buf.clear();
        Ok(())
    }
}

/// The circuits `which` selects, as indices into `stats.circuits`.
fn selected(stats: &Stats, which: CircuitSeries) -> Vec<usize> {
    let busy = |c: &CircuitStats| c.download.rate_bps + c.upload.rate_bps;
    match which {
        CircuitSeries::None => Vec::new(),
        CircuitSeries::All => (0..stats.circuits.len()).collect(),
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
    }
}

/// Writes the circuit and node families of `stats` (labelled by `labels`,
/// the same plan's) to `sink`, without the closing `# EOF` (the caller
/// may append families of its own, then [`EOF`]).
pub fn render(
    sink: &mut dyn io::Write,
    stats: &Stats,
    labels: &Labels,
    which: CircuitSeries,
) -> io::Result<()> {
    let mut out = Out {
        buf: Vec::with_capacity(CHUNK + 4096),
        sink,
    };
    let circuits = if labels.fits(stats) {
        selected(stats, which)
    } else {
        Vec::new()
    };
    let nodes = if labels.fits(stats) {
        stats.nodes.len()
    } else {
        0
    };
    let families = COUNTERS
        .iter()
        .map(|f| (f, "counter", "_total{"))
        .chain(GAUGES.iter().map(|f| (f, "gauge", "{")));
    for (&(name, help, value), kind, open) in families {
        let sample = out.family("circuit", name, help, kind, open)?;
        for &i in &circuits {
            let c = &stats.circuits[i];
            out.both(
                &sample,
                labels.circuit.get(i),
                [&c.download, &c.upload],
                value,
            )?;
        }
        let sample = out.family("node", name, help, kind, open)?;
        for (i, n) in stats.nodes.iter().enumerate().take(nodes) {
            out.both(&sample, labels.node.get(i), [&n.download, &n.upload], value)?;
        }
        let sample = out.family("unclassified", name, help, kind, open)?;
        let u = &stats.unclassified;
        out.both(&sample, "", [&u.download, &u.upload], value)?;
    }
    out.descriptor(DELAY.0, DELAY.1, "gauge")?;
    for &i in &circuits {
        let c = &stats.circuits[i];
        for d in Dir::BOTH {
            for (tin, delays) in tin_delays(c.dir(d)) {
                for (k, us) in delays.into_iter().enumerate() {
                    out.put(DELAY.0);
                    out.put("{");
                    out.put(labels.circuit.get(i));
                    out.put(DIRECTION[d as usize]);
                    out.put(TIN_DELAY[tin][k]);
                    out.micros_as_secs(us);
                    out.end_line()?;
                }
            }
        }
    }
    out.descriptor(INFO.0, INFO.1, "info")?;
    for &i in &circuits {
        out.put(INFO.0);
        out.put("_info{");
        out.put(labels.info.get(i));
        out.put("} 1");
        out.end_line()?;
    }
    out.flush()
}

/// The line that ends an OpenMetrics exposition.
pub const EOF: &str = "# EOF\n";
