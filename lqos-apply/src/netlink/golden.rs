//! Test support (feature `test-util`) for the golden-byte tests beside each
//! kind and in `tests/netlink_golden.rs`: the `.hex`
//! captures of `tests/fixtures/netlink` (written by `capture.sh` /
//! `capture_filters.sh` with strace: a `# tc command: ...` header and the
//! bytes iproute2 6.1's `tc` sent, as hex words). Seq and ifindex are taken
//! from the capture.
//!
//! Normalisation, only where lqos deliberately differs, done explicitly on
//! tc's bytes before an exact comparison:
//! - HTB classes: tc appends `TCA_HTB_RTAB` and `TCA_HTB_CTAB` (1 KiB rate
//!   tables each). With linklayer ethernet the kernel ignores them, so lqos
//!   omits them: [`strip_htb_rate_tables`].
//! - HTB classes whose default burst is below 1 µs of transmit time (rates
//!   above ~12.8 Gbit): tc 6.1 truncates the time to whole µs and sends
//!   `buffer`/`cbuffer` = 0 ticks; lqos sends the untruncated tick count:
//!   [`set_htb_buffers`] patches tc's zeros with lqos's values after
//!   asserting they were zero.

use std::path::PathBuf;

use lqos_model::Rate;
use lqos_tc::ops::{Class, HtbClass, HtbQdisc, Qdisc, QdiscKind};
use lqos_tc::{TcHandle, TcOp};

use super::op::encode_op;

const TCA_OPTIONS: u16 = 2;
const TCA_HTB_PARMS: u16 = 1;
const TCA_HTB_CTAB: u16 = 3;
const TCA_HTB_RTAB: u16 = 4;

/// One capture: the tc command it came from and the netlink message.
pub struct Golden {
    /// The `tc` command line that sent these bytes.
    pub command: String,
    /// The whole netlink message (header included).
    pub bytes: Vec<u8>,
}

/// The directory holding the captures.
pub fn fixtures_dir() -> PathBuf {
    [env!("CARGO_MANIFEST_DIR"), "tests/fixtures/netlink"]
        .iter()
        .collect()
}

