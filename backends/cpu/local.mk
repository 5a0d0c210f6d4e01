# The CPU driver: threads, ISA selection, and the x86 kernels.
#
# The kernels are written once (backends/cpu/kernels/*.c) against a vector
# vocabulary that each ISA directory supplies (backends/cpu/<isa>/vec.h);
# each ISA directory holds, under the reference's file names, the files
# that compile them with it.  Each ISA is a convenience library with its
# own -m flags (only those files get them), and with --enable-emulated-isa
# the same files are compiled once more against SIMDe with no ISA flags.
noinst_HEADERS += \
	backends/cpu/isa.h backends/cpu/threads.h \
	backends/cpu/variants.h backends/cpu/simd.h backends/cpu/simde_compat.h \
	backends/cpu/avx2/vec.h backends/cpu/avx_vnni/vec.h backends/cpu/avx512/vec.h \
	backends/cpu/neon/vec.h backends/cpu/neon/m256.h backends/cpu/neon/simde_compat.h \
	backends/cpu/neon_dotprod/vec.h \
	backends/cpu/kernels/elem.h backends/cpu/kernels/lanes.h backends/cpu/kernels/stream.h \
	backends/cpu/kernels/qgemm.h backends/cpu/kernels/t2.h \
	backends/cpu/kernels/transcendental.h \
	backends/cpu/kernels/prepared.h backends/cpu/kernels/quant_row.h
EXTRA_DIST += \
	backends/cpu/kernels/gemm.c backends/cpu/kernels/reduce.c \
	backends/cpu/kernels/softmax.c backends/cpu/kernels/unary.c \
	backends/cpu/kernels/norm.c backends/cpu/kernels/binary.c \
	backends/cpu/kernels/quant.c backends/cpu/kernels/ternary.c \
	backends/cpu/kernels/int8_gemm.c backends/cpu/kernels/attention.c

noinst_LTLIBRARIES += backends/cpu/libcpu.la
backends_cpu_libcpu_la_CFLAGS = $(AM_CFLAGS) $(HWLOC_CFLAGS)
backends_cpu_libcpu_la_SOURCES = \
	backends/cpu/driver.c backends/cpu/isa.c backends/cpu/threads.c \
	backends/cpu/variants.c backends/cpu/ref_kernels.c
liblockstep_la_LIBADD += backends/cpu/libcpu.la

# Per-ISA kernel files: the same names in every ISA directory.
lk_cpu_avx2_files = \
	backends/cpu/avx2/gemm.c backends/cpu/avx2/reduce.c \
	backends/cpu/avx2/softmax.c backends/cpu/avx2/unary.c \
	backends/cpu/avx2/norm.c backends/cpu/avx2/binary.c \
	backends/cpu/avx2/quant.c backends/cpu/avx2/ternary.c \
	backends/cpu/avx2/int8_gemm.c backends/cpu/avx2/attention.c
lk_cpu_avx_vnni_files = backends/cpu/avx_vnni/ternary.c backends/cpu/avx_vnni/int8_gemm.c
lk_cpu_avx512_files = \
	backends/cpu/avx512/gemm.c backends/cpu/avx512/reduce.c \
	backends/cpu/avx512/softmax.c backends/cpu/avx512/unary.c \
	backends/cpu/avx512/norm.c backends/cpu/avx512/binary.c \
	backends/cpu/avx512/quant.c backends/cpu/avx512/ternary.c \
	backends/cpu/avx512/int8_gemm.c backends/cpu/avx512/attention.c

if LK_ISA_AVX2
noinst_LTLIBRARIES += backends/cpu/libcpu_avx2.la
backends_cpu_libcpu_avx2_la_CFLAGS = $(AM_CFLAGS) $(ISA_AVX2_CFLAGS)
backends_cpu_libcpu_avx2_la_SOURCES = $(lk_cpu_avx2_files)
liblockstep_la_LIBADD += backends/cpu/libcpu_avx2.la
endif
if LK_ISA_AVX_VNNI
noinst_LTLIBRARIES += backends/cpu/libcpu_avx_vnni.la
backends_cpu_libcpu_avx_vnni_la_CFLAGS = $(AM_CFLAGS) $(ISA_AVX_VNNI_CFLAGS)
backends_cpu_libcpu_avx_vnni_la_SOURCES = $(lk_cpu_avx_vnni_files)
liblockstep_la_LIBADD += backends/cpu/libcpu_avx_vnni.la
endif
if LK_ISA_AVX512
noinst_LTLIBRARIES += backends/cpu/libcpu_avx512.la
backends_cpu_libcpu_avx512_la_CFLAGS = $(AM_CFLAGS) $(ISA_AVX512_CFLAGS)
backends_cpu_libcpu_avx512_la_SOURCES = $(lk_cpu_avx512_files)
liblockstep_la_LIBADD += backends/cpu/libcpu_avx512.la
endif

if LK_EMULATED_ISA
lk_cpu_simde_cppflags = $(AM_CPPFLAGS) -DLK_SIMDE $(SIMDE_CPPFLAGS)
# SIMDe's 512-bit types are plain 64-byte vectors: gcc notes that their ABI
# differs without -mavx512f, which only matters across a call boundary
# (the kernels' entry points take pointers).
# -fwrapv: SIMDe's portable integer lanes are C signed arithmetic, which
# wraps on the hardware but is undefined in C (UBSan reports it).
lk_cpu_simde_cflags = $(AM_CFLAGS) -Wno-psabi -fwrapv
noinst_LTLIBRARIES += backends/cpu/libcpu_avx2_simde.la \
	backends/cpu/libcpu_avx_vnni_simde.la backends/cpu/libcpu_avx512_simde.la
