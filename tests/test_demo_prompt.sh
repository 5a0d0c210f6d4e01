#!/bin/sh
# `lockstep demo --prompt` end to end (TAP): the GGUF file the demo writes
# carries a small byte-level BPE tokenizer (bn_weights_to_gguf), so a text
# prompt encodes to ids known by hand, runs with the same bits on every
# local device and prints back as text; and the usage errors exit 2 with a
# message that names the problem.
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
tap_tmp demo-prompt
# line FILE PREFIX: the first line of FILE that starts with PREFIX
line() { sed -n "/^$2/{p;q;}" "$1"; }

# The tokenizer of the demo's files (examples/bitnet/model.c, write_vocab):
# ids 0..255 the bytes, merge r is id 256 + r, BOS is vocab - 2 (998 in
# the tiny model's 1000).  "the then" under Llama 3's pre-tokenizer is the
# pieces "the" and " then":
#   t h e:    "h e" (rank 2) -> he;  "t he" (50) -> the = 306
#   G t h e n: "G t" (0) -> Gt;  "h e" (2) -> he;  "Gt he" (6) -> Gthe;
#             "Gthe n" (51) -> Gthen = 307      (G: the space byte)
# and add_bos_token puts BOS first.
want="prompt: 3 tokens: 998 306 307"

lk demo --tiny --write-gguf "$tmp/tiny.gguf" >"$tmp/w.out" 2>&1
ok $? "lockstep demo --tiny --write-gguf writes a model file"

lk demo --model "$tmp/tiny.gguf" --prompt "the then" --all >"$tmp/p.out" 2>&1
rc=$?
ok $rc "--prompt \"the then\" runs (exit status $rc)"
got=$(line "$tmp/p.out" "prompt:")
[ "$got" = "$want" ]
ok $? "the prompt encodes to the ids computed by hand ($got)"
has "$tmp/p.out" "identical logits on" && ! has "$tmp/p.out" "DIFFERENT"
ok $? "identical logits on every local device: $(line "$tmp/p.out" "identical logits")"
has "$tmp/p.out" "batch invariance holds"
ok $? "a sequence alone and in a batch: the same bits"
has "$tmp/p.out" 'text (sequence 0): "<|begin_of_text|>the then" ->'
ok $? "the prompt's tokens print back as its text"

# The same ids given by hand: the same bits.
lk demo --model "$tmp/tiny.gguf" --tokens 998,306,307 --all >"$tmp/t.out" 2>&1
rc=$?
sed -n '/^digest of every step/,/^$/p' "$tmp/p.out" >"$tmp/p.dig"
sed -n '/^digest of every step/,/^$/p' "$tmp/t.out" >"$tmp/t.dig"
[ $rc -eq 0 ] && [ -s "$tmp/p.dig" ] && cmp -s "$tmp/p.dig" "$tmp/t.dig"
ok $? "--tokens 998,306,307 gives the digests of --prompt"

# Usage errors: exit status 2 and a message that names the problem.
lk demo --prompt "the then" >"$tmp/e1.out" 2>&1
rc=$?
[ $rc -eq 2 ] && has "$tmp/e1.out" "--prompt needs --model"
ok $? "--prompt without --model: exit status $rc, $(head -n 1 "$tmp/e1.out")"

lk demo --model "$tmp/tiny.gguf" --prompt "the then" --tokens 1,2 >"$tmp/e2.out" 2>&1
rc=$?
[ $rc -eq 2 ] && has "$tmp/e2.out" "exclude each other"
ok $? "--prompt with --tokens: exit status $rc, $(head -n 1 "$tmp/e2.out")"

# A file without merges: the key renamed in place (same length, so the
# file stays valid GGUF with an unknown key).
sed 's/tokenizer\.ggml\.merges/tokenizer.ggml.mergeX/' "$tmp/tiny.gguf" >"$tmp/nomerges.gguf"
! cmp -s "$tmp/tiny.gguf" "$tmp/nomerges.gguf" &&
    [ "$(wc -c <"$tmp/tiny.gguf")" -eq "$(wc -c <"$tmp/nomerges.gguf")" ]
ok $? "a copy of the file without tokenizer.ggml.merges"
lk demo --model "$tmp/nomerges.gguf" --prompt "the then" >"$tmp/e3.out" 2>&1
rc=$?
[ $rc -eq 2 ] && has "$tmp/e3.out" "no tokenizer.ggml.merges"
ok $? "--prompt on a file without merges: exit status $rc, $(head -n 1 "$tmp/e3.out")"
lk demo --model "$tmp/nomerges.gguf" --tokens 998,306,307 >/dev/null 2>&1
ok $? "--tokens still runs that file"
