//! Rendering typed ops as `tc -b` text.
//!
//! Rates are printed exactly in the largest SI unit that divides them
//! (`gbit`, `mbit`, `kbit`, `bit`; tc parses these as powers of 1000).
//! Nothing from the input files (names, comments) is ever written, so no
//! CSV text can end a line or add a command.

use crate::{CakeAckFilter, CakeDiffserv, CakeFlowMode, Class};
use crate::{InterfacePlan, Plan, Qdisc, QdiscKind, TcHandle, TcOp};
use lqos_model::Rate;

/// One `tc -b` line for `op` on `dev`, without the leading `tc` and without
/// the newline.
///
/// ```
/// use lqos_model::Rate;
/// use lqos_tc::{render::render_line, Class, HtbClass, TcHandle, TcOp};
/// let op = TcOp::AddClass(Class {
///     parent: TcHandle::new(1, 1),
///     classid: TcHandle::new(1, 3),
///     htb: HtbClass { rate: Rate::from_bps(2_500_000), ceil: Rate::from_bps(10_500_000),
///                     quantum: 1522, prio: 3, burst: None, cburst: None },
/// });
/// assert_eq!(render_line("ens19", &op),
///     "class add dev ens19 parent 1:1 classid 1:3 htb rate 2500kbit ceil 10500kbit prio 3 quantum 1522");
/// ```
pub fn render_line(dev: &str, op: &TcOp) -> String {
    let mut s = String::with_capacity(112);
    write_op(&mut s, dev, op);
    s
}

/// All ops of one interface, one line each; with `root_delete` the text
/// starts with `qdisc del dev X root`.
pub fn render_interface(ip: &InterfacePlan, root_delete: bool) -> String {
    let mut s = String::with_capacity(ip.ops.len() * 100 + 64);
    if root_delete {
        write_op(&mut s, &ip.dev, &TcOp::delete_root());
        s.push('\n');
    }
    for op in &ip.ops {
        write_op(&mut s, &ip.dev, op);
        s.push('\n');
    }
    s
}

/// The combined file in the order LibreQoS writes `linux_tc.txt`: the queue
/// setup of every interface, then site and circuit lines interleaved
/// (download class, its leaf, upload class, its leaf). With `root_delete`
/// the file starts with one root delete per interface.
pub fn render_combined(plan: &Plan, root_delete: bool) -> String {
    let total: usize = plan.interfaces.iter().map(|i| i.ops.len()).sum();
    let mut s = String::with_capacity(total * 100 + 128);
    if root_delete {
        for ip in &plan.interfaces {
            write_op(&mut s, &ip.dev, &TcOp::delete_root());
            s.push('\n');
        }
    }
    for ip in &plan.interfaces {
        for op in &ip.ops[..ip.setup_ops.min(ip.ops.len())] {
            write_op(&mut s, &ip.dev, op);
            s.push('\n');
        }
    }
    // Interleave the per-entity groups (a class op and the ops after it up
    // to the next class op) of all interfaces.
    let mut cursors: Vec<usize> = plan
        .interfaces
        .iter()
        .map(|i| i.setup_ops.min(i.ops.len()))
        .collect();
    loop {
        let mut progressed = false;
        for (ip, cur) in plan.interfaces.iter().zip(cursors.iter_mut()) {
            if *cur >= ip.ops.len() {
                continue;
            }
            progressed = true;
            let mut end = *cur + 1;
            while end < ip.ops.len() && !matches!(ip.ops[end], TcOp::AddClass(_)) {
                end += 1;
            }
            for op in &ip.ops[*cur..end] {
                write_op(&mut s, &ip.dev, op);
                s.push('\n');
            }
            *cur = end;
        }
        if !progressed {
            break;
        }
    }
    s
}

/// Appends the line for `op` (no newline) to `out`.
pub fn write_op(out: &mut String, dev: &str, op: &TcOp) {
    match op {
        TcOp::AddQdisc(q) => write_qdisc(out, "add", dev, q),
        TcOp::ReplaceQdisc(q) => write_qdisc(out, "replace", dev, q),
        TcOp::DeleteQdisc { parent, handle } => {
            out.push_str("qdisc del dev ");
            out.push_str(dev);
            if *parent == TcHandle::ROOT {
                out.push_str(" root");
            } else if *parent != TcHandle::UNSPEC {
                out.push_str(" parent ");
                write_handle(out, *parent);
            }
            if *handle != TcHandle::UNSPEC {
                out.push_str(" handle ");
                write_handle(out, *handle);
            }
        }
        TcOp::AddClass(c) => write_class(out, "add", dev, c),
        TcOp::ChangeClass(c) => write_class(out, "change", dev, c),
        TcOp::DeleteClass { parent, classid } => {
            out.push_str("class del dev ");
            out.push_str(dev);
            if *parent != TcHandle::UNSPEC {
                out.push_str(" parent ");
                write_handle(out, *parent);
            }
            out.push_str(" classid ");
            write_handle(out, *classid);
        }
    }
}

