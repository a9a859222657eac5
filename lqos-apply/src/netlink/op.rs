//! One [`TcOp`] to one rtnetlink request and back: the verb's message type
//! and flags, the `tcmsg`, `TCA_KIND`, and the kind's options from its own
//! module (`htb`, `cake`, `fq_codel`, `fifo`, `mq`, `clsact`, `flower`).
//! Pure: no I/O.

use lqos_tc::classify::CLSACT_HANDLE;
use lqos_tc::ops::{Qdisc, QdiscKind};
use lqos_tc::{TcHandle, TcOp};

use super::attr::{attr_str, kind_and_options};
use super::consts::*;
use super::error::{DecodeError, EncodeError};
use super::msg::{first_msg, tcmsg, tcmsg_hdr, Msg};
use super::psched::PschedClock;
use super::{cake, clsact, fifo, flower, fq_codel, htb};

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
        TcOp::DeleteQdisc { parent, .. } if *parent == lqos_tc::classify::CLSACT_PARENT => {
            clsact::delete_msg(buf, ifindex, *parent, DELETE, seq)
        }
        TcOp::DeleteQdisc { parent, handle } => {
            let m = Msg::begin(buf, RTM_DELQDISC, DELETE, seq);
            tcmsg(m.buf, ifindex, *handle, *parent);
            m.finish()
        }
        TcOp::AddClass(c) => htb::class_msg(buf, c, ADD, ifindex, seq, clock),
        TcOp::ChangeClass(c) => htb::class_msg(buf, c, CHANGE, ifindex, seq, clock),
        TcOp::DeleteClass { parent, classid } => {
            let m = Msg::begin(buf, RTM_DELTCLASS, DELETE, seq);
            tcmsg(m.buf, ifindex, *classid, *parent);
            m.finish()
        }
        TcOp::ReplaceFilter(f) => flower::replace_msg(buf, f, ifindex, seq),
        TcOp::DeleteFilter(k) => flower::delete_msg(buf, k, ifindex, seq),
    }
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
        QdiscKind::Htb(h) => htb::encode_qdisc(m.buf, h)?,
        QdiscKind::Pfifo { limit } | QdiscKind::Bfifo { limit } => fifo::encode(m.buf, *limit),
        QdiscKind::Cake(c) => cake::encode(m.buf, c)?,
        QdiscKind::FqCodel(f) => fq_codel::encode(m.buf, f)?,
    }
    m.finish()
}

/// Decodes one `RTM_NEWQDISC` dump reply (what the kernel reports) into its
/// interface and [`Qdisc`]: [`decode_qdisc`], with fq_codel's codel times
/// taken back from the kernel's 1024 ns units to the microseconds lqos
/// sends.
pub(crate) fn decode_qdisc_dump(payload: &[u8]) -> Result<(i32, Qdisc), DecodeError> {
    let (ifi, mut q) = decode_qdisc(payload)?;
    if let QdiscKind::FqCodel(f) = &mut q.kind {
        fq_codel::from_dump(f);
    }
    Ok((ifi, q))
}

/// Decodes one `RTM_NEWQDISC` payload as sent (a request, the inverse of
/// the encoder: every value exactly as in the message) into its interface
/// and [`Qdisc`]. Dump replies go through [`decode_qdisc_dump`].
pub(crate) fn decode_qdisc(payload: &[u8]) -> Result<(i32, Qdisc), DecodeError> {
    let (h, rest) = tcmsg_hdr(payload)?;
    let (kind, opts) = kind_and_options(rest);
    let kind = match kind {
        "mq" => QdiscKind::Mq,
        "clsact" => QdiscKind::Clsact,
        "htb" => QdiscKind::Htb(htb::decode_qdisc(opts, TcHandle::from_raw(h.handle))?),
        "pfifo" => QdiscKind::Pfifo {
            limit: fifo::decode(opts),
        },
        "bfifo" => QdiscKind::Bfifo {
            limit: fifo::decode(opts),
        },
        "cake" => QdiscKind::Cake(cake::decode(opts, TcHandle::from_raw(h.handle))?),
        "fq_codel" => QdiscKind::FqCodel(fq_codel::decode(opts)),
        other => QdiscKind::Other(other.to_string()),
    };
    Ok((
        h.ifindex,
        Qdisc {
            parent: TcHandle::from_raw(h.parent),
            handle: TcHandle::from_raw(h.handle),
            kind,
        },
    ))
}

