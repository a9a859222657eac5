//! The rtnetlink socket: pipelined op sending with ACK matching, link
//! lookup and live-tree dumps.

use std::fmt;
use std::fs::File;
use std::io;

use lqos_tc::ops::QdiscKind;
use lqos_tc::tree::TcTree;
use lqos_tc::{TcHandle, TcOp};
use neli::consts::socket::{Msg, NlFamily};
use neli::socket::NlSocket;
use neli::utils::Groups;
use nix::sched::{setns, CloneFlags};

use super::attr::attrs;
use super::consts::*;
use super::error::DecodeError;
use super::msg::{self, msgs, parse_ack};
use super::pipeline::{
    strerror, OpFailure, RecvMode, SendOptions, SendPipeline, SendStats, MAX_SEND_BYTES,
};
use super::psched::{PschedClock, PschedParseError};
use super::stats::{self as st, ClassSample, QdiscSample};
use super::{flower, htb, op};

/// Errors of the socket layer (everything except a failed op, which is an
/// [`OpFailure`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NetlinkError {
    /// `socket()`/`bind()`/`setsockopt()` of the rtnetlink socket failed.
    #[error("cannot open rtnetlink socket: {0}")]
    Open(#[source] io::Error),
    /// Entering or leaving a network namespace failed.
    #[error("network namespace {name:?}: {what}: {source}")]
    Netns {
        /// The namespace name (under `/run/netns`).
        name: String,
        /// What was being done.
        what: &'static str,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The interface does not exist (in this network namespace).
    #[error("interface {name:?} does not exist")]
    NoSuchInterface {
        /// The interface name.
        name: String,
    },
    /// The kernel refused a request.
    #[error("{what}: {message} (errno {errno})")]
    Kernel {
        /// The request.
        what: Request,
        /// Positive errno.
        errno: i32,
        /// Extended-ACK text, else strerror.
        message: String,
    },
    /// Sending or receiving failed.
    #[error("{what}: {source}")]
    Io {
        /// The request being sent or answered.
        what: Request,
        /// The OS error (`ENOBUFS` = replies were lost).
        #[source]
        source: io::Error,
    },
    /// The kernel's reply could not be parsed.
    #[error("{what}: {source}")]
    Decode {
        /// The request being answered.
        what: Request,
        /// Details.
        #[source]
        source: DecodeError,
    },
    /// `/proc/net/psched` could not be read.
    #[error("reading /proc/net/psched: {0}")]
    PschedRead(#[source] io::Error),
    /// `/proc/net/psched` could not be parsed.
    #[error("parsing /proc/net/psched: {0}")]
    PschedParse(#[source] PschedParseError),
}

/// The request a [`NetlinkError`] is about.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Request {
    /// Looking up an interface by name.
    Link {
        /// The interface.
        name: String,
    },
    /// A dump of an interface's qdiscs, classes or egress filters.
    Dump {
        /// What is dumped.
        of: DumpOf,
        /// The interface.
        ifindex: i32,
        /// The qdisc whose classes are dumped (`None`: the whole
        /// interface's).
        parent: Option<TcHandle>,
    },
    /// A dump's replies captured whole.
    Capture,
    /// The ACK of an op of a stream.
    Ack {
        /// The op's 0-based index in the stream.
        op: usize,
    },
}

/// What a [`Request::Dump`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DumpOf {
    /// `RTM_GETQDISC`.
    Qdiscs,
    /// `RTM_GETTCLASS`.
    Classes,
    /// `RTM_GETTFILTER` of the egress hook.
    Filters,
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Request::Link { name } => write!(f, "looking up interface {name:?}"),
            Request::Dump {
                of,
                ifindex,
                parent,
            } => {
                let of = match of {
                    DumpOf::Qdiscs => "qdiscs",
                    DumpOf::Classes => "classes",
                    DumpOf::Filters => "egress filters",
                };
                match parent {
                    None => write!(f, "dumping {of} of ifindex {ifindex}"),
                    Some(p) => write!(f, "dumping {of} of qdisc {p} on ifindex {ifindex}"),
                }
            }
            Request::Capture => f.write_str("capturing a dump"),
            Request::Ack { op } => write!(f, "receiving the ACK of op #{op}"),
        }
    }
}

