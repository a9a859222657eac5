//! Pure encoding of [`TcOp`]s into rtnetlink requests, byte-compatible with
//! what iproute2's `tc` sends for the same command (minus the HTB rate
//! tables, which the kernel ignores for ethernet link layers).

use lqos_model::Rate;
use lqos_tc::{
    CakeParams, Class, FilterKey, FqCodelParams, HtbClass, HtbQdisc, Qdisc, QdiscKind, TcHandle,
    TcOp,
};

use super::consts::*;

/// Why an op cannot be encoded (checked before anything is sent).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// HTB needs a non-zero rate and ceil (the kernel rejects 0).
    #[error("class {classid}: {what} is 0 bytes/s (HTB needs a rate of at least 8 bit/s)")]
    ZeroRate {
        /// The class.
        classid: TcHandle,
        /// `rate` or `ceil`.
        what: &'static str,
    },
    /// HTB priorities are 0..=7.
    #[error("class {classid}: prio {prio} is out of range 0..=7")]
    Prio {
        /// The class.
        classid: TcHandle,
        /// The bad value.
        prio: u32,
    },
    /// A qdisc kind name the kernel cannot take as `TCA_KIND`.
    #[error("qdisc {handle}: invalid kind name {name:?} (1..=15 printable characters)")]
    KindName {
        /// The qdisc.
        handle: TcHandle,
        /// The bad name.
        name: String,
    },
    /// A filter lqos cannot send (handle 0, or an address family that
    /// differs from the filter's protocol).
    #[error("{key}: {reason}")]
    Filter {
        /// The filter.
        key: FilterKey,
        /// What is wrong.
        reason: String,
    },
    /// A message grew past the 64 KiB a netlink attribute length can hold.
    #[error("message too large for netlink ({len} bytes)")]
    TooLarge {
        /// Its length.
        len: usize,
    },
}

/// The kernel's packet-scheduler clock, as published in `/proc/net/psched`
/// (`t2us us2t clock_res hz`, four hex words). HTB `buffer`/`cbuffer` are in
/// these ticks. Encoding takes it as a value so it stays pure; the socket
/// layer reads the real file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PschedClock {
    /// First word: nanoseconds per microsecond (1000) on current kernels.
    pub t2us: u32,
    /// Second word: nanoseconds per tick (64 on current kernels).
    pub us2t: u32,
    /// Third word: clock resolution (1000000).
    pub clock_res: u32,
    /// Fourth word: what tc uses as `HZ` for its default burst
    /// (`NSEC_PER_SEC / hrtimer_resolution`, 1000000000 with high-res timers).
    pub hz: u32,
}

impl Default for PschedClock {
    /// `000003e8 00000040 000f4240 3b9aca00`: every kernel since 3.x with
    /// high-resolution timers (this project's kernel 6.18 included).
    fn default() -> Self {
        PschedClock {
            t2us: 0x3e8,
            us2t: 0x40,
            clock_res: 0xf4240,
            hz: 0x3b9a_ca00,
        }
    }
}

/// `/proc/net/psched` could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot parse /proc/net/psched contents {0:?} (expected four hex words)")]
pub struct PschedParseError(pub String);

impl PschedClock {
    /// Parses the text of `/proc/net/psched`.
    ///
    /// ```
    /// use lqos_apply::netlink::PschedClock;
    /// let c = PschedClock::parse("000003e8 00000040 000f4240 3b9aca00\n").unwrap();
    /// assert_eq!(c, PschedClock::default());
    /// assert_eq!(c.tick_in_usec(), 15.625);
    /// ```
    pub fn parse(text: &str) -> Result<PschedClock, PschedParseError> {
        let err = || PschedParseError(text.to_string());
        let mut words = text.split_whitespace().map(|w| u32::from_str_radix(w, 16));
        let mut next = || words.next().and_then(|w| w.ok()).ok_or_else(err);
        let c = PschedClock {
            t2us: next()?,
            us2t: next()?,
            clock_res: next()?,
            hz: next()?,
        };
        if c.us2t == 0 || c.clock_res == 0 {
            return Err(err());
        }
        Ok(c)
    }

    /// Scheduler ticks per microsecond, computed as `tc_core_init` does.
    pub fn tick_in_usec(&self) -> f64 {
        // tc's compatibility hack: a nanosecond clock advertises t2us = 1000.
        let t2us = if self.clock_res == 1_000_000_000 {
            self.us2t
        } else {
            self.t2us
        };
        let clock_factor = f64::from(self.clock_res) / 1e6;
        f64::from(t2us) / f64::from(self.us2t) * clock_factor
    }

