#!/bin/bash
# The statistics poll against a loaded tree, and the daemon's memory with
# metrics on, in a scratch namespace (docs/benchmarks.md, "Statistics"):
#   cargo build --release -p lqos-cli --example stats_poll && cargo build --release -p lqos-cli
#   flock /work/measure.lock bash benches/stats-poll.sh 10000 pfifo
#   SITES=64 RUNS=5 LATENCY=40 flock /work/measure.lock bash benches/stats-poll.sh 100000 none
# N circuits (default 10000) with leaf SQM (default pfifo; none: no leaves)
# on a veth pair ens19/ens20 with 16 TX queues: load with `lqos apply`,
# then examples/stats_poll (lqos's poll vs tc -s -j class/qdisc show of
# both interfaces, parsed; /metrics render), then `lqos watch --metrics`
# on the loaded tree: its memory after a few polls and scrapes, and the
# wall time of a scrape (PERF=FILE: a profile of the poll alone into
# FILE). LATENCY=EDITS then runs examples/watch_latency (its own daemon,
# after this one has stopped) on the same tree: EDITS edits by rename,
# then EDITS in place, 2 s apart (docs/benchmarks.md, "lqos watch"; build
# it with `--example watch_latency`). SITES=N: `lqos gen --sites N`.
# TCP=1: the poll also with every circuit's TCP statistics from lqos's
# eBPF data path (loaded into a private bpffs by stats_poll --tcp).
# The namespace (and its tree) is deleted at exit, timed.
set -euo pipefail
n=${1:-10000}
sqm=${2:-pfifo}
runs=${RUNS:-7}
bin=${BIN:-$(cd "$(dirname "$0")/.." && pwd)/target/release}
. "$(dirname "$0")/scratch-veth.sh"
cleanup() {
    [ -n "${wpid:-}" ] && kill "$wpid" 2>/dev/null && wait "$wpid" 2>/dev/null || true
    scratch_teardown
}
trap cleanup EXIT
scratch_up lqos-statsbench
"$bin/lqos" gen --circuits "$n" ${SITES:+--sites "$SITES"} --out . >/dev/null
echo "loading $n circuits (--sqm $sqm)..."
t0=$(date +%s)
"$bin/lqos" apply --netns "$ns" --state-dir st --queues 16 --sqm "$sqm" | tail -n 1
echo "loaded in $(( $(date +%s) - t0 )) s; load average $(cut -d' ' -f1-3 /proc/loadavg)"
RUNS=$runs "${STATS_POLL:-$bin/examples/stats_poll}" --netns "$ns" --state-dir st --runs "$runs" ${TCP:+--tcp}
if [ -n "${PERF:-}" ]; then
    # Where the poll's time goes (kernel dump vs decode vs map): a
    # cpu-clock profile of 20 polls alone, flat, into $PERF.
    perf record -q -e cpu-clock -g -o "$work/perf.data" -- \
        "${STATS_POLL:-$bin/examples/stats_poll}" --netns "$ns" --state-dir st --runs 20 --poll-only
    perf report -i "$work/perf.data" --stdio --no-children --sort sym 2>/dev/null \
        | grep -E '^ +[0-9.]+%' | head -40 >"$PERF" || true
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
    curl -s -o /dev/null -w "scrape $i: %{size_download} bytes, first byte after %{time_starttransfer} s, all in %{time_total} s (curl)\n" \
        "http://127.0.0.1:$port/metrics"
done
curl -s "http://127.0.0.1:$port/metrics" | grep '^lqos_stats_poll' | sed 's/^/the daemon: /' || true
grep -E 'VmHWM|VmRSS' "/proc/$wpid/status" | sed 's/^/lqos watch --metrics: /'
grep -o '"message":"applied"[^}]*"trigger":"start"[^}]*\|"message":"inputs unchanged[^}]*' "$work/watch.log" | head -n 1 | sed 's/^/its start: /' || true
echo "load average $(cut -d' ' -f1-3 /proc/loadavg)"
if [ -n "${LATENCY:-}" ]; then
    kill "$wpid" && wait "$wpid" 2>/dev/null || true
    wpid=
    for how in "" inplace; do
        echo "watch_latency $LATENCY edits ${how:-by rename}:"
        LQOS_BIN="$bin/lqos" "${WATCH_LATENCY:-$bin/examples/watch_latency}" 0 "$sqm" "$LATENCY" $how \
            --netns "$ns" --dir "$work" --state-dir st --gap 2000
    done
    echo "load average $(cut -d' ' -f1-3 /proc/loadavg)"
fi
