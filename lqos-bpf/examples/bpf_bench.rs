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
//!   another circuit: the write alone, and a diff of the whole set);
//! - the TCP tracking's cost at `--tcp-flows` active flows over 10,000
//!   circuits: ns per packet of the tc program with tracking off (the
//!   classifier alone) and on, on the same frames in one run, for an ACK
//!   and a data segment of an established flow, a data segment with a new
//!   TSval and the ACK that echoes it (a sample), and a new flow's SYN;
//!   then the read of every circuit's statistics (the statistics poll's
//!   part) and the maps' memory.
//!
//! ```text
//! cargo run --release -p lqos-bpf --example bpf_bench -- \
//!     [--sizes 1000,100000,1000000] [--repeat 1000000] [--circuits 100000] \
//!     [--tcp-flows 100000] [--object FILE.o]
//! ```

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

use lqos_bpf::layout::addr_bytes;
use lqos_bpf::layout::{CircuitValue, IfaceConfig, Role, Steer};
use lqos_bpf::loader::DataPath;
use lqos_bpf::maps::Maps;
use lqos_bpf::model::{diff, Entries, MapKey};
use lqos_bpf::packet::Frame;
use lqos_bpf::plan::CpuPolicy;
use lqos_bpf::sys::PrivateBpffs;
use lqos_bpf::testrun::{run_tc, run_xdp};

