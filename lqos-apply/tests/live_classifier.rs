//! The `tc` classifier against a real kernel, with real traffic.
//!
//! Three private namespaces: "internet" sends UDP to several subscriber
//! addresses in "subscriber" through "shaper", which forwards between
//! `ens20` (internet side) and `ens19` (subscriber side), both veth with 16
//! TX queues, and shapes download on `ens19` with an lqos plan that has the
//! `tc` classifier (clsact + flower `dst_ip` + skbedit queue_mapping and
//! priority). The traffic generator and receivers are in this file (plain
//! UDP sockets on threads that entered the namespaces); no iperf.
//!
//! Checked: each shaped flow, offered at 1.3x its circuit's ceil, is delivered
//! at that ceil +/-10%; an address no device has goes to the default class
//! (`:2`) and is not held to any circuit's ceil; after one address moves to
//! another circuit, one apply (one filter replaced per interface) re-steers
//! it to the new circuit's ceil while the other flows are not disturbed (no
//! 100 ms bucket empty or above 1.3x ceil). Rates leave out the times this
//! machine stalled (a watch thread's 5 ms sleeps waking 25 ms late or
//! more, and 150 ms after): a TCG guest on a busy host stops altogether
//! for a while, and no shaper delivers then.
//!
//! Needs root, namespaces, Linux >= 6.0 with cls_flower and act_skbedit.
//! Where those are missing (this project's host kernel has no flower) it
//! skips with a message, unless `LQOS_REQUIRE_CLASSIFIER=1` (the lab's
//! stock Debian 6.1 kernel VM sets it), then it fails.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write as _;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use lqos_apply::backend::{NetlinkBackend, NoProgress, Parallelism};
use lqos_apply::live::{KindProbe, NetlinkLive};
use lqos_apply::netns::{require_netns, unique_name, ScratchNetns};
use lqos_apply::{apply_plan, ApplyOptions};
use lqos_model::config::Classifier;
use lqos_model::{Circuit, Device, Network, Node, Rate};
use lqos_tc::config::LeafSpec;
use lqos_tc::ops::QdiscKind;
use lqos_tc::{plan, Plan, PlanConfig, TcHandle, TcOp};

/// UDP payload; on the wire (what HTB counts on veth) 42 bytes more over
/// IPv4, 62 over IPv6 ([`wire`]).
const PAYLOAD: usize = 1400;
const WIRE: u64 = PAYLOAD as u64 + 42;

/// Bytes HTB counts per datagram to `addr`: payload, UDP, IP, Ethernet.
fn wire(addr: &str) -> u64 {
    match addr.parse::<IpAddr>() {
        Ok(IpAddr::V6(_)) => PAYLOAD as u64 + 62,
        _ => WIRE,
    }
}
const PORT: u16 = 5001;
const BUCKET: Duration = Duration::from_millis(100);

/// Circuits: id, ceil in kbit, address (None: no device yet).
/// Small ceils so a TCG guest keeps up: the lab's 2-vCPU guest handled
/// 240-320 packets/s in total (less while the host is busy).
const CIRCUITS: [(&str, u64, Option<&str>); 4] = [
    ("A", 400, Some("100.64.0.1")),
    ("B", 500, Some("100.64.0.2")),
    ("C", 600, Some("100.64.0.3")),
    ("E", 450, None),
];
/// Shaped flows are offered at this multiple of their circuit's ceil.
const OFFER: f64 = 1.3;
/// The address that moves from C to E.
const MOVER: &str = "100.64.0.3";
/// An address no device has.
const UNKNOWN: &str = "100.64.0.200";
const UNKNOWN_KBIT: u64 = 200;

fn classifier_available(test: &str) -> bool {
    if !require_netns(test) {
        return false;
    }
    let why = match KindProbe::new().probe_classifier() {
        Ok(Ok(())) => return true,
        Ok(Err(why)) => why.to_string(),
        Err(e) => e.to_string(),
    };
    if std::env::var("LQOS_REQUIRE_CLASSIFIER").as_deref() == Ok("1") {
        panic!("{test}: the tc classifier is required (LQOS_REQUIRE_CLASSIFIER=1) but unavailable: {why}");
    }
    eprintln!(
        "skipping {test}: this kernel cannot run the tc classifier ({why}); run it in the lab VM (cargo xtask lab test)"
    );
    false
}

/// Runs `f` on a new thread inside namespace `ns` (sockets it opens live there).
fn in_netns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> JoinHandle<T> {
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || {
        let fd = File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        nix::sched::setns(&fd, nix::sched::CloneFlags::CLONE_NEWNET)
            .unwrap_or_else(|e| panic!("setns {path}: {e}"));
        f()
    })
}

fn sysctl(ns: &str, key: &str, value: &str) {
    let (key, value) = (key.to_string(), value.to_string());
    in_netns(ns, move || {
        let p = format!("/proc/sys/{}", key.replace('.', "/"));
        File::create(&p)
            .and_then(|mut f| f.write_all(value.as_bytes()))
            .unwrap_or_else(|e| panic!("{p}: {e}"));
    })
    .join()
    .unwrap();
}

struct Topo {
    shaper: ScratchNetns,
    internet: ScratchNetns,
    subscriber: ScratchNetns,
}

/// The three namespaces, each `tag-*`, with the shaper's veth pairs
/// (16 TX queues): `ens20` to "internet"'s `inet0`, `ens19` to
/// "subscriber"'s `sub0` (the shaper's ends up).
fn three_namespaces(tag: &str) -> Topo {
    let t = Topo {
        shaper: ScratchNetns::create(&unique_name(tag, "shaper")).unwrap(),
        internet: ScratchNetns::create(&unique_name(tag, "inet")).unwrap(),
        subscriber: ScratchNetns::create(&unique_name(tag, "sub")).unwrap(),
    };
    let (s, i, u) = (&t.shaper, &t.internet, &t.subscriber);
    for (dev, peer, other) in [("ens20", "inet0", i.name()), ("ens19", "sub0", u.name())] {
        s.ip(&[
            "link",
            "add",
            dev,
            "numtxqueues",
            "16",
            "numrxqueues",
            "16",
            "type",
            "veth",
            "peer",
            "name",
            peer,
            "numtxqueues",
            "16",
            "numrxqueues",
            "16",
            "netns",
            other,
        ])
        .unwrap();
        s.ip(&["link", "set", dev, "up"]).unwrap();
    }
    t
}

