//! `lqos watch --metrics ADDR`: the daemon's statistics and health at
//! `GET /metrics`, in the Prometheus text format 0.0.4, or OpenMetrics
//! 1.0.0 when the scraper's `Accept` asks for it, gzip-compressed when its
//! `Accept-Encoding` allows.
//!
//! What is served is [`lqos_apply::stats::openmetrics`]'s exposition of
//! the daemon driver's latest [`Snapshot`] and its [`Health`] (handed over
//! by the daemon's loop in [`Shared`]; a scrape takes them under the lock
//! and renders without it, so a scrape never holds up a reload).
//! `--metrics-circuits all|top:N|none` bounds the circuit series on very
//! large networks (top: the N busiest by download + upload rate).
//!
//! The server is hyper's HTTP/1 on a current-thread tokio runtime on a
//! thread of its own, serving clients concurrently: one request per
//! connection (no keep-alive), its head (at most 8 KiB, else `431`) within
//! [`HEAD_TIMEOUT`], the whole exchange within [`EXCHANGE_TIMEOUT`], at
//! most [`MAX_CONNECTIONS`] connections (an idle one makes room for a new
//! one) and [`MAX_ANSWERS`] answers being written at once. An answer is
//! rendered a chunk at a time as the client reads it (gzip streamed the
//! same way), so a slow reader holds its snapshot and a few buffers, and
//! other scrapes go on.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
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

/// Connections served at once. A connection past it takes the place of
/// the one that has waited longest for its request head (an idle socket,
/// a half-sent request); when every connection is being answered, it is
/// refused (`503`, closed).
pub const MAX_CONNECTIONS: usize = 512;
/// Answers written at once (each holds the snapshot it renders and a
/// gzip state); a request past it waits for one, within its deadline.
pub const MAX_ANSWERS: usize = 8;
/// Time a client has to send its request head.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(5);
/// Time a connection may take in all (request and answer): a client that
/// reads the answer too slowly is cut off.
pub const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(30);
/// Most bytes of a request head (hyper's smallest buffer); more is `431`.
const MAX_HEAD: usize = 8 << 10;
/// Bytes of exposition rendered per body frame.
const CHUNK: usize = 64 << 10;
/// Connections the kernel queues before they are accepted.
const BACKLOG: u32 = 1024;

/// The `/metrics` listener with the runtime that will serve it (bound
/// before the daemon's first load, so a taken port fails at start).
pub struct Listener {
    rt: tokio::runtime::Runtime,
    listener: tokio::net::TcpListener,
}

/// Binds `addr` for `/metrics` (with a backlog of [`BACKLOG`]).
pub fn bind(addr: SocketAddr) -> std::io::Result<Listener> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()?;
    let listener = rt.block_on(async {
        let socket = match addr {
            SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
            SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
        };
        socket.set_reuseaddr(true)?;
        socket.bind(addr)?;
        socket.listen(BACKLOG)
    })?;
    Ok(Listener { rt, listener })
}

/// Serves `/metrics` from `listener` on a thread of its own (a
/// current-thread tokio runtime, hyper's HTTP/1): clients concurrently,
/// within [`MAX_CONNECTIONS`], [`HEAD_TIMEOUT`] and [`EXCHANGE_TIMEOUT`].
pub fn serve(
    listener: Listener,
    shared: Arc<Mutex<Shared>>,
    circuits: CircuitSeries,
) -> std::thread::JoinHandle<()> {
    std::thread::Builder::new()
        .name("lqos-metrics".into())
        .spawn(move || {
            let Listener { rt, listener } = listener;
            rt.block_on(accept(listener, shared, circuits));
        })
        .expect("spawning the metrics thread")
}

/// One connection in the table of those served.
struct Conn {
    id: u64,
    since: Instant,
    /// Its request head has arrived (it is being answered).
    requested: Arc<AtomicBool>,
    task: Option<tokio::task::AbortHandle>,
}

/// The connections served, for eviction.
#[derive(Default)]
struct Conns {
    next: u64,
    list: Vec<Conn>,
}

