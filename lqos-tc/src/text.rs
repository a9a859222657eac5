//! Byte-level text writers for the large outputs (`ip_map.csv`, the
//! prefix rows of `plan.json`): integers through `itoa`, addresses and
//! handles without `core::fmt`, CSV fields quoted by `csv_core`'s own rule.
//! Each writes exactly what the `Display` impl (or the `csv` crate) would.
//!
//! And the `tc -b` text of one op ([`render_line`]; the files of a plan
//! are [`crate::render`]'s): rates are printed exactly in the largest SI
//! unit that divides them (`gbit`, `mbit`, `kbit`, `bit`; tc parses these
//! as powers of 1000). Nothing from the input files (names, comments) is
//! ever written, so no CSV text can end a line or add a command.

use core::net::{IpAddr, Ipv4Addr};

use ipnet::IpNet;

use crate::config::LeafSpec;
use crate::filter::{FilterKey, CLSACT_PARENT};
use crate::handle::TcHandle;
use crate::op::TcOp;
use crate::ops::{Class, Qdisc, QdiscKind};
use crate::options;
use lqos_model::Rate;

/// Appends `v` in decimal.
#[inline]
pub(crate) fn push_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

/// Appends `v` in lower-case hex (no prefix).
#[inline]
pub(crate) fn push_hex(out: &mut Vec<u8>, v: u32) {
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
    out.extend_from_slice(&buf[i..]);
}

/// Appends a handle as its `Display` does (`root`, `none`, `1:`, `1:a3`).
#[inline]
pub(crate) fn push_handle(out: &mut Vec<u8>, h: TcHandle) {
    match h {
        TcHandle::ROOT => out.extend_from_slice(b"root"),
        TcHandle::UNSPEC => out.extend_from_slice(b"none"),
        h => {
            push_hex(out, u32::from(h.major()));
            out.push(b':');
            if h.minor() != 0 {
                push_hex(out, u32::from(h.minor()));
            }
        }
    }
}

/// Appends a dotted-quad IPv4 address.
#[inline]
pub(crate) fn push_ipv4(out: &mut Vec<u8>, a: Ipv4Addr) {
    let mut buf = itoa::Buffer::new();
    for (i, o) in a.octets().into_iter().enumerate() {
        if i > 0 {
            out.push(b'.');
        }
        out.extend_from_slice(buf.format(o).as_bytes());
    }
}

/// Appends an address as its `Display` does (IPv6 through `core::fmt`:
/// its zero-run and embedded-IPv4 rules are not worth copying).
pub(crate) fn push_ip(out: &mut Vec<u8>, a: IpAddr) {
    match a {
        IpAddr::V4(a) => push_ipv4(out, a),
        IpAddr::V6(a) => {
            use std::io::Write;
            // Writing into a Vec cannot fail.
            let _ = write!(out, "{a}");
        }
    }
}

/// Appends a prefix as `IpNet`'s `Display` does (`100.64.0.0/24`).
pub(crate) fn push_net(out: &mut Vec<u8>, n: &IpNet) {
    push_ip(out, n.addr());
    out.push(b'/');
    push_u64(out, u64::from(n.prefix_len()));
}

/// A CSV writer's field quoting, as the `csv` crate's default writer does
/// it (quote only when needed, double the quotes inside).
pub(crate) struct CsvFields {
    core: csv_core::Writer,
}

impl CsvFields {
    /// The `csv` crate's default configuration.
    pub(crate) fn new() -> CsvFields {
        CsvFields {
            core: csv_core::Writer::new(),
        }
    }

    /// Appends `field`, quoted if it needs it.
    pub(crate) fn push(&self, out: &mut Vec<u8>, field: &[u8]) {
        if !self.core.should_quote(field) {
            out.extend_from_slice(field);
            return;
        }
        out.push(b'"');
        let mut rest = field;
        while let Some(i) = rest.iter().position(|&b| b == b'"') {
            out.extend_from_slice(&rest[..=i]);
            out.push(b'"');
            rest = &rest[i + 1..];
        }
        out.extend_from_slice(rest);
        out.push(b'"');
    }
}

/// One `tc -b` line for `op` on `dev`, without the leading `tc` and without
/// the newline.
///
/// ```
/// use lqos_model::Rate;
/// use lqos_tc::{render::render_line, TcHandle, TcOp};
/// use lqos_tc::ops::{Class, HtbClass};
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
    let mut w = Out::new(dev, 112);
    w.op(op);
    w.finish()
}

/// Appends the line for `op` (no newline) to `out`.
pub fn write_op(out: &mut String, dev: &str, op: &TcOp) {
    let mut w = Out::new(dev, 112);
    w.op(op);
    out.push_str(&w.finish());
}

