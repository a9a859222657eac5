//! Class counters from a `RTM_GETTCLASS` dump: `TCA_STATS2` ->
//! `TCA_STATS_BASIC` (`struct gnet_stats_basic { __u64 bytes; __u32
//! packets; }`, 16 bytes on the wire with its tail padding), what
//! `tc -s class show` prints as "Sent N bytes M pkt". Used by lazy leaves
//! to find the circuits that carry traffic.

use lqos_tc::TcHandle;
use serde::{Deserialize, Serialize};

use super::attr::attrs;
use super::error::DecodeError;
use super::msg::tcmsg_hdr;

/// `TCA_STATS2` (nested `TCA_STATS_*`; uapi `linux/rtnetlink.h`).
pub const TCA_STATS2: u16 = 7;
/// `TCA_STATS_BASIC` inside `TCA_STATS2` (uapi `linux/gen_stats.h`).
pub const TCA_STATS_BASIC: u16 = 1;
/// Bytes of `struct gnet_stats_basic` that carry data (u64 + u32).
const GNET_STATS_BASIC_LEN: usize = 12;

/// One class's basic counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassStats {
    /// The class.
    pub classid: TcHandle,
    /// Bytes sent through it since it was created.
    pub bytes: u64,
    /// Packets sent through it since it was created.
    pub packets: u32,
}

/// Decodes one `RTM_NEWTCLASS` payload into its interface index and
/// counters; `Ok(None)` when the class reports no `TCA_STATS2` basic block.
pub(crate) fn decode_class_stats(payload: &[u8]) -> Result<Option<(i32, ClassStats)>, DecodeError> {
    let (h, rest) = tcmsg_hdr(payload)?;
    for (ty, v) in attrs(rest) {
        if ty != TCA_STATS2 {
            continue;
        }
        for (sty, sv) in attrs(v) {
            if sty != TCA_STATS_BASIC {
                continue;
            }
            if sv.len() < GNET_STATS_BASIC_LEN {
                return Err(DecodeError::ShortStats {
                    handle: TcHandle::from_raw(h.handle),
                    what: "TCA_STATS_BASIC",
                    len: sv.len(),
                });
            }
            let bytes = u64::from_ne_bytes(sv[..8].try_into().expect("8 bytes"));
            let packets = u32::from_ne_bytes(sv[8..12].try_into().expect("4 bytes"));
            return Ok(Some((
                h.ifindex,
                ClassStats {
                    classid: TcHandle::from_raw(h.handle),
                    bytes,
                    packets,
                },
            )));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(ty: u16, payload: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&((4 + payload.len()) as u16).to_ne_bytes());
        v.extend_from_slice(&ty.to_ne_bytes());
        v.extend_from_slice(payload);
        while v.len() % 4 != 0 {
            v.push(0);
        }
        v
    }

    /// A class message as the kernel sends it for `tc -s class show`:
    /// tcmsg, TCA_KIND "htb", TCA_STATS2 { TCA_STATS_BASIC (16 bytes),
    /// TCA_STATS_QUEUE }, then the old TCA_STATS.
    fn class_msg(ifindex: i32, classid: u32, bytes: u64, packets: u32) -> Vec<u8> {
        let mut p = vec![0u8; 20];
        p[4..8].copy_from_slice(&ifindex.to_ne_bytes());
        p[8..12].copy_from_slice(&classid.to_ne_bytes());
        p[12..16].copy_from_slice(&0x0001_0001u32.to_ne_bytes());
        p.extend(attr(1, b"htb\0"));
        let mut basic = Vec::new();
        basic.extend_from_slice(&bytes.to_ne_bytes());
        basic.extend_from_slice(&packets.to_ne_bytes());
        basic.extend_from_slice(&[0; 4]);
        let mut stats2 = attr(TCA_STATS_BASIC, &basic);
        stats2.extend(attr(3, &[0; 20])); // TCA_STATS_QUEUE
        p.extend(attr(TCA_STATS2, &stats2));
        p.extend(attr(3, &[0; 36])); // TCA_STATS (struct tc_stats)
        p
    }

    #[test]
    fn basic_counters_are_decoded() {
        let m = class_msg(7, 0x0003_0010, 123_456_789_012, 4242);
        let (ifi, s) = decode_class_stats(&m).unwrap().unwrap();
        assert_eq!(ifi, 7);
        assert_eq!(s.classid, TcHandle::new(3, 0x10));
        assert_eq!((s.bytes, s.packets), (123_456_789_012, 4242));
    }

    #[test]
    fn no_stats_is_none_and_short_stats_are_an_error() {
        let mut p = vec![0u8; 20];
        p.extend(attr(1, b"htb\0"));
        assert_eq!(decode_class_stats(&p).unwrap(), None);
        p.extend(attr(TCA_STATS2, &attr(TCA_STATS_BASIC, &[0; 8])));
        assert!(decode_class_stats(&p).is_err());
        assert!(decode_class_stats(&[0; 10]).is_err());
    }

    proptest::proptest! {
        #[test]
        fn counters_round_trip(ifi in 1i32.., id in proptest::prelude::any::<u32>(),
                               bytes in proptest::prelude::any::<u64>(),
                               pk in proptest::prelude::any::<u32>()) {
            let (i, s) = decode_class_stats(&class_msg(ifi, id, bytes, pk)).unwrap().unwrap();
            proptest::prop_assert_eq!((i, s.classid, s.bytes, s.packets), (ifi, TcHandle::from_raw(id), bytes, pk));
        }
    }
}
