#!/bin/sh
# Install what building and testing Lockstep needs on Debian/Ubuntu.
# Runs apt-get as root, or through sudo; does nothing for packages present.
# (gnuplot-nox draws the plots of `make bench-report`; libopenblas0 is the
# peer `lockstep bench` loads at run time; python3-numpy and python3-pytest
# run the Python binding's tests, tests/test_python.sh; openmpi-bin and
# libopenmpi-dev the communicator's tests, tests/test_comm.sh.)
set -e
#   scripts/deps.sh [--arm] [package...]
# --arm: also the AArch64 cross compiler and qemu-user (scripts/test-arm.sh).
pkgs="build-essential autoconf automake libtool pkg-config libhwloc-dev libsimde-dev libopenblas0 gnuplot-nox python3-numpy python3-pytest openmpi-bin libopenmpi-dev"
arm_pkgs="gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user"
if [ "$1" = --arm ]; then
    pkgs="$pkgs $arm_pkgs"
    shift
fi
[ $# -gt 0 ] && pkgs="$pkgs $*"
missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
echo "deps.sh: installing$missing"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
