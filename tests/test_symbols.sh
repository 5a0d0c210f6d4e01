#!/bin/sh
# liblockstep's exported symbols against core/liblockstep.map (TAP): the
# built library exports exactly the listed functions, each under the
# version node that matches its soname (LOCKSTEP_0 for liblockstep.so.0),
# every LK_API function of the public headers is listed and every listed
# one declared, and debian/liblockstep0.symbols (in a git checkout; the
# release tarball has no debian/) names the same symbols.  An ABI change
# therefore shows up here as an edit of the list, not silently.
#
# Run from the build directory (as `make check` does); srcdir is the
# source tree (automake sets it); NM is configure's nm for the host
# (tests/local.mk passes it; plain nm otherwise).
set -u
LC_ALL=C
export LC_ALL
srcdir=${srcdir:-.}
map="$srcdir/core/liblockstep.map"
lib=.libs/liblockstep.so
nm_cmd=${NM:-nm}

echo "1..7"
. "$srcdir/tests/tap.sh"
tap_tmp symbols

# The list: the names between "global:" and "local:" of the map.
sed -e 's|/\*.*\*/||' -e '/\/\*/,/\*\//d' "$map" |
    awk '/global:/ { on = 1; next } /local:/ { on = 0 } on { gsub(/[ \t;]/, ""); if ($0 != "") print }' |
    sort > "$tmp/list"
node=$(sed -n 's/^\([A-Za-z_][A-Za-z0-9_]*\)[ \t]*{.*/\1/p' "$map" | head -n 1)
[ -s "$tmp/list" ] && [ -n "$node" ]
ok $? "$map lists symbols under a version node ($node, $(wc -l < "$tmp/list") symbols)"

# The library's dynamic symbol table: defined symbols, name@@version.
# shellcheck disable=SC2086
if [ ! -f "$lib" ]; then
    skip "exported symbols are the list" "no $lib (a static-only build?)"
    skip "symbols carry the version node" "no $lib"
    skip "only functions are exported" "no $lib"
elif ! $nm_cmd -D --defined-only "$lib" > "$tmp/nm" 2> "$tmp/nm.err"; then
    reason="$nm_cmd cannot read $lib: $(head -n 1 "$tmp/nm.err")"
    skip "exported symbols are the list" "$reason"
    skip "symbols carry the version node" "$reason"
    skip "only functions are exported" "$reason"
else
    # the version node itself shows up as an absolute symbol: not a function
    awk -v node="$node" '$NF != node && $NF != node "@@" node { print $NF }' "$tmp/nm" |
        sed 's/@.*//' | sort > "$tmp/exported"
    if cmp -s "$tmp/exported" "$tmp/list"; then
        ok 0 "the library exports exactly the listed symbols"
    else
        ok 1 "the library exports exactly the listed symbols"
        comm -23 "$tmp/exported" "$tmp/list" | sed 's/^/# exported but not listed: /'
        comm -13 "$tmp/exported" "$tmp/list" | sed 's/^/# listed but not exported: /'
    fi
    if ! grep -q '@' "$tmp/nm"; then
        skip "symbols carry the version node" "built without --version-script (configure says so)"
    else
        soname=$(objdump -p "$lib" 2>/dev/null | awk '$1 == "SONAME" { print $2 }')
        want="LOCKSTEP_${soname##*.so.}"
        bad=$(awk -v node="$node" '$NF !~ ("@@" node "$") && $NF != node { print $NF }' "$tmp/nm")
        [ -z "$bad" ] && [ "$node" = "$want" ]
        ok $? "every symbol is name@@$node, the node of $soname (want $want)"
        [ -z "$bad" ] || echo "$bad" | sed 's/^/# not in the node: /'
    fi
    # T: text; the node's own entry is A; data (D, B, R) would be ABI too
    others=$(awk -v node="$node" '$NF != node && $NF != node "@@" node && $(NF-1) != "T" { print }' "$tmp/nm")
    [ -z "$others" ]
    ok $? "only functions are exported"
    [ -z "$others" ] || echo "$others" | sed 's/^/# not a function: /'
fi

# LK_API declarations of the public headers (one line each, as style.md
# writes them: LK_API type name(...).
cat "$srcdir"/include/lockstep.h "$srcdir"/include/lockstep/*.h \
    "$srcdir"/include/lockstep/*.h.in 2>/dev/null |
    grep -o '^LK_API[^(]*(' | sed 's/^.*[ *]\([A-Za-z_][A-Za-z0-9_]*\)[ ]*($/\1/' |
    sort -u > "$tmp/declared"
if cmp -s "$tmp/declared" "$tmp/list"; then
    ok 0 "every LK_API function of the headers is listed, and only those ($(wc -l < "$tmp/declared"))"
else
    ok 1 "every LK_API function of the headers is listed, and only those"
    comm -23 "$tmp/declared" "$tmp/list" | sed 's/^/# declared LK_API but not listed: /'
    comm -13 "$tmp/declared" "$tmp/list" | sed 's/^/# listed but not declared LK_API: /'
fi

# debian/liblockstep0.symbols: " name@NODE version" lines.
deb="$srcdir/debian/liblockstep0.symbols"
if [ ! -f "$deb" ]; then
    skip "debian/liblockstep0.symbols names the listed symbols" "no $deb (a release tarball)"
else
    sed -n 's/^ \([A-Za-z_][A-Za-z0-9_]*\)@\([A-Za-z0-9_]*\) .*/\1 \2/p' "$deb" |
        awk -v node="$node" '$1 != node { print $1 " " $2 }' | sort > "$tmp/deb"
    sed "s/\$/ $node/" "$tmp/list" > "$tmp/list_node"
    if cmp -s "$tmp/deb" "$tmp/list_node"; then
        ok 0 "debian/liblockstep0.symbols names the listed symbols at $node"
    else
        ok 1 "debian/liblockstep0.symbols names the listed symbols at $node"
        diff "$tmp/list_node" "$tmp/deb" | sed 's/^/# /'
    fi
fi

# A driver module is loaded RTLD_LOCAL (a Python process loads liblockstep
# that way too): it may import nothing of liblockstep's, only take what
# <lockstep/driver.h> and lk_host give it.
mod=backends/cuda/.libs/lockstep-cuda.so
if [ ! -f "$mod" ]; then
    skip "the CUDA driver module imports no lk_ symbol" "not built (configure --with-cuda)"
else
    imports=$($nm_cmd -D --undefined-only "$mod" | awk '$2 ~ /^lk_/ { print $2 }')
    [ -z "$imports" ]
    ok $? "the CUDA driver module imports no lk_ symbol${imports:+ (imports: $(echo $imports))}"
fi

