//! The op pipeline as a pure state machine (sans I/O, like quinn-proto's
//! `poll_*`/`handle_*` split): batching, sequence/ACK matching, lost ACKs
//! (`ENOBUFS`) and mid-batch failures, and the call's outcome
//! ([`SendStats`], [`OpFailure`]).
//! [`NetlinkSocket::send_ops`](super::NetlinkSocket::send_ops) only moves
//! the bytes:
//!
//! ```text
//! loop {
//!     if p.poll_transmit(&mut buf) > 0 { p.handle_transmit(sendmsg(&buf)); continue }
//!     match p.poll_recv() {
//!         None => break,
//!         Some(mode) => match recvmsg(mode) {
//!             Ok(bytes) => p.handle_datagram(bytes),
//!             Err(e) => p.handle_recv_error(e),
//!         },
//!     }
//! }
//! p.finish()
//! ```
//!
//! What the kernel does with a batch (many requests in one `sendmsg`):
//! `netlink_rcv_skb` runs every message of the datagram, one after another,
//! and answers each with its own ACK or error; an error does not stop the
//! messages behind it. So after a refused op, later ops of the same batch
//! may be applied or refused too, and the outcome of each op is known only
//! from its own ACK. [`OpFailure`] reports exactly that.

use std::io;
use std::ops::Range;

use std::fmt;

use lqos_tc::TcOp;

use super::consts::NLMSG_ERROR;
use super::msg::{msgs, parse_ack};
use super::op::encode_op_with;
use super::psched::PschedClock;

/// How [`NetlinkSocket::send_ops`](super::NetlinkSocket::send_ops) pipelines requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendOptions {
    /// Most requests sent but not yet answered. Also capped by what the
    /// socket's receive buffer can hold, so no ACK is ever dropped.
    pub max_in_flight: usize,
    /// Requests per `sendmsg`. The kernel processes a whole batch before
    /// the call returns and does not stop at an error inside it: with
    /// `batch > 1` ops after a failing one in the same batch may still be
    /// applied (see [`OpFailure::applied_after`]). `batch = 1` is strictly
    /// stop-at-first-error.
    pub batch: usize,
}

impl Default for SendOptions {
    /// 128 requests per `sendmsg`, and their ACKs are read before the next
    /// batch is sent (the kernel handles a batch inside the `sendmsg` call,
    /// so deeper pipelining gains nothing and would send past an error).
    fn default() -> Self {
        SendOptions {
            max_in_flight: 128,
            batch: 128,
        }
    }
}

/// Outcome of a fully successful [`NetlinkSocket::send_ops`](super::NetlinkSocket::send_ops).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SendStats {
    /// Requests sent.
    pub sent: usize,
    /// Requests ACKed without error.
    pub acked: usize,
    /// Extended-ACK warnings the kernel attached to successful ACKs, by op
    /// index (e.g. HTB's "quantum of class ... is big").
    pub warnings: Vec<(usize, String)>,
    /// `sendmsg` calls made.
    pub sendmsgs: usize,
    /// Requests not sent because the call was stopped between two
    /// batches (0 unless stopped).
    pub not_sent: usize,
}

/// The first op the kernel (or the encoder) refused, and what is known
/// about every other op of the call.
///
/// The kernel runs every request of a `sendmsg` batch even after one fails
/// (each gets its own ACK), so with [`SendOptions::batch`] > 1 ops after
/// `index` may have been applied ([`Self::applied_after`]) or refused
/// ([`Self::refused_after`]); each is counted from its own ACK. When ACKs
/// were lost (`ENOBUFS`) some ops' outcome is unknown
/// ([`Self::unanswered`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct OpFailure {
    /// Index into the ops slice.
    pub index: usize,
    /// The op.
    pub op: TcOp,
    /// Positive errno (`EINVAL` for ops that could not be encoded,
    /// `ENOBUFS` if ACKs were lost).
    pub errno: i32,
    /// The kernel's extended-ACK text (e.g. "Specified class not found"),
    /// else strerror or the encoder's message.
    pub message: String,
    /// Ops before `index` that were ACKed ok (normally `index`).
    pub succeeded: usize,
    /// Ops after `index` that the kernel ACKed ok (applied): they were in
    /// the same `sendmsg` batch.
    pub applied_after: usize,
    /// Ops after `index` of the same batch that the kernel refused too.
    pub refused_after: usize,
    /// Ops (other than `index`) that were sent but never answered: their
    /// outcome is unknown (ACKs lost).
    pub unanswered: usize,
    /// Ops never sent.
    pub not_sent: usize,
    /// The interface index the ops were sent for.
    pub ifindex: i32,
    /// Its name, if this socket looked it up with [`NetlinkSocket::link`](super::NetlinkSocket::link).
    pub dev: Option<String>,
    /// Extended-ACK warnings of successful ACKs, by op index.
    pub warnings: Vec<(usize, String)>,
}