/// A kind of frame: its name and the (source, destination) of frame k.
type Case = (&'static str, Box<dyn Fn(u32) -> (IpAddr, IpAddr)>);

struct Args {
    sizes: Vec<usize>,
    repeat: u32,
    circuits: usize,
    tcp_flows: u32,
    object: Option<Vec<u8>>,
}

fn args() -> Args {
    let mut a = Args {
        sizes: vec![1_000, 100_000, 1_000_000],
        repeat: 1_000_000,
        circuits: 100_000,
        tcp_flows: 100_000,
        object: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let v = it.next().unwrap_or_else(|| panic!("{k} needs a value"));
        match k.as_str() {
            "--sizes" => a.sizes = v.split(',').map(|s| s.parse().expect("size")).collect(),
            "--repeat" => a.repeat = v.parse().expect("repeat"),
            "--circuits" => a.circuits = v.parse().expect("circuits"),
            "--tcp-flows" => a.tcp_flows = v.parse().expect("tcp-flows"),
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
        let g = lqos_model::generate(&lqos_model::GenParams::with_circuits(a.circuits));
        let mut cfg = lqos_tc::PlanConfig::bridge("ens19", "ens20", 4);
        cfg.default_sqm = lqos_tc::config::LeafSpec::None;
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

    if a.tcp_flows > 0 {
        tcp_cost(&bpffs.path().join("tcp"), &a);
    }
}

/// Circuits of the TCP section.
const TCP_CIRCUITS: u32 = 10_000;

/// ns per packet over `frames` (each run `per` times), leaving interface
/// 1 as `cfg`.
fn tc_ns(dp: &DataPath, maps: &mut Maps, cfg: &IfaceConfig, frames: &[Vec<u8>], per: u32) -> f64 {
    maps.set_iface(1, cfg).unwrap();
    let total: Duration = frames
        .iter()
        .map(|f| run_tc(dp.tc(), f, 1, per).unwrap().per_run)
        .sum();
    total.as_nanos() as f64 / frames.len() as f64
}

fn tcp_cost(dir: &std::path::Path, a: &Args) {
    use lqos_bpf::packet::tcp_flags as F;
    let dp = match &a.object {
        Some(o) => DataPath::load_with(dir, o, a.tcp_flows.next_power_of_two() * 2),
        None => DataPath::load_with(
            dir,
            lqos_bpf::loader::OBJECT,
            a.tcp_flows.next_power_of_two() * 2,
        ),
    }
    .unwrap_or_else(|e| panic!("{e}"));
    let mut maps = dp.maps().unwrap();
    let mut want = Entries::with_capacity(TCP_CIRCUITS as usize);
    for i in 0..TCP_CIRCUITS {
        want.insert(MapKey::Host(addr_bytes(IpAddr::V4(v4(i)))), value(i));
    }
    maps.sync(&want).unwrap();
    let on_down = IfaceConfig::bridge(Role::Subscriber, 4);
    let on_up = IfaceConfig::bridge(Role::Internet, 4);
    let off = |c: IfaceConfig| IfaceConfig {
        track_tcp: false,
        ..c
    };
    let peer: IpAddr = "198.51.100.1".parse().unwrap();
    // Flow i: subscriber v4(i % circuits), port 10000 + i / circuits.
    let flow = |i: u32| {
        let sub = IpAddr::V4(v4(i % TCP_CIRCUITS));
        let port = 10_000 + (i / TCP_CIRCUITS) as u16;
        (
            Frame::tcp(peer, 443, sub, port),
            Frame::tcp(sub, port, peer, 443),
        )
    };
    // Enter every flow: one data segment each, towards the subscriber.
    let t = Instant::now();
    maps.set_iface(1, &on_down).unwrap();
    for i in 0..a.tcp_flows {
        let f = flow(i).0.seq(1).ts(1000, 1).payload(1000).build();
        run_tc(dp.tc(), &f, 1, 1).unwrap();
    }
    let tcp = lqos_bpf::tcp::TcpMaps::open(dir).unwrap();
    let h = tcp.read().unwrap().health;
    println!(
        "\n== TCP tracking: {} flows over {TCP_CIRCUITS} circuits (flow table {} entries), entered in {:.1?}",
        h.flows_tracked(),
        h.flow_table_size,
        t.elapsed()
    );
    // Frames of 4,096 flows spread over the table (cold in the caches).
    let pick: Vec<u32> = (0..4096u32)
        .map(|k| k.wrapping_mul(2_654_435_761) % a.tcp_flows.max(1))
        .collect();
    let per = (a.repeat / 4096).clamp(1, 64);
    let acks: Vec<Vec<u8>> = pick
        .iter()
        .map(|&i| flow(i).1.seq(1).ack(1001).ts(7, 999).build())
        .collect();
    let data: Vec<Vec<u8>> = pick
        .iter()
        .map(|&i| flow(i).0.seq(1001).ts(1000, 1).payload(1000).build())
        .collect();
    let new_ts: Vec<Vec<u8>> = pick
        .iter()
        .map(|&i| flow(i).0.seq(2001).ts(1001, 1).payload(1000).build())
        .collect();
    let echo: Vec<Vec<u8>> = pick
        .iter()
        .map(|&i| flow(i).1.seq(1).ack(3001).ts(8, 1000).build())
        .collect();
    // Bursts: 8 segments in a row of each flow (after the first, its
    // entry is in the caches).
    let burst: Vec<Vec<u8>> = pick
        .iter()
        .flat_map(|&i| {
            (0..8u32).map(move |j| {
                flow(i)
                    .0
                    .seq(3001 + 1000 * j)
                    .ts(1001, 1)
                    .payload(1000)
                    .build()
            })
        })
        .collect();
    let syn: Vec<Vec<u8>> = (0..4096u32)
        .map(|k| {
            let sub = IpAddr::V4(v4(k % TCP_CIRCUITS));
            Frame::tcp(sub, 60_000 + (k / TCP_CIRCUITS) as u16, peer, 80)
                .flags(F::SYN)
                .seq(1)
                .ts(5, 0)
                .syn_options()
                .build()
        })
        .collect();
    println!(
        "{:<46} {:>11} {:>11} {:>8}",
        "tc program, ns/packet", "classifier", "+tracking", "added"
    );
    let row = |what: &str, off_ns: f64, on_ns: f64| {
        println!(
            "{what:<46} {off_ns:>11.1} {on_ns:>11.1} {:>8.1}",
            on_ns - off_ns
        );
    };
    // Repeated frames leave the state as it is: pure ACKs (no new TSval,
    // an echo of nothing waiting).
    let x = tc_ns(&dp, &mut maps, &off(on_up), &acks, per);
    let y = tc_ns(&dp, &mut maps, &on_up, &acks, per);
    row(&format!("ACK, established flow (x{per})"), x, y);
    // Run once each: the next data segment, then one with a new TSval and
    // its echo (one sample per pair).
    let x = tc_ns(&dp, &mut maps, &off(on_down), &data, 1);
    let y = tc_ns(&dp, &mut maps, &on_down, &data, 1);
    row("data segment, established flow", x, y);
    let x1 = tc_ns(&dp, &mut maps, &off(on_down), &new_ts, 1);
    let x2 = tc_ns(&dp, &mut maps, &off(on_up), &echo, 1);
    let y1 = tc_ns(&dp, &mut maps, &on_down, &new_ts, 1);
    let y2 = tc_ns(&dp, &mut maps, &on_up, &echo, 1);
    row(
        "new TSval + an echo (a sample), per packet",
        (x1 + x2) / 2.0,
        (y1 + y2) / 2.0,
    );
    let x = tc_ns(&dp, &mut maps, &off(on_down), &burst, 1);
    let y = tc_ns(&dp, &mut maps, &on_down, &burst, 1);
    row("data, bursts of 8 segments per flow", x, y);
    // One flow's consecutive segments, once each (as the data row, with
    // the flow's entry in the caches).
    let one: Vec<Vec<u8>> = (0..4096u32)
        .map(|j| {
            flow(pick[0])
                .0
                .seq(100_001 + 1000 * j)
                .ts(1001, 1)
                .payload(1000)
                .build()
        })
        .collect();
    let x = tc_ns(&dp, &mut maps, &off(on_down), &one, 1);
    let y = tc_ns(&dp, &mut maps, &on_down, &one, 1);
    row("data, one flow's consecutive segments", x, y);
    let x = tc_ns(&dp, &mut maps, &off(on_up), &syn, 1);
    let y = tc_ns(&dp, &mut maps, &on_up, &syn, 1);
    row("SYN of a new flow", x, y);
    let mut reads = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let r = tcp.read().unwrap();
        reads.push((t.elapsed(), r.circuits.len()));
    }
    reads.sort();
    println!(
        "read of every circuit's TCP statistics ({} circuits, batched): median {:.1?}",
        reads[2].1, reads[2].0
    );
    let r = tcp.read().unwrap();
    println!(
        "samples {}, flows entered {}, in the table {} (evicted {})",
        r.health.samples,
        r.health.flows_new,
        r.health.flows_tracked(),
        r.health.evictions()
    );
    let mem = maps.memlock().unwrap();
    println!(
        "memlock: {}",
        mem.iter()
            .filter(|(k, _)| k.ends_with("flows") || k.ends_with("tcp"))
            .map(|(k, b)| format!("{k} {:.1} MiB", *b as f64 / 1048576.0))
            .collect::<Vec<_>>()
            .join(", ")
    );
    drop(maps);
    drop(dp);
    lqos_bpf::attach::remove_all(dir).unwrap();
}