impl Conns {
    /// Room for one more: when full, the connection waiting longest for
    /// its request head is aborted (`None`: all are being answered).
    fn admit(&mut self, now: Instant) -> Option<(u64, Arc<AtomicBool>)> {
        if self.list.len() >= MAX_CONNECTIONS {
            let idle = self
                .list
                .iter()
                .enumerate()
                .filter(|(_, c)| !c.requested.load(Ordering::Relaxed))
                .min_by_key(|(_, c)| c.since)
                .map(|(i, _)| i)?;
            if let Some(t) = self.list.swap_remove(idle).task {
                t.abort();
            }
        }
        self.next += 1;
        let requested = Arc::new(AtomicBool::new(false));
        self.list.push(Conn {
            id: self.next,
            since: now,
            requested: requested.clone(),
            task: None,
        });
        Some((self.next, requested))
    }

    fn started(&mut self, id: u64, task: tokio::task::AbortHandle) {
        if let Some(c) = self.list.iter_mut().find(|c| c.id == id) {
            c.task = Some(task);
        }
    }

    fn remove(&mut self, id: u64) {
        self.list.retain(|c| c.id != id);
    }
}

/// Takes a connection out of the table when its task ends (or is aborted).
struct Registered {
    conns: Arc<Mutex<Conns>>,
    id: u64,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.conns.lock().expect("connections").remove(self.id);
    }
}

/// The accept loop: each connection on a task of its own.
async fn accept(
    listener: tokio::net::TcpListener,
    shared: Arc<Mutex<Shared>>,
    circuits: CircuitSeries,
) {
    let conns = Arc::new(Mutex::new(Conns::default()));
    let answers = Arc::new(tokio::sync::Semaphore::new(MAX_ANSWERS));
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(e) => {
                // Out of file descriptors or memory: let connections end.
                tracing::debug!(error = %e, "metrics: accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let admitted = conns.lock().expect("connections").admit(Instant::now());
        let Some((id, requested)) = admitted else {
            let _ = stream.try_write(
                b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
            continue;
        };
        let reg = Registered {
            conns: conns.clone(),
            id,
        };
        let ctx = Ctx {
            shared: shared.clone(),
            circuits,
            answers: answers.clone(),
            requested,
        };
        let task = tokio::spawn(async move {
            let _reg = reg;
            connection(stream, ctx).await
        });
        conns
            .lock()
            .expect("connections")
            .started(id, task.abort_handle());
    }
}

/// What a connection's requests are answered from.
#[derive(Clone)]
struct Ctx {
    shared: Arc<Mutex<Shared>>,
    circuits: CircuitSeries,
    answers: Arc<tokio::sync::Semaphore>,
    requested: Arc<AtomicBool>,
}

/// One connection: one request (no keep-alive), its head within
/// [`HEAD_TIMEOUT`], the whole exchange within [`EXCHANGE_TIMEOUT`].
async fn connection(stream: tokio::net::TcpStream, ctx: Ctx) {
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .keep_alive(false)
        .max_buf_size(MAX_HEAD);
    let service = hyper::service::service_fn(move |req| {
        let ctx = ctx.clone();
        async move { Ok::<_, std::convert::Infallible>(answer(req, ctx).await) }
    });
    let conn = http.serve_connection(hyper_util::rt::TokioIo::new(stream), service);
    // At the deadline the connection is dropped: the socket closes.
    let _ = tokio::time::timeout(EXCHANGE_TIMEOUT, conn).await;
}

/// A header's value, when it is text.
fn header<'a>(req: &'a hyper::Request<hyper::body::Incoming>, name: &str) -> Option<&'a str> {
    req.headers().get(name).and_then(|v| v.to_str().ok())
}

/// Whether an `Accept-Encoding` header accepts gzip (`gzip` or `x-gzip`
/// with a weight above 0).
pub fn accepts_gzip(accept_encoding: Option<&str>) -> bool {
    accept_encoding.unwrap_or("").split(',').any(|coding| {
        let mut parts = coding.split(';').map(str::trim);
        let name = parts.next().unwrap_or("").to_ascii_lowercase();
        let q = parts
            .filter_map(|p| p.strip_prefix("q="))
            .map(|q| q.trim().parse::<f32>().unwrap_or(0.0))
            .next()
            .unwrap_or(1.0);
        (name == "gzip" || name == "x-gzip") && q > 0.0
    })
}

