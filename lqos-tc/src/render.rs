//! Rendering typed ops as `tc -b` text.
//!
//! Rates are printed exactly in the largest SI unit that divides them
//! (`gbit`, `mbit`, `kbit`, `bit`; tc parses these as powers of 1000).
//! Nothing from the input files (names, comments) is ever written, so no
//! CSV text can end a line or add a command.

use crate::classify::{FilterKey, CLSACT_PARENT};
use crate::{options, Class};
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
    let mut w = Out::new(dev, 112);
    w.op(op);
    w.finish()
}

/// All ops of one interface, one line each; with `root_delete` the text
/// starts with `qdisc del dev X root`.
pub fn render_interface(ip: &InterfacePlan, root_delete: bool) -> String {
    let mut b = Vec::with_capacity(ip.ops.len() * 80 + 64);
    let _ = interface_chunks(
        ip,
        root_delete,
        usize::MAX,
        &mut |_| Ok::<(), ()>(()),
        &mut b,
    );
    bytes_to_string(b)
}

/// [`render_interface`], written to `w` in chunks of about 64 KiB (the
/// text is never held whole).
pub fn render_interface_to<W: std::io::Write>(
    ip: &InterfacePlan,
    root_delete: bool,
    w: &mut W,
) -> std::io::Result<()> {
    write_chunked(w, |flush, b| {
        interface_chunks(ip, root_delete, CHUNK, flush, b)
    })
}

/// Buffer size of the `*_to` renderers.
const CHUNK: usize = 64 * 1024;

/// Renders `ip` into `b`, handing `b` to `flush` (which empties it) each
/// time it holds `chunk` bytes or more.
fn interface_chunks<E>(
    ip: &InterfacePlan,
    root_delete: bool,
    chunk: usize,
    flush: &mut dyn FnMut(&mut Vec<u8>) -> Result<(), E>,
    b: &mut Vec<u8>,
) -> Result<(), E> {
    let mut w = Out::new(&ip.dev, 0);
    std::mem::swap(&mut w.b, b);
    let mut res = Ok(());
    if root_delete {
        w.op(&TcOp::delete_root());
        w.nl();
    }
    for op in &ip.ops {
        w.op(op);
        w.nl();
        if w.b.len() >= chunk {
            res = flush(&mut w.b);
            if res.is_err() {
                break;
            }
        }
    }
    std::mem::swap(&mut w.b, b);
    res
}

/// The combined file in the order LibreQoS writes `linux_tc.txt`: the queue
/// setup of every interface, then the node and circuit lines interleaved
/// (download class, its leaf, upload class, its leaf). With `root_delete`
/// the file starts with one root delete per interface.
pub fn render_combined(plan: &Plan, root_delete: bool) -> String {
    let total: usize = plan.interfaces.iter().map(|i| i.ops.len()).sum();
    let mut b: Vec<u8> = Vec::with_capacity(total * 80 + 128);
    let _ = combined_chunks(
        plan,
        root_delete,
        usize::MAX,
        &mut |_| Ok::<(), ()>(()),
        &mut b,
    );
    bytes_to_string(b)
}

/// [`render_combined`], written to `w` in chunks of about 64 KiB (the
/// text is never held whole).
pub fn render_combined_to<W: std::io::Write>(
    plan: &Plan,
    root_delete: bool,
    w: &mut W,
) -> std::io::Result<()> {
    write_chunked(w, |flush, b| {
        combined_chunks(plan, root_delete, CHUNK, flush, b)
    })
}

/// Runs a `*_chunks` renderer with a [`CHUNK`]-sized buffer whose flush
/// writes to `w`, then writes what is left.
fn write_chunked<W: std::io::Write>(
    w: &mut W,
    render: impl FnOnce(
        &mut dyn FnMut(&mut Vec<u8>) -> std::io::Result<()>,
        &mut Vec<u8>,
    ) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut b = Vec::with_capacity(CHUNK + 512);
    let mut flush = |b: &mut Vec<u8>| {
        let r = w.write_all(b);
        b.clear();
        r
    };
    render(&mut flush, &mut b)?;
    flush(&mut b)
}

/// Renders the combined file into `b`, handing `b` to `flush` (which
/// empties it) each time it holds `chunk` bytes or more.
fn combined_chunks<E>(
    plan: &Plan,
    root_delete: bool,
    chunk: usize,
    flush: &mut dyn FnMut(&mut Vec<u8>) -> Result<(), E>,
    b: &mut Vec<u8>,
) -> Result<(), E> {
    let mut outs: Vec<Out> = plan
        .interfaces
        .iter()
        .map(|i| Out::new(&i.dev, 0))
        .collect();
    // Each Out writes into the shared buffer in turn.
    let mut emit = |w: &mut Out, b: &mut Vec<u8>, op: &TcOp| -> Result<(), E> {
        std::mem::swap(&mut w.b, b);
        w.op(op);
        w.nl();
        std::mem::swap(&mut w.b, b);
        if b.len() >= chunk {
            flush(b)?;
        }
        Ok(())
    };
    if root_delete {
        for w in outs.iter_mut() {
            emit(w, b, &TcOp::delete_root())?;
        }
    }
    for (ip, w) in plan.interfaces.iter().zip(outs.iter_mut()) {
        for op in &ip.ops[..ip.setup_ops.min(ip.ops.len())] {
            emit(w, b, op)?;
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
        for ((ip, cur), w) in plan
            .interfaces
            .iter()
            .zip(cursors.iter_mut())
            .zip(outs.iter_mut())
        {
            if *cur >= ip.ops.len() {
                continue;
            }
            progressed = true;
            let mut end = *cur + 1;
            while end < ip.ops.len() && !matches!(ip.ops[end], TcOp::AddClass(_)) {
                end += 1;
            }
            for op in &ip.ops[*cur..end] {
                emit(w, b, op)?;
            }
            *cur = end;
        }
        if !progressed {
            break;
        }
    }
    Ok(())
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

fn bytes_to_string(b: Vec<u8>) -> String {
    // Only `&str` pieces and ASCII digits are ever written.
    String::from_utf8(b).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// A byte buffer with the hot line prefixes for one device precomputed.
struct Out<'d> {
    b: Vec<u8>,
    dev: &'d str,
    class_add: Vec<u8>,
    qdisc_add: Vec<u8>,
}

impl<'d> Out<'d> {
    fn new(dev: &'d str, cap: usize) -> Out<'d> {
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
    fn nl(&mut self) {
        self.b.push(b'\n');
    }

    fn op(&mut self, op: &TcOp) {
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
