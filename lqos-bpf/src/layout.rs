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
    /// Every map, in load order.
    pub const ALL: [&str; 9] = [
        HOSTS, NETS, FAST, GLOBAL, IFACES, CPUS, STATS, QUEUES, REDIRECTS,
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
        b
    }

    /// Parses the map's bytes (the reserved flags are ignored).
    pub fn decode(b: &[u8; 24]) -> CircuitValue {
        CircuitValue {
            down: get_steer(&b[0..8]),
            up: get_steer(&b[8..16]),
            circuit: u32_at(b, 16),
        }
    }
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
    /// Download default queues.
    pub down: DefaultQueues,
    /// Upload default queues.
    pub up: DefaultQueues,
}

impl IfaceConfig {
    /// Size in bytes.
    pub const SIZE: usize = 16;

    /// An interface of role `role` with `queues` TX queues for each
    /// direction (both from queue 0, as on a bridge), XDP redirection on,
    /// default classes `:2`.
    pub fn bridge(role: Role, queues: u16) -> IfaceConfig {
        let all = DefaultQueues {
            queue_base: 0,
            queue_count: queues,
        };
        IfaceConfig {
            role,
            xdp_redirect: true,
            default_minor: 2,
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
        b[1] = u8::from(self.xdp_redirect);
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
    }
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
        };
        let b = v.encode();
        // struct lqos_steer { u32 classid; u16 queue; u16 cpu; } twice,
        // then u32 circuit, u32 flags (x86: little-endian).
        #[cfg(target_endian = "little")]
        assert_eq!(
            b,
            [0x10, 0, 3, 0, 2, 0, 1, 0, 0x10, 0, 5, 0, 4, 0, 3, 0, 77, 0, 0, 0, 0, 0, 0, 0]
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
    fn ipv4_is_keyed_as_mapped_ipv6() {
        let a: IpAddr = "100.64.1.7".parse().unwrap();
        let b = addr_bytes(a);
        assert_eq!(&b[..12], &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]);
        assert_eq!(addr_from_bytes(b), a);
        let v6: IpAddr = "2001:db8::1".parse().unwrap();
        assert_eq!(addr_from_bytes(addr_bytes(v6)), v6);
    }
}