impl OpFailure {
    /// Ops the kernel ACKed ok, before and after the failure.
    pub fn applied(&self) -> usize {
        self.succeeded + self.applied_after
    }
}

impl fmt::Display for OpFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dev = self
            .dev
            .clone()
            .unwrap_or_else(|| format!("ifindex{}", self.ifindex));
        write!(
            f,
            "op #{} `tc {}` failed: {} (errno {}); {} earlier op(s) applied",
            self.index,
            lqos_tc::render::render_line(&dev, &self.op),
            self.message,
            self.errno,
            self.succeeded
        )?;
        if self.applied_after > 0 || self.refused_after > 0 {
            write!(
                f,
                ", {} later op(s) of the same batch applied and {} refused",
                self.applied_after, self.refused_after
            )?;
        }
        if self.unanswered > 0 {
            write!(f, ", {} unanswered (outcome unknown)", self.unanswered)?;
        }
        Ok(())
    }
}

impl std::error::Error for OpFailure {}

/// Keep one `sendmsg` well below the default socket send buffer.
pub(crate) const MAX_SEND_BYTES: usize = 64 << 10;

/// What is known about one op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpState {
    /// Not handed to the kernel (the pipeline stopped before it).
    NotSent,
    /// Sent, no ACK yet (after the end: its ACK was lost, outcome unknown).
    InFlight,
    /// ACKed without error: applied.
    Acked,
    /// Refused by the kernel (or not encodable, or its `sendmsg` failed).
    Refused,
}

/// How the socket should wait for the next datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RecvMode {
    /// Block until ACKs arrive.
    Block,
    /// Read what is queued without blocking (after a receive error: learn
    /// as much as possible about the outcome, then stop).
    Drain,
}

/// The failure with the lowest op index so far.
#[derive(Debug, Clone)]
struct FirstError {
    index: usize,
    errno: i32,
    message: String,
}

/// The pure state of one [`super::NetlinkSocket::send_ops`] call.
#[derive(Debug)]
pub(crate) struct SendPipeline<'a> {
    ops: &'a [TcOp],
    ifindex: i32,
    clock: PschedClock,
    base_seq: u32,
    batch: usize,
    max_in_flight: usize,
    max_bytes: usize,
    state: Vec<OpState>,
    /// Ops `..next` were encoded (and sent, unless `unconfirmed`).
    next: usize,
    /// The batch returned by the last `poll_transmit`, until
    /// `handle_transmit` says whether `sendmsg` took it.
    unconfirmed: Option<Range<usize>>,
    outstanding: usize,
    answered: usize,
    stats: SendStats,
    first_err: Option<FirstError>,
    /// The receive error that ended normal operation (`ENOBUFS`: ACKs were
    /// dropped).
    lost: Option<io::Error>,
    /// No more datagrams will be read.
    closed: bool,
    /// Stopped on request: no further batch is sent.
    stopped: bool,
}

