# Benchmarks (issue 3): the harness behind `lockstep bench`, linked into
# tools/lockstep.  `make bench` runs it (BENCH_FLAGS="--quick" for a short
# run).  Timing lives here only, never in the tests.
noinst_LTLIBRARIES += bench/libbench.la
bench_libbench_la_SOURCES = \
	bench/bench.c bench/bench.h \
	bench/bench_cases.c bench/bench_cases.h \
	bench/peers.c bench/peers.h
bench_libbench_la_CFLAGS = $(AM_CFLAGS) $(OPENMP_CFLAGS) $(OPENBLAS_CFLAGS)
bench_libbench_la_CPPFLAGS = $(AM_CPPFLAGS)
bench_libbench_la_LIBADD = $(OPENBLAS_LIBS) $(OPENMP_CFLAGS)
tools_lockstep_LDADD += bench/libbench.la

BENCH_FLAGS =
bench: tools/lockstep$(EXEEXT)
	tools/lockstep$(EXEEXT) bench $(BENCH_FLAGS)
.PHONY: bench

# The public AVX2 ternary kernels (llama.cpp TQ2_0, bitnet.cpp I2_S) that
# the ternary GEMV is compared with in cache: x86 only, built with the AVX2
# flags into the bench alone (never into liblockstep); the bench checks the
# CPU before calling them.  Their licences are next to them.
EXTRA_DIST += bench/peers/LICENSE.llama.cpp bench/peers/LICENSE.BitNet
noinst_HEADERS += bench/peers/ternary_peers.h
lk_bench_t2_peer_files = bench/peers/ternary_peers.c bench/peers/tq2_0.c bench/peers/i2_s.c
if LK_ISA_AVX2
noinst_LTLIBRARIES += bench/libbench_t2peers.la
bench_libbench_t2peers_la_SOURCES = $(lk_bench_t2_peer_files)
bench_libbench_t2peers_la_CFLAGS = $(AM_CFLAGS) $(OPENMP_CFLAGS) $(ISA_AVX2_CFLAGS)
bench_libbench_la_CPPFLAGS += -DLK_BENCH_TERNARY_PEERS
bench_libbench_la_LIBADD += bench/libbench_t2peers.la
else
EXTRA_DIST += $(lk_bench_t2_peer_files)
endif
