//! Test traffic into a fraction of the circuits of a loaded plan, for the
//! lazy-leaf measurement in the stock-kernel lab (`lab/lazy.sh`).
//!
//! ```text
//! lab_traffic STATE_DIR EVERY SECONDS DEV=DST_IP [DEV=DST_IP ...]
//! # e.g. lab_traffic /tmp/lqos-lazy/state-lazy 20 60 ens19=10.77.0.99 ens20=10.78.0.99
//! ```
//!
//! Reads the last good plan from `STATE_DIR` (what `lqos watch` or `lqos
//! apply` loaded), takes every `EVERY`-th circuit leaf of each named
//! interface (plan order; index 0, EVERY, 2*EVERY, ..., so the circuits of
//! `EVERY = 20` are also among those of `EVERY = 5`) and, for `SECONDS`,
//! sends each of them one 200-byte UDP datagram every 200 ms out of `DEV`
//! to `DST_IP`, with `SO_PRIORITY` set to the circuit's classid (HTB takes a
//! priority equal to one of its classids as that class).
//!
//! HTB sees the packet only on the TX queue that holds the circuit's HTB
//! (major `q+1` on queue `q`), and the kernel picks the queue by CPU and
//! flow hash. So the datagram's UDP destination port is `10000 + major`,
//! and the lab script maps each port to its queue with one egress flower
//! filter per queue (`skbedit queue_mapping`, honoured since Linux 6.0):
//!
//! ```text
//! tc filter add dev ens19 egress pref 100 protocol ip flower ip_proto udp dst_port 10001 action skbedit queue_mapping 0
//! ```
//!
//! The destination needs a route and a neighbour entry (`ip addr add
//! 10.77.0.1/24 dev ens19; ip neigh add 10.77.0.99 lladdr 02:00:00:00:00:99
//! dev ens19 nud permanent`). Prints how many circuits it feeds, then runs
//! until SECONDS are over (or it is killed). Needs root (SO_BINDTODEVICE).

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use lqos_tc::TcHandle;

fn usage() -> ! {
    eprintln!("usage: lab_traffic STATE_DIR EVERY SECONDS DEV=DST_IP [DEV=DST_IP ...]");
    std::process::exit(2)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 4 {
        usage();
    }
    let every: usize = args[1].parse().unwrap_or_else(|_| usage());
    let seconds: f64 = args[2].parse().unwrap_or_else(|_| usage());
    if every == 0 {
        usage();
    }
    let state = lqos_apply::state::NetnsState::new(&args[0], None);
    let plan = lqos_apply::saved::load_saved_plan(&state)
        .expect("reading the saved plan")
        .unwrap_or_else(|| panic!("no saved plan in {}", args[0]))
        .plan;
    let mut feeds: Vec<(UdpSocket, Ipv4Addr, Vec<TcHandle>)> = Vec::new();
    for spec in &args[3..] {
        let (dev, dst) = spec.split_once('=').unwrap_or_else(|| usage());
        let dst: Ipv4Addr = dst.parse().unwrap_or_else(|_| usage());
        let ip = plan
            .interfaces
            .iter()
            .find(|i| i.dev == dev)
            .unwrap_or_else(|| panic!("the plan has no interface {dev}"));
        let classes: Vec<TcHandle> = lqos_tc::rules::circuit_leaves(ip)
            .step_by(every)
            .map(|q| q.parent)
            .collect();
        let s = UdpSocket::bind("0.0.0.0:0").expect("binding a UDP socket");
        nix::sys::socket::setsockopt(
            &s,
            nix::sys::socket::sockopt::BindToDevice,
            &std::ffi::OsString::from(dev),
        )
        .unwrap_or_else(|e| panic!("SO_BINDTODEVICE {dev}: {e}"));
        println!(
            "lab_traffic: {} circuits on {dev} (every {every}th of {})",
            classes.len(),
            lqos_tc::rules::circuit_leaves(ip).count()
        );
        feeds.push((s, dst, classes));
    }
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    let payload = [0u8; 200];
    let mut errors = 0u64;
    while Instant::now() < end {
        for (s, dst, classes) in &feeds {
            for c in classes {
                let prio = c.raw() as i32;
                nix::sys::socket::setsockopt(s, nix::sys::socket::sockopt::Priority, &prio)
                    .expect("SO_PRIORITY");
                let to = SocketAddr::from((*dst, 10_000 + c.major()));
                if s.send_to(&payload, to).is_err() {
                    errors += 1;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    if errors > 0 {
        eprintln!("lab_traffic: {errors} datagrams were not sent");
    }
}