fn topo() -> Topo {
    let t = three_namespaces("lqos-cls");
    let (s, i, u) = (&t.shaper, &t.internet, &t.subscriber);
    s.ip(&["addr", "add", "192.0.2.1/24", "dev", "ens20"])
        .unwrap();
    s.ip(&["addr", "add", "100.64.0.254/24", "dev", "ens19"])
        .unwrap();
    i.ip(&["addr", "add", "192.0.2.2/24", "dev", "inet0"])
        .unwrap();
    i.ip(&["link", "set", "inet0", "up"]).unwrap();
    i.ip(&["route", "add", "default", "via", "192.0.2.1"])
        .unwrap();
    for a in CIRCUITS.iter().filter_map(|c| c.2).chain([UNKNOWN]) {
        u.ip(&["addr", "add", &format!("{a}/24"), "dev", "sub0"])
            .unwrap();
    }
    u.ip(&["link", "set", "sub0", "up"]).unwrap();
    u.ip(&["route", "add", "default", "via", "100.64.0.254"])
        .unwrap();
    sysctl(s.name(), "net.ipv4.ip_forward", "1");
    t
}

/// The network with `mover` owned by circuit `owner`.
fn network(owner: &str) -> Network {
    let mut net = Network::new();
    net.add_node(
        None,
        Node {
            name: "Site".into(),
            id: None,
            node_type: None,
            download: Rate::from_mbps(40),
            upload: Rate::from_mbps(40),
            virtual_node: false,
        },
    )
    .unwrap();
    for (id, ceil, addr) in CIRCUITS {
        let mut addrs: Vec<&str> = addr.filter(|a| *a != MOVER).into_iter().collect();
        if id == owner {
            addrs.push(MOVER);
        }
        net.add_circuit(Circuit {
            id: id.into(),
            name: format!("circuit {id}").into(),
            parent: Some("Site".into()),
            download_min: Rate::from_bps(200_000),
            upload_min: Rate::from_bps(200_000),
            download_max: Rate::from_bps(ceil * 1000),
            upload_max: Rate::from_bps(ceil * 1000),
            comment: Default::default(),
            sqm: None,
            devices: vec![Device {
                id: format!("dev-{id}").into(),
                name: Default::default(),
                mac: Default::default(),
                ipv4: addrs
                    .iter()
                    .map(|a| format!("{a}/32").parse().unwrap())
                    .collect(),
                ipv6: vec![],
                line: 0,
            }],
        });
    }
    net
}

fn planned(owner: &str, prev: Option<&Plan>) -> Plan {
    let mut cfg = PlanConfig::bridge("ens19", "ens20", 16);
    cfg.download_capacity = Rate::from_mbps(50);
    cfg.upload_capacity = Rate::from_mbps(50);
    cfg.generated_pn_download = Rate::from_mbps(50);
    cfg.generated_pn_upload = Rate::from_mbps(50);
    // Short leaf queues: a moved flow's old backlog drains in ~0.2 s.
    cfg.default_sqm = LeafSpec::Qdisc(QdiscKind::Pfifo { limit: Some(20) });
    cfg.classifier = Classifier::Tc;
    plan(&network(owner), &cfg, prev.map(|p| &p.allocation)).unwrap()
}

/// Loads `p` into the shaper namespace; returns the ops sent per interface.
fn apply(ns: &ScratchNetns, live: &NetlinkLive, p: &Plan) -> BTreeMap<String, Vec<TcOp>> {
    let backend = NetlinkBackend::new(Some(ns.name().to_string()), Parallelism::Serial);
    let opts = {
        let mut p = ApplyOptions::default();
        p.verify_after = true;
        p
    };
    let r = apply_plan(p, live, &backend, opts, &NoProgress).unwrap();
    assert!(
        r.verify.as_ref().unwrap().is_clean(),
        "{}",
        r.verify.unwrap()
    );
    r.changes
        .iter()
        .map(|c| {
            let sent = c.stream.sent().map(std::borrow::Cow::into_owned).collect();
            (c.stream.dev.clone(), sent)
        })
        .collect()
}

/// Arrival times (since the common start) of each destination's packets.
type Arrivals = Arc<Mutex<BTreeMap<String, Vec<Duration>>>>;

/// One receiver thread per address of `addrs` (port [`PORT`]) in `ns`,
/// each filing arrivals under its address.
fn receivers(
    ns: &str,
    start: Instant,
    stop: Arc<AtomicBool>,
    got: Arrivals,
    addrs: &[&str],
) -> Vec<JoinHandle<()>> {
    let at: Vec<(String, SocketAddr)> = addrs
        .iter()
        .map(|a| {
            (
                a.to_string(),
                SocketAddr::from((a.parse::<IpAddr>().unwrap(), PORT)),
            )
        })
        .collect();
    receive_at(ns, start, stop, got, at)
}

/// One receiver thread per `(key, address)` in namespace `ns`, filing the
/// arrival times of full-size datagrams under the key.
fn receive_at(
    ns: &str,
    start: Instant,
    stop: Arc<AtomicBool>,
    got: Arrivals,
    at: Vec<(String, SocketAddr)>,
) -> Vec<JoinHandle<()>> {
    at.into_iter()
        .map(|(key, addr)| {
            let (stop, got) = (stop.clone(), got.clone());
            in_netns(ns, move || {
                let s = UdpSocket::bind(addr).unwrap_or_else(|e| panic!("bind {addr}: {e}"));
                s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
                let mut buf = [0u8; 2048];
                let mut mine = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    if let Ok(n) = s.recv(&mut buf) {
                        if n == PAYLOAD {
                            mine.push(start.elapsed());
                        }
                    }
                }
                got.lock().unwrap().insert(key, mine);
            })
        })
        .collect()
}

/// Sends to every address (port [`PORT`]) at its rate (kbit/s on the
/// wire) until `stop`; returns the send times by address.
fn sender(
    ns: &str,
    start: Instant,
    rates: Vec<(String, u64)>,
    stop: Arc<AtomicBool>,
) -> JoinHandle<BTreeMap<String, Vec<Duration>>> {
    let flows = rates
        .into_iter()
        .map(|(a, kbit)| Flow {
            dst: SocketAddr::from((a.parse::<IpAddr>().unwrap(), PORT)),
            key: a,
            src: None,
            kbit,
            priority: None,
            dev: None,
        })
        .collect();
    send_flows(ns, start, flows, stop)
}

/// One UDP flow of the traffic generator.
struct Flow {
    /// Name its send times are filed under.
    key: String,
    /// Source to bind (`None`: any address of the destination's family).
    src: Option<SocketAddr>,
    dst: SocketAddr,
    /// Wire kbit/s offered.
    kbit: u64,
    /// `SO_PRIORITY` (a classid, raw), if set.
    priority: Option<u32>,
    /// `SO_BINDTODEVICE`, if set.
    dev: Option<String>,
}

