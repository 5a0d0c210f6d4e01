/* Lockstep CPU driver: the x86 intrinsics every ISA variant is written in,
 * native or emulated.
 *
 * The kernels are compiled twice: natively, with their ISA's -m flags, and,
 * with --enable-emulated-isa, with LK_SIMDE defined and no ISA flags, against
 * SIMDe's portable versions of the same intrinsics (registered as
 * "cpu:<isa>@simde").  Both copies link into one library, so every kernel
 * name goes through LK_CPU_KERNEL, which adds the ISA and "_simde".
 *
 * SIMDe is exact for every intrinsic the kernels use except the fused
 * multiply-adds: without FP_FAST_FMAF it computes a * b + c with two
 * roundings.  They are replaced below by a lane-wise fmaf (one rounding, as
 * the instruction; glibc's fmaf is correctly rounded with or without
 * hardware FMA).  tests/test_contract.c compares every emulated device with
 * the reference bit for bit. */
#ifndef LK_CPU_SIMD_H
#define LK_CPU_SIMD_H

#include <math.h>
#include <stdint.h>

#if defined(LK_SIMDE)
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
#include <simde/x86/f16c.h>
#include <simde/x86/fma.h>
#include <string.h>

#define LK_SIMDE_FMA(name, type, lanes)                                  \
    static inline type name(type a, type b, type c)                     \
    {                                                                    \
        float fa[lanes], fb[lanes], fc[lanes];                           \
        memcpy(fa, &a, sizeof fa);                                       \
        memcpy(fb, &b, sizeof fb);                                       \
        memcpy(fc, &c, sizeof fc);                                       \
        for (int i = 0; i < lanes; i++)                                  \
            fc[i] = fmaf(fa[i], fb[i], fc[i]);                           \
        memcpy(&c, fc, sizeof fc);                                       \
        return c;                                                        \
    }
LK_SIMDE_FMA(lk_simde_fmadd128, simde__m128, 4)
LK_SIMDE_FMA(lk_simde_fmadd256, simde__m256, 8)
LK_SIMDE_FMA(lk_simde_fmadd512, simde__m512, 16)
#undef _mm_fmadd_ps
#undef _mm256_fmadd_ps
#undef _mm512_fmadd_ps
#define _mm_fmadd_ps(a, b, c) lk_simde_fmadd128(a, b, c)
#define _mm256_fmadd_ps(a, b, c) lk_simde_fmadd256(a, b, c)
#define _mm512_fmadd_ps(a, b, c) lk_simde_fmadd512(a, b, c)
/* What SIMDe 0.7.4 (Debian 12) lacks of AVX-512, built from SIMDe's own
 * 256-bit forms or lane by lane with the instruction's exact semantics.
 * A newer SIMDe that has them keeps its own (each is a macro there). */
typedef simde__mmask16 lk_mmask16;
/* name(a): op on each half of a, the halves joined again. */
#define LK_SIMDE_BY_HALVES(name, out_t, out_half_t, in_t, in_half_t, op) \
    static inline out_t name(in_t a)                                     \
    {                                                                    \
        in_half_t h[2];                                                  \
        out_half_t r[2];                                                 \
        out_t o;                                                         \
        memcpy(h, &a, sizeof h);                                         \
        r[0] = op(h[0]);                                                 \
        r[1] = op(h[1]);                                                 \
        memcpy(&o, r, sizeof o);                                         \
        return o;                                                        \
    }
#ifndef _mm512_cvtepi32_ps
LK_SIMDE_BY_HALVES(lk_simde_cvtepi32_ps, simde__m512, simde__m256, simde__m512i,
                   simde__m256i, simde_mm256_cvtepi32_ps)
#define _mm512_cvtepi32_ps(a) lk_simde_cvtepi32_ps(a)
#endif
#ifndef _mm512_cvtps_epi32
LK_SIMDE_BY_HALVES(lk_simde_cvtps_epi32, simde__m512i, simde__m256i, simde__m512,
                   simde__m256, simde_mm256_cvtps_epi32)
#define _mm512_cvtps_epi32(a) lk_simde_cvtps_epi32(a)
#endif
#ifndef _mm512_cvtepu16_epi32
LK_SIMDE_BY_HALVES(lk_simde_cvtepu16_epi32, simde__m512i, simde__m256i, simde__m256i,
                   simde__m128i, simde_mm256_cvtepu16_epi32)
