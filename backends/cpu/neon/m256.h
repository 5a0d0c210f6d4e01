/* Lockstep CPU driver, NEON: the 8-wide x86 terms that the transposed-B
 * paths of backends/cpu/kernels/gemm.c are written in (__m256,
 * lk_x86_load8, lk_x86_transpose8 and five _mm256_*_ps), on pairs of
 * 128-bit registers, so that the shared kernel compiles unchanged for
 * AArch64.  Each one computes what its x86 namesake does, lane for lane
 * (the fma is fmla, one rounding).  Included by neon/vec.h only: no x86
 * header is ever seen by a NEON translation unit after this point.
 *
 * Cleaner would be vocabulary names in gemm.c (an 8 x 8 transpose and an
 * 8-wide f32 type in each vec.h); until then this shim. */
#ifndef LK_CPU_NEON_M256_H
#define LK_CPU_NEON_M256_H

typedef struct lk_neon_f8 {
    float32x4_t lo, hi; /* lanes 0..3, 4..7 */
} lk_neon_f8;

LK_INLINE lk_neon_f8 lk_neon_f8_zero(void)
{
    lk_neon_f8 r = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    return r;
}
LK_INLINE lk_neon_f8 lk_neon_f8_load(const float *p)
{
    lk_neon_f8 r = {vld1q_f32(p), vld1q_f32(p + 4)};
    return r;
}
LK_INLINE void lk_neon_f8_store(float *p, lk_neon_f8 v)
{
    vst1q_f32(p, v.lo);
    vst1q_f32(p + 4, v.hi);
}
LK_INLINE lk_neon_f8 lk_neon_f8_bcast(const float *p)
{
    float32x4_t b = vld1q_dup_f32(p);
    lk_neon_f8 r = {b, b};
    return r;
}
LK_INLINE lk_neon_f8 lk_neon_f8_add(lk_neon_f8 a, lk_neon_f8 b)
{
    lk_neon_f8 r = {vaddq_f32(a.lo, b.lo), vaddq_f32(a.hi, b.hi)};
    return r;
}
/* a * b + c, one rounding (the operand order of _mm256_fmadd_ps) */
LK_INLINE lk_neon_f8 lk_neon_f8_fma(lk_neon_f8 a, lk_neon_f8 b, lk_neon_f8 c)
{
    lk_neon_f8 r = {vfmaq_f32(c.lo, a.lo, b.lo), vfmaq_f32(c.hi, a.hi, b.hi)};
    return r;
}

/* 8 elements of f32 (es 4), or of bf16/f16 (es 2, f16 != 0), widened. */
LK_INLINE lk_neon_f8 lk_neon_f8_load8(const void *p, int es, int f16)
{
    if (es == 4)
        return lk_neon_f8_load((const float *)p);
    uint16x8_t h = vld1q_u16((const uint16_t *)p);
    lk_neon_f8 r;
    if (f16) {
        r.lo = vcvt_f32_f16(vreinterpret_f16_u16(vget_low_u16(h)));
        r.hi = vcvt_f32_f16(vreinterpret_f16_u16(vget_high_u16(h)));
    } else {
        r.lo = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16));
        r.hi = vreinterpretq_f32_u32(vshll_n_u16(vget_high_u16(h), 16));
    }
    return r;
}

/* Columns of the 4 x 4 block a[0..3] (trn1/trn2 on 32-bit, then 64-bit
 * lanes). */
LK_INLINE void lk_neon_transpose4(float32x4_t a0, float32x4_t a1, float32x4_t a2, float32x4_t a3,
                                  float32x4_t c[4])
{
    float64x2_t t0 = vreinterpretq_f64_f32(vtrn1q_f32(a0, a1)); /* a00 a10 a02 a12 */
    float64x2_t t1 = vreinterpretq_f64_f32(vtrn2q_f32(a0, a1)); /* a01 a11 a03 a13 */
    float64x2_t t2 = vreinterpretq_f64_f32(vtrn1q_f32(a2, a3)); /* a20 a30 a22 a32 */
    float64x2_t t3 = vreinterpretq_f64_f32(vtrn2q_f32(a2, a3)); /* a21 a31 a23 a33 */
    c[0] = vreinterpretq_f32_f64(vtrn1q_f64(t0, t2));
    c[1] = vreinterpretq_f32_f64(vtrn1q_f64(t1, t3));
    c[2] = vreinterpretq_f32_f64(vtrn2q_f64(t0, t2));
    c[3] = vreinterpretq_f32_f64(vtrn2q_f64(t1, t3));
}

/* Rows r[0..8) of an 8 x 8 block become its columns: four 4 x 4 blocks,
 * each transposed, the off-diagonal two swapped. */
LK_INLINE void lk_neon_transpose8(lk_neon_f8 r[8])
{
    float32x4_t tl[4], tr[4], bl[4], br[4];
    lk_neon_transpose4(r[0].lo, r[1].lo, r[2].lo, r[3].lo, tl);
    lk_neon_transpose4(r[0].hi, r[1].hi, r[2].hi, r[3].hi, tr);
    lk_neon_transpose4(r[4].lo, r[5].lo, r[6].lo, r[7].lo, bl);
    lk_neon_transpose4(r[4].hi, r[5].hi, r[6].hi, r[7].hi, br);
    for (int i = 0; i < 4; i++) {
        r[i].lo = tl[i];
        r[i].hi = bl[i];
        r[4 + i].lo = tr[i];
        r[4 + i].hi = br[i];
    }
}

#define __m256 lk_neon_f8
#define _mm256_setzero_ps lk_neon_f8_zero
#define _mm256_loadu_ps lk_neon_f8_load
#define _mm256_storeu_ps lk_neon_f8_store
#define _mm256_broadcast_ss lk_neon_f8_bcast
#define _mm256_add_ps lk_neon_f8_add
#define _mm256_fmadd_ps lk_neon_f8_fma
#define lk_x86_load8 lk_neon_f8_load8
#define lk_x86_transpose8 lk_neon_transpose8

#endif
