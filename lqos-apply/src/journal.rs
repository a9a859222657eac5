//! The input journal: the last [`JOURNAL_LEN`] input sets that were
//! applied, in the state directory, with their time, sha256 and circuit
//! count, so an operator can see and restore what was live before
//! ([`Journal::entries`], [`Journal::inputs`] for a rollback to one).
//!
//! Files are stored once by content (a `network.json` that did not change
//! is not stored again) and removed when no entry names them.

use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{ApplyError, IoAction, Result, StateProblem};
use crate::inputs::{PlanOverrides, RawInputs};
use crate::state::{NetnsState, StateDir, StateFile};

/// How many input sets the journal keeps.
pub const JOURNAL_LEN: usize = 5;

/// The bytes of one input set, borrowed.
#[derive(Debug, Clone, Copy)]
pub struct InputSet<'a> {
    /// `network.json`.
    pub network: &'a str,
    /// `ShapedDevices.csv`.
    pub devices: &'a [u8],
    /// `lqos.conf`, if one was used.
    pub config: Option<&'a str>,
}

impl<'a> From<&'a RawInputs> for InputSet<'a> {
    fn from(r: &'a RawInputs) -> InputSet<'a> {
        InputSet {
            network: &r.network,
            devices: &r.devices,
            config: r.config.as_deref(),
        }
    }
}

impl InputSet<'_> {
    /// The sha256 of the set (hex): of each file's sha256, in order.
    pub fn sha256(&self) -> String {
        self.file_hashes().sha256()
    }

    /// Each file's sha256 (hex), each file hashed once.
    fn file_hashes(&self) -> FileHashes {
        FileHashes {
            network: sha256_hex(self.network.as_bytes()),
            devices: sha256_hex(self.devices),
            config: self.config.map(|c| sha256_hex(c.as_bytes())),
        }
    }
}

/// The sha256 (hex) of each file of an [`InputSet`].
struct FileHashes {
    network: String,
    devices: String,
    config: Option<String>,
}

impl FileHashes {
    /// [`InputSet::sha256`], from the files' hashes.
    fn sha256(&self) -> String {
        let mut h = Sha256::new();
        h.update(&self.network);
        h.update(&self.devices);
        if let Some(c) = &self.config {
            h.update(c);
        }
        format!("{:x}", h.finalize())
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

/// One applied input set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct JournalEntry {
    /// Milliseconds since the Unix epoch when it was applied.
    pub at_ms: u64,
    /// [`InputSet::sha256`].
    pub sha256: String,
    /// Circuits it has.
    pub circuits: usize,
    /// What applied it (`watch file-change`, `apply`, ...).
    pub source: String,
    /// sha256 of `network.json`.
    pub network: String,
    /// sha256 of `ShapedDevices.csv`.
    pub devices: String,
    /// sha256 of `lqos.conf`, if one was used.
    pub config: Option<String>,
    /// The planner settings given on top of `lqos.conf` when it was
    /// applied (what a rollback to it plans with).
    #[serde(default, skip_serializing_if = "PlanOverrides::is_empty")]
    pub overrides: PlanOverrides,
}

/// The journal of one network namespace in a state directory.
#[derive(Debug)]
pub struct Journal {
    dir: StateDir,
}

const INDEX: &str = "index.json";

impl Journal {
    /// The journal of `state`'s namespace (its [`StateFile::Journal`]
    /// directory, created if needed).
    pub fn open(state: &NetnsState) -> Result<Journal> {
        state.dir()?;
        Ok(Journal {
            dir: StateDir::open(state.file(StateFile::Journal))?,
        })
    }

    /// The entries, newest first.
    pub fn entries(&self) -> Result<Vec<JournalEntry>> {
        Ok(self.dir.load_json(INDEX)?.unwrap_or_default())
    }

