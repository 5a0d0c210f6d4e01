#!/bin/sh
# The version is set in one place, configure.ac's AC_INIT; what repeats it
# must follow (TAP): the Python binding's python/lockstep/_version.py, the
# upstream part of debian/changelog's newest entry (in a git checkout; the
# release tarball has no debian/), and a NEWS section for the release.
# RELEASING.md lists the steps of a version bump.
#
# Run from the build directory (as `make check` does); srcdir is the
# source tree (automake sets it).
set -u
LC_ALL=C
export LC_ALL
srcdir=${srcdir:-.}

echo "1..4"
. "$srcdir/tests/tap.sh"

version=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' config.h 2>/dev/null)
[ -n "$version" ]
ok $? "configure's version: ${version:-none in config.h}"

py=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$srcdir/python/lockstep/_version.py")
[ -n "$version" ] && [ "$py" = "$version" ]
ok $? "python/lockstep/_version.py says $py"

cl="$srcdir/debian/changelog"
if [ ! -f "$cl" ]; then
    skip "debian/changelog's upstream version" "no $cl (a release tarball)"
else
    # "lockstep (EPOCH:UPSTREAM-REVISION) ..." on the first line
    deb=$(sed -n '1s/^[^ ]* (\([^)]*\)).*/\1/p' "$cl")
    up=${deb#*:}
    up=${up%-*}
    [ -n "$version" ] && [ "$up" = "$version" ]
    ok $? "debian/changelog's newest entry ($deb) is upstream $up"
fi

grep -q "^\* Lockstep $version\$" "$srcdir/NEWS"
ok $? "NEWS has a section '* Lockstep $version'"
