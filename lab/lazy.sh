#!/bin/sh
# Lazy leaves vs all leaves (cake by default), in one lab guest session:
#   cargo build --release -p lqos-cli --example lab_traffic
#   cargo xtask lab run --nics --mem 6144 --exe target/release/examples/lab_traffic -- sh lab/lazy.sh 2000 "5 20" ["cake diffserv4"]
# (--mem: about 1.1 MiB x cake leaves + 1.5 GiB; 2,000 circuits on two NICs
# are about 4,000 leaves.)
#
# On N generated circuits (default 2000) with `--sqm "cake diffserv4"` on
# ens19/ens20, measures:
#  (a) all leaves: `lqos apply --full` on empty roots: wall time (from
#      /proc/uptime) and the load time lqos reports; kernel memory (MemFree
#      before/after, caches dropped, as lab/memory.sh);
#  (b) lazy: `lqos watch --lazy-leaves` start on empty roots: its "applied"
#      log line (ms: start to kernel done, load_ms: the load) and kernel
#      memory with no traffic;
#  (c) traffic (lab_traffic) into every 100/P-th circuit for each P in
#      PERCENTS (default "5 20", each a superset of the one before) on both
#      NICs: memory once the daemon has given those circuits their leaves;
#      then no traffic: memory after they went idle and lost them again.
#      PERCENTS "" skips the traffic (e.g. for the load times with pfifo:
#      sh lab/lazy.sh 2000 "" pfifo).
set -eu
n=${1:-2000}
percents=${2-"5 20"}
sqm=${3:-cake diffserv4}
poll=2
idle=16
work=/tmp/lqos-lazy
rm -rf "$work" && mkdir -p "$work"
lqos gen --circuits "$n" --out "$work/net" >/dev/null
cd "$work/net"

free_kb() { awk '/^MemFree:/ {print $2}' /proc/meminfo; }
avail_kb() { awk '/^MemAvailable:/ {print $2}' /proc/meminfo; }
uptime_cs() { awk '{ split($1, a, "."); print a[1] * 100 + a[2] }' /proc/uptime; }
settle() { sync; echo 3 >/proc/sys/vm/drop_caches; sleep 3; }
clear_roots() {
    tc qdisc del dev ens19 root 2>/dev/null || true
    tc qdisc del dev ens20 root 2>/dev/null || true
}
# Leaves of the SQM's kind (and fq_codel, for circuits of 1 Gbit and more) on both NICs.
kind=${sqm%% *}
leaves() {
    echo $(( $(tc qdisc show dev ens19 | grep -c -E "^qdisc ($kind|fq_codel) ") +
             $(tc qdisc show dev ens20 | grep -c -E "^qdisc ($kind|fq_codel) ") ))
}
mib() { echo "$(( $1 / 1024 ))"; }
# Anonymous memory of running processes (the daemon, the sender): MemFree
# counts it too, so it is taken out of the kernel's share.
anon_kb() {
    s=0
    for p in "$@"; do
        s=$((s + $(awk '/^RssAnon:/ {print $2}' /proc/$p/status 2>/dev/null || echo 0)))
    done
    echo $s
}
row() { echo "| $1 | $2 | $3 | $4 |"; }

echo "lazy.sh: $n circuits, sqm $sqm, $(nproc) vCPUs, MemTotal $(awk '/^MemTotal:/ {print $2}' /proc/meminfo) kB, MemAvailable $(avail_kb) kB"

# (a) All leaves.
clear_roots; settle
f0=$(free_kb); t0=$(uptime_cs)
lqos apply --full --sqm "$sqm" --state-dir "$work/state-all" >"$work/apply.log" 2>&1 ||
    { cat "$work/apply.log"; exit 1; }
t1=$(uptime_cs)
settle
f1=$(free_kb)
all_leaves=$(leaves)
all_used=$((f0 - f1))
echo "(a) lqos apply --full: wall $(( (t1 - t0) / 100 )).$(printf %02d $(( (t1 - t0) % 100 ))) s; $all_leaves leaves; kernel memory $(mib $all_used) MiB"
grep '^total:' "$work/apply.log"
clear_roots; settle

# (b) Lazy, no traffic.
f0=$(free_kb)
lqos watch --lazy-leaves --poll "$poll" --idle "$idle" --verify-every 0 --sqm "$sqm" \
    --log-format json --state-dir "$work/state-lazy" 2>"$work/watch.log" &
