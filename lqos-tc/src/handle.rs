//! `TcHandle`: tc's `major:minor` handles and classids.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A tc handle or classid: 16-bit major, 16-bit minor, printed and parsed in
/// tc's hex form (`7fff:`, `1a:e3b`, `root`).
///
/// ```
/// use lqos_tc::TcHandle;
/// let h: TcHandle = "1a:e3b".parse().unwrap();
/// assert_eq!((h.major(), h.minor()), (0x1a, 0xe3b));
/// assert_eq!(h.to_string(), "1a:e3b");
/// assert_eq!(TcHandle::new(0x7fff, 0).to_string(), "7fff:");
/// assert_eq!("root".parse::<TcHandle>().unwrap(), TcHandle::ROOT);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub struct TcHandle(u32);

/// Why a string is not a tc handle.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid tc handle {0:?} (expected hex major:minor such as 1:3 or 7fff:)")]
#[non_exhaustive]
pub struct HandleError(pub String);

impl TcHandle {
    /// `TC_H_ROOT` (0xFFFFFFFF): the device's root, printed `root`.
    pub const ROOT: TcHandle = TcHandle(0xFFFF_FFFF);
    /// `TC_H_UNSPEC` (0): no handle, printed `none`.
    pub const UNSPEC: TcHandle = TcHandle(0);

    /// Builds `major:minor`.
    pub const fn new(major: u16, minor: u16) -> TcHandle {
        TcHandle(((major as u32) << 16) | minor as u32)
    }

    /// From the kernel's 32-bit value.
    pub const fn from_raw(raw: u32) -> TcHandle {
        TcHandle(raw)
    }

    /// The kernel's 32-bit value.
    pub const fn raw(self) -> u32 {
        self.0
    }

    /// Major number (upper 16 bits).
    pub const fn major(self) -> u16 {
        (self.0 >> 16) as u16
    }

    /// Minor number (lower 16 bits).
    pub const fn minor(self) -> u16 {
        (self.0 & 0xFFFF) as u16
    }

    /// This handle's major with minor 0 (the qdisc a class belongs to).
    pub const fn qdisc(self) -> TcHandle {
        TcHandle(self.0 & 0xFFFF_0000)
    }
}

impl fmt::Display for TcHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            TcHandle::ROOT => f.write_str("root"),
            TcHandle::UNSPEC => f.write_str("none"),
            h if h.minor() == 0 => write!(f, "{:x}:", h.major()),
            h => write!(f, "{:x}:{:x}", h.major(), h.minor()),
        }
    }
}

impl FromStr for TcHandle {
    type Err = HandleError;
    /// Accepts `root`, `none`, `MAJ:`, `MAJ:MIN` and `MAJ` (hex, as tc does).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || HandleError(s.to_string());
        match s {
            "root" => return Ok(TcHandle::ROOT),
            "none" => return Ok(TcHandle::UNSPEC),
            _ => {}
        }
        let hex16 = |p: &str| -> Result<u16, HandleError> {
            if p.is_empty() || p.len() > 4 || !p.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(err());
            }
            u16::from_str_radix(p, 16).map_err(|_| err())
        };
        let (maj, min) = s.split_once(':').unwrap_or((s, ""));
        let major = hex16(maj)?;
        let minor = if min.is_empty() { 0 } else { hex16(min)? };
        Ok(TcHandle::new(major, minor))
    }
}

impl From<TcHandle> for String {
    fn from(h: TcHandle) -> String {
        h.to_string()
    }
}

impl TryFrom<String> for TcHandle {
    type Error = HandleError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_print() {
        for s in ["7fff:", "1:", "1:3", "1a:e3b", "ffff:fffe", "root", "none"] {
            assert_eq!(s.parse::<TcHandle>().unwrap().to_string(), s);
        }
        assert_eq!(
            "7FFF:".parse::<TcHandle>().unwrap(),
            TcHandle::new(0x7fff, 0)
        );
        assert_eq!("8".parse::<TcHandle>().unwrap(), TcHandle::new(8, 0));
        for bad in ["", ":", "x:1", "1:2:3", "12345:", "1:-1", " 1:2"] {
            assert!(bad.parse::<TcHandle>().is_err(), "{bad:?}");
        }
    }
}
