//! lqos's eBPF classifier on packets, through the real `lqos` binary:
//! an internet namespace sends UDP through a shaper (forwarding between
//! `ens20`, internet side, and `ens19`, subscriber side: veth, 16 TX
//! queues, mq + an HTB per queue with pfifo leaves) to a subscriber
//! namespace, and back. The senders set no priority and no mark: only
//! `lqos apply --classifier bpf` (or `classifier = "bpf"` in lqos.conf,
//! for `lqos watch`) puts their packets in a class. Flows are offered at
//! twice their circuit's ceil and must arrive at that ceil +/-10% (rates
//! over windows that leave out this machine's stalls,
//! `lqos_apply::traffic`).
//!
//! Every lqos process runs beside a bpffs of its own (`PrivateBpf`), so
//! its pins (`/sys/fs/bpf/lqos-netns-NAME`) never meet a real install's.
//! Needs root and namespaces (skipped otherwise, unless
//! `LQOS_REQUIRE_NETNS=1`); XDP on veth, clsact and cls_bpf are in this
//! project's host kernel.

mod common;

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{lqos_bin, msg, ok, Daemon};
use lqos_apply::netns::{require_netns, PrivateBpf, ScratchNetns};
use lqos_apply::traffic::{
    assert_at_ceils, class_bytes, default_sent, holds_a_datagram, receive_at, secs, send_flows,
    sysctl, three_namespaces, wire, Arrivals, Flow, StallWatch, Topo, Window, PORT,
};
use serde_json::Value;

/// A circuit: id, download and upload ceil (kbit), its address or
/// prefix, the subscriber's address in it.
struct Circuit {
    id: &'static str,
    down: u64,
    up: u64,
    net: &'static str,
    host: &'static str,
}

/// Small ceils: the generator offers twice each, in both directions.
const CIRCUITS: [Circuit; 5] = [
    Circuit {
        id: "c32",
        down: 600,
        up: 400,
        net: "100.64.0.7",
        host: "100.64.0.7",
    },
    Circuit {
        id: "c29",
        down: 500,
        up: 300,
        net: "100.64.1.0/29",
        host: "100.64.1.3",
    },
    Circuit {
        id: "c56",
        down: 450,
        up: 350,
        net: "2001:db8:1:ff00::/56",
        host: "2001:db8:1:ff00::5",
    },
    Circuit {
        id: "mova",
        down: 400,
        up: 400,
        net: "100.64.0.8",
        host: "100.64.0.8",
    },
    Circuit {
        id: "movb",
        down: 700,
        up: 700,
        net: "100.64.5.5",
        host: "100.64.5.5",
    },
];
/// The address `lqos watch` moves from circuit `mova` to `movb`.
const MOVER: &str = "100.64.0.8";
/// An address no circuit has.
const UNKNOWN: &str = "100.64.9.9";
const UNKNOWN_KBIT: u64 = 300;
/// The internet host.
const INET4: &str = "192.0.2.2";
const INET6: &str = "2001:db8:ffff::2";
const OFFER: u64 = 2;

fn circuit(id: &str) -> &'static Circuit {
    CIRCUITS.iter().find(|c| c.id == id).unwrap()
}

/// The inputs, with `mover` owned by circuit `owner`: one 40 Mbit site,
/// the circuits under it, lqos.conf with the bpf classifier.
fn write_inputs(dir: &Path, owner: &str) {
    std::fs::write(
        dir.join("network.json"),
        r#"{"Site": {"downloadBandwidthMbps": 40, "uploadBandwidthMbps": 40, "children": {}}}"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("lqos.conf"),
        "[bridge]\nto_internet = \"ens20\"\nto_network = \"ens19\"\n\n[queues]\n\
         uplink_bandwidth_mbps = 50\ndownlink_bandwidth_mbps = 50\n\
         generated_pn_download_mbps = 50\ngenerated_pn_upload_mbps = 50\n\n\
         [lqos]\nclassifier = \"bpf\"\n",
    )
    .unwrap();
    replace(&dir.join("ShapedDevices.csv"), &devices(owner));
}

