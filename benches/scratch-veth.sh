# Sourced by the bench scripts: a scratch namespace $ns holding a veth
# pair ens19/ens20 with 16 TX queues, and a scratch directory $work (the
# current directory from then on). `scratch_teardown` deletes the tree
# (timed: deleting a large tree takes minutes), the namespace and the
# directory; the caller traps it on EXIT.
scratch_teardown() {
    if ip netns exec "$ns" true 2>/dev/null; then
        local t0
        t0=$(date +%s)
        for dev in ens19 ens20; do
            ip netns exec "$ns" tc qdisc del dev "$dev" root 2>/dev/null || true
        done
        echo "tree deleted in $(( $(date +%s) - t0 )) s"
    fi
    ip netns del "$ns" 2>/dev/null || true
    rm -rf "$work"
}

# scratch_up NAME: creates the namespace NAME-PID and the directory.
scratch_up() {
    ns=$1-$$
    work=$(mktemp -d)
    ip netns add "$ns"
    ip netns exec "$ns" ip link add ens19 numtxqueues 16 type veth peer name ens20 numtxqueues 16
    ip netns exec "$ns" ip link set ens19 up
    ip netns exec "$ns" ip link set ens20 up
    cd "$work"
    echo "$(date -u '+%F %T UTC'), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
}
