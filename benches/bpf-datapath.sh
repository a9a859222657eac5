#!/usr/bin/env bash
# The eBPF data path's micro-benchmarks (lqos-bpf/examples/bpf_bench.rs),
# run as root: ns per packet of both programs (BPF_PROG_TEST_RUN) at
# 1,000 / 100,000 / 1,000,000 addresses, the maps' kernel memory, a cold
# load of 100,000 generated circuits and one edit. With clang installed
# (apt-get install clang llvm libbpf-dev) it also runs a variant whose
# exact-match and fast prefix maps are allocated on use
# (BPF_F_NO_PREALLOC) instead of preallocated, for the A/B in the same
# run.
#
# Then the forwarding rate through a shaper namespace with no classifier,
# with lqos's tc program and with tc + XDP steering (examples/bpf_forward.rs;
# FORWARD=0 skips it).
#
#   benches/bpf-datapath.sh                 all sizes, 10^6 repeats
#   SIZES=1000,100000 REPEAT=200000 benches/bpf-datapath.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SIZES="${SIZES:-1000,100000,1000000}"
REPEAT="${REPEAT:-1000000}"
CIRCUITS="${CIRCUITS:-100000}"
cargo build --release -q -p lqos-bpf --example bpf_bench --example bpf_forward
bin=target/release/examples/bpf_bench
echo "# $(date -u +%FT%TZ) $(uname -r) $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "## committed object (exact-match and fast prefix maps preallocated)"
"$bin" --sizes "$SIZES" --repeat "$REPEAT" --circuits "$CIRCUITS"
if command -v clang >/dev/null && [ -e /usr/include/bpf/bpf_helpers.h ]; then
    variant_dir="$(mktemp -d)"
    trap 'rm -rf "$variant_dir"' EXIT
    LQOS_BPF_DEFINES=-DLQOS_MAPS_ON_USE lqos-bpf/bpf/build.sh "$variant_dir" >/dev/null
    variant="$variant_dir/lqos.bpf.o"
    echo
    echo "## variant: exact-match and fast prefix maps allocated on use"
    "$bin" --sizes "$SIZES" --repeat "$REPEAT" --circuits "$CIRCUITS" --object "$variant"
else
    echo "(no clang: the allocated-on-use variant is skipped)"
fi
if [ "${FORWARD:-1}" = 1 ]; then
    echo
    echo "## forwarding rate"
    target/release/examples/bpf_forward --seconds "${SECONDS_PER_SAMPLE:-3}" --rounds "${ROUNDS:-2}"
fi