fn devices(owner: &str) -> String {
    let mut csv = String::from(
        "Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,MAC,IPv4,IPv6,\
         Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,Comment\n",
    );
    for c in &CIRCUITS {
        let mut v4: Vec<&str> = Vec::new();
        let mut v6 = "";
        match (c.net, c.id) {
            (n, _) if n.contains(':') => v6 = n,
            (MOVER, _) => {}
            (n, _) => v4.push(n),
        }
        if c.id == owner {
            v4.push(MOVER);
        }
        csv += &format!(
            "{id},{id},{id}-1,cpe,Site,,\"{}\",\"{v6}\",0.1,0.1,{},{},\n",
            v4.join(","),
            c.down as f64 / 1000.0,
            c.up as f64 / 1000.0,
            id = c.id
        );
    }
    csv
}

/// Writes `path` by rename, as integrations do.
fn replace(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// The three namespaces, addressed and routed, with static neighbours
/// everywhere (no ARP or neighbour solicitation leaves the shaper while
/// the tests count its default classes).
fn topology() -> Topo {
    let t = three_namespaces("lqos-bpfcls");
    let (s, i, u) = (&t.shaper, &t.internet, &t.subscriber);
    let mac = |n: u8| format!("02:00:00:00:00:{n:02x}");
    for (ns, dev, m) in [
        (s, "ens20", 1),
        (i, "inet0", 2),
        (s, "ens19", 3),
        (u, "sub0", 4),
    ] {
        ns.ip(&["link", "set", dev, "address", &mac(m)]).unwrap();
    }
    let addr = |ns: &ScratchNetns, a: &str, dev: &str| {
        ns.ip(&["addr", "add", a, "dev", dev, "nodad"]).unwrap();
    };
    addr(s, "192.0.2.1/24", "ens20");
    addr(s, "2001:db8:ffff::1/64", "ens20");
    addr(s, "100.64.0.254/16", "ens19");
    addr(s, "2001:db8:1::fe/48", "ens19");
    addr(i, &format!("{INET4}/24"), "inet0");
    addr(i, &format!("{INET6}/64"), "inet0");
    let hosts: Vec<&str> = CIRCUITS.iter().map(|c| c.host).chain([UNKNOWN]).collect();
    for h in &hosts {
        addr(
            u,
            &format!("{h}/{}", if h.contains(':') { 48 } else { 16 }),
            "sub0",
        );
    }
    for (ns, dev) in [(i, "inet0"), (u, "sub0")] {
        ns.ip(&["link", "set", dev, "up"]).unwrap();
    }
    i.ip(&["route", "add", "default", "via", "192.0.2.1"])
        .unwrap();
    i.ip(&["-6", "route", "add", "default", "via", "2001:db8:ffff::1"])
        .unwrap();
    u.ip(&["route", "add", "default", "via", "100.64.0.254"])
        .unwrap();
    u.ip(&["-6", "route", "add", "default", "via", "2001:db8:1::fe"])
        .unwrap();
    let neigh = |ns: &ScratchNetns, a: &str, m: u8, dev: &str| {
        ns.ip(&[
            "neigh",
            "replace",
            a,
            "lladdr",
            &mac(m),
            "dev",
            dev,
            "nud",
            "permanent",
        ])
        .unwrap();
    };
    neigh(s, INET4, 2, "ens20");
    neigh(s, INET6, 2, "ens20");
    for h in &hosts {
        neigh(s, h, 4, "ens19");
    }
    neigh(i, "192.0.2.1", 1, "inet0");
    neigh(i, "2001:db8:ffff::1", 1, "inet0");
    neigh(u, "100.64.0.254", 3, "sub0");
    neigh(u, "2001:db8:1::fe", 3, "sub0");
    sysctl(s.name(), "net.ipv4.ip_forward", "1");
    sysctl(s.name(), "net.ipv6.conf.all.forwarding", "1");

    // A veth leaves the UDP checksum to "hardware" that never fills it in
    // (CHECKSUM_PARTIAL); a frame XDP redirects to another CPU is rebuilt
    // without that note and arrives with a bad checksum. A real NIC hands
    // XDP complete frames: the senders here fill in their checksums.
    for (ns, dev) in [(i, "inet0"), (u, "sub0")] {
        let o = Command::new("ip")
            .args([
                "netns",
                "exec",
                ns.name(),
                "ethtool",
                "-K",
                dev,
                "tx",
                "off",
            ])
            .output()
            .unwrap();
        assert!(o.status.success(), "ethtool: {o:?}");
    }
    t
}

/// `lqos ARGS` in `dir`, beside the private bpffs.
fn lqos(bpf: &PrivateBpf, dir: &Path, args: &[&str]) -> Output {
    let mut c = Command::new(lqos_bin());
    c.args(args).current_dir(dir);
    bpf.output(c).unwrap()
}

/// The flows of `circuits` (and the unknown address, download only):
/// download from the internet to each subscriber address, upload from each
/// to the internet host (one port per circuit), each offered at twice its
/// ceil; keyed `down ID` / `up ID`.
fn flows(circuits: &[&str], unknown: bool) -> (Vec<Flow>, Vec<Flow>, Vec<(String, u64)>) {
    let (mut down, mut up, mut ceils) = (Vec::new(), Vec::new(), Vec::new());
    for (i, id) in circuits.iter().enumerate() {
        let c = circuit(id);
        // The mover is offered twice the larger of its two circuits' ceils.
        let (dn, un) = if *id == "mova" {
            let b = circuit("movb");
            (c.down.max(b.down), c.up.max(b.up))
        } else {
            (c.down, c.up)
        };
        let host: IpAddr = c.host.parse().unwrap();
        let inet: IpAddr = if host.is_ipv6() { INET6 } else { INET4 }.parse().unwrap();
        down.push(Flow {
            key: format!("down {id}"),
            src: None,
            dst: SocketAddr::from((host, PORT)),
            kbit: OFFER * dn,
            priority: None,
            dev: None,
        });
        up.push(Flow {
            key: format!("up {id}"),
            src: Some(SocketAddr::from((host, 0))),
            dst: SocketAddr::from((inet, PORT + 1 + i as u16)),
            kbit: OFFER * un,
            priority: None,
            dev: None,
        });
        ceils.push((format!("down {id}"), c.down));
        ceils.push((format!("up {id}"), c.up));
    }
    if unknown {
        down.push(Flow {
            key: "down unknown".into(),
            src: None,
            dst: SocketAddr::from((UNKNOWN.parse::<IpAddr>().unwrap(), PORT)),
            kbit: UNKNOWN_KBIT,
            priority: None,
            dev: None,
        });
    }
    (down, up, ceils)
}

/// Flows running through the topology: receivers in both end namespaces,
/// senders on both sides, the stall watch.
struct Traffic {
    start: Instant,
    stop: Arc<AtomicBool>,
    got: Arrivals,
    threads: Vec<std::thread::JoinHandle<()>>,
    senders: Vec<std::thread::JoinHandle<BTreeMap<String, Vec<Duration>>>>,
    stalls: StallWatch,
}

impl Traffic {
    fn start(t: &Topo, down: Vec<Flow>, up: Vec<Flow>) -> Traffic {
        let start = Instant::now();
        let stalls = StallWatch::start(start);
        let stop = Arc::new(AtomicBool::new(false));
        let got: Arrivals = Arc::default();
        let at = |f: &[Flow]| -> Vec<(String, SocketAddr)> {
            f.iter().map(|f| (f.key.clone(), f.dst)).collect()
        };
        let mut threads = receive_at(
            t.subscriber.name(),
            start,
            stop.clone(),
            got.clone(),
            at(&down),
        );
        threads.extend(receive_at(
            t.internet.name(),
            start,
            stop.clone(),
            got.clone(),
            at(&up),
        ));
        std::thread::sleep(Duration::from_millis(200));
        let senders = vec![
            send_flows(t.internet.name(), start, down, stop.clone()),
            send_flows(t.subscriber.name(), start, up, stop.clone()),
        ];
        Traffic {
            start,
            stop,
            got,
            threads,
            senders,
            stalls,
        }
    }

    fn at(&self, s: f64) {
        std::thread::sleep(secs(s).saturating_sub(self.start.elapsed()));
    }

    /// Stops everything: (offered, delivered, stalls).
    #[allow(clippy::type_complexity)]
    fn finish(
        self,
    ) -> (
        BTreeMap<String, Vec<Duration>>,
        BTreeMap<String, Vec<Duration>>,
        Vec<(Duration, Duration)>,
    ) {
        self.stop.store(true, Ordering::Relaxed);
        let mut offered = BTreeMap::new();
        for s in self.senders {
            offered.extend(s.join().unwrap());
        }
        for r in self.threads {
            r.join().unwrap();
        }
        let got = self.got.lock().unwrap().clone();
        (offered, got, self.stalls.finish())
    }
}

/// The default classes' bytes and packets on both shaper interfaces.
fn defaults(shaper: &ScratchNetns) -> (u64, u64) {
    let (a, b) = (default_sent(shaper, "ens19"), default_sent(shaper, "ens20"));
    (a.0 + b.0, a.1 + b.1)
}

/// Fails when the default classes took one of the flows' datagrams between
/// the counts `before` and `after` (the shaper's own few small packets,
/// MLD reports and neighbour solicitations, are no circuit's and go
/// there).
fn assert_no_datagram(before: (u64, u64), after: (u64, u64), when: &str) {
    let (bytes, packets) = (after.0 - before.0, after.1 - before.1);
    assert!(
        !holds_a_datagram(bytes, packets),
        "a flow's packets reached a default class {when}: {packets} packets, {bytes} bytes"
    );
}

/// Wire bytes of a flow key's datagrams.
fn wire_of(key: &str) -> u64 {
    let id = key.split_whitespace().nth(1).unwrap_or("");
    match CIRCUITS.iter().find(|c| c.id == id) {
        Some(c) => wire(c.host),
        None => wire(UNKNOWN),
    }
}

/// `lqos apply --classifier bpf` (here from lqos.conf) puts forwarded
/// flows to a /32, into a /29 and into an IPv6 /56 in their circuits'
/// classes in both directions, each at its ceil; an unknown address in a
/// default class; `lqos verify` finds the maps in sync; `lqos show --ip`
/// answers from the live maps; `lqos detach` leaves nothing attached.
#[test]
fn apply_with_the_bpf_classifier_shapes_forwarded_flows_both_ways() {
    if !require_netns("cli_bpf_classifier_apply") {
        return;
    }
    let t = topology();
    let bpf = PrivateBpf::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_inputs(d, "mova");
    let ns = t.shaper.name();
    let args = |cmd: &'static str| {
        vec![
            cmd,
            "--netns",
            ns,
            "--state-dir",
            "st",
            "--sqm",
            "pfifo limit 20",
        ]
    };
    let out = ok(&lqos(&bpf, d, &args("apply")));
    assert!(
        out.contains("ens19: bpf classifier: tc attached, XDP native")
            && out.contains("ens20: bpf classifier: tc attached, XDP native"),
        "{out}"
    );
    let (down, up, ceils) = flows(&["c32", "c29", "c56", "mova"], true);
    let traffic = Traffic::start(&t, down, up);
    traffic.at(6.0);
    let (offered, got, stalls) = traffic.finish();
    let w = Window {
        from: secs(2.5),
        to: secs(5.5),
        skip: &stalls,
    };
    assert_at_ceils("bpf classifier", &ceils, &offered, &got, wire_of, w);

    // Each flow in its circuit's class (the classids of the plan applied),
    // the unknown address in the default classes.
    let state = lqos_apply::state::NetnsState::new(d.join("st"), Some(ns));
    let plan = lqos_apply::saved::load_saved_plan(&state)
        .unwrap()
        .unwrap()
        .plan;
    let classid = |host: &str, upload: bool| {
        let e = plan.ip_map.lookup(host.parse().unwrap()).unwrap();
        if upload {
            e.upload.classid
        } else {
            e.download.classid
        }
    };
    for (dev, upload) in [("ens19", false), ("ens20", true)] {
        let bytes = class_bytes(&t.shaper, dev);
        for id in ["c32", "c29", "c56", "mova"] {
            let key = format!("{} {id}", if upload { "up" } else { "down" });
            let delivered = got[&key].len() as u64 * wire_of(&key);
            let c = classid(circuit(id).host, upload);
            let b = bytes.get(&c).copied().unwrap_or(0);
            assert!(
                b as f64 >= 0.9 * delivered as f64,
                "{key}: class {c} on {dev} carried {b} bytes, the flow delivered {delivered}"
            );
        }
    }
    let unknown = got["down unknown"].len() as u64;
    assert!(
        unknown as f64 >= 0.9 * offered["down unknown"].len() as f64,
        "the unknown address is held to no ceil: {unknown} of {} delivered",
        offered["down unknown"].len()
    );
    assert!(
        default_sent(&t.shaper, "ens19").1 >= unknown,
        "the unknown address's {unknown} packets went through the default classes"
    );

    let v = lqos(&bpf, d, &["verify", "--netns", ns, "--state-dir", "st"]);
    let text = ok(&v);
    assert!(
        text.contains("bpf classifier (/sys/fs/bpf/lqos-netns-") && text.contains("in sync"),
        "{text}"
    );
    let shown = ok(&lqos(
        &bpf,
        d,
        &[
            "show",
            "--netns",
            ns,
            "--state-dir",
            "st",
            "--ip",
            "100.64.1.6",
        ],
    ));
    assert!(
        shown.contains("the live maps of lqos's eBPF classifier")
            && shown.contains("circuit \"c29\"")
            && !shown.contains("differs"),
        "{shown}"
    );

    // Drift: an entry removed and a filter deleted behind lqos's back.
    // verify says what differs (exit 1); the next apply repairs it.
    let pins = lqos_apply::state::NetnsState::new("/unused", Some(ns)).bpf_pin_dir();
    let gone = bpf.run(move || {
        let mut m = lqos_bpf::maps::Maps::open(&pins).unwrap();
        m.remove(&lqos_bpf::model::MapKey::from_net(
            "100.64.0.7/32".parse().unwrap(),
        ))
    });
    gone.unwrap();
    t.shaper
        .tc(&["filter", "del", "dev", "ens20", "egress", "pref", "900"])
        .unwrap();
    let v = lqos(&bpf, d, &["verify", "--netns", ns, "--state-dir", "st"]);
    let (text, _) = common::text(&v);
    assert_eq!(v.status.code(), Some(1), "{text}");
    assert!(
        text.contains("missing map entry 100.64.0.7/32 (circuit c32)")
            && text.contains("ens20: lqos's tc filter is missing"),
        "{text}"
    );
    let out = ok(&lqos(&bpf, d, &args("apply")));
    assert!(
        out.contains("ens20: bpf classifier: tc attached") && out.contains("1 map entries written"),
        "{out}"
    );
    ok(&lqos(
        &bpf,
        d,
        &["verify", "--netns", ns, "--state-dir", "st"],
    ));

    let out = ok(&lqos(
        &bpf,
        d,
        &["detach", "--netns", ns, "--state-dir", "st"],
    ));
    assert!(out.contains("detached from ens19, ens20"), "{out}");
    for dev in ["ens19", "ens20"] {
        let f = t
            .shaper
            .tc(&["filter", "show", "dev", dev, "egress"])
            .unwrap();
        assert!(!f.contains("lqos_tc"), "{f}");
        let l = t.shaper.ip(&["link", "show", "dev", dev]).unwrap();
        assert!(!l.contains("prog/xdp"), "{l}");
    }
    let pins = format!("/sys/fs/bpf/lqos-netns-{ns}");
    let left = bpf.run(move || Path::new(&pins).exists());
    assert!(!left, "pins left");
}

