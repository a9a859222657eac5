#!/bin/sh
# The memory preflight in the lab: a cake tree a quarter larger than the
# guest's memory can hold is refused by `lqos apply`, `lqos bench` and
# `lqos watch`, nothing changes, and the guest stays up:
#   cargo xtask lab run --nics --mem 2048 -- sh lab/memory-refusal.sh
set -u
work=/tmp/lqos-refusal
rm -rf "$work" && mkdir -p "$work"
avail=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)
# Two cake leaves per circuit, 1,064 KiB each; a quarter more than fits.
n=$(( avail / (2 * 1064) * 5 / 4 ))
echo "memory-refusal.sh: MemAvailable $((avail / 1024)) MiB, $n circuits of cake diffserv4"
lqos gen --circuits "$n" --out "$work/net" >/dev/null
cd "$work/net"
lqos apply --sqm "cake diffserv4" --state-dir "$work/state"
echo "lqos apply: exit $?"
lqos bench --interfaces ens19,ens20 --sqm "cake diffserv4" --circuits "$n" --methods 5 --runs 1
echo "lqos bench: exit $?"
timeout 30 lqos watch --sqm "cake diffserv4" --state-dir "$work/state" --verify-every 0 --retry 60 2>"$work/watch.log"
echo "lqos watch: exit $? (killed by timeout after 30 s: the daemon keeps running and retries)"
grep -m 1 "not enough memory" "$work/watch.log"
for d in ens19 ens20; do echo "$d: $(tc qdisc show dev $d | grep -c -E '^qdisc (htb|cake) ') htb/cake qdiscs"; done
echo "MemAvailable after: $(( $(awk '/^MemAvailable:/ {print $2}' /proc/meminfo) / 1024 )) MiB"
