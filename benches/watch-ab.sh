#!/bin/bash
# The edit latency of two builds of lqos on one loaded tree, alternating
# (docs/benchmarks.md, "lqos watch"): a difference between builds smaller
# than the machine's drift between runs shows only this way.
#   BIN_A=/path/to/a/target/release BIN_B=target/release \
#       bash benches/watch-ab.sh [N circuits, default 100000] [EDITS, 30] [ROUNDS, 2]
# Each BIN_* holds `lqos` and `examples/watch_latency` (`cargo build
# --release -p lqos-cli --bins --example watch_latency`). The tree (`lqos
# gen --circuits N --sites 64`, `--sqm none`, veth ens19/ens20 with 16 TX
# queues) is loaded once by B's lqos in a scratch namespace; then each
# round runs A's daemon, then B's, EDITS edits by rename 2 s apart (with
# INPLACE=1 then EDITS more rewritten in place, as LibreQoS's
# integrations write, timed from the writer's open); the namespace is
# deleted at exit, timed.
set -euo pipefail
n=${1:-100000}
edits=${2:-30}
rounds=${3:-2}
A=${BIN_A:?BIN_A: the target/release directory of the first build}
B=${BIN_B:?BIN_B: the target/release directory of the second build}
A=$(cd "$A" && pwd)
B=$(cd "$B" && pwd)
. "$(dirname "$0")/scratch-veth.sh"
trap scratch_teardown EXIT
scratch_up lqos-ab
"$B/lqos" gen --circuits "$n" --sites 64 --out . >/dev/null
t0=$(date +%s)
"$B/lqos" apply --netns "$ns" --state-dir st --queues 16 --sqm none | tail -n 1
echo "loaded in $(( $(date +%s) - t0 )) s"
for round in $(seq 1 "$rounds"); do
    for v in A B; do
        bin=$A
        [ "$v" = B ] && bin=$B
        echo "== round $round, $v, load average $(cut -d' ' -f1-3 /proc/loadavg)"
        for mode in "" ${INPLACE:+inplace}; do
            LQOS_BIN="$bin/lqos" "$bin/examples/watch_latency" 0 none "$edits" $mode --netns "$ns" \
                --dir "$work" --state-dir st --gap 2000 | grep -E "outside clock|daemon: first|read \+ find|writer"
        done
    done
done
