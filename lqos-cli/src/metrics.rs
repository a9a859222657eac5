//! `lqos watch --metrics ADDR`: the daemon's statistics and health as
//! Prometheus text (`GET /metrics`), encoded by prometheus-client from the
//! latest [`Stats`] on every scrape.
//!
//! Series (base units, counters `_total`):
//! - per circuit and direction (labels `circuit_id`, `direction`):
//!   `lqos_circuit_sent_bytes_total`, `_sent_packets_total`,
//!   `_drops_total`, `_overlimits_total`, `_ecn_marks_total`; gauges
//!   `lqos_circuit_backlog_bytes`, `lqos_circuit_ceil_bits_per_second`,
//!   and for cake leaves `lqos_circuit_cake_delay_seconds` (label `tin`,
//!   `delay` = `peak`|`avg`|`base`);
//! - `lqos_circuit_info{circuit_id, name, parent} 1`: names and parents in
//!   one series, so the counters' labels stay bounded;
//! - per node (label `node`, `direction`): the same counters and gauges;
//! - the daemon: `lqos_reloads_total{trigger, outcome}`,
//!   `lqos_reload_last_timestamp_seconds`, `_duration_seconds`,
//!   `lqos_reload_last_ops{change}`, `lqos_reload_last_success`,
//!   `lqos_lazy_leaves_active`, `lqos_stats_poll_duration_seconds`,
//!   `lqos_stats_polls_total`, `lqos_stats_poll_errors_total`.
//!
//! `--metrics-circuits all|top:N|none` bounds the circuit series on very
//! large networks (top: the N busiest by download + upload rate).
//!
//! The server is a small accept loop (std sockets, requests parsed by
//! httparse): one request per connection, at most 8 KiB of request head,
//! 2 s to send it; anything else gets a 4xx status and the connection is
//! closed.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lqos_apply::daemon::{Counters, Event};
use lqos_apply::netlink::ClassStats;
use lqos_apply::stats::{Dir, DirStats, RawIface, RawStats, Stats, StatsIndex, StatsTracker};
use lqos_apply::NetlinkLive;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

/// Which circuits get series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CircuitSeries {
    /// Every circuit.
    All,
    /// The N busiest (download + upload rate) at each scrape.
    Top(usize),
    /// None (nodes and the daemon only).
    None,
}

impl std::str::FromStr for CircuitSeries {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "all" => Ok(CircuitSeries::All),
            "none" => Ok(CircuitSeries::None),
            _ => s
                .strip_prefix("top:")
                .and_then(|n| n.parse().ok())
                .map(CircuitSeries::Top)
                .ok_or_else(|| format!("{s:?}: give all, none or top:N")),
        }
    }
}

/// What the daemon last did, for the health series.
#[derive(Debug, Clone, Default)]
pub struct Health {
    /// Reloads by (trigger, outcome).
    pub reloads: BTreeMap<(String, String), u64>,
    /// Unix time of the last reload.
    pub last_reload_unix: Option<f64>,
    /// Its duration.
    pub last_reload_secs: f64,
    /// Its ops added, changed, removed.
    pub last_ops: [u64; 3],
    /// Whether it succeeded.
    pub last_ok: bool,
    /// Circuits with their lazy leaf now (`None`: lazy leaves off).
    pub lazy_active: Option<usize>,
    /// Duration of the last statistics poll.
    pub poll_secs: f64,
    /// Statistics polls made.
    pub polls: u64,
    /// Statistics polls that failed.
    pub poll_errors: u64,
}

/// The state behind `/metrics`: the latest statistics and the health.
#[derive(Debug, Default)]
pub struct Shared {
    /// The latest poll's statistics.
    pub stats: Option<Stats>,
    /// The daemon's health.
    pub health: Health,
}

#[derive(Debug)]
struct LqosCollector {
    shared: Arc<Mutex<Shared>>,
    circuits: CircuitSeries,
}

/// A registry whose only collector encodes `shared` at each scrape.
pub fn registry(shared: Arc<Mutex<Shared>>, circuits: CircuitSeries) -> Registry {
    let mut r = Registry::default();
    r.register_collector(Box::new(LqosCollector { shared, circuits }));
    r
}

