//! Messages: the `struct nlmsghdr` framing (written and iterated),
//! `struct tcmsg`, `NLMSG_ERROR` ACKs with extended-ACK attributes, and the
//! requests that carry no tc object (link lookup, dumps).

use lqos_tc::TcHandle;

use super::attr::{align4, attr_str, attrs, u16_at, u32_at};
use super::consts::*;
use super::error::{DecodeError, EncodeError};

/// An nlmsghdr being written at `start` of `buf`.
pub(crate) struct Msg<'a> {
    pub(crate) buf: &'a mut Vec<u8>,
    start: usize,
}

impl<'a> Msg<'a> {
    /// Appends a header with a placeholder length (patched by `finish`);
    /// port id 0.
    pub(crate) fn begin(buf: &'a mut Vec<u8>, ty: u16, flags: u16, seq: u32) -> Msg<'a> {
        let start = buf.len();
        buf.extend_from_slice(&0u32.to_ne_bytes()); // nlmsg_len, patched
        buf.extend_from_slice(&ty.to_ne_bytes());
        buf.extend_from_slice(&flags.to_ne_bytes());
        buf.extend_from_slice(&seq.to_ne_bytes());
        buf.extend_from_slice(&0u32.to_ne_bytes()); // nlmsg_pid: kernel fills in
        Msg { buf, start }
    }

    /// Patches `nlmsg_len`.
    pub(crate) fn finish(self) -> Result<(), EncodeError> {
        let len = self.buf.len() - self.start;
        let len32 = u32::try_from(len).map_err(|_| EncodeError::TooLarge { len })?;
        self.buf[self.start..self.start + 4].copy_from_slice(&len32.to_ne_bytes());
        Ok(())
    }
}

/// Appends a `struct tcmsg` (`tcm_info` 0).
pub(crate) fn tcmsg(buf: &mut Vec<u8>, ifindex: i32, handle: TcHandle, parent: TcHandle) {
    tcmsg_info(buf, ifindex, handle.raw(), parent, 0);
}

/// Appends a `struct tcmsg` with `tcm_info` (a filter's preference and
/// protocol).
pub(crate) fn tcmsg_info(
    buf: &mut Vec<u8>,
    ifindex: i32,
    handle: u32,
    parent: TcHandle,
    info: u32,
) {
    buf.extend_from_slice(&[0, 0, 0, 0]); // tcm_family AF_UNSPEC + 3 pad
    buf.extend_from_slice(&ifindex.to_ne_bytes());
    buf.extend_from_slice(&handle.to_ne_bytes());
    buf.extend_from_slice(&parent.raw().to_ne_bytes());
    buf.extend_from_slice(&info.to_ne_bytes());
}

/// The fixed part of a tc message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TcMsgHdr {
    pub ifindex: i32,
    pub handle: u32,
    pub parent: u32,
    pub info: u32,
}

/// Splits a tc message's payload into its `tcmsg` and its attributes.
pub(crate) fn tcmsg_hdr(p: &[u8]) -> Result<(TcMsgHdr, &[u8]), DecodeError> {
    if p.len() < TCMSG_LEN {
        return Err(DecodeError::Short {
            what: "tcmsg",
            len: p.len(),
        });
    }
    let h = TcMsgHdr {
        ifindex: u32_at(p, 4) as i32,
        handle: u32_at(p, 8),
        parent: u32_at(p, 12),
        info: u32_at(p, 16),
    };
    Ok((h, &p[TCMSG_LEN..]))
}

/// One netlink message inside a received buffer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RawMsg<'a> {
    pub ty: u16,
    pub flags: u16,
    pub seq: u32,
    /// Everything after the 16-byte header (up to `nlmsg_len`).
    pub payload: &'a [u8],
}

/// Iterates over the netlink messages in one datagram.
pub(crate) struct Msgs<'a> {
    buf: &'a [u8],
}

/// The messages in `buf`.
pub(crate) fn msgs(buf: &[u8]) -> Msgs<'_> {
    Msgs { buf }
}

impl<'a> Iterator for Msgs<'a> {
    type Item = Result<RawMsg<'a>, DecodeError>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.buf.is_empty() {
            return None;
        }
        if self.buf.len() < NLMSG_HDRLEN {
            let left = self.buf.len();
            self.buf = &[];
            return Some(Err(DecodeError::TruncatedHeader { left }));
        }
        let len = u32_at(self.buf, 0) as usize;
        if len < NLMSG_HDRLEN || len > self.buf.len() {
            self.buf = &[];
            return Some(Err(DecodeError::BadLength { len }));
        }
        let m = RawMsg {
            ty: u16_at(self.buf, 4),
            flags: u16_at(self.buf, 6),
            seq: u32_at(self.buf, 8),
            payload: &self.buf[NLMSG_HDRLEN..len],
        };
        let next = align4(len).min(self.buf.len());
        self.buf = &self.buf[next..];
        Some(Ok(m))
    }
}

/// The first message of `buf`.
pub(crate) fn first_msg(buf: &[u8]) -> Result<RawMsg<'_>, DecodeError> {
    msgs(buf).next().ok_or(DecodeError::Empty)?
}

/// A decoded `NLMSG_ERROR`: an ACK (`errno == 0`) or an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ack<'a> {
    /// Positive errno, 0 for success.
    pub errno: i32,
    /// Sequence number of the request, from the echoed header.
    pub seq: u32,
    /// `NLMSGERR_ATTR_MSG` text (an error's reason, or a warning on success).
    pub msg: Option<&'a str>,
}