    /// tc's `HZ` for default bursts (`get_hz`): the fourth word when the
    /// clock resolution is 1000000, else 100.
    pub fn tc_hz(&self) -> u32 {
        if self.clock_res == 1_000_000 && self.hz != 0 {
            self.hz
        } else {
            100
        }
    }

    /// Ticks needed to send `size` bytes at `bytes_per_sec`, as
    /// `tc_calc_xmittime` computes them (time truncated to whole
    /// microseconds, then converted to ticks) whenever that is at least 1 µs.
    /// Below 1 µs tc 6.1 truncates to 0 ticks (an HTB class that can never
    /// burst, e.g. any default burst above ~12.8 Gbit); lqos then uses the
    /// untruncated time instead, and never returns 0 for a non-zero size.
    pub fn xmit_ticks(&self, bytes_per_sec: u64, size: u32) -> u32 {
        if bytes_per_sec == 0 || size == 0 {
            return 0;
        }
        let exact_us = 1e6 * (f64::from(size) / bytes_per_sec as f64);
        let tc_us = exact_us as u32; // saturating, truncating: C's (unsigned)
        let ticks = if tc_us >= 1 {
            f64::from(tc_us) * self.tick_in_usec()
        } else {
            exact_us * self.tick_in_usec()
        };
        (ticks as u32).max(1)
    }

    /// Bytes that `ticks` of transmit time hold at `bytes_per_sec` (the
    /// inverse of [`PschedClock::xmit_ticks`], rounded to the nearest byte;
    /// exact to within the bytes of ~1.1 µs at `bytes_per_sec`: tc's
    /// whole-microsecond truncation plus one 64 ns tick).
    pub fn xmit_size(&self, bytes_per_sec: u64, ticks: u32) -> u32 {
        let bytes = f64::from(ticks) / self.tick_in_usec() * bytes_per_sec as f64 / 1e6;
        bytes.round().min(f64::from(u32::MAX)) as u32
    }

    /// tc's default HTB burst for a rate: `rate / HZ + mtu` bytes.
    pub fn default_burst(&self, bytes_per_sec: u64) -> u32 {
        let b = bytes_per_sec / u64::from(self.tc_hz()) + u64::from(TC_DEFAULT_MTU);
        u32::try_from(b).unwrap_or(u32::MAX)
    }
}

/// Appends one complete rtnetlink request for `op` on interface `ifindex`
/// (sequence number `seq`, port id 0) to `buf`, using this kernel family's
/// default [`PschedClock`]. Pure: no I/O.
///
/// ```
/// use lqos_apply::netlink::encode_op;
/// use lqos_tc::TcOp;
/// let mut buf = Vec::new();
/// encode_op(&TcOp::delete_root(), 3, 7, &mut buf).unwrap();
/// assert_eq!(buf.len(), 36); // nlmsghdr + tcmsg
/// assert_eq!(&buf[4..6], &37u16.to_ne_bytes()); // RTM_DELQDISC
/// ```
pub fn encode_op(op: &TcOp, ifindex: i32, seq: u32, buf: &mut Vec<u8>) -> Result<(), EncodeError> {
    encode_op_with(op, ifindex, seq, &PschedClock::default(), buf)
}

/// [`encode_op`] with an explicit scheduler clock (for HTB burst ticks).
/// On error nothing is appended.
pub fn encode_op_with(
    op: &TcOp,
    ifindex: i32,
    seq: u32,
    clock: &PschedClock,
    buf: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let start = buf.len();
    let r = encode_inner(op, ifindex, seq, clock, buf);
    if r.is_err() {
        buf.truncate(start);
    }
    r
}

const ADD: u16 = NLM_F_REQUEST | NLM_F_ACK | NLM_F_EXCL | NLM_F_CREATE;
const REPLACE: u16 = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE;
const CHANGE: u16 = NLM_F_REQUEST | NLM_F_ACK;
const DELETE: u16 = NLM_F_REQUEST | NLM_F_ACK;

