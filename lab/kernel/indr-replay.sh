#!/bin/sh
# The replay that flow_indr_dev_register() owes a driver registering late,
# checked in a lab guest with the indr_replay test module:
#   cargo xtask lab indr-replay [--kernel stock|unpatched|patched ...]
# (builds lab/kernel/indr_replay against each kernel and runs this script
# in it with --nics: sh lab/kernel/indr-replay.sh /lab/indr_replay.ko [N]).
#
# Every load of the module registers an indirect block callback; the
# module logs each block replayed to it, and this script compares those
# blocks, grouped by device, qdisc handle and binder type, with what tc
# shows is bound: an HTB qdisc binds one block and each of its classes
# one, fq_codel one, clsact two (ingress, egress), mq and pfifo none.
# Steps:
#  0. the NICs' default qdiscs (mq + fq_codel per TX queue);
#  1. mq + 16 HTBs with N classes each (pfifo leaves) on ens19; clsact
#     with shared blocks 7/8 (and a flower filter) on ens20 and on a veth;
#  2. with the module loaded: classes added and deleted, the ens19 tree
#     deleted: every bind and unbind reaches the callback live;
#  3. after the deletion: only the blocks left are replayed;
#  4. ens20's clsact deleted: blocks 7/8, still bound on the veth, are no
#     longer replayed (the list keeps one entry per block, made by its
#     first bind and dropped by its first unbind: kernel behaviour since
#     the list was added, printed so kernels can be compared);
#  5. the veth deleted: back to step 0's blocks.
# Prints one "replay:" line per step and "indr-replay: ok" or the first
# difference (exit 1).
set -eu
ko=${1:-/lab/indr_replay.ko}
n=${2:-40}
params=/sys/module/indr_replay/parameters
tmp=/tmp/indr-replay
rm -rf "$tmp" && mkdir -p "$tmp"
load=0

fail() {
    echo "indr-replay: FAILED: $*"
    exit 1
}

# Blocks bound on DEV per "dev=DEV qdisc=HANDLE binder=B", one line each,
# as tc shows them. Shared blocks (clsact ingress_block/egress_block) are
# left out: the callers state them.
tc_blocks() {
    dev=$1
    tc class show dev "$dev" >"$tmp/classes"
    tc qdisc show dev "$dev" | while read -r _ kind handle rest; do
        case $kind in
        htb)
            c=$(awk -v h="$handle" '$2 == "htb" && index($3, h) == 1' "$tmp/classes" | wc -l)
            i=0
            while [ $i -le "$c" ]; do
                echo "dev=$dev qdisc=$handle binder=0"
                i=$((i + 1))
            done
            ;;
        fq_codel | cake) echo "dev=$dev qdisc=$handle binder=0" ;;
        clsact)
            case $rest in
            *ingress_block*) ;;
            *)
                echo "dev=$dev qdisc=$handle binder=1"
                echo "dev=$dev qdisc=$handle binder=2"
                ;;
            esac
            ;;
        esac
    done
}

# Histogram "COUNT dev=... qdisc=... binder=..." of lines on stdin.
histogram() {
    sort | uniq -c | awk '{ print $1, $2, $3, $4 }'
}

# Loads the module (it replays every block to its callback), unloads it;
# writes the replayed blocks' histogram to $tmp/replayed.
replay_now() {
    load=$((load + 1))
    dmesg -c >/dev/null
    insmod "$ko" tag=$load
    count=$(cat $params/replay_binds)
    rmmod indr_replay
    dmesg | awk -v t="$load" '$0 ~ ("indr_replay: " t " replay bind ") { sub(/.* dev=/, "dev="); print }' |
        histogram >"$tmp/replayed"
    sum=$(awk '{ s += $1 } END { print s + 0 }' "$tmp/replayed")
    [ "$sum" = "$count" ] || fail "load $load: module counted $count replayed blocks, logged $sum"
}

# Step NAME: replay, compare with the expected histogram in $tmp/expected.
check_step() {
    name=$1
    replay_now
    histogram <"$tmp/expected.lines" >"$tmp/expected"
    echo "replay: $name: $(awk '{ s += $1 } END { print s + 0 }' "$tmp/replayed") blocks: $(tr '\n' ';' <"$tmp/replayed")"
    if ! cmp -s "$tmp/expected" "$tmp/replayed"; then
        echo "expected:"
        cat "$tmp/expected"
        echo "replayed:"
        cat "$tmp/replayed"
        fail "step $name: the replayed blocks differ from the bound ones"
    fi
}

