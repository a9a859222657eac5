#!/bin/sh
# Cold start and teardown of generated networks on the lab's virtio NICs
# (ens19/ens20, 16 TX queues), in one guest boot:
#   cargo xtask lab run --nics --mem 8192 --kernel stock|unpatched|patched -- \
#       sh lab/kernel/cold-start.sh 10000,30000 none,pfifo lqos,tc [BOX]
# (lists are comma-separated: `lab run` joins its words with spaces).
# BOX (seconds, default 0: none) stops a load that takes longer with
# SIGKILL, so the tree stays as far as it got: the row then gives the
# classes loaded by then and the rate, no teardown (the guest's exit
# frees it), and nothing after it runs; wall times of a boxed run are to
# the second.
# For each size N (`lqos gen --circuits N --sites 64`), leaf kind (--sqm)
# and method, from the NICs' default qdiscs:
#  - lqos: `lqos apply --full --queues 16 --sqm SQM` (netlink, both
#    interfaces; a fresh state directory each time);
#  - tc:   `tc -b linux_tc.txt`, the combined file `lqos plan` writes in
#    LibreQoS's line order (LibreQoS's way of loading);
# then the teardown: `tc qdisc del dev ens19 root`, then ens20.
# Times are wall clock from /proc/uptime (10 ms); user/sys of the loading
# process from the shell's `times` (children's CPU time) before and after. pfifo is skipped above 30,000 circuits (a
# leaf per circuit does not fit the 65,535 qdisc handles of a device).
# Prints one table row per load: kernel, circuits, sqm, method, HTB
# classes loaded, load wall / user / sys, teardown ens19 / ens20.
set -eu
sizes=${1:-10000}
sqms=${2:-none}
methods=${3:-lqos,tc}
box=${4:-0}
work=/tmp/cold-start
rm -rf "$work" && mkdir -p "$work"

now_cs() { awk '{ split($1, a, "."); print a[1] * 100 + a[2] }' /proc/uptime; }
secs() { echo "$(($1 / 100)).$(printf %02d $(($1 % 100)))"; }
clear_roots() {
    tc qdisc del dev ens19 root 2>/dev/null || true
    tc qdisc del dev ens20 root 2>/dev/null || true
}
classes() { tc class show dev "$1" | grep -c '^class htb' || true; }
# The children's user and system seconds in a `times` output file (its
# second line: "0m1.230000s 0m4.560000s"). `times` itself must run in
# this shell, not in a command substitution's subshell.
child_cpu() {
    awk 'NR == 2 {
        split($1, u, "m"); split($2, s, "m")
        printf "%.2f %.2f", u[1] * 60 + u[2], s[1] * 60 + s[2] }' "$1"
}

kernel=$(uname -r)
echo "cold-start: $kernel, $(nproc) vCPUs, $(awk '/^MemTotal:/ { print $2 }' /proc/meminfo) kB"
echo "| kernel | circuits | sqm | method | classes | load wall (s) | user / sys (s) | teardown ens19 / ens20 (s) |"
echo "|---|---:|---|---|---:|---:|---:|---:|"
for n in $(echo "$sizes" | tr , " "); do
    net=$work/net-$n
    lqos gen --circuits "$n" --sites 64 --out "$net" >/dev/null
    cd "$net"
    for sqm in $(echo "$sqms" | tr , " "); do
        if [ "$sqm" = pfifo ] && [ "$n" -gt 30000 ]; then
            continue
        fi
        lqos plan --queues 16 --sqm "$sqm" --out "$work/plan" >/dev/null
        for method in $(echo "$methods" | tr , " "); do
            clear_roots
            sync
            echo 3 >/proc/sys/vm/drop_caches
            rm -rf "$work/state"
            times >"$work/times0"
            t0=$(now_cs)
            case $method in
            lqos)
                lqos apply --full --queues 16 --sqm "$sqm" \
                    --state-dir "$work/state" >"$work/load.log" 2>&1 &
                ;;
            tc)
                tc -b "$work/plan/linux_tc.txt" >"$work/load.log" 2>&1 &
                ;;
            *)
                echo "cold-start: unknown method $method"
                exit 2
                ;;
            esac
            pid=$!
            stopped=0
            if [ "$box" -gt 0 ]; then
                while kill -0 "$pid" 2>/dev/null; do
                    if [ $(($(now_cs) - t0)) -ge $((box * 100)) ]; then
                        kill -KILL "$pid"
                        stopped=1
                        break
                    fi
                    sleep 1
                done
            fi
            rc=0
            wait "$pid" || rc=$?
            if [ "$stopped" = 0 ] && [ "$rc" != 0 ]; then
                cat "$work/load.log"
                exit 1
            fi
            t1=$(now_cs)
            times >"$work/times1"
            cpu0=$(child_cpu "$work/times0")
            cpu1=$(child_cpu "$work/times1")
            c=$(($(classes ens19) + $(classes ens20)))
            cpu=$(echo "$cpu0 $cpu1" | awk '{ printf "%.2f / %.2f", $3 - $1, $4 - $2 }')
            if [ "$stopped" = 1 ]; then
                rate=$(awk -v c="$c" -v t=$((t1 - t0)) 'BEGIN { printf "%.0f", c * 6000 / t }')
                echo "| $kernel | $n | $sqm | $method | $c | stopped at $(secs $((t1 - t0))) ($rate classes/min) | $cpu | - |"
                exit 0
            fi
            tc qdisc del dev ens19 root
            t2=$(now_cs)
            tc qdisc del dev ens20 root
            t3=$(now_cs)
            echo "| $kernel | $n | $sqm | $method | $c | $(secs $((t1 - t0))) | $cpu | $(secs $((t2 - t1))) / $(secs $((t3 - t2))) |"
        done
    done
done
