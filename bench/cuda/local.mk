# The CUDA driver's benchmarks, built with --with-cuda and not installed
# (scripts/gpu-check.sh and `make bench-report` run them).  cuBLAS comes
# from the CUDA toolkit; without it lockstep-cuda-bench times Lockstep and
# the copy alone, and lockstep-tc-bench is not built.

# Every op against cuBLAS and a device-to-device copy:
# bench/cuda/lockstep-cuda-bench [--quick] [--json] [--device cuda:N]
if LK_HAVE_CUDA
noinst_PROGRAMS += bench/cuda/lockstep-cuda-bench
endif
bench_cuda_lockstep_cuda_bench_SOURCES = bench/cuda/bench_cuda.c
bench_cuda_lockstep_cuda_bench_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CFLAGS) $(lk_cuda_test_defs) \
	$(lk_cublas_defs)
bench_cuda_lockstep_cuda_bench_LDADD = bench/cuda/bench_read.lo \
	bench/cuda/bench_handoff.lo liblockstep.la \
	$(CUBLAS_LIBS) $(CUDA_LIBS)
EXTRA_DIST += bench/cuda/bench_read.cu bench/cuda/bench_handoff.cu
bench/cuda/bench_read.lo: backends/cuda/launch.cuh backends/cuda/loads.cuh
if LK_HAVE_CUBLAS
lk_cublas_defs = -DLK_BENCH_CUBLAS
else
lk_cublas_defs =
endif

# The tensor-core tier and ternary prefill against cuBLAS bf16 GEMM:
# bench/cuda/lockstep-tc-bench [--quick] [--case KIND:MxNxK,...]
if LK_HAVE_CUBLAS
noinst_PROGRAMS += bench/cuda/lockstep-tc-bench
endif
bench_cuda_lockstep_tc_bench_SOURCES = bench/cuda/tc_bench.c
bench_cuda_lockstep_tc_bench_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CFLAGS) $(lk_cuda_test_defs)
bench_cuda_lockstep_tc_bench_LDADD = liblockstep.la $(CUBLAS_LIBS) $(CUDA_LIBS)