/// `/metrics` as Prometheus text.
pub fn render(registry: &Registry) -> String {
    let mut out = String::with_capacity(1 << 20);
    prometheus_client::encoding::text::encode(&mut out, registry).expect("writing to a String");
    out
}

/// One family's samples: label set (borrowed: no allocation per sample)
/// and value.
fn counter<S: prometheus_client::encoding::EncodeLabelSet>(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: impl Iterator<Item = (S, u64)>,
) -> Result<(), std::fmt::Error> {
    let mut m = e.encode_descriptor(name, help, None, ConstCounter::new(0u64).metric_type())?;
    for (labels, v) in rows {
        ConstCounter::new(v).encode(m.encode_family(&labels)?)?;
    }
    Ok(())
}

fn gauge<S: prometheus_client::encoding::EncodeLabelSet>(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: impl Iterator<Item = (S, f64)>,
) -> Result<(), std::fmt::Error> {
    let mut m = e.encode_descriptor(name, help, None, ConstGauge::new(0.0f64).metric_type())?;
    for (labels, v) in rows {
        ConstGauge::new(v).encode(m.encode_family(&labels)?)?;
    }
    Ok(())
}

/// The counters and gauges every circuit and node direction has.
type Field = (&'static str, &'static str, fn(&DirStats) -> u64);

const COUNTERS: [Field; 5] = [
    ("sent_bytes", "Bytes sent", |d| d.bytes),
    ("sent_packets", "Packets sent", |d| d.packets),
    ("drops", "Packets dropped (class and leaf)", |d| d.drops),
    ("overlimits", "HTB overlimit events", |d| d.overlimits),
    ("ecn_marks", "Packets ECN-marked", |d| d.ecn_marks),
];

const GAUGES: [Field; 2] = [
    ("backlog_bytes", "Bytes queued now", |d| d.backlog_bytes),
    ("ceil_bits_per_second", "Planned ceil", |d| d.ceil_bps),
];

const TINS: [&str; 8] = ["0", "1", "2", "3", "4", "5", "6", "7"];

