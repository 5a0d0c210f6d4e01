#!/bin/sh
# Lockstep: check an installed copy the way a user meets it.
#
#   tests/test_install.sh PREFIX [SRCDIR]
#
# PREFIX is where `make install` put Lockstep, with any DESTDIR already
# prepended (e.g. `make install DESTDIR=/tmp/stage` with the default prefix
# gives /tmp/stage/usr/local).  SRCDIR is the source tree (default: the
# directory above this script).  The script sets PKG_CONFIG_PATH and
# LD_LIBRARY_PATH itself, builds examples/quickstart.c with nothing but
# `pkg-config --cflags --libs lockstep`, runs it, and runs the installed
# `lockstep --version` and `lockstep info`.  Then it builds the example
# driver module (examples/driver/*.c) from a copy outside the source tree
# with nothing but `pkg-config --cflags lockstep` (so it cannot include
# anything that is not installed, nor link liblockstep), points
# LOCKSTEP_DRIVER_PATH at it, and checks that the installed `lockstep info`
# lists its device and `lockstep check` gets its op's bits right.  Exit
# status 0 on success.
#
# Not part of `make check` (it needs an installed copy); CI runs it after
# `make install DESTDIR=...`.
set -eu

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    echo "usage: $0 PREFIX [SRCDIR]" >&2
    exit 2
fi
prefix=$(cd "$1" && pwd)
srcdir=${2:-$(dirname "$0")/..}
srcdir=$(cd "$srcdir" && pwd)
: "${CC:=cc}"

fail() {
    echo "test_install: FAIL: $*" >&2
    exit 1
}

libdir=
for d in "$prefix/lib" "$prefix/lib64" "$prefix"/lib/*-linux-gnu; do
    if [ -f "$d/pkgconfig/lockstep.pc" ]; then
        libdir=$d
        break
    fi
done
[ -n "$libdir" ] || fail "no lockstep.pc under $prefix/lib*"
echo "test_install: prefix $prefix, libdir $libdir"

# A DESTDIR install keeps the configured prefix inside lockstep.pc; point
# pkg-config at the staged tree instead (pc_sysrootdir is not enough when
# the prefix itself moved).
configured_prefix=$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --variable=prefix lockstep)
PKG_CONFIG_PATH="$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export PKG_CONFIG_PATH
pc_flags=
if [ "$configured_prefix" != "$prefix" ]; then
    pc_flags="--define-variable=prefix=$prefix"
    echo "test_install: lockstep.pc says prefix=$configured_prefix; using $prefix"
fi
LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH

# shellcheck disable=SC2086
cflags=$(pkg-config $pc_flags --cflags lockstep) || fail "pkg-config --cflags lockstep"
# shellcheck disable=SC2086
libs=$(pkg-config $pc_flags --libs lockstep) || fail "pkg-config --libs lockstep"
echo "test_install: cflags: $cflags"
echo "test_install: libs:   $libs"

# the headers must also be self-sufficient one by one
work=$(mktemp -d "${TMPDIR:-/tmp}/lockstep-install.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
for h in "$prefix"/include/lockstep.h "$prefix"/include/lockstep/*.h; do
    name=${h#"$prefix"/include/}
    printf '#include <%s>\nint lk_header_check;\n' "$name" > "$work/h.c"
    # shellcheck disable=SC2086
    $CC -std=c11 -Wall -Wextra -Werror $cflags -c "$work/h.c" -o "$work/h.o" ||
        fail "header <$name> does not compile on its own"
done

# shellcheck disable=SC2086
$CC -std=c11 -Wall -Wextra -Werror $cflags "$srcdir/examples/quickstart.c" -o "$work/quickstart" $libs ||
    fail "quickstart.c does not build against the installed copy"
"$work/quickstart" > "$work/out" || fail "quickstart failed: $(cat "$work/out")"
cat "$work/out"
grep -q "rmsnorm on" "$work/out" || fail "quickstart printed nothing useful"

# it must have linked the installed library, not a build tree's
if command -v ldd >/dev/null 2>&1; then
    ldd "$work/quickstart" | grep -q "$libdir/liblockstep" ||
        fail "quickstart did not pick up $libdir/liblockstep: $(ldd "$work/quickstart" | grep lockstep)"
fi

if [ -x "$prefix/bin/lockstep" ]; then
    "$prefix/bin/lockstep" --version || fail "lockstep --version"
    "$prefix/bin/lockstep" info > "$work/info" || fail "lockstep info: $(cat "$work/info")"
    grep -q "^auto:" "$work/info" || fail "lockstep info shows no auto choice"
else
    fail "no $prefix/bin/lockstep"
fi

# The example driver module, out of tree: a copy in the scratch directory,
# so that neither a quoted include nor an include path can reach the
# source tree; the environment's include paths are dropped too.
mkdir "$work/driver"
cp "$srcdir"/examples/driver/*.c "$work/driver/"
# shellcheck disable=SC2086
env -u CPATH -u C_INCLUDE_PATH $CC -std=c11 -Wall -Wextra -Werror -O2 -ffp-contract=off \
    -fPIC -shared -fvisibility=hidden -Wl,--no-undefined $cflags "$work/driver/"*.c \
    -o "$work/driver/lockstep-example.so" ||
    fail "examples/driver does not build as a module against the installed headers alone"
if command -v nm >/dev/null 2>&1; then
    exported=$(nm -D --defined-only "$work/driver/lockstep-example.so" | awk '$2 == "T" { print $3 }')
    [ "$exported" = lockstep_driver_entry ] ||
        fail "the example module exports more than lockstep_driver_entry: $exported"
fi
LOCKSTEP_DRIVER_PATH="$work/driver" "$prefix/bin/lockstep" info > "$work/info" 2>&1 ||
    fail "lockstep info with the example module: $(cat "$work/info")"
grep -q "example:0" "$work/info" ||
    fail "lockstep info does not list example:0: $(cat "$work/info")"
# its lk_binary against the reference, bit for bit (exit status 1 if a case
# differs); the f32 cases must have run on it, the others are unsupported
LOCKSTEP_DRIVER_PATH="$work/driver" "$prefix/bin/lockstep" check --device example:0 --op binary \
    --json > "$work/check" 2>&1 || fail "lockstep check --device example:0: $(cat "$work/check")"
grep -q '"identical": [1-9]' "$work/check" ||
    fail "no lk_binary case ran on example:0: $(cat "$work/check")"
echo "test_install: the example driver module: example:0 listed, lk_binary checked"

echo "test_install: OK"