/// Sends every flow (one socket each) in namespace `ns` until `stop`;
/// returns the send times by flow key.
fn send_flows(
    ns: &str,
    start: Instant,
    flows: Vec<Flow>,
    stop: Arc<AtomicBool>,
) -> JoinHandle<BTreeMap<String, Vec<Duration>>> {
    in_netns(ns, move || {
        let socks: Vec<UdpSocket> = flows
            .iter()
            .map(|f| {
                let any: SocketAddr = if f.dst.is_ipv6() {
                    "[::]:0".parse().unwrap()
                } else {
                    "0.0.0.0:0".parse().unwrap()
                };
                let s = UdpSocket::bind(f.src.unwrap_or(any)).unwrap();
                if let Some(p) = f.priority {
                    nix::sys::socket::setsockopt(
                        &s,
                        nix::sys::socket::sockopt::Priority,
                        &(p as i32),
                    )
                    .unwrap();
                }
                if let Some(d) = &f.dev {
                    nix::sys::socket::setsockopt(
                        &s,
                        nix::sys::socket::sockopt::BindToDevice,
                        &std::ffi::OsString::from(d),
                    )
                    .unwrap();
                }
                s
            })
            .collect();
        let payload = [0x5au8; PAYLOAD];
        let t0 = Instant::now();
        let gaps: Vec<Duration> = flows
            .iter()
            .map(|f| {
                let w = wire(&f.dst.ip().to_string());
                Duration::from_secs_f64(w as f64 * 8.0 / (f.kbit as f64 * 1000.0))
            })
            .collect();
        let mut next: Vec<Duration> = vec![Duration::ZERO; flows.len()];
        let mut sent: Vec<Vec<Duration>> = vec![Vec::new(); flows.len()];
        while !stop.load(Ordering::Relaxed) {
            let (i, due) = next
                .iter()
                .enumerate()
                .min_by_key(|(_, d)| **d)
                .map(|(i, d)| (i, *d))
                .unwrap();
            let now = t0.elapsed();
            if due > now {
                std::thread::sleep((due - now).min(Duration::from_millis(5)));
                continue;
            }
            if socks[i].send_to(&payload, flows[i].dst).is_ok() {
                sent[i].push(start.elapsed());
            }
            // Catch up after a stall (a TCG guest oversleeps), up to 200 ms
            // worth: the shaper smooths shaped flows; what a longer stall
            // missed is not sent.
            next[i] = (due + gaps[i]).max(now.saturating_sub(Duration::from_millis(200)));
        }
        flows.into_iter().map(|f| f.key).zip(sent).collect()
    })
}

/// A watch on this machine's scheduling: a thread that sleeps 5 ms at a
/// time and files every wake-up later than [`STALL`] as a stall. A TCG
/// guest whose host is busy stops altogether for tens or hundreds of
/// milliseconds; no shaper delivers anything then, and what HTB lost
/// in that time it does not make up (its tokens are capped at one burst).
/// Rates are therefore taken over the window minus the stalls.
struct StallWatch {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Vec<(Duration, Duration)>>,
}

/// A wake-up this late (for a 5 ms sleep) is a stall.
const STALL: Duration = Duration::from_millis(25);
/// After a stall: the time for the queues to drain the packets held over
/// it and HTB's burst to pass, left out of rates too.
const RECOVERY: Duration = Duration::from_millis(150);

impl StallWatch {
    fn start(start: Instant) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut stalls = Vec::new();
            while !s.load(Ordering::Relaxed) {
                let before = start.elapsed();
                std::thread::sleep(Duration::from_millis(5));
                let after = start.elapsed();
                if after - before > STALL {
                    stalls.push((before + Duration::from_millis(5), after));
                }
            }
            stalls
        });
        StallWatch { stop, thread }
    }

    /// Stops the watch; the stalls seen, each widened by [`RECOVERY`].
    fn finish(self) -> Vec<(Duration, Duration)> {
        self.stop.store(true, Ordering::Relaxed);
        let stalls = self.thread.join().unwrap();
        if !stalls.is_empty() {
            let ms: Vec<String> = stalls
                .iter()
                .map(|(a, b)| format!("{:.2}s+{}ms", a.as_secs_f64(), (*b - *a).as_millis()))
                .collect();
            eprintln!(
                "stalls of this machine (left out of rates): {}",
                ms.join(", ")
            );
        }
        stalls.into_iter().map(|(a, b)| (a, b + RECOVERY)).collect()
    }
}

/// `[from, to)` less the stalls of a [`StallWatch`].
#[derive(Clone, Copy)]
struct Window<'a> {
    from: Duration,
    to: Duration,
    skip: &'a [(Duration, Duration)],
}

impl Window<'_> {
    /// Whether `t` is in the window and outside every stall.
    fn counts(&self, t: Duration) -> bool {
        t >= self.from && t < self.to && !self.skip.iter().any(|(a, b)| t >= *a && t < *b)
    }

    /// Whether `[a, b)` overlaps a stall.
    fn disturbed(&self, a: Duration, b: Duration) -> bool {
        self.skip.iter().any(|(s, e)| *s < b && a < *e)
    }

    /// The window's time outside the stalls.
    fn clean(&self) -> Duration {
        let lost: Duration = self
            .skip
            .iter()
            .map(|(a, b)| (*b).min(self.to).saturating_sub((*a).max(self.from)))
            .sum();
        (self.to - self.from).saturating_sub(lost)
    }

    /// Wire kbit/s of datagrams of `wire` bytes at `times` over the
    /// window's clean time. Fails the test, saying why, when stalls took
    /// more than half of the window: no rate can be judged then.
    fn rate(&self, times: &[Duration], wire: u64) -> f64 {
        let clean = self.clean();
        assert!(
            clean * 2 >= self.to - self.from,
            "this machine stalled for {:.2} of the {:.2} s window from {:.1} s: too slow to judge a rate",
            (self.to - self.from - clean).as_secs_f64(),
            (self.to - self.from).as_secs_f64(),
            self.from.as_secs_f64()
        );
        let n = times.iter().filter(|t| self.counts(**t)).count();
        n as f64 * wire as f64 * 8.0 / 1000.0 / clean.as_secs_f64()
    }
}

