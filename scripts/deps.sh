#!/bin/sh
# Install what building and testing Lockstep needs on Debian/Ubuntu.
# Runs apt-get as root, or through sudo; does nothing for packages present.
set -e
pkgs="build-essential autoconf automake libtool pkg-config libhwloc-dev libsimde-dev libopenblas-dev"
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