impl Collector for LqosCollector {
    fn encode(&self, mut e: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let shared = self.shared.lock().expect("metrics state");
        if let Some(stats) = &shared.stats {
            let mut circuits: Vec<&lqos_apply::stats::CircuitStats> = match self.circuits {
                CircuitSeries::None => Vec::new(),
                _ => stats.circuits.iter().collect(),
            };
            if let CircuitSeries::Top(n) = self.circuits {
                circuits.sort_by(|a, b| {
                    (b.download.rate_bps + b.upload.rate_bps)
                        .total_cmp(&(a.download.rate_bps + a.upload.rate_bps))
                });
                circuits.truncate(n);
            }
            // Labels borrow the names: no allocation per sample.
            fn per_dir<'s>(id: &'s str, key: &'static str) -> [[(&'static str, &'s str); 2]; 2] {
                Dir::BOTH.map(|d| [(key, id), ("direction", d.name())])
            }
            for (name, help, f) in COUNTERS {
                counter(
                    &mut e,
                    &format!("lqos_circuit_{name}"),
                    help,
                    circuits.iter().flat_map(|c| {
                        let [a, b] = per_dir(&c.id, "circuit_id");
                        [(a, f(&c.download)), (b, f(&c.upload))]
                    }),
                )?;
                counter(
                    &mut e,
                    &format!("lqos_node_{name}"),
                    help,
                    stats.nodes.iter().flat_map(|n| {
                        let [a, b] = per_dir(&n.name, "node");
                        [(a, f(&n.download)), (b, f(&n.upload))]
                    }),
                )?;
            }
            for (name, help, f) in GAUGES {
                gauge(
                    &mut e,
                    &format!("lqos_circuit_{name}"),
                    help,
                    circuits.iter().flat_map(|c| {
                        let [a, b] = per_dir(&c.id, "circuit_id");
                        [(a, f(&c.download) as f64), (b, f(&c.upload) as f64)]
                    }),
                )?;
                gauge(
                    &mut e,
                    &format!("lqos_node_{name}"),
                    help,
                    stats.nodes.iter().flat_map(|n| {
                        let [a, b] = per_dir(&n.name, "node");
                        [(a, f(&n.download) as f64), (b, f(&n.upload) as f64)]
                    }),
                )?;
            }
            gauge(
                &mut e,
                "lqos_circuit_cake_delay_seconds",
                "cake tin queueing delay (peak, avg, base)",
                circuits.iter().flat_map(|c| {
                    Dir::BOTH.into_iter().flat_map(move |d| {
                        c.dir(d).tins.iter().enumerate().flat_map(move |(i, t)| {
                            [
                                ("peak", t.peak_delay_us),
                                ("avg", t.avg_delay_us),
                                ("base", t.base_delay_us),
                            ]
                            .map(|(k, us)| {
                                (
                                    [
                                        ("circuit_id", c.id.as_str()),
                                        ("direction", d.name()),
                                        ("tin", TINS[i.min(7)]),
                                        ("delay", k),
                                    ],
                                    f64::from(us) / 1e6,
                                )
                            })
                        })
                    })
                }),
            )?;
            gauge(
                &mut e,
                "lqos_circuit_info",
                "A circuit's name and parent node (value 1)",
                circuits.iter().map(|c| {
                    (
                        [
                            ("circuit_id", c.id.as_str()),
                            ("name", c.name.as_str()),
                            ("parent", c.parent.as_str()),
                        ],
                        1.0,
                    )
                }),
            )?;
        }
        let h = &shared.health;
        counter(
            &mut e,
            "lqos_reloads",
            "Reloads by trigger and outcome",
            &mut h
                .reloads
                .iter()
                .map(|((t, o), n)| (vec![("trigger", t.clone()), ("outcome", o.clone())], *n)),
        )?;
        let none: [(&str, &str); 0] = [];
        let one = |v: f64| std::iter::once((none, v));
        if let Some(t) = h.last_reload_unix {
            gauge(
                &mut e,
                "lqos_reload_last_timestamp_seconds",
                "Unix time of the last reload",
                one(t),
            )?;
        }
        gauge(
            &mut e,
            "lqos_reload_last_duration_seconds",
            "Duration of the last reload",
            one(h.last_reload_secs),
        )?;
        gauge(
            &mut e,
            "lqos_reload_last_success",
            "1 when the last reload succeeded",
            one(if h.last_ok { 1.0 } else { 0.0 }),
        )?;
        gauge(
            &mut e,
            "lqos_reload_last_ops",
            "Ops of the last reload by change",
            ["added", "changed", "removed"]
                .into_iter()
                .zip(h.last_ops)
                .map(|(k, v)| ([("change", k)], v as f64)),
        )?;
        if let Some(n) = h.lazy_active {
            gauge(
                &mut e,
                "lqos_lazy_leaves_active",
                "Circuits with their lazy leaf now",
                one(n as f64),
            )?;
        }
        gauge(
            &mut e,
            "lqos_stats_poll_duration_seconds",
            "Duration of the last statistics poll",
            one(h.poll_secs),
        )?;
        counter(
            &mut e,
            "lqos_stats_polls",
            "Statistics polls",
            std::iter::once((none, h.polls)),
        )?;
        counter(
            &mut e,
            "lqos_stats_poll_errors",
            "Statistics polls that failed",
            std::iter::once((none, h.poll_errors)),
        )?;
        Ok(())
    }
}

