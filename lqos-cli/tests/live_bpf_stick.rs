//! lqos's eBPF classifier on a stick (LibreQoS's `[single_interface]` with
//! `internet_vlan` and `network_vlan`), with real 802.1Q and 802.1ad
//! (QinQ) tags, through the interfaces named by `LQOS_LIVE_IFACES` (the
//! lab's virtio NICs, wired to each other, 16 queues, native XDP; `cargo
//! xtask lab test` runs this binary there with the stock kernel's 8021q).
//!
//! The first interface is the stick, in a shaper namespace: VLAN 100
//! faces the internet, VLAN 200 (802.1Q) and S-VLAN 300 with C-VLAN 10
//! (802.1ad, QinQ) the subscribers. The second interface, across the
//! wire, carries the same tags to an internet and a subscriber namespace.
//! `lqos apply --classifier bpf` shapes both directions of a VLAN and a
//! QinQ subscriber: each flow, offered at twice its ceil, arrives at its
//! ceil +/-10%, in its direction's half of the queues. Skipped without
//! `LQOS_LIVE_IFACES` (never touches the host's interfaces) or without
//! 8021q.

mod common;

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{lqos_bin, ok};
use lqos_apply::netns::{require_netns, unique_name, PrivateBpf, ScratchNetns};
use lqos_apply::traffic::{
    assert_at_ceils, class_bytes, receive_at, secs, send_flows, Arrivals, Flow, StallWatch, Window,
    PORT, WIRE,
};

/// A subscriber: id, download and upload ceil (kbit), address.
const SUBS: [(&str, u64, u64, &str); 2] = [
    ("vlan200", 300, 200, "100.64.0.7"),
    ("qinq300.10", 250, 150, "100.64.3.7"),
];
const INET: &str = "192.0.2.2";

/// Moves the interfaces back to the namespace they came from, up, when
/// the test ends (the lab runs other tests on them afterwards).
struct GiveBack<'a> {
    moved: Vec<(&'a ScratchNetns, String)>,
}

impl Drop for GiveBack<'_> {
    fn drop(&mut self) {
        for (ns, dev) in &self.moved {
            let _ = ns.ip(&["link", "set", dev, "netns", "1"]);
            let _ = Command::new("ip").args(["link", "set", dev, "up"]).status();
        }
    }
}

/// `ip -n NS` with its output.
fn ip(ns: &ScratchNetns, args: &[&str]) {
    ns.ip(args)
        .unwrap_or_else(|e| panic!("ip -n {} {}: {e}", ns.name(), args.join(" ")));
}

/// `sh -c SCRIPT` in namespace `ns` (`ip netns exec`: its own /sys).
fn sh(ns: &ScratchNetns, script: &str) {
    let o = Command::new("ip")
        .args(["netns", "exec", ns.name(), "sh", "-c", script])
        .output()
        .unwrap();
    assert!(o.status.success(), "{script}: {o:?}");
}

fn have_8021q() -> bool {
    Path::new("/proc/net/vlan").exists()
        || Command::new("modprobe")
            .arg("8021q")
            .status()
            .is_ok_and(|s| s.success())
}

