//! A minimal writer for the cpio "newc" format, the format the kernel
//! unpacks as an initramfs (`Documentation/driver-api/early-userspace/
//! buffer-format.rst`): per entry a 110-byte ASCII header (`070701` and 13
//! eight-digit hex fields), the NUL-terminated name, padding to 4 bytes, the
//! data, padding to 4 bytes; a `TRAILER!!!` entry ends the archive.

use std::collections::BTreeMap;

/// One archive member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A directory (mode bits only, e.g. 0o755).
    Dir(u32),
    /// A regular file with its permission bits.
    File(Vec<u8>, u32),
    /// A symbolic link to the given target.
    Symlink(String),
    /// A character device (major, minor) with permission bits.
    CharDev(u32, u32, u32),
}

/// An archive being assembled: paths (without a leading `/`) to entries.
/// Parent directories are created on insert; `finish` emits them first.
#[derive(Debug, Default)]
pub struct Archive {
    entries: BTreeMap<String, Entry>,
}

impl Archive {
    /// An empty archive.
    pub fn new() -> Archive {
        Archive::default()
    }

    /// Adds (or replaces) `path`, creating its parent directories.
    pub fn insert(&mut self, path: &str, entry: Entry) {
        let path = path.trim_start_matches('/').trim_end_matches('/');
        let mut parent = String::new();
        for part in path.split('/').take(path.split('/').count() - 1) {
            if !parent.is_empty() {
                parent.push('/');
            }
            parent.push_str(part);
            self.entries
                .entry(parent.clone())
                .or_insert(Entry::Dir(0o755));
        }
        self.entries.insert(path.to_string(), entry);
    }

    /// Whether `path` is already in the archive.
    pub fn contains(&self, path: &str) -> bool {
        self.entries
            .contains_key(path.trim_start_matches('/').trim_end_matches('/'))
    }

    /// The newc bytes. Entries are written in path order, so every
    /// directory precedes its contents (`a` < `a/b`).
    pub fn finish(&self) -> Vec<u8> {
        let size: usize = self
            .entries
            .values()
            .map(|e| match e {
                Entry::File(d, _) => d.len() + 256,
                _ => 256,
            })
            .sum();
        let mut out = Vec::with_capacity(size + 512);
        for (ino, (path, entry)) in self.entries.iter().enumerate() {
            let (mode, data, rdev): (u32, &[u8], (u32, u32)) = match entry {
                Entry::Dir(m) => (0o040000 | m, &[], (0, 0)),
                Entry::File(d, m) => (0o100000 | m, d, (0, 0)),
                Entry::Symlink(t) => (0o120777, t.as_bytes(), (0, 0)),
                Entry::CharDev(maj, min, m) => (0o020000 | m, &[], (*maj, *min)),
            };
            let nlink = if matches!(entry, Entry::Dir(_)) { 2 } else { 1 };
            write_entry(&mut out, path, ino as u32 + 1, mode, nlink, data, rdev);
        }
        write_entry(&mut out, "TRAILER!!!", 0, 0, 1, &[], (0, 0));
        out
    }
}

fn pad4(out: &mut Vec<u8>) {
    while out.len() % 4 != 0 {
        out.push(0);
    }
}

fn write_entry(
    out: &mut Vec<u8>,
    name: &str,
    ino: u32,
    mode: u32,
    nlink: u32,
    data: &[u8],
    rdev: (u32, u32),
) {
    let fields = [
        ino,
        mode,
        0, // uid
        0, // gid
        nlink,
        0, // mtime: fixed, so identical inputs give identical archives
        data.len() as u32,
        0, // devmajor
        0, // devminor
        rdev.0,
        rdev.1,
        name.len() as u32 + 1,
        0, // check (unused by newc)
    ];
    out.extend_from_slice(b"070701");
    for f in fields {
        out.extend_from_slice(format!("{f:08x}").as_bytes());
    }
    out.extend_from_slice(name.as_bytes());
    out.push(0);
    pad4(out);
    out.extend_from_slice(data);
    pad4(out);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn header_layout_and_padding() {
        let mut a = Archive::new();
        a.insert("/x", Entry::File(b"hello".to_vec(), 0o644));
        let b = a.finish();
        // 110-byte header, "x\0" padded to 112, 5 data bytes padded to 120.
        assert_eq!(&b[..6], b"070701");
        assert_eq!(&b[6 + 8..6 + 16], b"000081a4"); // mode: regular 0644
        assert_eq!(&b[6 + 6 * 8..6 + 7 * 8], b"00000005"); // filesize
        assert_eq!(&b[110..112], b"x\0");
        assert_eq!(&b[112..117], b"hello");
        assert_eq!(&b[120..126], b"070701");
        assert_eq!(b.len() % 4, 0);
    }

    #[test]
    fn parents_are_created_and_precede_children() {
        let mut a = Archive::new();
        a.insert("a/b/c", Entry::Symlink("../t".into()));
        a.insert("a-z", Entry::Dir(0o700));
        let names: Vec<&str> = a.entries.keys().map(String::as_str).collect();
        assert_eq!(names, ["a", "a-z", "a/b", "a/b/c"]);
    }

    /// The archive is what GNU cpio reads (when the host has it).
    #[test]
    fn gnu_cpio_lists_it() {
        let Ok(mut child) = Command::new("cpio")
            .args(["-t", "-v", "--quiet"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
        else {
            eprintln!("skipping: no cpio on this host");
            return;
        };
        let mut a = Archive::new();
        a.insert("bin/busybox", Entry::File(vec![1, 2, 3], 0o755));
        a.insert("bin/sh", Entry::Symlink("busybox".into()));
        a.insert("dev/console", Entry::CharDev(5, 1, 0o600));
        use std::io::Write;
        child.stdin.take().unwrap().write_all(&a.finish()).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("bin/sh -> busybox"), "{text}");
        assert!(text.contains("crw-------"), "{text}");
        assert!(text.contains("-rwxr-xr-x"), "{text}");
    }
}
