#!/bin/sh
# From a fresh clone: install dependencies, build in _build/, and run the
# main job, `lockstep check` (every device of this machine against the
# reference, bit for bit).  Extra arguments go to configure.
set -e
cd "$(dirname "$0")/.."
sh scripts/deps.sh
[ -x configure ] || ./autogen.sh
mkdir -p _build
cd _build
[ -f Makefile ] || ../configure --enable-emulated-isa "$@"
make -j"$(nproc)"
./tools/lockstep info
./tools/lockstep check
