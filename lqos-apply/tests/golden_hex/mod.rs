//! The `.hex` capture files of `tests/fixtures/netlink` (written by
//! `capture.sh` / `capture_filters.sh`): a `# tc command: ...` header and
//! the bytes `tc` sent, as hex words. Shared by the golden-byte tests.

use std::path::PathBuf;

/// One capture: the tc command it came from and the netlink message.
pub struct Golden {
    /// The `tc` command line that sent these bytes.
    pub command: String,
    /// The whole netlink message (header included).
    pub bytes: Vec<u8>,
}

/// The directory holding the captures.
pub fn fixtures_dir() -> PathBuf {
    [env!("CARGO_MANIFEST_DIR"), "tests/fixtures/netlink"]
        .iter()
        .collect()
}

/// Reads capture `name` (without `.hex`); panics with the file name on a
/// missing header, a bad hex word or a length that disagrees with
/// `nlmsg_len`.
pub fn load(name: &str) -> Golden {
    let path = fixtures_dir().join(format!("{name}.hex"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let mut command = String::new();
    let mut bytes = Vec::new();
    for line in text.lines() {
        if let Some(c) = line.strip_prefix("# tc command: ") {
            command = c.to_string();
        } else if line.starts_with('#') || line.trim().is_empty() {
            continue;
        } else {
            for b in line.split_whitespace() {
                bytes
                    .push(u8::from_str_radix(b, 16).unwrap_or_else(|e| panic!("{name}: {b}: {e}")));
            }
        }
    }
    assert!(!command.is_empty(), "{name}: no '# tc command:' header");
    let len = u32::from_ne_bytes(bytes[0..4].try_into().unwrap()) as usize;
    assert_eq!(len, bytes.len(), "{name}: nlmsg_len vs captured bytes");
    Golden { command, bytes }
}
