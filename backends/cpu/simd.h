/* Lockstep CPU driver: the intrinsics every ISA variant is written in
 * (x86, or AArch64 NEON where the ISA's vec.h defines LK_VEC_ARM), native
 * or emulated.
 *
 * The kernels are compiled twice: natively, with their ISA's -m flags, and,
 * with --enable-emulated-isa, with LK_SIMDE defined and no ISA flags, against
 * SIMDe's portable versions of the same intrinsics (registered as
 * "cpu:<isa>@simde").  Both copies link into one library, so every kernel
 * name goes through LK_CPU_KERNEL, which adds the ISA and "_simde".
 *
 * What SIMDe gets wrong or lacks is mended in simde_compat.h;
 * tests/test_contract.c compares every emulated device with the reference
 * bit for bit. */
#ifndef LK_CPU_SIMD_H
#define LK_CPU_SIMD_H

#include <math.h>
#include <stdint.h>

#if defined(LK_VEC_ARM)
/* AArch64 Advanced SIMD (neon/vec.h defines LK_VEC_ARM): arm_neon.h, or
 * SIMDe's portable NEON, mended in neon/simde_compat.h. */
#if defined(LK_SIMDE)
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/arm/neon.h>

#include "backends/cpu/neon/simde_compat.h"
#define LK_SIMDE_SUFFIX _simde
#else
#include <arm_neon.h>
#define LK_SIMDE_SUFFIX
#endif
#elif defined(LK_SIMDE)
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
#include <simde/x86/f16c.h>
#include <simde/x86/fma.h>

#include "backends/cpu/simde_compat.h"
#define LK_SIMDE_SUFFIX _simde
#else
#include <immintrin.h>
typedef __mmask16 lk_mmask16;
#define LK_SIMDE_SUFFIX
#endif

#define LK_CPU_CAT_(a, b, c, d, e) a##b##c##d##e
#define LK_CPU_CAT(a, b, c, d, e) LK_CPU_CAT_(a, b, c, d, e)
/* lk_cpu_<isa>[_simde]_<name>: LK_VEC_ISA comes from the ISA's vec.h. */
#define LK_CPU_KERNEL(name) LK_CPU_CAT(lk_cpu_, LK_VEC_ISA, LK_SIMDE_SUFFIX, _, name)

/* Natively the vocabulary and the tile kernels are forced inline and their
 * small loops unrolled, so that tiles live in registers.  Against SIMDe,
 * where every intrinsic is a loop over an array, that would take the
 * compiler minutes per file for no gain: the emulated copies are left to
 * the compiler's judgement, and instantiate their tiles at run time
 * (LK_SIMDE_GENERIC). */
#define LK_PRAGMA_(x) _Pragma(#x)
#if defined(__GNUC__) && !defined(LK_SIMDE)
#define LK_INLINE static inline __attribute__((always_inline))
#define LK_UNROLL(n) LK_PRAGMA_(GCC unroll n)
#else
#define LK_INLINE static inline
#define LK_UNROLL(n)
#endif
#if defined(LK_SIMDE)
#define LK_SIMDE_GENERIC 1
#else
#define LK_SIMDE_GENERIC 0
#endif

#if !defined(LK_VEC_ARM)
/* The in-register end of the contract's butterfly (numerics.md section 5)
 * on 8 lanes: for s = 4, 2, 1: lane[l] = lane[l] + lane[l + s]. */
LK_INLINE float lk_x86_butterfly8(__m256 v)
{
    __m128 lo = _mm256_castps256_ps128(v);
    __m128 hi = _mm256_extractf128_ps(v, 1);
    __m128 s4 = _mm_add_ps(lo, hi);                     /* l < 4: l + (l + 4) */
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));  /* l < 2: l + (l + 2) */
    __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)); /* 0 + 1 */
    return _mm_cvtss_f32(s1);
}

/* Rows r[0..8) of an 8 x 8 block become its columns. */
LK_INLINE void lk_x86_transpose8(__m256 r[8])
{
    __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xee);
    __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xee);
    __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xee);
    __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xee);
    r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
    r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
    r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
    r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
    r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
    r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
    r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
    r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

/* 8 elements of f32 (es 4), or of bf16/f16 (es 2, f16 != 0), widened. */
LK_INLINE __m256 lk_x86_load8(const void *p, int es, int f16)
{
    if (es == 4)
        return _mm256_loadu_ps((const float *)p);
    __m128i h = _mm_loadu_si128((const __m128i *)p);
    if (f16)
        return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
#endif /* !LK_VEC_ARM */

#endif