fn applied(trigger: &'static str) -> impl Fn(&Value) -> bool {
    common::applied(trigger)
}

/// `lqos watch` with the bpf classifier: an edit that moves an address to
/// another circuit writes that address to the maps (no tree op, a map
/// step of well under a millisecond in the log) and the flow follows to
/// the new circuit's ceil; the daemon killed (SIGKILL) while flows run
/// and started again: the pinned programs and maps keep every packet in
/// its circuit's class meanwhile (the default classes count nothing, the
/// flows stay at their ceils) and the new daemon replaces the programs in
/// place.
#[test]
fn watch_moves_an_address_and_a_killed_daemon_leaves_packets_classified() {
    if !require_netns("cli_bpf_classifier_watch") {
        return;
    }
    let t = topology();
    let bpf = PrivateBpf::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_inputs(d, "mova");
    let ns = t.shaper.name();
    let watch = [
        "--netns",
        ns,
        "--state-dir",
        "st",
        "--sqm",
        "pfifo limit 20",
        "--verify-every",
        "0",
        "--debounce",
        "20",
    ];
    let spawn = || {
        let mut c = Daemon::command(d, &watch);
        c.stdin(Stdio::null());
        Daemon::from_child(bpf.spawn(c).unwrap())
    };
    let daemon = spawn();
    let start = daemon.wait_log(0, Duration::from_secs(60), applied("start"));
    assert!(start["map_written"].as_u64().unwrap() >= 5, "{start}");
    let (down, up, _) = flows(&["c32", "mova"], false);
    let traffic = Traffic::start(&t, down, up);

    // At 4 s the mover goes to circuit movb (one row each).
    traffic.at(4.0);
    let n = daemon.count();
    replace(&d.join("ShapedDevices.csv"), &devices("movb"));
    let moved = daemon.wait_log(n, Duration::from_secs(20), applied("file-change"));
    let moved_at = traffic.start.elapsed();
    eprintln!("move: {moved}");
    assert_eq!(moved["incremental"], true, "{moved}");
    assert_eq!(
        (
            moved["added"].as_u64(),
            moved["changed"].as_u64(),
            moved["removed"].as_u64()
        ),
        (Some(0), Some(0), Some(0)),
        "no tree op: {moved}"
    );
    assert_eq!(moved["map_written"].as_u64(), Some(1), "{moved}");
    eprintln!("the moved address's map step: {} ms", moved["maps_ms"]);

    // 4.5 s after the move: kill the daemon, start another 1.5 s later.
    let kill_at = moved_at + secs(4.5);
    traffic.at(kill_at.as_secs_f64());
    let before = defaults(&t.shaper);
    daemon.signal(nix::sys::signal::Signal::SIGKILL);
    drop(daemon);
    traffic.at(kill_at.as_secs_f64() + 1.5);
    let again = spawn();
    let restart = again.wait_log(0, Duration::from_secs(60), applied("start"));
    let restarted = traffic.start.elapsed();
    assert_eq!(restart["map_written"].as_u64(), Some(0), "{restart}");
    assert!(
        again
            .lines()
            .iter()
            .any(|l| msg(l) == "bpf classifier attached" && l["tc"] == "replaced in place"),
        "{}",
        again.dump()
    );
    traffic.at(restarted.as_secs_f64() + 2.0);
    let after = defaults(&t.shaper);
    let end = traffic.start.elapsed();
    let (offered, got, stalls) = traffic.finish();
    drop(again);
    assert_no_datagram(before, after, "while the daemon was down or starting");
    let w = |from: Duration, to: Duration| Window {
        from,
        to,
        skip: &stalls,
    };
    let c32 = circuit("c32");
    let (a, b) = (circuit("mova"), circuit("movb"));
    assert_at_ceils(
        "before the move",
        &[
            ("down c32".into(), c32.down),
            ("down mova".into(), a.down),
            ("up mova".into(), a.up),
        ],
        &offered,
        &got,
        wire_of,
        w(secs(2.0), secs(4.0)),
    );
    // The mover's packets keep their key (`mova`): after the move they are
    // held to movb's ceils.
    assert_at_ceils(
        "after the move",
        &[("down mova".into(), b.down), ("up mova".into(), b.up)],
        &offered,
        &got,
        wire_of,
        w(moved_at + secs(1.5), kill_at),
    );
    assert_at_ceils(
        "daemon killed, then started again",
        &[
            ("down c32".into(), c32.down),
            ("up c32".into(), c32.up),
            ("down mova".into(), b.down),
            ("up mova".into(), b.up),
        ],
        &offered,
        &got,
        wire_of,
        w(kill_at, end),
    );
}

