//! `lqos watch --metrics ADDR`: the daemon's statistics and health as
//! OpenMetrics text (`GET /metrics`).
//!
//! The circuit and node series are [`lqos_apply::stats::openmetrics`]'s
//! (labels escaped once per plan, [`Labels`]); the daemon's own, encoded by
//! prometheus-client at each scrape, follow:
//! `lqos_reloads_total{trigger, outcome}`,
//! `lqos_reload_last_timestamp_seconds`, `_duration_seconds`,
//! `lqos_reload_last_ops{change}`, `lqos_reload_last_success`,
//! `lqos_lazy_leaves_active`, `lqos_stats_poll_duration_seconds`,
//! `lqos_stats_polls_total`, `lqos_stats_poll_errors_total`.
//!
//! `--metrics-circuits all|top:N|none` bounds the circuit series on very
//! large networks (top: the N busiest by download + upload rate).
//!
//! The server is a small accept loop (std sockets, requests parsed by
//! httparse): one request per connection, at most 8 KiB of request head,
//! 2 s to send it; anything else gets a 4xx status and the connection is
//! closed. The answer is written as it is rendered (no copy of the whole
//! text is kept; the end of the body is the end of the connection and the
//! closing `# EOF`), from a snapshot of the latest poll taken without
//! holding the poll's lock while writing.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lqos_apply::daemon::{Counters, Event};
use lqos_apply::netlink::ClassStats;
pub use lqos_apply::stats::openmetrics::CircuitSeries;
use lqos_apply::stats::openmetrics::{Labels, EOF};
use lqos_apply::stats::{RawIface, RawStats, Stats, StatsIndex, StatsTracker};
use lqos_apply::NetlinkLive;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

