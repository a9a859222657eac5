//! Fuzz the sqm grammar (default_sqm, --sqm, the sqm column): parse, render, parse again: no input may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    lqos_tc::fuzzing::fuzz_sqm(data);
});