#[test]
fn a_stick_shapes_vlan_and_qinq_subscribers_both_ways_at_their_ceils() {
    let Ok(ifaces) = std::env::var("LQOS_LIVE_IFACES") else {
        eprintln!("skipping: LQOS_LIVE_IFACES names no interfaces (the lab sets it)");
        return;
    };
    if !require_netns("live_bpf_stick") {
        return;
    }
    if !have_8021q() {
        if std::env::var("LQOS_REQUIRE_NETNS").as_deref() == Ok("1") {
            panic!("live_bpf_stick: 8021q is required (LQOS_REQUIRE_NETNS=1) but unavailable");
        }
        eprintln!("skipping live_bpf_stick: no 8021q (VLAN devices) in this kernel");
        return;
    }
    let names: Vec<&str> = ifaces.split(',').filter(|s| !s.is_empty()).collect();
    let (stick, far) = (names[0], names[1]);
    let tag = "lqos-stick";
    let shaper = ScratchNetns::create(&unique_name(tag, "shaper")).unwrap();
    let wire = ScratchNetns::create(&unique_name(tag, "wire")).unwrap();
    let inet = ScratchNetns::create(&unique_name(tag, "inet")).unwrap();
    let sub = ScratchNetns::create(&unique_name(tag, "sub")).unwrap();
    for (dev, ns) in [(stick, &shaper), (far, &wire)] {
        let o = Command::new("ip")
            .args(["link", "set", dev, "netns", ns.name()])
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
    }
    let _give_back = GiveBack {
        moved: vec![(&shaper, stick.to_string()), (&wire, far.to_string())],
    };

    // The stick: VLAN 100 (internet), 200 (subscribers), S-VLAN 300 with
    // C-VLAN 10 (QinQ subscribers).
    let vlans = |ns: &ScratchNetns, dev: &str| {
        ip(ns, &["link", "set", dev, "up"]);
        for (name, proto, id) in [("100", "802.1Q", "100"), ("200", "802.1Q", "200")] {
            ip(
                ns,
                &[
                    "link",
                    "add",
                    "link",
                    dev,
                    "name",
                    &format!("{dev}.{name}"),
                    "type",
                    "vlan",
                    "proto",
                    proto,
                    "id",
                    id,
                ],
            );
        }
        let s = format!("{dev}.300");
        ip(
            ns,
            &[
                "link", "add", "link", dev, "name", &s, "type", "vlan", "proto", "802.1ad", "id",
                "300",
            ],
        );
        ip(ns, &["link", "set", &s, "up"]);
        ip(
            ns,
            &[
                "link",
                "add",
                "link",
                &s,
                "name",
                &format!("{s}.10"),
                "type",
                "vlan",
                "proto",
                "802.1Q",
                "id",
                "10",
            ],
        );
    };
    vlans(&shaper, stick);
    vlans(&wire, far);
    for (dev, a) in [
        (format!("{stick}.100"), "192.0.2.1/24"),
        (format!("{stick}.200"), "100.64.0.254/24"),
        (format!("{stick}.300.10"), "100.64.3.254/24"),
    ] {
        ip(&shaper, &["addr", "add", a, "dev", &dev]);
        ip(&shaper, &["link", "set", &dev, "up"]);
    }
    sh(&shaper, "sysctl -qw net.ipv4.ip_forward=1");
    // Across the wire: VLAN 100 to the internet, the others to the
    // subscribers. The senders fill in their checksums (a virtio NIC's
    // checksum offload is left to the host, whose tap hands the frame to
    // the other NIC as it is).
    sh(&wire, &format!("ethtool -K {far} tx off >/dev/null"));
    for (dev, to) in [
        (format!("{far}.100"), &inet),
        (format!("{far}.200"), &sub),
        (format!("{far}.300.10"), &sub),
    ] {
        ip(&wire, &["link", "set", &dev, "netns", to.name()]);
    }
    ip(
        &inet,
        &[
            "addr",
            "add",
            &format!("{INET}/24"),
            "dev",
            &format!("{far}.100"),
        ],
    );
    ip(&inet, &["link", "set", &format!("{far}.100"), "up"]);
    ip(&inet, &["route", "add", "default", "via", "192.0.2.1"]);
    for (dev, a, gw, table) in [
        (format!("{far}.200"), SUBS[0].3, "100.64.0.254", "10"),
        (format!("{far}.300.10"), SUBS[1].3, "100.64.3.254", "11"),
    ] {
        ip(&sub, &["addr", "add", &format!("{a}/24"), "dev", &dev]);
        ip(&sub, &["link", "set", &dev, "up"]);
        ip(
            &sub,
            &[
                "route", "add", "default", "via", gw, "dev", &dev, "table", table,
            ],
        );
        ip(&sub, &["rule", "add", "from", a, "table", table]);
    }

    // The inputs: a stick, two circuits.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("network.json"),
        r#"{"Site": {"downloadBandwidthMbps": 40, "uploadBandwidthMbps": 40, "children": {}}}"#,
    )
    .unwrap();
    std::fs::write(
        d.join("lqos.conf"),
        format!(
            "[single_interface]\ninterface = \"{stick}\"\ninternet_vlan = 100\nnetwork_vlan = 200\n\n\
             [queues]\nuplink_bandwidth_mbps = 50\ndownlink_bandwidth_mbps = 50\n\
             generated_pn_download_mbps = 50\ngenerated_pn_upload_mbps = 50\n\n\
             [lqos]\nclassifier = \"bpf\"\n"
        ),
    )
    .unwrap();
    let mut csv = String::from(
        "Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,MAC,IPv4,IPv6,\
         Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,Comment\n",
    );
    for (id, down, up, a) in SUBS {
        csv += &format!(
            "{id},{id},{id}-1,cpe,Site,,{a},,0.1,0.1,{},{},\n",
            down as f64 / 1000.0,
            up as f64 / 1000.0
        );
    }
    std::fs::write(d.join("ShapedDevices.csv"), csv).unwrap();
    let bpf = PrivateBpf::new().unwrap();
    let mut c = Command::new(lqos_bin());
    c.args([
        "apply",
        "--netns",
        shaper.name(),
        "--state-dir",
        "st",
        "--sqm",
        "pfifo limit 20",
    ])
    .current_dir(d);
    let out = ok(&bpf.output(c).unwrap());
    eprintln!("{out}");
    assert!(
        out.contains(&format!("{stick}: bpf classifier: tc attached")),
        "{out}"
    );

    // Both directions of both subscribers, at twice their ceils.
    let start = Instant::now();
    let stalls = StallWatch::start(start);
    let stop = Arc::new(AtomicBool::new(false));
    let got: Arrivals = Arc::default();
    let inet_ip: IpAddr = INET.parse().unwrap();
    let mut down = Vec::new();
    let mut up = Vec::new();
    let mut ceils = Vec::new();
    for (i, (id, dn, upk, a)) in SUBS.iter().enumerate() {
        let host: IpAddr = a.parse().unwrap();
        down.push(Flow {
            key: format!("down {id}"),
            src: None,
            dst: SocketAddr::from((host, PORT)),
            kbit: 2 * dn,
            priority: None,
            dev: None,
        });
        up.push(Flow {
            key: format!("up {id}"),
            src: Some(SocketAddr::from((host, 0))),
            dst: SocketAddr::from((inet_ip, PORT + 1 + i as u16)),
            kbit: 2 * upk,
            priority: None,
            dev: None,
        });
        ceils.push((format!("down {id}"), *dn));
        ceils.push((format!("up {id}"), *upk));
    }
    let at = |f: &[Flow]| -> Vec<(String, SocketAddr)> {
        f.iter().map(|f| (f.key.clone(), f.dst)).collect()
    };
    let mut rx = receive_at(sub.name(), start, stop.clone(), got.clone(), at(&down));
    rx.extend(receive_at(
        inet.name(),
        start,
        stop.clone(),
        got.clone(),
        at(&up),
    ));
    std::thread::sleep(Duration::from_millis(300));
    let tx = [
        send_flows(inet.name(), start, down, stop.clone()),
        send_flows(sub.name(), start, up, stop.clone()),
    ];
    std::thread::sleep(secs(8.0).saturating_sub(start.elapsed()));
    stop.store(true, Ordering::Relaxed);
    let mut offered = std::collections::BTreeMap::new();
    for t in tx {
        offered.extend(t.join().unwrap());
    }
    for r in rx {
        r.join().unwrap();
    }
    let got = got.lock().unwrap().clone();
    let stalls = stalls.finish();
    let w = Window {
        from: secs(3.0),
        to: secs(7.5),
        skip: &stalls,
    };
    assert_at_ceils("stick", &ceils, &offered, &got, |_| WIRE, w);

    // Each direction in its own half of the queues, in its circuit's
    // class: the classids of the plan applied.
    let state = lqos_apply::state::NetnsState::new(d.join("st"), Some(shaper.name()));
    let plan = lqos_apply::saved::load_saved_plan(&state)
        .unwrap()
        .unwrap()
        .plan;
    let half = plan.config.queues_per_direction();
    let bytes = class_bytes(&shaper, stick);
    for (id, _, _, a) in SUBS {
        let e = plan.ip_map.lookup(a.parse().unwrap()).unwrap();
        assert!(
            u32::from(e.download.classid.major()) <= half
                && u32::from(e.upload.classid.major()) > half
        );
        for (dir, classid) in [("down", e.download.classid), ("up", e.upload.classid)] {
            let key = format!("{dir} {id}");
            let b = bytes.get(&classid).copied().unwrap_or(0);
            let delivered = got[&key].len() as u64 * WIRE;
            assert!(
                b as f64 >= 0.9 * delivered as f64,
                "{key}: class {classid} carried {b} bytes, the flow delivered {delivered}"
            );
        }
    }
    // XDP steered them (native on the lab's NICs).
    let counters = {
        let mut c = Command::new(lqos_bin());
        c.args([
            "stats",
            "--netns",
            shaper.name(),
            "--state-dir",
            "st",
            "--json",
            "--interval",
            "0",
        ])
        .current_dir(d);
        ok(&bpf.output(c).unwrap())
    };
    let v: serde_json::Value = serde_json::from_str(&counters).unwrap();
    let dp = &v["datapath"]["total"];
    eprintln!("the data path's counters: {dp}");
    assert!(
        dp["classified"].as_u64().unwrap() > 0
            && dp["redirected"].as_u64().unwrap() + dp["local"].as_u64().unwrap() > 0,
        "{v}"
    );
}
