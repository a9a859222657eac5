#!/bin/sh
# compare.sh DIR...: `lqos compare --strategy round-robin --summary` of each
# case (run-libreqos.sh done) against LibreQoS.py's linux_tc.txt and the
# bakery's linux_tc_rust.txt. `lqos` must be on PATH.
for D in "$@"; do
  for tc in linux_tc.txt linux_tc_rust.txt; do
    [ -f "$D/lq-state/debug/$tc" ] || { echo "== $D $tc: LibreQoS wrote none"; continue; }
    out=$(cd "$D" && lqos compare --libreqos lq-state --tc "lq-state/debug/$tc" --strategy round-robin --summary 2>&1); rc=$?
    echo "== $D $tc (exit $rc)"; echo "$out" | sed -n '2,$p'
  done
done