all_blocks() {
    for d in "$@"; do tc_blocks "$d"; done
}

echo "indr-replay: $(uname -r), $n classes per HTB"

# 0. Defaults.
all_blocks ens19 ens20 >"$tmp/expected.lines"
check_step "0 defaults"
cp "$tmp/replayed" "$tmp/baseline"

# 1. Trees.
{
    echo "qdisc replace dev ens19 root handle 7fff: mq"
    q=1
    while [ $q -le 16 ]; do
        x=$(printf %x $q)
        echo "qdisc add dev ens19 parent 7fff:$x handle $x: htb default 2"
        echo "class add dev ens19 parent $x: classid $x:1 htb rate 1gbit"
        c=3
        while [ $c -lt $((n + 2)) ]; do
            cx=$(printf %x $c)
            echo "class add dev ens19 parent $x:1 classid $x:$cx htb rate 1mbit ceil 10mbit"
            [ $((c % 4)) = 0 ] && echo "qdisc add dev ens19 parent $x:$cx handle $(printf %x $((0x100 + q * 0x100 + c))): pfifo"
            c=$((c + 1))
        done
        q=$((q + 1))
    done
} >"$tmp/tree.tc"
tc -b "$tmp/tree.tc"
ip link add v0 type veth peer name v1
tc qdisc add dev ens20 ingress_block 7 egress_block 8 clsact
tc qdisc add dev v0 ingress_block 7 egress_block 8 clsact
tc filter add block 7 protocol ip pref 1 flower dst_ip 192.0.2.1 action skbedit priority 1:3
{
    all_blocks ens19 ens20 v0
    # The shared blocks: one entry each, from their first bind (ens20).
    echo "dev=ens20 qdisc=ffff: binder=1"
    echo "dev=ens20 qdisc=ffff: binder=2"
} >"$tmp/expected.lines"
check_step "1 trees"
before=$(tc_blocks ens19 | wc -l)

# 2. Live binds and unbinds.
load=$((load + 1))
insmod "$ko" tag=$load
base_binds=$(cat $params/live_binds)
c=$((n + 2))
added=5
while [ $c -lt $((n + 2 + added)) ]; do
    tc class add dev ens19 parent 1:1 classid 1:$(printf %x $c) htb rate 1mbit
    c=$((c + 1))
done
[ "$(cat $params/live_binds)" = $((base_binds + added)) ] ||
    fail "step 2: $added classes added, $(( $(cat $params/live_binds) - base_binds )) live binds"
c=$((n + 2))
while [ $c -lt $((n + 2 + added)) ]; do
    tc class del dev ens19 classid 1:$(printf %x $c)
    c=$((c + 1))
done
[ "$(cat $params/live_unbinds)" = $added ] ||
    fail "step 2: $added classes deleted, $(cat $params/live_unbinds) live unbinds"
tc qdisc del dev ens19 root
after=$(tc_blocks ens19 | wc -l)
binds=$(cat $params/live_binds)
unbinds=$(cat $params/live_unbinds)
rmmod indr_replay
echo "live: $binds binds, $unbinds unbinds (tree of $before blocks deleted, $after default blocks attached)"
[ "$unbinds" = $((added + before)) ] || fail "step 2: expected $((added + before)) live unbinds, saw $unbinds"
[ "$binds" = $((base_binds + added + after)) ] || fail "step 2: expected $((base_binds + added + after)) live binds, saw $binds"

# 3. After the deletion.
{
    all_blocks ens19 ens20 v0
    echo "dev=ens20 qdisc=ffff: binder=1"
    echo "dev=ens20 qdisc=ffff: binder=2"
} >"$tmp/expected.lines"
check_step "3 ens19 tree deleted"

# 4. The first binder of the shared blocks goes.
tc qdisc del dev ens20 clsact
all_blocks ens19 ens20 v0 >"$tmp/expected.lines"
check_step "4 ens20 clsact deleted (blocks 7/8 still on v0)"

# 5. Back to the defaults.
ip link del v0
all_blocks ens19 ens20 >"$tmp/expected.lines"
check_step "5 veth deleted"
cmp -s "$tmp/baseline" "$tmp/replayed" || fail "step 5: blocks differ from step 0's"
echo "indr-replay: ok"
