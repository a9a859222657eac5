//! Traffic through scratch namespaces, for live tests of classifiers
//! (feature `test-util`): a UDP generator and receivers on threads that
//! entered the namespaces (no iperf), rate windows that leave out the
//! times this machine stalled (a watch thread's 5 ms sleeps waking 25 ms
//! late or more, and 150 ms after: a TCG guest on a busy host stops
//! altogether for a while, and no shaper delivers then), and the HTB
//! classes' counters. Everything here panics on failure: it is a test
//! fixture.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write as _;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use lqos_tc::TcHandle;

use crate::netns::{unique_name, ScratchNetns};

/// UDP payload; on the wire (what HTB counts on veth) 42 bytes more over
/// IPv4, 62 over IPv6 ([`wire`]).
pub const PAYLOAD: usize = 1400;
/// Bytes HTB counts per IPv4 datagram (payload, UDP, IP, Ethernet).
pub const WIRE: u64 = PAYLOAD as u64 + 42;

/// Bytes HTB counts per datagram to `addr`: payload, UDP, IP, Ethernet.
pub fn wire(addr: &str) -> u64 {
    match addr.parse::<IpAddr>() {
        Ok(IpAddr::V6(_)) => PAYLOAD as u64 + 62,
        _ => WIRE,
    }
}
/// UDP port of the receivers.
pub const PORT: u16 = 5001;
/// Width of a bucket of [`buckets`].
pub const BUCKET: Duration = Duration::from_millis(100);

/// Runs `f` on a new thread inside namespace `ns` (sockets it opens live there).
pub fn in_netns<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> JoinHandle<T> {
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || {
        let fd = File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        nix::sched::setns(&fd, nix::sched::CloneFlags::CLONE_NEWNET)
            .unwrap_or_else(|e| panic!("setns {path}: {e}"));
        f()
    })
}