/// Appends a qdisc kind and its options (`cake diffserv4 rtt 300ms`).
pub fn write_kind(out: &mut String, kind: &QdiscKind) {
    let mut w = Out::new("", 64);
    w.kind(kind);
    out.push_str(&w.finish());
}

/// Appends a rate exactly, in the largest SI unit that divides it.
pub fn write_rate(out: &mut String, rate: Rate) {
    let mut w = Out::new("", 24);
    w.rate(rate);
    out.push_str(&w.finish());
}

/// The rate as tc text (`10500kbit`).
pub fn rate_to_tc(rate: Rate) -> String {
    let mut s = String::new();
    write_rate(&mut s, rate);
    s
}

pub(crate) fn bytes_to_string(b: Vec<u8>) -> String {
    // Only `&str` pieces and ASCII digits are ever written.
    String::from_utf8(b).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// The kind and options as `tc` text (`cake diffserv4`), or `none`.
impl std::fmt::Display for LeafSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LeafSpec::None => f.write_str("none"),
            LeafSpec::Qdisc(kind) => {
                let mut s = String::new();
                write_kind(&mut s, kind);
                f.write_str(&s)
            }
        }
    }
}

/// A byte buffer with the hot line prefixes for one device precomputed.
pub(crate) struct Out<'d> {
    pub(crate) b: Vec<u8>,
    dev: &'d str,
    class_add: Vec<u8>,
    qdisc_add: Vec<u8>,
}

