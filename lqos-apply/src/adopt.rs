//! A LibreQoS box's state directory: the allocation its last full reload
//! recorded and the tc commands it loaded, to compare a plan with what
//! LibreQoS built and to adopt its tree.
//!
//! LibreQoS (HEAD) keeps, under its state directory (`/opt/libreqos/state`
//! by default, lqos.conf's `state_directory`):
//! `shaping/queuingStructure.json` and `stats/statsByCircuit.json` (read by
//! [`lqos_tc::libreqos::LibreQosState`]), and `debug/linux_tc_rust.txt`
//! (the commands its bakery loaded) next to `debug/linux_tc.txt` (what
//! LibreQoS.py wrote for the same run).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use lqos_tc::libreqos::{libreqos_trees, LibreQosState};
use lqos_tc::tree::TcTree;
use lqos_tc::Allocation;

use crate::error::{ApplyError, IoAction, Result};
use crate::live::LiveSource;

/// `shaping/queuingStructure.json` under LibreQoS's state directory.
pub const QUEUING_STRUCTURE: &str = "shaping/queuingStructure.json";
/// `stats/statsByCircuit.json` under LibreQoS's state directory.
pub const STATS_BY_CIRCUIT: &str = "stats/statsByCircuit.json";
/// The bakery's commands (what a HEAD box loads).
pub const BAKERY_TC: &str = "debug/linux_tc_rust.txt";
/// LibreQoS.py's commands for the same run.
pub const PYTHON_TC: &str = "debug/linux_tc.txt";

/// A LibreQoS state directory, read.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LibreQosDir {
    /// The directory.
    pub dir: PathBuf,
    /// Its allocation.
    pub state: LibreQosState,
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path)
        .map_err(|e| ApplyError::io(IoAction::ReadLibreQosState, Some(path), e))
}

impl LibreQosDir {
    /// Reads `dir`'s two state files.
    pub fn read(dir: &Path) -> Result<LibreQosDir> {
        let (qs, stats) = (dir.join(QUEUING_STRUCTURE), dir.join(STATS_BY_CIRCUIT));
        let state = LibreQosState::parse(
            (&qs.display().to_string(), &read(&qs)?),
            (&stats.display().to_string(), &read(&stats)?),
        )
        .map_err(ApplyError::LibreQosState)?;
        Ok(LibreQosDir {
            dir: dir.to_path_buf(),
            state,
        })
    }

    /// The allocation to plan from so that the tree LibreQoS built is kept:
    /// LibreQoS's classids ([`LibreQosState::allocation`]) and, with
    /// `live`, the leaf handles the kernel holds on the `download` and
    /// `upload` interfaces (one interface twice on a stick).
    pub fn seed(
        &self,
        live: Option<&dyn LiveSource>,
        download: &str,
        upload: &str,
    ) -> Result<Allocation> {
        let mut alloc = self.state.allocation();
        if let Some(live) = live {
            let down = live.dump(download)?;
            let up = if upload == download {
                down.clone()
            } else {
                live.dump(upload)?
            };
            self.state.adopt_leaves(&mut alloc, &down, &up);
        }
        Ok(alloc)
    }

    /// TX queues to plan for: LibreQoS's queues per direction, twice that
    /// on a stick (where each direction gets half).
    pub fn tx_queues(&self) -> u32 {
        if self.state.up_offset() != 0 {
            2 * self.state.queues
        } else {
            self.state.queues
        }
    }

    /// The tc text LibreQoS loaded: `tc` if given, else the bakery's
    /// [`BAKERY_TC`], else LibreQoS.py's [`PYTHON_TC`]; read as trees per
    /// interface. Returns the file used.
    pub fn trees(&self, tc: Option<&Path>) -> Result<(PathBuf, BTreeMap<String, TcTree>)> {
        let path = match tc {
            Some(p) => p.to_path_buf(),
            None => {
                let bakery = self.dir.join(BAKERY_TC);
                if bakery.exists() {
                    bakery
                } else {
                    self.dir.join(PYTHON_TC)
                }
            }
        };
        let text = read(&path)?;
        let trees =
            libreqos_trees(&path.display().to_string(), &text).map_err(ApplyError::LibreQosTc)?;
        Ok((path, trees))
    }
}
