#!/bin/sh
# Kernel memory per leaf qdisc kind, measured in the lab guest:
#   cargo xtask lab run --nics --mem 4096 -- sh lab/memory.sh 1000
# For each leaf kind, load a generated network of N circuits (default 1000)
# on ens19/ens20 with `lqos apply --full --sqm KIND`, and take MemFree
# before and after (caches dropped, RCU given time to free the previous
# tree). A tree without leaves (`--sqm none`) is the baseline: a leaf's cost
# is (used(KIND) - used(none)) / leaves of that kind.
set -eu
n=${1:-1000}
work=/tmp/lqos-memory
rm -rf "$work" && mkdir -p "$work"
lqos gen --circuits "$n" --out "$work/net" >/dev/null
cd "$work/net"
free_kb() { awk '/^MemFree:/ {print $2}' /proc/meminfo; }
slab_kb() { awk '/^Slab:/ {print $2}' /proc/meminfo; }
settle() { sync; echo 3 >/proc/sys/vm/drop_caches; sleep 3; }
clear_roots() {
    tc qdisc del dev ens19 root 2>/dev/null || true
    tc qdisc del dev ens20 root 2>/dev/null || true
}
base=""
echo "| leaf | leaves | kernel memory used (MiB) | per leaf (KiB) | slab (MiB) |"
echo "|---|---:|---:|---:|---:|"
for sqm in none pfifo fq_codel "cake diffserv4"; do
    clear_roots; settle
    f0=$(free_kb); s0=$(slab_kb)
    lqos apply --full --sqm "$sqm" --state-dir "$work/state" >"$work/apply.log" 2>&1 ||
        { cat "$work/apply.log"; exit 1; }
    settle
    f1=$(free_kb); s1=$(slab_kb)
    kind=${sqm%% *}
    leaves=0
    if [ "$kind" != none ]; then
        leaves=$(( $(tc qdisc show dev ens19 | grep -c "^qdisc $kind ") + $(tc qdisc show dev ens20 | grep -c "^qdisc $kind ") ))
    fi
    used=$((f0 - f1))
    if [ -z "$base" ]; then base=$used; fi
    per="-"
    if [ "$leaves" -gt 0 ]; then per=$(( (used - base) / leaves )); fi
    echo "| $sqm | $leaves | $((used / 1024)) | $per | $(( (s1 - s0) / 1024 )) |"
done
clear_roots