impl<'d> Out<'d> {
    pub(crate) fn new(dev: &'d str, cap: usize) -> Out<'d> {
        Out {
            b: Vec::with_capacity(cap),
            dev,
            class_add: format!("class add dev {dev} parent ").into_bytes(),
            qdisc_add: format!("qdisc add dev {dev} parent ").into_bytes(),
        }
    }

    fn finish(self) -> String {
        bytes_to_string(self.b)
    }

    #[inline]
    fn s(&mut self, x: &str) {
        self.b.extend_from_slice(x.as_bytes());
    }

    #[inline]
    pub(crate) fn nl(&mut self) {
        self.b.push(b'\n');
    }

    pub(crate) fn op(&mut self, op: &TcOp) {
        match op {
            TcOp::AddQdisc(q) | TcOp::ReplaceQdisc(q) if q.kind == QdiscKind::Clsact => {
                self.s("qdisc ");
                self.s(if matches!(op, TcOp::AddQdisc(_)) {
                    "add"
                } else {
                    "replace"
                });
                self.s(" dev ");
                self.s(self.dev);
                self.s(" clsact");
            }
            TcOp::DeleteQdisc { parent, .. } if *parent == CLSACT_PARENT => {
                self.s("qdisc del dev ");
                self.s(self.dev);
                self.s(" clsact");
            }
            TcOp::ReplaceFilter(f) => {
                self.filter_head("replace", &f.key);
                self.s(" flower ");
                self.s(f.side.keyword());
                self.b.push(b' ');
                self.s(&f.net.to_string());
                self.s(" action skbedit queue_mapping ");
                self.u(u64::from(f.queue_mapping));
                self.s(" priority ");
                self.handle(f.priority);
            }
            TcOp::DeleteFilter(k) => {
                self.filter_head("del", k);
                self.s(" flower");
            }
            TcOp::AddQdisc(q) if q.parent != TcHandle::ROOT => {
                self.b.extend_from_slice(&self.qdisc_add);
                self.handle(q.parent);
                self.qdisc_rest(q);
            }
            TcOp::DeleteRoot => {
                self.s("qdisc del dev ");
                self.s(self.dev);
                self.s(" root");
            }
            TcOp::AddQdisc(q) => self.qdisc("add", q),
            TcOp::ReplaceQdisc(q) => self.qdisc("replace", q),
            TcOp::DeleteQdisc { parent, handle } => {
                self.s("qdisc del dev ");
                self.s(self.dev);
                if *parent == TcHandle::ROOT {
                    self.s(" root");
                } else if *parent != TcHandle::UNSPEC {
                    self.s(" parent ");
                    self.handle(*parent);
                }
                if *handle != TcHandle::UNSPEC {
                    self.s(" handle ");
                    self.handle(*handle);
                }
            }
            TcOp::AddClass(c) => {
                self.b.extend_from_slice(&self.class_add);
                self.class_rest(c);
            }
            TcOp::ChangeClass(c) => {
                self.s("class change dev ");
                self.s(self.dev);
                self.s(" parent ");
                self.class_rest(c);
            }
            TcOp::DeleteClass { parent, classid } => {
                self.s("class del dev ");
                self.s(self.dev);
                if *parent != TcHandle::UNSPEC {
                    self.s(" parent ");
                    self.handle(*parent);
                }
                self.s(" classid ");
                self.handle(*classid);
            }
        }
    }

    /// `filter VERB dev X egress pref P handle H protocol ip`.
    fn filter_head(&mut self, verb: &str, k: &FilterKey) {
        self.s("filter ");
        self.s(verb);
        self.s(" dev ");
        self.s(self.dev);
        self.s(" egress pref ");
        self.u(u64::from(k.pref));
        self.s(" handle ");
        self.u(u64::from(k.handle));
        self.s(" protocol ");
        self.s(k.protocol.name());
    }

    fn qdisc(&mut self, verb: &str, q: &Qdisc) {
        self.s("qdisc ");
        self.s(verb);
        self.s(" dev ");
        self.s(self.dev);
        if q.parent == TcHandle::ROOT {
            self.s(" root");
        } else {
            self.s(" parent ");
            self.handle(q.parent);
        }
        self.qdisc_rest(q);
    }

    fn qdisc_rest(&mut self, q: &Qdisc) {
        if q.handle != TcHandle::UNSPEC {
            self.s(" handle ");
            self.handle(q.handle);
        }
        self.b.push(b' ');
        self.kind(&q.kind);
    }

    /// `PARENT classid C htb ...` (after "... parent ").
    fn class_rest(&mut self, c: &Class) {
        self.handle(c.parent);
        self.s(" classid ");
        self.handle(c.classid);
        self.s(" htb rate ");
        self.rate(c.htb.rate);
        self.s(" ceil ");
        self.rate(c.htb.ceil);
        self.s(" prio ");
        self.u(u64::from(c.htb.prio));
        if c.htb.quantum != 0 {
            self.s(" quantum ");
            self.u(u64::from(c.htb.quantum));
        }
        if let Some(v) = c.htb.burst {
            self.s(" burst ");
            self.u(u64::from(v));
        }
        if let Some(v) = c.htb.cburst {
            self.s(" cburst ");
            self.u(u64::from(v));
        }
    }

    fn kind(&mut self, kind: &QdiscKind) {
        match kind {
            QdiscKind::Mq => self.s("mq"),
            QdiscKind::Htb(h) => {
                self.s("htb default ");
                self.hex(h.default_minor);
                if let Some(r) = h.r2q {
                    self.s(" r2q ");
                    self.u(u64::from(r));
                }
                if let Some(d) = h.direct_qlen {
                    self.s(" direct_qlen ");
                    self.u(u64::from(d));
                }
            }
            QdiscKind::Cake(p) => {
                self.s("cake");
                if let Some(bw) = p.bandwidth {
                    if bw.is_zero() {
                        self.s(" unlimited");
                    } else {
                        self.s(" bandwidth ");
                        self.rate(bw);
                    }
                }
                if let Some(d) = p.diffserv {
                    self.table(d.tc_word(), d.kernel());
                }
                if let Some(f) = p.flow_mode {
                    self.table(f.tc_word(), f.kernel());
                }
                if let Some(nat) = p.nat {
                    self.word(options::CAKE_NAT.word(nat));
                }
                if let Some(w) = p.wash {
                    self.word(options::CAKE_WASH.word(w));
                }
                if let Some(a) = p.ack_filter {
                    self.table(a.tc_word(), a.kernel());
                }
                if let Some(g) = p.split_gso {
                    self.word(options::CAKE_SPLIT_GSO.word(g));
                }
                if let Some(rtt) = p.rtt_us {
                    self.s(" rtt ");
                    self.time_us(rtt);
                }
                if let Some(m) = p.memlimit {
                    self.s(" memlimit ");
                    self.u(u64::from(m));
                }
            }
            QdiscKind::FqCodel(p) => {
                self.s("fq_codel");
                if let Some(v) = p.limit {
                    self.s(" limit ");
                    self.u(u64::from(v));
                }
                if let Some(v) = p.flows {
                    self.s(" flows ");
                    self.u(u64::from(v));
                }
                if let Some(v) = p.target_us {
                    self.s(" target ");
                    self.time_us(v);
                }
                if let Some(v) = p.interval_us {
                    self.s(" interval ");
                    self.time_us(v);
                }
                if let Some(v) = p.quantum {
                    self.s(" quantum ");
                    self.u(u64::from(v));
                }
                if let Some(v) = p.memory_limit {
                    self.s(" memory_limit ");
                    self.u(u64::from(v));
                }
                if let Some(e) = p.ecn {
                    self.word(options::FQ_CODEL_ECN.word(e));
                }
            }
            QdiscKind::Clsact => self.s("clsact"),
            QdiscKind::Pfifo { limit } | QdiscKind::Bfifo { limit } => {
                self.s(kind.name());
                if let Some(l) = limit {
                    self.s(" limit ");
                    self.u(u64::from(*l));
                }
            }
            QdiscKind::Other(name) => {
                // Readback names are kernel strings; keep only safe characters.
                if name.is_empty() {
                    self.s("unknown");
                }
                for &c in name.as_bytes() {
                    self.b
                        .push(if c.is_ascii_alphanumeric() || c == b'_' || c == b'-' {
                            c
                        } else {
                            b'_'
                        });
                }
            }
        }
    }

    /// ` WORD`: a tc word from [`options`].
    fn word(&mut self, w: &str) {
        self.b.push(b' ');
        self.s(w);
    }

    /// ` WORD` of an option table value; an `Unknown(n)` value (only a
    /// readback holds one) renders as `unknown(n)`, which tc refuses.
    fn table(&mut self, word: Option<&str>, kernel: u32) {
        match word {
            Some(w) => self.word(w),
            None => {
                self.s(" unknown(");
                self.u(u64::from(kernel));
                self.s(")");
            }
        }
    }

    fn rate(&mut self, rate: Rate) {
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
        self.u(v);
        self.s(unit);
    }

    fn time_us(&mut self, us: u32) {
        if us != 0 && us % 1_000_000 == 0 {
            self.u(u64::from(us / 1_000_000));
            self.s("s");
        } else if us != 0 && us % 1000 == 0 {
            self.u(u64::from(us / 1000));
            self.s("ms");
        } else {
            self.u(u64::from(us));
            self.s("us");
        }
    }

    fn handle(&mut self, h: TcHandle) {
        match h {
            TcHandle::ROOT => self.s("root"),
            TcHandle::UNSPEC => self.s("none"),
            h => {
                self.hex(u32::from(h.major()));
                self.b.push(b':');
                if h.minor() != 0 {
                    self.hex(u32::from(h.minor()));
                }
            }
        }
    }

    #[inline]
    fn hex(&mut self, v: u32) {
        crate::text::push_hex(&mut self.b, v);
    }

    #[inline]
    fn u(&mut self, v: u64) {
        crate::text::push_u64(&mut self.b, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn s(f: impl FnOnce(&mut Vec<u8>)) -> String {
        let mut v = Vec::new();
        f(&mut v);
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn handles_like_display() {
        for h in [
            TcHandle::ROOT,
            TcHandle::UNSPEC,
            TcHandle::new(1, 0),
            TcHandle::new(0x10, 0xa3),
            TcHandle::new(0xffff, 0xfffe),
        ] {
            assert_eq!(s(|o| push_handle(o, h)), h.to_string());
        }
    }

    proptest! {
        #[test]
        fn addresses_like_display(v4 in any::<u32>(), v6 in any::<u128>(), len in 0u8..=32, small in 0u32..65536) {
            let a4 = IpAddr::V4(Ipv4Addr::from(v4));
            prop_assert_eq!(s(|o| push_ip(o, a4)), a4.to_string());
            let a6 = IpAddr::V6(core::net::Ipv6Addr::from(v6));
            prop_assert_eq!(s(|o| push_ip(o, a6)), a6.to_string());
            // Mostly-zero IPv6 addresses (the compressed forms).
            let a6z = IpAddr::V6(core::net::Ipv6Addr::from(u128::from(small) << (16 * (small % 8))));
            prop_assert_eq!(s(|o| push_ip(o, a6z)), a6z.to_string());
            let n = IpNet::new(a4, len).unwrap();
            prop_assert_eq!(s(|o| push_net(o, &n)), n.to_string());
            prop_assert_eq!(s(|o| push_u64(o, u64::from(v4))), v4.to_string());
            prop_assert_eq!(s(|o| push_hex(o, v4)), format!("{v4:x}"));
        }

        #[test]
        fn csv_fields_like_the_csv_crate(fields in proptest::collection::vec(
            proptest::string::string_regex("[a-z ,\"\r\n#'\t\u{e9}]{0,8}").unwrap(), 2..6)
        ) {
            let mut w = csv::Writer::from_writer(Vec::new());
            w.write_record(&fields).unwrap();
            let want = String::from_utf8(w.into_inner().unwrap()).unwrap();
            let q = CsvFields::new();
            let got = s(|o| {
                for (i, f) in fields.iter().enumerate() {
                    if i > 0 {
                        o.push(b',');
                    }
                    q.push(o, f.as_bytes());
                }
                o.push(b'\n');
            });
            prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn times() {
        let t = |us| {
            let mut w = Out::new("x", 8);
            w.time_us(us);
            w.finish()
        };
        assert_eq!(t(300_000), "300ms");
        assert_eq!(t(100), "100us");
        assert_eq!(t(2_000_000), "2s");
        assert_eq!(t(0), "0us");
    }
}