fn encode_inner(
    op: &TcOp,
    ifindex: i32,
    seq: u32,
    clock: &PschedClock,
    buf: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    match op {
        TcOp::AddQdisc(q) => qdisc_msg(buf, q, ADD, ifindex, seq),
        TcOp::ReplaceQdisc(q) => qdisc_msg(buf, q, REPLACE, ifindex, seq),
        // `tc qdisc del dev X root`: parent TC_H_ROOT, handle 0.
        TcOp::DeleteRoot => {
            let m = Msg::begin(buf, RTM_DELQDISC, DELETE, seq);
            tcmsg(m.buf, ifindex, TcHandle::UNSPEC, TcHandle::ROOT);
            m.finish()
        }
        TcOp::DeleteQdisc { parent, handle } => {
            let m = Msg::begin(buf, RTM_DELQDISC, DELETE, seq);
            if *parent == lqos_tc::classify::CLSACT_PARENT {
                // `tc qdisc del dev X clsact` names the slot and the kind.
                tcmsg(m.buf, ifindex, lqos_tc::classify::CLSACT_HANDLE, *parent);
                attr_str(m.buf, TCA_KIND, "clsact");
            } else {
                tcmsg(m.buf, ifindex, *handle, *parent);
            }
            m.finish()
        }
        TcOp::AddClass(c) => class_msg(buf, c, ADD, ifindex, seq, clock),
        TcOp::ChangeClass(c) => class_msg(buf, c, CHANGE, ifindex, seq, clock),
        TcOp::DeleteClass { parent, classid } => {
            let m = Msg::begin(buf, RTM_DELTCLASS, DELETE, seq);
            tcmsg(m.buf, ifindex, *classid, *parent);
            m.finish()
        }
        TcOp::ReplaceFilter(f) => super::filter::replace_msg(buf, f, ifindex, seq),
        TcOp::DeleteFilter(k) => super::filter::delete_msg(buf, k, ifindex, seq),
    }
}

/// An nlmsghdr being written at `start` of `buf`.
pub(crate) struct Msg<'a> {
    pub(crate) buf: &'a mut Vec<u8>,
    start: usize,
}

impl<'a> Msg<'a> {
    pub(crate) fn begin(buf: &'a mut Vec<u8>, ty: u16, flags: u16, seq: u32) -> Msg<'a> {
        let start = buf.len();
        buf.extend_from_slice(&0u32.to_ne_bytes()); // nlmsg_len, patched
        buf.extend_from_slice(&ty.to_ne_bytes());
        buf.extend_from_slice(&flags.to_ne_bytes());
        buf.extend_from_slice(&seq.to_ne_bytes());
        buf.extend_from_slice(&0u32.to_ne_bytes()); // nlmsg_pid: kernel fills in
        Msg { buf, start }
    }

    pub(crate) fn finish(self) -> Result<(), EncodeError> {
        let len = self.buf.len() - self.start;
        let len32 = u32::try_from(len).map_err(|_| EncodeError::TooLarge { len })?;
        self.buf[self.start..self.start + 4].copy_from_slice(&len32.to_ne_bytes());
        Ok(())
    }
}

pub(crate) fn tcmsg(buf: &mut Vec<u8>, ifindex: i32, handle: TcHandle, parent: TcHandle) {
    buf.extend_from_slice(&[0, 0, 0, 0]); // tcm_family AF_UNSPEC + 3 pad
    buf.extend_from_slice(&ifindex.to_ne_bytes());
    buf.extend_from_slice(&handle.raw().to_ne_bytes());
    buf.extend_from_slice(&parent.raw().to_ne_bytes());
    buf.extend_from_slice(&0u32.to_ne_bytes()); // tcm_info
}

fn pad4(buf: &mut Vec<u8>) {
    while buf.len() % 4 != 0 {
        buf.push(0);
    }
}

pub(crate) fn attr(buf: &mut Vec<u8>, ty: u16, payload: &[u8]) {
    let len = (4 + payload.len()) as u16;
    buf.extend_from_slice(&len.to_ne_bytes());
    buf.extend_from_slice(&ty.to_ne_bytes());
    buf.extend_from_slice(payload);
    pad4(buf);
}

fn attr_u32(buf: &mut Vec<u8>, ty: u16, v: u32) {
    attr(buf, ty, &v.to_ne_bytes());
}

fn attr_u64(buf: &mut Vec<u8>, ty: u16, v: u64) {
    attr(buf, ty, &v.to_ne_bytes());
}

pub(crate) fn attr_str(buf: &mut Vec<u8>, ty: u16, s: &str) {
    let len = (4 + s.len() + 1) as u16;
    buf.extend_from_slice(&len.to_ne_bytes());
    buf.extend_from_slice(&ty.to_ne_bytes());
    buf.extend_from_slice(s.as_bytes());
    buf.push(0);
    pad4(buf);
}

/// Starts a nested attribute (no `NLA_F_NESTED` flag, as tc sends it);
/// returns its offset for [`nest_end`].
pub(crate) fn nest_begin(buf: &mut Vec<u8>, ty: u16) -> usize {
    let pos = buf.len();
    buf.extend_from_slice(&0u16.to_ne_bytes());
    buf.extend_from_slice(&ty.to_ne_bytes());
    pos
}

pub(crate) fn nest_end(buf: &mut [u8], pos: usize) -> Result<(), EncodeError> {
    let len = buf.len() - pos;
    let len16 = u16::try_from(len).map_err(|_| EncodeError::TooLarge { len })?;
    buf[pos..pos + 2].copy_from_slice(&len16.to_ne_bytes());
    Ok(())
}

fn qdisc_msg(
    buf: &mut Vec<u8>,
    q: &Qdisc,
    flags: u16,
    ifindex: i32,
    seq: u32,
) -> Result<(), EncodeError> {
    let kind = q.kind.name();
    if kind.is_empty() || kind.len() > 15 || !kind.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(EncodeError::KindName {
            handle: q.handle,
            name: kind.to_string(),
        });
    }
    let m = Msg::begin(buf, RTM_NEWQDISC, flags, seq);
    tcmsg(m.buf, ifindex, q.handle, q.parent);
    attr_str(m.buf, TCA_KIND, kind);
    match &q.kind {
        QdiscKind::Mq | QdiscKind::Clsact | QdiscKind::Other(_) => {}
        QdiscKind::Htb(h) => htb_qdisc_opts(m.buf, h)?,
        QdiscKind::Pfifo { limit } | QdiscKind::Bfifo { limit } => {
            // struct tc_fifo_qopt { __u32 limit; } directly in TCA_OPTIONS.
            if let Some(l) = limit {
                attr_u32(m.buf, TCA_OPTIONS, *l);
            }
        }
        QdiscKind::Cake(c) => cake_opts(m.buf, c)?,
        QdiscKind::FqCodel(f) => fq_codel_opts(m.buf, f)?,
    }
    m.finish()
}

