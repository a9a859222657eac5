//! The maps' keys and values, byte for byte as `bpf/include/lqos/maps.h`
//! lays them out (native byte order for integers, network order for
//! addresses). They travel as byte arrays, so no `unsafe` `Pod` impls are
//! needed; `encode`/`decode` sit side by side and a test checks them
//! against the sizes the object's BTF declares.

use std::net::{IpAddr, Ipv6Addr};

/// Layout version: part of every map's name (`lqos1_hosts`, ...). A program
/// with an incompatible layout uses a new number, so its maps are created
/// beside the old ones and the running programs never see a foreign layout.
pub const LAYOUT_VERSION: u32 = 1;

/// Map names in the object (and file names under the pin directory).
pub mod names {
    /// Exact-match hash: one address (/32, /128) -> circuit.
    pub const HOSTS: &str = "lqos1_hosts";
    /// LPM trie: prefix -> circuit (prefixes not in [`FAST`]).
    pub const NETS: &str = "lqos1_nets";
    /// Exact-match hash of the common prefix lengths: (length, masked
    /// address) -> circuit.
    pub const FAST: &str = "lqos1_fast";
    /// Array, one slot: [`super::FastLens`].
    pub const GLOBAL: &str = "lqos1_global";
    /// Hash: ifindex -> interface configuration.
    pub const IFACES: &str = "lqos1_ifaces";
    /// cpumap: the CPUs XDP may redirect to.
    pub const CPUS: &str = "lqos1_cpus";
    /// Per-CPU counters ([`super::Stats`]).
    pub const STATS: &str = "lqos1_stats";
    /// Per-CPU packets per TX queue (download `q`, upload `1024 + q`).
    pub const QUEUES: &str = "lqos1_queues";
    /// Per-CPU packets redirected per target CPU.
    pub const REDIRECTS: &str = "lqos1_redirects";
    /// LRU hash: TCP flow -> timestamp and sequence state per direction
    /// ([`super::FLOW_KEY_SIZE`] bytes).
    pub const FLOWS: &str = "lqos1_flows";
    /// Hash, allocated on use: circuit ([`super::TcpKey`]) -> its TCP
    /// round-trip times and retransmits ([`super::TcpCircuit`]).
    pub const TCP: &str = "lqos1_tcp";
    /// Every map, in load order.
    pub const ALL: [&str; 11] = [
        HOSTS, NETS, FAST, GLOBAL, IFACES, CPUS, STATS, QUEUES, REDIRECTS, FLOWS, TCP,
    ];
}

/// Program names in the object.
pub mod programs {
    /// The XDP program (ingress: CPU steering).
    pub const XDP: &str = "lqos_xdp";
    /// The cls_bpf program (clsact egress: class and TX queue).
    pub const TC: &str = "lqos_tc";
}

/// Capacity of the exact-match map (`LQOS_MAX_HOSTS`).
pub const MAX_HOSTS: u32 = 1 << 20;
/// Capacity of the prefix map (`LQOS_MAX_NETS`).
pub const MAX_NETS: u32 = 1 << 20;
/// Capacity of the fast prefix map (`LQOS_MAX_FAST`).
pub const MAX_FAST: u32 = 1 << 20;
/// Prefix lengths per family the programs look up in the fast map
/// (`LQOS_FAST_LENS`).
pub const FAST_LENS: usize = 4;

/// The prefix lengths (in IPv6 bits: an IPv4 /29 is 125) whose prefixes
/// sit in the fast map, per family, longest first (`struct lqos_global`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FastLens {
    /// IPv4 prefixes (97..=127).
    pub v4: [u8; FAST_LENS],
    /// IPv6 prefixes (1..=127).
    pub v6: [u8; FAST_LENS],
}

impl FastLens {
    /// From lists of lengths (at most [`FAST_LENS`] each; more are
    /// dropped), sorted longest first.
    pub fn new(v4: &[u8], v6: &[u8]) -> FastLens {
        let fill = |l: &[u8]| {
            let mut v: Vec<u8> = l.iter().copied().filter(|&x| x > 0 && x < 128).collect();
            v.sort_unstable_by(|a, b| b.cmp(a));
            v.dedup();
            let mut out = [0u8; FAST_LENS];
            for (o, x) in out.iter_mut().zip(v) {
                *o = x;
            }
            out
        };
        FastLens {
            v4: fill(v4),
            v6: fill(v6),
        }
    }

