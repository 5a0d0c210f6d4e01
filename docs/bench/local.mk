# `make bench-report` (issue 7): `lockstep bench --json` on this machine's
# CPU devices and, in a build with CUDA, lockstep-cuda-bench --json (cuBLAS
# and the copy as peers) on its GPUs, written to docs/bench/ in the source
# tree as a Markdown page (index.md) and gnuplot PNGs; the README shows
# them.  BENCH_FLAGS (e.g. --quick) goes to every bench run,
# BENCH_DEVICES="cpu:avx2 cuda:0" picks the devices (default: every one
# that is not emulated, the reference excepted).  scripts/bench-report.sh
# -j DIR re-plots saved JSON files, e.g. those of another machine.
BENCH_DEVICES =
if LK_HAVE_CUDA
bench_report_cuda = bench/cuda/lockstep-cuda-bench$(EXEEXT)
endif
bench-report: tools/lockstep$(EXEEXT) $(bench_report_cuda)
	devs='$(BENCH_DEVICES)'; cb='$(bench_report_cuda)'; \
	$(SHELL) $(top_srcdir)/scripts/bench-report.sh -l tools/lockstep$(EXEEXT) \
	  $${cb:+-c "$$cb"} -o $(top_srcdir)/docs/bench -f '$(BENCH_FLAGS)' $${devs:+-d "$$devs"}
.PHONY: bench-report
EXTRA_DIST += scripts/bench-report.sh docs/bench

# The report's script on saved JSON and stand-ins for the benchmarks (TAP):
# its page, plots, CUDA devices and failures, no benchmark run.
TESTS += tests/test_bench_report.sh
EXTRA_DIST += tests/test_bench_report.sh
