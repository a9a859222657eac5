//! The state directory: the last successfully applied plan (for stable
//! classids and `--rollback`) and the machine-wide apply lock.
//!
//! Files are written atomically (temp file in the same directory, fsync,
//! rename, fsync of the directory), so a crash leaves the old or the new
//! version, never a torn one. The lock is an `flock` held by the kernel on
//! an open file: a killed process never leaves a stale lock.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::{ApplyError, Result};

/// Default state directory when neither `--state-dir` nor `LQOS_STATE_DIR`
/// is given.
pub const DEFAULT_STATE_DIR: &str = "/var/lib/lqos";
/// Environment variable naming the state directory.
pub const STATE_DIR_ENV: &str = "LQOS_STATE_DIR";
/// The saved last good plan (JSON).
pub const LAST_PLAN_FILE: &str = "last-plan.json";
/// The lock file.
pub const LOCK_FILE: &str = "apply.lock";

/// Picks the state directory: the explicit one, else `$LQOS_STATE_DIR`,
/// else [`DEFAULT_STATE_DIR`].
pub fn resolve_state_dir(explicit: Option<&Path>) -> PathBuf {
    if let Some(p) = explicit {
        return p.to_path_buf();
    }
    match std::env::var_os(STATE_DIR_ENV) {
        Some(v) if !v.is_empty() => PathBuf::from(v),
        _ => PathBuf::from(DEFAULT_STATE_DIR),
    }
}

/// An existing (created on first use) state directory.
#[derive(Debug, Clone)]
pub struct StateDir {
    path: PathBuf,
}

/// The machine-wide apply lock; released when dropped (or when the process
/// dies).
#[derive(Debug)]
pub struct ApplyLock {
    _lock: Flock<File>,
    path: PathBuf,
}

impl ApplyLock {
    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl StateDir {
    /// Opens `path`, creating it (and parents) if needed.
    pub fn open(path: impl Into<PathBuf>) -> Result<StateDir> {
        let path = path.into();
        std::fs::create_dir_all(&path)
            .map_err(|e| ApplyError::io(format!("creating state dir {}", path.display()), e))?;
        Ok(StateDir { path })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Takes the apply lock without waiting. If another process (or another
    /// open file in this one) holds it, fails with [`ApplyError::Locked`]
    /// naming the holder's pid.
    pub fn lock(&self) -> Result<ApplyLock> {
        let path = self.path.join(LOCK_FILE);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| ApplyError::io(format!("opening lock file {}", path.display()), e))?;
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(mut lock) => {
                // Record the holder for the next one to name.
                let pid = std::process::id().to_string();
                let w = lock
                    .set_len(0)
                    .and_then(|_| lock.seek(SeekFrom::Start(0)))
                    .and_then(|_| lock.write_all(pid.as_bytes()))
                    .and_then(|_| lock.flush());
                w.map_err(|e| ApplyError::io(format!("writing lock file {}", path.display()), e))?;
                Ok(ApplyLock { _lock: lock, path })
            }
            Err((mut file, Errno::EWOULDBLOCK)) => {
                let mut s = String::new();
                let _ = file.read_to_string(&mut s);
                Err(ApplyError::Locked {
                    path,
                    holder: s.trim().parse().ok(),
                })
            }
            Err((_, errno)) => Err(ApplyError::io(
                format!("locking {}", path.display()),
                std::io::Error::from(errno),
            )),
        }
    }

    /// Writes `value` as pretty JSON to `name` atomically.
    pub fn save_json<T: Serialize>(&self, name: &str, value: &T) -> Result<()> {
        let bytes = serde_json::to_vec_pretty(value).map_err(|e| ApplyError::State {
            path: self.path.join(name),
            message: format!("cannot serialize: {e}"),
        })?;
        write_atomic(&self.path.join(name), &bytes)
    }

    /// Reads JSON file `name`; `Ok(None)` when it does not exist.
    pub fn load_json<T: DeserializeOwned>(&self, name: &str) -> Result<Option<T>> {
        let path = self.path.join(name);
        let text = match std::fs::read(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(ApplyError::io(format!("reading {}", path.display()), e)),
        };
        serde_json::from_slice(&text)
            .map(Some)
            .map_err(|e| ApplyError::State {
                path,
                message: format!("not valid JSON for this version of lqos: {e}"),
            })
    }
}

/// Writes `bytes` to `path` via a temp file in the same directory, fsync,
/// rename and directory fsync.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
    let ctx = |what: &str| format!("{what} {}", tmp.display());
    let mut f = File::create(&tmp).map_err(|e| ApplyError::io(ctx("creating"), e))?;
    f.write_all(bytes)
        .and_then(|_| f.sync_all())
        .map_err(|e| ApplyError::io(ctx("writing"), e))?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        ApplyError::io(format!("renaming into {}", path.display()), e)
    })?;
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lock_is_refused_with_holder_pid() {
        let dir = tempfile::tempdir().unwrap();
        let st = StateDir::open(dir.path().join("a/b")).unwrap();
        let l1 = st.lock().unwrap();
        let err = st.lock().unwrap_err();
        match &err {
            ApplyError::Locked { holder, .. } => assert_eq!(*holder, Some(std::process::id())),
            e => panic!("{e}"),
        }
        assert!(err.to_string().contains("another lqos apply is running"));
        drop(l1);
        st.lock().unwrap();
    }

    #[test]
    fn json_round_trip_is_atomic_and_missing_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let st = StateDir::open(dir.path()).unwrap();
        assert_eq!(st.load_json::<Vec<u32>>("x.json").unwrap(), None);
        st.save_json("x.json", &vec![1u32, 2]).unwrap();
        st.save_json("x.json", &vec![3u32]).unwrap();
        assert_eq!(st.load_json::<Vec<u32>>("x.json").unwrap(), Some(vec![3]));
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["x.json".to_string()]);
        std::fs::write(dir.path().join("bad.json"), "{").unwrap();
        assert!(st.load_json::<Vec<u32>>("bad.json").is_err());
    }

    #[test]
    fn state_dir_resolution_order() {
        assert_eq!(
            resolve_state_dir(Some(Path::new("/x"))),
            PathBuf::from("/x")
        );
    }
}
