# Tests: TAP programs run through automake's tap-driver.sh.
#
# Add a test by appending, e.g.
#   check_PROGRAMS += tests/test_foo
#   TESTS += tests/test_foo
#   tests_test_foo_LDADD = liblockstep.la
# Every test runs with LOCKSTEP_DRIVER_PATH pointing at the uninstalled
# test-only driver modules (tests/drivers), so "test:0" is one of its
# devices; append further module directories (a CUDA module) to
# tests_driver_path.
LOG_DRIVER = env AM_TAP_AWK='$(AWK)' $(SHELL) $(top_srcdir)/build-aux/tap-driver.sh
TEST_EXTENSIONS = .sh
SH_LOG_DRIVER = $(LOG_DRIVER)
tests_driver_path = $(abs_top_builddir)/tests/drivers/.libs$(lk_cuda_driver_path)
AM_TESTS_ENVIRONMENT = \
	LOCKSTEP_DRIVER_PATH='$(tests_driver_path)'; export LOCKSTEP_DRIVER_PATH;
noinst_HEADERS += tests/tap.h tests/devices.h tests/ref_host.h

# Test-only driver modules: built for `make check`, never installed.  A
# module without -rpath would be a convenience archive, hence the dummy one.
tests_module_ldflags = -module -avoid-version -shared -no-undefined \
	-rpath $(abs_top_builddir)/tests/drivers
check_LTLIBRARIES += tests/drivers/lockstep-testdrv.la \
	tests/drivers/lockstep-badabi.la tests/drivers/lockstep-testdup.la
tests_drivers_lockstep_testdrv_la_SOURCES = tests/drivers/testdrv.c
tests_drivers_lockstep_testdrv_la_LDFLAGS = $(AM_LDFLAGS) $(tests_module_ldflags)
tests_drivers_lockstep_testdrv_la_LIBADD = backends/ref/libref.la
tests_drivers_lockstep_badabi_la_SOURCES = tests/drivers/inert.c
tests_drivers_lockstep_badabi_la_CPPFLAGS = $(AM_CPPFLAGS) \
	-DINERT_ABI='(LK_DRIVER_ABI_VERSION + 1)' -DINERT_NAME='"badabi"' \
	-DINERT_DESCRIPTION='"test-only: built for the next driver ABI"'
tests_drivers_lockstep_badabi_la_LDFLAGS = $(AM_LDFLAGS) $(tests_module_ldflags)
tests_drivers_lockstep_testdup_la_SOURCES = tests/drivers/inert.c
tests_drivers_lockstep_testdup_la_CPPFLAGS = $(AM_CPPFLAGS) \
	-DINERT_ABI=LK_DRIVER_ABI_VERSION -DINERT_NAME='"test"' \
	-DINERT_DESCRIPTION='"test-only: a second driver named test"'
tests_drivers_lockstep_testdup_la_LDFLAGS = $(AM_LDFLAGS) $(tests_module_ldflags)

# The public API: every function's bad inputs, and the happy paths.
check_PROGRAMS += tests/test_api
TESTS += tests/test_api
tests_test_api_LDADD = liblockstep.la

# Driver modules: loading, refusing, the search path, test:0 against ref.
check_PROGRAMS += tests/test_plugin
TESTS += tests/test_plugin
tests_test_plugin_LDADD = liblockstep.la

# The contract matrix (tools/matrix.h) on every device against the
# reference; batch, run-to-run and thread-count invariance; a hostile
# caller (FTZ/DAZ, round-toward-zero).  tests/test_install.sh is run by CI
# against an installed copy (`make install DESTDIR=...`), not by `make check`.
check_PROGRAMS += tests/test_contract tests/test_invariance tests/test_hostile
TESTS += tests/test_contract tests/test_invariance tests/test_hostile
tests_test_contract_LDADD = tools/libmatrix.la liblockstep.la
tests_test_invariance_LDADD = tools/libmatrix.la liblockstep.la
tests_test_hostile_LDADD = tools/libmatrix.la liblockstep.la
EXTRA_DIST += tests/test_install.sh
# what the shell tests (tests/*.sh) share, sourced
EXTRA_DIST += tests/tap.sh

# The reference GEMM, integer GEMM, quantisation, packing and binary
# kernels against independent computations: links the kernels alone, with
# its own lk_error, so it does not depend on the core.
check_PROGRAMS += tests/test_ref_kernels
TESTS += tests/test_ref_kernels
tests_test_ref_kernels_LDADD = backends/ref/libref.la

# The reference reductions, norms and softmax against a literal version of
# numerics.md sections 5 and 6, edge values, and float64 accuracy bounds.
check_PROGRAMS += tests/test_ref_reduce
TESTS += tests/test_ref_reduce
tests_test_ref_reduce_LDADD = backends/ref/libref.la

