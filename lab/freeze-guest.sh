#!/bin/bash
# Freezes every running lab guest (qemu) for FREEZE seconds (default 0.3)
# every PERIOD seconds (default 2), as a busy host's scheduler does to a
# TCG guest, until stopped; for checking that the live tests' rates leave
# such stalls out:
#   bash lab/freeze-guest.sh & cargo xtask lab test --only live_classifier -- --nocapture; kill %1
# It uses the cgroup v1 freezer (a SIGSTOP would be seen by qemu's
# parent, xtask); root only.
set -eu
freeze=${FREEZE:-0.3}
period=${PERIOD:-2}
d=/sys/fs/cgroup/freezer/lqos-lab-freeze
mkdir -p "$d"
trap 'echo THAWED >"$d/freezer.state"; for p in $(cat "$d/cgroup.procs"); do echo "$p" >/sys/fs/cgroup/freezer/cgroup.procs; done; rmdir "$d"' EXIT
trap 'exit 0' INT TERM
while true; do
    for p in $(pgrep -f 'qemu-system-x86_64' || true); do
        echo "$p" >"$d/cgroup.procs" 2>/dev/null || true
    done
    if [ -s "$d/cgroup.procs" ]; then
        echo FROZEN >"$d/freezer.state"
        sleep "$freeze"
        echo THAWED >"$d/freezer.state"
    fi
    sleep "$(awk -v p="$period" -v f="$freeze" 'BEGIN { print p - f }')"
done
