//! Byte-level text writers for the large outputs (`ip_map.csv`, the
//! prefix rows of `plan.json`): integers through `itoa`, addresses and
//! handles without `core::fmt`, CSV fields quoted by `csv_core`'s own rule.
//! Each writes exactly what the `Display` impl (or the `csv` crate) would.

use core::net::{IpAddr, Ipv4Addr};

use ipnet::IpNet;

use crate::TcHandle;

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
}