watch_pid=$!
i=0
start_line() { grep '"message":"applied"' "$work/watch.log" | grep '"trigger":"start"' | head -n 1; }
until [ -n "$(start_line)" ]; do
    i=$((i + 1))
    if [ $i -gt 900 ] || ! kill -0 $watch_pid 2>/dev/null; then
        echo "lazy.sh: the daemon did not apply its start:"; cat "$work/watch.log"; exit 1
    fi
    sleep 1
done
# A number field of a JSON log line: field LINE NAME.
field() { echo "$1" | sed -n "s/.*\"$2\":\"\{0,1\}\([0-9.]*\).*/\1/p"; }
sl=$(start_line)
settle
f1=$(free_kb)
idle_anon=$(anon_kb $watch_pid)
idle_used=$((f0 - f1 - idle_anon))
# The lazy tree keeps the leaves of the queues' default classes (N:2).
base=$(leaves)
echo "(b) lqos watch --lazy-leaves start: ms=$(field "$sl" ms) (load_ms=$(field "$sl" load_ms), plan_ms=$(field "$sl" plan_ms)), added=$(field "$sl" added) ops; $(leaves) leaves; kernel memory $(mib $idle_used) MiB"

# (c) Traffic: addresses, neighbours and one queue-mapping filter per queue.
ip addr add 10.77.0.1/24 dev ens19
ip addr add 10.78.0.1/24 dev ens20
ip neigh add 10.77.0.99 lladdr 02:00:00:00:00:99 dev ens19 nud permanent
ip neigh add 10.78.0.99 lladdr 02:00:00:00:00:98 dev ens20 nud permanent
for d in ens19 ens20; do
    tc qdisc add dev $d clsact
    q=0
    while [ $q -lt 16 ]; do
        tc filter add dev $d egress pref 100 protocol ip flower ip_proto udp \
            dst_port $((10001 + q)) action skbedit queue_mapping $q
        q=$((q + 1))
    done
done
echo "| state | circuit leaves (+ $base default-class leaves) | kernel memory (MiB) | per circuit leaf over idle (KiB) |"
echo "|---|---:|---:|---:|"
row "all leaves (apply --full)" "$((all_leaves - base))" "$(mib $all_used)" "$(( (all_used - idle_used) / (all_leaves - base) ))"
row "lazy, no traffic" 0 "$(mib $idle_used)" -
sender=""
for p in $percents; do
    every=$((100 / p))
    [ -n "$sender" ] && kill $sender 2>/dev/null && wait $sender 2>/dev/null || true
    lab_traffic "$work/state-lazy" "$every" 3600 ens19=10.77.0.99 ens20=10.78.0.99 >"$work/traffic.log" 2>&1 &
    sender=$!
    sleep 1
    want=$(awk '/^lab_traffic:/ {s += $2} END {print s}' "$work/traffic.log")
    i=0
    until [ "$(leaves)" -ge $((base + want)) ]; do
        i=$((i + 1))
        if [ $i -gt 300 ]; then
            echo "lazy.sh: $p%: $(( $(leaves) - base )) of $want circuit leaves after 5 min"; cat "$work/traffic.log"; tail -n 20 "$work/watch.log"; exit 1
        fi
        sleep 1
    done
    settle
    f1=$(free_kb)
    anon=$(anon_kb $watch_pid $sender)
    used=$((f0 - f1 - anon))
    got=$(leaves)
    row "lazy, traffic into $p% of circuits" "$((got - base))" "$(mib $used)" "$(( (used - idle_used) / (got - base) ))"
done
kill $sender 2>/dev/null || true
wait $sender 2>/dev/null || true
i=0
until [ "$(leaves)" -le "$base" ]; do
    i=$((i + 1))
    if [ $i -gt 300 ]; then
        echo "lazy.sh: $(( $(leaves) - base )) circuit leaves still there 5 min after the traffic stopped"; tail -n 20 "$work/watch.log"; exit 1
    fi
    sleep 1
done
settle
f1=$(free_kb)
row "lazy, idle again" "$(( $(leaves) - base ))" "$(mib $((f0 - f1 - $(anon_kb $watch_pid))))" -
echo "(memory of the lazy rows without the daemon's (and sender's) own anonymous memory: $(mib $idle_anon) MiB for the daemon at idle; HTB classes: $(tc class show dev ens19 | wc -l) + $(tc class show dev ens20 | wc -l))"
echo "daemon's leaf events:"
grep '"message":"leaves"' "$work/watch.log" | while read -r l; do
    echo "  added=$(field "$l" added) removed=$(field "$l" removed) active=$(field "$l" active) ms=$(field "$l" ms)"
done
kill $watch_pid
wait $watch_pid 2>/dev/null || true
for d in ens19 ens20; do tc qdisc del dev $d clsact 2>/dev/null || true; done
clear_roots
