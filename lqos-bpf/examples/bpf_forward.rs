//! Forwarding rate through a shaper namespace with no classifier, with
//! lqos's tc program alone, with tc + XDP steering (XDP native, then
//! generic, same run), and (where the kernel
//! has cls_flower and act_skbedit: the lab) with one `flower` + `skbedit`
//! filter per address (root). With lqos's programs it also prints, per TX
//! queue, the packets each CPU's tc program put on it (with steering:
//! every queue's packets handled by the CPU that owns it). Builds
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

/// Adds (or with `add` false removes) one egress `flower` filter per
/// target on `ens19`, steering it to the queue and class the maps give it;
/// false when the kernel refuses them.
fn flower_filters(shaper: &Ns, targets: &[Ipv4Addr], queues: u16, add: bool) -> bool {
    let tc = |args: &[&str]| {
        std::process::Command::new("tc")
            .args(["-n", &shaper.name])
            .args(args)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !add {
        tc(&["filter", "del", "dev", "ens19", "egress", "pref", "1000"]);
        return true;
    }
    if !tc(&["qdisc", "replace", "dev", "ens19", "clsact"]) {
        return false;
    }
    for (i, t) in targets.iter().enumerate() {
        let qn = (i as u16) % queues;
        let ok = tc(&[
            "filter",
            "add",
            "dev",
            "ens19",
            "egress",
            "pref",
            "1000",
            "protocol",
            "ip",
            "flower",
            "dst_ip",
            &t.to_string(),
            "action",
            "skbedit",
            "queue_mapping",
            &qn.to_string(),
            "priority",
            &format!("{:x}:{:x}", qn + 1, 0x10 + i),
        ]);
        if !ok {
            tc(&["filter", "del", "dev", "ens19", "egress", "pref", "1000"]);
            return false;
        }
    }
    true
}

/// Per TX queue: the packets each CPU's tc program put on it, and the
/// share handled by the CPU that owns the queue.
fn queue_cpus(dp: &DataPath, queues: u16) {
    let maps = dp.maps().unwrap();
    let cpus = lqos_bpf::plan::CpuPolicy::online().unwrap();
    let (mut all, mut own) = (0u64, 0u64);
    for q in 0..u32::from(queues) {
        let per = maps.queue_packets(false, q).unwrap();
        let owner = usize::from(cpus.cpu_of(q));
        let line: Vec<String> = per
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(c, n)| format!("CPU {c}: {n}"))
            .collect();
        all += per.iter().sum::<u64>();
        own += per.get(owner).copied().unwrap_or(0);
        println!("    queue {q} (owned by CPU {owner}): {}", line.join(", "));
    }
    println!(
        "    {:.2}% of the queues' packets handled by the CPU that owns the queue",
        own as f64 * 100.0 / all.max(1) as f64
    );
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
            cpu: lqos_bpf::plan::CpuPolicy::online()
                .unwrap()
                .cpu_of(u32::from(qn)),
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
    let flower = flower_filters(&shaper, &targets, queues, true);
    if flower {
        flower_filters(&shaper, &targets, queues, false);
    } else {
        eprintln!("flower: not measured (this kernel has no cls_flower or act_skbedit)");
    }
    let modes: &[&str] = if flower {
        &["none", "tc", "tc+xdp", "tc+xdp-generic", "flower"]
    } else {
        &["none", "tc", "tc+xdp", "tc+xdp-generic"]
    };
    for r in 0..rounds {
        for &mode in modes {
            if mode == "flower" {
                flower_filters(&shaper, &targets, queues, true);
            }
            let pin = bpffs.path().join(format!("r{r}-{mode}"));
            let mut dp = None;
            if mode != "none" && mode != "flower" {
                let mut d = DataPath::load(&pin).unwrap();
                d.maps().unwrap().sync(&want).unwrap();
                let mut opts = AttachOptions::default();
                opts.xdp = match mode {
                    "tc" => XdpChoice::Off,
                    "tc+xdp-generic" => XdpChoice::Generic,
                    _ => XdpChoice::Auto,
                };
                opts.disable_xps = true;
                opts.cpus = lqos_bpf::sys::online_cpus().unwrap();
                let rep = in_netns(Some(&shaper.name), || d.attach(&ifs, &opts)).unwrap();
                if mode.starts_with("tc+xdp") {
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
            if let Some(d) = &dp {
                queue_cpus(d, queues);
            }
            if dp.is_some() {
                in_netns(Some(&shaper.name), || lqos_bpf::attach::remove_all(&pin)).unwrap();
            }
            if mode == "flower" {
                flower_filters(&shaper, &targets, queues, false);
            }
        }
    }
}
