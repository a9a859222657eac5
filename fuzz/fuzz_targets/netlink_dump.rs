//! Fuzz the netlink decoders of kernel replies (qdisc, class, statistics and filter dumps, ACKs): no input may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    lqos_apply::fuzzing::fuzz_netlink_dump(data);
});