fn write_qdisc(out: &mut String, verb: &str, dev: &str, q: &Qdisc) {
    out.push_str("qdisc ");
    out.push_str(verb);
    out.push_str(" dev ");
    out.push_str(dev);
    if q.parent == TcHandle::ROOT {
        out.push_str(" root");
    } else {
        out.push_str(" parent ");
        write_handle(out, q.parent);
    }
    if q.handle != TcHandle::UNSPEC {
        out.push_str(" handle ");
        write_handle(out, q.handle);
    }
    out.push(' ');
    write_kind(out, &q.kind);
}

fn write_class(out: &mut String, verb: &str, dev: &str, c: &Class) {
    out.push_str("class ");
    out.push_str(verb);
    out.push_str(" dev ");
    out.push_str(dev);
    out.push_str(" parent ");
    write_handle(out, c.parent);
    out.push_str(" classid ");
    write_handle(out, c.classid);
    out.push_str(" htb rate ");
    write_rate(out, c.htb.rate);
    out.push_str(" ceil ");
    write_rate(out, c.htb.ceil);
    out.push_str(" prio ");
    write_u64(out, u64::from(c.htb.prio));
    if c.htb.quantum != 0 {
        out.push_str(" quantum ");
        write_u64(out, u64::from(c.htb.quantum));
    }
    if let Some(b) = c.htb.burst {
        out.push_str(" burst ");
        write_u64(out, u64::from(b));
    }
    if let Some(b) = c.htb.cburst {
        out.push_str(" cburst ");
        write_u64(out, u64::from(b));
    }
}

/// Appends a qdisc kind and its options (`cake diffserv4 rtt 300ms`).
pub fn write_kind(out: &mut String, kind: &QdiscKind) {
    match kind {
        QdiscKind::Mq => out.push_str("mq"),
        QdiscKind::Htb(h) => {
            out.push_str("htb default ");
            write_hex(out, h.default_minor);
            if let Some(r) = h.r2q {
                out.push_str(" r2q ");
                write_u64(out, u64::from(r));
            }
            if let Some(d) = h.direct_qlen {
                out.push_str(" direct_qlen ");
                write_u64(out, u64::from(d));
            }
        }
        QdiscKind::Cake(p) => {
            out.push_str("cake");
            if let Some(bw) = p.bandwidth {
                if bw.is_zero() {
                    out.push_str(" unlimited");
                } else {
                    out.push_str(" bandwidth ");
                    write_rate(out, bw);
                }
            }
            if let Some(d) = p.diffserv {
                out.push(' ');
                out.push_str(diffserv_name(d));
            }
            if let Some(f) = p.flow_mode {
                out.push(' ');
                out.push_str(flow_mode_name(f));
            }
            if let Some(nat) = p.nat {
                out.push_str(if nat { " nat" } else { " nonat" });
            }
            if let Some(w) = p.wash {
                out.push_str(if w { " wash" } else { " nowash" });
            }
            if let Some(a) = p.ack_filter {
                out.push_str(match a {
                    CakeAckFilter::Off => " no-ack-filter",
                    CakeAckFilter::On => " ack-filter",
                    CakeAckFilter::Aggressive => " ack-filter-aggressive",
                });
            }
            if let Some(g) = p.split_gso {
                out.push_str(if g { " split-gso" } else { " no-split-gso" });
            }
            if let Some(rtt) = p.rtt_us {
                out.push_str(" rtt ");
                write_time_us(out, rtt);
            }
            if let Some(m) = p.memlimit {
                out.push_str(" memlimit ");
                write_u64(out, u64::from(m));
            }
        }
        QdiscKind::FqCodel(p) => {
            out.push_str("fq_codel");
            if let Some(v) = p.limit {
                out.push_str(" limit ");
                write_u64(out, u64::from(v));
            }
            if let Some(v) = p.flows {
                out.push_str(" flows ");
                write_u64(out, u64::from(v));
            }
            if let Some(v) = p.target_us {
                out.push_str(" target ");
                write_time_us(out, v);
            }
            if let Some(v) = p.interval_us {
                out.push_str(" interval ");
                write_time_us(out, v);
            }
            if let Some(v) = p.quantum {
                out.push_str(" quantum ");
                write_u64(out, u64::from(v));
            }
            if let Some(v) = p.memory_limit {
                out.push_str(" memory_limit ");
                write_u64(out, u64::from(v));
            }
            if let Some(e) = p.ecn {
                out.push_str(if e { " ecn" } else { " noecn" });
            }
        }
        QdiscKind::Pfifo { limit } | QdiscKind::Bfifo { limit } => {
            out.push_str(kind.name());
            if let Some(l) = limit {
                out.push_str(" limit ");
                write_u64(out, u64::from(*l));
            }
        }
        QdiscKind::Other(name) => {
            // Readback names are kernel strings; keep only safe characters.
            if name.is_empty() {
                out.push_str("unknown");
            }
            for ch in name.chars() {
                out.push(if ch.is_ascii_alphanumeric() || ch == '_' || ch == '-' {
                    ch
                } else {
                    '_'
                });
            }
        }
    }
}