/// LibreQoS's pref for its tc egress filter (`0xC02F`, handle 1).
const LIBREQOS_PREF: u16 = 0xc02f;

/// The switch from LibreQoS, in the order docs/libreqos.md gives, while
/// flows run: a stand-in for LibreQoS's programs (lqos's own object with
/// maps of its own holding the same classids, attached the way `lqosd`
/// attaches: XDP through netlink in driver mode, a `cls_bpf` filter at
/// pref 0xC02F, handle 1) classifies first; `lqos apply --classifier bpf`
/// then attaches its filter at pref 900, which decides before it (the
/// stand-in's maps are emptied to prove it), and warns that the XDP slot
/// is taken; LibreQoS's programs are detached; the next `lqos apply`
/// attaches lqos's XDP. No packet reaches a default class at any step and
/// every flow stays at its ceil.
#[test]
fn the_bpf_classifier_takes_over_from_libreqos_programs_without_a_gap() {
    if !require_netns("cli_bpf_classifier_handover") {
        return;
    }
    let t = topology();
    let bpf = PrivateBpf::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_inputs(d, "mova");
    let ns = t.shaper.name().to_string();
    let apply = |classifier: &str| {
        lqos(
            &bpf,
            d,
            &[
                "apply",
                "--netns",
                &ns,
                "--state-dir",
                "st",
                "--sqm",
                "pfifo limit 20",
                "--classifier",
                classifier,
            ],
        )
    };
    // LibreQoS's tree (here lqos's, with the same classids) and its
    // programs.
    ok(&apply("none"));
    let state = lqos_apply::state::NetnsState::new(d.join("st"), Some(&ns));
    let plan = lqos_apply::saved::load_saved_plan(&state)
        .unwrap()
        .unwrap()
        .plan;
    let ns2 = ns.clone();
    let stand_in = bpf.run(move || stand_in_libreqos(&ns2, &plan));

    let (down, up, ceils) = flows(&["c32", "c56"], false);
    let traffic = Traffic::start(&t, down, up);
    traffic.at(1.5);
    let before = defaults(&t.shaper);

    // 1. lqos's classifier: its tc filter decides first; XDP is taken.
    traffic.at(2.5);
    let out = ok(&apply("bpf"));
    assert!(
        out.contains("ens19: bpf classifier: tc attached, XDP not attached"),
        "{out}"
    );
    let filters = t
        .shaper
        .tc(&["filter", "show", "dev", "ens19", "egress"])
        .unwrap();
    assert!(
        filters.find("pref 900") < filters.find(&format!("pref {LIBREQOS_PREF}")),
        "{filters}"
    );
    // LibreQoS's maps emptied: were its filter still deciding, packets
    // would fall to a default class now.
    bpf.run(move || {
        let mut m = lqos_bpf::maps::Maps::open(Path::new(STAND_IN)).unwrap();
        let e = m.read().unwrap();
        m.apply(&lqos_bpf::model::diff(
            &e,
            &lqos_bpf::model::Entries::default(),
        ))
        .unwrap();
    });
    let v = ok(&lqos(
        &bpf,
        d,
        &["verify", "--netns", &ns, "--state-dir", "st"],
    ));
    assert!(v.contains("XDP held by another program"), "{v}");

    // 2. LibreQoS's programs detached (what stopping lqosd does, without
    // its teardown flushing every egress filter).
    traffic.at(4.5);
    for dev in ["ens19", "ens20"] {
        t.shaper
            .ip(&["link", "set", "dev", dev, "xdpdrv", "off"])
            .unwrap();
        t.shaper
            .tc(&[
                "filter",
                "del",
                "dev",
                dev,
                "egress",
                "pref",
                &LIBREQOS_PREF.to_string(),
            ])
            .unwrap();
    }
    drop(stand_in);

    // 3. The next apply attaches lqos's XDP.
    traffic.at(5.5);
    let out = ok(&apply("bpf"));
    assert!(
        out.contains("ens19: bpf classifier: tc replaced in place, XDP native"),
        "{out}"
    );
    traffic.at(8.0);
    let after = defaults(&t.shaper);
    let end = traffic.start.elapsed();
    let (offered, got, stalls) = traffic.finish();
    assert_no_datagram(before, after, "during the switch");
    let w = Window {
        from: secs(1.5),
        to: end,
        skip: &stalls,
    };
    assert_at_ceils("LibreQoS, then lqos", &ceils, &offered, &got, wire_of, w);
    let v = ok(&lqos(
        &bpf,
        d,
        &["verify", "--netns", &ns, "--state-dir", "st"],
    ));
    assert!(v.contains("ens19: tc filter first, XDP native"), "{v}");
}

