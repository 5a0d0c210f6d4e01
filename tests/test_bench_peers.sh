#!/bin/sh
# `lockstep bench` and its peers (TAP), with no timing asserted: the
# binary links no peer (OpenBLAS and the ternary kernels are loaded at run
# time); with an empty peers directory each ternary peer's case is a skip
# row, and a skipped entry in --json, that names the peer, the directory
# and scripts/get-peers.sh; with a stand-in for the downloaded libraries
# (tests/peers/standin_peers.c) both ternary peers load, agree bit for bit
# with Lockstep and get a time and a ratio; where libopenblas.so.0 is
# installed the f32 GEMV is timed against OpenBLAS's sgemv.
#
# Run from the build directory (as `make check` does; srcdir, which
# automake sets, finds tests/tap.sh); LOCKSTEP names another `lockstep`
# binary.
set -u
LC_ALL=C
export LC_ALL
echo "1..12"
. "${srcdir:-.}/tests/tap.sh"
tap_lockstep
tap_tmp bench-peers

# The binary libtool wraps, where it does.
bin=$lockstep
d=$(dirname "$lockstep")
[ -f "$d/.libs/$(basename "$lockstep")" ] && bin=$d/.libs/$(basename "$lockstep")
if command -v readelf >/dev/null 2>&1 && readelf -d "$bin" >"$tmp/dyn" 2>/dev/null; then
    ! grep -E 'NEEDED.*(openblas|cblas|ggml|llama)' "$tmp/dyn" >/dev/null
    ok $? "lockstep needs no peer library at link time"
else
    skip "lockstep needs no peer library at link time" "no readelf, or $bin is not ELF"
fi

mkdir "$tmp/nopeers"
cases="--case ternary.2560x2560.m1.tq2_0 --case ternary.2560x2560.m1.i2_s --case linear.f32.2560x2560.m1"
# shellcheck disable=SC2086 # the case list splits on purpose
LOCKSTEP_PEERS_DIR=$tmp/nopeers lk bench --reps 1 $cases >"$tmp/text" 2>"$tmp/text.err"
ok $? "lockstep bench without the ternary peers exits 0"
has "$tmp/text" "ternary.2560x2560.m1.tq2_0" &&
    has "$tmp/text" "skip: llama.cpp TQ2_0: not found in $tmp/nopeers; run scripts/get-peers.sh"
ok $? "the TQ2_0 case is a skip row naming the directory and get-peers.sh"
has "$tmp/text" "ternary.2560x2560.m1.i2_s" &&
    has "$tmp/text" "skip: bitnet.cpp I2_S: not found in $tmp/nopeers; run scripts/get-peers.sh"
ok $? "the I2_S case is a skip row naming the directory and get-peers.sh"

# shellcheck disable=SC2086
LOCKSTEP_PEERS_DIR=$tmp/nopeers lk bench --reps 1 --json $cases >"$tmp/json" 2>"$tmp/json.err"
ok $? "the same with --json exits 0"
has "$tmp/json" '{"name": "ternary.2560x2560.m1.tq2_0", "peer": "llama.cpp TQ2_0", "skipped": "llama.cpp TQ2_0: not found in' &&
    has "$tmp/json" '{"name": "ternary.2560x2560.m1.i2_s", "peer": "bitnet.cpp I2_S", "skipped": "bitnet.cpp I2_S: not found in'
ok $? "--json: each absent ternary peer is a skipped entry with the reason"

# OpenBLAS: Debian's libopenblas0 (the bench dlopens libopenblas.so.0).
blas=""
if command -v ldconfig >/dev/null 2>&1 && ldconfig -p 2>/dev/null | grep -q 'libopenblas\.so\.0 '; then
    blas=1
elif [ -x /sbin/ldconfig ] && /sbin/ldconfig -p 2>/dev/null | grep -q 'libopenblas\.so\.0 '; then
    blas=1