impl Health {
    /// Takes one daemon event.
    pub fn event(&mut self, e: &Event) {
        let now_unix = || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64())
        };
        let mut reload = |trigger: String, outcome: &str, secs: f64, ops: [u64; 3], ok: bool| {
            *self
                .reloads
                .entry((trigger, outcome.to_string()))
                .or_default() += 1;
            self.last_reload_unix = Some(now_unix());
            self.last_reload_secs = secs;
            self.last_ops = ops;
            self.last_ok = ok;
        };
        match e {
            Event::Applied(a) => {
                let s = &a.summary;
                let ops = [s.added as u64, s.changed as u64, s.removed as u64];
                reload(
                    a.trigger.to_string(),
                    "applied",
                    a.took.as_secs_f64(),
                    ops,
                    true,
                );
            }
            Event::LoadFailed {
                trigger, summary, ..
            } => {
                let s = summary;
                let ops = [s.added as u64, s.changed as u64, s.removed as u64];
                reload(trigger.to_string(), "failed", 0.0, ops, false);
            }
            Event::Rejected { trigger, .. }
            | Event::PlanRefused { trigger, .. }
            | Event::PlanFailed { trigger, .. } => {
                reload(trigger.to_string(), "rejected", 0.0, [0; 3], false)
            }
            Event::Leaves { active, .. } | Event::LeavesUnchanged { active } => {
                self.lazy_active = Some(*active)
            }
            _ => {}
        }
    }
}

/// The statistics poll of the daemon: the lazy-leaf poll's class dumps
/// ([`Counters`]) come from the same dumps as the metrics (one class dump
/// per HTB and one qdisc dump per interface and poll); without lazy leaves
/// the loop polls itself ([`Poller::poll_all`]).
pub struct Poller<'a> {
    live: &'a NetlinkLive,
    state: Mutex<PollState>,
    shared: Arc<Mutex<Shared>>,
}

struct PollState {
    index: Option<StatsIndex>,
    tracker: Option<StatsTracker>,
    pending: Vec<RawIface>,
    started: Instant,
    took: Duration,
}

impl<'a> Poller<'a> {
    /// A poller reading `live`, publishing into `shared`.
    pub fn new(live: &'a NetlinkLive, shared: Arc<Mutex<Shared>>) -> Poller<'a> {
        Poller {
            live,
            state: Mutex::new(PollState {
                index: None,
                tracker: None,
                pending: Vec::new(),
                started: Instant::now(),
                took: Duration::ZERO,
            }),
            shared,
        }
    }

    /// The daemon runs `plan` now (after a reload): the index follows it,
    /// the counters of the circuits both plans have carry over.
    pub fn set_plan(&self, plan: &lqos_tc::Plan) {
        let mut st = self.state.lock().expect("poll state");
        let index = StatsIndex::new(plan);
        let tracker = match (&st.index, &st.tracker) {
            (Some(old), Some(t)) => t.rebase(old, &index),
            _ => StatsTracker::new(&index),
        };
        st.index = Some(index);
        st.tracker = Some(tracker);
        st.pending.clear();
    }

    /// Whether [`Poller::set_plan`] was called.
    pub fn has_plan(&self) -> bool {
        self.state.lock().expect("poll state").index.is_some()
    }

    /// Turns the dumps taken since the last call (by the lazy-leaf poll)
    /// into the statistics `/metrics` serves.
    pub fn flush(&self) {
        let mut st = self.state.lock().expect("poll state");
        if st.pending.is_empty() {
            return;
        }
        let raw = RawStats {
            interfaces: std::mem::take(&mut st.pending),
        };
        self.publish(&mut st, &raw);
    }

    /// One poll of every planned interface (when lazy leaves are off).
    pub fn poll_all(&self) {
        let mut st = self.state.lock().expect("poll state");
        let Some(index) = &st.index else { return };
        let t = Instant::now();
        let r = self.live.poll_stats(index, true);
        st.took = t.elapsed();
        match r {
            Ok(raw) => self.publish(&mut st, &raw),
            Err(e) => {
                tracing::warn!(error = %e, "statistics poll failed");
                let mut sh = self.shared.lock().expect("metrics state");
                sh.health.polls += 1;
                sh.health.poll_errors += 1;
            }
        }
    }

    fn publish(&self, st: &mut PollState, raw: &RawStats) {
        let now = st.started.elapsed();
        let took = st.took;
        let PollState {
            index: Some(index),
            tracker: Some(tracker),
            ..
        } = st
        else {
            return;
        };
        let stats = tracker.observe(index, raw, now);
        let mut sh = self.shared.lock().expect("metrics state");
        sh.stats = Some(stats);
        sh.health.polls += 1;
        sh.health.poll_secs = took.as_secs_f64();
    }
}

impl Counters for Poller<'_> {
    /// The lazy-leaf poll's counters, from a statistics poll of `dev` (its
    /// leaves too; kept for [`Poller::flush`]).
    fn class_stats(&self, dev: &str, htb_majors: &[u16]) -> lqos_apply::Result<Vec<ClassStats>> {
        let htbs: Vec<lqos_tc::TcHandle> = {
            let st = self.state.lock().expect("poll state");
            match st.index.as_ref().and_then(|i| i.htbs_of(dev)) {
                Some(h) => h.to_vec(),
                None => htb_majors
                    .iter()
                    .map(|&m| lqos_tc::TcHandle::new(m, 0))
                    .collect(),
            }
        };
        let t = Instant::now();
        let r = self.live.poll_iface(dev, &htbs, true);
        let mut st = self.state.lock().expect("poll state");
        st.took = if st.pending.is_empty() {
            t.elapsed()
        } else {
            st.took + t.elapsed()
        };
        match r {
            Ok(iface) => {
                let cs = iface.class_stats();
                st.pending.push(iface);
                Ok(cs)
            }
            Err(e) => {
                self.shared
                    .lock()
                    .expect("metrics state")
                    .health
                    .poll_errors += 1;
                Err(e)
            }
        }
    }
}

