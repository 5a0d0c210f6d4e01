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
  AM_CONDITIONAL([LK_ISA_ARM], [false])

  lk_isa_summary=""
  AS_IF([test "x$lk_isa_avx2" = xyes], [lk_isa_summary="$lk_isa_summary avx2"])
  AS_IF([test "x$lk_isa_avx_vnni" = xyes], [lk_isa_summary="$lk_isa_summary avx-vnni"])
  AS_IF([test "x$lk_isa_avx512" = xyes], [lk_isa_summary="$lk_isa_summary avx512-vnni"])
  AS_IF([test "x$lk_isa_summary" = x],
    [lk_isa_summary="none (threaded reference only)"],
    [lk_isa_summary="${lk_isa_summary# } (chosen at run time)"])
])