/// The answer to one request.
async fn answer(req: hyper::Request<hyper::body::Incoming>, ctx: Ctx) -> hyper::Response<Body> {
    use hyper::{header, Method, StatusCode};
    ctx.requested.store(true, Ordering::Relaxed);
    let error = |status: StatusCode, text: &'static str| {
        let mut r =
            hyper::Response::new(Body::Text(Some(bytes::Bytes::from_static(text.as_bytes()))));
        *r.status_mut() = status;
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        r
    };
    if !matches!(*req.method(), Method::GET | Method::HEAD) {
        return error(StatusCode::METHOD_NOT_ALLOWED, "only GET /metrics\n");
    }
    if req.uri().path() != "/metrics" {
        return error(StatusCode::NOT_FOUND, "not found: try /metrics\n");
    }
    let format = Format::negotiate(header(&req, "accept"));
    let gzip = accepts_gzip(header(&req, "accept-encoding"));
    // Within the exchange's deadline: a request past MAX_ANSWERS waits.
    let Ok(permit) = ctx.answers.acquire_owned().await else {
        return error(StatusCode::SERVICE_UNAVAILABLE, "shutting down\n");
    };
    let (latest, families) = {
        let sh = ctx.shared.lock().expect("metrics state");
        (sh.latest.clone(), sh.health.families())
    };
    let series = latest.as_deref().map(|s| (&s.stats, s.labels()));
    let exposition = openmetrics::Exposition::new(series, ctx.circuits, format);
    let body = if req.method() == Method::HEAD {
        Body::Text(None)
    } else {
        Body::Exposition(Box::new(Streaming {
            exposition,
            latest,
            families,
            gzip: gzip
                .then(|| flate2::write::GzEncoder::new(Vec::with_capacity(CHUNK), GZIP_LEVEL)),
            done: false,
            _permit: permit,
        }))
    };
    let mut r = hyper::Response::new(body);
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(format.content_type()),
    );
    h.insert(
        header::VARY,
        header::HeaderValue::from_static("Accept, Accept-Encoding"),
    );
    if gzip {
        h.insert(
            header::CONTENT_ENCODING,
            header::HeaderValue::from_static("gzip"),
        );
    }
    r
}

/// gzip's level: the fastest (its repeated label sets shrink a
/// 10,000-circuit answer to a sixteenth even so: docs/benchmarks.md).
const GZIP_LEVEL: flate2::Compression = flate2::Compression::fast();

/// An answer's body.
enum Body {
    /// A short text (errors), or nothing (HEAD).
    Text(Option<bytes::Bytes>),
    /// The exposition, rendered a chunk per frame as the client reads.
    Exposition(Box<Streaming>),
}

/// The state of an exposition being sent.
struct Streaming {
    exposition: openmetrics::Exposition,
    /// The snapshot it renders (held until the answer ends).
    latest: Option<Arc<Snapshot>>,
    families: Vec<openmetrics::Family>,
    gzip: Option<flate2::write::GzEncoder<Vec<u8>>>,
    done: bool,
    /// One of the [`MAX_ANSWERS`].
    _permit: tokio::sync::OwnedSemaphorePermit,
}

impl Streaming {
    /// The next frame's bytes (`None`: the end).
    fn next_chunk(&mut self) -> std::io::Result<Option<Vec<u8>>> {
        let series = self.latest.as_deref().map(|s| (&s.stats, s.labels()));
        loop {
            if self.done {
                return Ok(None);
            }
            let mut buf = Vec::with_capacity(CHUNK + 4096);
            let more = self
                .exposition
                .fill(series, &self.families, &mut buf, CHUNK);
            self.done = !more;
            let Some(gz) = &mut self.gzip else {
                return Ok(Some(buf));
            };
            gz.write_all(&buf)?;
            let out = if more {
                std::mem::take(gz.get_mut())
            } else {
                let gz = self.gzip.take().expect("the encoder");
                gz.finish()?
            };
            // The encoder may keep a small chunk to itself: render more.
            if !out.is_empty() {
                return Ok(Some(out));
            }
        }
    }
}

