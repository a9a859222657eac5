//! Micro-benchmarks of the data path (root; a private bpffs, nothing
//! attached to any interface):
//!
//! - ns per packet of both programs (`BPF_PROG_TEST_RUN`, mean of
//!   `--repeat` runs spread over 16 different frames) with the maps
//!   holding N addresses: half IPv4 /32 (exact-match map), half IPv6 /56
//!   (LPM trie); frames to an IPv4 host, into an IPv6 /56, to an IPv6
//!   /128 host, and to unknown addresses of both families;
//! - the maps' kernel memory at N (`memlock` of each map's fdinfo);
//! - loading a generated network of `--circuits` circuits (lqos-tc plan ->
//!   entries -> maps by difference, cold) and one edit (one entry moved to
//!   another circuit: the write alone, and a diff of the whole set).
//!
//! ```text
//! cargo run --release -p lqos-bpf --example bpf_bench -- \
//!     [--sizes 1000,100000,1000000] [--repeat 1000000] [--circuits 100000] [--object FILE.o]
//! ```

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

use lqos_bpf::layout::addr_bytes;
use lqos_bpf::layout::{CircuitValue, IfaceConfig, Role, Steer};
use lqos_bpf::model::{diff, Entries, MapKey};
use lqos_bpf::packet::Frame;
use lqos_bpf::plan::CpuPolicy;
use lqos_bpf::sys::PrivateBpffs;
use lqos_bpf::testrun::{run_tc, run_xdp};
use lqos_bpf::{DataPath, Maps};