/// Decodes one tc request (as `tc` or [`encode_op`] sends it) back into its
/// interface index and [`TcOp`]: the inverse of [`encode_op_with`], used
/// to check the golden captures both ways. The verb comes from the message
/// type and flags (`NLM_F_REPLACE`: replace; `NLM_F_CREATE` on a class:
/// add, else change; a filter request is always lqos's one replace or
/// delete of an egress flower filter). HTB class bursts come back converted
/// from ticks, as in a dump (see [`super`]).
pub fn decode_request(msg: &[u8], clock: &PschedClock) -> Result<(i32, TcOp), DecodeError> {
    let m = first_msg(msg)?;
    let hdr = |p: &[u8]| -> Result<(i32, TcHandle, TcHandle), DecodeError> {
        let (h, _) = tcmsg_hdr(p)?;
        Ok((
            h.ifindex,
            TcHandle::from_raw(h.handle),
            TcHandle::from_raw(h.parent),
        ))
    };
    match m.ty {
        RTM_NEWQDISC => {
            let (ifindex, q) = decode_qdisc(m.payload)?;
            let op = if m.flags & NLM_F_REPLACE != 0 {
                TcOp::ReplaceQdisc(q)
            } else {
                TcOp::AddQdisc(q)
            };
            Ok((ifindex, op))
        }
        RTM_DELQDISC => {
            let (ifindex, handle, parent) = hdr(m.payload)?;
            // The qdisc on the clsact/ingress hook is always ffff:, and a
            // delete naming another handle there is refused by the kernel
            // ("Invalid handle"); handle 0 means the one there.
            let handle = match parent == lqos_tc::classify::CLSACT_PARENT {
                false => handle,
                true if handle == TcHandle::UNSPEC || handle == CLSACT_HANDLE => CLSACT_HANDLE,
                true => return Err(DecodeError::ClsactHandle { handle }),
            };
            Ok((ifindex, TcOp::delete_qdisc(parent, handle)))
        }
        RTM_NEWTCLASS => {
            let (ifindex, c) =
                htb::decode_class(m.payload, clock)?.ok_or(DecodeError::NotHtbClass)?;
            let op = if m.flags & NLM_F_CREATE != 0 {
                TcOp::AddClass(c)
            } else {
                TcOp::ChangeClass(c)
            };
            Ok((ifindex, op))
        }
        RTM_DELTCLASS => {
            let (ifindex, classid, parent) = hdr(m.payload)?;
            Ok((ifindex, TcOp::DeleteClass { parent, classid }))
        }
        flower::RTM_NEWTFILTER => {
            let (ifindex, f) =
                flower::decode_filter(m.payload)?.ok_or(DecodeError::NotLqosFilter)?;
            Ok((ifindex, TcOp::ReplaceFilter(f)))
        }
        flower::RTM_DELTFILTER => {
            let (ifindex, k) = flower::decode_filter_delete(m.payload)?;
            Ok((ifindex, TcOp::DeleteFilter(k)))
        }
        ty => Err(DecodeError::NotTcRequest { ty }),
    }
}

#[cfg(test)]
mod tests {
    /// Found by the `netlink_request` fuzz target: a qdisc delete on the
    /// clsact hook (parent ffff:fff1) naming handle ffff:4 decoded as is
    /// and encoded back as lqos's clsact delete (handle ffff:). The kernel
    /// refuses such a request ("Invalid handle"): it is a decode error; the
    /// handles the kernel accepts there (0 and ffff:) decode as ffff:.
    #[test]
    fn a_clsact_delete_naming_another_handle_is_a_decode_error() {
        use super::*;
        use lqos_tc::classify::CLSACT_PARENT;
        let clock = PschedClock::default();
        let request = |handle: TcHandle| {
            let mut buf = Vec::new();
            let m = Msg::begin(&mut buf, RTM_DELQDISC, NLM_F_REQUEST | NLM_F_ACK, 1);
            tcmsg(m.buf, 3, handle, CLSACT_PARENT);
            attr_str(m.buf, TCA_KIND, "clsact");
            m.finish().unwrap();
            buf
        };
        assert_eq!(
            decode_request(&request(TcHandle::new(0xffff, 4)), &clock),
            Err(DecodeError::ClsactHandle {
                handle: TcHandle::new(0xffff, 4)
            })
        );
        for h in [TcHandle::UNSPEC, CLSACT_HANDLE] {
            assert_eq!(
                decode_request(&request(h), &clock),
                Ok((
                    3,
                    TcOp::DeleteQdisc {
                        parent: CLSACT_PARENT,
                        handle: CLSACT_HANDLE
                    }
                ))
            );
        }
    }

