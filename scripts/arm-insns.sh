#!/bin/sh
# Instruction counts of a few ops on the ARM variants, under qemu-user
# (timings under emulation mean nothing; retired guest instructions do):
# builds a qemu TCG plugin that counts them (scripts/arm-insns/insn_count.c,
# for the build machine) and a small driver (opcount.c, for AArch64)
# against the cross build of scripts/test-arm.sh, then prints, per op, the
# instructions of one call on ref, cpu:neon and cpu:neon-dotprod (one
# thread) and their ratios.  docs/internals/cpu-kernels.md quotes the result.
#   scripts/arm-insns.sh [build dir, default _build-arm]
set -e
cd "$(dirname "$0")/.."
build=$(cd "${1:-_build-arm}" && pwd)
host=aarch64-linux-gnu
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -shared -fPIC -O2 -o "$tmp/insn_count.so" scripts/arm-insns/insn_count.c
$host-gcc -O2 -std=c11 -Iinclude -I"$build/include" -o "$tmp/opcount" scripts/arm-insns/opcount.c \
    -L"$build/.libs" -llockstep -Wl,-rpath-link,"$build/.libs"
QEMU_LD_PREFIX=${LK_QEMU_LD_PREFIX:-/usr/$host}
LD_LIBRARY_PATH="$build/.libs"
LOCKSTEP_NUM_THREADS=1
export QEMU_LD_PREFIX LD_LIBRARY_PATH LOCKSTEP_NUM_THREADS
count() { # device op reps
    qemu-aarch64 -cpu max -plugin "$tmp/insn_count.so" -d plugin "$tmp/opcount" "$1" "$2" "$3" 2>&1 |
        sed -n 's/.*insns: //p'
}
printf '%-14s %12s %12s %12s %10s %12s\n' op ref neon neon-dotprod ref/neon neon/dotprod
for op in gemm ternary_gemv int8_gemm softmax rmsnorm; do
    set --
    for d in ref cpu:neon cpu:neon-dotprod; do
        c1=$(count $d $op 1)
        c5=$(count $d $op 5)
        set -- "$@" $(( (c5 - c1) / 4 ))
    done
    awk -v op=$op -v r=$1 -v n=$2 -v d=$3 \
        'BEGIN { printf "%-14s %12d %12d %12d %10.1f %12.2f\n", op, r, n, d, r / n, n / d }'
done
