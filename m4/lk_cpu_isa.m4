# LK_CPU_ISA: which per-ISA kernel sets of the CPU driver the compiler can
# build.  Each ISA is guarded by a check that compiles (and links) a real
# intrinsic of that ISA with its flags, as libsodium does; the flags go on
# that ISA's convenience library only, never on the rest of the library, so
# liblockstep runs on any x86-64 and picks a variant at run time
# (backends/cpu/isa.c).  The driver itself (threads, dispatch, the threaded
# reference) is built on every architecture.

# LK_ISA_CHECK(NAME, FLAGS, INCLUDES, BODY, VAR): VAR=yes when BODY links
# with FLAGS.
AC_DEFUN([LK_ISA_CHECK], [
  AC_CACHE_CHECK([whether $CC builds $1 intrinsics with $2], [lk_cv_isa_$5], [
    lk_save_CFLAGS=$CFLAGS
    CFLAGS="$CFLAGS $2"
    AC_LINK_IFELSE([AC_LANG_PROGRAM([$3], [$4])],
      [lk_cv_isa_$5=yes], [lk_cv_isa_$5=no])
    CFLAGS=$lk_save_CFLAGS])
  $5=$lk_cv_isa_$5
])

AC_DEFUN([LK_CPU_ISA], [
  AC_REQUIRE([AC_CANONICAL_HOST])
  ISA_AVX2_CFLAGS="-mavx2 -mfma -mf16c"
  ISA_AVX_VNNI_CFLAGS="-mavxvnni -mavx2 -mfma -mf16c"
  ISA_AVX512_CFLAGS="-mavx512f -mavx512bw -mavx512vl -mavx512vnni -mfma -mf16c"
  lk_isa_avx2=no
  lk_isa_avx_vnni=no
  lk_isa_avx512=no
  lk_isa_x86=no
  AS_CASE([$host_cpu], [x86_64|amd64], [lk_isa_x86=yes])
  AS_IF([test "x$lk_isa_x86" = xyes], [
    LK_ISA_CHECK([AVX2/FMA/F16C], [$ISA_AVX2_CFLAGS], [[#include <immintrin.h>
volatile float f[8]; volatile short h[8];]],
      [[__m256 a = _mm256_loadu_ps((const float *)f);
        __m256 b = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h));
        __m256i i = _mm256_madd_epi16(_mm256_castps_si256(a), _mm256_castps_si256(b));
        a = _mm256_fmadd_ps(a, b, _mm256_castsi256_ps(i));
        _mm256_storeu_ps((float *)f, a);]], [lk_isa_avx2])
    LK_ISA_CHECK([AVX-VNNI], [$ISA_AVX_VNNI_CFLAGS], [[#include <immintrin.h>
volatile int v[8];]],
      [[__m256i a = _mm256_loadu_si256((const __m256i *)v);
        a = _mm256_dpbusd_avx_epi32(a, a, a);
        _mm256_storeu_si256((__m256i *)v, a);]], [lk_isa_avx_vnni])
    LK_ISA_CHECK([AVX-512 F/BW/VL/VNNI], [$ISA_AVX512_CFLAGS], [[#include <immintrin.h>
volatile int v[16];]],
      [[__m512i a = _mm512_loadu_si512((const void *)v);
        __mmask64 k = _mm512_cmpgt_epi8_mask(a, a);
        a = _mm512_dpbusd_epi32(a, _mm512_maskz_mov_epi8(k, a), a);
        __m256 h = _mm256_maskz_loadu_ps((__mmask8)1, (const void *)v);
        a = _mm512_add_epi32(a, _mm512_castps_si512(_mm512_cvtph_ps(_mm256_castps_si256(h))));
        _mm512_storeu_si512((void *)v, a);]], [lk_isa_avx512])
    # The AVX-VNNI kernels are the AVX2 ones with vpdpbusd: they need both.
    AS_IF([test "x$lk_isa_avx2" != xyes], [lk_isa_avx_vnni=no])
  ])
  # AArch64: Advanced SIMD is part of the base architecture (no flags);
  # the dot product extension (sdot) is Armv8.2-A DotProd.
  ISA_NEON_CFLAGS=""
  ISA_NEON_DOTPROD_CFLAGS="-march=armv8.2-a+dotprod"
  lk_isa_neon=no
  lk_isa_neon_dotprod=no
  AS_CASE([$host_cpu], [aarch64|arm64], [
    LK_ISA_CHECK([NEON], [$ISA_NEON_CFLAGS], [[#include <arm_neon.h>
volatile float f[4]; volatile unsigned short h[4];]],
      [[float32x4_t a = vld1q_f32((const float *)f);
        float32x4_t b = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const unsigned short *)h)));
        a = vfmaq_f32(a, b, vdivq_f32(a, vsqrtq_f32(b)));
        vst1q_s32((int *)f, vcvtnq_s32_f32(a));]], [lk_isa_neon])
    LK_ISA_CHECK([NEON dotprod], [$ISA_NEON_DOTPROD_CFLAGS], [[#include <arm_neon.h>
volatile int v[4];]],
      [[int32x4_t a = vld1q_s32((const int *)v);
        a = vdotq_s32(a, vreinterpretq_s8_s32(a), vreinterpretq_s8_s32(a));
        vst1q_s32((int *)v, a);]], [lk_isa_neon_dotprod])
    # The dotprod kernels are the NEON ones with sdot: they need both.
    AS_IF([test "x$lk_isa_neon" != xyes], [lk_isa_neon_dotprod=no])
  ])
  AC_SUBST([ISA_NEON_CFLAGS])
  AC_SUBST([ISA_NEON_DOTPROD_CFLAGS])
  AS_IF([test "x$lk_isa_neon" = xyes],
    [AC_DEFINE([LK_HAVE_ISA_NEON], [1], [Define if the NEON kernels are built])])
  AS_IF([test "x$lk_isa_neon_dotprod" = xyes],
    [AC_DEFINE([LK_HAVE_ISA_NEON_DOTPROD], [1], [Define if the NEON dotprod kernels are built])])
  AM_CONDITIONAL([LK_ISA_NEON], [test "x$lk_isa_neon" = xyes])
  # Cross-built for AArch64: `make check` runs every test program under
  # qemu-aarch64 (backends/cpu/local.mk sets LOG_COMPILER), on the CPU
  # model LK_QEMU_CPU (make check LK_QEMU_CPU=cortex-a53: no dotprod) and
  # the target's libraries from LK_QEMU_LD_PREFIX.
  AC_ARG_VAR([QEMU_AARCH64], [qemu-user for AArch64, to run the tests of a cross build])
  AC_ARG_VAR([LK_QEMU_CPU], [qemu CPU model for the tests of a cross build (default: max)])
  AC_ARG_VAR([LK_QEMU_LD_PREFIX], [the target's root for qemu (default: /usr/aarch64-linux-gnu)])
  lk_qemu=no
  AS_IF([test "x$cross_compiling" = xyes && test "x$lk_isa_neon" = xyes], [
    AC_PATH_PROGS([QEMU_AARCH64], [qemu-aarch64 qemu-aarch64-static], [no])
    AS_IF([test "x$QEMU_AARCH64" != xno], [lk_qemu=yes],
      [AC_MSG_WARN([qemu-aarch64 not found: make check cannot run the tests of this cross build (apt-get install qemu-user)])])
  ])
  AS_IF([test "x$LK_QEMU_CPU" = x], [LK_QEMU_CPU=max])
  AS_IF([test "x$LK_QEMU_LD_PREFIX" = x], [LK_QEMU_LD_PREFIX=/usr/$host_alias])
  AM_CONDITIONAL([LK_QEMU], [test "x$lk_qemu" = xyes])
  AM_CONDITIONAL([LK_ISA_NEON_DOTPROD], [test "x$lk_isa_neon_dotprod" = xyes])

  AC_SUBST([ISA_AVX2_CFLAGS])
  AC_SUBST([ISA_AVX_VNNI_CFLAGS])
  AC_SUBST([ISA_AVX512_CFLAGS])

  AS_IF([test "x$lk_isa_avx2" = xyes],
    [AC_DEFINE([LK_HAVE_ISA_AVX2], [1], [Define if the AVX2 kernels are built])])
  AS_IF([test "x$lk_isa_avx_vnni" = xyes],
    [AC_DEFINE([LK_HAVE_ISA_AVX_VNNI], [1], [Define if the AVX-VNNI kernels are built])])
  AS_IF([test "x$lk_isa_avx512" = xyes],
    [AC_DEFINE([LK_HAVE_ISA_AVX512], [1], [Define if the AVX-512 VNNI kernels are built])])
  AC_DEFINE([LK_HAVE_CPU_DRIVER], [1], [Define to build the CPU driver (backends/cpu)])

  AM_CONDITIONAL([LK_ISA_X86], [test "x$lk_isa_x86" = xyes])
  AM_CONDITIONAL([LK_ISA_AVX2], [test "x$lk_isa_avx2" = xyes])
  AM_CONDITIONAL([LK_ISA_AVX_VNNI], [test "x$lk_isa_avx_vnni" = xyes])
  AM_CONDITIONAL([LK_ISA_AVX512], [test "x$lk_isa_avx512" = xyes])
  AM_CONDITIONAL([LK_ISA_ARM], [test "x$lk_isa_neon" = xyes])

  lk_isa_summary=""
  AS_IF([test "x$lk_isa_avx2" = xyes], [lk_isa_summary="$lk_isa_summary avx2"])
  AS_IF([test "x$lk_isa_avx_vnni" = xyes], [lk_isa_summary="$lk_isa_summary avx-vnni"])
  AS_IF([test "x$lk_isa_avx512" = xyes], [lk_isa_summary="$lk_isa_summary avx512-vnni"])
  AS_IF([test "x$lk_isa_neon" = xyes], [lk_isa_summary="$lk_isa_summary neon"])
  AS_IF([test "x$lk_isa_neon_dotprod" = xyes], [lk_isa_summary="$lk_isa_summary neon-dotprod"])
  AS_IF([test "x$lk_isa_summary" = x],
    [lk_isa_summary="none (threaded reference only)"],
    [lk_isa_summary="${lk_isa_summary# } (chosen at run time)"])
])