/// Most bytes of a request head (request line and headers).
const MAX_HEAD: usize = 8 << 10;
/// Time a client has to send its request head.
const READ_TIMEOUT: Duration = Duration::from_secs(2);

/// Binds `addr` (before the daemon's first load, so a taken port fails
/// at start).
pub fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr)
}

/// Serves `/metrics` from `listener` on a thread of its own, one
/// connection at a time (each bounded in size and time).
pub fn serve(listener: TcpListener, registry: Arc<Registry>) -> std::thread::JoinHandle<()> {
    std::thread::Builder::new()
        .name("lqos-metrics".into())
        .spawn(move || {
            for conn in listener.incoming() {
                let Ok(stream) = conn else { continue };
                let _ = handle(stream, &registry);
            }
        })
        .expect("spawning the metrics thread")
}

/// Reads one request head (bounded), answers it, closes.
fn handle(mut s: TcpStream, registry: &Registry) -> std::io::Result<()> {
    s.set_read_timeout(Some(READ_TIMEOUT))?;
    s.set_write_timeout(Some(Duration::from_secs(10)))?;
    let deadline = Instant::now() + READ_TIMEOUT;
    let mut buf = vec![0u8; MAX_HEAD];
    let mut len = 0;
    let (status, body) = loop {
        if Instant::now() > deadline {
            break (408, "request timeout\n".to_string());
        }
        let n = match s.read(&mut buf[len..]) {
            Ok(0) => return Ok(()), // closed before a whole request
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                break (408, "request timeout\n".to_string());
            }
            Err(e) => return Err(e),
        };
        len += n;
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&buf[..len]) {
            Ok(httparse::Status::Complete(_)) => {
                break match (req.method, req.path) {
                    (Some("GET" | "HEAD"), Some("/metrics")) => (200, render(registry)),
                    (Some("GET" | "HEAD"), Some(_)) => (404, "not found: try /metrics\n".into()),
                    _ => (405, "only GET /metrics\n".into()),
                };
            }
            Ok(httparse::Status::Partial) if len == buf.len() => {
                break (431, "request head too large\n".into());
            }
            Ok(httparse::Status::Partial) => continue,
            Err(httparse::Error::TooManyHeaders) => {
                break (431, "too many headers\n".into());
            }
            Err(_) => break (400, "malformed request\n".into()),
        }
    };
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        _ => "Request Header Fields Too Large",
    };
    let ctype = if status == 200 {
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    } else {
        "text/plain; charset=utf-8"
    };
    write!(
        s,
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    s.write_all(body.as_bytes())?;
    s.flush()?;
    let _ = s.shutdown(std::net::Shutdown::Both);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use lqos_apply::netlink::{
        CakeTin, CakeXstats, ClassSample, Counters, LeafXstats, QdiscSample,
    };
    use lqos_tc::{Direction, TcHandle};

    /// A plan of 5 circuits with cake leaves, and statistics from two polls
    /// in which every circuit sent bytes.
    fn shared() -> Arc<Mutex<Shared>> {
        let g = lqos_model::generate(&lqos_model::GenParams {
            circuits: 5,
            ..Default::default()
        });
        let cfg = lqos_tc::PlanConfig::bridge("ens19", "ens20", 2);
        let plan = lqos_tc::plan(&g.network, &cfg, None).unwrap();
        let index = StatsIndex::new(&plan);
        let mut t = StatsTracker::new(&index);
        let raw = |bytes: u64| RawStats {
            interfaces: plan
                .interfaces
                .iter()
                .map(|ip| {
                    let mut r = RawIface::empty(&ip.dev);
                    for c in &plan.allocation.circuits {
                        let d = ip.direction;
                        let classid = TcHandle::new(plan.major(d, c.queue), c.minor);
                        r.classes.push(ClassSample {
                            classid,
                            counters: Counters {
                                bytes,
                                ..Counters::default()
                            },
                            htb: None,
                        });
                        let leaf = if d == Direction::Upload {
                            c.leaf_upload
                        } else {
                            c.leaf_download
                        };
                        r.qdiscs.push(QdiscSample {
                            handle: TcHandle::new(leaf.unwrap(), 0),
                            parent: classid,
                            kind: "cake".into(),
                            counters: Counters::default(),
                            xstats: LeafXstats::Cake(CakeXstats {
                                tins: vec![CakeTin::default(); 4],
                                ..CakeXstats::default()
                            }),
                        });
                    }
                    r
                })
                .collect(),
        };
        t.observe(&index, &raw(100), Duration::ZERO);
        let stats = t.observe(&index, &raw(1100), Duration::from_secs(1));
        let mut h = Health::default();
        h.reloads.insert(("start".into(), "applied".into()), 1);
        h.last_reload_unix = Some(1.0);
        h.lazy_active = Some(3);
        Arc::new(Mutex::new(Shared {
            stats: Some(stats),
            health: h,
        }))
    }

    #[test]
    fn metrics_render_every_series_and_bound_the_circuits() {
        let all = render(&registry(shared(), CircuitSeries::All));
        assert!(
            all.contains(
                "lqos_circuit_sent_bytes_total{circuit_id=\"10001\",direction=\"download\"} 1100"
            ),
            "{all}"
        );
        assert_eq!(all.matches("lqos_circuit_info{").count(), 5);
        assert!(all.contains("lqos_circuit_cake_delay_seconds{"), "{all}");
        assert!(all.contains("lqos_reloads_total{trigger=\"start\",outcome=\"applied\"} 1"));
        let top = render(&registry(shared(), CircuitSeries::Top(2)));
        assert_eq!(top.matches("lqos_circuit_info{").count(), 2);
        let none = render(&registry(shared(), CircuitSeries::None));
        assert_eq!(none.matches("lqos_circuit_info{").count(), 0);
        assert!(none.contains("lqos_node_sent_bytes_total{"));
        // Every series the Grafana dashboard queries is served.
        let dash = include_str!("../../packaging/grafana/lqos.json");
        let mut names: Vec<&str> = dash
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| w.starts_with("lqos_"))
            .collect();
        names.sort();
        names.dedup();
        assert!(names.len() >= 8, "{names:?}");
        for n in names {
            assert!(
                all.contains(&format!("\n{n}")),
                "the dashboard queries {n}, not served"
            );
        }
    }

    #[test]
    fn circuit_series_parse() {
        assert_eq!("all".parse(), Ok(CircuitSeries::All));
        assert_eq!("top:50".parse(), Ok(CircuitSeries::Top(50)));
        assert_eq!("none".parse(), Ok(CircuitSeries::None));
        assert!("top:x".parse::<CircuitSeries>().is_err());
    }
}
