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
EXTRA_DIST += scripts/get-peers.sh

BENCH_FLAGS =
bench: tools/lockstep$(EXEEXT)
	tools/lockstep$(EXEEXT) bench $(BENCH_FLAGS)
.PHONY: bench

# `make bench-report`: `lockstep bench --json` on this machine's CPU
# devices and, in a build with CUDA, lockstep-cuda-bench --json (cuBLAS and
# the copy as peers) on its GPUs, written to bench-report/ in the build
# tree as a Markdown page (index.md), gnuplot PNGs and the JSON.
# BENCH_FLAGS (e.g. --quick) goes to every bench run, BENCH_DEVICES="cpu:avx2
# cuda:0" picks the devices (default: every one that is not emulated, the
# reference excepted).  scripts/bench-report.sh -j DIR re-plots saved JSON
# files, e.g. those of another machine.
#
# `make bench-snapshot` copies the report's plots to docs/performance/ in
# the source tree, the snapshot the README shows: the one deliberate way a
# report reaches the tree.  A plot the report lacks (ratio-gpu.png without
# a GPU) keeps the snapshot's previous one, and says so.
BENCH_DEVICES =
bench_report_dir = bench-report
bench_snapshot_plots = ratio.png ratio-gpu.png compute.png bandwidth.png
if LK_HAVE_CUDA
bench_report_cuda = bench/cuda/lockstep-cuda-bench$(EXEEXT)
endif
bench-report: tools/lockstep$(EXEEXT) $(bench_report_cuda)
	devs='$(BENCH_DEVICES)'; cb='$(bench_report_cuda)'; \
	$(SHELL) $(top_srcdir)/scripts/bench-report.sh -l tools/lockstep$(EXEEXT) \
	  $${cb:+-c "$$cb"} -o $(bench_report_dir) -f '$(BENCH_FLAGS)' $${devs:+-d "$$devs"}
bench-snapshot:
	@test -f $(bench_report_dir)/index.md || { \
	  echo "bench-snapshot: no $(bench_report_dir)/index.md: run make bench-report first" >&2; exit 1; }
	$(MKDIR_P) $(top_srcdir)/docs/performance
	@for f in $(bench_snapshot_plots); do \
	  if test -f $(bench_report_dir)/$$f; then \
	    echo "cp $(bench_report_dir)/$$f $(top_srcdir)/docs/performance/$$f"; \
	    cp $(bench_report_dir)/$$f $(top_srcdir)/docs/performance/$$f || exit 1; \
	  else \
	    echo "bench-snapshot: the report has no $$f: docs/performance/$$f stays as it was" >&2; \
	  fi; \
	done
clean-local: clean-bench-report
clean-bench-report:
	-rm -rf $(bench_report_dir)
.PHONY: bench-report bench-snapshot clean-bench-report
EXTRA_DIST += scripts/bench-report.sh

# The report's script on saved JSON and stand-ins for the benchmarks (TAP):
# its page, plots, CUDA devices and failures, no benchmark run.
TESTS += tests/test_bench_report.sh
EXTRA_DIST += tests/test_bench_report.sh

# `lockstep bench` and its peers (TAP): each absent ternary peer is a skip
# row with the reason; a stand-in for the downloaded libraries (plain loops
# over the same layouts, never installed) runs the peer path itself;
# OpenBLAS is compared where installed.
TESTS += tests/test_bench_peers.sh
EXTRA_DIST += tests/test_bench_peers.sh
check_LTLIBRARIES += tests/peers/libstandin-peers.la
tests_peers_libstandin_peers_la_SOURCES = tests/peers/standin_peers.c
tests_peers_libstandin_peers_la_LDFLAGS = $(AM_LDFLAGS) -module -avoid-version -shared \
	-no-undefined -rpath $(abs_top_builddir)/tests/peers