# The transcendental functions and the reference unary op (numerics.md
# section 7): special values, 2M sampled inputs per function against
# double precision with the bounds of section 10.
noinst_HEADERS += tests/transcendental_ref.h
check_PROGRAMS += tests/test_transcendental
TESTS += tests/test_transcendental
tests_test_transcendental_LDADD = backends/ref/libref.la

# Every f32 input of each transcendental function (2^32 x 8, minutes):
# `make check-exhaustive`, not part of `make check` (which only builds it).
check_PROGRAMS += tests/exhaustive
tests_exhaustive_CFLAGS = $(AM_CFLAGS) $(OPENMP_CFLAGS)
tests_exhaustive_LDFLAGS = $(AM_LDFLAGS) $(OPENMP_CFLAGS)
tests_exhaustive_LDADD = backends/ref/libref.la
check-exhaustive: tests/exhaustive$(EXEEXT)
	tests/exhaustive$(EXEEXT)
.PHONY: check-exhaustive

# The tensor-core tier's CPU model (backends/ref/mma_model.c): hand-computed
# MMA steps, MMA-Sim's algorithm written independently, float64 bounds.
check_PROGRAMS += tests/test_mma_model
TESTS += tests/test_mma_model
tests_test_mma_model_LDADD = backends/ref/libref.la

# Prepared weights (include/lockstep/weights.h): lk_linear and
# lk_ternary_linear against lk_gemm and lk_ternary_gemm on every device.
check_PROGRAMS += tests/test_weights
TESTS += tests/test_weights
tests_test_weights_LDADD = liblockstep.la

# The transformer ops (numerics.md section 12): sin/cos accuracy, the
# reference against float64, attention's batch invariance and causal
# limit and embedding's id check on every device, argument errors.
check_PROGRAMS += tests/test_model_ops
TESTS += tests/test_model_ops
tests_test_model_ops_LDADD = liblockstep.la

# Attention's chunked order and the paged KV cache (numerics.md 12.3,
# 12.3.1) on every device against the reference, bit for bit: chunk
# boundaries, edge rules, prefill/decode/ragged/shared-prefix invariance,
# lk_kv_write_paged, refused tables; full BitNet shapes on a GPU unless
# LOCKSTEP_CUDA_TEST_SMALL is set.
check_PROGRAMS += tests/test_attention
TESTS += tests/test_attention
tests_test_attention_LDADD = liblockstep.la

# lk_rmsnorm_quantize is lk_rmsnorm + lk_quantize_act bit for bit on
# every device; its argument errors write nothing.
check_PROGRAMS += tests/test_rmsnorm_quantize
TESTS += tests/test_rmsnorm_quantize
tests_test_rmsnorm_quantize_LDADD = liblockstep.la

# lk_rmsnorm_ternary_linear is lk_rmsnorm_quantize then lk_ternary_linear
# bit for bit (y, xq and xs) on every device, in graphs too; its argument
# errors write nothing.
check_PROGRAMS += tests/test_norm_linear
TESTS += tests/test_norm_linear
tests_test_norm_linear_LDADD = liblockstep.la

# lk_glu is lk_unary into f32 then lk_binary MUL bit for bit on every
# device, for every unary op; its argument errors write nothing.
check_PROGRAMS += tests/test_glu
TESTS += tests/test_glu
tests_test_glu_LDADD = liblockstep.la

# Softmax and log-softmax on every device, bit for bit against the
# reference where the kernels' short exp hands over to the full one
# (every t of the band around k = -125, edges, special rows).
check_PROGRAMS += tests/test_softmax
TESTS += tests/test_softmax
tests_test_softmax_LDADD = liblockstep.la

# Outputs of 32 MiB and more (the CPU kernels' non-temporal stores):
# norms and softmax against the reference, bit for bit.
check_PROGRAMS += tests/test_stream
TESTS += tests/test_stream
tests_test_stream_LDADD = liblockstep.la

# Graph capture and replay on every device (a CUDA graph on GPUs, the
# core's recording elsewhere), bit for bit against the eager calls.
check_PROGRAMS += tests/test_graph
TESTS += tests/test_graph
tests_test_graph_LDADD = liblockstep.la

# lk_bitnet_decode is the composition of its ops bit for bit on every
# device (random small models over several steps, edge rows, batch
# invariance), in graphs too; its argument errors write nothing.
check_PROGRAMS += tests/test_bitnet
TESTS += tests/test_bitnet
tests_test_bitnet_LDADD = liblockstep.la

# A CPU queue of 4 threads in a process that may not create threads (a
# forked child under RLIMIT_NPROC = 1): the op succeeds on the threads
# there are, with the reference's bits, and the process lives on.
check_PROGRAMS += tests/test_thread_limits
TESTS += tests/test_thread_limits
tests_test_thread_limits_LDADD = liblockstep.la