/// `--metrics-circuits`: `all`, `none` or `top:N`.
pub fn parse_circuit_series(s: &str) -> Result<CircuitSeries, String> {
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

/// One poll's statistics with the label sets of their plan.
#[derive(Debug)]
pub struct Snapshot {
    /// The statistics.
    pub stats: Stats,
    /// Their plan's label sets (built once per plan).
    pub labels: Arc<Labels>,
}

/// The state behind `/metrics`: the latest statistics and the health.
#[derive(Debug, Default)]
pub struct Shared {
    /// The latest poll's statistics.
    pub latest: Option<Arc<Snapshot>>,
    /// The daemon's health.
    pub health: Health,
}

/// `/metrics` as OpenMetrics text, written to `out` as it is rendered:
/// the circuit and node series of the latest poll, the daemon's health,
/// `# EOF`. The lock on `shared` is held only to take a snapshot.
pub fn render(
    out: &mut dyn Write,
    shared: &Mutex<Shared>,
    circuits: CircuitSeries,
) -> std::io::Result<()> {
    let (latest, health) = {
        let sh = shared.lock().expect("metrics state");
        (sh.latest.clone(), sh.health.clone())
    };
    if let Some(s) = &latest {
        lqos_apply::stats::openmetrics::render(out, &s.stats, &s.labels, circuits)?;
    }
    let mut registry = Registry::default();
    registry.register_collector(Box::new(health));
    let mut text = String::new();
    prometheus_client::encoding::text::encode_registry(&mut text, &registry)
        .map_err(std::io::Error::other)?;
    text.push_str(EOF);
    out.write_all(text.as_bytes())
}

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

/// The daemon's health series.
impl Collector for Health {
    fn encode(&self, mut e: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let h = self;
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
    labels: Arc<Labels>,
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
                labels: Arc::default(),
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
        st.labels = Arc::new(Labels::new(&index));
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
        let snapshot = Arc::new(Snapshot {
            stats: tracker.observe(index, raw, now),
            labels: st.labels.clone(),
        });
        let mut sh = self.shared.lock().expect("metrics state");
        sh.latest = Some(snapshot);
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

/// Time a client has to take the whole answer.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// Serves `/metrics` from `listener` on a thread of its own, one
/// connection at a time (each bounded in size and time).
pub fn serve(
    listener: TcpListener,
    shared: Arc<Mutex<Shared>>,
    circuits: CircuitSeries,
) -> std::thread::JoinHandle<()> {
    std::thread::Builder::new()
        .name("lqos-metrics".into())
        .spawn(move || {
            for conn in listener.incoming() {
                let Ok(stream) = conn else { continue };
                let _ = handle(stream, &shared, circuits);
            }
        })
        .expect("spawning the metrics thread")
}

/// What a request gets.
enum Answer {
    /// `/metrics` (`body`: false for HEAD).
    Metrics { body: bool },
    /// An error status with a short text.
    Error(u16, &'static str),
}

/// A socket writer that gives up once the whole answer has taken longer
/// than [`WRITE_TIMEOUT`] (each write is bounded by the socket's timeout
/// too), so a client that reads slowly cannot hold the server.
struct Deadline<'a> {
    s: &'a mut TcpStream,
    until: Instant,
}

impl Write for Deadline<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if Instant::now() > self.until {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        self.s.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.s.flush()
    }
}

/// Reads one request head (bounded), answers it, closes.
fn handle(
    mut s: TcpStream,
    shared: &Mutex<Shared>,
    circuits: CircuitSeries,
) -> std::io::Result<()> {
    s.set_read_timeout(Some(READ_TIMEOUT))?;
    s.set_write_timeout(Some(Duration::from_secs(10)))?;
    let deadline = Instant::now() + READ_TIMEOUT;
    let mut buf = vec![0u8; MAX_HEAD];
    let mut len = 0;
    let answer = loop {
        if Instant::now() > deadline {
            break Answer::Error(408, "request timeout\n");
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
                break Answer::Error(408, "request timeout\n");
            }
            Err(e) => return Err(e),
        };
        len += n;
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&buf[..len]) {
            Ok(httparse::Status::Complete(_)) => {
                break match (req.method, req.path) {
                    (Some(m @ ("GET" | "HEAD")), Some("/metrics")) => {
                        Answer::Metrics { body: m == "GET" }
                    }
                    (Some("GET" | "HEAD"), Some(_)) => {
                        Answer::Error(404, "not found: try /metrics\n")
                    }
                    _ => Answer::Error(405, "only GET /metrics\n"),
                };
            }
            Ok(httparse::Status::Partial) if len == buf.len() => {
                break Answer::Error(431, "request head too large\n");
            }
            Ok(httparse::Status::Partial) => continue,
            Err(httparse::Error::TooManyHeaders) => {
                break Answer::Error(431, "too many headers\n");
            }
            Err(_) => break Answer::Error(400, "malformed request\n"),
        }
    };
    let mut w = Deadline {
        s: &mut s,
        until: Instant::now() + WRITE_TIMEOUT,
    };
    match answer {
        // The body's length is not known before it is written: it ends
        // with the connection (and with `# EOF`, so a cut answer shows).
        Answer::Metrics { body } => {
            w.write_all(
                b"HTTP/1.1 200 OK\r\n\
                  Content-Type: application/openmetrics-text; version=1.0.0; charset=utf-8\r\n\
                  Connection: close\r\n\r\n",
            )?;
            if body {
                render(&mut w, shared, circuits)?;
            }
        }
        Answer::Error(status, text) => {
            let reason = match status {
                400 => "Bad Request",
                404 => "Not Found",
                405 => "Method Not Allowed",
                408 => "Request Timeout",
                _ => "Request Header Fields Too Large",
            };
            write!(
                w,
                "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{text}",
                text.len()
            )?;
        }
    }
    w.flush()?;
    let _ = s.shutdown(std::net::Shutdown::Both);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use lqos_apply::netlink::{
        CakeTin, CakeXstats, ClassSample, Counters, LeafXstats, QdiscSample,
    };
    use lqos_apply::stats::openmetrics::{tin_delays, COUNTERS, DELAY, DELAY_KINDS, GAUGES, INFO};
    use lqos_apply::stats::{Dir, DirStats};
    use lqos_tc::{Direction, TcHandle};
    use proptest::prelude::*;

    /// A plan of `n` circuits with cake leaves (diffserv4), and statistics
    /// from two polls in which every circuit sent bytes, all of them in
    /// the Best Effort tin.
    fn polled(n: usize) -> (StatsIndex, Stats) {
        let g = lqos_model::generate(&lqos_model::GenParams {
            circuits: n,
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
                        let mut tins = vec![CakeTin::default(); 4];
                        tins[1] = CakeTin {
                            sent_bytes: bytes,
                            sent_packets: 3,
                            peak_delay_us: 1_500_250,
                            avg_delay_us: 1234,
                            base_delay_us: 7,
                            ..CakeTin::default()
                        };
                        r.qdiscs.push(QdiscSample {
                            handle: TcHandle::new(leaf.unwrap(), 0),
                            parent: classid,
                            kind: "cake".into(),
                            counters: Counters::default(),
                            xstats: LeafXstats::Cake(CakeXstats {
                                tins,
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
        (index, stats)
    }

    fn shared() -> Mutex<Shared> {
        let (index, stats) = polled(5);
        let mut h = Health::default();
        h.reloads.insert(("start".into(), "applied".into()), 1);
        h.last_reload_unix = Some(1.0);
        h.lazy_active = Some(3);
        Mutex::new(Shared {
            latest: Some(Arc::new(Snapshot {
                stats,
                labels: Arc::new(Labels::new(&index)),
            })),
            health: h,
        })
    }

    fn text(shared: &Mutex<Shared>, which: CircuitSeries) -> String {
        let mut out = Vec::new();
        render(&mut out, shared, which).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn metrics_render_every_series_and_bound_the_circuits() {
        let sh = shared();
        let all = text(&sh, CircuitSeries::All);
        assert!(
            all.contains(
                "lqos_circuit_sent_bytes_total{circuit_id=\"10001\",direction=\"download\"} 1100\n"
            ),
            "{all}"
        );
        assert!(all.ends_with("\n# EOF\n"));
        assert_eq!(all.matches("\nlqos_circuit_info{").count(), 5);
        assert!(all.contains("\n# TYPE lqos_circuit info\n"));
        // Only the tin that carried traffic has delay series, in seconds.
        assert!(all.contains(
            "lqos_circuit_cake_delay_seconds{circuit_id=\"10001\",direction=\"upload\",tin=\"1\",delay=\"peak\"} 1.50025\n"
        ), "{all}");
        assert!(all.contains("tin=\"1\",delay=\"avg\"} 0.001234\n"));
        assert!(all.contains("tin=\"1\",delay=\"base\"} 0.000007\n"));
        assert!(!all.contains("tin=\"0\""));
        assert_eq!(
            all.matches("\nlqos_circuit_cake_delay_seconds{").count(),
            5 * 2 * 3
        );
        assert!(all.contains("lqos_reloads_total{trigger=\"start\",outcome=\"applied\"} 1"));
        // Every sample line is one the parser takes.
        let samples = all.lines().filter(|l| !l.starts_with('#')).count();
        let lines = all.lines().map(|l| Ok(l.to_string()));
        let parsed = prometheus_parse::Scrape::parse(lines).unwrap();
        assert_eq!(parsed.samples.len(), samples);
        let top = text(&sh, CircuitSeries::Top(2));
        assert_eq!(top.matches("\nlqos_circuit_info{").count(), 2);
        let none = text(&sh, CircuitSeries::None);
        assert_eq!(none.matches("\nlqos_circuit_info{").count(), 0);
        assert!(none.contains("\nlqos_node_sent_bytes_total{"));
        // The default classes' traffic (no circuit's), per direction.
        assert!(all.contains("\nlqos_unclassified_sent_bytes_total{direction=\"download\"} "));
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
    fn top_n_keeps_the_busiest_circuits() {
        let (index, mut stats) = polled(6);
        stats.circuits[4].upload.rate_bps = 1e9;
        stats.circuits[2].download.rate_bps = 5e8;
        let sh = Mutex::new(Shared {
            latest: Some(Arc::new(Snapshot {
                stats,
                labels: Arc::new(Labels::new(&index)),
            })),
            health: Health::default(),
        });
        let top = text(&sh, CircuitSeries::Top(2));
        let ids: Vec<&str> = top
            .lines()
            .filter(|l| l.starts_with("lqos_circuit_info{"))
            .map(|l| l.split('"').nth(1).unwrap())
            .collect();
        assert_eq!(
            ids,
            [index.circuits[4].id.as_str(), index.circuits[2].id.as_str()]
        );
    }

    /// The same families encoded by prometheus-client, one label at a time
    /// (what `/metrics` was before label sets were rendered once per plan).
    struct Reference<'a>(&'a StatsIndex, &'a Stats);

    impl std::fmt::Debug for Reference<'_> {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("Reference")
        }
    }

    impl Collector for Reference<'static> {
        fn encode(&self, mut e: DescriptorEncoder) -> Result<(), std::fmt::Error> {
            use prometheus_client::metrics::MetricType;
            let (index, stats) = (self.0, self.1);
            let node_name = |p: u32| index.nodes[p as usize].name.as_str();
            for (fields, ty) in [
                (&COUNTERS[..], MetricType::Counter),
                (&GAUGES[..], MetricType::Gauge),
            ] {
                for &(name, help, f) in fields {
                    for (who, key) in [("circuit", "circuit_id"), ("node", "node")] {
                        let family = format!("lqos_{who}_{name}");
                        let mut m = e.encode_descriptor(&family, help, None, ty)?;
                        let rows: Vec<(&str, [&DirStats; 2])> = if who == "circuit" {
                            index
                                .circuits
                                .iter()
                                .zip(&stats.circuits)
                                .map(|(c, s)| (c.id.as_str(), [&s.download, &s.upload]))
                                .collect()
                        } else {
                            index
                                .nodes
                                .iter()
                                .zip(&stats.nodes)
                                .map(|(n, s)| (n.name.as_str(), [&s.download, &s.upload]))
                                .collect()
                        };
                        for (id, dirs) in rows {
                            for (d, ds) in Dir::BOTH.into_iter().zip(dirs) {
                                let labels = [(key, id), ("direction", d.name())];
                                let enc = m.encode_family(&labels)?;
                                match ty {
                                    MetricType::Counter => ConstCounter::new(f(ds)).encode(enc)?,
                                    _ => ConstGauge::new(f(ds) as i64).encode(enc)?,
                                }
                            }
                        }
                    }
                    let family = format!("lqos_unclassified_{name}");
                    let mut m = e.encode_descriptor(&family, help, None, ty)?;
                    for d in Dir::BOTH {
                        let labels = [("direction", d.name())];
                        let enc = m.encode_family(&labels)?;
                        let v = f(stats.unclassified.dir(d));
                        match ty {
                            MetricType::Counter => ConstCounter::new(v).encode(enc)?,
                            _ => ConstGauge::new(v as i64).encode(enc)?,
                        }
                    }
                }
            }
            let mut m = e.encode_descriptor(DELAY.0, DELAY.1, None, MetricType::Gauge)?;
            for (c, s) in index.circuits.iter().zip(&stats.circuits) {
                for d in Dir::BOTH {
                    for (tin, delays) in tin_delays(s.dir(d)) {
                        for (k, us) in DELAY_KINDS.into_iter().zip(delays) {
                            let tin = tin.to_string();
                            let labels = [
                                ("circuit_id", c.id.as_str()),
                                ("direction", d.name()),
                                ("tin", tin.as_str()),
                                ("delay", k),
                            ];
                            ConstGauge::new(f64::from(us) / 1e6)
                                .encode(m.encode_family(&labels)?)?;
                        }
                    }
                }
            }
            let mut m = e.encode_descriptor(INFO.0, INFO.1, None, MetricType::Info)?;
            for c in &index.circuits {
                m.encode_info(&[
                    ("circuit_id", c.id.as_str()),
                    ("name", c.name.as_str()),
                    ("parent", node_name(c.parent)),
                ])?;
            }
            Ok(())
        }
    }

    /// Lines equal, values equal as numbers (`0.5` and `5e-1` are one value).
    fn assert_same_exposition(ours: &str, theirs: &str) {
        let (a, b): (Vec<&str>, Vec<&str>) = (ours.lines().collect(), theirs.lines().collect());
        assert_eq!(a.len(), b.len(), "{ours}\n----\n{theirs}");
        for (x, y) in a.into_iter().zip(b) {
            if x.starts_with('#') {
                assert_eq!(x, y);
                continue;
            }
            let (xs, xv) = x.rsplit_once(' ').unwrap();
            let (ys, yv) = y.rsplit_once(' ').unwrap();
            assert_eq!(xs, ys);
            assert_eq!(
                xv.parse::<f64>().unwrap(),
                yv.parse::<f64>().unwrap(),
                "{x} / {y}"
            );
        }
    }

    fn reference(index: &StatsIndex, stats: &Stats) -> String {
        // The collector wants 'static: leak two small test values.
        let (index, stats): (&'static StatsIndex, &'static Stats) = (
            Box::leak(Box::new(index.clone())),
            Box::leak(Box::new(stats.clone())),
        );
        let mut r = Registry::default();
        r.register_collector(Box::new(Reference(index, stats)));
        let mut s = String::new();
        prometheus_client::encoding::text::encode_registry(&mut s, &r).unwrap();
        s
    }

    fn ours(index: &StatsIndex, stats: &Stats) -> String {
        let mut out = Vec::new();
        lqos_apply::stats::openmetrics::render(
            &mut out,
            stats,
            &Labels::new(index),
            CircuitSeries::All,
        )
        .unwrap();
        String::from_utf8(out).unwrap()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]

        /// Names from the inputs are untrusted: whatever they hold
        /// (quotes, backslashes, newlines, any Unicode), the exposition is
        /// the one prometheus-client writes for the same series.
        #[test]
        fn the_exposition_is_prometheus_clients(
            names in proptest::collection::vec("(\\PC|[\"\\\\\n]){0,12}", 8),
            delays in proptest::collection::vec(any::<u32>(), 3),
        ) {
            let (mut index, mut stats) = polled(3);
            for (i, c) in index.circuits.iter_mut().enumerate() {
                c.id = names[2 * i].as_str().into();
                c.name = names[2 * i + 1].as_str().into();
            }
            index.nodes[0].name = names[6].clone();
            let t = &mut stats.circuits[0].upload.tins[1];
            (t.peak_delay_us, t.avg_delay_us, t.base_delay_us) = (delays[0], delays[1], delays[2]);
            assert_same_exposition(&ours(&index, &stats), &reference(&index, &stats));
        }
    }

    #[test]
    fn circuit_series_parse() {
        assert_eq!(parse_circuit_series("all"), Ok(CircuitSeries::All));
        assert_eq!(parse_circuit_series("top:50"), Ok(CircuitSeries::Top(50)));
        assert_eq!(parse_circuit_series("none"), Ok(CircuitSeries::None));
        assert!(parse_circuit_series("top:x").is_err());
    }
}