    /// Both lists together (`self`'s first when over [`FAST_LENS`]).
    pub fn union(&self, other: &FastLens) -> FastLens {
        let join = |a: &[u8; FAST_LENS], b: &[u8; FAST_LENS]| {
            let mut v: Vec<u8> = Vec::with_capacity(2 * FAST_LENS);
            for &x in a.iter().chain(b.iter()) {
                if x > 0 && !v.contains(&x) {
                    v.push(x);
                }
            }
            v.truncate(FAST_LENS);
            v
        };
        FastLens::new(&join(&self.v4, &other.v4), &join(&self.v6, &other.v6))
    }

    /// The map's bytes.
    pub fn encode(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[0..4].copy_from_slice(&self.v4);
        b[4..8].copy_from_slice(&self.v6);
        b
    }

    /// Parses the map's bytes.
    pub fn decode(b: &[u8; 16]) -> FastLens {
        FastLens::new(&b[0..4], &b[4..8])
    }
}

/// Capacity of the interface map (`LQOS_MAX_IFACES`).
pub const MAX_IFACES: u32 = 64;
/// Queues per direction with a packet counter (`LQOS_MAX_QUEUES`).
pub const MAX_QUEUES: u32 = 1024;

/// An address as the maps key it: IPv6, IPv4 as `::ffff:a.b.c.d`.
pub fn addr_bytes(addr: IpAddr) -> [u8; 16] {
    match addr {
        IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
        IpAddr::V6(a) => a.octets(),
    }
}

/// The inverse of [`addr_bytes`] (`::ffff:a.b.c.d` -> IPv4).
pub fn addr_from_bytes(b: [u8; 16]) -> IpAddr {
    let a = Ipv6Addr::from(b);
    match a.to_ipv4_mapped() {
        Some(v4) => IpAddr::V4(v4),
        None => IpAddr::V6(a),
    }
}

/// One direction of a circuit (`struct lqos_steer`, 8 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Steer {
    /// The circuit's HTB class, `major << 16 | minor`.
    pub classid: u32,
    /// 0-based TX queue (its HTB's major is `queue + 1`).
    pub queue: u16,
    /// The CPU that owns the queue (XDP redirects there).
    pub cpu: u16,
}

/// A map value (`struct lqos_circuit`, 24 bytes): both directions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CircuitValue {
    /// Download (towards the subscriber).
    pub down: Steer,
    /// Upload (towards the internet).
    pub up: Steer,
    /// Index of the circuit in the plan.
    pub circuit: u32,
    /// [`circuit_tag`] of the circuit's ID: with `down.classid`, the key
    /// of its TCP statistics ([`TcpKey`]).
    pub tag: u32,
}

impl CircuitValue {
    /// Size in bytes.
    pub const SIZE: usize = 24;

    /// The map's bytes.
    pub fn encode(&self) -> [u8; 24] {
        let mut b = [0u8; 24];
        put_steer(&mut b[0..8], &self.down);
        put_steer(&mut b[8..16], &self.up);
        b[16..20].copy_from_slice(&self.circuit.to_ne_bytes());
        b[20..24].copy_from_slice(&self.tag.to_ne_bytes());
        b
    }

    /// Parses the map's bytes.
    pub fn decode(b: &[u8; 24]) -> CircuitValue {
        CircuitValue {
            down: get_steer(&b[0..8]),
            up: get_steer(&b[8..16]),
            circuit: u32_at(b, 16),
            tag: u32_at(b, 20),
        }
    }

    /// The key of this circuit's TCP statistics.
    pub fn tcp_key(&self) -> TcpKey {
        TcpKey {
            classid: self.down.classid,
            tag: self.tag,
        }
    }
}

