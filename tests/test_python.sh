#!/bin/sh
# The Python binding (python/lockstep) against this build's library: its
# pytest suite as TAP.  SKIPs when python3, numpy or pytest is missing
# (Debian: apt install python3-numpy python3-pytest).
lib="$(pwd)/.libs/liblockstep.so.0"
skip() {
    echo "1..1"
    echo "ok 1 - python binding # SKIP $1"
    exit 0
}
# The first python with numpy >= 1.22 and pytest: PYTHON if set, else
# python3 on PATH, else the system's (a pyenv python on PATH may lack
# Debian's python3-numpy and python3-pytest)
usable() {
    "$1" -c 'import sys, numpy, pytest
sys.exit(sys.version_info < (3, 8) or
         tuple(map(int, numpy.__version__.split(".")[:2])) < (1, 22))' 2>/dev/null
}
py=""
for c in ${PYTHON:-python3 /usr/bin/python3}; do
    command -v "$c" >/dev/null 2>&1 && usable "$c" && { py=$c; break; }
done
[ -n "$py" ] || skip "no python3 >= 3.8 with numpy >= 1.22 and pytest (apt install python3-numpy python3-pytest)"
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
