//! Captures the kernel's replies to a statistics dump as golden files for
//! `src/netlink/stats.rs`' tests: every reply message of `tc -s qdisc show
//! dev DEV` (or `tc -s class show dev DEV parent MAJOR:`), whole, as hex,
//! under a `# tc command:` header (the netlink port id zeroed).
//!
//! ```text
//! capture_stats DEV qdisc > stats_x.hex;  tc -s -j qdisc show dev DEV > stats_x.json
//! capture_stats DEV class 1: > stats_y.hex; tc -s -j class show dev DEV parent 1: > stats_y.json
//! ```
//!
//! Run it in the namespace of `DEV` (`ip netns exec NS capture_stats ...`).

use lqos_apply::netlink::NetlinkSocket;
use lqos_tc::TcHandle;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (dev, what) = match args.as_slice() {
        [d, w, ..] => (d.as_str(), w.as_str()),
        _ => return Err("usage: capture_stats DEV qdisc | DEV class MAJOR:".into()),
    };
    let mut nl = NetlinkSocket::open()?;
    let link = nl.link(dev)?;
    let (command, class_of) = match (what, args.get(2)) {
        ("qdisc", _) => (format!("tc -s qdisc show dev {dev}"), None),
        ("class", Some(p)) => {
            let h: TcHandle = p.parse()?;
            (format!("tc -s class show dev {dev} parent {p}"), Some(h))
        }
        _ => return Err("usage: capture_stats DEV qdisc | DEV class MAJOR:".into()),
    };
    let raw = nl.dump_raw(class_of, link.ifindex)?;
    println!("# tc command: {command}");
    println!(
        "# {} reply message(s), captured by examples/capture_stats.rs",
        raw.len()
    );
    for m in raw {
        println!("#");
        for line in m.chunks(16) {
            let words: Vec<String> = line.iter().map(|b| format!("{b:02x}")).collect();
            println!("{}", words.join(" "));
        }
    }
    Ok(())
}
