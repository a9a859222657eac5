#!/bin/sh
# Where the kernel's time goes during a cold start and a teardown, with
# perf (the host's /usr/bin/perf packed into the guest):
#   cargo xtask lab run --nics --mem 8192 --kernel stock|patched \
#       --exe /usr/bin/perf -- sh lab/kernel/profile.sh 10000 none lqos
# Records all CPUs (software cpu-clock samples, TCG has no PMU; call
# graphs from frame pointers/ORC) while `lqos apply --full` (method lqos)
# or `tc -b linux_tc.txt` (method tc) loads N generated circuits, then
# while `tc qdisc del dev ens19 root` / ens20 tears them down; prints the
# symbols with the most samples of the loading process, by self time and
# including callees. (cpu-clock samples land where interrupts come back
# on, so time with interrupts off shows up in *_unlock_irqrestore.)
set -eu
n=${1:-10000}
sqm=${2:-none}
method=${3:-lqos}
top=${4:-25}
work=/tmp/profile
rm -rf "$work" && mkdir -p "$work"
lqos gen --circuits "$n" --sites 64 --out "$work/net" >/dev/null
cd "$work/net"
lqos plan --queues 16 --sqm "$sqm" --out "$work/plan" >/dev/null
echo 0 >/proc/sys/kernel/kptr_restrict
echo -1 >/proc/sys/kernel/perf_event_paranoid
tc qdisc del dev ens19 root 2>/dev/null || true
tc qdisc del dev ens20 root 2>/dev/null || true

# The loading process's samples (COMM): the symbols with the most, by
# self time and including callees, as a share of that process's samples
# (perf's fixed-width padding stripped).
report() {
    title=$1 data=$2 comm=$3
    echo "== $title: self, share of $comm's samples"
    perf report -i "$data" --stdio --comms "$comm" --percentage relative --no-children \
        --sort symbol --percent-limit 0.5 -g none 2>/dev/null |
        grep -v '^#' | grep -v '^$' | sed 's/[[:space:]]*-[[:space:]]*-[[:space:]]*$//' | head -n "$top"
    echo "== $title: including callees (tc, qdisc, class, block and netlink functions)"
    perf report -i "$data" --stdio --comms "$comm" --percentage relative --children \
        --sort symbol --percent-limit 1 -g none 2>/dev/null |
        grep -v '^#' | grep -v '^$' | sed 's/[[:space:]]*-[[:space:]]*-[[:space:]]*$//' |
        grep -E 'tc_|tcf_|htb|qdisc|flow_|block|netlink_rcv|rtnetlink|fifo|class' | head -n "$top"
}

echo "profile: $(uname -r), $n circuits, sqm $sqm, method $method"
case $method in
lqos) load="lqos apply --full --queues 16 --sqm $sqm --state-dir $work/state" ;;
tc) load="tc -b $work/plan/linux_tc.txt" ;;
*) echo "profile: unknown method $method"; exit 2 ;;
esac
perf record -q -a -g -F 499 -o "$work/load.data" -- $load >"$work/load.log" 2>&1 ||
    { cat "$work/load.log"; exit 1; }
report "load ($load)" "$work/load.data" "${load%% *}"
perf record -q -a -g -F 499 -o "$work/teardown.data" -- \
    sh -c 'tc qdisc del dev ens19 root && tc qdisc del dev ens20 root' >"$work/teardown.log" 2>&1 ||
    { cat "$work/teardown.log"; exit 1; }
report "teardown (qdisc del root, both NICs)" "$work/teardown.data" tc
