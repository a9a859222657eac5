//! Load-speed measurement (not a pass/fail test; needs root):
//!
//! ```text
//! cargo test --release -p lqos-apply --test netlink_perf -- --ignored --nocapture
//! ```
//!
//! Env: `LQOS_PERF_CIRCUITS` (default 20000), `LQOS_PERF_QUEUES` (16),
//! `LQOS_PERF_REPEAT` (1). Loads the same LibreQoS-shaped tree (mq, one HTB
//! per queue, circuits round-robin, each an HTB class + pfifo leaf) into a
//! fresh veth in a fresh network namespace with: the netlink loader
//! (default batching), the netlink loader one message per `sendmsg`, and
//! `tc -b`; prints wall, user and sys time, messages/s, the user-space
//! share, and the time to dump the tree back; then `class change` of every
//! circuit class of the loaded tree (per-message overhead without the
//! kernel's O(n^2) class creation).
//!
//! Measured 2026-11-29 (kernel 6.18, 2 shared cores, other jobs running),
//! 20000 circuits / 16 queues = 40049 messages, 3 rounds:
//! netlink batch=128 7.7-8.8 s wall (sys 7.0-8.3 s, user <= 0.02 s),
//! tc -b 9.3-14.3 s (sys 7.2-9.4 s, user 0.18-0.23 s = 2-3 %);
//! 20000 class changes: netlink 0.75-0.81 s, tc -b 0.95-1.02 s (user 7-10 %).
//! Kernel time dominates and is the same work for every loader.

mod common;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Instant;

use lqos_apply::netlink::{encode_op, NetlinkSocket, SendOptions};
use lqos_model::Rate;
use lqos_tc::ops::QdiscKind;
use lqos_tc::{TcHandle, TcOp};

struct Netns(String);