impl<'a> SendPipeline<'a> {
    /// A pipeline for `ops` on `ifindex` whose requests use sequence
    /// numbers `base_seq..base_seq + ops.len()`. `ack_capacity` bounds the
    /// requests in flight (what the receive buffer can hold).
    pub(crate) fn new(
        ops: &'a [TcOp],
        ifindex: i32,
        base_seq: u32,
        opts: &SendOptions,
        ack_capacity: usize,
        clock: PschedClock,
    ) -> SendPipeline<'a> {
        let max_in_flight = opts.max_in_flight.clamp(1, ack_capacity.max(1));
        SendPipeline {
            ops,
            ifindex,
            clock,
            base_seq,
            batch: opts.batch.clamp(1, max_in_flight),
            max_in_flight,
            max_bytes: MAX_SEND_BYTES,
            state: vec![OpState::NotSent; ops.len()],
            next: 0,
            unconfirmed: None,
            outstanding: 0,
            answered: 0,
            stats: SendStats::default(),
            first_err: None,
            lost: None,
            closed: false,
            stopped: false,
        }
    }

    /// Sends no further batch: the ACKs of the batches in flight are still
    /// read, so the outcome of every op sent is known; the rest are
    /// counted in [`SendStats::not_sent`].
    pub(crate) fn stop(&mut self) {
        self.stopped = true;
    }

    /// Whether [`Self::stop`] was called.
    pub(crate) fn is_stopped(&self) -> bool {
        self.stopped
    }

    /// Test hook: a smaller `sendmsg` size bound.
    #[cfg(test)]
    fn with_max_bytes(mut self, n: usize) -> Self {
        self.max_bytes = n;
        self
    }

    fn record_err(&mut self, index: usize, errno: i32, message: String) {
        if self.first_err.as_ref().is_none_or(|e| index < e.index) {
            self.first_err = Some(FirstError {
                index,
                errno,
                message,
            });
        }
    }

    /// Encodes the next batch into `buf` (cleared first) when one may be
    /// sent now: nothing failed, ops remain, and the batch fits in flight.
    /// Returns the number of requests in `buf` (0: send nothing). The
    /// caller must pass the `sendmsg` result to [`Self::handle_transmit`].
    pub(crate) fn poll_transmit(&mut self, buf: &mut Vec<u8>) -> usize {
        buf.clear();
        let room = self.outstanding == 0 || self.outstanding + self.batch <= self.max_in_flight;
        if self.unconfirmed.is_some()
            || self.stopped
            || self.first_err.is_some()
            || self.lost.is_some()
            || self.next >= self.ops.len()
            || !room
        {
            return 0;
        }
        let start = self.next;
        while self.next < self.ops.len()
            && self.next - start < self.batch
            && buf.len() < self.max_bytes
        {
            let i = self.next;
            let seq = self.base_seq.wrapping_add(i as u32);
            let before = buf.len();
            if let Err(e) = encode_op_with(&self.ops[i], self.ifindex, seq, &self.clock, buf) {
                buf.truncate(before);
                self.state[i] = OpState::Refused;
                self.record_err(i, libc::EINVAL, e.to_string());
                break;
            }
            self.next += 1;
        }
        if self.next == start {
            return 0;
        }
        self.unconfirmed = Some(start..self.next);
        self.next - start
    }

    /// The outcome of sending the batch of the last [`Self::poll_transmit`].
    /// A failed `sendmsg` sent none of it: its first op is the failure.
    pub(crate) fn handle_transmit(&mut self, result: io::Result<()>) {
        let Some(range) = self.unconfirmed.take() else {
            return;
        };
        match result {
            Ok(()) => {
                for s in &mut self.state[range.clone()] {
                    *s = OpState::InFlight;
                }
                self.outstanding += range.len();
                self.stats.sent += range.len();
                self.stats.sendmsgs += 1;
            }
            Err(e) => {
                let errno = e.raw_os_error().unwrap_or(libc::EIO);
                self.state[range.start] = OpState::Refused;
                self.record_err(range.start, errno, format!("sendmsg: {e}"));
                self.next = range.start + 1;
            }
        }
    }

    /// How to wait for the next datagram, or `None` when the call is over
    /// (every sent op answered, or draining ended).
    pub(crate) fn poll_recv(&self) -> Option<RecvMode> {
        if self.closed || self.outstanding == 0 || self.unconfirmed.is_some() {
            return None;
        }
        Some(if self.lost.is_some() {
            RecvMode::Drain
        } else {
            RecvMode::Block
        })
    }

    /// Takes one received datagram: each `NLMSG_ERROR` whose sequence number
    /// belongs to an op in flight settles that op. Replies of earlier calls
    /// and malformed messages are ignored.
    pub(crate) fn handle_datagram(&mut self, bytes: &[u8]) {
        for m in msgs(bytes) {
            let Ok(m) = m else { break };
            if m.ty != NLMSG_ERROR {
                continue;
            }
            let Ok(ack) = parse_ack(&m) else { continue };
            let idx = ack.seq.wrapping_sub(self.base_seq) as usize;
            if idx >= self.state.len() || self.state[idx] != OpState::InFlight {
                continue; // stale reply from an earlier call, or a duplicate
            }
            self.outstanding -= 1;
            self.answered += 1;
            if ack.errno == 0 {
                self.state[idx] = OpState::Acked;
                self.stats.acked += 1;
                if let Some(w) = ack.msg {
                    self.stats.warnings.push((idx, w.to_string()));
                }
            } else {
                self.state[idx] = OpState::Refused;
                let msg = ack
                    .msg
                    .map(str::to_string)
                    .unwrap_or_else(|| strerror(ack.errno));
                self.record_err(idx, ack.errno, msg);
            }
        }
    }

    /// A receive failed. The first error (`ENOBUFS`: the kernel dropped
    /// ACKs) stops sending and switches to draining; an error while
    /// draining (`EAGAIN`: nothing more queued) ends the call.
    pub(crate) fn handle_recv_error(&mut self, e: io::Error) {
        if self.lost.is_some() {
            self.closed = true;
        } else {
            self.lost = Some(e);
        }
    }

    /// Ops the kernel has answered so far (for progress).
    pub(crate) fn answered(&self) -> usize {
        self.answered
    }

    /// What is known about each op.
    #[cfg(test)]
    pub(crate) fn states(&self) -> &[OpState] {
        &self.state
    }

    /// The result: every op ACKed, or the lowest-index failure with what
    /// is known about the others. When ACKs were lost, the first op left
    /// unanswered is the failure unless the kernel refused an earlier one.
    // Same trade-off as `send_ops`: one failure per call.
    #[allow(clippy::result_large_err)]
    pub(crate) fn finish(mut self, dev: Option<String>) -> Result<SendStats, OpFailure> {
        if let Some(e) = self.lost.take() {
            if let Some(idx) = self.state.iter().position(|&s| s == OpState::InFlight) {
                if self.first_err.as_ref().is_none_or(|f| f.index > idx) {
                    let errno = e.raw_os_error().unwrap_or(libc::EIO);
                    let unanswered = self.count(.., OpState::InFlight);
                    self.first_err = Some(FirstError {
                        index: idx,
                        errno,
                        message: format!(
                            "receiving ACKs: {e}; {unanswered} request(s) unanswered, \
                             their outcome is unknown"
                        ),
                    });
                }
            }
        }
        let Some(f) = self.first_err.take() else {
            self.stats.not_sent = self.count(.., OpState::NotSent);
            return Ok(self.stats);
        };
        let index = f.index;
        let others = |s| {
            self.state
                .iter()
                .enumerate()
                .filter(|&(i, &x)| i != index && x == s)
                .count()
        };
        Err(OpFailure {
            index,
            op: self.ops[index].clone(),
            errno: f.errno,
            message: f.message,
            succeeded: self.count(..index, OpState::Acked),
            applied_after: self.count(index + 1.., OpState::Acked),
            refused_after: self.count(index + 1.., OpState::Refused),
            unanswered: others(OpState::InFlight),
            not_sent: others(OpState::NotSent),
            ifindex: self.ifindex,
            dev,
            warnings: self.stats.warnings,
        })
    }

    fn count(
        &self,
        range: impl std::slice::SliceIndex<[OpState], Output = [OpState]>,
        s: OpState,
    ) -> usize {
        self.state[range].iter().filter(|&&x| x == s).count()
    }
}

