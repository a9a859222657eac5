//! Fuzz the netlink request decoder: decode, encode, decode again: no input may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    lqos_apply::fuzzing::fuzz_netlink_request(data);
});