/// A circuit's tag: the 32-bit FNV-1a hash of its ID. Written with every
/// address of the circuit, it keeps apart the TCP statistics of two
/// circuits that hold one classid one after the other.
pub fn circuit_tag(id: &str) -> u32 {
    id.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

fn put_steer(b: &mut [u8], s: &Steer) {
    b[0..4].copy_from_slice(&s.classid.to_ne_bytes());
    b[4..6].copy_from_slice(&s.queue.to_ne_bytes());
    b[6..8].copy_from_slice(&s.cpu.to_ne_bytes());
}

fn get_steer(b: &[u8]) -> Steer {
    Steer {
        classid: u32_at(b, 0),
        queue: u16_at(b, 4),
        cpu: u16_at(b, 6),
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([b[at], b[at + 1]])
}

/// What an interface carries (`enum lqos_role`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Subscriber-facing: leaving = download, arriving = upload.
    Subscriber,
    /// Internet-facing: leaving = upload, arriving = download.
    Internet,
    /// Both directions on one interface, told apart by the outermost VLAN
    /// tag: `internet_vlan` faces the internet, anything else the
    /// subscribers (as LibreQoS's on-a-stick mode).
    Stick {
        /// VID of the internet side.
        internet_vlan: u16,
        /// VID of the subscriber side.
        network_vlan: u16,
    },
}

/// Default class of one direction (`struct lqos_dflt`): a packet of no
/// circuit goes to class `(q + 1):default_minor` of queue
/// `q = queue_base + flow_hash % queue_count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct DefaultQueues {
    /// First queue of this direction.
    pub queue_base: u16,
    /// Queues of this direction (0: leave such packets alone).
    pub queue_count: u16,
}

/// Per-interface configuration (`struct lqos_iface`, 16 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IfaceConfig {
    /// What the interface carries.
    pub role: Role,
    /// XDP redirects this interface's packets to their circuit's CPU.
    pub xdp_redirect: bool,
    /// Minor of every HTB's default class (2 in lqos and LibreQoS).
    pub default_minor: u16,
    /// The tc program tracks TCP round trips and retransmits of the
    /// circuits' packets leaving here (`lqos1_flows`, `lqos1_tcp`).
    pub track_tcp: bool,
    /// Download default queues.
    pub down: DefaultQueues,
    /// Upload default queues.
    pub up: DefaultQueues,
}

/// `LQOS_IF_NO_TCP`: the tc program leaves TCP alone on this interface.
const IF_NO_TCP: u8 = 2;

impl IfaceConfig {
    /// Size in bytes.
    pub const SIZE: usize = 16;

    /// An interface of role `role` with `queues` TX queues for each
    /// direction (both from queue 0, as on a bridge), XDP redirection on,
    /// default classes `:2`, TCP tracking on.
    pub fn bridge(role: Role, queues: u16) -> IfaceConfig {
        let all = DefaultQueues {
            queue_base: 0,
            queue_count: queues,
        };
        IfaceConfig {
            role,
            xdp_redirect: true,
            default_minor: 2,
            track_tcp: true,
            down: all,
            up: all,
        }
    }

    /// The map's bytes.
    pub fn encode(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        let (role, inet, net) = match self.role {
            Role::Subscriber => (1u8, 0u16, 0u16),
            Role::Internet => (2, 0, 0),
            Role::Stick {
                internet_vlan,
                network_vlan,
            } => (3, internet_vlan, network_vlan),
        };
        b[0] = role;
        b[1] = u8::from(self.xdp_redirect) | if self.track_tcp { 0 } else { IF_NO_TCP };
        b[2..4].copy_from_slice(&inet.to_ne_bytes());
        b[4..6].copy_from_slice(&net.to_ne_bytes());
        b[6..8].copy_from_slice(&self.default_minor.to_ne_bytes());
        b[8..10].copy_from_slice(&self.down.queue_base.to_ne_bytes());
        b[10..12].copy_from_slice(&self.down.queue_count.to_ne_bytes());
        b[12..14].copy_from_slice(&self.up.queue_base.to_ne_bytes());
        b[14..16].copy_from_slice(&self.up.queue_count.to_ne_bytes());
        b
    }

    /// Parses the map's bytes (`None`: an unknown role).
    pub fn decode(b: &[u8; 16]) -> Option<IfaceConfig> {
        let role = match b[0] {
            1 => Role::Subscriber,
            2 => Role::Internet,
            3 => Role::Stick {
                internet_vlan: u16_at(b, 2),
                network_vlan: u16_at(b, 4),
            },
            _ => return None,
        };
        Some(IfaceConfig {
            role,
            xdp_redirect: b[1] & 1 != 0,
            default_minor: u16_at(b, 6),
            track_tcp: b[1] & IF_NO_TCP == 0,
            down: DefaultQueues {
                queue_base: u16_at(b, 8),
                queue_count: u16_at(b, 10),
            },
            up: DefaultQueues {
                queue_base: u16_at(b, 12),
                queue_count: u16_at(b, 14),
            },
        })
    }
}