fn htb_qdisc_opts(buf: &mut Vec<u8>, h: &HtbQdisc) -> Result<(), EncodeError> {
    let nest = nest_begin(buf, TCA_OPTIONS);
    let mut glob = [0u8; TC_HTB_GLOB_LEN];
    glob[0..4].copy_from_slice(&HTB_VERSION.to_ne_bytes());
    glob[4..8].copy_from_slice(&h.r2q.unwrap_or(10).to_ne_bytes());
    glob[8..12].copy_from_slice(&h.default_minor.to_ne_bytes());
    // debug = 0, direct_pkts = 0
    attr(buf, TCA_HTB_INIT, &glob);
    if let Some(q) = h.direct_qlen {
        attr_u32(buf, TCA_HTB_DIRECT_QLEN, q);
    }
    nest_end(buf, nest)
}

fn cake_opts(buf: &mut Vec<u8>, c: &CakeParams) -> Result<(), EncodeError> {
    // Same attributes, same order as tc's cake_parse_opt.
    let nest = nest_begin(buf, TCA_OPTIONS);
    if let Some(bw) = c.bandwidth {
        attr_u64(buf, TCA_CAKE_BASE_RATE64, bw.bytes_per_sec());
    }
    if let Some(d) = c.diffserv {
        attr_u32(buf, TCA_CAKE_DIFFSERV_MODE, d.kernel());
    }
    if let Some(f) = c.flow_mode {
        attr_u32(buf, TCA_CAKE_FLOW_MODE, f.kernel());
    }
    if let Some(rtt) = c.rtt_us {
        attr_u32(buf, TCA_CAKE_RTT, rtt);
        // tc derives the target from the rtt and always sends both.
        attr_u32(buf, TCA_CAKE_TARGET, (rtt / 20).max(1));
    }
    if c.bandwidth.is_some() {
        // tc: an explicit bandwidth switches autorate-ingress off.
        attr_u32(buf, TCA_CAKE_AUTORATE, 0);
    }
    if let Some(m) = c.memlimit {
        attr_u32(buf, TCA_CAKE_MEMORY, m);
    }
    if let Some(nat) = c.nat {
        attr_u32(buf, TCA_CAKE_NAT, u32::from(nat));
    }
    if let Some(wash) = c.wash {
        attr_u32(buf, TCA_CAKE_WASH, u32::from(wash));
    }
    if let Some(s) = c.split_gso {
        attr_u32(buf, TCA_CAKE_SPLIT_GSO, u32::from(s));
    }
    if let Some(a) = c.ack_filter {
        attr_u32(buf, TCA_CAKE_ACK_FILTER, a.kernel());
    }
    nest_end(buf, nest)
}