fi
row=$(grep '^linear\.f32\.2560x2560\.m1 ' "$tmp/text")
# case, lockstep time, "ms", peer (two words), peer time, "ms", ratio
timed() {
    echo "$row" | awk '$4 == "openblas" && $5 == "sgemv" && $6 + 0 > 0 && $7 == "ms" && $8 + 0 > 0 { f = 1 } END { exit !f }'
}
if [ -n "${LOCKSTEP_RUN:-}" ]; then
    # a cross build's bench under an emulator: the host's ldconfig says
    # nothing of the target's libraries, so either row is right
    if timed; then
        ok 0 "the f32 GEMV is timed against the target's OpenBLAS, with a ratio"
    else
        case $row in *"skip: OpenBLAS: "*) st=0 ;; *) st=1 ;; esac
        ok $st "the f32 GEMV row says why it has no peer (no OpenBLAS for the target)"
    fi
    skip "the other OpenBLAS case" "only one of them applies under an emulator"
elif [ -z "$blas" ]; then
    skip "the f32 GEMV is timed against OpenBLAS" "libopenblas.so.0 is not installed (apt-get install libopenblas0)"
    case $row in *"skip: OpenBLAS: "*) st=0 ;; *) st=1 ;; esac
    ok $st "without OpenBLAS the f32 GEMV row says why it has no peer"
elif has "$tmp/text" "skip: OpenBLAS: left out (configure --without-openblas)"; then
    skip "the f32 GEMV is timed against OpenBLAS" "configured --without-openblas"
    skip "without OpenBLAS the f32 GEMV row says why it has no peer" "OpenBLAS is installed"
else
    timed
    ok $? "the f32 GEMV is timed against OpenBLAS's sgemv, with a ratio"
    skip "without OpenBLAS the f32 GEMV row says why it has no peer" "OpenBLAS is installed"
fi

# The stand-in in a peers directory laid out as get-peers.sh lays it out.
standin=tests/peers/.libs/libstandin-peers.so
descs="the stand-in peers run (each passed the bit-exact check)|the header names the TQ2_0 library loaded|the TQ2_0 case has the peer's time and a ratio|the I2_S case has the peer's time and a ratio"
if [ ! -f "$standin" ]; then
    echo "$descs" | tr '|' '\n' | while read -r d; do skip "$d" "no $standin"; done
    n=$((n + 4))
else
    mkdir -p "$tmp/standin/llama.cpp/lib" "$tmp/standin/bitnet/lib"
    ln -s "$(pwd)/$standin" "$tmp/standin/llama.cpp/lib/libggml-cpu.so"
    ln -s "$(pwd)/$standin" "$tmp/standin/bitnet/lib/libbitnet-peer.so"
    LOCKSTEP_PEERS_DIR=$tmp/standin lk bench --reps 1 --case ternary.2560x2560.m1.tq2_0 \
        --case ternary.2560x2560.m1.i2_s >"$tmp/standin.out" 2>"$tmp/standin.err"
    st=$?
    if has "$tmp/standin.out" "which this CPU lacks"; then
        echo "$descs" | tr '|' '\n' | while read -r d; do skip "$d" "the CPU lacks AVX2"; done
        n=$((n + 4))
    else
        ok $st "the stand-in peers run (each passed the bit-exact check)"
        has "$tmp/standin.out" "peer: llama.cpp TQ2_0 from ggml stand-in ($tmp/standin/llama.cpp/lib/libggml-cpu.so)"
        ok $? "the header names the TQ2_0 library loaded"
        # case, lockstep time, "ms", peer (two words), peer time, "ms", ratio
        grep '^ternary\.2560x2560\.m1\.tq2_0 ' "$tmp/standin.out" |
            awk '$4 == "llama.cpp" && $5 == "TQ2_0" && $6 + 0 > 0 && $7 == "ms" && $8 + 0 > 0 { f = 1 } END { exit !f }'
        ok $? "the TQ2_0 case has the peer's time and a ratio"
        grep '^ternary\.2560x2560\.m1\.i2_s ' "$tmp/standin.out" |
            awk '$4 == "bitnet.cpp" && $5 == "I2_S" && $6 + 0 > 0 && $7 == "ms" && $8 + 0 > 0 { f = 1 } END { exit !f }'
        ok $? "the I2_S case has the peer's time and a ratio"
    fi
fi