/// Counters (`struct lqos_stats`), summed over CPUs or of one CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    /// tc: a circuit's class and queue were set.
    pub tc_classified: u64,
    /// tc: IP of no circuit, sent to a default class.
    pub tc_defaulted: u64,
    /// tc: not IP or truncated, sent to a default class.
    pub tc_unparsed: u64,
    /// tc: on an interface lqos has no configuration for: untouched.
    pub tc_unconfigured: u64,
    /// XDP: redirected to the circuit's CPU.
    pub xdp_redirected: u64,
    /// XDP: already on the circuit's CPU (or redirection off): passed.
    pub xdp_local: u64,
    /// XDP: IP of no circuit: passed.
    pub xdp_unknown: u64,
    /// XDP: not IP or truncated: passed.
    pub xdp_unparsed: u64,
    /// XDP: on an interface lqos has no configuration for: passed.
    pub xdp_unconfigured: u64,
    /// XDP: the circuit's CPU is not in the cpumap: passed.
    pub xdp_nocpu: u64,
    /// TCP flows entered in the flow table.
    pub tcp_flows_new: u64,
    /// TCP flows taken out of it on a RST or a FIN both ways (the rest
    /// leave it when the LRU evicts them).
    pub tcp_flows_closed: u64,
    /// TCP flows that could not be entered.
    pub tcp_flows_failed: u64,
    /// RTT samples taken.
    pub tcp_samples: u64,
    /// Circuits whose TCP statistics found `lqos1_tcp` full.
    pub tcp_circuits_full: u64,
}

impl Stats {
    /// Words in the map's value (`struct lqos_stats` is 16 x u64).
    pub const WORDS: usize = 16;

    /// From the map's value.
    pub fn from_words(w: &[u64; 16]) -> Stats {
        Stats {
            tc_classified: w[0],
            tc_defaulted: w[1],
            tc_unparsed: w[2],
            tc_unconfigured: w[3],
            xdp_redirected: w[4],
            xdp_local: w[5],
            xdp_unknown: w[6],
            xdp_unparsed: w[7],
            xdp_unconfigured: w[8],
            xdp_nocpu: w[9],
            tcp_flows_new: w[10],
            tcp_flows_closed: w[11],
            tcp_flows_failed: w[12],
            tcp_samples: w[13],
            tcp_circuits_full: w[14],
        }
    }

    /// Field-wise sum (to add up CPUs).
    pub fn add(&mut self, o: &Stats) {
        self.tc_classified += o.tc_classified;
        self.tc_defaulted += o.tc_defaulted;
        self.tc_unparsed += o.tc_unparsed;
        self.tc_unconfigured += o.tc_unconfigured;
        self.xdp_redirected += o.xdp_redirected;
        self.xdp_local += o.xdp_local;
        self.xdp_unknown += o.xdp_unknown;
        self.xdp_unparsed += o.xdp_unparsed;
        self.xdp_unconfigured += o.xdp_unconfigured;
        self.xdp_nocpu += o.xdp_nocpu;
        self.tcp_flows_new += o.tcp_flows_new;
        self.tcp_flows_closed += o.tcp_flows_closed;
        self.tcp_flows_failed += o.tcp_flows_failed;
        self.tcp_samples += o.tcp_samples;
        self.tcp_circuits_full += o.tcp_circuits_full;
    }
}

/// Buckets of an RTT histogram (`LQOS_RTT_BUCKETS`): bucket 0 holds
/// samples below [`RTT_BASE_SECS`], bucket `k` (1..=67) those from
/// `RTT_BASE_SECS * 2^((k-1)/4)` up to `RTT_BASE_SECS * 2^(k/4)`, bucket 68
/// those from 11.02 s.
pub const RTT_BUCKETS: usize = 69;
/// The lowest bucket bound, seconds (100 µs).
pub const RTT_BASE_SECS: f64 = 1e-4;