fn fq_codel_opts(buf: &mut Vec<u8>, f: &FqCodelParams) -> Result<(), EncodeError> {
    // Same attributes, same order as tc's fq_codel_parse_opt.
    let nest = nest_begin(buf, TCA_OPTIONS);
    let put = |buf: &mut Vec<u8>, ty, v: Option<u32>| {
        if let Some(v) = v {
            attr_u32(buf, ty, v);
        }
    };
    put(buf, TCA_FQ_CODEL_LIMIT, f.limit);
    put(buf, TCA_FQ_CODEL_FLOWS, f.flows);
    put(buf, TCA_FQ_CODEL_QUANTUM, f.quantum);
    put(buf, TCA_FQ_CODEL_INTERVAL, f.interval_us);
    put(buf, TCA_FQ_CODEL_TARGET, f.target_us);
    put(buf, TCA_FQ_CODEL_ECN, f.ecn.map(u32::from));
    put(buf, TCA_FQ_CODEL_MEMORY_LIMIT, f.memory_limit);
    nest_end(buf, nest)
}

fn class_msg(
    buf: &mut Vec<u8>,
    c: &Class,
    flags: u16,
    ifindex: i32,
    seq: u32,
    clock: &PschedClock,
) -> Result<(), EncodeError> {
    let h = &c.htb;
    let rate = nonzero(c.classid, "rate", h.rate)?;
    let ceil = nonzero(c.classid, "ceil", h.ceil)?;
    if h.prio > 7 {
        return Err(EncodeError::Prio {
            classid: c.classid,
            prio: h.prio,
        });
    }
    let m = Msg::begin(buf, RTM_NEWTCLASS, flags, seq);
    tcmsg(m.buf, ifindex, c.classid, c.parent);
    attr_str(m.buf, TCA_KIND, "htb");
    let nest = nest_begin(m.buf, TCA_OPTIONS);
    if rate >= 1 << 32 {
        attr_u64(m.buf, TCA_HTB_RATE64, rate);
    }
    if ceil >= 1 << 32 {
        attr_u64(m.buf, TCA_HTB_CEIL64, ceil);
    }
    attr(m.buf, TCA_HTB_PARMS, &htb_opt(h, rate, ceil, clock));
    nest_end(m.buf, nest)?;
    m.finish()
}

fn nonzero(classid: TcHandle, what: &'static str, r: Rate) -> Result<u64, EncodeError> {
    match r.bytes_per_sec() {
        0 => Err(EncodeError::ZeroRate { classid, what }),
        b => Ok(b),
    }
}

/// `struct tc_htb_opt`, filled as tc does (ratespecs with tc's cell_log 3
/// for mtu 1600, cell_align -1, linklayer ethernet).
fn htb_opt(h: &HtbClass, rate: u64, ceil: u64, clock: &PschedClock) -> [u8; TC_HTB_OPT_LEN] {
    let mut o = [0u8; TC_HTB_OPT_LEN];
    ratespec(&mut o[0..12], rate);
    ratespec(&mut o[12..24], ceil);
    let burst = h.burst.unwrap_or_else(|| clock.default_burst(rate));
    let cburst = h.cburst.unwrap_or_else(|| clock.default_burst(ceil));
    o[24..28].copy_from_slice(&clock.xmit_ticks(rate, burst).to_ne_bytes());
    o[28..32].copy_from_slice(&clock.xmit_ticks(ceil, cburst).to_ne_bytes());
    o[32..36].copy_from_slice(&h.quantum.to_ne_bytes());
    // level (36..40) is output-only: 0.
    o[40..44].copy_from_slice(&h.prio.to_ne_bytes());
    o
}

/// `struct tc_ratespec { u8 cell_log; u8 linklayer; u16 overhead;
/// s16 cell_align; u16 mpu; u32 rate; }`.
fn ratespec(out: &mut [u8], bytes_per_sec: u64) {
    // tc_calc_rtable with mtu 1600: smallest cell_log with 1600 >> cell_log <= 255.
    out[0] = 3;
    out[1] = LINKLAYER_ETHERNET;
    out[2..4].copy_from_slice(&0u16.to_ne_bytes());
    out[4..6].copy_from_slice(&(-1i16).to_ne_bytes());
    out[6..8].copy_from_slice(&0u16.to_ne_bytes());
    let r32 = u32::try_from(bytes_per_sec).unwrap_or(u32::MAX);
    out[8..12].copy_from_slice(&r32.to_ne_bytes());
}

