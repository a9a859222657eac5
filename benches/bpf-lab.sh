#!/usr/bin/env bash
# lqos's eBPF classifier against the kernel-native one (clsact + flower +
# skbedit) in the stock-kernel lab (docs/lab.md: the host's kernel has no
# flower), one guest, one run, so the ratios hold even though TCG makes
# every absolute number several times the host's:
#
# - lqos-apply/examples/classifier_load.rs: a generated network of
#   CIRCUITS circuits, its addresses loaded cold into the eBPF maps and as
#   flower filters (one per address per interface, through lqos's netlink
#   loader), then one edit (an address moved to another circuit and back)
#   EDITS times each way;
# - lqos-bpf/examples/bpf_forward.rs: the forwarding rate through a
#   shaper namespace on veth with no classifier, lqos's tc program, tc +
#   XDP (native, then generic) steering, and flower; per TX queue the
#   packets each CPU's tc program handled.
#
#   benches/bpf-lab.sh                      # CIRCUITS=100000 EDITS=200 MEM=4096 CPUS=2
set -euo pipefail
cd "$(dirname "$0")/.."
CIRCUITS="${CIRCUITS:-100000}"
EDITS="${EDITS:-200}"
cargo build --release -q -p lqos-apply --example classifier_load
cargo build --release -q -p lqos-bpf --example bpf_forward
echo "# $(date -u +%FT%TZ) host $(uname -r), $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); load $(cut -d' ' -f1-3 /proc/loadavg)"
cargo xtask lab run --mem "${MEM:-4096}" --cpus "${CPUS:-2}" --timeout "${TIMEOUT:-3000}" \
    --exe target/release/examples/classifier_load \
    --exe target/release/examples/bpf_forward \
    -- "uname -r; nproc; classifier_load --circuits $CIRCUITS --edits $EDITS; bpf_forward --seconds ${SECONDS_PER_SAMPLE:-3} --rounds ${ROUNDS:-1}"