/// The upper bound of RTT bucket `k` in seconds (`+inf` for the last):
/// `100 µs * 2^(k/4)`.
pub fn rtt_bucket_upper(k: usize) -> f64 {
    static UPPER: std::sync::LazyLock<[f64; RTT_BUCKETS]> = std::sync::LazyLock::new(|| {
        let mut u = [f64::INFINITY; RTT_BUCKETS];
        for (k, v) in u.iter_mut().enumerate().take(RTT_BUCKETS - 1) {
            *v = RTT_BASE_SECS * (k as f64 / 4.0).exp2();
        }
        u
    });
    UPPER.get(k).copied().unwrap_or(f64::INFINITY)
}

/// The lower bound of RTT bucket `k` in seconds (0 for the first).
pub fn rtt_bucket_lower(k: usize) -> f64 {
    if k == 0 {
        0.0
    } else {
        rtt_bucket_upper(k - 1)
    }
}

/// The bucket of an RTT of `ns` nanoseconds, as the programs compute it
/// (`lqos_rtt_bucket`: 16.16 fixed point, thresholds rounded up, so a
/// sample within 1/65536 of a bound may fall on either side of it).
pub fn rtt_bucket_of(ns: u64) -> usize {
    const BASE_NS: u64 = 100_000;
    if ns < BASE_NS {
        return 0;
    }
    if ns >= 1 << 40 {
        return RTT_BUCKETS - 1;
    }
    let y = (ns << 16) / BASE_NS;
    let n = 63 - y.leading_zeros();
    let m = y >> (n - 16);
    let j = usize::from(m >= 77936) + usize::from(m >= 92682) + usize::from(m >= 110_218);
    (1 + 4 * (n as usize - 16) + j).min(RTT_BUCKETS - 1)
}

/// Which end of the shaper a round trip covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Side {
    /// From the shaper to the subscriber and back: the last mile and the
    /// shaper's own queue (a TSval leaving towards the subscriber, echoed
    /// by the subscriber).
    Subscriber,
    /// From the shaper to the far end and back (a TSval leaving towards
    /// the internet, echoed from there).
    Internet,
}

impl Side {
    /// Both, the subscriber's first.
    pub const BOTH: [Side; 2] = [Side::Subscriber, Side::Internet];

    /// `subscriber` or `internet`.
    pub fn name(self) -> &'static str {
        match self {
            Side::Subscriber => "subscriber",
            Side::Internet => "internet",
        }
    }
}

/// The key of a circuit's TCP statistics (`struct lqos_tcp_key`): its
/// download classid and [`circuit_tag`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct TcpKey {
    /// The circuit's download classid (`major << 16 | minor`).
    pub classid: u32,
    /// [`circuit_tag`] of its ID.
    pub tag: u32,
}

impl TcpKey {
    /// Size in bytes.
    pub const SIZE: usize = 8;

    /// The map's bytes.
    pub fn encode(&self) -> [u8; 8] {
        let mut b = [0u8; 8];
        b[0..4].copy_from_slice(&self.classid.to_ne_bytes());
        b[4..8].copy_from_slice(&self.tag.to_ne_bytes());
        b
    }

    /// Parses the map's bytes.
    pub fn decode(b: &[u8; 8]) -> TcpKey {
        TcpKey {
            classid: u32_at(b, 0),
            tag: u32_at(b, 4),
        }
    }
}

/// One RTT histogram (`struct lqos_rtt_hist`, 296 bytes): samples, their
/// sum and per-bucket counts (32-bit in the kernel: they wrap, so compare
/// polls with wrapping differences).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RttHist {
    /// Samples.
    pub count: u64,
    /// Sum of the samples, ns.
    pub sum_ns: u64,
    /// Samples per bucket ([`RTT_BUCKETS`]).
    pub buckets: [u32; RTT_BUCKETS],
}

impl Default for RttHist {
    fn default() -> Self {
        RttHist {
            count: 0,
            sum_ns: 0,
            buckets: [0; RTT_BUCKETS],
        }
    }
}

impl RttHist {
    /// Size in bytes.
    pub const SIZE: usize = 16 + 4 * RTT_BUCKETS + 4;

    fn decode(b: &[u8]) -> RttHist {
        let mut h = RttHist {
            count: u64_at(b, 0),
            sum_ns: u64_at(b, 8),
            ..RttHist::default()
        };
        for (k, v) in h.buckets.iter_mut().enumerate() {
            *v = u32_at(b, 16 + 4 * k);
        }
        h
    }

