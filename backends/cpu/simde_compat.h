/* Lockstep CPU driver: SIMDe as the emulated ISAs need it (included by
 * simd.h under LK_SIMDE only).
 *
 * - The fused multiply-adds: without FP_FAST_FMAF (no -mfma), SIMDe
 *   computes a * b + c with two roundings.  They are replaced by a
 *   lane-wise fmaf: one rounding, as the instruction (glibc's fmaf is
 *   correctly rounded with or without hardware FMA).  `lockstep check`
 *   shows the difference at once if this is undone.
 * - What SIMDe 0.7.4 (Debian 12) lacks of AVX-512 and AVX-VNNI, built from
 *   SIMDe's own 256-bit forms or lane by lane with the instruction's exact
 *   semantics.  A newer SIMDe that has them keeps its own (each is a macro
 *   there, so the #ifndef sees it). */
#ifndef LK_CPU_SIMDE_COMPAT_H
#define LK_CPU_SIMDE_COMPAT_H

#include <math.h>
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
/* name(a): the low bits of each 32-bit lane (vpmovdw, vpmovdb). */
#define LK_SIMDE_NARROW(name, out_t, elem_t)                             \
    static inline out_t name(simde__m512i a)                             \
    {                                                                    \
        uint32_t v[16];                                                  \
        elem_t r[16];                                                    \
        out_t o;                                                         \
        memcpy(v, &a, sizeof v);                                         \
        for (int i = 0; i < 16; i++)                                     \
            r[i] = (elem_t)v[i];                                         \
        memcpy(&o, r, sizeof o);                                         \
        return o;                                                        \
    }
#ifndef _mm512_cvtepi32_epi16
LK_SIMDE_NARROW(lk_simde_cvtepi32_epi16, simde__m256i, uint16_t)
#define _mm512_cvtepi32_epi16(a) lk_simde_cvtepi32_epi16(a)
#endif
#ifndef _mm512_cvtepi32_epi8
LK_SIMDE_NARROW(lk_simde_cvtepi32_epi8, simde__m128i, uint8_t)
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
/* SIMDe 0.7.4 emulates vmaskmovps as a full 32-byte load and a mask, so
 * it reads past the end of a row where the instruction never does (ASan
 * saw it; at a page end it would fault).  Lane by lane instead. */
static inline simde__m256 lk_simde_maskload256_ps(const float *p, simde__m256i mask)
{
    int32_t m[8];
    float v[8] = {0};
    simde__m256 r;
    memcpy(m, &mask, sizeof m);
    for (int i = 0; i < 8; i++)
        if (m[i] < 0)
            memcpy(&v[i], p + i, sizeof v[i]);
    memcpy(&r, v, sizeof r);
    return r;
}
#undef _mm256_maskload_ps
#define _mm256_maskload_ps(p, mask) lk_simde_maskload256_ps((const float *)(p), (mask))
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

#endif