/// Parses an `NLMSG_ERROR` payload: `int error`, the echoed request (only its
/// header if `NLM_F_CAPPED`, else all of it), then, with `NLM_F_ACK_TLVS`,
/// the extended-ACK attributes. (neli 0.7.5 gets the last part wrong.)
pub(crate) fn parse_ack<'a>(m: &RawMsg<'a>) -> Result<Ack<'a>, DecodeError> {
    let p = m.payload;
    if p.len() < 4 + NLMSG_HDRLEN {
        return Err(DecodeError::Short {
            what: "NLMSG_ERROR payload",
            len: p.len(),
        });
    }
    let error = i32::from_ne_bytes([p[0], p[1], p[2], p[3]]);
    let echoed_len = u32_at(p, 4) as usize;
    let seq = u32_at(p, 4 + 8);
    let mut msg = None;
    if m.flags & NLM_F_ACK_TLVS != 0 {
        let echoed = if m.flags & NLM_F_CAPPED != 0 {
            NLMSG_HDRLEN
        } else {
            align4(echoed_len.max(NLMSG_HDRLEN))
        };
        if let Some(tlvs) = p.get(4 + echoed..) {
            for (ty, val) in attrs(tlvs) {
                if ty == NLMSGERR_ATTR_MSG {
                    let end = val.iter().position(|&b| b == 0).unwrap_or(val.len());
                    msg = std::str::from_utf8(&val[..end])
                        .ok()
                        .filter(|s| !s.is_empty());
                }
            }
        }
    }
    Ok(Ack {
        errno: error.checked_neg().unwrap_or(i32::MAX).max(0),
        seq,
        msg,
    })
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

/// `RTM_GETLINK` for one interface by name.
pub(crate) fn getlink_request(buf: &mut Vec<u8>, name: &str, seq: u32) {
    let m = Msg::begin(buf, RTM_GETLINK, NLM_F_REQUEST, seq);
    m.buf.extend_from_slice(&[0u8; IFINFOMSG_LEN]);
    attr_str(m.buf, IFLA_IFNAME, name);
    m.finish().expect("getlink request is small");
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A whole message with `payload` (tests' builder).
    pub(crate) fn nlmsg(ty: u16, flags: u16, seq: u32, payload: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&((16 + payload.len()) as u32).to_ne_bytes());
        v.extend_from_slice(&ty.to_ne_bytes());
        v.extend_from_slice(&flags.to_ne_bytes());
        v.extend_from_slice(&seq.to_ne_bytes());
        v.extend_from_slice(&0u32.to_ne_bytes());
        v.extend_from_slice(payload);
        v
    }

    #[test]
    fn ack_with_ext_ack_message_after_full_echo() {
        // error -2, full echoed request of 36 bytes, then NLMSGERR_ATTR_MSG.
        let req = nlmsg(RTM_NEWTCLASS, 5, 77, &[0u8; 20]);
        let mut p = Vec::new();
        p.extend_from_slice(&(-2i32).to_ne_bytes());
        p.extend_from_slice(&req);
        let text = b"Specified class not found\0";
        p.extend_from_slice(&((4 + text.len()) as u16).to_ne_bytes());
        p.extend_from_slice(&NLMSGERR_ATTR_MSG.to_ne_bytes());
        p.extend_from_slice(text);
        while p.len() % 4 != 0 {
            p.push(0);
        }
        let m = nlmsg(NLMSG_ERROR, NLM_F_ACK_TLVS, 77, &p);
        let raw = msgs(&m).next().unwrap().unwrap();
        let ack = parse_ack(&raw).unwrap();
        assert_eq!(ack.errno, 2);
        assert_eq!(ack.seq, 77);
        assert_eq!(ack.msg, Some("Specified class not found"));
    }

    #[test]
    fn capped_success_ack_with_warning() {
        let req_hdr = &nlmsg(RTM_NEWTCLASS, 5, 9, &[0u8; 20])[..16];
        let mut p = Vec::new();
        p.extend_from_slice(&0i32.to_ne_bytes());
        p.extend_from_slice(req_hdr);
        let text = b"quantum of class 10003 is big. Consider r2q change.\0";
        p.extend_from_slice(&((4 + text.len()) as u16).to_ne_bytes());
        p.extend_from_slice(&NLMSGERR_ATTR_MSG.to_ne_bytes());
        p.extend_from_slice(text);
        let m = nlmsg(NLMSG_ERROR, NLM_F_ACK_TLVS | NLM_F_CAPPED, 9, &p);
        let ack = parse_ack(&msgs(&m).next().unwrap().unwrap()).unwrap();
        assert_eq!(ack.errno, 0);
        assert_eq!(ack.seq, 9);
        assert!(ack.msg.unwrap().starts_with("quantum of class"));
    }

    #[test]
    fn truncated_streams_are_errors_not_panics() {
        assert_eq!(
            msgs(&[1, 2, 3]).next().unwrap().unwrap_err(),
            DecodeError::TruncatedHeader { left: 3 }
        );
        let mut m = nlmsg(NLMSG_DONE, 0, 1, &[0; 4]);
        m[0] = 200;
        assert_eq!(
            msgs(&m).next().unwrap().unwrap_err(),
            DecodeError::BadLength { len: 200 }
        );
        let short = nlmsg(NLMSG_ERROR, 0, 1, &[0; 4]);
        assert!(parse_ack(&msgs(&short).next().unwrap().unwrap()).is_err());
        assert_eq!(first_msg(&[]).unwrap_err(), DecodeError::Empty);
    }
}
