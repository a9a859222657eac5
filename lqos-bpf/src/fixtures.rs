//! Test-only BPF objects that other crates' tests attach (feature
//! `test-util`; not part of the API). Built from `bpf/test/*.bpf.c` by
//! `bpf/build.sh` and shipped in the package, so a packaged test finds
//! them without the workspace beside it.

/// `bpf/test/tcp_drop.bpf.o`: a `cls_bpf` program
/// (`lqos_test_tcp_drop`) that drops every Nth data-carrying TCP segment
/// to one IPv4 address (both set in its `lqos_test_drop` array), standing
/// in for a lossy path on kernels without netem.
pub const TCP_DROP: &[u8] = aya::include_bytes_aligned!("../bpf/test/tcp_drop.bpf.o");
