//! Loading the programs: the embedded object, its maps created or reused
//! under the pin directory, both programs verified by the kernel.

use std::path::{Path, PathBuf};

use aya::maps::MapData;
use aya::programs::{SchedClassifier, Xdp};
use aya::{Ebpf, EbpfLoader};

use crate::error::{BpfError, Result};
use crate::layout::{names, programs, DEFAULT_FLOW_TABLE};
use crate::maps::Maps;
use crate::sys;

/// The compiled programs (`bpf/lqos.bpf.o`, rebuilt by `bpf/build.sh`).
pub static OBJECT: &[u8] = aya::include_bytes_aligned!("../bpf/lqos.bpf.o");

/// The smallest TCP flow table [`DataPath::load_with`] makes (a smaller
/// size is raised to it).
pub const MIN_FLOW_TABLE: u32 = 1024;

/// Where lqos pins its maps and links unless told otherwise.
pub const DEFAULT_PIN_DIR: &str = "/sys/fs/bpf/lqos";

/// Both programs loaded into the kernel (verified), their maps pinned
/// under the pin directory: existing pinned maps of the same layout
/// version are reused with their entries, missing ones are created.
/// Dropping this value unloads nothing that is attached: the kernel keeps
/// an attached program for as long as its XDP link or tc filter exists.
pub struct DataPath {
    ebpf: Ebpf,
    pin_dir: PathBuf,
}

impl std::fmt::Debug for DataPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataPath")
            .field("pin_dir", &self.pin_dir)
            .finish()
    }
}

impl DataPath {
    /// Loads the programs, creating or reusing the maps pinned under
    /// `pin_dir` (which must be on a bpffs; see [`sys::ensure_bpffs`]).
    /// The cpumap is sized to the possible CPUs.
    pub fn load(pin_dir: &Path) -> Result<DataPath> {
        DataPath::load_object(pin_dir, OBJECT)
    }

    /// [`DataPath::load`] with another build of the object (a variant
    /// built by `bpf/build.sh` with other defines, for benchmarks). It must
    /// have the same maps and programs.
    pub fn load_object(pin_dir: &Path, object: &[u8]) -> Result<DataPath> {
        DataPath::load_with(pin_dir, object, DEFAULT_FLOW_TABLE)
    }

    /// [`DataPath::load_object`] with a TCP flow table of `flow_table_size`
    /// entries. A pinned flow table of another
    /// size is unpinned first and made anew (the flows it held are
    /// forgotten: their next segments start them again); the programs
    /// running until the new ones replace them keep the old one.
    pub fn load_with(pin_dir: &Path, object: &[u8], flow_table_size: u32) -> Result<DataPath> {
        DataPath::load_sized(pin_dir, object, flow_table_size, None)
    }

    /// [`DataPath::load`] with the address maps (exact-match, fast prefix,
    /// LPM trie) made with `capacity` entries each instead of theirs: a
    /// trial of what the kernel accepts (the preflight's), which then costs
    /// no preallocated memory. Never for a data path that carries traffic.
    pub(crate) fn load_trial(pin_dir: &Path) -> Result<DataPath> {
        DataPath::load_sized(pin_dir, OBJECT, DEFAULT_FLOW_TABLE, Some(1024))
    }

    fn load_sized(
        pin_dir: &Path,
        object: &[u8],
        flow_table_size: u32,
        capacity: Option<u32>,
    ) -> Result<DataPath> {
        sys::ensure_bpffs(pin_dir)?;
        let cpus = sys::possible_cpus()?;
        let flows = flow_table_size.max(MIN_FLOW_TABLE);
        let pinned = pin_dir.join(names::FLOWS);
        if let Ok(old) = MapData::from_pin(&pinned) {
            let size = old.info().map(|i| i.max_entries()).unwrap_or(0);
            if size != flows {
                std::fs::remove_file(&pinned).map_err(BpfError::io(&pinned, "unpinning"))?;
            }
        }
        let mut loader = EbpfLoader::new();
        loader
            .default_map_pin_directory(pin_dir)
            .map_max_entries(names::CPUS, cpus)
            .map_max_entries(names::FLOWS, flows);
        if let Some(n) = capacity {
            for name in [names::HOSTS, names::FAST, names::NETS] {
                loader.map_max_entries(name, n);
            }
        }
        let mut ebpf = loader.load(object).map_err(|e| BpfError::Load {
            pin_dir: pin_dir.to_path_buf(),
            source: Box::new(e),
        })?;
        {
            let p: &mut Xdp = program_mut(&mut ebpf, programs::XDP)?;
            p.load()
                .map_err(BpfError::program(programs::XDP, "loading (verifier)"))?;
        }
        {
            let p: &mut SchedClassifier = program_mut(&mut ebpf, programs::TC)?;
            p.load()
                .map_err(BpfError::program(programs::TC, "loading (verifier)"))?;
        }
        Ok(DataPath {
            ebpf,
            pin_dir: pin_dir.to_path_buf(),
        })
    }

    /// The pin directory.
    pub fn pin_dir(&self) -> &Path {
        &self.pin_dir
    }

    /// The XDP program.
    pub fn xdp(&self) -> &Xdp {
        self.ebpf
            .program(programs::XDP)
            .and_then(|p| p.try_into().ok())
            .expect("loaded in DataPath::load")
    }

    /// The XDP program, to attach.
    pub fn xdp_mut(&mut self) -> &mut Xdp {
        program_mut(&mut self.ebpf, programs::XDP).expect("loaded in DataPath::load")
    }

    /// The tc program.
    pub fn tc(&self) -> &SchedClassifier {
        self.ebpf
            .program(programs::TC)
            .and_then(|p| p.try_into().ok())
            .expect("loaded in DataPath::load")
    }

    /// The tc program, to attach.
    pub fn tc_mut(&mut self) -> &mut SchedClassifier {
        program_mut(&mut self.ebpf, programs::TC).expect("loaded in DataPath::load")
    }

    /// Handles on the pinned maps.
    pub fn maps(&self) -> Result<Maps> {
        Maps::open(&self.pin_dir)
    }
}

fn program_mut<'a, T>(ebpf: &'a mut Ebpf, name: &'static str) -> Result<&'a mut T>
where
    &'a mut T: TryFrom<&'a mut aya::programs::Program, Error = aya::programs::ProgramError>,
{
    let p = ebpf.program_mut(name).ok_or_else(|| BpfError::Pinned {
        path: PathBuf::from(name),
        message: "the object has no such program".into(),
    })?;
    p.try_into()
        .map_err(BpfError::program(name, "checking its type"))
}