    /// Encoded qdisc requests decode back to the same qdisc (the kernel's
    /// dumps use the same attributes), for every kind, cake and fq_codel
    /// included (this kernel cannot run them).
    mod round_trip {
        use super::super::*;
        use lqos_model::Rate;
        use lqos_tc::ops::{CakeParams, FqCodelParams, HtbQdisc};
        use lqos_tc::options::{CakeAckFilter, CakeDiffserv, CakeFlowMode};
        use proptest::prelude::*;

        fn opt<T: std::fmt::Debug + Clone>(
            s: impl Strategy<Value = T>,
        ) -> impl Strategy<Value = Option<T>> {
            proptest::option::of(s)
        }

        fn kind() -> impl Strategy<Value = QdiscKind> {
            let cake = (
                (
                    opt(8u64..400_000_000_000),
                    // Any number: named and `Unknown` values both round-trip.
                    opt(prop_oneof![0u32..8, any::<u32>()]),
                    opt(1u32..10_000_000),
                    opt(prop_oneof![0u32..8, any::<u32>()]),
                ),
                (
                    opt(any::<bool>()),
                    opt(any::<bool>()),
                    opt(prop_oneof![0u32..3, any::<u32>()]),
                    opt(any::<bool>()),
                    opt(1u32..u32::MAX),
                ),
            )
                .prop_map(|((bw, d, rtt, f), (nat, wash, ack, gso, mem))| {
                    QdiscKind::Cake(CakeParams {
                        bandwidth: bw.map(|b| Rate::from_bps(b / 8 * 8)),
                        diffserv: d.map(CakeDiffserv::from_kernel),
                        rtt_us: rtt,
                        flow_mode: f.map(CakeFlowMode::from_kernel),
                        nat,
                        wash,
                        ack_filter: ack.map(CakeAckFilter::from_kernel),
                        split_gso: gso,
                        memlimit: mem,
                    })
                });
            let fq = (
                opt(any::<u32>()),
                opt(any::<u32>()),
                opt(any::<u32>()),
                opt(any::<u32>()),
                opt(any::<u32>()),
                opt(any::<bool>()),
                opt(any::<u32>()),
            )
                .prop_map(
                    |(limit, flows, target_us, interval_us, quantum, ecn, memory_limit)| {
                        QdiscKind::FqCodel(FqCodelParams {
                            limit,
                            flows,
                            target_us,
                            interval_us,
                            quantum,
                            ecn,
                            memory_limit,
                        })
                    },
                );
            prop_oneof![
                Just(QdiscKind::Mq),
                Just(QdiscKind::Clsact),
                (any::<u32>(), any::<u32>(), any::<u32>()).prop_map(|(d, r, q)| QdiscKind::Htb(
                    HtbQdisc {
                        default_minor: d,
                        r2q: Some(r),
                        direct_qlen: Some(q)
                    }
                )),
                opt(any::<u32>()).prop_map(|limit| QdiscKind::Pfifo { limit }),
                opt(any::<u32>()).prop_map(|limit| QdiscKind::Bfifo { limit }),
                cake,
                fq,
                "[a-z_]{1,15}"
                    .prop_filter("known kinds decode as themselves", |s| ![
                        "mq", "htb", "pfifo", "bfifo", "cake", "fq_codel"
                    ]
                    .contains(&s.as_str()))
                    .prop_map(QdiscKind::Other),
            ]
        }

        proptest! {
            #[test]
            fn qdisc_encode_decode(kind in kind(), parent in any::<u32>(), major in 1u16.., ifindex in 1i32..) {
                let q = Qdisc { parent: TcHandle::from_raw(parent), handle: TcHandle::new(major, 0), kind };
                let mut buf = Vec::new();
                encode_op(&TcOp::AddQdisc(q.clone()), ifindex, 1, &mut buf).unwrap();
                let (ifi, back) = decode_qdisc(&buf[16..]).unwrap();
                prop_assert_eq!(ifi, ifindex);
                // A request decodes exactly (fq_codel's codel-units
                // conversion is for dump replies only: decode_qdisc_dump).
                prop_assert_eq!(back, q);
            }
        }
    }
}

/// Golden bytes of the deletes that name no kind: `tc` 6.1's requests
/// (captured with strace, see `super::golden`).
#[cfg(test)]
mod golden {
    use super::super::golden::*;
    use lqos_tc::TcOp;

    /// tc qdisc del dev ens19 root
    #[test]
    fn qdisc_del_root() {
        check_exact("qdisc_del_root", TcOp::delete_root());
    }

    /// tc qdisc del dev ens19 parent 1:3 handle 3:
    #[test]
    fn qdisc_del_parent_handle() {
        check_exact(
            "qdisc_del_parent_handle",
            TcOp::DeleteQdisc {
                parent: h("1:3"),
                handle: h("3:"),
            },
        );
    }
}
