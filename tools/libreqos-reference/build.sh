#!/bin/sh
# build.sh LIBREQOS: builds the harness from a LibreQoS checkout (HEAD 455bc13b):
# copies lqos_bakery's commands.rs and queue_math.rs and lqos_config's
# planner.rs from it (they stay LibreQoS's, unchanged and not stored here).
set -e
L=$(cd "$1" && pwd); H=$(cd "$(dirname "$0")" && pwd)/harness
cp "$L/src/rust/lqos_bakery/src/commands.rs" "$L/src/rust/lqos_bakery/src/queue_math.rs" "$H/bakery/src/"
cp "$L/src/rust/lqos_config/src/planner.rs" "$H/lqos_config/src/upstream_planner.rs"
cargo build --release --manifest-path "$H/Cargo.toml"
