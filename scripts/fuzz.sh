#!/bin/sh
# libFuzzer targets (tests/fuzz/): build them with clang against the
# library's sources under ASan and UBSan, make the seed corpus, replay the
# saved regressions, then fuzz each target for a bounded time.  Fails on a
# crash, a leak, a sanitizer report or a timeout.  docs/internals/fuzzing.md
# says how to run longer and what to do with a crash.
#   scripts/fuzz.sh                  every target, 60 s each
#   scripts/fuzz.sh --seconds N      N s each (0: build and replay only)
#   scripts/fuzz.sh --jobs J         J fuzzing processes per target
#   scripts/fuzz.sh gguf ops         some of the targets (gguf tokenizer ops
#                                    validate)
#   scripts/fuzz.sh --runs N gguf    stop each target after N inputs instead
#                                    (with --seconds N as the time limit)
# Builds in _build-fuzz/ (corpora in _build-fuzz/corpus/, crashes saved in
# _build-fuzz/crashes/).  Needs clang and libFuzzer's runtime:
fuzz_pkgs="clang libclang-rt-14-dev"
set -e
cd "$(dirname "$0")/.."
src=$(pwd)
seconds=60
jobs=1
runs=
targets=""
while [ $# -gt 0 ]; do
    case "$1" in
        --seconds) seconds=$2; shift ;;
        --jobs) jobs=$2; shift ;;
        --runs) runs=$2; shift ;;
        gguf|tokenizer|ops|validate) targets="$targets $1" ;;
        *) echo "fuzz.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
[ -n "$targets" ] || targets="gguf tokenizer ops validate"
command -v clang >/dev/null 2>&1 || sh scripts/deps.sh $fuzz_pkgs
[ -x configure ] || ./autogen.sh
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
dir=_build-fuzz
mkdir -p "$dir"
cd "$dir"
# The library as usual, but every object instrumented for the fuzzer.
[ -f Makefile ] || ../configure CC=clang --disable-shared \
    CFLAGS="-O1 -g $san -fsanitize=fuzzer-no-link" LDFLAGS="$san" >configure.out
make -j"$(nproc)" liblockstep.la examples/bitnet/libbitnet.la >make.out
deps=$(sh -c '. ./liblockstep.la; echo "$dependency_libs"')
inc="-I$src -I$src/include -Iinclude -I."
link() { # name source...
    out=$1; shift
    clang -O1 -g $san -fsanitize=fuzzer $inc -o "$out" "$@" \
        examples/bitnet/.libs/libbitnet.a .libs/liblockstep.a $deps -lm
}
link fuzz_gguf "$src/tests/fuzz/fuzz_gguf.c"
link fuzz_tokenizer "$src/tests/fuzz/fuzz_tokenizer.c"
link fuzz_ops "$src/tests/fuzz/fuzz_ops.c"
link fuzz_validate "$src/tests/fuzz/fuzz_validate.c"
clang -O1 -g $san $inc -o make_corpus "$src/tests/fuzz/make_corpus.c" \
    examples/bitnet/.libs/libbitnet.a .libs/liblockstep.a $deps -lm
rm -rf seeds
mkdir -p seeds/gguf seeds/tokenizer seeds/ops crashes
./make_corpus seeds
# the validator's target reads the ops target's input format
mkdir -p seeds/validate && cp seeds/ops/* seeds/validate/
status=0
for t in $targets; do
    mkdir -p "corpus/$t"
    # the saved regressions first: each must run clean
    regs=$(ls "$src/tests/fuzz/regressions/$t-"* 2>/dev/null || true)
    if [ -n "$regs" ]; then
        echo "fuzz.sh: $t: replaying $(echo "$regs" | wc -w) regression inputs"
        ./fuzz_$t $regs >"replay-$t.log" 2>&1 || { cat "replay-$t.log"; status=1; continue; }
    fi
    [ "$seconds" -gt 0 ] || continue
    echo "fuzz.sh: $t: $seconds s, $jobs job(s)"
    # -timeout: one input may take at most 10 s; -rss_limit_mb: 2 GiB
    par=""
    [ "$jobs" -gt 1 ] && par="-jobs=$jobs -workers=$jobs"
    # GGUF inputs up to 12 kB: the I2_S model seed fits, and runs are
    # twenty times faster than at the TQ2_0 seed's 116 kB
    [ "$t" = gguf ] && par="$par -max_len=12000"
    [ -n "$runs" ] && par="$par -runs=$runs"
    if ./fuzz_$t -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 $par \
           -print_final_stats=1 -artifact_prefix="crashes/$t-" \
           "corpus/$t" "seeds/$t" >"fuzz-$t.log" 2>&1; then
        grep -h -e '^stat::' -e '^Done' "fuzz-$t.log" | sed "s/^/fuzz.sh: $t: /" || true
    else
        tail -n 60 "fuzz-$t.log"
        echo "fuzz.sh: $t: FAILED (the input is in $dir/crashes/)"
        status=1
    fi
done
exit $status