backends_cpu_libcpu_avx2_simde_la_CPPFLAGS = $(lk_cpu_simde_cppflags)
backends_cpu_libcpu_avx2_simde_la_CFLAGS = $(lk_cpu_simde_cflags)
backends_cpu_libcpu_avx2_simde_la_SOURCES = $(lk_cpu_avx2_files)
backends_cpu_libcpu_avx_vnni_simde_la_CPPFLAGS = $(lk_cpu_simde_cppflags)
backends_cpu_libcpu_avx_vnni_simde_la_CFLAGS = $(lk_cpu_simde_cflags)
backends_cpu_libcpu_avx_vnni_simde_la_SOURCES = $(lk_cpu_avx_vnni_files)
backends_cpu_libcpu_avx512_simde_la_CPPFLAGS = $(lk_cpu_simde_cppflags)
backends_cpu_libcpu_avx512_simde_la_CFLAGS = $(lk_cpu_simde_cflags)
backends_cpu_libcpu_avx512_simde_la_SOURCES = $(lk_cpu_avx512_files)
liblockstep_la_LIBADD += backends/cpu/libcpu_avx2_simde.la \
	backends/cpu/libcpu_avx_vnni_simde.la backends/cpu/libcpu_avx512_simde.la
endif

# AArch64: the same kernels on NEON, and with sdot for the
# integer GEMMs; with --enable-emulated-isa also against SIMDe's NEON, on
# any host, as cpu:neon@simde and cpu:neon-dotprod@simde.
lk_cpu_neon_files = \
	backends/cpu/neon/gemm.c backends/cpu/neon/reduce.c \
	backends/cpu/neon/softmax.c backends/cpu/neon/unary.c \
	backends/cpu/neon/norm.c backends/cpu/neon/binary.c \
	backends/cpu/neon/quant.c backends/cpu/neon/ternary.c \
	backends/cpu/neon/int8_gemm.c backends/cpu/neon/attention.c
lk_cpu_neon_dotprod_files = \
	backends/cpu/neon_dotprod/ternary.c backends/cpu/neon_dotprod/int8_gemm.c
if LK_ISA_NEON
noinst_LTLIBRARIES += backends/cpu/libcpu_neon.la
backends_cpu_libcpu_neon_la_CFLAGS = $(AM_CFLAGS) $(ISA_NEON_CFLAGS)
backends_cpu_libcpu_neon_la_SOURCES = $(lk_cpu_neon_files)
liblockstep_la_LIBADD += backends/cpu/libcpu_neon.la
endif
if LK_ISA_NEON_DOTPROD
noinst_LTLIBRARIES += backends/cpu/libcpu_neon_dotprod.la
backends_cpu_libcpu_neon_dotprod_la_CFLAGS = $(AM_CFLAGS) $(ISA_NEON_DOTPROD_CFLAGS)
backends_cpu_libcpu_neon_dotprod_la_SOURCES = $(lk_cpu_neon_dotprod_files)
liblockstep_la_LIBADD += backends/cpu/libcpu_neon_dotprod.la
endif
if LK_EMULATED_ISA
noinst_LTLIBRARIES += backends/cpu/libcpu_neon_simde.la \
	backends/cpu/libcpu_neon_dotprod_simde.la
backends_cpu_libcpu_neon_simde_la_CPPFLAGS = $(lk_cpu_simde_cppflags)
backends_cpu_libcpu_neon_simde_la_CFLAGS = $(lk_cpu_simde_cflags)
backends_cpu_libcpu_neon_simde_la_SOURCES = $(lk_cpu_neon_files)
backends_cpu_libcpu_neon_dotprod_simde_la_CPPFLAGS = $(lk_cpu_simde_cppflags)
backends_cpu_libcpu_neon_dotprod_simde_la_CFLAGS = $(lk_cpu_simde_cflags)
backends_cpu_libcpu_neon_dotprod_simde_la_SOURCES = $(lk_cpu_neon_dotprod_files)
liblockstep_la_LIBADD += backends/cpu/libcpu_neon_simde.la \
	backends/cpu/libcpu_neon_dotprod_simde.la
endif

# A cross build for AArch64 runs its tests under qemu-user: libtool's
# execute mode swaps each uninstalled program's wrapper script for the
# binary and sets the library path, which the target's loader (under
# QEMU_LD_PREFIX) then honours.
EXTRA_DIST += scripts/test-arm.sh scripts/arm-insns.sh scripts/arm-insns/insn_count.c \
	scripts/arm-insns/opcount.c
# Shell tests (tests/*.sh) run in the host's shell and start the programs
# they test through LOCKSTEP_RUN (empty natively).  qemu hands its
# environment to the program, so a test sees LK_TEST_EMULATOR there.
if LK_QEMU
lk_qemu_run = $(LIBTOOL) --mode=execute env QEMU_CPU='$(LK_QEMU_CPU)' \
	QEMU_LD_PREFIX='$(LK_QEMU_LD_PREFIX)' LK_TEST_EMULATOR=qemu-user $(QEMU_AARCH64)
LOG_COMPILER = $(lk_qemu_run)
SH_LOG_COMPILER = env LOCKSTEP_RUN="$(lk_qemu_run)" $(SHELL)
else
SH_LOG_COMPILER = $(SHELL)
endif

# The driver's own paths (large shapes, thread counts, environment), on
# every CPU device against the reference.
check_PROGRAMS += tests/test_cpu_threads
TESTS += tests/test_cpu_threads
tests_test_cpu_threads_LDADD = liblockstep.la