#define _mm512_cvtepu16_epi32(a) lk_simde_cvtepu16_epi32(a)
#endif
#ifndef _mm512_cvtph_ps
LK_SIMDE_BY_HALVES(lk_simde_cvtph_ps, simde__m512, simde__m256, simde__m256i, simde__m128i,
                   simde_mm256_cvtph_ps)
#define _mm512_cvtph_ps(a) lk_simde_cvtph_ps(a)
#endif
#ifndef _mm512_cvtps_ph
#define lk_simde_cvtps_ph_rne(a) simde_mm256_cvtps_ph(a, 0)
LK_SIMDE_BY_HALVES(lk_simde_cvtps_ph, simde__m256i, simde__m128i, simde__m512, simde__m256,
                   lk_simde_cvtps_ph_rne)
#define _mm512_cvtps_ph(a, imm) lk_simde_cvtps_ph(a) /* imm 0 only */
#endif
#ifndef _mm512_cvtepi32_epi16 /* vpmovdw: the low 16 bits of each lane */
static inline simde__m256i lk_simde_cvtepi32_epi16(simde__m512i a)
{
    uint32_t v[16];
    uint16_t r[16];
    memcpy(v, &a, sizeof v);
    for (int i = 0; i < 16; i++)
        r[i] = (uint16_t)v[i];
    simde__m256i out;
    memcpy(&out, r, sizeof out);
    return out;
}
#define _mm512_cvtepi32_epi16(a) lk_simde_cvtepi32_epi16(a)
#endif
#ifndef _mm512_cvtepi32_epi8 /* vpmovdb: the low byte of each lane */
static inline simde__m128i lk_simde_cvtepi32_epi8(simde__m512i a)
{
    uint32_t v[16];
    uint8_t r[16];
    memcpy(v, &a, sizeof v);
    for (int i = 0; i < 16; i++)
        r[i] = (uint8_t)v[i];
    simde__m128i out;
    memcpy(&out, r, sizeof out);
    return out;
}
#define _mm512_cvtepi32_epi8(a) lk_simde_cvtepi32_epi8(a)
#endif
#ifndef _mm512_cvtepu8_epi32
static inline simde__m512i lk_simde_cvtepu8_epi32(simde__m128i a)
{
    uint8_t v[16];
    uint32_t r[16];
    memcpy(v, &a, sizeof v);
    for (int i = 0; i < 16; i++)
        r[i] = v[i];
    simde__m512i out;
    memcpy(&out, r, sizeof out);
    return out;
}
#define _mm512_cvtepu8_epi32(a) lk_simde_cvtepu8_epi32(a)
#endif
#ifndef _mm512_srai_epi32 /* gcc shifts signed integers arithmetically */
static inline simde__m512i lk_simde_srai_epi32(simde__m512i a, int n)
{
    int32_t v[16];
    memcpy(v, &a, sizeof v);
    for (int i = 0; i < 16; i++)
        v[i] = n > 31 ? (v[i] < 0 ? -1 : 0) : v[i] >> n;
    memcpy(&a, v, sizeof v);
    return a;
}
#define _mm512_srai_epi32(a, n) lk_simde_srai_epi32(a, n)
#endif
#ifndef _mm512_mask_loadu_ps /* masked-off lanes are not read */
static inline simde__m512 lk_simde_mask_loadu_ps(simde__m512 src, lk_mmask16 k, const void *p)
{
    float v[16];
    memcpy(v, &src, sizeof v);
    for (int i = 0; i < 16; i++)
        if ((k >> i) & 1)
            memcpy(&v[i], (const float *)p + i, sizeof v[i]);
    memcpy(&src, v, sizeof v);
    return src;
}
#define _mm512_mask_loadu_ps(src, k, p) lk_simde_mask_loadu_ps(src, k, p)
#endif
#ifndef _mm512_mask_storeu_ps
static inline void lk_simde_mask_storeu_ps(void *p, lk_mmask16 k, simde__m512 a)
{
    float v[16];
    memcpy(v, &a, sizeof v);
    for (int i = 0; i < 16; i++)
        if ((k >> i) & 1)
            memcpy((float *)p + i, &v[i], sizeof v[i]);
}
#define _mm512_mask_storeu_ps(p, k, a) lk_simde_mask_storeu_ps(p, k, a)
#endif

/* SIMDe has the AVX-512 VL form of vpdpbusd; the VEX (AVX-VNNI) form
 * computes the same. */
#ifndef _mm256_dpbusd_avx_epi32
#define _mm256_dpbusd_avx_epi32(a, b, c) _mm256_dpbusd_epi32(a, b, c)
#endif
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

#endif