impl http_body::Body for Body {
    type Data = bytes::Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<bytes::Bytes>, std::io::Error>>> {
        let frame = match self.get_mut() {
            Body::Text(t) => t.take().map(|b| Ok(http_body::Frame::data(b))),
            Body::Exposition(s) => s
                .next_chunk()
                .transpose()
                .map(|r| r.map(|v| http_body::Frame::data(bytes::Bytes::from(v)))),
        };
        std::task::Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Body::Text(t) => t.is_none(),
            Body::Exposition(s) => s.done && s.gzip.is_none(),
        }
    }
}

/// The tests' promtool check, shared with the CLI's black-box tests.
#[cfg(test)]
#[path = "../tests/common/promtool.rs"]
#[allow(clippy::print_stderr)] // a test's skip message
mod promtool;

#[cfg(test)]
mod tests {
    use super::*;

    use super::promtool;
    use lqos_apply::netlink::{
        CakeTin, CakeXstats, ClassSample, Counters, LeafXstats, QdiscSample,
    };
    use lqos_apply::stats::openmetrics::{
        tcp_families, tin_delays, Labels, COUNTERS, DELAY, DELAY_KINDS, GAUGES, INFO, TCP_RTT,
    };
    use lqos_apply::stats::tcp::EXPOSED_BUCKETS;
    use lqos_apply::stats::tcp::{RttStats, TcpStats};
    use lqos_apply::stats::{
        Dir, DirStats, IfaceSamples, Samples, Stats, StatsIndex, StatsTracker,
    };
    use lqos_tc::allocation::Direction;
    use lqos_tc::TcHandle;
    use prometheus_client::collector::Collector;
    use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
    use prometheus_client::metrics::counter::ConstCounter;
    use prometheus_client::metrics::gauge::ConstGauge;
    use prometheus_client::registry::Registry;
    use proptest::prelude::*;

