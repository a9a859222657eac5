//! Fuzz the incremental ShapedDevices.csv re-read against a full read (old file, NUL, new file): no input may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    lqos_model::fuzzing::fuzz_devices_edit(data);
});
