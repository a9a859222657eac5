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
use std::process::Command;
use std::time::{Duration, Instant};

use lqos_bpf::attach::{AttachOptions, Interface, XdpChoice};
use lqos_bpf::layout::{CircuitValue, DefaultQueues, IfaceConfig, Role, Steer};
use lqos_bpf::model::{Entries, MapKey};
use lqos_bpf::sys::{enter_netns, in_netns, PrivateBpffs};
use lqos_bpf::DataPath;

fn sh(args: &[&str]) -> String {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .expect(args[0]);
    assert!(
        out.status.success(),
        "{}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

struct Ns(String);

impl Ns {
    fn new(tag: &str) -> Ns {
        let n = format!("lqos-fwd-{}-{tag}", std::process::id());
        sh(&["ip", "netns", "add", &n]);
        sh(&["ip", "-n", &n, "link", "set", "lo", "up"]);
        Ns(n)
    }
    fn ip(&self, a: &[&str]) -> String {
        let mut v = vec!["ip", "-n", self.0.as_str()];
        v.extend_from_slice(a);
        sh(&v)
    }
    fn tc(&self, a: &[&str]) -> String {
        let mut v = vec!["tc", "-n", self.0.as_str()];
        v.extend_from_slice(a);
        sh(&v)
    }
}

impl Drop for Ns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

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
    let name = ns.0.clone();
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
    let inet = Ns::new("inet");
    let shaper = Ns::new("shaper");
    let sub = Ns::new("sub");
    let q = queues.to_string();
    for (dev, peer, ns) in [("ens20", "i0", &inet), ("ens19", "s0", &sub)] {
        shaper.ip(&[
            "link",
            "add",
            dev,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
            "type",
            "veth",
            "peer",
            "name",
            peer,
            "netns",
            &ns.0,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
        ]);
    }
    sh(&[
        "ip",
        "netns",
        "exec",
        &shaper.0,
        "sysctl",
        "-qw",
        "net.ipv4.ip_forward=1",
    ]);
    shaper.ip(&["addr", "add", "198.51.100.254/24", "dev", "ens20"]);
    shaper.ip(&["addr", "add", "100.64.0.254/16", "dev", "ens19"]);
    inet.ip(&["addr", "add", "198.51.100.1/24", "dev", "i0"]);
    sub.ip(&["addr", "add", "100.64.0.1/16", "dev", "s0"]);
    for (ns, dev) in [
        (&shaper, "ens20"),
        (&shaper, "ens19"),
        (&inet, "i0"),
        (&sub, "s0"),
    ] {
        ns.ip(&["link", "set", dev, "up"]);
    }
    inet.ip(&["route", "add", "100.64.0.0/16", "via", "198.51.100.254"]);
    sub.ip(&["route", "add", "default", "via", "100.64.0.254"]);
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
    let ifb = |dev: &str| {
        shaper.tc(&["qdisc", "add", "dev", dev, "root", "handle", "7fff:", "mq"]);
        for qq in 1..=queues {
            let m = format!("{qq}:");
            shaper.tc(&[
                "qdisc",
                "add",
                "dev",
                dev,
                "parent",
                &format!("7fff:{qq}"),
                "handle",
                &m,
                "htb",
                "default",
                "2",
            ]);
            shaper.tc(&[
                "class",
                "add",
                "dev",
                dev,
                "parent",
                &m,
                "classid",
                &format!("{qq}:1"),
                "htb",
                "rate",
                "10gbit",
            ]);
            shaper.tc(&[
                "class",
                "add",
                "dev",
                dev,
                "parent",
                &format!("{qq}:1"),
                "classid",
                &format!("{qq}:2"),
                "htb",
                "rate",
                "1gbit",
                "ceil",
                "10gbit",
            ]);
            for c in 0..64u32 {
                shaper.tc(&[
                    "class",
                    "add",
                    "dev",
                    dev,
                    "parent",
                    &format!("{qq}:1"),
                    "classid",
                    &format!("{qq}:{:x}", 0x10 + c),
                    "htb",
                    "rate",
                    "100mbit",
                    "ceil",
                    "10gbit",
                ]);
            }
        }
    };
    ifb("ens19");
    ifb("ens20");
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
            },
        );
    }
    let side = |role| IfaceConfig {
        role,
        xdp_redirect: true,
        default_minor: 2,
        down: DefaultQueues {
            queue_base: 0,
            queue_count: queues,
        },
        up: DefaultQueues {
            queue_base: 0,
            queue_count: queues,
        },
    };
    let ifs = [
        Interface {
            name: "ens19".into(),
            config: side(Role::Subscriber),
        },
        Interface {
            name: "ens20".into(),
            config: side(Role::Internet),
        },
    ];
    println!(
        "# {} {} CPUs, {queues} queues, {secs} s per sample, 64 destinations, 64-byte UDP",
        sh(&["uname", "-r"]).trim(),
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
                let opts = AttachOptions {
                    xdp: if mode == "tc" {
                        XdpChoice::Off
                    } else {
                        XdpChoice::Auto
                    },
                    disable_xps: true,
                    cpus: lqos_bpf::sys::online_cpus().unwrap(),
                };
                let rep = in_netns(Some(&shaper.0), || d.attach(&ifs, &opts)).unwrap();
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
                in_netns(Some(&shaper.0), || lqos_bpf::attach::remove_all(&pin)).unwrap();
            }
        }
    }
}