# The public conversion helpers under every rounding mode (and FTZ/DAZ on
# x86) against lk_convert: sampled here, all 2^32 f32 inputs in
# `make check-exhaustive` (LOCKSTEP_TEST_FULL=1).
check_PROGRAMS += tests/test_fp_helpers
TESTS += tests/test_fp_helpers
tests_test_fp_helpers_LDADD = liblockstep.la -lm
check-exhaustive: check-fp-helpers-full
check-fp-helpers-full: tests/test_fp_helpers$(EXEEXT)
	LOCKSTEP_TEST_FULL=1 tests/test_fp_helpers$(EXEEXT)
.PHONY: check-fp-helpers-full

# lk_queue_create's options (native_stream, num_threads) as docs/api.md
# states them, on every device.
check_PROGRAMS += tests/test_queue_opts
TESTS += tests/test_queue_opts
tests_test_queue_opts_LDADD = liblockstep.la

# Fuzzing (docs/internals/fuzzing.md): scripts/fuzz.sh builds the libFuzzer
# targets of tests/fuzz/ with clang.  Here each target is linked with a
# plain main() instead, which replays the built-in inputs and every saved
# input tests/fuzz/regressions/<target>-*, so `make check` (and CI's
# sanitizer build) runs each input that once crashed a target.
EXTRA_DIST += scripts/fuzz.sh docs/internals/fuzzing.md tests/fuzz/make_corpus.c
noinst_HEADERS += tests/fuzz/fuzz.h
check_PROGRAMS += tests/fuzz/replay_gguf tests/fuzz/replay_tokenizer tests/fuzz/replay_ops \
	tests/fuzz/replay_validate
TESTS += tests/fuzz/replay_gguf tests/fuzz/replay_tokenizer tests/fuzz/replay_ops \
	tests/fuzz/replay_validate
tests_fuzz_replay_gguf_SOURCES = tests/fuzz/replay.c tests/fuzz/fuzz_gguf.c
tests_fuzz_replay_gguf_CPPFLAGS = $(AM_CPPFLAGS) -DREPLAY_TARGET='"gguf"'
tests_fuzz_replay_gguf_LDADD = examples/bitnet/libbitnet.la liblockstep.la
tests_fuzz_replay_tokenizer_SOURCES = tests/fuzz/replay.c tests/fuzz/fuzz_tokenizer.c
tests_fuzz_replay_tokenizer_CPPFLAGS = $(AM_CPPFLAGS) -DREPLAY_TARGET='"tokenizer"'
tests_fuzz_replay_tokenizer_LDADD = examples/bitnet/libbitnet.la liblockstep.la
tests_fuzz_replay_ops_SOURCES = tests/fuzz/replay.c tests/fuzz/fuzz_ops.c
tests_fuzz_replay_ops_CPPFLAGS = $(AM_CPPFLAGS) -DREPLAY_TARGET='"ops"'
tests_fuzz_replay_ops_LDADD = liblockstep.la
# fuzz_validate.c is fuzz_ops.c in its fast validator mode
tests_fuzz_replay_validate_SOURCES = tests/fuzz/replay.c tests/fuzz/fuzz_validate.c
tests_fuzz_replay_validate_CPPFLAGS = $(AM_CPPFLAGS) -DREPLAY_TARGET='"validate"'
tests_fuzz_replay_validate_LDADD = liblockstep.la
EXTRA_DIST += tests/fuzz/fuzz_ops.c
# the saved inputs (one line each, as they are added)
EXTRA_DIST += tests/fuzz/regressions/README \
	tests/fuzz/regressions/ops-softmax-null-scratch-offset \
	tests/fuzz/regressions/ops-norm-prefetch-null-base \
	tests/fuzz/regressions/ops-reduce-null-buffer-offset \
	tests/fuzz/regressions/validate-ternary-gemm-null-prepared-row \
	tests/fuzz/regressions/validate-unary-batch-stride-bytes-overflow

# The exported symbols against core/liblockstep.map, the headers and
# debian/liblockstep0.symbols; NM is configure's nm for the host.
TESTS += tests/test_symbols.sh
EXTRA_DIST += tests/test_symbols.sh
AM_TESTS_ENVIRONMENT += NM='$(NM)'; export NM;

# The version repeated outside configure.ac (python/, debian/changelog,
# NEWS) follows AC_INIT's.
TESTS += tests/test_version.sh
EXTRA_DIST += tests/test_version.sh

# The communicator under mpirun: collectives against the one-device
# reference, `lockstep demo --tp/--pp` digests, a rank that exits; SKIP
# without --with-mpi.  test_comm is run by the script, not on its own.
check_PROGRAMS += tests/test_comm
tests_test_comm_LDADD = liblockstep.la -lm
TESTS += tests/test_comm.sh
EXTRA_DIST += tests/test_comm.sh
AM_TESTS_ENVIRONMENT += MPIRUN='$(MPIRUN)'; export MPIRUN;
# The training ops (backward ops, optimizer steps) on every device against
# the reference, bit for bit.
check_PROGRAMS += tests/test_train_ops
TESTS += tests/test_train_ops
tests_test_train_ops_LDADD = liblockstep.la -lm
