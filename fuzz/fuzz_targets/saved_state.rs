//! Fuzz the saved state reader (formats 1 and 2): no input may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    lqos_apply::fuzzing::fuzz_saved_state(data);
});
