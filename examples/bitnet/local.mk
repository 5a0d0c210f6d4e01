# The BitNet b1.58 example: a GGUF reader and writer, the decoder
# built on Lockstep's ops, and a small SHA-256.  One convenience library that
# `lockstep demo` (tools/cmd_demo.c) and the tests link; compiled as a user
# would compile it (public headers only, no internal defines).
noinst_LTLIBRARIES += examples/bitnet/libbitnet.la
examples_bitnet_libbitnet_la_SOURCES = \
	examples/bitnet/arch.h \
	examples/bitnet/arch.c \
	examples/bitnet/gguf.h \
	examples/bitnet/gguf.c \
	examples/bitnet/gguf_write.c \
	examples/bitnet/model.h \
	examples/bitnet/model.c \
	examples/bitnet/kvpages.h \
	examples/bitnet/kvpages.c \
	examples/bitnet/sha256.h \
	examples/bitnet/sha256.c \
	examples/bitnet/shard.h \
	examples/bitnet/shard.c \
	examples/bitnet/shard_weights.c \
	examples/bitnet/tokenizer.h \
	examples/bitnet/tokenizer.c \
	examples/bitnet/vocab.h \
	examples/bitnet/vocab.c
examples_bitnet_libbitnet_la_CPPFLAGS = $(EXAMPLES_CPPFLAGS)
examples_bitnet_libbitnet_la_LIBADD = -lm -lpthread

# `lockstep demo` (tools/cmd_demo.c) runs the model.
tools_lockstep_LDADD += examples/bitnet/libbitnet.la

# The GGUF reader: round trips of every type, malformed files, a fuzz loop.
check_PROGRAMS += tests/test_gguf
TESTS += tests/test_gguf
tests_test_gguf_LDADD = examples/bitnet/libbitnet.la liblockstep.la

# The model loader refuses meaningless hyper-parameters (NaN RoPE base,
# heads that do not divide, a vocabulary the tensors disagree with, ...)
# at load time.
check_PROGRAMS += tests/test_gguf_hparams
TESTS += tests/test_gguf_hparams
tests_test_gguf_hparams_LDADD = examples/bitnet/libbitnet.la liblockstep.la -lm

# The prompt encoder (byte-level BPE): exact ids, round trips, malformed
# metadata, a fuzz loop.
check_PROGRAMS += tests/test_tokenizer
TESTS += tests/test_tokenizer
tests_test_tokenizer_LDADD = examples/bitnet/libbitnet.la liblockstep.la

# The prompt encoder against llama.cpp's tokenizer test vectors (its
# vocabulary-only GGUF files, fetched by scripts/get-peers.sh; a SKIP
# without them).
check_PROGRAMS += tests/test_tokenizer_vectors
TESTS += tests/test_tokenizer_vectors
tests_test_tokenizer_vectors_LDADD = examples/bitnet/libbitnet.la liblockstep.la

# The demo model against llama.cpp on GGUF files of each architecture:
# top-k ids and the largest logit difference, through a small driver of
# llama.cpp's library that scripts/get-peers.sh builds outside the tree
# (a SKIP without it).
check_PROGRAMS += tests/test_llama_fidelity
TESTS += tests/test_llama_fidelity
tests_test_llama_fidelity_LDADD = examples/bitnet/libbitnet.la liblockstep.la -lm
EXTRA_DIST += tests/peers/llama_logits.c

# The demo model on every device, bit for bit, batch 1 against batch 4, and
# through GGUF files of each ternary type.
check_PROGRAMS += tests/test_demo
TESTS += tests/test_demo
tests_test_demo_LDADD = examples/bitnet/libbitnet.la liblockstep.la

# `lockstep demo --prompt` end to end: the demo's GGUF file and its small
# tokenizer, ids known by hand, the same bits on every local device, the
# usage errors.  A shell script (TAP) run from the build directory.
TESTS += tests/test_demo_prompt.sh
EXTRA_DIST += tests/test_demo_prompt.sh

# The model's paged KV cache and ragged calls: a token's logits are the same
# bits one-shot, chunked, decoded, from shared pages and in a ragged call of
# 64, on every device; bad input is refused and changes nothing.
check_PROGRAMS += tests/test_model_invariance
TESTS += tests/test_model_invariance
tests_test_model_invariance_LDADD = examples/bitnet/libbitnet.la liblockstep.la
