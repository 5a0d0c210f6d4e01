#!/bin/sh
# liblockstep's ABI against a release (libabigail's abidiff):
#   scripts/abi-check.sh [--new PREFIX [--libdir DIR]] [REF]
# REF is a git tag or other ref (default: the newest v* tag).  Without
# one, prints "SKIP: no release tag" and exits 0: tagging v0.1.0 makes the
# check bite (RELEASING.md).  The library at REF is built from `git
# archive REF` in a scratch directory (-g, no emulated ISAs) and installed
# there with its headers; the new side is this tree built the same way,
# or, with --new, an installed tree already built with -g (PREFIX holds
# include/ and LIBDIR/liblockstep.so.*; LIBDIR defaults to lib), such as
# the Debian build's debian/tmp/usr.  abidiff compares them with the
# public headers of each side (--headers-dir1/2), so only the public
# API's types count.  Exit status: 0 when the ABI is unchanged, only grew
# (functions added), or changed otherwise together with a soname bump; 1
# when a function was removed or changed (its type, or a type it reaches:
# a public struct's layout) under the same soname, or on a tool error.
set -eu
cd "$(dirname "$0")/.."
top=$(pwd)
new=
libdir=lib
ref=
while [ $# -gt 0 ]; do
    case "$1" in
        --new) new=$2; shift 2 ;;
        --libdir) libdir=$2; shift 2 ;;
        -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
        -*) echo "usage: $0 [--new PREFIX [--libdir DIR]] [REF]" >&2; exit 2 ;;
        *) ref=$1; shift ;;
    esac
done
if [ -z "$ref" ]; then
    ref=$(git tag -l 'v[0-9]*' --sort=-v:refname 2>/dev/null | head -n 1)
    if [ -z "$ref" ]; then
        echo "SKIP: no release tag (v*): nothing to compare liblockstep's ABI with"
        exit 0
    fi
fi
git rev-parse --verify -q "$ref^{commit}" >/dev/null || {
    echo "abi-check: FAIL: $ref is not a git ref here"
    exit 1
}
command -v abidiff >/dev/null || {
    echo "abi-check: FAIL: abidiff not found (Debian: apt-get install abigail-tools)"
    exit 1
}

work=$(mktemp -d "${TMPDIR:-/tmp}/lk-abi.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM

# build_lib SRCDIR PREFIX: the library and its headers only, installed.
build_lib() {
    mkdir "$1/_abi"
    (cd "$1" && ./autogen.sh && cd _abi &&
        ../configure --prefix="$2" --libdir="$2/lib" CFLAGS="-g -Og" &&
        make -j"$(nproc)" liblockstep.la &&
        make install-libLTLIBRARIES install-includeHEADERS install-lockstepincHEADERS \
            install-nodist_lockstepincHEADERS) > "$1/_abi/build.log" 2>&1 || {
        tail -n 30 "$1/_abi/build.log"
        echo "abi-check: FAIL: building liblockstep in $1"
        exit 1
    }
}

echo "abi-check: building liblockstep at $ref ($(git rev-parse --short "$ref"))"
mkdir "$work/old-src"
git archive "$ref" | tar -xf - -C "$work/old-src"
build_lib "$work/old-src" "$work/old"
if [ -n "$new" ]; then
    newinc=$new/include
    newlib=$new/$libdir
else
    echo "abi-check: building liblockstep from this tree"
    mkdir "$work/new-src"
    git ls-files -z --cached --others --exclude-standard |
        tar --null -T - -cf - | tar -xf - -C "$work/new-src"
    build_lib "$work/new-src" "$work/new"
    newinc=$work/new/include
    newlib=$work/new/lib
fi

soname() { objdump -p "$1" | awk '$1 == "SONAME" { print $2 }'; }
oldso=$(ls "$work"/old/lib/liblockstep.so.*.*.* | head -n 1)
newso=$(ls "$newlib"/liblockstep.so.*.*.* | head -n 1)
[ -f "$oldso" ] && [ -f "$newso" ] || {
    echo "abi-check: FAIL: no liblockstep.so.X.Y.Z ($oldso, $newso)"
    exit 1
}
echo "abi-check: $ref: $(soname "$oldso"); new: $(soname "$newso") ($newso)"
rc=0
abidiff --headers-dir1 "$work/old/include" --headers-dir2 "$newinc" \
    "$oldso" "$newso" > "$work/abidiff.txt" 2>&1 || rc=$?
cat "$work/abidiff.txt"
# abidiff's status is a bit mask: 1 error, 2 usage, 4 change, 8 incompatible.
# It sets 8 only for removed symbols; a changed type behind a function (a
# public struct's layout, a parameter's type) is a "change" (4) for a human
# to judge.  Here only additions pass: any function or variable that its
# summaries count as removed or changed is an incompatible change.
changed=$(awk '/changes summary:/ {
        for (i = 2; i <= NF; i++) if ($i ~ /^(Removed|Changed)/ && $(i - 1) + 0 > 0) n++
    } END { print n + 0 }' "$work/abidiff.txt")
[ "$changed" -eq 0 ] || rc=$((rc | 8))
if [ $((rc & 3)) -ne 0 ]; then
    echo "abi-check: FAIL: abidiff could not compare (status $rc)"
    exit 1
elif [ $((rc & 8)) -ne 0 ]; then
    if [ "$(soname "$oldso")" = "$(soname "$newso")" ]; then
        echo "abi-check: FAIL: incompatible ABI change against $ref without a soname bump"
        echo "  (libtool -version-info in configure.ac: RELEASING.md)"
        exit 1
    fi
    echo "abi-check: OK: incompatible change against $ref, soname bumped to $(soname "$newso")"
elif [ $((rc & 4)) -ne 0 ]; then
    echo "abi-check: OK: compatible changes against $ref (additions)"
else
    echo "abi-check: OK: ABI identical to $ref"
fi