pub(crate) fn diffserv_name(d: CakeDiffserv) -> &'static str {
    match d {
        CakeDiffserv::Diffserv3 => "diffserv3",
        CakeDiffserv::Diffserv4 => "diffserv4",
        CakeDiffserv::Diffserv8 => "diffserv8",
        CakeDiffserv::Besteffort => "besteffort",
        CakeDiffserv::Precedence => "precedence",
    }
}

pub(crate) fn flow_mode_name(f: CakeFlowMode) -> &'static str {
    match f {
        CakeFlowMode::Flowblind => "flowblind",
        CakeFlowMode::Srchost => "srchost",
        CakeFlowMode::Dsthost => "dsthost",
        CakeFlowMode::Hosts => "hosts",
        CakeFlowMode::Flows => "flows",
        CakeFlowMode::DualSrchost => "dual-srchost",
        CakeFlowMode::DualDsthost => "dual-dsthost",
        CakeFlowMode::TripleIsolate => "triple-isolate",
    }
}

/// Appends a rate exactly, in the largest SI unit that divides it.
pub fn write_rate(out: &mut String, rate: Rate) {
    let bps = rate.bps();
    let (v, unit) = if bps == 0 {
        (0, "bit")
    } else if bps % 1_000_000_000 == 0 {
        (bps / 1_000_000_000, "gbit")
    } else if bps % 1_000_000 == 0 {
        (bps / 1_000_000, "mbit")
    } else if bps % 1_000 == 0 {
        (bps / 1_000, "kbit")
    } else {
        (bps, "bit")
    };
    write_u64(out, v);
    out.push_str(unit);
}

/// The rate as tc text (`10500kbit`).
pub fn rate_to_tc(rate: Rate) -> String {
    let mut s = String::new();
    write_rate(&mut s, rate);
    s
}

fn write_time_us(out: &mut String, us: u32) {
    if us != 0 && us % 1_000_000 == 0 {
        write_u64(out, u64::from(us / 1_000_000));
        out.push('s');
    } else if us != 0 && us % 1000 == 0 {
        write_u64(out, u64::from(us / 1000));
        out.push_str("ms");
    } else {
        write_u64(out, u64::from(us));
        out.push_str("us");
    }
}

fn write_handle(out: &mut String, h: TcHandle) {
    match h {
        TcHandle::ROOT => out.push_str("root"),
        TcHandle::UNSPEC => out.push_str("none"),
        h => {
            write_hex(out, u32::from(h.major()));
            out.push(':');
            if h.minor() != 0 {
                write_hex(out, u32::from(h.minor()));
            }
        }
    }
}

fn write_hex(out: &mut String, v: u32) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut buf = [0u8; 8];
    let mut i = buf.len();
    let mut v = v;
    loop {
        i -= 1;
        buf[i] = DIGITS[(v & 0xf) as usize];
        v >>= 4;
        if v == 0 {
            break;
        }
    }
    // The buffer holds only ASCII hex digits.
    out.push_str(std::str::from_utf8(&buf[i..]).unwrap_or("0"));
}

fn write_u64(out: &mut String, v: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let mut v = v;
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    // The buffer holds only ASCII digits.
    out.push_str(std::str::from_utf8(&buf[i..]).unwrap_or("0"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_use_the_largest_exact_unit() {
        let r = |bps| rate_to_tc(Rate::from_bps(bps));
        assert_eq!(r(1_000_000_000), "1gbit");
        assert_eq!(r(1_234_000_000), "1234mbit");
        assert_eq!(r(2_500_000), "2500kbit");
        assert_eq!(r(2_800), "2800bit");
        assert_eq!(r(2_801), "2801bit");
        assert_eq!(r(40_000_000_000), "40gbit");
        assert_eq!(r(0), "0bit");
    }

    #[test]
    fn times() {
        let t = |us| {
            let mut s = String::new();
            write_time_us(&mut s, us);
            s
        };
        assert_eq!(t(300_000), "300ms");
        assert_eq!(t(100), "100us");
        assert_eq!(t(2_000_000), "2s");
        assert_eq!(t(0), "0us");
    }
}