/// `RTM_GETQDISC` / `RTM_GETTCLASS` dump request for one interface;
/// `parent` is `UNSPEC` (everything) or, for `RTM_GETTCLASS`, a qdisc's
/// handle (`1:`): then the kernel dumps only that qdisc's classes (`tc class
/// show dev IF parent 1:`).
pub(crate) fn dump_request_parent(
    buf: &mut Vec<u8>,
    ty: u16,
    ifindex: i32,
    parent: TcHandle,
    seq: u32,
) {
    let m = Msg::begin(buf, ty, NLM_F_REQUEST | NLM_F_DUMP, seq);
    tcmsg(m.buf, ifindex, TcHandle::UNSPEC, parent);
    m.finish().expect("dump request is small");
}

/// The `RTM_GETTCLASS` dump request for the classes of qdisc `parent`
/// (`major:`) on interface `ifindex`, as `tc class show dev IF parent
/// MAJOR:` sends it. lqos reads classes back one HTB qdisc at a time: see
/// [`NetlinkSocket::dump`](super::NetlinkSocket::dump).
pub fn class_dump_request(buf: &mut Vec<u8>, ifindex: i32, parent: TcHandle, seq: u32) {
    dump_request_parent(buf, RTM_GETTCLASS, ifindex, parent, seq);
}

/// `RTM_GETLINK` for one interface by name.
pub(crate) fn getlink_request(buf: &mut Vec<u8>, name: &str, seq: u32) {
    let m = Msg::begin(buf, RTM_GETLINK, NLM_F_REQUEST, seq);
    m.buf.extend_from_slice(&[0u8; IFINFOMSG_LEN]);
    attr_str(m.buf, IFLA_IFNAME, name);
    m.finish().expect("getlink request is small");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_math_matches_tc() {
        let c = PschedClock::default();
        assert_eq!(c.tick_in_usec(), 15.625);
        assert_eq!(c.tc_hz(), 1_000_000_000);
        // 10mbit: 1600 bytes in 1280 us = 20000 ticks (tc's capture).
        assert_eq!(c.xmit_ticks(1_250_000, c.default_burst(1_250_000)), 20000);
        // 0.7mbit: tc truncates 18285.71 us to 18285 us first.
        assert_eq!(c.xmit_ticks(87_500, 1600), 285_703);
        // 10gbit: 1.28 us -> 1 us -> 15 ticks, like tc.
        assert_eq!(
            c.xmit_ticks(1_250_000_000, c.default_burst(1_250_000_000)),
            15
        );
        // 50gbit: tc sends 0; lqos keeps the sub-microsecond time.
        let r = 6_250_000_000;
        assert_eq!(c.xmit_ticks(r, c.default_burst(r)), 4);
        assert!(c.xmit_ticks(u64::MAX, 1) >= 1);
    }

    #[test]
    fn xmit_size_inverts_ticks() {
        let c = PschedClock::default();
        for (rate, size) in [(87_500u64, 1600u32), (1_250_000, 15000), (350, 1600)] {
            let t = c.xmit_ticks(rate, size);
            let back = c.xmit_size(rate, t);
            assert!(
                back.abs_diff(size) <= 1 + (rate / 1_000_000) as u32,
                "{rate} {size} {back}"
            );
        }
    }

    #[test]
    fn psched_parse_rejects_garbage() {
        assert!(PschedClock::parse("").is_err());
        assert!(PschedClock::parse("1 0 1 1").is_err());
        assert!(PschedClock::parse("zz 1 1 1").is_err());
    }

    #[test]
    fn zero_rate_appends_nothing() {
        let c = Class {
            parent: TcHandle::new(1, 0),
            classid: TcHandle::new(1, 1),
            htb: HtbClass {
                rate: Rate::from_bps(7),
                ceil: Rate::from_mbps(1),
                quantum: 1522,
                prio: 0,
                burst: None,
                cburst: None,
            },
        };
        let mut buf = vec![1, 2, 3];
        let e = encode_op(&TcOp::AddClass(c), 1, 1, &mut buf).unwrap_err();
        assert!(matches!(e, EncodeError::ZeroRate { what: "rate", .. }));
        assert_eq!(buf, [1, 2, 3]);
    }
}
