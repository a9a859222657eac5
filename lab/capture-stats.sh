#!/bin/sh
# Golden statistics replies of cake and fq_codel (lqos-apply's
# src/netlink/stats.rs), from the lab kernel (this project's host has
# neither):
#   cargo build --release -p lqos-apply --example capture_stats
#   cargo build --release -p lqos-cli --example udp_send
#   cargo xtask lab run --nics --exe target/release/examples/capture_stats \
#       --exe target/release/examples/udp_send -- sh lab/capture-stats.sh \
#     | sh lqos-apply/tests/fixtures/netlink/split-captures.sh
# An HTB root on ens19 with a cake diffserv4 leaf (1:3) and an fq_codel
# leaf (1:4); UDP into 1:3 marked EF (Voice), unmarked (Best Effort) and
# CS1 (Bulk), a burst into 1:4; then the raw replies of the qdisc dump and
# tc's reading of the same counters (`tc -s -j`), between markers.
set -eu
ip link set ens19 up
ip addr add 10.77.0.1/24 dev ens19
ip neigh add 10.77.0.99 lladdr 02:00:00:00:00:99 dev ens19 nud permanent
tc qdisc replace dev ens19 root handle 1: htb default 2
tc class add dev ens19 parent 1: classid 1:1 htb rate 100mbit ceil 100mbit
tc class add dev ens19 parent 1:1 classid 1:2 htb rate 10mbit ceil 100mbit
tc class add dev ens19 parent 1:1 classid 1:3 htb rate 2mbit ceil 4mbit prio 3 quantum 1522
tc qdisc add dev ens19 parent 1:3 handle 3: cake diffserv4
tc class add dev ens19 parent 1:1 classid 1:4 htb rate 2mbit ceil 4mbit prio 3 quantum 1522
tc qdisc add dev ens19 parent 1:4 handle 4: fq_codel limit 100
udp_send ens19 10.77.0.1 10.77.0.99 0x10003 0xb8 300 500
udp_send ens19 10.77.0.1 10.77.0.99 0x10003 0 200 500
udp_send ens19 10.77.0.1 10.77.0.99 0x10003 0x20 100 500
udp_send ens19 10.77.0.1 10.77.0.99 0x10004 0 400 1000
# Drain (4 Mbit/s), so the counters stand still while both read them.
sleep 3
echo "=== BEGIN lab_cake_fq_codel_qdisc.hex"
capture_stats ens19 qdisc
echo "=== END"
echo "=== BEGIN lab_cake_fq_codel_qdisc.json"
tc -s -j qdisc show dev ens19
echo
echo "=== END"