/// A kind of frame: its name and the (source, destination) of frame k.
type Case = (&'static str, Box<dyn Fn(u32) -> (IpAddr, IpAddr)>);

struct Args {
    sizes: Vec<usize>,
    repeat: u32,
    circuits: usize,
    object: Option<Vec<u8>>,
}

fn args() -> Args {
    let mut a = Args {
        sizes: vec![1_000, 100_000, 1_000_000],
        repeat: 1_000_000,
        circuits: 100_000,
        object: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let v = it.next().unwrap_or_else(|| panic!("{k} needs a value"));
        match k.as_str() {
            "--sizes" => a.sizes = v.split(',').map(|s| s.parse().expect("size")).collect(),
            "--repeat" => a.repeat = v.parse().expect("repeat"),
            "--circuits" => a.circuits = v.parse().expect("circuits"),
            "--object" => a.object = Some(std::fs::read(&v).expect("object")),
            _ => panic!("unknown option {k}"),
        }
    }
    a
}

fn value(i: u32) -> CircuitValue {
    let q = (i % 4) as u16;
    let s = Steer {
        classid: (u32::from(q) + 1) << 16 | (0x10 + (i % 60000)),
        queue: q,
        cpu: q % 2,
    };
    CircuitValue {
        down: s,
        up: s,
        circuit: i,
        tag: i,
    }
}

/// IPv4 host `i` (from 100.64.0.0) and IPv6 /56 `i` (from 2001:db8::/32).
fn v4(i: u32) -> Ipv4Addr {
    Ipv4Addr::from(0x6440_0000 + i)
}
fn v6_56(i: u32) -> Ipv6Addr {
    Ipv6Addr::from(0x2001_0db8_u128 << 96 | u128::from(i) << 72)
}

fn load(dp_dir: &std::path::Path, object: &Option<Vec<u8>>) -> DataPath {
    match object {
        Some(o) => DataPath::load_object(dp_dir, o),
        None => DataPath::load(dp_dir),
    }
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Mean ns per packet of tc (subscriber side: download keyed by the
/// destination) and XDP (internet side, likewise) over 16 frames of `case`.
fn ns_per_packet(
    dp: &DataPath,
    maps: &mut Maps,
    case: &dyn Fn(u32) -> (IpAddr, IpAddr),
    repeat: u32,
    sub: &IfaceConfig,
    inet: &IfaceConfig,
) -> (f64, f64) {
    let frames: Vec<Vec<u8>> = (0..16)
        .map(|k| {
            let (s, d) = case(k);
            Frame::udp(s, d).build()
        })
        .collect();
    let per = (repeat / 16).max(1);
    let (mut tc, mut xdp) = (Duration::ZERO, Duration::ZERO);
    maps.set_iface(1, sub).unwrap();
    for fr in &frames {
        tc += run_tc(dp.tc(), fr, 1, per).unwrap().per_run;
    }
    maps.set_iface(1, inet).unwrap();
    for fr in &frames {
        xdp += run_xdp(dp.xdp(), fr, 1, per).unwrap().per_run;
    }
    (tc.as_nanos() as f64 / 16.0, xdp.as_nanos() as f64 / 16.0)
}

fn print_memlock(maps: &Maps) {
    let mem = maps.memlock().unwrap();
    let total: u64 = mem.iter().map(|(_, b)| b).sum();
    println!(
        "memlock: {} (total {:.1} MiB)",
        mem.iter()
            .filter(|(_, b)| *b >= 1 << 20)
            .map(|(k, b)| format!("{k} {:.1} MiB", *b as f64 / 1048576.0))
            .collect::<Vec<_>>()
            .join(", "),
        total as f64 / 1048576.0
    );
}

fn main() {
    let a = args();
    let bpffs = PrivateBpffs::new("bench").expect("a private bpffs (run as root)");
    println!(
        "object: {}",
        if a.object.is_some() {
            "--object"
        } else {
            "embedded"
        }
    );
    for &n in &a.sizes {
        let dir = bpffs.path().join(format!("n{n}"));
        let dp = load(&dir, &a.object);
        let mut maps = dp.maps().unwrap();
        let cfg = IfaceConfig::bridge(Role::Subscriber, 4);
        let mut inet = cfg;
        inet.role = Role::Internet;
        for cpu in lqos_bpf::sys::online_cpus().unwrap() {
            maps.enable_cpu(cpu, 2048).unwrap();
        }
        let half = (n / 2) as u32;
        let mut logical = Entries::with_capacity(n + 16);
        for i in 0..half {
            logical.insert(MapKey::Host(addr_bytes(IpAddr::V4(v4(i)))), value(i));
            logical.insert(
                MapKey::from_net(ipnet::IpNet::new(IpAddr::V6(v6_56(i)), 56).unwrap()),
                value(half + i),
            );
        }
        // Some IPv6 hosts for the /128 case.
        for i in 0..16u32 {
            let a6 = Ipv6Addr::from(0x2001_0db9_u128 << 96 | u128::from(i));
            logical.insert(MapKey::Host(addr_bytes(IpAddr::V6(a6))), value(i));
        }
        let mut placed = logical.clone();
        placed.place();
        let t = Instant::now();
        maps.sync(&placed).unwrap();
        let fill = t.elapsed();
        println!(
            "\n== {n} addresses ({half} IPv4 /32 + {half} IPv6 /56; {} prefixes in the fast map), filled in {fill:.2?}",
            placed.fast_count()
        );
        let peer4: IpAddr = "198.51.100.1".parse().unwrap();
        let peer6: IpAddr = "2001:db8:ffff::1".parse().unwrap();
        let step = (half / 16).max(1);
        let cases: [Case; 5] = [
            (
                "IPv4 /32 host",
                Box::new(move |k| (peer4, IpAddr::V4(v4((k * step) % half.max(1))))),
            ),
            (
                "IPv6 in a /56",
                Box::new(move |k| {
                    let base = v6_56((k * step) % half.max(1));
                    (peer6, IpAddr::V6(Ipv6Addr::from(u128::from(base) | 0x1234)))
                }),
            ),
            (
                "IPv6 /128 host",
                Box::new(move |k| {
                    (
                        peer6,
                        IpAddr::V6(Ipv6Addr::from(0x2001_0db9_u128 << 96 | u128::from(k))),
                    )
                }),
            ),
            (
                "IPv4 unknown",
                Box::new(move |k| (peer4, IpAddr::V4(Ipv4Addr::new(100, 127, 250, k as u8)))),
            ),
            (
                "IPv6 unknown",
                Box::new(move |k| {
                    (
                        peer6,
                        IpAddr::V6(Ipv6Addr::from(0x2001_0dba_u128 << 96 | u128::from(k))),
                    )
                }),
            ),
        ];
        println!("{:<28} {:>10} {:>10}", "frame", "tc ns/pkt", "xdp ns/pkt");
        for (what, f) in &cases {
            let (tc, xdp) = ns_per_packet(&dp, &mut maps, f, a.repeat, &cfg, &inet);
            println!("{what:<28} {tc:>10.1} {xdp:>10.1}");
        }
        print_memlock(&maps);
        // The same /56 prefixes in the LPM trie instead (as without the
        // fast map), same run.
        maps.sync(&logical).unwrap();
        let (tc, xdp) = ns_per_packet(&dp, &mut maps, &cases[1].1, a.repeat, &cfg, &inet);
        println!("{:<28} {tc:>10.1} {xdp:>10.1}", "IPv6 in a /56, LPM trie");
        print_memlock(&maps);
        drop(maps);
        drop(dp);
        lqos_bpf::attach::remove_all(&dir).unwrap();
    }

    if a.circuits > 0 {
        let g = lqos_model::generate(&lqos_model::GenParams {
            circuits: a.circuits,
            ..Default::default()
        });
        let mut cfg = lqos_tc::PlanConfig::bridge("ens19", "ens20", 4);
        cfg.default_sqm = lqos_tc::LeafSpec::None;
        let plan = lqos_tc::plan(&g.network, &cfg, None).unwrap();
        let cpus = CpuPolicy::new(vec![0, 1]);
        let dir = bpffs.path().join("load");
        let dp = load(&dir, &a.object);
        let mut maps = Maps::open(dp.pin_dir()).unwrap();
        let t = Instant::now();
        let want = lqos_bpf::plan::entries(&plan, &cpus).unwrap();
        let t_entries = t.elapsed();
        let n = maps.sync(&want).unwrap();
        let t_all = t.elapsed();
        println!(
            "\n== cold load: {} circuits, {} addresses ({} hosts, {} prefixes): {:.1?} (entries from the plan {:.1?}, maps {:.1?})",
            a.circuits,
            n.written,
            want.counts().0,
            want.counts().1,
            t_all,
            t_entries,
            t_all - t_entries
        );
        // One edit: a /32 moves to another circuit.
        let (key, v) = want
            .iter()
            .find(|(k, _)| matches!(k, MapKey::Host(_)))
            .map(|(k, v)| (*k, *v))
            .unwrap();
        let mut moved = v;
        moved.circuit ^= 1;
        moved.down.classid ^= 1;
        let mut times = Vec::with_capacity(1000);
        for i in 0..1000 {
            let val = if i % 2 == 0 { moved } else { v };
            let t = Instant::now();
            maps.write(&key, &val).unwrap();
            times.push(t.elapsed());
        }
        times.sort();
        let mut edited = want.clone();
        edited.insert(key, moved);
        let t = Instant::now();
        let d = diff(&want, &edited);
        let t_diff = t.elapsed();
        maps.apply(&d).unwrap();
        println!(
            "one edit: map write median {:.1?} (p99 {:.1?}, 1000 writes); a diff of the whole {} entries in memory {:.1?}",
            times[500],
            times[990],
            want.len(),
            t_diff
        );
        // The daemon's path: MapSync edits of one circuit's addresses (a
        // /32 and a prefix moving to another circuit and back).
        let mut sync = lqos_bpf::MapSync::open(dp.pin_dir()).unwrap();
        let t = Instant::now();
        let _ = lqos_bpf::MapSync::open(dp.pin_dir()).unwrap();
        let t_open = t.elapsed();
        let pfx = want
            .iter()
            .find(|(k, _)| !matches!(k, MapKey::Host(_)))
            .map(|(k, v)| (k.net(), *v))
            .unwrap();
        let host = (key.net(), v);
        for (what, (net, val)) in [("a /32", host), ("a prefix", pfx)] {
            let mut other = val;
            other.circuit ^= 1;
            other.down.classid ^= 1;
            let mut times = Vec::with_capacity(1000);
            for i in 0..1000 {
                let x = if i % 2 == 0 { other } else { val };
                let t = Instant::now();
                sync.set(&[(net, Some(x))]).unwrap();
                times.push(t.elapsed());
            }
            times.sort();
            println!(
                "one edit through MapSync::set ({what} moved): median {:.1?} (p99 {:.1?}, 1000 edits)",
                times[500], times[990]
            );
        }
        println!(
            "MapSync::open at {} entries (read back and index): {t_open:.1?}",
            want.len()
        );
        let mem = maps.memlock().unwrap();
        let total: u64 = mem.iter().map(|(_, b)| b).sum();
        println!(
            "memlock at {} addresses: {:.1} MiB",
            want.len(),
            total as f64 / 1048576.0
        );
        drop(maps);
        drop(dp);
        lqos_bpf::attach::remove_all(&dir).unwrap();
    }
}