/// Writes `value` to sysctl `key` (`net.ipv4.ip_forward`) of namespace `ns`.
pub fn sysctl(ns: &str, key: &str, value: &str) {
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

/// An internet, a shaper and a subscriber namespace ([`three_namespaces`]).
pub struct Topo {
    /// Forwards between `ens20` (internet side) and `ens19` (subscribers).
    pub shaper: ScratchNetns,
    /// Holds `inet0`, `ens20`'s peer.
    pub internet: ScratchNetns,
    /// Holds `sub0`, `ens19`'s peer.
    pub subscriber: ScratchNetns,
}

/// The three namespaces, each `tag-*`, with the shaper's veth pairs
/// (16 TX queues): `ens20` to "internet"'s `inet0`, `ens19` to
/// "subscriber"'s `sub0` (the shaper's ends up).
pub fn three_namespaces(tag: &str) -> Topo {
    let t = Topo {
        shaper: ScratchNetns::create(&unique_name(tag, "shaper")).unwrap(),
        internet: ScratchNetns::create(&unique_name(tag, "inet")).unwrap(),
        subscriber: ScratchNetns::create(&unique_name(tag, "sub")).unwrap(),
    };
    let (s, i, u) = (&t.shaper, &t.internet, &t.subscriber);
    for (dev, peer, other) in [("ens20", "inet0", i.name()), ("ens19", "sub0", u.name())] {
        s.add_veth(dev, peer, 16).unwrap();
        s.ip(&["link", "set", peer, "netns", other]).unwrap();
    }
    t
}

/// Arrival times (since the common start) of each destination's packets.
pub type Arrivals = Arc<Mutex<BTreeMap<String, Vec<Duration>>>>;

/// One receiver thread per address of `addrs` (port [`PORT`]) in `ns`,
/// each filing arrivals under its address.
pub fn receivers(
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
pub fn receive_at(
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
pub fn sender(
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
pub struct Flow {
    /// Name its send times are filed under.
    pub key: String,
    /// Source to bind (`None`: any address of the destination's family).
    pub src: Option<SocketAddr>,
    /// Destination.
    pub dst: SocketAddr,
    /// Wire kbit/s offered.
    pub kbit: u64,
    /// `SO_PRIORITY` (a classid, raw), if set.
    pub priority: Option<u32>,
    /// `SO_BINDTODEVICE`, if set.
    pub dev: Option<String>,
}

/// Sends every flow (one socket each) in namespace `ns` until `stop`;
/// returns the send times by flow key.
pub fn send_flows(
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
pub struct StallWatch {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Vec<(Duration, Duration)>>,
}

/// A wake-up this late (for a 5 ms sleep) is a stall.
pub const STALL: Duration = Duration::from_millis(25);
/// After a stall: the time for the queues to drain the packets held over
/// it and HTB's burst to pass, left out of rates too.
pub const RECOVERY: Duration = Duration::from_millis(150);

impl StallWatch {
    /// Starts watching (times since `start`).
    pub fn start(start: Instant) -> Self {
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
    pub fn finish(self) -> Vec<(Duration, Duration)> {
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
pub struct Window<'a> {
    /// Start (since the common start).
    pub from: Duration,
    /// End.
    pub to: Duration,
    /// The stalls to leave out ([`StallWatch::finish`]).
    pub skip: &'a [(Duration, Duration)],
}

impl Window<'_> {
    /// Whether `t` is in the window and outside every stall.
    pub fn counts(&self, t: Duration) -> bool {
        t >= self.from && t < self.to && !self.skip.iter().any(|(a, b)| t >= *a && t < *b)
    }

    /// Whether `[a, b)` overlaps a stall.
    pub fn disturbed(&self, a: Duration, b: Duration) -> bool {
        self.skip.iter().any(|(s, e)| *s < b && a < *e)
    }

    /// The window's time outside the stalls.
    pub fn clean(&self) -> Duration {
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
    pub fn rate(&self, times: &[Duration], wire: u64) -> f64 {
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
pub fn buckets(times: &[Duration], w: Window<'_>) -> Vec<Option<usize>> {
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

/// Bytes and packets sent per HTB class on `dev`, from `tc -s class
/// show` text (iproute2 6.1 prints HTB class statistics only as text): a
/// `class htb MAJ:MIN ...` line, then ` Sent N bytes M pkt ...`.
pub fn class_sent(ns: &ScratchNetns, dev: &str) -> BTreeMap<TcHandle, (u64, u64)> {
    let text = ns.tc(&["-s", "class", "show", "dev", dev]).unwrap();
    let mut out = BTreeMap::new();
    let mut current: Option<TcHandle> = None;
    for line in text.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w[..] {
            ["class", "htb", h, ..] => current = h.parse().ok(),
            ["Sent", n, "bytes", p, "pkt", ..] => {
                if let (Some(h), Ok(n), Ok(p)) = (current.take(), n.parse(), p.parse()) {
                    out.insert(h, (n, p));
                }
            }
            _ => {}
        }
    }
    out
}

/// Bytes sent per HTB class on `dev` ([`class_sent`]).
pub fn class_bytes(ns: &ScratchNetns, dev: &str) -> BTreeMap<TcHandle, u64> {
    class_sent(ns, dev)
        .into_iter()
        .map(|(h, (b, _))| (h, b))
        .collect()
}

/// Bytes and packets sent by the default classes (minor 2, every queue's
/// HTB) of `dev`: traffic no classifier put in a circuit's class.
pub fn default_sent(ns: &ScratchNetns, dev: &str) -> (u64, u64) {
    class_sent(ns, dev)
        .iter()
        .filter(|(h, _)| h.minor() == 2)
        .fold((0, 0), |(b, p), (_, (nb, np))| (b + nb, p + np))
}

/// Whether `packets` packets of `bytes` bytes in all, taken by default
/// classes, can hold one of the generator's datagrams (at least [`WIRE`]
/// bytes on the wire) beside packets of at least 86 bytes (the shaper's
/// own neighbour solicitations and MLD reports, 86 to 200 bytes, which
/// are no circuit's). With k datagrams, `bytes >= WIRE * k + 86 * (packets
/// - k)`; without, a false alarm needs a dozen of the shaper's own.
pub fn holds_a_datagram(bytes: u64, packets: u64) -> bool {
    packets > 0 && bytes >= WIRE + 86 * (packets - 1)
}

/// `s` seconds.
pub fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

/// Asserts each flow of `flows` (key, ceil kbit) was offered above 1.1x
/// its ceil and delivered at its ceil +/-10% over the window `w`.
pub fn assert_at_ceils(
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
