#!/bin/sh
# The test suite from a fresh clone: dependencies, build, `make check`.
#   scripts/test.sh               build in _build/ and run the TAP suite
#   scripts/test.sh --sanitizers  the same in _build-san/ under ASan+UBSan
#   scripts/test.sh --distcheck   also `make distcheck` (tarball builds and passes)
set -e
cd "$(dirname "$0")/.."
dir=_build
conf="--enable-emulated-isa"
distcheck=no
for a in "$@"; do
    case "$a" in
        --sanitizers) dir=_build-san; conf="$conf --enable-sanitizers" ;;
        --distcheck) distcheck=yes ;;
        *) conf="$conf $a" ;;
    esac
done
sh scripts/deps.sh
# the communicator on MPI where Open MPI is installed (tests/test_comm.sh);
# not under the sanitizers, whose leak checker reports MPI's own memory
[ "$dir" = _build ] && command -v mpicc >/dev/null 2>&1 && conf="$conf --with-mpi"
[ -x configure ] || ./autogen.sh
mkdir -p "$dir"
cd "$dir"
[ -f Makefile ] || ../configure $conf
make -j"$(nproc)"
status=0
make -j"$(nproc)" check || status=$?
[ $status -ne 0 ] && [ -f test-suite.log ] && cat test-suite.log
# Count TAP results (one per test line, SKIPs apart) for the closing line.
pass=$(cat tests/*.trs tests/*/*.trs 2>/dev/null | grep -c '^:test-result: PASS' || true)
fail=$(cat tests/*.trs tests/*/*.trs 2>/dev/null | grep -c '^:test-result: \(FAIL\|ERROR\|XPASS\)' || true)
skip=$(cat tests/*.trs tests/*/*.trs 2>/dev/null | grep -c '^:test-result: SKIP' || true)
[ $status -eq 0 ] && [ "$distcheck" = yes ] && { make distcheck DISTCHECK_CONFIGURE_FLAGS="--enable-emulated-isa" || status=$?; }
echo "tests: $pass passed, $fail failed, $skip skipped"
exit $status