    /// Records `inputs` as applied by `source` with `overrides` (nothing
    /// when the newest entry has the same sha256 and overrides). Returns
    /// whether an entry was added.
    pub fn push(
        &self,
        inputs: InputSet<'_>,
        overrides: &PlanOverrides,
        circuits: usize,
        source: &str,
    ) -> Result<bool> {
        let mut entries = self.entries()?;
        // Each file is hashed once (ShapedDevices.csv is 15 MB at 100,000
        // circuits): the set's sha256 and the stored files' names.
        let hashes = inputs.file_hashes();
        let sha = hashes.sha256();
        if entries
            .first()
            .is_some_and(|e| e.sha256 == sha && e.overrides == *overrides)
        {
            return Ok(false);
        }
        // Files are named by their sha256 and written atomically: one
        // that exists holds those bytes already.
        let put = |bytes: &[u8], h: String| -> Result<String> {
            let path = self.dir.path().join(&h);
            let exists = path
                .try_exists()
                .map_err(|e| ApplyError::io(IoAction::Read, Some(&path), e))?;
            if !exists {
                crate::state::write_atomic(&path, bytes)?;
            }
            Ok(h)
        };
        let FileHashes {
            network,
            devices,
            config,
        } = hashes;
        let entry = JournalEntry {
            at_ms: crate::watch::unix_ms(SystemTime::now()),
            sha256: sha,
            circuits,
            source: source.to_string(),
            network: put(inputs.network.as_bytes(), network)?,
            devices: put(inputs.devices, devices)?,
            config: match (inputs.config, config) {
                (Some(c), Some(h)) => Some(put(c.as_bytes(), h)?),
                _ => None,
            },
            overrides: overrides.clone(),
        };
        entries.insert(0, entry);
        entries.truncate(JOURNAL_LEN);
        self.dir.save_json(INDEX, &entries)?;
        // Files no entry names any more.
        let keep: std::collections::HashSet<&str> = entries
            .iter()
            .flat_map(|e| [Some(&e.network), Some(&e.devices), e.config.as_ref()])
            .flatten()
            .map(String::as_str)
            .collect();
        if let Ok(rd) = std::fs::read_dir(self.dir.path()) {
            for f in rd.flatten() {
                let name = f.file_name();
                let name = name.to_string_lossy();
                if name.len() == 64 && !keep.contains(name.as_ref()) {
                    let _ = std::fs::remove_file(f.path());
                }
            }
        }
        Ok(true)
    }

    /// The inputs of entry `n` (1: the newest).
    pub fn inputs(&self, n: usize) -> Result<(JournalEntry, RawInputs)> {
        let entries = self.entries()?;
        let e = n
            .checked_sub(1)
            .and_then(|i| entries.get(i))
            .cloned()
            .ok_or_else(|| ApplyError::State {
                path: self.dir.path().join(INDEX),
                reason: StateProblem::NoJournalEntry {
                    entries: entries.len(),
                    asked: n,
                },
            })?;
        let get = |h: &str| -> Result<Vec<u8>> {
            self.dir.read(h)?.ok_or_else(|| ApplyError::State {
                path: self.dir.path().join(h),
                reason: StateProblem::JournalFileMissing,
            })
        };
        let text = |h: &str| -> Result<String> {
            String::from_utf8(get(h)?).map_err(|_| ApplyError::State {
                path: self.dir.path().join(h),
                reason: StateProblem::NotUtf8,
            })
        };
        let raw = RawInputs {
            network: text(&e.network)?,
            devices: get(&e.devices)?,
            config: e.config.as_deref().map(text).transpose()?,
        };
        Ok((e, raw))
    }

