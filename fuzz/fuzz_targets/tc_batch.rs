//! Fuzz the tc -b batch parser: parse, render, parse again: no input may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    lqos_tc::fuzzing::fuzz_batch(data);
});
