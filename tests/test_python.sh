#!/bin/sh
# The Python binding (python/lockstep) against this build's library: its
# pytest suite as TAP.  SKIPs when python3, numpy or pytest is missing
# (Debian: apt install python3-numpy python3-pytest).
lib="$(pwd)/.libs/liblockstep.so.0"
py=${PYTHON:-python3}
skip() {
    echo "1..1"
    echo "ok 1 - python binding # SKIP $1"
    exit 0
}
command -v "$py" >/dev/null 2>&1 || skip "$py not found"
"$py" -c 'import sys; sys.exit(sys.version_info < (3, 8))' 2>/dev/null ||
    skip "$py is older than 3.8"
"$py" -c 'import numpy; assert tuple(map(int, numpy.__version__.split(".")[:2])) >= (1, 22)' \
    2>/dev/null || skip "numpy >= 1.22 not installed"
"$py" -c 'import pytest' 2>/dev/null || skip "pytest not installed"
[ -f "$lib" ] || skip "no $lib (a static-only build?)"
# A cross build's library (scripts/test-arm.sh) is for another machine
# than this python: compare the ELF headers' e_machine.
"$py" -c 'import sys
m = lambda p: open(p, "rb").read(20)[18:20]
sys.exit(m(sys.argv[1]) != m(sys.executable))' "$lib" 2>/dev/null ||
    skip "liblockstep is built for another machine than $py (a cross build)"
# An ASan build's library cannot be loaded into an uninstrumented python
# (the ASan runtime must come first): the C tests cover that build.
if command -v ldd >/dev/null 2>&1 && ldd "$lib" 2>/dev/null | grep -q 'libasan'; then
    skip "liblockstep is built with AddressSanitizer (--enable-sanitizers)"
fi
LOCKSTEP_LIBRARY="$lib"
# This build's CUDA driver module, uninstalled, where it was built
if [ -f "$(pwd)/backends/cuda/.libs/lockstep-cuda.so" ]; then
    LOCKSTEP_DRIVER_PATH="$(pwd)/backends/cuda/.libs${LOCKSTEP_DRIVER_PATH:+:$LOCKSTEP_DRIVER_PATH}"
    export LOCKSTEP_DRIVER_PATH
fi
PYTHONPATH="${srcdir:-.}/python${PYTHONPATH:+:$PYTHONPATH}"
PYTHONDONTWRITEBYTECODE=1
export LOCKSTEP_LIBRARY PYTHONPATH PYTHONDONTWRITEBYTECODE
exec "$py" "${srcdir:-.}/python/tests/tap.py"
