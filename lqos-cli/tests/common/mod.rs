//! Shared by the CLI's black-box tests: run the built `lqos` binary, read
//! its output, and the inputs every test needs (the LibreQoS samples, the
//! CSV headers from `lqos_model`'s own constants).
// Each test crate uses a different part of this module.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The `lqos` binary: the one cargo built for these tests, or `lqos` on
/// PATH where this test binary runs on another machine (the lab's guest
/// has the release build of the same tree on its PATH).
pub fn lqos_bin() -> PathBuf {
    let built = Path::new(env!("CARGO_BIN_EXE_lqos"));
    if built.exists() {
        built.to_path_buf()
    } else {
        PathBuf::from("lqos")
    }
}

/// Runs the built `lqos` with `args` in `dir`.
pub fn lqos(dir: &Path, args: &[&str]) -> Output {
    Command::new(lqos_bin())
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run lqos")
}

/// (stdout, stderr) as text.
pub fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The exit code (-1 when killed by a signal).
pub fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

/// A scratch namespace `lqos-cli-TAG-*` with a veth pair `ens19`/`ens20`
/// of `queues` TX queues, and a temporary directory holding `lqos gen
/// --circuits CIRCUITS` (the network, devices and config).
pub fn netns_with_generated(
    tag: &str,
    queues: u32,
    circuits: usize,
) -> (lqos_apply::netns::ScratchNetns, tempfile::TempDir) {
    let ns = lqos_apply::netns::ScratchNetns::with_veth(
        &lqos_apply::netns::unique_name("lqos-cli", tag),
        "ens19",
        "ens20",
        queues,
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let n = circuits.to_string();
    let o = lqos(dir.path(), &["gen", "--circuits", &n, "--out", "."]);
    assert_eq!(code(&o), 0, "{:?}", text(&o));
    (ns, dir)
}

/// stdout of a run that must succeed (else panics with both streams).
pub fn ok(o: &Output) -> String {
    let (out, err) = text(o);
    assert!(
        o.status.success(),
        "status {:?}\nstdout:\n{out}\nstderr:\n{err}",
        o.status
    );
    out
}

/// The legacy 13-column `ShapedDevices.csv` header, as lqos-model defines
/// it, without a newline.
pub fn legacy_header() -> String {
    lqos_model::shaped_devices::LEGACY_HEADER.join(",")
}

/// A one-device circuit as a `ShapedDevices.csv` row in the columns `lqos
/// gen` writes: id `id`, under `parent`, IPv4 `ipv4`, 5/1 Mbps min, 50/10
/// max, with its newline.
pub fn device_row(id: &str, parent: &str, ipv4: &str) -> String {
    format!(
        "{id},\"Circuit {id}\",\"{id}-1\",\"Router\",\"{parent}\",\"\",\"\",\"\",\"{ipv4}\",\"\",5,1,50,10,\"\",\"\"\n"
    )
}

/// A LibreQoS sample file (`samples/libreqos/NAME`, kept once for all
/// crates and linked here as `tests/samples`).
pub fn sample(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/samples")
        .join(name)
}

/// Gives `ens19` in `ns` the address 10.77.0.1/24 and a static neighbour
/// 10.77.0.99, so datagrams to it leave through `ens19`'s qdiscs.
pub fn static_neighbour(ns: &lqos_apply::netns::ScratchNetns) {
    ns.ip(&["addr", "add", "10.77.0.1/24", "dev", "ens19"])
        .unwrap();
    ns.ip(&[
        "neigh",
        "add",
        "10.77.0.99",
        "lladdr",
        "02:00:00:00:00:99",
        "dev",
        "ens19",
    ])
    .unwrap();
}

/// A UDP socket in namespace `ns`, bound to `dev`, connected to the
/// [`static_neighbour`], with a TOS byte (DSCP << 2) and `SO_PRIORITY` =
/// `priority` (HTB takes a priority equal to one of its classids as that
/// class), and a send buffer for thousands of datagrams in flight (a flow
/// above its ceil must fill its leaf; the default buffer would block the
/// sender at a few dozen queued packets, and nothing would drop).
pub fn udp_sender(ns: &str, dev: &str, priority: u32, tos: u8) -> std::net::UdpSocket {
    use nix::sys::socket::{setsockopt, sockopt};
    let (ns, dev) = (ns.to_string(), dev.to_string());
    std::thread::spawn(move || {
        let target = std::fs::File::open(format!("/run/netns/{ns}")).unwrap();
        nix::sched::setns(&target, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        // The socket keeps the namespace it was created in.
        let s = std::net::UdpSocket::bind("10.77.0.1:0").unwrap();
        setsockopt(&s, sockopt::BindToDevice, &std::ffi::OsString::from(dev)).unwrap();
        // TOS first: setting IP_TOS also sets the socket priority from it
        // (rt_tos2priority), which would replace the classid.
        setsockopt(&s, sockopt::Ipv4Tos, &i32::from(tos)).unwrap();
        setsockopt(&s, sockopt::Priority, &(priority as i32)).unwrap();
        setsockopt(&s, sockopt::SndBufForce, &(16 << 20)).unwrap();
        s.connect("10.77.0.99:9").unwrap();
        s
    })
    .join()
    .unwrap()
}

/// The LibreQoS fixture (`tests/fixtures/libreqos/`: a small network's
/// inputs and what LibreQoS 455bc13b wrote for them: its state files and
/// the tc commands of LibreQoS.py and of its bakery).
pub fn libreqos_fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/libreqos")
}

/// The fixture's files copied into `dir`: with `pfifo`, the variant whose
/// `default_sqm` is `pfifo` (no cake or fq_codel leaf; `pfifo/` holds
/// LibreQoS's output for it).
pub fn copy_libreqos_fixture(dir: &Path, pfifo: bool) {
    let base = libreqos_fixture();
    let variant = if pfifo {
        base.join("pfifo")
    } else {
        base.clone()
    };
    let from = |f: &str| match f {
        "network.json" => base.join(f),
        _ => variant.join(f),
    };
    for f in [
        "network.json",
        "ShapedDevices.csv",
        "lqos.conf",
        "state/shaping/queuingStructure.json",
        "state/stats/statsByCircuit.json",
        "state/debug/linux_tc.txt",
        "state/debug/linux_tc_rust.txt",
    ] {
        let to = dir.join(f);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(from(f), to).unwrap();
    }
}

/// Spawns the built `lqos` with `args` in `dir`, stdout and stderr piped.
pub fn spawn(dir: &Path, args: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_lqos"))
        .args(args)
        .current_dir(dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn lqos")
}

/// The number of HTB classes on `dev` in `ns` (a probe of a load's
/// progress); `None` when the dump raced the load too often.
pub fn class_count(ns: &lqos_apply::netns::ScratchNetns, dev: &str) -> Option<usize> {
    let mut s = lqos_apply::netlink::NetlinkSocket::open_in_netns(ns.name()).unwrap();
    let l = s.link(dev).unwrap();
    s.dump(l.ifindex).ok().map(|t| t.classes.len())
}

/// Waits (up to 2 minutes) until `pred` holds, panicking with the output
/// of `child` if it exits first.
pub fn wait_while_running(child: &mut std::process::Child, what: &str, pred: impl Fn() -> bool) {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !pred() {
        if let Some(s) = child.try_wait().unwrap() {
            let mut err = String::new();
            if let Some(e) = child.stderr.as_mut() {
                use std::io::Read;
                let _ = e.read_to_string(&mut err);
            }
            panic!("exited ({s:?}) before {what}: {err}");
        }
        assert!(
            std::time::Instant::now() < end,
            "no {what} within 2 minutes"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// `lqos verify` of the files in `dir` (pfifo leaves) against the kernel of
/// `ns`: in sync.
pub fn assert_in_sync(dir: &Path, ns: &lqos_apply::netns::ScratchNetns) {
    let o = lqos(
        dir,
        &[
            "verify",
            "--netns",
            ns.name(),
            "--state-dir",
            "st",
            "--sqm",
            "pfifo",
        ],
    );
    let (out, err) = text(&o);
    assert_eq!(code(&o), 0, "{out}\n{err}");
    assert!(out.contains("in sync"), "{out}");
}

/// Sends `sig` to `child`.
pub fn signal(child: &std::process::Child, sig: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), sig).unwrap();
}

/// Sets Download Min/Max Mbps of circuit `id` in the devices file.
pub fn set_rates(csv_text: &str, id: &str, min: &str, max: &str) -> String {
    let mut r = csv::ReaderBuilder::new().from_reader(csv_text.as_bytes());
    let headers = r.headers().unwrap().clone();
    let col = |n: &str| headers.iter().position(|h| h == n).unwrap();
    let (cid, cmin, cmax) = (
        col("Circuit ID"),
        col("Download Min Mbps"),
        col("Download Max Mbps"),
    );
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(&headers).unwrap();
    for rec in r.records() {
        let rec = rec.unwrap();
        let row: Vec<&str> = rec
            .iter()
            .enumerate()
            .map(|(i, v)| match i {
                _ if rec.get(cid) != Some(id) => v,
                i if i == cmin => min,
                i if i == cmax => max,
                _ => v,
            })
            .collect();
        w.write_record(&row).unwrap();
    }
    String::from_utf8(w.into_inner().unwrap()).unwrap()
}

pub mod promtool;

/// The daemon, its JSON log lines collected by a reader thread; killed on
/// drop if a test fails before stopping it.
pub struct Daemon {
    /// The process.
    pub child: Child,
    log: Arc<Mutex<Vec<Value>>>,
}

impl Daemon {
    /// `lqos watch --log-format json ARGS` in `dir`.
    pub fn start(dir: &Path, args: &[&str]) -> Daemon {
        Daemon::spawn(&mut Daemon::command(dir, args))
    }

    /// The command [`Daemon::start`] runs.
    pub fn command(dir: &Path, args: &[&str]) -> Command {
        let mut c = Command::new(lqos_bin());
        c.arg("watch")
            .args(["--log-format", "json"])
            .args(args)
            .current_dir(dir)
            .stderr(Stdio::piped())
            .stdout(Stdio::null());
        c
    }

    /// Spawns `cmd` (a [`Daemon::command`]) and collects its log.
    pub fn spawn(cmd: &mut Command) -> Daemon {
        Daemon::from_child(cmd.spawn().expect("spawn lqos watch"))
    }

    /// Collects the log of a spawned `lqos watch` (stderr piped).
    pub fn from_child(mut child: Child) -> Daemon {
        let log = Arc::new(Mutex::new(Vec::new()));
        let l = log.clone();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let v = serde_json::from_str(&line)
                    .unwrap_or_else(|_| serde_json::json!({ "message": line }));
                l.lock().unwrap().push(v);
            }
        });
        Daemon { child, log }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn signal(&self, sig: nix::sys::signal::Signal) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid()), sig).unwrap();
    }

    pub fn lines(&self) -> Vec<Value> {
        self.log.lock().unwrap().clone()
    }

    pub fn dump(&self) -> String {
        self.lines()
            .iter()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Waits (up to `within`) for a log line, after the first `skip`,
    /// matching `pred`.
    pub fn wait_log(&self, skip: usize, within: Duration, pred: impl Fn(&Value) -> bool) -> Value {
        let end = Instant::now() + within;
        loop {
            if let Some(v) = self.lines().into_iter().skip(skip).find(&pred) {
                return v;
            }
            assert!(
                Instant::now() < end,
                "no such log line within {within:?}; log:\n{}",
                self.dump()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn count(&self) -> usize {
        self.log.lock().unwrap().len()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A log line's message.
pub fn msg(v: &Value) -> &str {
    v["message"].as_str().unwrap_or("")
}

/// Matches the `applied` line of `trigger`.
pub fn applied(trigger: &'static str) -> impl Fn(&Value) -> bool {
    move |v| msg(v) == "applied" && v["trigger"] == trigger
}

/// A TCP connection to `remote` whose receive buffer is `rcvbuf` bytes
/// (set before the handshake, so it caps the window the peer sees), from
/// `local` when given.
pub fn tcp_connect(
    local: Option<std::net::SocketAddrV4>,
    remote: std::net::SocketAddrV4,
    rcvbuf: usize,
) -> std::net::TcpStream {
    use nix::sys::socket::{
        bind, connect, setsockopt, socket, sockopt, AddressFamily, SockFlag, SockType, SockaddrIn,
    };
    use std::os::fd::AsRawFd;
    let fd = socket(
        AddressFamily::Inet,
        SockType::Stream,
        SockFlag::empty(),
        None,
    )
    .unwrap();
    setsockopt(&fd, sockopt::RcvBuf, &rcvbuf).unwrap();
    if let Some(l) = local {
        bind(fd.as_raw_fd(), &SockaddrIn::from(l)).unwrap();
    }
    connect(fd.as_raw_fd(), &SockaddrIn::from(remote)).unwrap();
    std::net::TcpStream::from(fd)
}
