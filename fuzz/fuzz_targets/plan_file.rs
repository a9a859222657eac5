//! Fuzz the plan.json reader: no input may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    lqos_apply::fuzzing::fuzz_plan_file(data);
});
