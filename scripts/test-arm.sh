#!/bin/sh
# The test suite of an AArch64 cross build, run under qemu-user on this
# (x86) machine: dependencies, configure --host=aarch64-linux-gnu in
# _build-arm/, build, then `make check` twice, once on a CPU model with the
# dot product extension (qemu -cpu max: cpu:neon and cpu:neon-dotprod)
# and once without (-cpu cortex-a53: cpu:neon only).
#   scripts/test-arm.sh [configure options]
# The build directory is _build-arm/, or $LK_ARM_BUILD_DIR.
# LOCKSTEP_TEST_QUICK is set for the qemu runs: the slowest tests run fewer
# thread counts and samples there (every op and dtype is still checked).
# Timings under qemu mean nothing; see docs/internals/cpu-kernels.md for instruction counts.
set -e
cd "$(dirname "$0")/.."
host=aarch64-linux-gnu
src=$(pwd)
dir=${LK_ARM_BUILD_DIR:-_build-arm}
sh scripts/deps.sh --arm
[ -x configure ] || ./autogen.sh
mkdir -p "$dir"
cd "$dir"
# pkg-config must see the target's libraries only: the build machine's
# x86 .pc files (OpenBLAS, hwloc) would not link.
PKG_CONFIG_LIBDIR=/usr/lib/$host/pkgconfig:/usr/share/pkgconfig
export PKG_CONFIG_LIBDIR
hwloc=--without-hwloc
[ -f "/usr/lib/$host/pkgconfig/hwloc.pc" ] && hwloc=--with-hwloc
[ -f Makefile ] || "$src/configure" --host=$host $hwloc "$@"
make -j"$(nproc)"

status=0
summary=""
for cpu in max cortex-a53; do
    echo "test-arm: make check under qemu-aarch64 -cpu $cpu"
    s=0
    t0=$(date +%s)
    LOCKSTEP_TEST_QUICK=1 make -j"$(nproc)" check LK_QEMU_CPU=$cpu || s=$?
    [ $s -ne 0 ] && [ -f test-suite.log ] && cat test-suite.log
    [ $s -ne 0 ] && status=$s
    pass=$(cat tests/*.trs 2>/dev/null | grep -c '^:test-result: PASS' || true)
    fail=$(cat tests/*.trs 2>/dev/null | grep -c '^:test-result: \(FAIL\|ERROR\|XPASS\)' || true)
    skip=$(cat tests/*.trs 2>/dev/null | grep -c '^:test-result: SKIP' || true)
    # which CPU variants the contract test compared with the reference
    devs=$(sed -n 's/^#   \(cpu[^ ]*\)$/\1/p' tests/test_contract.log 2>/dev/null | tr '\n' ' ')
    line="tests (qemu -cpu $cpu): $pass passed, $fail failed, $skip skipped; devices: ${devs% }; $(( $(date +%s) - t0 )) s"
    summary="$summary$line
"
done
printf '%s' "$summary"
exit $status
