# Benchmarks (issue 3): the harness behind `lockstep bench`, linked into
# tools/lockstep.  `make bench` runs it (BENCH_FLAGS="--quick" for a short
# run).  Timing lives here only, never in the tests.
noinst_LTLIBRARIES += bench/libbench.la
bench_libbench_la_SOURCES = \
	bench/bench.c bench/bench.h \
	bench/bench_cases.c bench/bench_cases.h \
	bench/peers.c bench/peers.h
bench_libbench_la_CFLAGS = $(AM_CFLAGS) $(OPENMP_CFLAGS) $(OPENBLAS_CFLAGS)
bench_libbench_la_LIBADD = $(OPENBLAS_LIBS) $(OPENMP_CFLAGS)
tools_lockstep_LDADD += bench/libbench.la
EXTRA_DIST += docs/bench.md

BENCH_FLAGS =
bench: tools/lockstep$(EXEEXT)
	tools/lockstep$(EXEEXT) bench $(BENCH_FLAGS)
.PHONY: bench
