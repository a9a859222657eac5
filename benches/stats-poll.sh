#!/bin/bash
# The statistics poll against a loaded tree, and the daemon's memory with
# metrics on, in a scratch namespace (docs/benchmarks.md, "Statistics"):
#   cargo build --release -p lqos-cli --example stats_poll && cargo build --release -p lqos-cli
#   flock /work/measure.lock bash benches/stats-poll.sh 10000 pfifo
#   flock /work/measure.lock bash benches/stats-poll.sh 100000 none
# N circuits (default 10000) with leaf SQM (default pfifo; none: no leaves)
# on a veth pair ens19/ens20 with 16 TX queues: load with `lqos apply`,
# then examples/stats_poll (lqos's poll vs tc -s -j class/qdisc show of
# both interfaces, parsed; /metrics render), then `lqos watch --metrics`
# on the loaded tree: its memory after a few polls and scrapes, and the
# wall time of a scrape (PERF=FILE: a profile of the poll alone into
# FILE). The namespace (and its tree) is deleted at exit.
set -eu
n=${1:-10000}
sqm=${2:-pfifo}
runs=${RUNS:-7}
bin=${BIN:-$(cd "$(dirname "$0")/.." && pwd)/target/release}
ns=lqos-statsbench-$$
work=$(mktemp -d)
cleanup() {
    [ -n "${wpid:-}" ] && kill "$wpid" 2>/dev/null && wait "$wpid" 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
ip netns add "$ns"
ip netns exec "$ns" ip link add ens19 numtxqueues 16 type veth peer name ens20 numtxqueues 16
ip netns exec "$ns" ip link set ens19 up
ip netns exec "$ns" ip link set ens20 up
cd "$work"
"$bin/lqos" gen --circuits "$n" --out . >/dev/null
echo "loading $n circuits (--sqm $sqm)..."
t0=$(date +%s)
"$bin/lqos" apply --netns "$ns" --state-dir st --queues 16 --sqm "$sqm" | tail -n 1
echo "loaded in $(( $(date +%s) - t0 )) s"
RUNS=$runs "${STATS_POLL:-$bin/examples/stats_poll}" --netns "$ns" --state-dir st --runs "$runs"
if [ -n "${PERF:-}" ]; then
    # Where the poll's time goes (kernel dump vs decode vs map): a
    # cpu-clock profile of 20 polls alone, flat, into $PERF.
    perf record -q -e cpu-clock -g -o "$work/perf.data" -- \
        "${STATS_POLL:-$bin/examples/stats_poll}" --netns "$ns" --state-dir st --runs 20 --poll-only
    perf report -i "$work/perf.data" --stdio --no-children --sort sym 2>/dev/null \
        | grep -E '^ +[0-9.]+%' | head -40 >"$PERF"
    echo "profile of 20 polls: $PERF"
fi
port=$(( 20000 + $$ % 20000 ))
"$bin/lqos" watch --netns "$ns" --state-dir st --queues 16 --sqm "$sqm" --poll 5 \
    --verify-every 0 --metrics "127.0.0.1:$port" --log-format json 2>"$work/watch.log" &
wpid=$!
for _ in $(seq 1 600); do
    grep -q '"message":"applied"\|"message":"inputs unchanged' "$work/watch.log" 2>/dev/null && break
    sleep 1
done
sleep 12
for i in 1 2 3; do
    s=$(date +%s%N)
    bytes=$(python3 -c "import urllib.request as u; print(len(u.urlopen('http://127.0.0.1:$port/metrics').read()))")
    echo "scrape $i: $bytes bytes in $(( ($(date +%s%N) - s) / 1000000 )) ms (wall, with python's client)"
done
grep -E 'VmHWM|VmRSS' "/proc/$wpid/status" | sed 's/^/lqos watch --metrics: /'
