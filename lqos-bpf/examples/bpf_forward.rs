//! Forwarding rate through a shaper namespace with no classifier, with
//! lqos's tc program alone, and with tc + XDP steering (root). Builds
//! internet -- shaper -- subscriber namespaces (veth, `--queues` TX queues,
//! an mq root with an HTB per queue at 10 Gbit/s and 64 circuit classes on
//! each), blasts UDP from the internet namespace to 64 subscriber
//! addresses for `--seconds`, and counts what the subscriber's veth
//! received. The modes alternate `--rounds` times in one run.
//!
//! ```text
//! cargo run --release -p lqos-bpf --example bpf_forward -- [--seconds 3] [--rounds 2] [--queues 2]
//! ```

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use lqos_bpf::attach::{AttachOptions, XdpChoice};
use lqos_bpf::layout::{CircuitValue, Steer};
use lqos_bpf::loader::DataPath;
use lqos_bpf::model::{Entries, MapKey};
use lqos_bpf::sys::{enter_netns, in_netns, PrivateBpffs};

// The namespaces and the shaping tree of the namespace tests.
#[path = "../tests/common/mod.rs"]
mod common;
use common::{bridge_interfaces, sh, shaping_tree, topology, Ns, Topo};

fn rx_packets(ns: &Ns, dev: &str) -> u64 {
    let text = ns.ip(&["-s", "link", "show", "dev", dev]);
    let lines: Vec<&str> = text.lines().collect();
    let i = lines
        .iter()
        .position(|l| l.trim_start().starts_with("RX:"))
        .expect("RX line");
    lines[i + 1]
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn blast(ns: &Ns, secs: f64, targets: &[Ipv4Addr]) {
    let name = ns.name.clone();
    let targets = targets.to_vec();
    std::thread::spawn(move || {
        enter_netns(&name).unwrap();
        let s = UdpSocket::bind("198.51.100.1:0").unwrap();
        let buf = [0u8; 64];
        let end = Instant::now() + Duration::from_secs_f64(secs);
        let mut i = 0usize;
        while Instant::now() < end {
            for _ in 0..256 {
                let t = targets[i % targets.len()];
                let _ = s.send_to(&buf, SocketAddr::new(IpAddr::V4(t), 9));
                i += 1;
            }
        }
    })
    .join()
    .unwrap();
}

fn main() {
    let mut secs = 3.0;
    let mut rounds = 2;
    let mut queues: u16 = 2;
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let v = it.next().expect("value");
        match k.as_str() {
            "--seconds" => secs = v.parse().unwrap(),
            "--rounds" => rounds = v.parse().unwrap(),
            "--queues" => queues = v.parse().unwrap(),
            _ => panic!("unknown option {k}"),
        }
    }
    let Topo { inet, shaper, sub } = topology(
        queues,
        &["100.64.0.254/16"],
        &["100.64.0.1/16"],
        &["100.64.0.0/16"],
    );
    let targets: Vec<Ipv4Addr> = (0..64u32)
        .map(|i| Ipv4Addr::from(0x6440_0100 + i))
        .collect();
    // The subscriber answers ARP for every target address; static
    // neighbours on the shaper avoid resolving them during the blast.
    let mac = sub.ip(&["link", "show", "dev", "s0"]);
    let mac = mac
        .split("link/ether ")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    for t in &targets {
        shaper.ip(&[
            "neigh",
            "replace",
            &t.to_string(),
            "lladdr",
            &mac,
            "dev",
            "ens19",
            "nud",
            "permanent",
        ]);
    }
    shaping_tree(&shaper, "ens19", queues, 64, "10gbit");
    shaping_tree(&shaper, "ens20", queues, 64, "10gbit");
    let bpffs = PrivateBpffs::new("fwd").unwrap();
    let mut want = Entries::default();
    for (i, t) in targets.iter().enumerate() {
        let qn = (i as u16) % queues;
        let s = Steer {
            classid: (u32::from(qn) + 1) << 16 | (0x10 + i as u32),
            queue: qn,
            cpu: qn % 2,
        };
        want.insert(
            MapKey::from_net(ipnet::IpNet::new(IpAddr::V4(*t), 32).unwrap()),
            CircuitValue {
                down: s,
                up: s,
                circuit: i as u32,
                tag: i as u32,
            },
        );
    }
    let ifs = bridge_interfaces(queues);
    println!(
        "# {} {} CPUs, {queues} queues, {secs} s per sample, 64 destinations, 64-byte UDP",
        sh("uname", &["-r"]).trim(),
        lqos_bpf::sys::online_cpus().unwrap().len()
    );
    println!("{:<24} {:>12} {:>14}", "mode", "rx pps", "classified");
    blast(&inet, 0.5, &targets);
    for r in 0..rounds {
        for mode in ["none", "tc", "tc+xdp"] {
            let pin = bpffs.path().join(format!("r{r}-{mode}"));
            let mut dp = None;
            if mode != "none" {
                let mut d = DataPath::load(&pin).unwrap();
                d.maps().unwrap().sync(&want).unwrap();
                let mut opts = AttachOptions::default();
                opts.xdp = if mode == "tc" {
                    XdpChoice::Off
                } else {
                    XdpChoice::Auto
                };
                opts.disable_xps = true;
                opts.cpus = lqos_bpf::sys::online_cpus().unwrap();
                let rep = in_netns(Some(&shaper.name), || d.attach(&ifs, &opts)).unwrap();
                if mode == "tc+xdp" {
                    eprintln!("XDP: {:?}", rep.iter().map(|r| &r.xdp).collect::<Vec<_>>());
                }
                dp = Some(d);
            }
            let before = rx_packets(&sub, "s0");
            let t = Instant::now();
            blast(&inet, secs, &targets);
            std::thread::sleep(Duration::from_millis(100));
            let got = rx_packets(&sub, "s0") - before;
            let pps = got as f64 / t.elapsed().as_secs_f64();
            let classified = dp
                .as_ref()
                .map(|d| d.maps().unwrap().stats().unwrap().tc_classified)
                .unwrap_or(0);
            println!(
                "{:<24} {:>12.0} {:>14}",
                format!("round {r}: {mode}"),
                pps,
                classified
            );
            if dp.is_some() {
                in_netns(Some(&shaper.name), || lqos_bpf::attach::remove_all(&pin)).unwrap();
            }
        }
    }
}
