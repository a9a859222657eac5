//! Shim: TcHandle as lqos_bus defines it (u32, "0x1:0x2" text).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct TcHandle(u32);
impl TcHandle {
    pub fn get_major_minor(&self) -> (u16, u16) { ((self.0 >> 16) as u16, (self.0 & 0xFFFF) as u16) }
    pub fn from_string(handle: &str) -> Result<Self, String> {
        let handle = handle.trim();
        let hex = |s: &str| u32::from_str_radix(s.trim_start_matches("0x"), 16).map_err(|e| e.to_string());
        match handle { "root" => return Ok(Self(u32::MAX)), "none" => return Ok(Self(0)), _ => {} }
        if !handle.contains(':') { return Ok(Self(hex(handle)? << 16)); }
        let (a, b) = handle.split_once(':').unwrap();
        let minor = if b.is_empty() { 0 } else { hex(b)? };
        Ok(Self((hex(a)? << 16) | minor))
    }
    pub fn from_u32(tc: u32) -> Self { Self(tc) }
    pub fn as_u32(&self) -> u32 { self.0 }
    pub fn as_tc_string(&self) -> String {
        let (major, minor) = self.get_major_minor();
        if minor != 0 { format!("0x{major:x}:0x{minor:x}") } else { format!("0x{major:x}:") }
    }
}