impl Netns {
    fn create(tag: &str) -> Netns {
        let name = format!("lqos-perf-{}-{tag}", std::process::id());
        ip(&["netns", "add", &name]);
        let ns = Netns(name);
        ip(&[
            "-n",
            &ns.0,
            "link",
            "add",
            "ens19",
            "numtxqueues",
            "16",
            "type",
            "veth",
            "peer",
            "name",
            "ens20",
            "numtxqueues",
            "16",
        ]);
        ip(&["-n", &ns.0, "link", "set", "ens19", "up"]);
        ns
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn ip(args: &[&str]) {
    let st = Command::new("ip").args(args).status().expect("ip");
    assert!(st.success(), "ip {}", args.join(" "));
}

fn plan(queues: u16, circuits: usize) -> Vec<TcOp> {
    common::tree_ops(
        queues,
        circuits,
        common::varied_rates,
        QdiscKind::Pfifo { limit: Some(100) },
    )
}

/// The same ops as `tc -b` lines.
fn tc_batch(dev: &str, ops: &[TcOp]) -> String {
    let mut s = String::new();
    for op in ops {
        let line = match op {
            TcOp::ReplaceQdisc(q) | TcOp::AddQdisc(q) => {
                let verb = if matches!(op, TcOp::ReplaceQdisc(_)) {
                    "replace"
                } else {
                    "add"
                };
                let parent = if q.parent == TcHandle::ROOT {
                    "root".to_string()
                } else {
                    format!("parent {}", q.parent)
                };
                let kind = match &q.kind {
                    QdiscKind::Mq => "mq".to_string(),
                    QdiscKind::Htb(h) => format!("htb default {:x}", h.default_minor),
                    QdiscKind::Pfifo { limit: Some(l) } => format!("pfifo limit {l}"),
                    k => panic!("{k:?}"),
                };
                format!("qdisc {verb} dev {dev} {parent} handle {} {kind}", q.handle)
            }
            TcOp::AddClass(c) | TcOp::ChangeClass(c) => format!(
                "class {} dev {dev} parent {} classid {} htb rate {}bit ceil {}bit quantum {} prio {}",
                if matches!(op, TcOp::AddClass(_)) { "add" } else { "change" },
                c.parent,
                c.classid,
                c.htb.rate.bps(),
                c.htb.ceil.bps(),
                c.htb.quantum,
                c.htb.prio
            ),
            other => panic!("{other:?}"),
        };
        s.push_str(&line);
        s.push('\n');
    }
    s
}

/// (utime, stime, cutime, cstime) in seconds from a /proc stat file.
fn cpu(path: &str) -> [f64; 4] {
    let s = std::fs::read_to_string(path).unwrap();
    let after = &s[s.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    // Fields 14..17 of stat(5); `after` starts at field 3.
    let tick = 100.0; // USER_HZ
    [11, 12, 13, 14].map(|i| f[i].parse::<f64>().unwrap() / tick)
}

struct Run {
    name: &'static str,
    msgs: usize,
    wall: f64,
    user: f64,
    sys: f64,
    dump: f64,
    classes: usize,
    delete: f64,
}

/// Deletes the whole tree (timed) and lets deferred kernel work settle.
fn reset(nl: &mut NetlinkSocket, ifindex: i32) -> f64 {
    let t = Instant::now();
    nl.send_ops(
        ifindex,
        &[TcOp::delete_root()],
        &SendOptions::default(),
        &mut |_| {},
    )
    .unwrap_or_else(|f| panic!("{f}"));
    let d = t.elapsed().as_secs_f64();
    std::thread::sleep(std::time::Duration::from_secs(2));
    d
}

fn run_netlink(name: &'static str, ns: &Netns, ops: &[TcOp], opts: &SendOptions) -> Run {
    let mut nl = NetlinkSocket::open_in_netns(&ns.0).unwrap();
    let link = nl.link("ens19").unwrap();
    let c0 = cpu("/proc/thread-self/stat");
    let t0 = Instant::now();
    let stats = nl
        .send_ops(link.ifindex, ops, opts, &mut |_| {})
        .unwrap_or_else(|f| panic!("{f}"));
    let wall = t0.elapsed().as_secs_f64();
    let c1 = cpu("/proc/thread-self/stat");
    assert_eq!(stats.acked, ops.len());
    let t1 = Instant::now();
    let tree = nl.dump(link.ifindex).unwrap();
    let dump = t1.elapsed().as_secs_f64();
    let delete = reset(&mut nl, link.ifindex);
    Run {
        name,
        msgs: ops.len(),
        wall,
        user: c1[0] - c0[0],
        sys: c1[1] - c0[1],
        dump,
        classes: tree.classes.len(),
        delete,
    }
}

fn run_tc(ns: &Netns, ops: &[TcOp]) -> Run {
    let text = tc_batch("ens19", ops);
    let c0 = cpu("/proc/self/stat");
    let t0 = Instant::now();
    let mut child = Command::new("ip")
        .args(["netns", "exec", &ns.0, "tc", "-b", "-"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let st = child.wait().unwrap();
    let wall = t0.elapsed().as_secs_f64();
    let c1 = cpu("/proc/self/stat");
    assert!(st.success());
    let mut nl = NetlinkSocket::open_in_netns(&ns.0).unwrap();
    let link = nl.link("ens19").unwrap();
    let t1 = Instant::now();
    let tree = nl.dump(link.ifindex).unwrap();
    let dump = t1.elapsed().as_secs_f64();
    let delete = reset(&mut nl, link.ifindex);
    Run {
        name: "tc -b",
        msgs: ops.len(),
        wall,
        user: c1[2] - c0[2],
        sys: c1[3] - c0[3],
        dump,
        classes: tree.classes.len(),
        delete,
    }
}

#[test]
#[ignore = "measurement; run with --ignored --nocapture as root"]
fn load_speed() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("SKIP load_speed: not root");
        return;
    }
    let env = |k: &str, d: usize| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let circuits = env("LQOS_PERF_CIRCUITS", 20_000);
    let queues = env("LQOS_PERF_QUEUES", 16) as u16;
    let repeat = env("LQOS_PERF_REPEAT", 1);
    let ops = plan(queues, circuits);

    // Pure user-space cost: encoding every op once.
    let mut buf = Vec::with_capacity(256 << 10);
    let t = Instant::now();
    let mut bytes = 0;
    for (i, op) in ops.iter().enumerate() {
        buf.clear();
        encode_op(op, 3, i as u32, &mut buf).unwrap();
        bytes += buf.len();
    }
    let enc = t.elapsed().as_secs_f64();
    println!(
        "encode: {} ops, {} bytes in {:.1} ms ({:.0} ns/op)",
        ops.len(),
        bytes,
        enc * 1e3,
        enc * 1e9 / ops.len() as f64
    );

    let ns = Netns::create("all");
    let mut runs = Vec::new();
    // Rotate the order each round so no loader always runs first.
    for round in 0..repeat {
        for k in 0..3 {
            runs.push(match (round + k) % 3 {
                0 => run_netlink("netlink batch=128", &ns, &ops, &SendOptions::default()),
                1 => run_netlink(
                    "netlink batch=1",
                    &ns,
                    &ops,
                    &SendOptions {
                        max_in_flight: 1,
                        batch: 1,
                    },
                ),
                _ => run_tc(&ns, &ops),
            });
        }
    }
    runs.sort_by_key(|r| r.name);
    // Per-message overhead without the kernel's O(n^2) class creation:
    // `class change` of every circuit class of a loaded tree.
    let changes: Vec<TcOp> = ops
        .iter()
        .filter_map(|op| match op {
            TcOp::AddClass(c) if c.classid.minor() >= 3 => {
                let mut c = c.clone();
                c.htb.rate = Rate::from_bps(c.htb.rate.bps() + 8_000);
                Some(TcOp::ChangeClass(c))
            }
            _ => None,
        })
        .collect();
    let mut nl = NetlinkSocket::open_in_netns(&ns.0).unwrap();
    let link = nl.link("ens19").unwrap();
    nl.send_ops(link.ifindex, &ops, &SendOptions::default(), &mut |_| {})
        .unwrap_or_else(|f| panic!("{f}"));
    let mut change_runs = Vec::new();
    for _ in 0..repeat {
        for (name, opts) in [
            ("netlink batch=128", SendOptions::default()),
            (
                "netlink batch=1",
                SendOptions {
                    max_in_flight: 1,
                    batch: 1,
                },
            ),
        ] {
            let c0 = cpu("/proc/thread-self/stat");
            let t0 = Instant::now();
            nl.send_ops(link.ifindex, &changes, &opts, &mut |_| {})
                .unwrap_or_else(|f| panic!("{f}"));
            let wall = t0.elapsed().as_secs_f64();
            let c1 = cpu("/proc/thread-self/stat");
            change_runs.push((name, wall, c1[0] - c0[0], c1[1] - c0[1]));
        }
        let text = tc_batch("ens19", &changes);
        let c0 = cpu("/proc/self/stat");
        let t0 = Instant::now();
        let mut child = Command::new("ip")
            .args(["netns", "exec", &ns.0, "tc", "-b", "-"])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
        assert!(child.wait().unwrap().success());
        let wall = t0.elapsed().as_secs_f64();
        let c1 = cpu("/proc/self/stat");
        change_runs.push(("tc -b", wall, c1[2] - c0[2], c1[3] - c0[3]));
    }

    println!(
        "{circuits} circuits over {queues} HTB queues: {} messages ({} classes)",
        ops.len(),
        runs[0].classes
    );
    println!(
        "{:<20} {:>8} {:>8} {:>8} {:>10} {:>8} {:>8} {:>8}",
        "loader", "wall s", "user s", "sys s", "msgs/s", "user %", "dump s", "del s"
    );
    for r in &runs {
        println!(
            "{:<20} {:>8.3} {:>8.2} {:>8.2} {:>10.0} {:>7.1}% {:>8.3} {:>8.3}",
            r.name,
            r.wall,
            r.user,
            r.sys,
            r.msgs as f64 / r.wall,
            100.0 * r.user / (r.user + r.sys).max(1e-9),
            r.dump,
            r.delete
        );
    }
    println!("class change of {} circuit classes:", changes.len());
    for (name, wall, user, sys) in change_runs {
        println!(
            "{:<20} {:>8.3} {:>8.2} {:>8.2} {:>10.0} {:>7.1}%",
            name,
            wall,
            user,
            sys,
            changes.len() as f64 / wall,
            100.0 * user / (user + sys).max(1e-9)
        );
    }
}
