//! Fuzz the lqos.conf parser: no input may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    lqos_model::fuzzing::fuzz_config(data);
});
