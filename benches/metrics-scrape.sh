#!/bin/bash
# `/metrics` of `lqos watch` beside idle connections, and the size of a
# scrape with and without gzip (docs/benchmarks.md, "/metrics beside idle
# connections"):
#   cargo build --release -p lqos-cli
#   bash benches/metrics-scrape.sh [N circuits, default 10000] [SCRAPES, default 20]
# BIN_OLD=DIR (a target/release directory of another build) runs that
# build's daemon on the same tree too, OLD_SCRAPES scrapes per count
# (default 3), after this build's.
# N circuits (`lqos gen`, pfifo leaves, veth ens19/ens20 with 16 TX
# queues in a scratch namespace) are loaded with `lqos apply`, then `lqos
# watch --metrics 127.0.0.1:PORT --poll 5` runs on the loaded tree. For 0,
# 10 and 100 idle connections (opened with bash's /dev/tcp before each
# scrape, every other one with half a request line, closed after it),
# SCRAPES scrapes with curl, each given 12 s (Prometheus's default scrape
# timeout is 10 s): the median, min and max of curl's time_total and the
# count of scrapes that failed. Then one scrape in each format, plain and
# with `Accept-Encoding: gzip`: bytes on the wire, the answer's size, and
# the median time of 5. The namespace is deleted at exit, timed.
set -euo pipefail
n=${1:-10000}
scrapes=${2:-20}
bin=${BIN:-$(cd "$(dirname "$0")/.." && pwd)/target/release}
old=${BIN_OLD:+$(cd "$BIN_OLD" && pwd)}
. "$(dirname "$0")/scratch-veth.sh"
cleanup() {
    [ -n "${wpid:-}" ] && kill "$wpid" 2>/dev/null && wait "$wpid" 2>/dev/null || true
    scratch_teardown
}
trap cleanup EXIT
scratch_up lqos-scrape
"$bin/lqos" gen --circuits "$n" --out . >/dev/null
t0=$(date +%s)
"$bin/lqos" apply --netns "$ns" --state-dir st --queues 16 --sqm pfifo | tail -n 1
echo "loaded $n circuits in $(( $(date +%s) - t0 )) s"
port=$(( 20000 + $$ % 20000 ))
url="http://127.0.0.1:$port/metrics"

# Starts BIN's daemon on the loaded tree and waits for its first poll.
start_daemon() {
    "$1/lqos" watch --netns "$ns" --state-dir st --queues 16 --sqm pfifo --poll 5 \
        --verify-every 0 --metrics "127.0.0.1:$port" 2>"$work/watch.log" &
    wpid=$!
    for _ in $(seq 1 600); do
        curl -s -m 5 -o "$work/probe" "$url" 2>/dev/null || true
        grep -q '^lqos_circuit_info' "$work/probe" 2>/dev/null && return 0
        sleep 1
    done
    echo "no metrics after 600 s" >&2
    exit 1
}

stop_daemon() {
    kill "$wpid" && wait "$wpid" 2>/dev/null || true
    wpid=
}

# median min max of the numbers on stdin.
stats() {
    sort -g | awk '{ v[NR] = $1 } END { printf "median %.1f ms, min %.1f, max %.1f", v[int((NR + 1) / 2)] * 1e3, v[1] * 1e3, v[NR] * 1e3 }'
}

# idle_scrapes COUNT SCRAPES: SCRAPES scrapes, each beside COUNT idle connections.
idle_scrapes() {
    local count=$1 k fd failed=0 times=()
    for k in $(seq 1 "$2"); do
        local fds=()
        for i in $(seq 1 "$count"); do
            exec {fd}<>"/dev/tcp/127.0.0.1/$port"
            [ $(( i % 2 )) = 0 ] && printf 'GET /metrics HTTP/1.1\r\n' >&"$fd"
            fds+=("$fd")
        done
        if t=$(curl -s -o /dev/null -m 12 -w '%{time_total}' "$url"); then
            times+=("$t")
        else
            failed=$(( failed + 1 ))
        fi
        for fd in "${fds[@]}"; do
            exec {fd}>&-
        done
    done
    if [ "${#times[@]}" -gt 0 ]; then
        printf '%s\n' "${times[@]}" | stats
    else
        printf 'no answer'
    fi
    echo "; $failed of $2 failed (no whole answer within 12 s)"
}

latency() {
    for count in 0 10 100; do
        echo "  $count idle connections: $(idle_scrapes "$count" "$1")"
    done
}

sizes() {
    local om='Accept: application/openmetrics-text;version=1.0.0'
    for what in "text" "text gzip" "openmetrics" "openmetrics gzip"; do
        local args=()
        case $what in openmetrics*) args+=(-H "$om") ;; esac
        case $what in *gzip) args+=(-H 'Accept-Encoding: gzip') ;; esac
        wire=$(curl -s -o "$work/body" -w '%{size_download}' "${args[@]}" "$url")
        case $what in
            *gzip) body=$(gzip -dc "$work/body" | wc -c) ;;
            *) body=$(wc -c <"$work/body") ;;
        esac
        times=$(for _ in 1 2 3 4 5; do curl -s -o /dev/null -w '%{time_total}\n' "${args[@]}" "$url"; done | stats)
        echo "  $what: $wire bytes on the wire, $body bytes of text; $times"
    done
}

echo "== this build ($bin), load average $(cut -d' ' -f1-3 /proc/loadavg)"
start_daemon "$bin"
echo "scrape time (curl time_total), $scrapes scrapes per count:"
latency "$scrapes"
echo "scrape sizes and times:"
sizes
grep -E 'VmHWM|VmRSS' "/proc/$wpid/status" | sed 's/^/  lqos watch --metrics: /'
stop_daemon
if [ -n "$old" ]; then
    echo "== the other build ($old), load average $(cut -d' ' -f1-3 /proc/loadavg)"
    start_daemon "$old"
    echo "scrape time, ${OLD_SCRAPES:-3} scrapes per count:"
    latency "${OLD_SCRAPES:-3}"
    stop_daemon
fi
echo "load average $(cut -d' ' -f1-3 /proc/loadavg)"
