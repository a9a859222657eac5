//! Fuzz the network.json parser and validation: no input may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    lqos_model::fuzzing::fuzz_network_json(data);
});