    /// Where the files of entry `e` are (network, devices, config).
    pub fn paths(&self, e: &JournalEntry) -> [Option<std::path::PathBuf>; 3] {
        let p = |h: &str| Some(self.dir.path().join(h));
        [
            p(&e.network),
            p(&e.devices),
            e.config.as_deref().and_then(p),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_five_sets_stores_files_once_and_restores_them() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::open(&NetnsState::new(dir.path(), Some("x"))).unwrap();
        let set = |i: usize| RawInputs {
            network: "{}".into(),
            devices: format!("Circuit ID\n{i}\n").into_bytes(),
            config: None,
        };
        let none = PlanOverrides::default();
        assert!(j.push((&set(0)).into(), &none, 1, "apply").unwrap());
        // The same again: nothing.
        assert!(!j.push((&set(0)).into(), &none, 1, "apply").unwrap());
        for i in 1..8 {
            assert!(j
                .push((&set(i)).into(), &none, 1, "watch file-change")
                .unwrap());
        }
        let e = j.entries().unwrap();
        assert_eq!(e.len(), JOURNAL_LEN);
        assert_eq!(e[0].sha256, InputSet::from(&set(7)).sha256());
        // One network file for all, one devices file each.
        let files = std::fs::read_dir(dir.path().join("journal.netns-x"))
            .unwrap()
            .filter(|f| f.as_ref().unwrap().file_name().len() == 64)
            .count();
        assert_eq!(files, 1 + JOURNAL_LEN);
        let (entry, raw) = j.inputs(2).unwrap();
        assert_eq!(raw, set(6));
        assert_eq!(entry.source, "watch file-change");
        assert!(j.inputs(6).is_err());
    }

    /// The set's sha256 is that of its files' hex sha256s in order (what
    /// journals and pending refusals written by earlier versions hold),
    /// and an entry names each file by the sha256 of its bytes.
    #[test]
    fn a_sets_sha256_is_of_its_files_hashes_and_entries_name_files_by_theirs() {
        let hex = |b: &[u8]| format!("{:x}", Sha256::digest(b));
        let raw = RawInputs {
            network: "{}".into(),
            devices: b"Circuit ID\n1\n".to_vec(),
            config: Some("[lqos]\n".into()),
        };
        let want =
            hex(format!("{}{}{}", hex(b"{}"), hex(&raw.devices), hex(b"[lqos]\n")).as_bytes());
        assert_eq!(InputSet::from(&raw).sha256(), want);
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::open(&NetnsState::new(dir.path(), None)).unwrap();
        assert!(j
            .push((&raw).into(), &PlanOverrides::default(), 1, "apply")
            .unwrap());
        let e = &j.entries().unwrap()[0];
        assert_eq!(e.sha256, want);
        assert_eq!(e.devices, hex(&raw.devices));
        assert_eq!(e.config.as_deref(), Some(hex(b"[lqos]\n").as_str()));
        let stored = std::fs::read(dir.path().join("journal").join(&e.devices)).unwrap();
        assert_eq!(stored, raw.devices);
    }

    /// The same files applied with other overrides (`--sqm pfifo`, then
    /// `--sqm fq_codel`) are another entry, and an entry gives back the
    /// overrides it was applied with (what a rollback to it plans with).
    #[test]
    fn an_entry_keeps_the_overrides_it_was_applied_with() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::open(&NetnsState::new(dir.path(), None)).unwrap();
        let raw = RawInputs {
            network: "{}".into(),
            devices: b"Circuit ID\n1\n".to_vec(),
            config: None,
        };
        let pfifo = PlanOverrides {
            sqm: Some("pfifo".parse().unwrap()),
            queues: Some(4),
            ..Default::default()
        };
        let fq = PlanOverrides {
            sqm: Some("fq_codel".parse().unwrap()),
            ..Default::default()
        };
        assert!(j.push((&raw).into(), &pfifo, 1, "apply").unwrap());
        assert!(!j.push((&raw).into(), &pfifo, 1, "apply").unwrap());
        assert!(j.push((&raw).into(), &fq, 1, "apply").unwrap());
        assert_eq!(j.inputs(1).unwrap().0.overrides, fq);
        assert_eq!(j.inputs(2).unwrap().0.overrides, pfifo);
        // Entries written before overrides were kept read as none.
        let old: JournalEntry = serde_json::from_str(
            r#"{"at_ms":1,"sha256":"a","circuits":1,"source":"apply","network":"b","devices":"c","config":null}"#,
        )
        .unwrap();
        assert!(old.overrides.is_empty());
        // The overrides a command line gives take the place of the entry's.
        let over = PlanOverrides {
            queues: Some(2),
            ..Default::default()
        };
        let both = pfifo.under(&over);
        assert_eq!((both.queues, both.sqm), (Some(2), pfifo.sqm.clone()));
    }
}