/// strerror text without Rust's " (os error N)" suffix.
pub(crate) fn strerror(errno: i32) -> String {
    let s = io::Error::from_raw_os_error(errno).to_string();
    match s.rfind(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netlink::consts::{NLMSGERR_ATTR_MSG, NLMSG_HDRLEN, NLM_F_ACK_TLVS, NLM_F_CAPPED};
    use lqos_model::Rate;
    use lqos_tc::ops::{Class, HtbClass};
    use lqos_tc::TcHandle;

    fn class(minor: u16) -> TcOp {
        TcOp::AddClass(Class {
            parent: TcHandle::new(1, 1),
            classid: TcHandle::new(1, minor),
            htb: HtbClass {
                rate: Rate::from_mbps(10),
                ceil: Rate::from_mbps(10),
                quantum: 1522,
                prio: 3,
                burst: None,
                cburst: None,
            },
        })
    }

    fn ops(n: usize) -> Vec<TcOp> {
        (0..n).map(|i| class(3 + i as u16)).collect()
    }

    /// One `NLMSG_ERROR` as the kernel sends it (capped echo, optional
    /// ext-ack text), for the request with sequence number `seq`.
    fn ack(seq: u32, errno: i32, text: Option<&str>) -> Vec<u8> {
        let mut p = Vec::new();
        p.extend_from_slice(&(-errno).to_ne_bytes());
        // Echoed request header: len, type, flags, seq, pid.
        p.extend_from_slice(&36u32.to_ne_bytes());
        p.extend_from_slice(&40u16.to_ne_bytes());
        p.extend_from_slice(&0u16.to_ne_bytes());
        p.extend_from_slice(&seq.to_ne_bytes());
        p.extend_from_slice(&0u32.to_ne_bytes());
        let mut flags = NLM_F_CAPPED;
        if let Some(t) = text {
            flags |= NLM_F_ACK_TLVS;
            let mut v = t.as_bytes().to_vec();
            v.push(0);
            p.extend_from_slice(&((4 + v.len()) as u16).to_ne_bytes());
            p.extend_from_slice(&NLMSGERR_ATTR_MSG.to_ne_bytes());
            p.extend_from_slice(&v);
            while p.len() % 4 != 0 {
                p.push(0);
            }
        }
        let mut m = Vec::new();
        m.extend_from_slice(&((NLMSG_HDRLEN + p.len()) as u32).to_ne_bytes());
        m.extend_from_slice(&NLMSG_ERROR.to_ne_bytes());
        m.extend_from_slice(&flags.to_ne_bytes());
        m.extend_from_slice(&seq.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.extend_from_slice(&p);
        m
    }

    /// Sequence numbers of the requests in one sent buffer.
    fn seqs(buf: &[u8]) -> Vec<u32> {
        msgs(buf).map(|m| m.unwrap().seq).collect()
    }

    fn opts(batch: usize, max_in_flight: usize) -> SendOptions {
        SendOptions {
            max_in_flight,
            batch,
        }
    }

    const BASE: u32 = 1000;

    fn pipeline(ops: &[TcOp], o: SendOptions) -> SendPipeline<'_> {
        SendPipeline::new(ops, 7, BASE, &o, 1 << 20, PschedClock::default())
    }

    #[test]
    fn batches_respect_batch_size_and_in_flight_bound() {
        let ops = ops(10);
        let mut p = pipeline(&ops, opts(4, 8));
        let mut buf = Vec::new();
        assert_eq!(p.poll_transmit(&mut buf), 4);
        assert_eq!(seqs(&buf), (BASE..BASE + 4).collect::<Vec<_>>());
        p.handle_transmit(Ok(()));
        assert_eq!(p.poll_transmit(&mut buf), 4);
        p.handle_transmit(Ok(()));
        // 8 in flight: no room for another batch of 4.
        assert_eq!(p.poll_transmit(&mut buf), 0);
        assert_eq!(p.poll_recv(), Some(RecvMode::Block));
        let acks: Vec<u8> = (0..3).flat_map(|i| ack(BASE + i, 0, None)).collect();
        p.handle_datagram(&acks);
        assert_eq!(p.answered(), 3);
        // 5 in flight + 4 > 8: still no room.
        assert_eq!(p.poll_transmit(&mut buf), 0);
        p.handle_datagram(&ack(BASE + 3, 0, None));
        assert_eq!(p.poll_transmit(&mut buf), 2);
        assert_eq!(seqs(&buf), vec![BASE + 8, BASE + 9]);
        p.handle_transmit(Ok(()));
        let acks: Vec<u8> = (4..10).flat_map(|i| ack(BASE + i, 0, None)).collect();
        p.handle_datagram(&acks);
        assert_eq!(p.poll_recv(), None);
        let stats = p.finish(None).unwrap();
        assert_eq!((stats.sent, stats.acked, stats.sendmsgs), (10, 10, 3));
    }

    #[test]
    fn a_batch_is_cut_at_the_sendmsg_size_bound() {
        let ops = ops(10);
        let mut p = pipeline(&ops, opts(10, 10)).with_max_bytes(1);
        let mut buf = Vec::new();
        // Each request alone exceeds one byte: one per sendmsg.
        assert_eq!(p.poll_transmit(&mut buf), 1);
    }

    #[test]
    fn acks_are_matched_by_sequence_number_in_any_order_and_stale_ones_ignored() {
        let ops = ops(3);
        let mut p = pipeline(&ops, opts(3, 3));
        let mut buf = Vec::new();
        p.poll_transmit(&mut buf);
        p.handle_transmit(Ok(()));
        let mut d = ack(BASE - 5, 1, Some("stale, from an earlier call"));
        d.extend(ack(BASE + 2, 0, Some("quantum of class 10005 is big")));
        d.extend(ack(BASE, 0, None));
        d.extend(ack(BASE, 0, None)); // duplicate
        p.handle_datagram(&d);
        assert_eq!(p.answered(), 2);
        p.handle_datagram(&ack(BASE + 1, 0, None));
        let stats = p.finish(None).unwrap();
        assert_eq!(stats.acked, 3);
        assert_eq!(
            stats.warnings,
            vec![(2, "quantum of class 10005 is big".to_string())]
        );
    }

    /// Regression (issue 10): a failed op in the middle of a batch. The
    /// kernel runs the rest of the batch; each later op is counted by its
    /// own ACK (applied, refused, or unknown), never assumed applied.
    #[test]
    fn mid_batch_failure_reports_each_later_op_by_its_own_ack() {
        let ops = ops(8);
        let mut p = pipeline(&ops, opts(6, 6));
        let mut buf = Vec::new();
        assert_eq!(p.poll_transmit(&mut buf), 6);
        p.handle_transmit(Ok(()));
        let mut d = ack(BASE, 0, None);
        d.extend(ack(BASE + 1, 0, None));
        d.extend(ack(BASE + 2, 22, Some("Invalid rate")));
        d.extend(ack(BASE + 3, 0, None)); // applied after the failure
        d.extend(ack(BASE + 4, 2, None)); // refused after the failure
        p.handle_datagram(&d);
        // Op 5's ACK has not come yet; no further batch after a failure.
        assert_eq!(p.poll_transmit(&mut buf), 0);
        assert_eq!(p.poll_recv(), Some(RecvMode::Block));
        p.handle_datagram(&ack(BASE + 5, 0, None));
        assert_eq!(p.poll_recv(), None);
        use OpState::*;
        assert_eq!(
            p.states(),
            &[Acked, Acked, Refused, Acked, Refused, Acked, NotSent, NotSent]
        );
        let f = p.finish(Some("ens19".into())).unwrap_err();
        assert_eq!(
            (f.index, f.errno, f.message.as_str()),
            (2, 22, "Invalid rate")
        );
        assert_eq!(f.op, ops[2]);
        assert_eq!((f.succeeded, f.applied_after, f.refused_after), (2, 2, 1));
        assert_eq!((f.unanswered, f.not_sent), (0, 2));
        assert_eq!(f.applied(), 4);
        let text = f.to_string();
        assert!(text.contains("op #2"), "{text}");
        assert!(text.contains("2 earlier op(s) applied"), "{text}");
        assert!(
            text.contains("2 later op(s) of the same batch applied"),
            "{text}"
        );
        assert!(text.contains("1 refused"), "{text}");
    }

    #[test]
    fn errors_without_ext_ack_text_get_strerror() {
        let ops = ops(1);
        let mut p = pipeline(&ops, opts(1, 1));
        let mut buf = Vec::new();
        p.poll_transmit(&mut buf);
        p.handle_transmit(Ok(()));
        p.handle_datagram(&ack(BASE, libc::ENOENT, None));
        let f = p.finish(None).unwrap_err();
        assert_eq!(f.message, "No such file or directory");
    }

    #[test]
    fn lost_acks_stop_sending_drain_and_report_the_unknown_ops() {
        let ops = ops(6);
        let mut p = pipeline(&ops, opts(2, 4));
        let mut buf = Vec::new();
        for _ in 0..2 {
            assert_eq!(p.poll_transmit(&mut buf), 2);
            p.handle_transmit(Ok(()));
        }
        p.handle_datagram(&ack(BASE, 0, None));
        p.handle_recv_error(io::Error::from_raw_os_error(libc::ENOBUFS));
        // No new batch; read what is still queued without blocking.
        assert_eq!(p.poll_transmit(&mut buf), 0);
        assert_eq!(p.poll_recv(), Some(RecvMode::Drain));
        p.handle_datagram(&ack(BASE + 2, 0, None));
        p.handle_recv_error(io::Error::from_raw_os_error(libc::EAGAIN));
        assert_eq!(p.poll_recv(), None);
        let f = p.finish(None).unwrap_err();
        assert_eq!((f.index, f.errno), (1, libc::ENOBUFS));
        assert!(
            f.message.contains("2 request(s) unanswered"),
            "{}",
            f.message
        );
        assert_eq!((f.succeeded, f.applied_after, f.unanswered), (1, 1, 1));
        assert_eq!(f.not_sent, 2);
    }

    #[test]
    fn a_refusal_before_the_lost_acks_is_the_failure() {
        let ops = ops(3);
        let mut p = pipeline(&ops, opts(3, 3));
        let mut buf = Vec::new();
        p.poll_transmit(&mut buf);
        p.handle_transmit(Ok(()));
        p.handle_datagram(&ack(BASE, 17, Some("Exclusivity flag on, cannot modify.")));
        p.handle_recv_error(io::Error::from_raw_os_error(libc::ENOBUFS));
        p.handle_recv_error(io::Error::from_raw_os_error(libc::EAGAIN));
        let f = p.finish(None).unwrap_err();
        assert_eq!((f.index, f.errno), (0, 17));
        assert_eq!(f.unanswered, 2);
    }

    #[test]
    fn an_op_that_cannot_be_encoded_fails_after_the_ops_before_it_are_sent() {
        let mut ops = ops(4);
        let TcOp::AddClass(c) = &mut ops[2] else {
            unreachable!()
        };
        c.htb.rate = Rate::from_bps(0);
        let mut p = pipeline(&ops, opts(4, 4));
        let mut buf = Vec::new();
        assert_eq!(p.poll_transmit(&mut buf), 2);
        assert_eq!(seqs(&buf), vec![BASE, BASE + 1]);
        p.handle_transmit(Ok(()));
        assert_eq!(p.poll_transmit(&mut buf), 0);
        p.handle_datagram(&[ack(BASE, 0, None), ack(BASE + 1, 0, None)].concat());
        assert_eq!(p.poll_recv(), None);
        let f = p.finish(None).unwrap_err();
        assert_eq!((f.index, f.errno, f.succeeded), (2, libc::EINVAL, 2));
        assert_eq!(f.not_sent, 1);
    }

    #[test]
    fn a_failed_sendmsg_sends_nothing_of_its_batch() {
        let ops = ops(4);
        let mut p = pipeline(&ops, opts(2, 4));
        let mut buf = Vec::new();
        p.poll_transmit(&mut buf);
        p.handle_transmit(Ok(()));
        p.poll_transmit(&mut buf);
        p.handle_transmit(Err(io::Error::from_raw_os_error(libc::EMSGSIZE)));
        p.handle_datagram(&[ack(BASE, 0, None), ack(BASE + 1, 0, None)].concat());
        assert_eq!(p.poll_recv(), None);
        let f = p.finish(None).unwrap_err();
        assert_eq!((f.index, f.errno, f.succeeded), (2, libc::EMSGSIZE, 2));
        assert_eq!(f.not_sent, 1);
    }

    #[test]
    fn a_stopped_pipeline_sends_no_further_batch_and_reads_the_acks_in_flight() {
        let ops = ops(10);
        let mut p = pipeline(&ops, opts(4, 8));
        let mut buf = Vec::new();
        assert_eq!(p.poll_transmit(&mut buf), 4);
        p.handle_transmit(Ok(()));
        assert_eq!(p.poll_transmit(&mut buf), 4);
        p.handle_transmit(Ok(()));
        p.stop();
        assert!(p.is_stopped());
        assert_eq!(p.poll_transmit(&mut buf), 0);
        // The eight in flight are still waited for.
        for seq in BASE..BASE + 8 {
            assert_eq!(p.poll_recv(), Some(RecvMode::Block));
            p.handle_datagram(&ack(seq, 0, None));
        }
        assert_eq!(p.poll_transmit(&mut buf), 0);
        assert_eq!(p.poll_recv(), None);
        let stats = p.finish(None).unwrap();
        assert_eq!((stats.sent, stats.acked, stats.not_sent), (8, 8, 2));
    }

    #[test]
    fn an_empty_stream_is_done_at_once() {
        let mut p = pipeline(&[], opts(4, 4));
        assert_eq!(p.poll_transmit(&mut Vec::new()), 0);
        assert_eq!(p.poll_recv(), None);
        assert_eq!(p.finish(None).unwrap(), SendStats::default());
    }

    proptest::proptest! {
        /// Whatever the kernel answers (each op ok or refused, ACKs in any
        /// order within a datagram), the pipeline never has more than the
        /// bound in flight, sends nothing after a refusal is known, and the
        /// failure's counts add up to exactly what was answered.
        #[test]
        fn accounting_adds_up(
            n in 0usize..60,
            batch in 1usize..10,
            in_flight in 1usize..20,
            refused in proptest::collection::vec(proptest::bool::weighted(0.1), 60),
            reverse in proptest::bool::ANY,
        ) {
            let ops = ops(n);
            let mut p = pipeline(&ops, opts(batch, in_flight));
            let bound = in_flight;
            let mut buf = Vec::new();
            let mut sent_after_refusal = false;
            let mut seen_refusal = false;
            loop {
                let k = p.poll_transmit(&mut buf);
                if k > 0 {
                    sent_after_refusal |= seen_refusal;
                    p.handle_transmit(Ok(()));
                    proptest::prop_assert!(p.outstanding <= bound);
                    continue;
                }
                if p.poll_recv().is_none() { break; }
                let mut pending: Vec<usize> = (0..n).filter(|&i| p.state[i] == OpState::InFlight).collect();
                if reverse { pending.reverse(); }
                let d: Vec<u8> = pending.iter().flat_map(|&i| {
                    seen_refusal |= refused[i];
                    ack(BASE + i as u32, if refused[i] { 22 } else { 0 }, None)
                }).collect();
                p.handle_datagram(&d);
            }
            proptest::prop_assert!(!sent_after_refusal);
            let first = (0..n).find(|&i| refused[i]);
            match p.finish(None) {
                Ok(stats) => {
                    proptest::prop_assert_eq!(first, None);
                    proptest::prop_assert_eq!(stats.acked, n);
                }
                Err(f) => {
                    proptest::prop_assert_eq!(Some(f.index), first);
                    proptest::prop_assert_eq!(f.succeeded, f.index);
                    proptest::prop_assert_eq!(
                        f.succeeded + 1 + f.applied_after + f.refused_after + f.unanswered + f.not_sent,
                        n
                    );
                }
            }
        }
    }
}