/// Packets per 100 ms bucket over [from, to), `None` for a bucket a stall
/// touched.
fn buckets(times: &[Duration], w: Window<'_>) -> Vec<Option<usize>> {
    let n = ((w.to - w.from).as_millis() / BUCKET.as_millis()) as usize;
    let mut b = vec![0usize; n];
    for t in times.iter().filter(|t| **t >= w.from && **t < w.to) {
        if let Some(x) = b.get_mut(((*t - w.from).as_millis() / BUCKET.as_millis()) as usize) {
            *x += 1; // a last partial bucket is left out
        }
    }
    b.into_iter()
        .enumerate()
        .map(|(i, n)| {
            let a = w.from + BUCKET * i as u32;
            (!w.disturbed(a, a + BUCKET)).then_some(n)
        })
        .collect()
}

/// Bytes sent per HTB class on `dev`, from `tc -s class show` text
/// (iproute2 6.1 prints HTB class statistics only as text): a `class htb
/// MAJ:MIN ...` line, then ` Sent N bytes ...`.
fn class_bytes(ns: &ScratchNetns, dev: &str) -> BTreeMap<TcHandle, u64> {
    let text = ns.tc(&["-s", "class", "show", "dev", dev]).unwrap();
    let mut out = BTreeMap::new();
    let mut current: Option<TcHandle> = None;
    for line in text.lines() {
        let mut w = line.split_whitespace();
        match (w.next(), w.next(), w.next()) {
            (Some("class"), Some("htb"), Some(h)) => current = h.parse().ok(),
            (Some("Sent"), Some(n), Some("bytes")) => {
                if let (Some(h), Ok(n)) = (current.take(), n.parse()) {
                    out.insert(h, n);
                }
            }
            _ => {}
        }
    }
    out
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

#[test]
#[ignore = "needs cls_flower and act_skbedit (Linux 6.0+), which many kernels lack: runs in the lab (cargo xtask lab test); cargo test -- --include-ignored where the kernel has them"]
fn classifier_steers_forwarded_traffic_and_reload_resteers_one_address() {
    if !classifier_available("live_classifier") {
        return;
    }
    let t = topo();
    let live = NetlinkLive::new(Some(t.shaper.name().to_string()));
    let first = planned("C", None);
    let sent = apply(&t.shaper, &live, &first);
    assert!(sent["ens19"]
        .iter()
        .any(|op| matches!(op, TcOp::ReplaceFilter(_))));
    // Applying the same plan again sends nothing (the classifier included).
    let again = apply(&t.shaper, &live, &planned("C", Some(&first)));
    assert!(again.values().all(Vec::is_empty), "{again:?}");

    let start = Instant::now();
    let stalls = StallWatch::start(start);
    let stop = Arc::new(AtomicBool::new(false));
    let got: Arrivals = Arc::default();
    let addrs: Vec<&str> = CIRCUITS
        .iter()
        .filter_map(|c| c.2)
        .chain([UNKNOWN])
        .collect();
    let rx = receivers(
        t.subscriber.name(),
        start,
        stop.clone(),
        got.clone(),
        &addrs,
    );
    std::thread::sleep(Duration::from_millis(200));
    let mut rates: Vec<(String, u64)> = CIRCUITS
        .iter()
        .filter_map(|(_, ceil, a)| a.map(|a| (a.to_string(), (*ceil as f64 * OFFER) as u64)))
        .collect();
    rates.push((UNKNOWN.to_string(), UNKNOWN_KBIT));
    let tx = sender(t.internet.name(), start, rates, stop.clone());

    // Phase 1 until 5 s; then the move (one apply); phase 2 for 4.5 s more.
    let (warm, moved_at) = (secs(2.5), secs(5.0));
    std::thread::sleep(moved_at.saturating_sub(start.elapsed()));
    let second = planned("E", Some(&first));
    let changed = apply(&t.shaper, &live, &second);
    let applied_at = start.elapsed();
    let end = applied_at + secs(4.5);
    std::thread::sleep(end.saturating_sub(start.elapsed()));
    stop.store(true, Ordering::Relaxed);
    let offered = tx.join().unwrap();
    for r in rx {
        r.join().unwrap();
    }
    let got = got.lock().unwrap().clone();
    let stalls = stalls.finish();
    let bytes = class_bytes(&t.shaper, "ens19");
    eprintln!(
        "live_classifier: move applied in {:.3}s; per address: sent, delivered (packets), phase-1 kbit/s",
        (applied_at - moved_at).as_secs_f64()
    );
    let after = applied_at + secs(1.5);
    let (before, moved, whole) = (
        Window {
            from: warm,
            to: moved_at,
            skip: &stalls,
        },
        Window {
            from: after,
            to: end,
            skip: &stalls,
        },
        Window {
            from: warm,
            to: end,
            skip: &stalls,
        },
    );
    for (a, sent) in &offered {
        eprintln!(
            "  {a}: offered {:.0} / delivered {:.0} kbit/s before the move, offered {:.0} / delivered {:.0} after",
            before.rate(sent, WIRE),
            before.rate(&got[a], WIRE),
            moved.rate(sent, WIRE),
            moved.rate(&got[a], WIRE),
        );
    }

    // One filter replaced per interface, nothing else.
    for (dev, ops) in &changed {
        assert_eq!(ops.len(), 1, "{dev}: {ops:?}");
        assert!(
            matches!(&ops[0], TcOp::ReplaceFilter(f) if f.net.to_string() == format!("{MOVER}/32")),
            "{dev}: {ops:?}"
        );
    }

    let ceil = |id: &str| CIRCUITS.iter().find(|c| c.0 == id).unwrap().1 as f64;

    let within = |what: &str, r: f64, want: f64| {
        assert!(
            (r - want).abs() <= 0.10 * want,
            "{what}: delivered {r:.0} kbit/s, want {want:.0} +/-10%"
        );
    };
    // The generator must really have offered more than each ceil in both
    // windows (else the machine is too slow for the test, not the shaper wrong).
    for (id, c, addr) in CIRCUITS.iter().filter(|c| c.2.is_some()) {
        let a = addr.unwrap();
        let c = if a == MOVER {
            ceil("C").max(ceil("E"))
        } else {
            *c as f64
        };
        for w in [before, moved] {
            let (from, to) = (w.from, w.to);
            let o = w.rate(&offered[a], WIRE);
            assert!(
                o >= 1.1 * c,
                "the generator offered {a} (circuit {id}) only {o:.0} kbit/s in {:.1}..{:.1}s (ceil {c}): this machine is too slow for the test",
                from.as_secs_f64(),
                to.as_secs_f64()
            );
        }
    }
    // Phase 1 (after HTB's start-up): every flow at its circuit's ceil.
    for (id, _, addr) in CIRCUITS.iter().filter(|c| c.2.is_some()) {
        let a = addr.unwrap();
        within(
            &format!("{a} (circuit {id}) before the move"),
            before.rate(&got[a], WIRE),
            ceil(id),
        );
    }
    // The unknown address is held to no circuit's ceil: everything offered
    // arrives, through the default classes (`:2`).
    let unknown = got[UNKNOWN].len() as f64;
    assert!(
        unknown >= 0.9 * offered[UNKNOWN].len() as f64,
        "unknown address: {unknown} of {} packets delivered",
        offered[UNKNOWN].len()
    );
    let default_bytes: u64 = bytes
        .iter()
        .filter(|(h, _)| h.minor() == 2)
        .map(|(_, b)| b)
        .sum();
    let unknown_bytes = got[UNKNOWN].len() as u64 * WIRE;
    assert!(
        default_bytes as f64 >= 0.9 * unknown_bytes as f64,
        "default classes saw {default_bytes} bytes, the unknown flow delivered {unknown_bytes}"
    );
    // Each circuit's class carried its own flow (classids from the IP map).
    let steady = CIRCUITS
        .iter()
        .filter(|c| c.2.is_some() && c.2 != Some(MOVER));
    for (id, _, addr) in steady.clone() {
        let a = addr.unwrap();
        let e = second.ip_map.lookup(a.parse().unwrap()).unwrap();
        let delivered = got[a].len() as u64 * WIRE;
        let b = bytes.get(&e.download.classid).copied().unwrap_or(0);
        assert!(
            b as f64 >= 0.9 * delivered as f64,
            "circuit {id} class {} carried {b} bytes, its flow delivered {delivered}",
            e.download.classid
        );
    }
    // Phase 2: the mover at E's ceil; the others undisturbed throughout
    // (a bucket may hold one packet more than 1.3x ceil x 100 ms: packets
    // are indivisible).
    within(
        "the moved address at circuit E",
        moved.rate(&got[MOVER], WIRE),
        ceil("E"),
    );
    for (id, _, addr) in steady {
        let a = addr.unwrap();
        let max = (1.3 * ceil(id) * 1000.0 / 8.0 * BUCKET.as_secs_f64() / WIRE as f64).floor()
            as usize
            + 1;
        for (i, n) in buckets(&got[a], whole).iter().enumerate() {
            let Some(n) = n else { continue };
            let at = warm.as_secs_f64() + i as f64 * BUCKET.as_secs_f64();
            assert!(
                *n > 0,
                "{a} (circuit {id}): empty 100 ms bucket at {at:.1}s"
            );
            assert!(
                *n <= max,
                "{a} (circuit {id}): {n} packets in the 100 ms bucket at {at:.1}s, above 1.3x ceil (+1 packet: {max})"
            );
        }
    }
}

/// Runs on any kernel with clsact (this host too): another program's
/// clsact and egress filter (here a u32 filter outside lqos's preference
/// range, standing for LibreQoS's BPF) read back over netlink, are not
/// drift for a plan without the classifier, and survive applies.
#[test]
fn foreign_clsact_and_filters_are_read_back_and_left_alone() {
    if !require_netns("live_classifier_foreign_clsact") {
        return;
    }
    let ns =
        ScratchNetns::with_veth(&unique_name("lqos-cls", "foreign"), "ens19", "ens20", 16).unwrap();
    ns.tc(&["qdisc", "add", "dev", "ens19", "clsact"]).unwrap();
    ns.tc(&[
        "filter",
        "add",
        "dev",
        "ens19",
        "egress",
        "pref",
        "49152",
        "protocol",
        "ip",
        "u32",
        "match",
        "ip",
        "dst",
        "192.0.2.9/32",
        "classid",
        "1:2",
    ])
    .unwrap();
    let mut cfg = planned("C", None).config;
    cfg.classifier = Classifier::None;
    let p = plan(&network("C"), &cfg, None).unwrap();
    let live = NetlinkLive::new(Some(ns.name().to_string()));
    use lqos_apply::live::LiveSource as _;
    let tree = live.dump("ens19").unwrap();
    assert!(tree.has_clsact(), "{:?}", tree.qdiscs);
    assert!(tree.filters.is_empty(), "{:?}", tree.filters);
    apply(&ns, &live, &p);
    assert!(apply(&ns, &live, &planned_like(&p))
        .values()
        .all(Vec::is_empty));
    let shown = ns
        .tc(&["filter", "show", "dev", "ens19", "egress"])
        .unwrap();
    assert!(shown.contains("u32"), "{shown}");
    assert!(ns
        .tc(&["qdisc", "show", "dev", "ens19"])
        .unwrap()
        .contains("clsact"));
}

/// `p` re-planned with its own allocation (a no-op reload).
fn planned_like(p: &Plan) -> Plan {
    plan(&network("C"), &p.config, Some(&p.allocation)).unwrap()
}

/// A circuit of one device: `v4`/`v6` addresses or prefixes, the same
/// ceil (kbit) both ways unless `up_kbit` is given.
fn one_device(id: &str, down_kbit: u64, up_kbit: u64, v4: &[&str], v6: &[&str]) -> Circuit {
    Circuit {
        id: id.into(),
        name: format!("circuit {id}").into(),
        parent: Some("Site".into()),
        download_min: Rate::from_bps(100_000),
        upload_min: Rate::from_bps(100_000),
        download_max: Rate::from_bps(down_kbit * 1000),
        upload_max: Rate::from_bps(up_kbit * 1000),
        comment: Default::default(),
        sqm: None,
        devices: vec![Device {
            id: format!("dev-{id}").into(),
            name: Default::default(),
            mac: Default::default(),
            ipv4: v4.iter().map(|a| a.parse().unwrap()).collect(),
            ipv6: v6.iter().map(|a| a.parse().unwrap()).collect(),
            line: 0,
        }],
    }
}

/// One 40 Mbit site with `circuits`.
fn site_network(circuits: Vec<Circuit>) -> Network {
    let mut net = Network::new();
    net.add_node(
        None,
        Node {
            name: "Site".into(),
            id: None,
            node_type: None,
            download: Rate::from_mbps(40),
            upload: Rate::from_mbps(40),
            virtual_node: false,
        },
    )
    .unwrap();
    for c in circuits {
        net.add_circuit(c);
    }
    net
}

/// `planned`'s config (16 queues, pfifo leaves of 20 packets, 50 Mbit
/// links) on `interfaces`, with `classifier`.
fn small_config(interfaces: lqos_tc::config::Interfaces, classifier: Classifier) -> PlanConfig {
    let mut cfg = planned("C", None).config;
    cfg.interfaces = interfaces;
    cfg.classifier = classifier;
    cfg
}

/// `ip` in namespace `ns` via `ip netns exec` (a fresh /sys for the
/// namespace, which `ip -n` does not give).
fn netns_sh(ns: &str, script: &str) {
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", ns, "sh", "-c", script])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Asserts each flow of `flows` (key, ceil kbit) was offered above 1.1x
/// its ceil and delivered at its ceil +/-10% over the window `w`.
fn assert_at_ceils(
    what: &str,
    flows: &[(String, u64)],
    offered: &BTreeMap<String, Vec<Duration>>,
    got: &BTreeMap<String, Vec<Duration>>,
    wire_of: impl Fn(&str) -> u64,
    w: Window<'_>,
) {
    for (key, ceil) in flows {
        let wire = wire_of(key);
        let o = w.rate(&offered[key], wire);
        let r = w.rate(&got[key], wire);
        eprintln!("{what}: {key}: offered {o:.0}, delivered {r:.0} kbit/s (ceil {ceil})");
        assert!(
            o >= 1.1 * *ceil as f64,
            "{what}: the generator offered {key} only {o:.0} kbit/s (ceil {ceil}): this machine is too slow for the test"
        );
        assert!(
            (r - *ceil as f64).abs() <= 0.10 * *ceil as f64,
            "{what}: {key} delivered {r:.0} kbit/s, want {ceil} +/-10%"
        );
    }
}

/// IPv6 subscribers (LibreQoS's IPv6 column: a /64 or /56 per device):
/// forwarded IPv6 flows reach their circuits' classes through the
/// classifier's `protocol ipv6 flower dst_ip` filters, each at its ceil.
#[test]
#[ignore = "needs cls_flower and act_skbedit (Linux 6.0+), which many kernels lack: runs in the lab (cargo xtask lab test); cargo test -- --include-ignored where the kernel has them"]
fn ipv6_subscribers_are_shaped_at_their_ceil_through_the_classifier() {
    if !classifier_available("live_classifier_ipv6") {
        return;
    }
    // (circuit, ceil kbit, prefix, the subscriber's address in it)
    const V6: [(&str, u64, &str, &str); 3] = [
        ("A6", 400, "fd00:64:1::/64", "fd00:64:1::10"),
        ("B6", 500, "fd00:64:2::/64", "fd00:64:2::10"),
        ("C6", 600, "fd00:64:3::/56", "fd00:64:3:7::10"),
    ];
    let t = three_namespaces("lqos-cls6");
    let (s, i, u) = (&t.shaper, &t.internet, &t.subscriber);
    let addr = |ns: &ScratchNetns, a: &str, dev: &str| {
        ns.ip(&["-6", "addr", "add", a, "dev", dev, "nodad"])
            .unwrap()
    };
    addr(s, "2001:db8:1::1/64", "ens20");
    addr(s, "fd00:64:ffff::1/64", "ens19");
    for (_, _, prefix, _) in V6 {
        s.ip(&["-6", "route", "add", prefix, "dev", "ens19"])
            .unwrap();
    }
    addr(i, "2001:db8:1::2/64", "inet0");
    i.ip(&["link", "set", "inet0", "up"]).unwrap();
    i.ip(&["-6", "route", "add", "default", "via", "2001:db8:1::1"])
        .unwrap();
    addr(u, "fd00:64:ffff::2/64", "sub0");
    for (_, _, _, host) in V6 {
        addr(u, &format!("{host}/64"), "sub0");
    }
    u.ip(&["link", "set", "sub0", "up"]).unwrap();
    u.ip(&["-6", "route", "add", "default", "via", "fd00:64:ffff::1"])
        .unwrap();
    sysctl(s.name(), "net.ipv6.conf.all.forwarding", "1");

    let net = site_network(
        V6.iter()
            .map(|(id, ceil, prefix, _)| one_device(id, *ceil, *ceil, &[], &[prefix]))
            .collect(),
    );
    let cfg = small_config(
        lqos_tc::config::Interfaces::Bridge {
            download: "ens19".into(),
            upload: "ens20".into(),
        },
        Classifier::Tc,
    );
    let p = plan(&net, &cfg, None).unwrap();
    let live = NetlinkLive::new(Some(s.name().to_string()));
    apply(s, &live, &p);

    let start = Instant::now();
    let stalls = StallWatch::start(start);
    let stop = Arc::new(AtomicBool::new(false));
    let got: Arrivals = Arc::default();
    let hosts: Vec<&str> = V6.iter().map(|v| v.3).collect();
    let rx = receivers(u.name(), start, stop.clone(), got.clone(), &hosts);
    std::thread::sleep(Duration::from_millis(200));
    let flows: Vec<(String, u64)> = V6.iter().map(|v| (v.3.to_string(), v.1)).collect();
    let offer = flows
        .iter()
        .map(|(a, c)| (a.clone(), (*c as f64 * OFFER) as u64))
        .collect();
    let tx = sender(i.name(), start, offer, stop.clone());
    std::thread::sleep(secs(6.0).saturating_sub(start.elapsed()));
    stop.store(true, Ordering::Relaxed);
    let offered = tx.join().unwrap();
    for r in rx {
        r.join().unwrap();
    }
    let got = got.lock().unwrap().clone();
    let stalls = stalls.finish();
    let w = Window {
        from: secs(2.5),
        to: secs(5.5),
        skip: &stalls,
    };
    assert_at_ceils("ipv6", &flows, &offered, &got, wire, w);
    // Each flow went through its own circuit's class (the IP map's).
    let bytes = class_bytes(s, "ens19");
    for (_, _, _, host) in V6 {
        let e = p.ip_map.lookup(host.parse().unwrap()).unwrap();
        let b = bytes.get(&e.download.classid).copied().unwrap_or(0);
        let delivered = got[host].len() as u64 * wire(host);
        assert!(
            b as f64 >= 0.9 * delivered as f64,
            "{host}: class {} carried {b} bytes, the flow delivered {delivered}",
            e.download.classid
        );
    }
}

/// IPv6 on this host's kernel (no flower): a local sender classifies
/// itself with `SO_PRIORITY` = its circuit's classid (from the IP map's
/// longest-prefix match of the destination), and XPS sends everything of
/// this host's CPUs out of the circuit's TX queue. The flow is held to its
/// circuit's ceil.
#[test]
fn ipv6_flow_with_so_priority_is_shaped_at_its_ceil() {
    if !require_netns("live_classifier_ipv6_priority") {
        return;
    }
    const CEIL: u64 = 600;
    const HOST: &str = "fd00:64:5:1::10";
    let shaper = ScratchNetns::create(&unique_name("lqos-prio6", "shaper")).unwrap();
    let sub = ScratchNetns::create(&unique_name("lqos-prio6", "sub")).unwrap();
    shaper
        .ip(&[
            "link",
            "add",
            "ens19",
            "numtxqueues",
            "16",
            "numrxqueues",
            "16",
            "type",
            "veth",
            "peer",
            "name",
            "sub0",
            "netns",
            sub.name(),
        ])
        .unwrap();
    shaper
        .ip(&[
            "link",
            "add",
            "ens20",
            "numtxqueues",
            "16",
            "numrxqueues",
            "16",
            "type",
            "veth",
            "peer",
            "name",
            "ens20p",
        ])
        .unwrap();
    for d in ["ens19", "ens20", "ens20p"] {
        shaper.ip(&["link", "set", d, "up"]).unwrap();
    }
    shaper
        .ip(&[
            "-6",
            "addr",
            "add",
            "fd00:64:ffff::1/64",
            "dev",
            "ens19",
            "nodad",
        ])
        .unwrap();
    shaper
        .ip(&["-6", "route", "add", "fd00:64:5::/56", "dev", "ens19"])
        .unwrap();
    sub.ip(&[
        "-6",
        "addr",
        "add",
        &format!("{HOST}/64"),
        "dev",
        "sub0",
        "nodad",
    ])
    .unwrap();
    sub.ip(&["link", "set", "sub0", "up"]).unwrap();

    // Two circuits: the /56 holding HOST, and a /64 inside it elsewhere
    // (longest prefix wins, so HOST's /64 circuit is the one).
    let net = site_network(vec![
        one_device("wide", 5000, 5000, &[], &["fd00:64:5::/56"]),
        one_device("narrow", CEIL, CEIL, &[], &["fd00:64:5:1::/64"]),
    ]);
    let cfg = small_config(
        lqos_tc::config::Interfaces::Bridge {
            download: "ens19".into(),
            upload: "ens20".into(),
        },
        Classifier::None,
    );
    let p = plan(&net, &cfg, None).unwrap();
    let e = p.ip_map.lookup(HOST.parse().unwrap()).unwrap();
    assert_eq!(e.circuit_id.as_str(), "narrow");
    let live = NetlinkLive::new(Some(shaper.name().to_string()));
    apply(&shaper, &live, &p);
    // XPS: every CPU of this machine maps to the circuit's queue only.
    let cpus = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(32);
    let mask = format!("{:x}", (1u64 << cpus) - 1);
    netns_sh(
        shaper.name(),
        &format!(
            "for q in /sys/class/net/ens19/queues/tx-*; do echo 0 > $q/xps_cpus; done; echo {mask} > /sys/class/net/ens19/queues/tx-{}/xps_cpus",
            e.download.queue
        ),
    );

    let start = Instant::now();
    let stalls = StallWatch::start(start);
    let stop = Arc::new(AtomicBool::new(false));
    let got: Arrivals = Arc::default();
    let rx = receivers(sub.name(), start, stop.clone(), got.clone(), &[HOST]);
    std::thread::sleep(Duration::from_millis(200));
    let tx = send_flows(
        shaper.name(),
        start,
        vec![Flow {
            key: HOST.to_string(),
            src: None,
            dst: SocketAddr::from((HOST.parse::<IpAddr>().unwrap(), PORT)),
            kbit: (CEIL as f64 * OFFER) as u64,
            priority: Some(e.download.classid.raw()),
            dev: Some("ens19".into()),
        }],
        stop.clone(),
    );
    std::thread::sleep(secs(6.0).saturating_sub(start.elapsed()));
    stop.store(true, Ordering::Relaxed);
    let offered = tx.join().unwrap();
    for r in rx {
        r.join().unwrap();
    }
    let got = got.lock().unwrap().clone();
    let stalls = stalls.finish();
    assert_at_ceils(
        "ipv6 SO_PRIORITY",
        &[(HOST.to_string(), CEIL)],
        &offered,
        &got,
        wire,
        Window {
            from: secs(2.5),
            to: secs(5.5),
            skip: &stalls,
        },
    );
    let bytes = class_bytes(&shaper, "ens19");
    let b = bytes.get(&e.download.classid).copied().unwrap_or(0);
    let delivered = got[HOST].len() as u64 * wire(HOST);
    assert!(
        b as f64 >= 0.9 * delivered as f64,
        "class {} carried {b} bytes, the flow delivered {delivered}",
        e.download.classid
    );
}

/// On a stick (LibreQoS's `[single_interface]`): one interface carries
/// both directions, download on the first half of its TX queues, upload on
/// the second. The shaper forwards between the internet and the
/// subscribers in and out of the same interface; each circuit's download
/// flow is held to its download ceil and its upload flow to its upload
/// ceil.
#[test]
#[ignore = "needs cls_flower and act_skbedit (Linux 6.0+), which many kernels lack: runs in the lab (cargo xtask lab test); cargo test -- --include-ignored where the kernel has them"]
fn on_a_stick_shapes_both_directions_at_their_ceils() {
    if !classifier_available("live_classifier_stick") {
        return;
    }
    // (circuit, download kbit, upload kbit, subscriber address)
    const STICK: [(&str, u64, u64, &str); 2] = [
        ("S1", 500, 300, "100.64.0.1"),
        ("S2", 400, 350, "100.64.0.2"),
    ];
    const INET: &str = "192.0.2.2";
    let shaper = ScratchNetns::create(&unique_name("lqos-stick", "shaper")).unwrap();
    let lan = ScratchNetns::create(&unique_name("lqos-stick", "lan")).unwrap();
    let inet = ScratchNetns::create(&unique_name("lqos-stick", "inet")).unwrap();
    let sub = ScratchNetns::create(&unique_name("lqos-stick", "sub")).unwrap();
    shaper
        .ip(&[
            "link",
            "add",
            "ens19",
            "numtxqueues",
            "16",
            "numrxqueues",
            "16",
            "type",
            "veth",
            "peer",
            "name",
            "s0",
            "netns",
            lan.name(),
        ])
        .unwrap();
    // "lan" routes the internet's and the subscribers' traffic to the
    // shaper (policy routing by the interface it came in on) and delivers
    // what the shaper sends back: every packet crosses ens19 out of the
    // shaper once, in its direction. (The lab's kernel has no bridge.)
    for (port, peer, ns) in [("i0", "inet0", inet.name()), ("u0", "sub0", sub.name())] {
        lan.ip(&[
            "link", "add", port, "type", "veth", "peer", "name", peer, "netns", ns,
        ])
        .unwrap();
    }
    for (dev, a) in [
        ("s0", "10.9.9.2/24"),
        ("i0", "192.0.2.1/24"),
        ("u0", "100.64.0.254/24"),
    ] {
        lan.ip(&["addr", "add", a, "dev", dev]).unwrap();
        lan.ip(&["link", "set", dev, "up"]).unwrap();
    }
    lan.ip(&["route", "add", "default", "via", "10.9.9.1", "table", "100"])
        .unwrap();
    for dev in ["i0", "u0"] {
        lan.ip(&["rule", "add", "iif", dev, "table", "100"])
            .unwrap();
    }
    for key in [
        "net.ipv4.ip_forward",
        "net.ipv4.conf.all.rp_filter",
        "net.ipv4.conf.s0.rp_filter",
    ] {
        sysctl(
            lan.name(),
            key,
            if key.ends_with("forward") { "1" } else { "0" },
        );
    }
    shaper.ip(&["link", "set", "ens19", "up"]).unwrap();
    shaper
        .ip(&["addr", "add", "10.9.9.1/24", "dev", "ens19"])
        .unwrap();
    for net in ["192.0.2.0/24", "100.64.0.0/24"] {
        shaper
            .ip(&["route", "add", net, "via", "10.9.9.2", "dev", "ens19"])
            .unwrap();
    }
    sysctl(shaper.name(), "net.ipv4.ip_forward", "1");
    sysctl(shaper.name(), "net.ipv4.conf.all.send_redirects", "0");
    sysctl(shaper.name(), "net.ipv4.conf.ens19.send_redirects", "0");
    inet.ip(&["addr", "add", &format!("{INET}/24"), "dev", "inet0"])
        .unwrap();
    inet.ip(&["link", "set", "inet0", "up"]).unwrap();
    inet.ip(&["route", "add", "default", "via", "192.0.2.1"])
        .unwrap();
    for (_, _, _, a) in STICK {
        sub.ip(&["addr", "add", &format!("{a}/24"), "dev", "sub0"])
            .unwrap();
    }
    sub.ip(&["link", "set", "sub0", "up"]).unwrap();
    sub.ip(&["route", "add", "default", "via", "100.64.0.254"])
        .unwrap();

    let net = site_network(
        STICK
            .iter()
            .map(|(id, d, u, a)| one_device(id, *d, *u, &[&format!("{a}/32")], &[]))
            .collect(),
    );
    let cfg = small_config(
        lqos_tc::config::Interfaces::OnAStick {
            interface: "ens19".into(),
            internet_vlan: 0,
            network_vlan: 0,
        },
        Classifier::Tc,
    );
    let p = plan(&net, &cfg, None).unwrap();
    assert_eq!(p.interfaces.len(), 1);
    let live = NetlinkLive::new(Some(shaper.name().to_string()));
    apply(&shaper, &live, &p);

    let start = Instant::now();
    let stalls = StallWatch::start(start);
    let stop = Arc::new(AtomicBool::new(false));
    let got: Arrivals = Arc::default();
    // Download: internet -> each subscriber address (port PORT). Upload:
    // each subscriber address -> the internet host, one port per circuit.
    let down: Vec<(String, u64)> = STICK
        .iter()
        .map(|s| (format!("down {}", s.0), s.1))
        .collect();
    let up: Vec<(String, u64)> = STICK.iter().map(|s| (format!("up {}", s.0), s.2)).collect();
    let up_port = |i: usize| PORT + 1 + i as u16;
    let inet_ip: IpAddr = INET.parse().unwrap();
    let mut rx = receive_at(
        sub.name(),
        start,
        stop.clone(),
        got.clone(),
        STICK
            .iter()
            .map(|s| {
                (
                    format!("down {}", s.0),
                    SocketAddr::from((s.3.parse::<IpAddr>().unwrap(), PORT)),
                )
            })
            .collect(),
    );
    rx.extend(receive_at(
        inet.name(),
        start,
        stop.clone(),
        got.clone(),
        (0..STICK.len())
            .map(|i| {
                (
                    format!("up {}", STICK[i].0),
                    SocketAddr::from((inet_ip, up_port(i))),
                )
            })
            .collect(),
    ));
    std::thread::sleep(Duration::from_millis(200));
    let offer = |kbit: u64| (kbit as f64 * OFFER) as u64;
    let tx_down = send_flows(
        inet.name(),
        start,
        STICK
            .iter()
            .map(|s| Flow {
                key: format!("down {}", s.0),
                src: None,
                dst: SocketAddr::from((s.3.parse::<IpAddr>().unwrap(), PORT)),
                kbit: offer(s.1),
                priority: None,
                dev: None,
            })
            .collect(),
        stop.clone(),
    );
    let tx_up = send_flows(
        sub.name(),
        start,
        STICK
            .iter()
            .enumerate()
            .map(|(i, s)| Flow {
                key: format!("up {}", s.0),
                src: Some(SocketAddr::from((s.3.parse::<IpAddr>().unwrap(), 0))),
                dst: SocketAddr::from((inet_ip, up_port(i))),
                kbit: offer(s.2),
                priority: None,
                dev: None,
            })
            .collect(),
        stop.clone(),
    );
    std::thread::sleep(secs(6.0).saturating_sub(start.elapsed()));
    stop.store(true, Ordering::Relaxed);
    let mut offered = tx_down.join().unwrap();
    offered.extend(tx_up.join().unwrap());
    for r in rx {
        r.join().unwrap();
    }
    let got = got.lock().unwrap().clone();
    let stalls = stalls.finish();
    let window = Window {
        from: secs(2.5),
        to: secs(5.5),
        skip: &stalls,
    };
    assert_at_ceils("stick download", &down, &offered, &got, |_| WIRE, window);
    assert_at_ceils("stick upload", &up, &offered, &got, |_| WIRE, window);
    // Each direction in its own class: download majors 1..=8, upload 9..=16.
    let bytes = class_bytes(&shaper, "ens19");
    for (id, _, _, a) in STICK {
        let e = p.ip_map.lookup(a.parse().unwrap()).unwrap();
        assert!(e.upload.classid.major() > 8 && e.download.classid.major() <= 8);
        for (dir, classid) in [("down", e.download.classid), ("up", e.upload.classid)] {
            let key = format!("{dir} {id}");
            let b = bytes.get(&classid).copied().unwrap_or(0);
            let delivered = got[&key].len() as u64 * WIRE;
            assert!(
                b as f64 >= 0.9 * delivered as f64,
                "{key}: class {classid} carried {b} bytes, the flow delivered {delivered}"
            );
        }
    }
}
