//! Shared by the integration tests: skipping without root, a data path
//! loaded into a private bpffs.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr, UdpSocket};

use lqos_bpf::loader::DataPath;
use lqos_bpf::maps::Maps;
use lqos_bpf::sys::{enter_netns, PrivateBpffs};

/// True when the test can load BPF programs (root). Otherwise prints why
/// it skips, or panics under `LQOS_REQUIRE_NETNS=1` (CI).
pub fn require_root(test: &str) -> bool {
    if nix::unistd::geteuid().is_root() {
        return true;
    }
    if std::env::var("LQOS_REQUIRE_NETNS").as_deref() == Ok("1") {
        panic!("{test}: needs root (LQOS_REQUIRE_NETNS=1)");
    }
    eprintln!("skipping {test}: loading BPF programs needs root");
    false
}

/// A data path loaded into a bpffs private to this test's thread.
pub struct Loaded {
    pub dp: DataPath,
    pub maps: Maps,
    pub bpffs: PrivateBpffs,
}

pub fn load(tag: &str) -> Loaded {
    let bpffs = PrivateBpffs::new(tag).expect("private bpffs");
    let dp = DataPath::load(bpffs.path()).unwrap_or_else(|e| panic!("{e}\n{e:?}"));
    let maps = dp.maps().expect("maps");
    Loaded { dp, maps, bpffs }
}

/// A network namespace deleted on drop.
pub struct Ns {
    pub name: String,
}

impl Ns {
    pub fn new(tag: &str) -> Ns {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static SEQ: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "lqos-bpf-{}-{}-{tag}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        sh("ip", &["netns", "add", &name]);
        let ns = Ns { name };
        ns.ip(&["link", "set", "lo", "up"]);
        ns
    }

    pub fn ip(&self, args: &[&str]) -> String {
        let mut a = vec!["-n", self.name.as_str()];
        a.extend_from_slice(args);
        sh("ip", &a)
    }

    pub fn tc(&self, args: &[&str]) -> String {
        let mut a = vec!["-n", self.name.as_str()];
        a.extend_from_slice(args);
        sh("tc", &a)
    }

    pub fn sysctl(&self, kv: &str) {
        sh("ip", &["netns", "exec", &self.name, "sysctl", "-qw", kv]);
    }
}

