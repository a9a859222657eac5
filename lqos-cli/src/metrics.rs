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

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lqos_apply::daemon::Health;
use lqos_apply::stats::openmetrics;
pub use lqos_apply::stats::openmetrics::{CircuitSeries, Format};
use lqos_apply::stats::Snapshot;

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

/// The state behind `/metrics`: the latest statistics and the health,
/// as the daemon's driver last reported them.
#[derive(Debug, Default)]
pub struct Shared {
    /// The latest poll's statistics.
    pub latest: Option<Arc<Snapshot>>,
    /// The daemon's health.
    pub health: Health,
}

/// `/metrics` in `format`, written to `out` as it is rendered: the
/// circuit and node series of the latest poll, the daemon's health. The
/// lock on `shared` is held only to take a snapshot.
pub fn render(
    out: &mut dyn Write,
    shared: &Mutex<Shared>,
    circuits: CircuitSeries,
    format: Format,
) -> std::io::Result<()> {
    let (latest, health) = {
        let sh = shared.lock().expect("metrics state");
        (sh.latest.clone(), sh.health.families())
    };
    let series = latest.as_deref().map(|s| (&s.stats, s.labels()));
    openmetrics::render(out, series, &health, circuits, format)
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
    Metrics { body: bool, format: Format },
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
                        let accept = req
                            .headers
                            .iter()
                            .find(|h| h.name.eq_ignore_ascii_case("accept"))
                            .and_then(|h| std::str::from_utf8(h.value).ok());
                        Answer::Metrics {
                            body: m == "GET",
                            format: Format::negotiate(accept),
                        }
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
        Answer::Metrics { body, format } => {
            write!(
                w,
                "HTTP/1.1 200 OK\r\nContent-Type: {}\r\nConnection: close\r\n\r\n",
                format.content_type()
            )?;
            if body {
                render(&mut w, shared, circuits, format)?;
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

/// The tests' promtool check, shared with the CLI's black-box tests.
#[cfg(test)]
#[path = "../tests/common/promtool.rs"]
mod promtool;

#[cfg(test)]
mod tests {
    use super::*;

    use super::promtool;
    use lqos_apply::netlink::{
        CakeTin, CakeXstats, ClassSample, Counters, LeafXstats, QdiscSample,
    };
    use lqos_apply::stats::openmetrics::{
        tin_delays, Labels, COUNTERS, DELAY, DELAY_KINDS, GAUGES, INFO,
    };
    use lqos_apply::stats::{Dir, DirStats, RawIface, RawStats, Stats, StatsIndex, StatsTracker};
    use lqos_tc::{Direction, TcHandle};
    use prometheus_client::collector::Collector;
    use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
    use prometheus_client::metrics::counter::ConstCounter;
    use prometheus_client::metrics::gauge::ConstGauge;
    use prometheus_client::registry::Registry;
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

    /// Health numbers with every series.
    fn health() -> Health {
        let mut h = Health::default();
        h.reloads.insert(("start".into(), "applied".into()), 1);
        h.reloads
            .insert(("file-change".into(), "rejected".into()), 2);
        h.last_reload_unix = Some(1_765_000_000.25);
        h.last_reload_secs = 0.0125;
        h.last_ops = [3, 2, 1];
        h.last_ok = true;
        h.lazy_active = Some(3);
        h.poll_secs = 0.0283;
        h.polls = 7;
        h.poll_errors = 1;
        h
    }

    fn shared() -> Mutex<Shared> {
        let (index, stats) = polled(5);
        Mutex::new(Shared {
            latest: Some(Arc::new(Snapshot::new(stats, Arc::new(index)))),
            health: health(),
        })
    }

    fn text(shared: &Mutex<Shared>, which: CircuitSeries) -> String {
        text_in(shared, which, Format::OpenMetrics)
    }

    fn text_in(shared: &Mutex<Shared>, which: CircuitSeries, format: Format) -> String {
        let mut out = Vec::new();
        render(&mut out, shared, which, format).unwrap();
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
        assert!(all.contains("\n# TYPE lqos_circuit_info gauge\n"));
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
            latest: Some(Arc::new(Snapshot::new(stats, Arc::new(index.clone())))),
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

    /// The two formats have the same samples; the text format names a
    /// counter's family with `_total` and has no `# EOF`.
    #[test]
    fn the_text_format_differs_only_in_its_descriptors() {
        let sh = shared();
        let om = text_in(&sh, CircuitSeries::All, Format::OpenMetrics);
        let text = text_in(&sh, CircuitSeries::All, Format::Prometheus);
        let samples = |t: &str| -> Vec<String> {
            t.lines()
                .filter(|l| !l.starts_with('#'))
                .map(str::to_string)
                .collect()
        };
        assert_eq!(samples(&om), samples(&text));
        assert!(om.ends_with("\n# EOF\n") && !text.contains("# EOF"));
        assert!(om.contains("\n# TYPE lqos_circuit_sent_bytes counter\n"));
        assert!(text.contains("\n# TYPE lqos_circuit_sent_bytes_total counter\n"));
        assert!(text.contains("\n# HELP lqos_reloads_total Reloads by trigger and outcome\n"));
        assert!(text.contains("\n# TYPE lqos_reload_last_success gauge\n"));
        for l in text.lines().filter(|l| l.starts_with("# TYPE ")) {
            let mut w = l.split(' ').skip(2);
            let (name, kind) = (w.next().unwrap(), w.next().unwrap());
            assert_eq!(name.ends_with("_total"), kind == "counter", "{l}");
        }
        // The parser reads every sample of the text format.
        let n = samples(&text).len();
        let lines = text.lines().map(|l| Ok(l.to_string()));
        assert_eq!(
            prometheus_parse::Scrape::parse(lines)
                .unwrap()
                .samples
                .len(),
            n
        );
    }

    /// Both formats pass `promtool check metrics` (the text format with no
    /// finding; OpenMetrics parsed, see `promtool.rs`), with names that
    /// need escaping, cake delays and every health series.
    #[test]
    fn both_formats_pass_promtool() {
        let (mut index, stats) = polled(4);
        index.circuits[0].name = "quote \" backslash \\ newline \n é".into();
        index.circuits[1].id = "id with spaces".into();
        index.nodes[0].name = "Site \"A\"".into();
        let sh = Mutex::new(Shared {
            latest: Some(Arc::new(Snapshot::new(stats, Arc::new(index)))),
            health: health(),
        });
        for format in [Format::Prometheus, Format::OpenMetrics] {
            let t = text_in(&sh, CircuitSeries::All, format);
            promtool::assert_passes(&t, format == Format::OpenMetrics, &format!("{format:?}"));
        }
    }

    #[test]
    fn accept_headers_choose_the_format() {
        use Format::{OpenMetrics as Om, Prometheus as Text};
        for (accept, want) in [
            (None, Text),
            (Some(""), Text),
            (Some("*/*"), Text),
            (Some("text/plain"), Text),
            (Some("text/plain;version=0.0.4"), Text),
            (Some("application/openmetrics-text"), Om),
            (Some("application/openmetrics-text; version=1.0.0; charset=utf-8"), Om),
            (Some("Application/OpenMetrics-Text;version=0.0.1"), Om),
            (Some("application/openmetrics-text;version=2.0.0"), Text),
            (Some("application/openmetrics-text;q=0"), Text),
            (Some("application/openmetrics-text;q=0.3,text/plain;q=0.5"), Text),
            (Some("text/plain;q=0.5, application/openmetrics-text"), Om),
            (Some("application/openmetrics-text, */*"), Om),
            // What Prometheus 2.x sends.
            (
                Some("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"),
                Om,
            ),
        ] {
            assert_eq!(Format::negotiate(accept), want, "{accept:?}");
        }
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
            let mut m = e.encode_descriptor(INFO.0, INFO.1, None, MetricType::Gauge)?;
            for c in &index.circuits {
                let labels = [
                    ("circuit_id", c.id.as_str()),
                    ("name", c.name.as_str()),
                    ("parent", node_name(c.parent)),
                ];
                ConstGauge::new(1i64).encode(m.encode_family(&labels)?)?;
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

    /// The daemon's health series as prometheus-client encodes them.
    #[derive(Debug)]
    struct HealthReference(Health);

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

    impl Collector for HealthReference {
        fn encode(&self, mut e: DescriptorEncoder) -> Result<(), std::fmt::Error> {
            let h = &self.0;
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
                let help = "Unix time of the last reload";
                gauge(&mut e, "lqos_reload_last_timestamp_seconds", help, one(t))?;
            }
            let help = "Duration of the last reload";
            gauge(
                &mut e,
                "lqos_reload_last_duration_seconds",
                help,
                one(h.last_reload_secs),
            )?;
            let ok = if h.last_ok { 1.0 } else { 0.0 };
            let help = "1 when the last reload succeeded";
            gauge(&mut e, "lqos_reload_last_success", help, one(ok))?;
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
                let help = "Circuits with their lazy leaf now";
                gauge(&mut e, "lqos_lazy_leaves_active", help, one(n as f64))?;
            }
            let help = "Duration of the last statistics poll";
            gauge(
                &mut e,
                "lqos_stats_poll_duration_seconds",
                help,
                one(h.poll_secs),
            )?;
            let polls = std::iter::once((none, h.polls));
            counter(&mut e, "lqos_stats_polls", "Statistics polls", polls)?;
            let errors = std::iter::once((none, h.poll_errors));
            let help = "Statistics polls that failed";
            counter(&mut e, "lqos_stats_poll_errors", help, errors)?;
            Ok(())
        }
    }

    fn reference(index: &StatsIndex, stats: &Stats, health: &Health) -> String {
        // The collector wants 'static: leak two small test values.
        let (index, stats): (&'static StatsIndex, &'static Stats) = (
            Box::leak(Box::new(index.clone())),
            Box::leak(Box::new(stats.clone())),
        );
        let mut r = Registry::default();
        r.register_collector(Box::new(Reference(index, stats)));
        r.register_collector(Box::new(HealthReference(health.clone())));
        let mut s = String::new();
        prometheus_client::encoding::text::encode_registry(&mut s, &r).unwrap();
        s.push_str(openmetrics::EOF);
        s
    }

    fn ours(index: &StatsIndex, stats: &Stats, health: &Health) -> String {
        let mut out = Vec::new();
        let labels = Labels::new(index);
        openmetrics::render(
            &mut out,
            Some((stats, &labels)),
            &health.families(),
            CircuitSeries::All,
            Format::OpenMetrics,
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
            let h = health();
            assert_same_exposition(&ours(&index, &stats, &h), &reference(&index, &stats, &h));
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