/// Where the stand-in for LibreQoS's programs pins its maps (beside
/// lqos's, in the private bpffs).
const STAND_IN: &str = "/sys/fs/bpf/libreqos-stand-in";

/// Loads a stand-in for LibreQoS's programs into namespace `ns` with
/// `plan`'s classids, attached as `lqosd` attaches: XDP through netlink in
/// driver mode (`ip link set dev IF xdpdrv`), tc egress at pref 0xC02F,
/// handle 1. Runs beside the private bpffs; returns the loaded object.
fn stand_in_libreqos(ns: &str, plan: &lqos_tc::Plan) -> lqos_bpf::loader::DataPath {
    use lqos_bpf::plan::{entries, interfaces, CpuPolicy};
    let pins = Path::new(STAND_IN);
    let mut dp = lqos_bpf::loader::DataPath::load(pins).unwrap();
    let cpus = CpuPolicy::online().unwrap();
    let mut maps = dp.maps().unwrap();
    maps.sync(&entries(plan, &cpus).unwrap()).unwrap();
    for &c in cpus.cpus() {
        maps.enable_cpu(c, 2048).unwrap();
    }
    let xdp = pins.join("xdp");
    dp.xdp_mut().pin(&xdp).unwrap();
    let ifs = interfaces(&plan.config).unwrap();
    let tc = dp.tc_mut();
    lqos_bpf::sys::in_netns(Some(ns), || {
        for i in &ifs {
            let ifindex = lqos_bpf::attach::ifindex(&i.name)?;
            maps.set_iface(ifindex, &i.config)?;
            // bpf_tc_hook_create: the clsact qdisc.
            aya::programs::tc::qdisc_add_clsact(&i.name).unwrap();
            let id = tc
                .attach_with_options(
                    &i.name,
                    aya::programs::TcAttachType::Egress,
                    aya::programs::tc::TcAttachOptions::Netlink(aya::programs::tc::NlOptions {
                        priority: LIBREQOS_PREF,
                        handle: aya::programs::tc::TcHandle::from(1),
                        classid: None,
                    }),
                )
                .unwrap();
            std::mem::forget(tc.take_link(id).unwrap());
            let o = Command::new("ip")
                .args(["link", "set", "dev", &i.name, "xdpdrv", "pinned"])
                .arg(&xdp)
                .output()
                .unwrap();
            assert!(o.status.success(), "ip link set xdpdrv: {o:?}");
        }
        Ok(())
    })
    .unwrap();
    dp
}