    /// `/metrics` in `format`, written to `out` as it is rendered: the
    /// circuit and node series of the latest poll, the daemon's health. The
    /// lock on `shared` is held only to take a snapshot.
    fn render(
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

    /// The eBPF data path's TCP statistics of `plan`'s circuits at poll
    /// `k` (1 or 2): every circuit but the last has flows; circuit 0 has
    /// samples on every side, the others download subscriber-side only.
    fn tcp_read(plan: &lqos_tc::Plan, k: u32) -> lqos_bpf::tcp::TcpRead {
        let n = plan.allocation.circuits.len();
        let circuits = plan.allocation.circuits[..n.saturating_sub(1)]
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let key = lqos_bpf::layout::TcpKey {
                    classid: TcHandle::new(plan.major(Direction::Download, c.queue), c.minor).raw(),
                    tag: lqos_bpf::layout::circuit_tag(&c.id),
                };
                let mut t = lqos_bpf::layout::TcpCircuit::default();
                let sides: &[(usize, usize)] = if i == 0 {
                    &[(0, 0), (0, 1), (1, 0), (1, 1)]
                } else {
                    &[(0, 0)]
                };
                for &(d, side) in sides {
                    let h = &mut t.rtt[d][side];
                    for (b, ms) in [(0u64, 0.05f64), (3, 40.0), (40, 900.0), (68, 20_000.0)] {
                        let n = k * (b as u32 + 1) * (i as u32 + 1);
                        h.buckets[lqos_bpf::layout::rtt_bucket_of((ms * 1e6) as u64)] += n;
                        h.count += u64::from(n);
                        h.sum_ns += u64::from(n) * (ms * 1e6) as u64;
                    }
                }
                t.retransmits = [u64::from(k) * 3, i as u64];
                t.flows = 10 * u64::from(k);
                t.unmeasured = u64::from(k);
                (key, t)
            })
            .collect();
        let mut health = lqos_bpf::tcp::TcpHealth::default();
        health.flow_table_size = 262_144;
        health.flows_new = 1000 * u64::from(k);
        health.flows_closed = 400;
        health.samples = 5000 * u64::from(k);
        health.circuits = n as u32 - 1;
        health.circuit_capacity = 262_144;
        lqos_bpf::tcp::TcpRead::new(circuits, health)
    }

    /// A plan of `n` circuits with cake leaves (diffserv4), and statistics
    /// from two polls in which every circuit sent bytes, all of them in
    /// the Best Effort tin, and all but the last had TCP round trips.
    fn polled(n: usize) -> (StatsIndex, Stats) {
        let g = lqos_model::generate(&lqos_model::GenParams::with_circuits(n));
        let cfg = lqos_tc::PlanConfig::bridge("ens19", "ens20", 2);
        let plan = lqos_tc::plan(&g.network, &cfg, None).unwrap();
        let index = StatsIndex::new(&plan);
        let mut t = StatsTracker::new(&index);
        let raw = |bytes: u64, k: u32| {
            let mut s = Samples::from(
                plan.interfaces
                    .iter()
                    .map(|ip| {
                        let mut r = IfaceSamples::empty(&ip.dev);
                        for c in &plan.allocation.circuits {
                            let d = ip.direction;
                            let classid = TcHandle::new(plan.major(d, c.queue), c.minor);
                            r.classes.push(ClassSample {
                                classid,
                                counters: Counters {
                                    bytes,
                                    ..Default::default()
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
                    .collect::<Vec<_>>(),
            );
            s.tcp = Some(tcp_read(&plan, k));
            s
        };
        t.observe(&index, &raw(100, 1), Duration::ZERO);
        let stats = t.observe(&index, &raw(1100, 2), Duration::from_secs(1));
        (index, stats)
    }

    /// The samples prometheus-parse makes of an exposition: one per line,
    /// but one per histogram series for all its `_bucket` lines.
    fn parsed_samples(text: &str) -> usize {
        let lines = text.lines().filter(|l| !l.starts_with('#'));
        let buckets = lines.clone().filter(|l| l.contains("_bucket{")).count();
        lines.count() - buckets + buckets / EXPOSED_BUCKETS.len()
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
        let lines = all.lines().map(|l| Ok(l.to_string()));
        let parsed = prometheus_parse::Scrape::parse(lines).unwrap();
        assert_eq!(parsed.samples.len(), parsed_samples(&all));
        // TCP round trips: a histogram per circuit with flows, direction
        // and side with samples (circuit 0 all four, 1-3 one each), in
        // octave buckets; circuit 4 had no TCP flows.
        assert_eq!(
            all.matches("\nlqos_circuit_tcp_rtt_seconds_count{").count(),
            4 + 3
        );
        assert!(all.contains("\n# TYPE lqos_circuit_tcp_rtt_seconds histogram\n"));
        assert!(all.contains(
            "\nlqos_circuit_tcp_rtt_seconds_bucket{le=\"+Inf\",circuit_id=\"10001\",direction=\"download\",side=\"subscriber\"} 230\n"
        ), "{all}");
        assert!(all.contains(
            "\nlqos_circuit_tcp_rtt_seconds_bucket{le=\"0.0001\",circuit_id=\"10001\",direction=\"download\",side=\"subscriber\"} 2\n"
        ));
        assert!(!all.contains("lqos_circuit_tcp_flows_total{circuit_id=\"10005\"}"));
        assert!(all.contains(
            "\nlqos_circuit_tcp_retransmits_total{circuit_id=\"10001\",direction=\"download\"} 6\n"
        ));
        assert!(all.contains("\nlqos_node_tcp_rtt_seconds_count{node="));
        assert!(all.contains("\nlqos_bpf_tcp_flows 1600\n"));
        assert!(all.contains("\nlqos_bpf_tcp_rtt_samples_total 10000\n"));
        let top = text(&sh, CircuitSeries::Top(2));
        assert_eq!(top.matches("\nlqos_circuit_info{").count(), 2);
        let none = text(&sh, CircuitSeries::None);
        assert_eq!(none.matches("\nlqos_circuit_info{").count(), 0);
        assert!(none.contains("\nlqos_node_sent_bytes_total{"));
        // The default classes' traffic (no circuit's), per direction.
        assert!(all.contains("\nlqos_unclassified_sent_bytes_total{direction=\"download\"} "));
        // Every series the Grafana dashboard queries is served.
        let dash = include_str!("../packaging/grafana/lqos.json");
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
        let lines = text.lines().map(|l| Ok(l.to_string()));
        assert_eq!(
            prometheus_parse::Scrape::parse(lines)
                .unwrap()
                .samples
                .len(),
            parsed_samples(&text)
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
            let mut m = e.encode_descriptor(INFO.0, INFO.1, None, MetricType::Gauge)?;
            for c in &index.circuits {
                let labels = [
                    ("circuit_id", c.id.as_str()),
                    ("name", c.name.as_str()),
                    ("parent", node_name(c.parent)),
                ];
                ConstGauge::new(1i64).encode(m.encode_family(&labels)?)?;
            }
            encode_tcp(&mut e, index, stats)?;
            if let Some(t) = &stats.tcp {
                for f in tcp_families(t) {
                    let ty = match f.kind {
                        openmetrics::Kind::Counter => MetricType::Counter,
                        openmetrics::Kind::Gauge => MetricType::Gauge,
                    };
                    let mut m = e.encode_descriptor(&f.name, &f.help, None, ty)?;
                    for (_, v) in &f.samples {
                        let none: [(&str, &str); 0] = [];
                        let enc = m.encode_family(&none)?;
                        match ty {
                            MetricType::Counter => ConstCounter::new(*v as u64).encode(enc)?,
                            _ => ConstGauge::new(*v).encode(enc)?,
                        }
                    }
                }
            }
            Ok(())
        }
    }

    /// A histogram of fixed values, as prometheus-client encodes one.
    struct ConstHistogram {
        sum: f64,
        count: u64,
        /// Upper bound, count in the bucket (not cumulative).
        buckets: Vec<(f64, u64)>,
    }

    impl EncodeMetric for ConstHistogram {
        fn encode(
            &self,
            mut e: prometheus_client::encoding::MetricEncoder,
        ) -> Result<(), std::fmt::Error> {
            e.encode_histogram::<prometheus_client::encoding::NoLabelSet>(
                self.sum,
                self.count,
                &self.buckets,
                None,
            )
        }

        fn metric_type(&self) -> prometheus_client::metrics::MetricType {
            prometheus_client::metrics::MetricType::Histogram
        }
    }

    impl ConstHistogram {
        /// The exposed (octave) buckets of `r`, from its own per bucket.
        fn of(r: &RttStats) -> ConstHistogram {
            let mut buckets: Vec<(f64, u64)> = EXPOSED_BUCKETS
                .iter()
                .map(|(_, le)| {
                    (
                        if *le == "+Inf" {
                            f64::INFINITY
                        } else {
                            le.parse().unwrap()
                        },
                        0,
                    )
                })
                .collect();
            for &(k, n) in &r.buckets {
                let i = EXPOSED_BUCKETS
                    .iter()
                    .position(|(b, _)| usize::from(k) <= *b)
                    .unwrap();
                buckets[i].1 += n;
            }
            ConstHistogram {
                sum: r.sum_ms / 1e3,
                count: buckets.iter().map(|b| b.1).sum(),
                buckets,
            }
        }
    }

    /// The TCP families of circuits and nodes, in the exposition's order.
    fn encode_tcp(
        e: &mut DescriptorEncoder,
        index: &StatsIndex,
        stats: &Stats,
    ) -> Result<(), std::fmt::Error> {
        use prometheus_client::metrics::MetricType;
        let circuits: Vec<(&str, &str, Option<&TcpStats>)> = index
            .circuits
            .iter()
            .zip(&stats.circuits)
            .map(|(c, s)| ("circuit_id", c.id.as_str(), s.tcp.as_deref()))
            .collect();
        let nodes: Vec<(&str, &str, Option<&TcpStats>)> = index
            .nodes
            .iter()
            .zip(&stats.nodes)
            .map(|(n, s)| ("node", n.name.as_str(), s.tcp.as_deref()))
            .collect();
        for (who, rows) in [("circuit", &circuits), ("node", &nodes)] {
            let family = format!("lqos_{who}_{}", TCP_RTT.0);
            let mut m = e.encode_descriptor(&family, TCP_RTT.1, None, MetricType::Histogram)?;
            for &(key, id, tcp) in rows.iter() {
                let Some(t) = tcp else { continue };
                for d in Dir::BOTH {
                    for (side, r) in [
                        ("subscriber", &t.dir(d).subscriber),
                        ("internet", &t.dir(d).internet),
                    ] {
                        if r.samples == 0 && r.buckets.is_empty() {
                            continue;
                        }
                        let labels = [(key, id), ("direction", d.name()), ("side", side)];
                        ConstHistogram::of(r).encode(m.encode_family(&labels)?)?;
                    }
                }
            }
        }
        type Value = fn(&TcpStats, Option<Dir>) -> u64;
        let counters: [(&str, &str, bool, Value); 3] = [
            (
                "tcp_retransmits",
                "TCP segments sent again (by the segments' direction)",
                true,
                |t, d| t.dir(d.unwrap()).retransmits,
            ),
            ("tcp_flows", "TCP flows seen", false, |t, _| t.flows),
            (
                "tcp_unmeasured_flows",
                "TCP flows without timestamps (no round-trip times)",
                false,
                |t, _| t.unmeasured_flows,
            ),
        ];
        for (name, help, per_dir, value) in counters {
            for (who, rows) in [("circuit", &circuits), ("node", &nodes)] {
                let family = format!("lqos_{who}_{name}");
                let mut m = e.encode_descriptor(&family, help, None, MetricType::Counter)?;
                for &(key, id, tcp) in rows.iter() {
                    let Some(t) = tcp else { continue };
                    if per_dir {
                        for d in Dir::BOTH {
                            let labels = [(key, id), ("direction", d.name())];
                            ConstCounter::new(value(t, Some(d)))
                                .encode(m.encode_family(&labels)?)?;
                        }
                    } else {
                        ConstCounter::new(value(t, None)).encode(m.encode_family(&[(key, id)])?)?;
                    }
                }
            }
        }
        Ok(())
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
    fn gzip_only_when_accepted() {
        for (h, want) in [
            (None, false),
            (Some("identity"), false),
            (Some("gzip"), true),
            (Some("deflate, gzip;q=0.5"), true),
            (Some("GZIP"), true),
            (Some("x-gzip"), true),
            (Some("gzip;q=0"), false),
            (Some("br, zstd"), false),
        ] {
            assert_eq!(accepts_gzip(h), want, "{h:?}");
        }
    }

    /// A full table makes room by dropping the connection that has waited
    /// longest for its request head; connections being answered stay.
    #[test]
    fn a_full_table_drops_the_oldest_idle_connection() {
        let mut c = Conns::default();
        let t0 = Instant::now();
        let mut flags = Vec::new();
        for i in 0..MAX_CONNECTIONS {
            let (_, requested) = c.admit(t0 + Duration::from_millis(i as u64)).unwrap();
            flags.push(requested);
        }
        flags[0].store(true, Ordering::Relaxed);
        let (id, _) = c.admit(t0 + Duration::from_secs(1)).unwrap();
        assert_eq!(c.list.len(), MAX_CONNECTIONS);
        assert!(c.list.iter().any(|x| x.id == 1), "being answered: kept");
        assert!(!c.list.iter().any(|x| x.id == 2), "idle longest: dropped");
        assert!(c.list.iter().any(|x| x.id == id));
        for f in &flags {
            f.store(true, Ordering::Relaxed);
        }
        c.list.retain(|x| x.id != id);
        c.admit(t0).unwrap().1.store(true, Ordering::Relaxed);
        assert!(c.admit(t0).is_none(), "all answered: refused");
        c.remove(1);
        assert!(c.admit(t0).is_some());
    }

    #[test]
    fn circuit_series_parse() {
        assert_eq!(parse_circuit_series("all"), Ok(CircuitSeries::All));
        assert_eq!(parse_circuit_series("top:50"), Ok(CircuitSeries::Top(50)));
        assert_eq!(parse_circuit_series("none"), Ok(CircuitSeries::None));
        assert!(parse_circuit_series("top:x").is_err());
    }
}
