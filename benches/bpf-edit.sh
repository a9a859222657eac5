#!/usr/bin/env bash
# `lqos watch` with the bpf classifier: the time an edit that moves one
# address to another circuit takes, as the daemon logs it (maps_ms: the
# map step alone, no RTNL; ms: from the file event to done), in a scratch
# namespace beside a private bpffs (root).
#
#   benches/bpf-edit.sh [CIRCUITS] [EDITS]      # default 10000 20
set -euo pipefail
cd "$(dirname "$0")/.."
CIRCUITS="${1:-10000}"
EDITS="${2:-20}"
cargo build --release -q -p lqos-cli
lqos="$PWD/target/release/lqos"
dir=$(mktemp -d)
ns="lqos-bpfedit-$$"
cleanup() {
    [ -n "${daemon:-}" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
    ip netns del "$ns" 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT
ip netns add "$ns"
ip -n "$ns" link add ens19 numtxqueues 16 numrxqueues 16 type veth peer name ens20 numtxqueues 16 numrxqueues 16
ip -n "$ns" link set ens19 up
ip -n "$ns" link set ens20 up
cd "$dir"
"$lqos" gen --circuits "$CIRCUITS" --out . >/dev/null
# Two single-address circuits: the first data row's address moves to the
# second row's circuit and back.
python3 - <<'EOF'
import csv
rows = list(csv.reader(open("ShapedDevices.csv")))
def write(name, rows):
    w = csv.writer(open(name, "w", newline=""), quoting=csv.QUOTE_MINIMAL, lineterminator="\n")
    w.writerows(rows)
# Both versions written the same way, so only the two rows differ.
write("a.csv", rows)
write("ShapedDevices.csv", rows)
rows = [list(r) for r in rows]
head, r1, r2 = rows[0], rows[1], rows[2]
ip = head.index("IPv4")
r2[ip] = r2[ip] + "," + r1[ip]
r1[ip] = ""
rows[1], rows[2] = r1, r2
write("b.csv", rows)
EOF
echo "# $(date -u +%FT%TZ) $(uname -r) $(nproc) CPUs, $CIRCUITS circuits, lqos watch --classifier bpf --sqm none"
unshare -m sh -c "mount --make-rprivate / && mount -t bpf bpf /sys/fs/bpf && exec $lqos watch --netns $ns --state-dir st --classifier bpf --sqm none --verify-every 0 --debounce 0 --log-format json" 2>log.json &
daemon=$!
until grep -q '"trigger":"start"' log.json 2>/dev/null; do sleep 0.2; done
grep -m1 '"message":"bpf classifier installed"' log.json || true
for i in $(seq 1 "$EDITS"); do
    n=$(grep -c '"trigger":"file-change"' log.json || true)
    if [ $((i % 2)) = 1 ]; then cp b.csv ShapedDevices.tmp; else cp a.csv ShapedDevices.tmp; fi
    mv ShapedDevices.tmp ShapedDevices.csv
    until [ "$(grep -c '"trigger":"file-change"' log.json || true)" -gt "$n" ]; do sleep 0.05; done
    sleep 0.3
done
grep '"message":"applied"' log.json | grep '"trigger":"file-change"' >applied.json || true
python3 - applied.json <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
if not rows:
    sys.exit("no edit was applied")
maps = [float(r["maps_ms"]) for r in rows]
whole = [float(r["ms"]) for r in rows]
written = sorted(set(r["map_written"] for r in rows))
ops = sorted(set(r["added"] + r["changed"] + r["removed"] for r in rows))
reread = sorted(set(r.get("circuits", "?") for r in rows))
print(f"{len(rows)} edits: map step median {statistics.median(maps):.3f} ms (max {max(maps):.3f}), "
      f"whole edit median {statistics.median(whole):.1f} ms; map entries written per edit: {written}, tree ops: {ops}, circuits re-read: {reread}")
PY
