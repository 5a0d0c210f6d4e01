# Benchmarks: the harness behind `lockstep bench`, linked into
# tools/lockstep.  `make bench` runs it (BENCH_FLAGS="--quick" for a short
# run).  Timing lives here only, never in the tests.
#
# The peers are not built or linked here: OpenBLAS (libopenblas.so.0) and
# the ternary kernels of llama.cpp and bitnet.cpp (built outside the tree
# by scripts/get-peers.sh) are loaded at run time where present, and the
# bench says "skip" with the reason where not.  bench/peers/ holds only
# Lockstep's side: the declarations of the interface used and the adapters
# that put Lockstep's data in each peer's layout.
noinst_LTLIBRARIES += bench/libbench.la
bench_libbench_la_SOURCES = \
	bench/bench.c bench/bench.h \
	bench/bench_cases.c bench/bench_cases.h \
	bench/peers.c bench/peers.h \
	bench/peers/ggml_abi.h \
	bench/peers/ternary_peers.c bench/peers/ternary_peers.h \
	bench/peers/tq2_0_adapter.c bench/peers/i2_s_adapter.c
bench_libbench_la_CFLAGS = $(AM_CFLAGS) $(OPENMP_CFLAGS)
bench_libbench_la_CPPFLAGS = $(AM_CPPFLAGS)
bench_libbench_la_LIBADD = $(OPENMP_CFLAGS)
tools_lockstep_LDADD += bench/libbench.la
EXTRA_DIST += docs/bench.md scripts/get-peers.sh

BENCH_FLAGS =
bench: tools/lockstep$(EXEEXT)
	tools/lockstep$(EXEEXT) bench $(BENCH_FLAGS)
.PHONY: bench

# `lockstep bench` without its downloaded peers (TAP): each absent ternary
# peer is a skip row with the reason, OpenBLAS is compared where installed.
TESTS += tests/test_bench_peers.sh
EXTRA_DIST += tests/test_bench_peers.sh
