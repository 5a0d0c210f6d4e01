# CUDA driver module: lockstep-cuda.so, built with --with-cuda.
#
# liblockstep never links CUDA; the core dlopens this module from
# $(driverdir).  The .cu files go through build-aux/nvcc-wrapper.sh so that
# libtool can make .lo objects of them (it appends -fPIC -DPIC, which nvcc
# only takes through -Xcompiler).  Automake has no dependency tracking for
# .cu, so every kernel file depends on the shared headers explicitly.

lk_cuda_headers = \
	backends/cuda/driver.h \
	backends/cuda/device.cuh \
	backends/cuda/launch.cuh \
	backends/cuda/rows.cuh \
	backends/cuda/rows_reg.cuh \
	backends/cuda/elementwise.cuh \
	backends/cuda/gemm.cuh \
	backends/cuda/qgemm.cuh \
	backends/cuda/math.cuh \
	backends/cuda/model.cuh \
	backends/cuda/tc_ptx.cuh \
	backends/cuda/tc/ternary.cuh \
	backends/cuda/tc/wgmma.cuh \
	backends/cuda/tc/wgmma_host.cuh \
	backends/cuda/tc/wgmma_int.cuh \
	backends/cuda/tc/wgmma_mma.cuh \
	backends/cuda/tc/wgmma_ptx.cuh \
	backends/cuda/linear.cuh \
	backends/cuda/loads.cuh \
	backends/cuda/mbarrier.cuh

lk_cuda_kernels = \
	backends/cuda/gemm.cu \
	backends/cuda/sgemm.cu \
	backends/cuda/gemv.cu \
	backends/cuda/reduce.cu \
	backends/cuda/norm.cu \
	backends/cuda/norm_quant.cu \
	backends/cuda/softmax.cu \
	backends/cuda/unary.cu \
	backends/cuda/binary.cu \
	backends/cuda/quant.cu \
	backends/cuda/ternary.cu \
	backends/cuda/int8_gemm.cu \
	backends/cuda/tc/gemm.cu \
	backends/cuda/tc/ternary.cu \
	backends/cuda/tc/wgmma_gemm.cu \
	backends/cuda/tc/wgmma_int8.cu \
	backends/cuda/rope.cu \
	backends/cuda/attention.cu \
	backends/cuda/embedding.cu \
	backends/cuda/set_rows.cu \
	backends/cuda/weights.cu \
	backends/cuda/linear.cu \
	backends/cuda/bitnet.cu \
	backends/cuda/train.cu

EXTRA_DIST += build-aux/nvcc-wrapper.sh backends/cuda/README.md

if LK_HAVE_CUDA
driver_LTLIBRARIES += backends/cuda/lockstep-cuda.la
endif
backends_cuda_lockstep_cuda_la_SOURCES = backends/cuda/driver.c backends/bitnet.c \
	$(lk_cuda_headers) $(lk_cuda_kernels)
backends_cuda_lockstep_cuda_la_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CFLAGS)
backends_cuda_lockstep_cuda_la_LDFLAGS = $(AM_LDFLAGS) -module -avoid-version -shared \
	-no-undefined -export-symbols-regex '^lockstep_driver_entry$$'
backends_cuda_lockstep_cuda_la_LIBADD = $(CUDA_LIBS)

AM_V_NVCC = $(am__v_NVCC_@AM_V@)
am__v_NVCC_ = $(am__v_NVCC_@AM_DEFAULT_V@)
am__v_NVCC_0 = @echo "  NVCC    " $@;
am__v_NVCC_1 =

lk_nvcc_compile = $(LIBTOOL) $(AM_V_lt) --tag=CC --mode=compile \
	$(SHELL) $(top_srcdir)/build-aux/nvcc-wrapper.sh $(NVCC) \
	$(DEFS) $(DEFAULT_INCLUDES) $(AM_CPPFLAGS) $(CPPFLAGS) \
	$(LK_NVCCFLAGS) $(CUDA_ARCH_FLAGS) $(NVCCFLAGS)

.cu.lo:
	$(AM_V_NVCC)$(MKDIR_P) $(@D) && $(lk_nvcc_compile) -c -o $@ $<

$(lk_cuda_kernels:.cu=.lo): $(lk_cuda_headers) numerics/contract.h numerics/scalar.h \
	backends/transcendental.h backends/rope.h backends/bitnet.h backends/train.h \
	include/lockstep/driver.h

# CUDA-specific tests (graph capture, adopted streams, the kernels' own
# paths); built always, a SKIP without a GPU or without --with-cuda.
check_PROGRAMS += tests/test_cuda
TESTS += tests/test_cuda
tests_test_cuda_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CFLAGS) $(lk_cuda_test_defs)
tests_test_cuda_LDADD = liblockstep.la $(CUDA_LIBS)
if LK_HAVE_CUDA
lk_cuda_test_defs = -DLK_CUDA_MODULE_DIR='"$(abs_top_builddir)/backends/cuda/.libs"'
# for tests/local.mk: the uninstalled module joins the tests' driver path
lk_cuda_driver_path = :$(abs_top_builddir)/backends/cuda/.libs
else
lk_cuda_test_defs =
lk_cuda_driver_path =
endif

EXTRA_DIST += scripts/gpu-check.sh

# The tensor-core tier (tc/gemm.cu against backends/ref/mma_model.c); its
# CPU part runs everywhere, the GPU part is a SKIP without an sm_80+ GPU.
check_PROGRAMS += tests/test_tc
TESTS += tests/test_tc
tests_test_tc_CPPFLAGS = $(AM_CPPFLAGS) $(lk_cuda_test_defs)
tests_test_tc_LDADD = liblockstep.la

# The integer GEMMs on tensor cores (tc/ternary.cu) against the reference,
# every kernel variant; a SKIP without a GPU.
check_PROGRAMS += tests/test_tc_ternary
TESTS += tests/test_tc_ternary
tests_test_tc_ternary_CPPFLAGS = $(AM_CPPFLAGS) $(lk_cuda_test_defs)
tests_test_tc_ternary_LDADD = liblockstep.la