impl Drop for Ns {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// Runs a command, panicking with its stderr when it fails.
pub fn sh(cmd: &str, args: &[&str]) -> String {
    let out = std::process::Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{cmd}: {e}"));
    assert!(
        out.status.success(),
        "{cmd} {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// True when namespaces and `ip`/`tc` are usable (root); prints a skip
/// message otherwise, or panics under `LQOS_REQUIRE_NETNS=1`.
pub fn require_netns(test: &str) -> bool {
    if !require_root(test) {
        return false;
    }
    let ok = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .is_ok_and(|o| o.status.success())
        && std::process::Command::new("tc").arg("-V").output().is_ok();
    if ok {
        return true;
    }
    if std::env::var("LQOS_REQUIRE_NETNS").as_deref() == Ok("1") {
        panic!("{test}: needs ip and tc (iproute2) (LQOS_REQUIRE_NETNS=1)");
    }
    eprintln!("skipping {test}: needs ip and tc (iproute2)");
    false
}

/// Packets per class of `dev`: `tc -s class show` (text: iproute2 6.1
/// prints no JSON for HTB classes).
pub fn class_packets(ns: &Ns, dev: &str) -> BTreeMap<String, u64> {
    let text = ns.tc(&["-s", "class", "show", "dev", dev]);
    let mut out = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        if w.first() == Some(&"class") && w.get(1) == Some(&"htb") {
            current = w.get(2).map(|s| s.to_string());
        } else if w.first() == Some(&"Sent") {
            if let (Some(c), Some(p)) = (current.take(), w.get(3)) {
                out.insert(c, p.parse().unwrap_or(0));
            }
        }
    }
    out
}

/// [`class_packets`] of `dev` once `done` holds for them, or after 5 s
/// (the last read then): packets redirected through XDP's cpumap, or
/// waiting for a neighbour, reach the classes late on a loaded machine.
pub fn class_packets_when(
    ns: &Ns,
    dev: &str,
    done: impl Fn(&BTreeMap<String, u64>) -> bool,
) -> BTreeMap<String, u64> {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let now = class_packets(ns, dev);
        if done(&now) || std::time::Instant::now() > until {
            return now;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

pub fn delta(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>, class: &str) -> u64 {
    after.get(class).copied().unwrap_or(0) - before.get(class).copied().unwrap_or(0)
}

pub fn default_delta(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>) -> u64 {
    after
        .iter()
        .filter(|(k, _)| k.ends_with(":2"))
        .map(|(k, v)| v - before.get(k).copied().unwrap_or(0))
        .sum()
}

/// Sends `n` UDP datagrams from `src` to `dst` inside namespace `ns`.
pub fn send(ns: &Ns, src: &str, dst: &str, n: usize) {
    let (src, dst): (IpAddr, IpAddr) = (src.parse().unwrap(), dst.parse().unwrap());
    let name = ns.name.clone();
    std::thread::spawn(move || {
        enter_netns(&name).unwrap();
        let s = UdpSocket::bind(SocketAddr::new(src, 0)).unwrap();
        for _ in 0..n {
            s.send_to(&[0u8; 64], SocketAddr::new(dst, 9)).unwrap();
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    })
    .join()
    .unwrap();
    // Let the shaper's queues drain (counters are updated on dequeue).
    std::thread::sleep(std::time::Duration::from_millis(200));
}

/// An mq root with an HTB per TX queue (`default 2`): on each, top class
/// `:1` at `top`, default class `:2`, and `classes` circuit classes
/// `:10`, `:11`, ... at 10 Mbit/s up to `top`.
pub fn shaping_tree(ns: &Ns, dev: &str, queues: u16, classes: u32, top: &str) {
    ns.tc(&["qdisc", "add", "dev", dev, "root", "handle", "7fff:", "mq"]);
    for q in 1..=queues {
        let m = format!("{q}:");
        let parent = format!("{q}:1");
        ns.tc(&[
            "qdisc",
            "add",
            "dev",
            dev,
            "parent",
            &format!("7fff:{q}"),
            "handle",
            &m,
            "htb",
            "default",
            "2",
        ]);
        ns.tc(&[
            "class", "add", "dev", dev, "parent", &m, "classid", &parent, "htb", "rate", top,
        ]);
        for minor in std::iter::once(2).chain(0x10..0x10 + classes) {
            let id = format!("{q}:{minor:x}");
            ns.tc(&[
                "class", "add", "dev", dev, "parent", &parent, "classid", &id, "htb", "rate",
                "10mbit", "ceil", top,
            ]);
        }
    }
}

pub struct Topo {
    pub inet: Ns,
    pub shaper: Ns,
    pub sub: Ns,
}

/// internet (i0: 198.51.100.1, 2001:db8:ffff::1) -- ens20 [shaper,
/// forwarding] ens19 (`shaper_sub` addresses) -- s0 (`sub_addrs`) subscriber;
/// both veth pairs with `queues` TX queues. The internet namespace routes
/// `sub_nets` through the shaper; the subscriber's default route is the
/// shaper's first address of each family.
pub fn topology(queues: u16, shaper_sub: &[&str], sub_addrs: &[&str], sub_nets: &[&str]) -> Topo {
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
            &ns.name,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
        ]);
    }
    shaper.sysctl("net.ipv4.ip_forward=1");
    shaper.sysctl("net.ipv6.conf.all.forwarding=1");
    shaper.sysctl("net.ipv4.conf.all.rp_filter=0");
    for (ns, dev, addrs) in [
        (
            &shaper,
            "ens20",
            &["198.51.100.254/24", "2001:db8:ffff::fe/64"][..],
        ),
        (&shaper, "ens19", shaper_sub),
        (&inet, "i0", &["198.51.100.1/24", "2001:db8:ffff::1/64"][..]),
        (&sub, "s0", sub_addrs),
    ] {
        for a in addrs {
            let mut args = vec!["addr", "add", a, "dev", dev];
            if a.contains(':') {
                args.push("nodad");
            }
            ns.ip(&args);
        }
        ns.ip(&["link", "set", dev, "up"]);
    }
    for net in sub_nets {
        let via = if net.contains(':') {
            "2001:db8:ffff::fe"
        } else {
            "198.51.100.254"
        };
        inet.ip(&["route", "add", net, "via", via]);
    }
    for a in shaper_sub {
        let gw = a.split('/').next().unwrap();
        sub.ip(&["route", "add", "default", "via", gw]);
    }
    Topo { inet, shaper, sub }
}

/// The shaper's two sides: `ens19` facing the subscribers, `ens20` the
/// internet, `queues` TX queues each.
pub fn bridge_interfaces(queues: u16) -> [lqos_bpf::attach::Interface; 2] {
    use lqos_bpf::layout::{IfaceConfig, Role};
    let side = |name: &str, role| lqos_bpf::attach::Interface {
        name: name.into(),
        config: IfaceConfig::bridge(role, queues),
    };
    [
        side("ens19", Role::Subscriber),
        side("ens20", Role::Internet),
    ]
}