    fn encode(&self, b: &mut [u8]) {
        b[0..8].copy_from_slice(&self.count.to_ne_bytes());
        b[8..16].copy_from_slice(&self.sum_ns.to_ne_bytes());
        for (k, v) in self.buckets.iter().enumerate() {
            b[16 + 4 * k..20 + 4 * k].copy_from_slice(&v.to_ne_bytes());
        }
    }
}

/// A circuit's TCP statistics (`struct lqos_tcp_circuit`, 1,248 bytes),
/// counted since the entry was made (on the circuit's first TCP flow).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TcpCircuit {
    /// RTT histograms: `[data direction][side]` (download 0, upload 1;
    /// subscriber 0, internet 1). A flow's data direction is the way it
    /// carried more bytes so far.
    pub rtt: [[RttHist; 2]; 2],
    /// Segments sent again, `[download, upload]` (by the segment's
    /// direction).
    pub retransmits: [u64; 2],
    /// TCP flows seen (flow table entries made for the circuit).
    pub flows: u64,
    /// Of those, flows without TCP timestamps (not measured).
    pub unmeasured: u64,
}

impl TcpCircuit {
    /// Size in bytes.
    pub const SIZE: usize = 4 * RttHist::SIZE + 8 * 8;

    /// Histogram of direction `upload` (false: download) and `side`.
    pub fn hist(&self, upload: bool, side: Side) -> &RttHist {
        &self.rtt[usize::from(upload)][side as usize]
    }

    /// Parses the map's bytes.
    pub fn decode(b: &[u8; Self::SIZE]) -> TcpCircuit {
        let h = |i: usize| RttHist::decode(&b[i * RttHist::SIZE..(i + 1) * RttHist::SIZE]);
        let tail = 4 * RttHist::SIZE;
        TcpCircuit {
            rtt: [[h(0), h(1)], [h(2), h(3)]],
            retransmits: [u64_at(b, tail), u64_at(b, tail + 8)],
            flows: u64_at(b, tail + 16),
            unmeasured: u64_at(b, tail + 24),
        }
    }

    /// The map's bytes (for tests and fakes).
    pub fn encode(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        for (i, h) in self.rtt.iter().flatten().enumerate() {
            h.encode(&mut b[i * RttHist::SIZE..(i + 1) * RttHist::SIZE]);
        }
        let tail = 4 * RttHist::SIZE;
        b[tail..tail + 8].copy_from_slice(&self.retransmits[0].to_ne_bytes());
        b[tail + 8..tail + 16].copy_from_slice(&self.retransmits[1].to_ne_bytes());
        b[tail + 16..tail + 24].copy_from_slice(&self.flows.to_ne_bytes());
        b[tail + 24..tail + 32].copy_from_slice(&self.unmeasured.to_ne_bytes());
        b
    }
}

