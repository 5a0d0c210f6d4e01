#!/bin/sh
# Install the _build tree into a scratch prefix and build an outside
# program against it with pkg-config (tests/test_install.sh).
set -e
cd "$(dirname "$0")/.."
prefix=$(pwd)/_install
rm -rf "$prefix"
make -C _build install prefix="$prefix" >/dev/null
sh tests/test_install.sh "$prefix"
