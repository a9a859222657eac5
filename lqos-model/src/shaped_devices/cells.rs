//! Cell parsers: rates' messages, address lists, MACs, trimming, control
//! characters, the `sqm` cell.

use ipnet::{Ipv4Net, Ipv6Net};

use crate::rate::RateError;
use crate::types::SqmOverride;

/// Leaf qdisc names accepted in the `sqm` column (first word).
pub const KNOWN_SQM: [&str; 5] = ["cake", "fq_codel", "none", "pfifo", "bfifo"];

/// The message for a rate cell that is not a valid rate.
pub(crate) fn rate_error_message(label: &str, e: &RateError) -> String {
    match e {
        RateError::Empty => format!("{label} is empty"),
        RateError::Negative(t) => format!("{label} {t:?} is negative"),
        RateError::NotANumber(t) => format!("{label} {t:?} is not a number"),
        RateError::TooPrecise(t) => {
            format!("{label} {t:?} has more than 6 decimal places (finer than 1 bit/s)")
        }
        RateError::TooLarge(t) => format!("{label} {t:?} is too large"),
    }
}

pub(super) trait IpEntry: Sized + std::str::FromStr {
    fn from_host(text: &str) -> Option<Self>;
    fn has_host_bits(&self) -> bool;
}

impl IpEntry for Ipv4Net {
    fn from_host(text: &str) -> Option<Self> {
        text.parse().ok().map(|a| Ipv4Net::new_assert(a, 32))
    }
    fn has_host_bits(&self) -> bool {
        self.addr() != self.network()
    }
}

impl IpEntry for Ipv6Net {
    fn from_host(text: &str) -> Option<Self> {
        text.parse().ok().map(|a| Ipv6Net::new_assert(a, 128))
    }
    fn has_host_bits(&self) -> bool {
        self.addr() != self.network()
    }
}

/// Parses a comma-separated list of addresses / CIDR ranges; problems are
/// `(is_error, message)`.
pub(super) fn parse_ip_list<T: IpEntry + std::fmt::Display>(
    cell: &str,
    label: &str,
    problems: &mut Vec<(bool, String)>,
) -> Vec<T> {
    let mut out = Vec::new();
    for entry in cell.split(',') {
        let entry = trim(entry);
        if entry.is_empty() {
            continue;
        }
        let parsed = if entry.contains('/') {
            entry.parse::<T>().ok()
        } else {
            T::from_host(entry)
        };
        match parsed {
            Some(net) => {
                if net.has_host_bits() {
                    problems.push((
                        false,
                        format!("{label} {entry:?} has host bits set after the prefix length"),
                    ));
                }
                out.push(net);
            }
            None => problems.push((
                true,
                format!("{label} {entry:?} is not a valid {label} address or CIDR range"),
            )),
        }
    }
    out
}

/// True for `aa:bb:cc:dd:ee:ff` / `aa-bb-cc-dd-ee-ff` (any case).
pub fn is_mac(text: &str) -> bool {
    let b = text.as_bytes();
    if b.len() != 17 || !matches!(b[2], b':' | b'-') {
        return false;
    }
    let sep = b[2];
    b.iter().enumerate().all(|(i, &c)| {
        if i % 3 == 2 {
            c == sep
        } else {
            c.is_ascii_hexdigit()
        }
    })
}

/// `text.trim()`, skipping the Unicode scan when both ends are visible
/// ASCII (the common case).
#[inline]
pub(super) fn trim(text: &str) -> &str {
    let b = text.as_bytes();
    let visible = |c: u8| c > b' ' && c < 0x7f;
    match (b.first(), b.last()) {
        (None, _) => text,
        (Some(&f), Some(&l)) if visible(f) && visible(l) => text,
        _ => text.trim(),
    }
}

/// True when `text` has a control character (`char::is_control`: C0,
/// DEL and C1); visible ASCII is checked byte by byte.
pub(super) fn has_control(text: &str) -> bool {
    // One pass over visible ASCII; only other bytes need the char check.
    text.bytes().any(|b| !(0x20..0x7f).contains(&b)) && text.chars().any(char::is_control)
}

/// Parses the `sqm` cell: empty, `spec`, or `down/up` (either half may be
/// empty = the default). Returns unknown first words of each half plus the
/// override.
pub(super) fn parse_sqm(
    cell: &str,
    line: usize,
) -> (Option<String>, Option<String>, Option<SqmOverride>) {
    let cell = cell.trim();
    if cell.is_empty() {
        return (None, None, None);
    }
    let (down, up) = match cell.split_once('/') {
        Some((d, u)) => (d.trim(), u.trim()),
        None => (cell, cell),
    };
    let unknown = |s: &str| -> Option<String> {
        let w = s.split_whitespace().next()?;
        // LibreQoS lowercases the cell: `Cake`, `None`, `FQ_CODEL` are known.
        (!KNOWN_SQM.iter().any(|k| k.eq_ignore_ascii_case(w))).then(|| w.to_string())
    };
    let ud = unknown(down);
    let uu = if cell.contains('/') {
        unknown(up)
    } else {
        None
    };
    (
        ud,
        uu,
        Some(SqmOverride {
            download: down.to_string(),
            upload: up.to_string(),
            line,
        }),
    )
}