/// An interface as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LinkInfo {
    /// Interface name.
    pub name: String,
    /// Interface index (`tcm_ifindex` for tc requests).
    pub ifindex: i32,
    /// Number of TX queues (`IFLA_NUM_TX_QUEUES`): the mq classes available.
    pub num_tx_queues: u32,
    /// MTU in bytes.
    pub mtu: u32,
}

/// Requested receive buffer (the kernel doubles it, capped by rmem_max).
const RCVBUF_REQUEST: usize = 8 << 20;
/// Generous receive-buffer cost of one queued ACK (skb overhead included;
/// error ACKs echo the request and carry ext-ack text).
const ACK_BUDGET: usize = 2048;
/// Dump datagrams are at most 32 KiB; error ACKs echo our (small) requests.
const RECV_BUF: usize = 256 << 10;

/// A `NETLINK_ROUTE` socket with extended ACKs, reused buffers and a
/// per-socket sequence counter.
pub struct NetlinkSocket {
    sock: NlSocket,
    clock: PschedClock,
    next_seq: u32,
    ack_capacity: usize,
    sendbuf: Vec<u8>,
    recvbuf: Vec<u8>,
    /// Names of interfaces looked up with `link`, for error messages.
    names: Vec<(i32, String)>,
}

impl fmt::Debug for NetlinkSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NetlinkSocket")
            .field("clock", &self.clock)
            .field("ack_capacity", &self.ack_capacity)
            .finish_non_exhaustive()
    }
}

fn io_what(what: Request) -> impl FnOnce(io::Error) -> NetlinkError {
    move |source| NetlinkError::Io { what, source }
}

impl NetlinkSocket {
    /// Opens a `NETLINK_ROUTE` socket in the calling thread's current
    /// network namespace, enables extended ACKs, sizes the receive buffer
    /// and reads the scheduler clock from `/proc/net/psched`.
    pub fn open() -> Result<Self, NetlinkError> {
        let sock = NlSocket::connect(NlFamily::Route, None, Groups::empty())
            .map_err(NetlinkError::Open)?;
        sock.block().map_err(NetlinkError::Open)?;
        sock.enable_ext_ack(true).map_err(NetlinkError::Open)?;
        let psched =
            std::fs::read_to_string("/proc/net/psched").map_err(NetlinkError::PschedRead)?;
        let clock = PschedClock::parse(&psched).map_err(NetlinkError::PschedParse)?;
        let mut s = NetlinkSocket {
            sock,
            clock,
            next_seq: 1,
            ack_capacity: 1,
            sendbuf: Vec::with_capacity(MAX_SEND_BYTES + 4096),
            recvbuf: vec![0; RECV_BUF],
            names: Vec::new(),
        };
        s.set_recv_buffer_size(RCVBUF_REQUEST)?;
        Ok(s)
    }

