//! A shaper between an internet namespace and a subscriber namespace for
//! the TCP round-trip tests: `lqos apply` loads the tree, lqos's eBPF data
//! path classifies (and tracks TCP), a server in the internet namespace
//! sends to clients in the subscriber namespace.
//!
//! ```text
//! inet (i0 198.51.100.1) -- ens20 [shaper: forwarding, lqos] ens19 -- s0 (100.64.0.7, .8, .9) sub
//! ```
//!
//! Circuits: `near` 100.64.0.7, `far` 100.64.0.8, `nots` 100.64.0.9, each
//! 200 Mbit/s both ways (flows here stay far below: no queue in the
//! shaper). The data path's pins are the shaper namespace's
//! (`NetnsState::bpf_pin_dir`, a name of its own), removed on drop.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use lqos_apply::netns::{unique_name, ScratchNetns};

/// The server's address.
pub const SERVER: &str = "198.51.100.1";
/// Port of the server.
pub const PORT: u16 = 5201;
/// The circuits: id, the subscriber's address.
pub const CIRCUITS: [(&str, &str); 3] = [
    ("near", "100.64.0.7"),
    ("far", "100.64.0.8"),
    ("nots", "100.64.0.9"),
];

/// The address of circuit `id`.
pub fn addr(id: &str) -> IpAddr {
    CIRCUITS
        .iter()
        .find(|(c, _)| *c == id)
        .map(|(_, a)| a.parse().unwrap())
        .unwrap()
}

