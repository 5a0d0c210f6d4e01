/* Lockstep CPU driver: SIMDe's NEON as the emulated NEON variants need it
 * (included by simd.h under LK_SIMDE and LK_VEC_ARM only).
 *
 * - vfmaq_f32: without a native FMA SIMDe computes a + b * c with two
 *   roundings; fmla has one.  Lane-wise fmaf instead (glibc's fmaf is
 *   correctly rounded with or without hardware FMA).
 * - What SIMDe 0.7.4 (Debian 12) lacks of A64 NEON: fdiv and fsqrt
 *   (vdivq_f32, vsqrtq_f32: IEEE, correctly rounded, as C's / and sqrtf)
 *   and fcvtns (vcvtnq_s32_f32: ties to even whatever the rounding mode,
 *   NaN to 0, saturating).  A newer SIMDe that has them keeps its own
 *   (each is a macro there, so the #ifndef sees it) except the fma, which
 *   is always replaced.
 * tests/test_contract.c compares cpu:neon@simde and cpu:neon-dotprod@simde
 * with the reference bit for bit; the natively built variants run the
 * same test under qemu-aarch64 (scripts/test-arm.sh). */
#ifndef LK_CPU_NEON_SIMDE_COMPAT_H
#define LK_CPU_NEON_SIMDE_COMPAT_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "numerics/scalar.h"

static inline simde_float32x4_t lk_simde_vfmaq_f32(simde_float32x4_t c, simde_float32x4_t a,
                                                   simde_float32x4_t b)
{
    float fa[4], fb[4], fc[4];
    memcpy(fa, &a, sizeof fa);
    memcpy(fb, &b, sizeof fb);
    memcpy(fc, &c, sizeof fc);
    for (int i = 0; i < 4; i++)
        fc[i] = fmaf(fa[i], fb[i], fc[i]);
    memcpy(&c, fc, sizeof fc);
    return c;
}
#undef vfmaq_f32
#define vfmaq_f32(c, a, b) lk_simde_vfmaq_f32((c), (a), (b))

#ifndef vdivq_f32
static inline simde_float32x4_t lk_simde_vdivq_f32(simde_float32x4_t a, simde_float32x4_t b)
{
    float fa[4], fb[4];
    memcpy(fa, &a, sizeof fa);
    memcpy(fb, &b, sizeof fb);
    for (int i = 0; i < 4; i++)
        fa[i] = fa[i] / fb[i];
    memcpy(&a, fa, sizeof fa);
    return a;
}
#define vdivq_f32(a, b) lk_simde_vdivq_f32((a), (b))
#endif

#ifndef vsqrtq_f32
static inline simde_float32x4_t lk_simde_vsqrtq_f32(simde_float32x4_t a)
{
    float fa[4];
    memcpy(fa, &a, sizeof fa);
    for (int i = 0; i < 4; i++)
        fa[i] = sqrtf(fa[i]);
    memcpy(&a, fa, sizeof fa);
    return a;
}
#define vsqrtq_f32(a) lk_simde_vsqrtq_f32(a)
#endif

#ifndef vcvtnq_s32_f32
static inline simde_int32x4_t lk_simde_vcvtnq_s32_f32(simde_float32x4_t a)
{
    float fa[4];
    int32_t r[4];
    simde_int32x4_t o;
    memcpy(fa, &a, sizeof fa);
    for (int i = 0; i < 4; i++) {
        float x = fa[i];
        if (lk_isnan(x))
            r[i] = 0;
        else if (x >= 0x1p31f)
            r[i] = INT32_MAX;
        else if (x <= -0x1p31f)
            r[i] = INT32_MIN;
        else
            r[i] = (int32_t)lk_rne(x); /* an integer in range: exact */
    }
    memcpy(&o, r, sizeof o);
    return o;
}
#define vcvtnq_s32_f32(a) lk_simde_vcvtnq_s32_f32(a)
#endif

#endif