/// Reads capture `name` (without `.hex`); panics with the file name on a
/// missing header, a bad hex word or a length that disagrees with
/// `nlmsg_len`.
pub fn load(name: &str) -> Golden {
    let path = fixtures_dir().join(format!("{name}.hex"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let mut command = String::new();
    let mut bytes = Vec::new();
    for line in text.lines() {
        if let Some(c) = line.strip_prefix("# tc command: ") {
            command = c.to_string();
        } else if line.starts_with('#') || line.trim().is_empty() {
            continue;
        } else {
            for b in line.split_whitespace() {
                bytes
                    .push(u8::from_str_radix(b, 16).unwrap_or_else(|e| panic!("{name}: {b}: {e}")));
            }
        }
    }
    assert!(!command.is_empty(), "{name}: no '# tc command:' header");
    let len = u32::from_ne_bytes(bytes[0..4].try_into().unwrap()) as usize;
    assert_eq!(len, bytes.len(), "{name}: nlmsg_len vs captured bytes");
    Golden { command, bytes }
}

/// A capture of a dump's replies (`stats/NAME.hex`, written by
/// `capture_stats.sh` / `lab/capture-stats.sh`): the tc command and every
/// reply message, whole.
pub fn load_replies(name: &str) -> (String, Vec<Vec<u8>>) {
    let path = fixtures_dir().join("stats").join(format!("{name}.hex"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let command = text
        .lines()
        .find_map(|l| l.strip_prefix("# tc command: "))
        .unwrap_or_else(|| panic!("{name}: no '# tc command:' header"))
        .to_string();
    let mut msgs = Vec::new();
    let mut cur: Vec<u8> = Vec::new();
    for line in text.lines() {
        if line.starts_with('#') {
            if !cur.is_empty() {
                msgs.push(std::mem::take(&mut cur));
            }
            continue;
        }
        for b in line.split_whitespace() {
            cur.push(u8::from_str_radix(b, 16).unwrap_or_else(|e| panic!("{name}: {b}: {e}")));
        }
    }
    if !cur.is_empty() {
        msgs.push(cur);
    }
    for m in &msgs {
        let len = u32::from_ne_bytes(m[0..4].try_into().unwrap()) as usize;
        assert_eq!(len, m.len(), "{name}: nlmsg_len vs captured bytes");
    }
    assert!(!msgs.is_empty(), "{name}: no message");
    (command, msgs)
}

/// A text file beside the captures (`stats/NAME`): what tc printed.
pub fn load_text(name: &str) -> String {
    let path = fixtures_dir().join("stats").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"))
}

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_ne_bytes([b[o], b[o + 1]])
}

/// Rewrites tc's message without the HTB rate tables inside TCA_OPTIONS,
/// fixing the nest and message lengths.
pub fn strip_htb_rate_tables(msg: &[u8]) -> Vec<u8> {
    let mut out = msg[..36].to_vec(); // nlmsghdr + tcmsg
    let mut off = 36;
    while off < msg.len() {
        let len = u16_at(msg, off) as usize;
        let ty = u16_at(msg, off + 2);
        let padded = (len + 3) & !3;
        if ty == TCA_OPTIONS {
            let nest_pos = out.len();
            out.extend_from_slice(&msg[off..off + 4]);
            let mut o = off + 4;
            while o < off + len {
                let l = u16_at(msg, o) as usize;
                let t = u16_at(msg, o + 2);
                let p = (l + 3) & !3;
                if t != TCA_HTB_RTAB && t != TCA_HTB_CTAB {
                    out.extend_from_slice(&msg[o..o + p]);
                }
                o += p;
            }
            let nest_len = (out.len() - nest_pos) as u16;
            out[nest_pos..nest_pos + 2].copy_from_slice(&nest_len.to_ne_bytes());
        } else {
            out.extend_from_slice(&msg[off..off + padded]);
        }
        off += padded;
    }
    let total = out.len() as u32;
    out[0..4].copy_from_slice(&total.to_ne_bytes());
    out
}

/// Offset of `struct tc_htb_opt` inside a (stripped) class message.
pub fn htb_parms_offset(msg: &[u8]) -> usize {
    let mut off = 36;
    while off < msg.len() {
        let len = u16_at(msg, off) as usize;
        if u16_at(msg, off + 2) == TCA_OPTIONS {
            let mut o = off + 4;
            while o < off + len {
                if u16_at(msg, o + 2) == TCA_HTB_PARMS {
                    return o + 4;
                }
                o += (u16_at(msg, o) as usize + 3) & !3;
            }
        }
        off += (len + 3) & !3;
    }
    panic!("no TCA_HTB_PARMS");
}

/// Replaces tc's truncated-to-zero buffer/cbuffer ticks.
pub fn set_htb_buffers(msg: &mut [u8], buffer: u32, cbuffer: u32) {
    let p = htb_parms_offset(msg);
    assert_eq!(
        &msg[p + 24..p + 32],
        &[0u8; 8],
        "tc's buffer/cbuffer expected 0"
    );
    msg[p + 24..p + 28].copy_from_slice(&buffer.to_ne_bytes());
    msg[p + 28..p + 32].copy_from_slice(&cbuffer.to_ne_bytes());
}

/// The capture's sequence number.
pub fn seq(b: &[u8]) -> u32 {
    u32::from_ne_bytes(b[8..12].try_into().unwrap())
}

/// The capture's interface index.
pub fn ifindex(b: &[u8]) -> i32 {
    i32::from_ne_bytes(b[20..24].try_into().unwrap())
}

/// `op` encoded with the capture's seq and ifindex.
pub fn ours(g: &Golden, op: &TcOp) -> Vec<u8> {
    let mut buf = Vec::new();
    encode_op(op, ifindex(&g.bytes), seq(&g.bytes), &mut buf).unwrap();
    buf
}

fn hex(b: &[u8]) -> String {
    b.chunks(16)
        .map(|c| {
            c.iter()
                .map(|x| format!("{x:02x}"))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Asserts equal bytes, printing both in hex with the tc command.
pub fn assert_same(name: &str, expected: &[u8], actual: &[u8]) {
    let g = load(name);
    assert!(
        expected == actual,
        "{name} ({}):\n tc:\n{}\n lqos:\n{}",
        g.command,
        hex(expected),
        hex(actual)
    );
}

/// Compares an op exactly with tc's bytes; returns the capture.
pub fn check_exact(name: &str, op: TcOp) -> Golden {
    let g = load(name);
    assert_same(name, &g.bytes, &ours(&g, &op));
    g
}

/// Compares an HTB class op with tc's bytes minus the rate tables.
pub fn check_class(name: &str, op: TcOp) {
    let g = load(name);
    let tc = strip_htb_rate_tables(&g.bytes);
    assert!(tc.len() < g.bytes.len(), "{name}: tc sent rate tables");
    assert_same(name, &tc, &ours(&g, &op));
}

/// A handle from its tc text.
pub fn h(s: &str) -> TcHandle {
    s.parse().unwrap()
}

/// A rate from Mbps text.
pub fn mbps(s: &str) -> Rate {
    Rate::from_mbps_str(s).unwrap()
}

/// A qdisc from tc texts.
pub fn qdisc(parent: &str, handle: &str, kind: QdiscKind) -> Qdisc {
    Qdisc {
        parent: h(parent),
        handle: h(handle),
        kind,
    }
}

/// An HTB class with tc's default bursts.
pub fn class(
    parent: &str,
    classid: &str,
    rate: &str,
    ceil: &str,
    prio: u32,
    quantum: u32,
) -> Class {
    Class {
        parent: h(parent),
        classid: h(classid),
        htb: HtbClass {
            rate: mbps(rate),
            ceil: mbps(ceil),
            quantum,
            prio,
            burst: None,
            cburst: None,
        },
    }
}

/// An HTB qdisc with `default N`.
pub fn htb(default_minor: u32) -> QdiscKind {
    QdiscKind::Htb(HtbQdisc {
        default_minor,
        r2q: None,
        direct_qlen: None,
    })
}

/// Every fixture file is exercised by a golden test beside its kind.
#[cfg(test)]
#[test]
fn every_fixture_is_tested() {
    let src = [
        include_str!("op.rs"),
        include_str!("htb.rs"),
        include_str!("mq.rs"),
        include_str!("fifo.rs"),
        include_str!("cake.rs"),
        include_str!("fq_codel.rs"),
        include_str!("clsact.rs"),
        include_str!("flower.rs"),
    ]
    .concat();
    for e in std::fs::read_dir(fixtures_dir()).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        if let Some(stem) = name.strip_suffix(".hex") {
            assert!(
                src.contains(&format!("\"{stem}\"")),
                "fixture {name} has no test"
            );
        }
    }
}