/// Runs `cmd` inside namespace `ns` (`ip netns exec`), returning stdout.
pub fn exec(ns: &str, cmd: &[&str]) -> String {
    let mut args = vec!["netns", "exec", ns];
    args.extend_from_slice(cmd);
    let out = std::process::Command::new("ip")
        .args(&args)
        .output()
        .expect("ip netns exec");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The three namespaces, the inputs and the loaded data path.
pub struct Shaper {
    pub inet: ScratchNetns,
    pub shaper: ScratchNetns,
    pub sub: ScratchNetns,
    pub dir: tempfile::TempDir,
    pub pin_dir: PathBuf,
}

impl Shaper {
    /// Builds the namespaces, loads the tree with `lqos apply` and installs
    /// the data path (tc only: XDP redirect on veth mangles TCP's partial
    /// checksums, and the round trips are measured by the tc program).
    pub fn new(tag: &str) -> Shaper {
        let inet = ScratchNetns::create(&unique_name("lqos-tcp", &format!("{tag}-i"))).unwrap();
        let shaper = ScratchNetns::create(&unique_name("lqos-tcp", &format!("{tag}-s"))).unwrap();
        let sub = ScratchNetns::create(&unique_name("lqos-tcp", &format!("{tag}-c"))).unwrap();
        for (dev, peer, ns) in [("ens20", "i0", &inet), ("ens19", "s0", &sub)] {
            shaper.add_veth(dev, peer, 4).unwrap();
            shaper
                .ip(&["link", "set", peer, "netns", ns.name()])
                .unwrap();
            ns.ip(&["link", "set", peer, "up"]).unwrap();
        }
        for key in [
            "net/ipv4/ip_forward",
            "net/ipv4/conf/all/rp_filter",
            "net/ipv4/conf/default/rp_filter",
        ] {
            let on = key.ends_with("forward");
            sysctl(shaper.name(), key, if on { "1" } else { "0" });
        }
        shaper
            .ip(&["addr", "add", "198.51.100.254/24", "dev", "ens20"])
            .unwrap();
        shaper
            .ip(&["addr", "add", "100.64.0.254/24", "dev", "ens19"])
            .unwrap();
        inet.ip(&["addr", "add", "198.51.100.1/24", "dev", "i0"])
            .unwrap();
        inet.ip(&["route", "add", "100.64.0.0/24", "via", "198.51.100.254"])
            .unwrap();
        for (_, a) in CIRCUITS {
            sub.ip(&["addr", "add", &format!("{a}/24"), "dev", "s0"])
                .unwrap();
        }
        sub.ip(&["route", "add", "default", "via", "100.64.0.254"])
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        write_inputs(dir.path());
        let o = crate::common::lqos(
            dir.path(),
            &[
                "apply",
                "--netns",
                shaper.name(),
                "--state-dir",
                "st",
                "--queues",
                "4",
                "--sqm",
                "pfifo",
            ],
        );
        crate::common::ok(&o);
        let state = lqos_apply::state::NetnsState::new(dir.path().join("st"), Some(shaper.name()));
        let plan = lqos_apply::saved::load_saved_plan(&state)
            .unwrap()
            .unwrap()
            .plan;
        let pin_dir = state.bpf_pin_dir();
        let mut opts = lqos_bpf::InstallOptions::default();
        opts.pin_dir = pin_dir.clone();
        opts.netns = Some(shaper.name().to_string());
        opts.xdp = lqos_bpf::attach::XdpChoice::Off;
        lqos_bpf::install(&plan, &opts).unwrap_or_else(|e| panic!("{e}\n{e:?}"));
        Shaper {
            inet,
            shaper,
            sub,
            dir,
            pin_dir,
        }
    }

    /// `lqos stats --json` of the shaper with `args`.
    pub fn stats(&self, args: &[&str]) -> serde_json::Value {
        let mut a = vec![
            "stats",
            "--json",
            "--netns",
            self.shaper.name(),
            "--state-dir",
            "st",
        ];
        a.extend_from_slice(args);
        let out = crate::common::ok(&crate::common::lqos(self.dir.path(), &a));
        serde_json::from_str(&out).unwrap()
    }

    /// Circuit `id`'s `tcp` object in `stats` (panics without one).
    pub fn tcp<'a>(stats: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
        let c = stats["circuits"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == id)
            .unwrap_or_else(|| panic!("no circuit {id} in {stats:#}"));
        assert!(c["tcp"].is_object(), "{id} has no TCP statistics: {c:#}");
        &c["tcp"]
    }

    /// The server: a listener in the internet namespace; every connection
    /// is sent 8 KiB every 2 ms (32 Mbit/s at most, in bursts that the
    /// shaper's 200 Mbit/s ceils pass in a third of a millisecond: no
    /// standing queue in the shaper) until `stop`, or until it has been
    /// sent `total` bytes (then kept open, idle, until `stop`).
    pub fn server(&self, total: u64, stop: Arc<AtomicBool>) -> JoinHandle<()> {
        let l = in_netns(self.inet.name(), || {
            TcpListener::bind((SERVER, PORT)).unwrap()
        });
        l.set_nonblocking(true).unwrap();
        std::thread::spawn(move || {
            let buf = vec![0x5au8; 8 << 10];
            let mut writers = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                match l.accept() {
                    Ok((mut s, _)) => {
                        s.set_nonblocking(false).unwrap();
                        s.set_write_timeout(Some(Duration::from_millis(200)))
                            .unwrap();
                        let (stop, buf) = (stop.clone(), buf.clone());
                        writers.push(std::thread::spawn(move || {
                            let start = Instant::now();
                            let (mut n, mut sent) = (0u32, 0u64);
                            while !stop.load(Ordering::Relaxed) && sent < total {
                                let due = Duration::from_millis(2) * n;
                                if let Some(w) = due.checked_sub(start.elapsed()) {
                                    std::thread::sleep(w);
                                }
                                n += 1;
                                let chunk = &buf[..buf.len().min((total - sent) as usize)];
                                match s.write(chunk) {
                                    Ok(k) => sent += k as u64,
                                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                                    Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
                                    Err(_) => return,
                                }
                            }
                            while !stop.load(Ordering::Relaxed) {
                                std::thread::sleep(Duration::from_millis(20));
                            }
                            drop(s);
                        }));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
            for w in writers {
                let _ = w.join();
            }
        })
    }

    /// A download by circuit `id` from the server, its receive buffer
    /// `rcvbuf` bytes (which caps its window, so it stays below every
    /// ceil and builds no queue in the shaper), until it has received
    /// `total` bytes, `stop` is set or 60 s have passed; returns the
    /// client's local port (at once) and the bytes received with the
    /// socket, still open.
    pub fn download(
        &self,
        id: &str,
        rcvbuf: usize,
        total: u64,
        stop: Arc<AtomicBool>,
    ) -> (u16, JoinHandle<(u64, TcpStream)>) {
        let local = addr(id);
        let IpAddr::V4(local) = local else {
            panic!("{id}: not IPv4")
        };
        let server = format!("{SERVER}:{PORT}").parse().unwrap();
        let mut s = in_netns(self.sub.name(), move || {
            crate::common::tcp_connect(Some(SocketAddrV4::new(local, 0)), server, rcvbuf)
        });
        let port = s.local_addr().unwrap().port();
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let h = std::thread::spawn(move || {
            let mut buf = vec![0u8; 64 << 10];
            let mut n = 0u64;
            let start = Instant::now();
            while n < total && !stop.load(Ordering::Relaxed) && start.elapsed().as_secs() < 60 {
                match s.read(&mut buf) {
                    Ok(0) => break,
                    Ok(k) => n += k as u64,
                    Err(_) => {}
                }
            }
            (n, s)
        });
        (port, h)
    }

    /// The server's `ss -tin` line of its connection to `client`.
    pub fn server_ss(&self, client: SocketAddr) -> String {
        exec(
            self.inet.name(),
            &[
                "ss",
                "-tin",
                "dst",
                &format!("{}:{}", client.ip(), client.port()),
            ],
        )
    }

    /// The segments the server has retransmitted to `client` (`ss -ti`'s
    /// `retrans:NOW/TOTAL`; none when it has no such field).
    pub fn server_retransmits(&self, client: SocketAddr) -> u64 {
        let out = self.server_ss(client);
        assert!(out.contains("rtt:"), "no connection in ss's answer: {out}");
        out.split_whitespace()
            .find_map(|w| w.strip_prefix("retrans:"))
            .and_then(|v| v.split('/').nth(1))
            .map_or(0, |v| v.parse().unwrap())
    }

    /// The server's smoothed round-trip time (`ss -ti`'s `rtt:SRTT/VAR`)
    /// of its connection to `client`, ms.
    pub fn server_srtt_ms(&self, client: SocketAddr) -> f64 {
        let out = self.server_ss(client);
        out.split_whitespace()
            .find_map(|w| w.strip_prefix("rtt:"))
            .and_then(|v| v.split('/').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no rtt in ss's answer: {out}"))
    }
}

impl Drop for Shaper {
    fn drop(&mut self) {
        if let Err(e) = lqos_bpf::remove(&self.pin_dir, Some(self.shaper.name())) {
            eprintln!("removing the data path: {e}");
        }
    }
}

/// Sets `/proc/sys/KEY` to `value` in namespace `ns`.
pub fn sysctl(ns: &str, key: &str, value: &str) {
    let path = format!("/proc/sys/{key}");
    let value = value.to_string();
    in_netns(ns, move || std::fs::write(&path, value))
        .unwrap_or_else(|e| panic!("{key} in {ns}: {e}"));
}

/// Runs `f` on a thread inside namespace `ns` (sockets it makes stay
/// there).
pub fn in_netns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let ns = ns.to_string();
    std::thread::spawn(move || {
        let target = std::fs::File::open(format!("/run/netns/{ns}")).unwrap();
        nix::sched::setns(&target, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        f()
    })
    .join()
    .unwrap()
}

fn write_inputs(dir: &Path) {
    std::fs::write(dir.join("network.json"), "{}\n").unwrap();
    std::fs::write(
        dir.join("lqos.conf"),
        "[bridge]\nto_internet = \"ens20\"\nto_network = \"ens19\"\n\n[queues]\n\
         uplink_bandwidth_mbps = 1000\ndownlink_bandwidth_mbps = 1000\n\
         generated_pn_download_mbps = 1000\ngenerated_pn_upload_mbps = 1000\n",
    )
    .unwrap();
    let mut csv = String::from(
        "Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,MAC,IPv4,IPv6,\
         Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,Comment\n",
    );
    for (id, a) in CIRCUITS {
        csv.push_str(&format!("{id},{id},{id}-1,cpe,,,{a},,10,10,200,200,\n"));
    }
    std::fs::write(dir.join("ShapedDevices.csv"), csv).unwrap();
}
