//! Entry points shared by the cargo-fuzz targets (`fuzz/`) and the
//! stable-toolchain corpus replay (`tests/fuzz_corpus.rs`): any bytes in,
//! no panic out.
//!
//! The saved-state and plan-file readers take a path, as lqos uses them:
//! each input is written to a file in a private scratch directory first
//! (one per process, reused).

use std::path::PathBuf;
use std::sync::OnceLock;

use crate::state::{NetnsState, StateFile};

/// Kernel replies (a `recv` buffer of netlink messages) through every dump
/// decoder: qdiscs, HTB classes, class statistics, flower filters, ACKs.
pub fn fuzz_netlink_dump(data: &[u8]) {
    crate::netlink::fuzzing::dump(data);
}

/// One tc request through [`decode_request`](crate::netlink::decode_request):
/// what decodes, encodes and decodes to the same op.
pub fn fuzz_netlink_request(data: &[u8]) {
    crate::netlink::fuzzing::request(data);
}

/// A private scratch directory for the file readers' inputs.
fn scratch() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        tempfile::Builder::new()
            .prefix("lqos-fuzz-")
            .tempdir()
            .expect("a scratch directory")
            .keep()
    })
}

/// The saved state (`last-plan.json`, formats 1 and 2), read as the next
/// start reads it (a format-2 record is re-planned).
pub fn fuzz_saved_state(data: &[u8]) {
    let state = NetnsState::new(scratch(), None);
    std::fs::write(state.file(StateFile::LastPlan), data).expect("writing the input");
    match crate::session::load_saved(&state) {
        Ok(Some((saved, net))) => {
            let _ = saved.plan.interfaces.len();
            let _ = net.map(|n| n.circuits().len());
        }
        Ok(None) => {}
        Err(e) => {
            let _ = e.to_string();
        }
    }
}

/// A `plan.json` (a compact record, or the whole-plan JSON of earlier
/// versions), read as `lqos apply --plan` reads it.
pub fn fuzz_plan_file(data: &[u8]) {
    let path = scratch().join("plan.json");
    std::fs::write(&path, data).expect("writing the input");
    match crate::inputs::read_plan_record(&path) {
        Ok((plan, _)) => {
            let _ = plan.interfaces.len();
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
}
