#!/usr/bin/env bash
# Rebuilds the BPF objects with Debian 12's clang 14 (apt-get install clang
# llvm libbpf-dev): lqos.bpf.o (the data path), test/vlan_push.bpf.o and
# test/tcp_drop.bpf.o (fixtures of the namespace tests). The objects are committed, so
# `cargo build` needs no clang; CI rebuilds them and fails when they differ.
#
# Deterministic: built from a copy in a scratch directory whose path is
# mapped away (-fdebug-prefix-map), DWARF stripped (llvm-strip -g) while
# .BTF and .BTF.ext (which the loader and verifier use) stay.
#
#   lqos-bpf/bpf/build.sh           writes the objects beside their sources
#   lqos-bpf/bpf/build.sh DIR       writes DIR/lqos.bpf.o, DIR/test/*.bpf.o
#   LQOS_BPF_DEFINES=-DLQOS_MAPS_ON_USE lqos-bpf/bpf/build.sh DIR
#                                   a variant (benchmarks; never committed)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$here}"
mkdir -p "$out/test"
out="$(cd "$out" && pwd)"
CLANG="${CLANG:-clang}"
STRIP="${LLVM_STRIP:-llvm-strip}"
for t in "$CLANG" "$STRIP"; do
    command -v "$t" >/dev/null || { echo "build.sh: $t not found (apt-get install clang llvm libbpf-dev)" >&2; exit 1; }
done
[ -e /usr/include/bpf/bpf_helpers.h ] || { echo "build.sh: bpf/bpf_helpers.h not found (apt-get install libbpf-dev)" >&2; exit 1; }
multiarch="$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)"

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/src"
cp -r "$here/lqos.bpf.c" "$here/include" "$here/test" "$scratch/src/"
rm -f "$scratch/src/test/"*.o
cd "$scratch/src"
for src in lqos.bpf.c test/vlan_push.bpf.c test/tcp_drop.bpf.c; do
    obj="${src%.c}.o"
    "$CLANG" -O2 -g -target bpf -mcpu=v3 -std=gnu11 \
        -Wall -Werror -Wno-unused-function \
        -fdebug-prefix-map="$scratch/src"=. -fno-ident \
        -I include -I "/usr/include/$multiarch" ${LQOS_BPF_DEFINES:-} \
        -c "$src" -o "$scratch/out.o"
    "$STRIP" -g "$scratch/out.o"
    cp "$scratch/out.o" "$out/$obj"
    echo "wrote $out/$obj ($(stat -c %s "$out/$obj") bytes, sha256 $(sha256sum "$out/$obj" | cut -c1-16))"
done
