//! The base of every message: netlink attributes and nests, written and
//! read (`struct nlattr`: u16 length, u16 type, payload padded to 4
//! bytes). Every kind module builds its options from these.

use super::consts::NLA_TYPE_MASK;
use super::error::EncodeError;

/// `NLA_ALIGN`.
pub(crate) fn align4(n: usize) -> usize {
    (n + 3) & !3
}

fn pad4(buf: &mut Vec<u8>) {
    while buf.len() % 4 != 0 {
        buf.push(0);
    }
}

/// Appends one attribute.
pub(crate) fn attr(buf: &mut Vec<u8>, ty: u16, payload: &[u8]) {
    let len = (4 + payload.len()) as u16;
    buf.extend_from_slice(&len.to_ne_bytes());
    buf.extend_from_slice(&ty.to_ne_bytes());
    buf.extend_from_slice(payload);
    pad4(buf);
}

/// Appends a `u32` attribute (native endian).
pub(crate) fn attr_u32(buf: &mut Vec<u8>, ty: u16, v: u32) {
    attr(buf, ty, &v.to_ne_bytes());
}

/// Appends a `u64` attribute (native endian).
pub(crate) fn attr_u64(buf: &mut Vec<u8>, ty: u16, v: u64) {
    attr(buf, ty, &v.to_ne_bytes());
}

/// Appends a NUL-terminated string attribute.
pub(crate) fn attr_str(buf: &mut Vec<u8>, ty: u16, s: &str) {
    let len = (4 + s.len() + 1) as u16;
    buf.extend_from_slice(&len.to_ne_bytes());
    buf.extend_from_slice(&ty.to_ne_bytes());
    buf.extend_from_slice(s.as_bytes());
    buf.push(0);
    pad4(buf);
}

/// Starts a nested attribute (no `NLA_F_NESTED` flag unless `ty` has it,
/// as tc sends them); returns its offset for [`nest_end`].
pub(crate) fn nest_begin(buf: &mut Vec<u8>, ty: u16) -> usize {
    let pos = buf.len();
    buf.extend_from_slice(&0u16.to_ne_bytes());
    buf.extend_from_slice(&ty.to_ne_bytes());
    pos
}

/// Closes the nest begun at `pos`: patches its length.
pub(crate) fn nest_end(buf: &mut [u8], pos: usize) -> Result<(), EncodeError> {
    let len = buf.len() - pos;
    let len16 = u16::try_from(len).map_err(|_| EncodeError::TooLarge { len })?;
    buf[pos..pos + 2].copy_from_slice(&len16.to_ne_bytes());
    Ok(())
}

pub(crate) fn u16_at(b: &[u8], off: usize) -> u16 {
    u16::from_ne_bytes([b[off], b[off + 1]])
}

pub(crate) fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_ne_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

pub(crate) fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_ne_bytes(b[off..off + 8].try_into().expect("8 bytes"))
}

/// A `u32` payload, `None` when shorter.
pub(crate) fn get_u32(v: &[u8]) -> Option<u32> {
    (v.len() >= 4).then(|| u32_at(v, 0))
}

/// A `u64` payload, `None` when shorter.
pub(crate) fn get_u64(v: &[u8]) -> Option<u64> {
    (v.len() >= 8).then(|| u64_at(v, 0))
}

/// A NUL-terminated string payload (`""` when not UTF-8).
pub(crate) fn cstr(b: &[u8]) -> &str {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    std::str::from_utf8(&b[..end]).unwrap_or("")
}

/// Iterates over netlink attributes: `(type without flag bits, payload)`.
/// Stops silently at a truncated attribute.
pub(crate) struct Attrs<'a> {
    buf: &'a [u8],
}

/// The attributes in `buf`.
pub(crate) fn attrs(buf: &[u8]) -> Attrs<'_> {
    Attrs { buf }
}

impl<'a> Iterator for Attrs<'a> {
    type Item = (u16, &'a [u8]);
    fn next(&mut self) -> Option<Self::Item> {
        if self.buf.len() < 4 {
            return None;
        }
        let len = u16_at(self.buf, 0) as usize;
        if len < 4 || len > self.buf.len() {
            self.buf = &[];
            return None;
        }
        let ty = u16_at(self.buf, 2) & NLA_TYPE_MASK;
        let payload = &self.buf[4..len];
        let next = align4(len).min(self.buf.len());
        self.buf = &self.buf[next..];
        Some((ty, payload))
    }
}

/// The `TCA_KIND` and `TCA_OPTIONS` of a tc message's attributes (`""`
/// and empty when absent).
pub(crate) fn kind_and_options(rest: &[u8]) -> (&str, &[u8]) {
    let mut kind = "";
    let mut opts: &[u8] = &[];
    for (ty, v) in attrs(rest) {
        match ty {
            super::consts::TCA_KIND => kind = cstr(v),
            super::consts::TCA_OPTIONS => opts = v,
            _ => {}
        }
    }
    (kind, opts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nests_patch_their_length_and_attrs_read_them_back() {
        let mut b = Vec::new();
        let n = nest_begin(&mut b, 2);
        attr_u32(&mut b, 1, 7);
        attr_str(&mut b, 3, "htb");
        nest_end(&mut b, n).unwrap();
        let (ty, inner) = attrs(&b).next().unwrap();
        assert_eq!((ty, inner.len()), (2, 16));
        let v: Vec<_> = attrs(inner).collect();
        assert_eq!(get_u32(v[0].1), Some(7));
        assert_eq!(cstr(v[1].1), "htb");
    }

    #[test]
    fn truncated_attributes_stop_the_iterator() {
        assert_eq!(attrs(&[8, 0, 1, 0, 1]).count(), 0);
        assert_eq!(attrs(&[2, 0, 1, 0]).count(), 0);
    }
}