    /// Sets `SO_RCVBUF` (the kernel caps it at `net.core.rmem_max` and
    /// doubles it) and bounds the requests in flight so their ACKs fit.
    pub fn set_recv_buffer_size(&mut self, bytes: usize) -> Result<(), NetlinkError> {
        self.sock
            .set_recv_buffer_size(bytes)
            .map_err(NetlinkError::Open)?;
        let rmem_max = std::fs::read_to_string("/proc/sys/net/core/rmem_max")
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok())
            .unwrap_or(212_992);
        let rcvbuf = 2 * bytes.min(rmem_max);
        self.ack_capacity = (rcvbuf / ACK_BUDGET).max(1);
        Ok(())
    }

    /// Test hook: overrides the in-flight bound derived from the receive
    /// buffer, to provoke lost ACKs (`ENOBUFS`).
    #[doc(hidden)]
    pub fn force_ack_capacity(&mut self, n: usize) {
        self.ack_capacity = n.max(1);
    }

    /// Opens the socket inside network namespace `name` (`/run/netns/NAME`,
    /// as `ip netns` creates them): enters it on this thread, opens, and
    /// always returns the thread to its original namespace, also on error.
    /// The socket stays bound to `name`.
    pub fn open_in_netns(name: &str) -> Result<Self, NetlinkError> {
        let ns_err = |what: &'static str| {
            let name = name.to_string();
            move |source: io::Error| NetlinkError::Netns { name, what, source }
        };
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            return Err(ns_err("invalid name")(io::Error::from_raw_os_error(
                libc::EINVAL,
            )));
        }
        let original =
            File::open("/proc/thread-self/ns/net").map_err(ns_err("opening the current netns"))?;
        let target =
            File::open(format!("/run/netns/{name}")).map_err(ns_err("opening /run/netns entry"))?;
        setns(&target, CloneFlags::CLONE_NEWNET)
            .map_err(|e| ns_err("entering")(io::Error::from(e)))?;
        let opened = Self::open();
        let back = setns(&original, CloneFlags::CLONE_NEWNET);
        if let Err(e) = back {
            return Err(ns_err("returning to the original netns")(io::Error::from(
                e,
            )));
        }
        opened
    }

    /// The scheduler clock read at open time.
    pub fn clock(&self) -> PschedClock {
        self.clock
    }

    /// Most requests this socket keeps unanswered (receive buffer bound).
    pub fn ack_capacity(&self) -> usize {
        self.ack_capacity
    }

    fn take_seq(&mut self, n: usize) -> u32 {
        let base = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(n as u32).wrapping_add(1);
        if self.next_seq == 0 {
            self.next_seq = 1;
        }
        base
    }

    fn send_buf(&mut self) -> io::Result<()> {
        let n = self.sock.send(&self.sendbuf, Msg::empty())?;
        if n != self.sendbuf.len() {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                format!("short netlink send: {n} of {} bytes", self.sendbuf.len()),
            ));
        }
        Ok(())
    }

    /// Receives one datagram into `recvbuf`; returns its length.
    fn recv_one(&mut self, flags: Msg) -> io::Result<usize> {
        loop {
            match self.sock.recv(&mut self.recvbuf[..], flags | Msg::TRUNC) {
                Ok((n, _)) if n > self.recvbuf.len() => {
                    return Err(io::Error::other(format!(
                        "netlink datagram of {n} bytes truncated to {}",
                        self.recvbuf.len()
                    )))
                }
                Ok((n, _)) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Looks up an interface by name.
    pub fn link(&mut self, name: &str) -> Result<LinkInfo, NetlinkError> {
        if name.is_empty() || name.len() > 15 {
            return Err(NetlinkError::NoSuchInterface {
                name: name.to_string(),
            });
        }
        let what = || Request::Link {
            name: name.to_string(),
        };
        let info = self.request(
            &what,
            |buf, seq| msg::getlink_request(buf, name, seq),
            |m| match m.ty {
                NLMSG_ERROR => {
                    let ack = parse_ack(m).map_err(|source| NetlinkError::Decode {
                        what: what(),
                        source,
                    })?;
                    if ack.errno == libc::ENODEV {
                        return Err(NetlinkError::NoSuchInterface {
                            name: name.to_string(),
                        });
                    }
                    Err(kernel_error(what(), &ack))
                }
                RTM_NEWLINK if m.payload.len() >= IFINFOMSG_LEN => {
                    let p = m.payload;
                    let ifindex = i32::from_ne_bytes([p[4], p[5], p[6], p[7]]);
                    let mut info = LinkInfo {
                        name: name.to_string(),
                        ifindex,
                        num_tx_queues: 1,
                        mtu: 0,
                    };
                    for (ty, v) in attrs(&p[IFINFOMSG_LEN..]) {
                        let x =
                            (v.len() >= 4).then(|| u32::from_ne_bytes([v[0], v[1], v[2], v[3]]));
                        match (ty, x) {
                            (IFLA_MTU, Some(x)) => info.mtu = x,
                            (IFLA_NUM_TX_QUEUES, Some(x)) => info.num_tx_queues = x,
                            _ => {}
                        }
                    }
                    Ok(Some(info))
                }
                _ => Ok(None),
            },
        )?;
        let ifindex = info.ifindex;
        if !self.names.iter().any(|(i, n)| *i == ifindex && n == name) {
            self.names.retain(|(i, _)| *i != ifindex);
            self.names.push((ifindex, name.to_string()));
        }
        Ok(info)
    }

    /// Sends one request (built by `encode` with its sequence number) and
    /// hands every reply carrying that sequence number to `on_reply` until
    /// it returns `Some` (or an error). `what` names the request in errors.
    fn request<T>(
        &mut self,
        what: &dyn Fn() -> Request,
        encode: impl FnOnce(&mut Vec<u8>, u32),
        mut on_reply: impl FnMut(&msg::RawMsg<'_>) -> Result<Option<T>, NetlinkError>,
    ) -> Result<T, NetlinkError> {
        let seq = self.take_seq(1);
        self.sendbuf.clear();
        encode(&mut self.sendbuf, seq);
        self.send_buf().map_err(io_what(what()))?;
        loop {
            let n = self.recv_one(Msg::empty()).map_err(io_what(what()))?;
            for m in msgs(&self.recvbuf[..n]) {
                let m = m.map_err(|source| NetlinkError::Decode {
                    what: what(),
                    source,
                })?;
                if m.seq != seq {
                    continue;
                }
                if let Some(done) = on_reply(&m)? {
                    return Ok(done);
                }
            }
        }
    }

    /// Sends `ops` for interface `ifindex`, many per `sendmsg`, with at most
    /// `opts.max_in_flight` unanswered, matching each ACK to its op by
    /// sequence number. `progress` is called with the number of ops the
    /// kernel has answered so far. At the first refused op no further
    /// batch is sent; outstanding ACKs are drained and the failure returned
    /// with the kernel's extended-ACK message and the fate of every other
    /// op. The decisions are a pure state machine's (`pipeline.rs`,
    /// unit-tested); this only moves bytes.
    // The failure carries the op by value (the shared API): it is returned
    // once per call, so its size does not matter.
    #[allow(clippy::result_large_err)]
    pub fn send_ops(
        &mut self,
        ifindex: i32,
        ops: &[TcOp],
        opts: &SendOptions,
        progress: &mut dyn FnMut(usize),
    ) -> Result<SendStats, OpFailure> {
        self.send_ops_until(ifindex, ops, opts, progress, &|| false)
    }

    /// [`send_ops`](Self::send_ops) that sends no further batch once `stop`
    /// returns true (checked before each `sendmsg`): the ACKs of the
    /// batches in flight are still read, and the ops not sent are counted
    /// in [`SendStats::not_sent`].
    #[allow(clippy::result_large_err)]
    pub fn send_ops_until(
        &mut self,
        ifindex: i32,
        ops: &[TcOp],
        opts: &SendOptions,
        progress: &mut dyn FnMut(usize),
        stop: &dyn Fn() -> bool,
    ) -> Result<SendStats, OpFailure> {
        let base = self.take_seq(ops.len());
        let mut p = SendPipeline::new(ops, ifindex, base, opts, self.ack_capacity, self.clock);
        loop {
            if !p.is_stopped() && stop() {
                p.stop();
            }
            if p.poll_transmit(&mut self.sendbuf) > 0 {
                let sent = self.send_buf();
                p.handle_transmit(sent);
                continue;
            }
            let Some(mode) = p.poll_recv() else { break };
            let flags = match mode {
                RecvMode::Block => Msg::empty(),
                RecvMode::Drain => Msg::DONTWAIT,
            };
            match self.recv_one(flags) {
                Ok(len) => {
                    p.handle_datagram(&self.recvbuf[..len]);
                    progress(p.answered());
                }
                Err(e) => p.handle_recv_error(e),
            }
        }
        let dev = self
            .names
            .iter()
            .find(|(i, _)| *i == ifindex)
            .map(|(_, n)| n.clone());
        p.finish(dev)
    }

    /// Reads the live qdiscs and HTB classes of interface `ifindex` back
    /// (`RTM_GETQDISC` and `RTM_GETTCLASS` dumps).
    ///
    /// Qdiscs are keyed by handle; kernel-created defaults with handle 0
    /// (a veth's `noqueue` root, the `pfifo_fast 0:` under each mq queue no
    /// plan replaced) go to [`TcTree::kernel_defaults`], keyed by parent
    /// ([`TcTree::insert_qdisc`]).
    /// Invisible qdiscs (HTB's automatic leaf `pfifo`s) are not dumped.
    /// Classes: only HTB classes; a top class's parent is its qdisc
    /// (`1:`), burst/cburst are converted from ticks back to bytes.
    pub fn dump(&mut self, ifindex: i32) -> Result<TcTree, NetlinkError> {
        // A dump that races a concurrent change is flagged NLM_F_DUMP_INTR;
        // one whose replies found the receive buffer full is cut short
        // (ENOBUFS: the kernel dropped a reply, the tree read so far is
        // incomplete, never an empty or partial tree to trust): drain what
        // is left of it and retry a few times, then report it.
        let mut attempt = 0;
        loop {
            match self.dump_once(ifindex) {
                Err(NetlinkError::Kernel { errno, .. }) if errno == libc::EINTR && attempt < 3 => {
                    attempt += 1;
                }
                Err(NetlinkError::Io { source, .. })
                    if source.raw_os_error() == Some(libc::ENOBUFS) && attempt < 3 =>
                {
                    self.drain();
                    attempt += 1;
                }
                r => return r,
            }
        }
    }

    /// Reads and drops everything queued on the socket (the rest of a dump
    /// that was cut short, stale replies) until nothing is left.
    fn drain(&mut self) {
        loop {
            match self.recv_one(Msg::DONTWAIT) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {}
                Err(_) => return,
            }
        }
    }

    /// Test hook: sends `n` requests (link lookups of `lo`) and leaves their
    /// replies unread, so that a small receive buffer is full when the next
    /// request's replies arrive (`ENOBUFS`).
    #[doc(hidden)]
    pub fn leave_replies_unread(&mut self, n: usize) -> Result<(), NetlinkError> {
        for _ in 0..n {
            let seq = self.take_seq(1);
            self.sendbuf.clear();
            msg::getlink_request(&mut self.sendbuf, "lo", seq);
            self.send_buf()
                .map_err(io_what(Request::Link { name: "lo".into() }))?;
        }
        Ok(())
    }

    /// The statistics of every HTB class of interface `ifindex`: one qdisc
    /// dump finds the HTB qdiscs, then one class dump per HTB (see
    /// [`dump`](Self::dump) for why), as
    /// [`class_samples_of`](Self::class_samples_of).
    pub fn class_samples(&mut self, ifindex: i32) -> Result<Vec<ClassSample>, NetlinkError> {
        let mut htbs = Vec::new();
        self.dump_kind(RTM_GETQDISC, ifindex, TcHandle::UNSPEC, |payload| {
            let (ifi, q) = op::decode_qdisc_dump(payload)?;
            if ifi == ifindex && matches!(q.kind, QdiscKind::Htb(_)) {
                htbs.push(q.handle);
            }
            Ok(())
        })?;
        let mut out = Vec::new();
        self.class_samples_of(ifindex, &htbs, &mut out)?;
        Ok(out)
    }

    /// The statistics of the classes of the HTB qdiscs `htbs` (handles
    /// `major:`) of interface `ifindex`, one class dump each, without the
    /// qdisc dump [`class_samples`](Self::class_samples) makes to find
    /// them (for a caller that knows them: a plan's HTBs): counters with
    /// 64-bit packets and HTB's own statistics. An HTB that does not exist
    /// has no classes.
    pub fn class_samples_of(
        &mut self,
        ifindex: i32,
        htbs: &[TcHandle],
        out: &mut Vec<ClassSample>,
    ) -> Result<(), NetlinkError> {
        for &htb in htbs {
            self.dump_kind(RTM_GETTCLASS, ifindex, htb, |payload| {
                if let Some((ifi, s)) = st::decode_class_sample(payload)? {
                    if ifi == ifindex {
                        out.push(s);
                    }
                }
                Ok(())
            })?;
        }
        Ok(())
    }

    /// The statistics of every qdisc of interface `ifindex` (one qdisc
    /// dump: `tc -s qdisc show dev IF`), cake's and fq_codel's own included.
    pub fn qdisc_samples(
        &mut self,
        ifindex: i32,
        out: &mut Vec<QdiscSample>,
    ) -> Result<(), NetlinkError> {
        self.dump_kind(RTM_GETQDISC, ifindex, TcHandle::UNSPEC, |payload| {
            let (ifi, q) = st::decode_qdisc_sample(payload)?;
            if ifi == ifindex {
                out.push(q);
            }
            Ok(())
        })
    }

    /// Every reply message of one dump, whole (headers included), as the
    /// kernel sent them: `RTM_GETQDISC` of the interface, or `RTM_GETTCLASS`
    /// of qdisc `parent`. For capturing golden replies.
    #[doc(hidden)]
    pub fn dump_raw(
        &mut self,
        class_of: Option<TcHandle>,
        ifindex: i32,
    ) -> Result<Vec<Vec<u8>>, NetlinkError> {
        let (ty, parent) = match class_of {
            Some(p) => (RTM_GETTCLASS, p),
            None => (RTM_GETQDISC, TcHandle::UNSPEC),
        };
        let mut raw = Vec::new();
        let reply = if ty == RTM_GETTCLASS {
            RTM_NEWTCLASS
        } else {
            RTM_NEWQDISC
        };
        let what = || Request::Capture;
        self.request(
            &what,
            |buf, seq| msg::dump_request_parent(buf, ty, ifindex, parent, seq),
            |m| match m.ty {
                NLMSG_DONE => Ok(Some(())),
                NLMSG_ERROR => Err(NetlinkError::Kernel {
                    what: what(),
                    errno: libc::EIO,
                    message: "dump refused".into(),
                }),
                t if t == reply => {
                    let mut whole = Vec::with_capacity(NLMSG_HDRLEN + m.payload.len());
                    let len = (NLMSG_HDRLEN + m.payload.len()) as u32;
                    whole.extend_from_slice(&len.to_ne_bytes());
                    whole.extend_from_slice(&m.ty.to_ne_bytes());
                    whole.extend_from_slice(&m.flags.to_ne_bytes());
                    whole.extend_from_slice(&m.seq.to_ne_bytes());
                    whole.extend_from_slice(&0u32.to_ne_bytes());
                    whole.extend_from_slice(m.payload);
                    raw.push(whole);
                    Ok(None)
                }
                _ => Ok(None),
            },
        )?;
        Ok(raw)
    }

    fn dump_once(&mut self, ifindex: i32) -> Result<TcTree, NetlinkError> {
        let mut tree = TcTree::default();
        let clock = self.clock;
        self.dump_kind(RTM_GETQDISC, ifindex, TcHandle::UNSPEC, |payload| {
            let (ifi, q) = op::decode_qdisc_dump(payload)?;
            if ifi == ifindex {
                tree.insert_qdisc(q);
            }
            Ok(())
        })?;
        // Classes one HTB qdisc at a time (`tcm_parent` = its handle): a
        // class dump of the whole device walks every qdisc in the device's
        // hash on every resume of the dump (about every 32 KiB of replies),
        // HTB's invisible default `pfifo`s and all leaves included, so it
        // grows with classes x qdiscs. With a parent the kernel looks the
        // one qdisc up instead. 100,000 circuits, one device: 2.2 s of
        // kernel time for `tc class show dev ens19`, 0.35 s for the 16
        // `tc class show dev ens19 parent N:`. Only HTB classes are read
        // back, so only HTB qdiscs are asked.
        let htbs: Vec<TcHandle> = tree
            .qdiscs
            .values()
            .filter(|q| matches!(q.kind, QdiscKind::Htb(_)))
            .map(|q| q.handle)
            .collect();
        for htb in htbs {
            self.dump_kind(RTM_GETTCLASS, ifindex, htb, |payload| {
                if let Some((ifi, c)) = htb::decode_class(payload, &clock)? {
                    if ifi == ifindex {
                        tree.classes.insert(c.classid, c);
                    }
                }
                Ok(())
            })?;
        }
        // The classifier's egress filters (only lqos's: flower in lqos's
        // preference range); without a clsact there is no egress hook.
        if tree.has_clsact() {
            let mut filters = lqos_tc::classify::Filters::new();
            self.dump_kind(
                flower::RTM_GETTFILTER,
                ifindex,
                TcHandle::UNSPEC,
                |payload| {
                    if let Some((ifi, f)) = flower::decode_filter(payload)? {
                        if ifi == ifindex {
                            filters.insert(f.key, f);
                        }
                    }
                    Ok(())
                },
            )?;
            tree.filters = filters;
        }
        Ok(tree)
    }

    /// One dump of `ty` on `ifindex`; `parent` (a class dump's qdisc) or
    /// `UNSPEC` for everything.
    fn dump_kind(
        &mut self,
        ty: u16,
        ifindex: i32,
        parent: TcHandle,
        mut each: impl FnMut(&[u8]) -> Result<(), DecodeError>,
    ) -> Result<(), NetlinkError> {
        let what = || Request::Dump {
            of: match ty {
                RTM_GETQDISC => DumpOf::Qdiscs,
                RTM_GETTCLASS => DumpOf::Classes,
                _ => DumpOf::Filters,
            },
            ifindex,
            parent: (parent != TcHandle::UNSPEC).then_some(parent),
        };
        let reply = match ty {
            RTM_GETQDISC => RTM_NEWQDISC,
            RTM_GETTCLASS => RTM_NEWTCLASS,
            _ => flower::RTM_NEWTFILTER,
        };
        let mut interrupted = false;
        self.request(
            &what,
            |buf, seq| match ty {
                flower::RTM_GETTFILTER => flower::dump_request(buf, ifindex, seq),
                _ => msg::dump_request_parent(buf, ty, ifindex, parent, seq),
            },
            |m| {
                interrupted |= m.flags & NLM_F_DUMP_INTR != 0;
                match m.ty {
                    NLMSG_DONE if interrupted => Err(NetlinkError::Kernel {
                        what: what(),
                        errno: libc::EINTR,
                        message: "dump interrupted by a concurrent change".into(),
                    }),
                    NLMSG_DONE => {
                        let err = m
                            .payload
                            .get(..4)
                            .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
                            .unwrap_or(0);
                        if err < 0 {
                            return Err(NetlinkError::Kernel {
                                what: what(),
                                errno: -err,
                                message: strerror(-err),
                            });
                        }
                        Ok(Some(()))
                    }
                    NLMSG_ERROR => {
                        let ack = parse_ack(m).map_err(|source| NetlinkError::Decode {
                            what: what(),
                            source,
                        })?;
                        if ack.errno == 0 {
                            return Ok(Some(()));
                        }
                        Err(kernel_error(what(), &ack))
                    }
                    NLMSG_OVERRUN => Err(NetlinkError::Io {
                        what: what(),
                        source: io::Error::from_raw_os_error(libc::ENOBUFS),
                    }),
                    t if t == reply => {
                        each(m.payload).map_err(|source| NetlinkError::Decode {
                            what: what(),
                            source,
                        })?;
                        Ok(None)
                    }
                    _ => Ok(None),
                }
            },
        )
    }
}

/// The kernel's refusal of a request, with its extended-ACK text (or the
/// errno's description when it sent none).
fn kernel_error(what: Request, ack: &msg::Ack<'_>) -> NetlinkError {
    NetlinkError::Kernel {
        what,
        errno: ack.errno,
        message: ack
            .msg
            .map(str::to_string)
            .unwrap_or_else(|| strerror(ack.errno)),
    }
}
