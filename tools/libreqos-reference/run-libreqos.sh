#!/bin/sh
# run-libreqos.sh LIBREQOS DIR: runs LibreQoS.py of the checkout LIBREQOS on
# DIR/{network.json,ShapedDevices.csv,lqos.conf}; its state directory (with
# debug/linux_tc.txt and debug/linux_tc_rust.txt) becomes DIR/lq-state.
# Needs build.sh first and a python3 (>= 3.11) with LibreQoS's imports
# (psutil, deepdiff, chardet, cachebox), e.g. in $PYTHON's venv.
set -e
L=$(cd "$1" && pwd); D=$(cd "$2" && pwd); T=$(cd "$(dirname "$0")" && pwd)
rm -rf "$D/lq-state"; mkdir -p "$D/lq-state"
cd "$L/src"
LQREF_HARNESS="$T/harness/target/release/bakery" LQBASE_CONF="$D/lqos.conf" \
  LQBASE_STATE="$D/lq-state" LQBASE_DIR="$D" PYTHONPATH="$T/stub" \
  "${PYTHON:-python3}" LibreQoS.py > "$D/lq-state/stdout.txt" 2> "$D/lq-state/stderr.txt" \
  || { tail -30 "$D/lq-state/stderr.txt"; exit 1; }
