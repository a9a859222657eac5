#!/usr/bin/env bash
# Rebuilds lqos-bpf/bpf/lqos.bpf.o from lqos.bpf.c with Debian 12's clang 14
# (apt-get install clang llvm libbpf-dev). The object is committed, so
# `cargo build` needs no clang; CI rebuilds it and fails when it differs.
#
# Deterministic: built from a copy in a scratch directory whose path is
# mapped away (-fdebug-prefix-map), DWARF stripped (llvm-strip -g) while
# .BTF and .BTF.ext (which the loader and verifier use) stay.
#
#   lqos-bpf/bpf/build.sh            writes lqos-bpf/bpf/lqos.bpf.o
#   lqos-bpf/bpf/build.sh OUT.o      writes OUT.o instead
#   LQOS_BPF_DEFINES=-DLQOS_HOSTS_PREALLOC lqos-bpf/bpf/build.sh OUT.o
#                                    a variant (benchmarks; never committed)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$here/lqos.bpf.o}"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
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
cp -r "$here/lqos.bpf.c" "$here/include" "$scratch/src/"
cd "$scratch/src"
"$CLANG" -O2 -g -target bpf -mcpu=v3 -std=gnu11 \
    -Wall -Werror -Wno-unused-function \
    -fdebug-prefix-map="$scratch/src"=. -fno-ident \
    -I include -I "/usr/include/$multiarch" ${LQOS_BPF_DEFINES:-} \
    -c lqos.bpf.c -o "$scratch/lqos.bpf.o"
"$STRIP" -g "$scratch/lqos.bpf.o"
cp "$scratch/lqos.bpf.o" "$out"
echo "wrote $out ($(stat -c %s "$out") bytes, sha256 $(sha256sum "$out" | cut -c1-16))"