/// A flow table key (`struct lqos_flow_key`, 36 bytes): the subscriber's
/// address and port, then the far end's (ports in network order).
pub const FLOW_KEY_SIZE: usize = 36;
/// A flow table value (`struct lqos_flow`): 40 bytes.
pub const FLOW_VALUE_SIZE: usize = 40;
/// Flow table entries unless configured (`LQOS_FLOWS_DEFAULT`; the
/// loader's `flow_table_size`).
pub const DEFAULT_FLOW_TABLE: u32 = 1 << 18;
/// Capacity of `lqos1_tcp` (`LQOS_MAX_TCP_CIRCUITS`).
pub const MAX_TCP_CIRCUITS: u32 = 1 << 18;

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_ne_bytes(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn circuit_value_round_trips_in_the_c_layout() {
        let v = CircuitValue {
            down: Steer {
                classid: 0x0003_0010,
                queue: 2,
                cpu: 1,
            },
            up: Steer {
                classid: 0x0005_0010,
                queue: 4,
                cpu: 3,
            },
            circuit: 77,
            tag: 0x0102_0304,
        };
        let b = v.encode();
        // struct lqos_steer { u32 classid; u16 queue; u16 cpu; } twice,
        // then u32 circuit, u32 tag (x86: little-endian).
        #[cfg(target_endian = "little")]
        assert_eq!(
            b,
            [0x10, 0, 3, 0, 2, 0, 1, 0, 0x10, 0, 5, 0, 4, 0, 3, 0, 77, 0, 0, 0, 4, 3, 2, 1]
        );
        assert_eq!(CircuitValue::decode(&b), v);
    }

    #[test]
    fn iface_config_round_trips() {
        let c = IfaceConfig {
            role: Role::Stick {
                internet_vlan: 100,
                network_vlan: 200,
            },
            xdp_redirect: true,
            default_minor: 2,
            track_tcp: false,
            down: DefaultQueues {
                queue_base: 0,
                queue_count: 4,
            },
            up: DefaultQueues {
                queue_base: 4,
                queue_count: 4,
            },
        };
        assert_eq!(IfaceConfig::decode(&c.encode()), Some(c));
        assert_eq!(IfaceConfig::decode(&[0; 16]), None);
    }

    #[test]
    fn rtt_buckets_are_quarter_octaves_from_100_us() {
        assert_eq!(rtt_bucket_of(0), 0);
        assert_eq!(rtt_bucket_of(99_999), 0);
        assert_eq!(rtt_bucket_of(100_000), 1);
        // 2^(1/4) * 100 µs = 118.92 µs.
        assert_eq!(rtt_bucket_of(118_920), 1);
        assert_eq!(rtt_bucket_of(118_930), 2);
        assert_eq!(rtt_bucket_of(200_000), 5);
        assert_eq!(rtt_bucket_of(40_000_000), 35);
        assert_eq!(rtt_bucket_of(11_000_000_000), 67);
        assert_eq!(rtt_bucket_of(11_100_000_000), 68);
        assert_eq!(rtt_bucket_of(u64::MAX), 68);
        // Every bucket's bounds hold what the programs put there (to 16
        // bits of the mantissa: within 1/65536 of a bound either may do).
        for k in 1..RTT_BUCKETS - 1 {
            let lo = (rtt_bucket_lower(k) * 1e9 * (1.0 + 1e-4)) as u64;
            let hi = (rtt_bucket_upper(k) * 1e9 * (1.0 - 1e-4)) as u64;
            assert_eq!((rtt_bucket_of(lo), rtt_bucket_of(hi)), (k, k), "{k}");
        }
        assert!((rtt_bucket_upper(67) - 11.0218).abs() < 1e-3);
        assert!(rtt_bucket_upper(68).is_infinite());
    }

    #[test]
    fn tcp_circuit_round_trips_in_the_c_layout() {
        assert_eq!(TcpCircuit::SIZE, 1248);
        let mut c = TcpCircuit {
            retransmits: [3, 4],
            flows: 9,
            unmeasured: 2,
            ..TcpCircuit::default()
        };
        c.rtt[1][0].count = 5;
        c.rtt[1][0].sum_ns = 77;
        c.rtt[1][0].buckets[68] = 5;
        let b = c.encode();
        // rtt[2] (upload, subscriber) starts at 2 * 296.
        assert_eq!(b[592], 5);
        assert_eq!(b[592 + 16 + 4 * 68], 5);
        assert_eq!(b[1184], 3);
        assert_eq!(TcpCircuit::decode(&b), c);
        assert_eq!(c.hist(true, Side::Subscriber).count, 5);
        let k = TcpKey {
            classid: 0x0003_0010,
            tag: circuit_tag("c1"),
        };
        assert_eq!(TcpKey::decode(&k.encode()), k);
    }

    #[test]
    fn circuit_tags_are_fnv1a() {
        // FNV-1a 32 test vectors.
        assert_eq!(circuit_tag(""), 0x811c_9dc5);
        assert_eq!(circuit_tag("a"), 0xe40c_292c);
        assert_eq!(circuit_tag("foobar"), 0xbf9c_f968);
    }

    #[test]
    fn ipv4_is_keyed_as_mapped_ipv6() {
        let a: IpAddr = "100.64.1.7".parse().unwrap();
        let b = addr_bytes(a);
        assert_eq!(&b[..12], &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]);
        assert_eq!(addr_from_bytes(b), a);
        let v6: IpAddr = "2001:db8::1".parse().unwrap();
        assert_eq!(addr_from_bytes(addr_bytes(v6)), v6);
    }
}
